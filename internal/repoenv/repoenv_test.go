package repoenv

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNoFilesNoEnvironment(t *testing.T) {
	assert.Nil(t, Parse(nil))
	assert.Nil(t, Parse(map[string][]byte{"README.md": []byte("x")}))
}

// TestDevcontainer: JSON with comments and trailing commas; the used
// properties read, the others listed as ignored; lifecycle commands in the
// spec's order, each form.
func TestDevcontainer(t *testing.T) {
	e := Parse(map[string][]byte{DevcontainerFile: []byte(`{
	// the toolchain
	"name": "dev",
	"image": "mcr.microsoft.com/devcontainers/go:1-1.22-bookworm",
	"features": {"ghcr.io/devcontainers/features/node:1": {}},
	"containerEnv": {"GOFLAGS": "-mod=mod", "EMPTY": ""},
	"remoteEnv": {"NODE_ENV": "test", "UNSET": null},
	"postCreateCommand": "npm ci",
	"onCreateCommand": ["go", "mod", "download"],
	"updateContentCommand": {"b": "echo b", "a": ["echo", "a"]},
	"forwardPorts": [3000, 8080, 3000],
}`)})
	require.NotNil(t, e)
	assert.Equal(t, []string{DevcontainerFile}, e.Sources)
	assert.Equal(t, "mcr.microsoft.com/devcontainers/go:1-1.22-bookworm", e.Image)
	assert.Equal(t, map[string]string{"GOFLAGS": "-mod=mod", "EMPTY": "", "NODE_ENV": "test"}, e.Env)
	assert.Equal(t, [][]string{{"go", "mod", "download"}, {"echo", "a"}, {"sh", "-c", "echo b"}, {"sh", "-c", "npm ci"}}, e.Setup)
	assert.Equal(t, []int{3000, 8080}, e.ForwardPorts)
	assert.Equal(t, []string{"features", "name"}, e.Ignored)
	assert.Empty(t, e.Problems)
}

// TestOverrideWins: .sandboxcore.yaml's setup and lockfiles replace the
// devcontainer's, its env is merged over it.
func TestOverrideWins(t *testing.T) {
	e := Parse(map[string][]byte{
		DevcontainerFile: []byte(`{"containerEnv": {"A": "dev", "B": "dev"}, "postCreateCommand": "make"}`),
		OverrideFile:     []byte("setup:\n  - npm ci\n  - npm run build\nenv:\n  B: yaml\n  C: yaml\nlockfiles: [package-lock.json, sub/go.sum]\n"),
	})
	require.NotNil(t, e)
	assert.Equal(t, []string{DevcontainerFile, OverrideFile}, e.Sources)
	assert.Equal(t, map[string]string{"A": "dev", "B": "yaml", "C": "yaml"}, e.Env)
	assert.Equal(t, [][]string{{"sh", "-c", "npm ci"}, {"sh", "-c", "npm run build"}}, e.Setup)
	assert.Equal(t, []string{"package-lock.json", "sub/go.sum"}, e.Lockfiles)
	assert.Empty(t, e.Problems)

	e = Parse(map[string][]byte{OverrideFile: []byte("setup: make deps\n")})
	assert.Equal(t, [][]string{{"sh", "-c", "make deps"}}, e.Setup)
}

// TestHostileInput: every refusal is a problem, nothing fails, and the
// refused values are not used.
func TestHostileInput(t *testing.T) {
	for name, tc := range map[string]struct {
		files   map[string][]byte
		problem string
		check   func(t *testing.T, e map[string]string)
	}{
		"unknown yaml field": {files: map[string][]byte{OverrideFile: []byte("setup: x\nrun_as_root: true\n")}, problem: "field run_as_root not found"},
		"duplicate yaml key": {files: map[string][]byte{OverrideFile: []byte("setup: a\nsetup: b\n")}, problem: "already defined"},
		"yaml not a map":     {files: map[string][]byte{OverrideFile: []byte("- a\n")}, problem: OverrideFile},
		"duplicate json key": {files: map[string][]byte{DevcontainerFile: []byte(`{"image": "a", "image": "b"}`)}, problem: `duplicate key "image"`},
		"broken json":        {files: map[string][]byte{DevcontainerFile: []byte(`{"image": `)}, problem: DevcontainerFile},
		"too large":          {files: map[string][]byte{OverrideFile: []byte("env:\n  A: " + strings.Repeat("x", MaxFileBytes) + "\n")}, problem: "not read"},
		"host env":           {files: map[string][]byte{DevcontainerFile: []byte(`{"containerEnv": {"TOKEN": "${localEnv:GITHUB_TOKEN}"}}`)}, problem: "substitution"},
		"reserved name":      {files: map[string][]byte{OverrideFile: []byte("env:\n  HTTPS_PROXY: http://evil:1\n  GOMODCACHE: /tmp/x\n")}, problem: "set by the worker"},
		"bad name":           {files: map[string][]byte{OverrideFile: []byte("env:\n  \"A=B\": x\n")}, problem: "not a variable name"},
		"long value":         {files: map[string][]byte{OverrideFile: []byte("env:\n  A: " + strings.Repeat("x", MaxValueBytes+1) + "\n")}, problem: "more than 4096"},
		"bad image":          {files: map[string][]byte{OverrideFile: []byte("image: \"--privileged\"\n")}, problem: "not an image reference"},
		"escaping lockfile":  {files: map[string][]byte{OverrideFile: []byte("lockfiles: [../../etc/passwd, /etc/shadow, a/../b]\n")}, problem: "not a clean relative path"},
		"empty setup":        {files: map[string][]byte{OverrideFile: []byte("setup: \"  \"\n")}, problem: "an empty command"},
		"bad port":           {files: map[string][]byte{DevcontainerFile: []byte(`{"forwardPorts": ["db:5432", 0, 70000]}`)}, problem: "not a port"},
		"nested command":     {files: map[string][]byte{DevcontainerFile: []byte(`{"postCreateCommand": {"a": {"b": "c"}}}`)}, problem: "want a string or an array"},
	} {
		t.Run(name, func(t *testing.T) {
			e := Parse(tc.files)
			require.NotNil(t, e)
			require.NotEmpty(t, e.Problems)
			assert.Contains(t, strings.Join(e.Problems, "\n"), tc.problem)
			for k, v := range e.Env {
				assert.NotContains(t, v, "${", k)
				assert.NotEqual(t, "HTTPS_PROXY", k)
			}
			assert.Empty(t, e.Lockfiles)
			assert.Empty(t, e.ForwardPorts)
			assert.Empty(t, e.Image)
			for _, p := range e.Problems {
				assert.LessOrEqual(t, len(p), 400, "a problem quotes the file briefly")
			}
		})
	}
}

func TestLimits(t *testing.T) {
	var b strings.Builder
	b.WriteString("env:\n")
	for i := 0; i < MaxEnv+5; i++ {
		b.WriteString("  V" + strings.Repeat("X", i%3) + string(rune('A'+i%26)) + string(rune('A'+i/26)) + ": v\n")
	}
	e := Parse(map[string][]byte{OverrideFile: []byte(b.String())})
	assert.Len(t, e.Env, MaxEnv)
	assert.Contains(t, strings.Join(e.Problems, "\n"), "more than 64 variables")
}

// TestPrepared: prepared paths are clean relative paths outside .git, used
// only with lockfiles.
func TestPrepared(t *testing.T) {
	e := Parse(map[string][]byte{OverrideFile: []byte("setup: npm ci\nlockfiles: [package-lock.json]\nprepared: [node_modules, web/node_modules, node_modules, ../up, /abs, .git/x, a/.git, .]\n")})
	require.NotNil(t, e)
	assert.Equal(t, []string{"node_modules", "web/node_modules"}, e.Prepared)
	assert.Len(t, e.Problems, 5, "%q", e.Problems)

	e = Parse(map[string][]byte{OverrideFile: []byte("setup: npm ci\nprepared: [node_modules]\n")})
	assert.Nil(t, e.Prepared)
	require.Len(t, e.Problems, 1)
	assert.Contains(t, e.Problems[0], "without lockfiles")
}

// TestYAMLProblemIsOneReadableLine: a decoding error names the field and
// line, on one line, without Go type names.
func TestYAMLProblemIsOneReadableLine(t *testing.T) {
	e := Parse(map[string][]byte{OverrideFile: []byte("setup: make\nbogus_field: 1\nother: 2\n")})
	require.Len(t, e.Problems, 1)
	assert.Equal(t, ".sandboxcore.yaml: line 2: field bogus_field not found; line 3: field other not found (the file is not used)", e.Problems[0])
}
