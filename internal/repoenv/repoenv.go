// Package repoenv reads a repository's own description of the environment
// its commands need (docs/RUNTIMES.md "Repository environment"): the subset
// of .devcontainer/devcontainer.json that matters to an agent (image,
// containerEnv, remoteEnv, the onCreate/updateContent/postCreate commands,
// forwardPorts) and the .sandboxcore.yaml override (setup, env, lockfiles,
// image).
//
// The files come from the repository, so nothing in them is trusted: Parse
// is pure, bounds every size, refuses duplicate keys, unknown
// .sandboxcore.yaml fields, variable names the worker owns and values that
// would read the host's environment, and reports each refusal as a line of
// Problems instead of failing: a bad file never fails an acquire.
package repoenv

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/tailscale/hujson"
	yaml "go.yaml.in/yaml/v3"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// The files Parse reads, in order of precedence (a later one wins).
const (
	DevcontainerFile = ".devcontainer/devcontainer.json"
	OverrideFile     = ".sandboxcore.yaml"
)

// Files lists the paths Parse reads, in order of precedence.
var Files = []string{DevcontainerFile, OverrideFile}

// Limits of what Parse accepts; beyond them the item is left out with a
// problem.
const (
	// MaxFileBytes bounds each file.
	MaxFileBytes = 64 << 10
	// MaxEnv bounds the variables; MaxValueBytes each value.
	MaxEnv        = 64
	MaxValueBytes = 4096
	// MaxSetup bounds the setup commands; MaxCommandBytes each command.
	MaxSetup        = 16
	MaxCommandBytes = 8 << 10
	// MaxLockfiles bounds the lockfiles; MaxPorts the forwarded ports;
	// MaxPrepared the prepared paths.
	MaxLockfiles = 32
	MaxPorts     = 32
	MaxPrepared  = 8
)

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)

// imageRef is a container image reference: [registry/]path[:tag][@digest].
var imageRef = regexp.MustCompile(`^[a-z0-9]+([._-][a-z0-9]+)*(:[0-9]+)?(/[a-z0-9]+([._/-][a-z0-9]+)*)*(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[a-f0-9]{64})?$`)

// reserved are the variables the worker sets itself (home, proxy, git
// identity, dependency caches): a repository cannot change them.
var reserved = map[string]bool{
	"HOME": true, "HTTP_PROXY": true, "HTTPS_PROXY": true, "ALL_PROXY": true, "NO_PROXY": true,
	"http_proxy": true, "https_proxy": true, "all_proxy": true, "no_proxy": true,
	"GIT_AUTHOR_NAME": true, "GIT_AUTHOR_EMAIL": true, "GIT_COMMITTER_NAME": true, "GIT_COMMITTER_EMAIL": true,
	"GOMODCACHE": true, "GOCACHE": true, "npm_config_cache": true, "YARN_CACHE_FOLDER": true,
	"PIP_CACHE_DIR": true, "CARGO_HOME": true, "MAVEN_OPTS": true, "GRADLE_USER_HOME": true,
}

// devcontainerUsed are the devcontainer.json properties Parse reads.
var devcontainerUsed = map[string]bool{
	"image": true, "containerEnv": true, "remoteEnv": true, "onCreateCommand": true,
	"updateContentCommand": true, "postCreateCommand": true, "forwardPorts": true,
}

// override is .sandboxcore.yaml.
type override struct {
	Setup     yaml.Node         `yaml:"setup"`
	Env       map[string]string `yaml:"env"`
	Lockfiles []string          `yaml:"lockfiles"`
	Prepared  []string          `yaml:"prepared"`
	Image     string            `yaml:"image"`
}

// Parse returns the environment files describe (files maps a path of Files
// to its content; a missing path is no file), or nil when there is none.
// It never fails: what it refuses is named in Problems.
func Parse(files map[string][]byte) *sandboxapi.RepoEnvironment {
	e := &sandboxapi.RepoEnvironment{Sources: []string{}}
	b := builder{e: e, env: map[string]string{}}
	for _, f := range Files {
		data, ok := files[f]
		if !ok {
			continue
		}
		e.Sources = append(e.Sources, f)
		if len(data) > MaxFileBytes {
			b.problem("%s: %d bytes, more than %d: not read", f, len(data), MaxFileBytes)
			continue
		}
		switch f {
		case DevcontainerFile:
			b.devcontainer(data)
		case OverrideFile:
			b.override(data)
		}
	}
	if len(e.Sources) == 0 {
		return nil
	}
	if len(b.env) > 0 {
		e.Env = b.env
	}
	slices.Sort(e.Ignored)
	return e
}

type builder struct {
	e   *sandboxapi.RepoEnvironment
	env map[string]string
}

func (b *builder) problem(format string, args ...any) {
	b.e.Problems = append(b.e.Problems, fmt.Sprintf(format, args...))
}

// devcontainer reads the used properties of devcontainer.json (JSON with
// comments and trailing commas).
func (b *builder) devcontainer(data []byte) {
	std, err := hujson.Standardize(bytes.Clone(data))
	if err != nil {
		b.problem("%s: %s", DevcontainerFile, clip(err.Error()))
		return
	}
	var props map[string]json.RawMessage
	if err := decodeStrict(std, &props); err != nil {
		b.problem("%s: %s", DevcontainerFile, clip(err.Error()))
		return
	}
	for _, k := range slices.Sorted(maps.Keys(props)) {
		if !devcontainerUsed[k] {
			b.e.Ignored = append(b.e.Ignored, clip(k))
		}
	}
	where := func(k string) string { return DevcontainerFile + " " + k }
	if raw, ok := props["image"]; ok {
		var img string
		if json.Unmarshal(raw, &img) != nil {
			b.problem("%s: want a string", where("image"))
		} else {
			b.image(where("image"), img)
		}
	}
	for _, k := range []string{"containerEnv", "remoteEnv"} {
		raw, ok := props[k]
		if !ok {
			continue
		}
		var env map[string]*string
		if err := decodeStrict(raw, &env); err != nil {
			b.problem("%s: want an object of strings", where(k))
			continue
		}
		for _, name := range slices.Sorted(maps.Keys(env)) {
			if env[name] == nil { // remoteEnv null unsets: nothing to set here
				continue
			}
			b.setEnv(where(k), name, *env[name])
		}
	}
	for _, k := range []string{"onCreateCommand", "updateContentCommand", "postCreateCommand"} {
		if raw, ok := props[k]; ok {
			b.lifecycleCommand(where(k), raw)
		}
	}
	if raw, ok := props["forwardPorts"]; ok {
		var ports []json.RawMessage
		if json.Unmarshal(raw, &ports) != nil {
			b.problem("%s: want an array", where("forwardPorts"))
		}
		for _, p := range ports {
			var n int
			if json.Unmarshal(p, &n) != nil || n < 1 || n > 65535 {
				b.problem("%s: %s is not a port of this workspace (1–65535; host:port forms are not used)", where("forwardPorts"), clip(string(p)))
				continue
			}
			if len(b.e.ForwardPorts) >= MaxPorts {
				b.problem("%s: more than %d ports", where("forwardPorts"), MaxPorts)
				break
			}
			if !slices.Contains(b.e.ForwardPorts, n) {
				b.e.ForwardPorts = append(b.e.ForwardPorts, n)
			}
		}
	}
}

// lifecycleCommand adds a devcontainer lifecycle command: a string (run by
// sh -c), an array (an argv) or an object of those (run one after the
// other in key order; the devcontainer spec runs them in parallel).
func (b *builder) lifecycleCommand(where string, raw json.RawMessage) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		b.addSetup(where, []string{"sh", "-c", s})
		return
	}
	var argv []string
	if json.Unmarshal(raw, &argv) == nil {
		b.addSetup(where, argv)
		return
	}
	var named map[string]json.RawMessage
	if decodeStrict(raw, &named) == nil {
		for _, k := range slices.Sorted(maps.Keys(named)) {
			var v json.RawMessage = named[k]
			if bytes.HasPrefix(bytes.TrimSpace(v), []byte("{")) {
				b.problem("%s.%s: want a string or an array", where, clip(k))
				continue
			}
			b.lifecycleCommand(where+"."+clip(k), v)
		}
		return
	}
	b.problem("%s: want a string, an array or an object", where)
}

// override reads .sandboxcore.yaml strictly: unknown fields and duplicate
// keys are problems, and then nothing of the file is used.
func (b *builder) override(data []byte) {
	var o override
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&o); err != nil && !errors.Is(err, io.EOF) {
		b.problem("%s: %s (the file is not used)", OverrideFile, yamlError(err))
		return
	}
	if o.Image != "" {
		b.image(OverrideFile+" image", o.Image)
	}
	for _, name := range slices.Sorted(maps.Keys(o.Env)) {
		b.setEnv(OverrideFile+" env", name, o.Env[name])
	}
	switch o.Setup.Kind {
	case 0: // absent: the devcontainer's commands stay
	case yaml.ScalarNode:
		b.e.Setup = nil
		b.addSetup(OverrideFile+" setup", []string{"sh", "-c", o.Setup.Value})
	case yaml.SequenceNode:
		b.e.Setup = nil
		for _, n := range o.Setup.Content {
			if n.Kind != yaml.ScalarNode {
				b.problem("%s setup: each entry must be a string (a shell command)", OverrideFile)
				continue
			}
			b.addSetup(OverrideFile+" setup", []string{"sh", "-c", n.Value})
		}
	default:
		b.problem("%s setup: want a string or a list of strings", OverrideFile)
	}
	b.e.Lockfiles = b.paths("lockfiles", o.Lockfiles, MaxLockfiles)
	b.e.Prepared = b.paths("prepared", o.Prepared, MaxPrepared)
	if len(b.e.Prepared) > 0 && len(b.e.Lockfiles) == 0 {
		b.problem("%s prepared: not used without lockfiles (a prepared tree is keyed by their content)", OverrideFile)
		b.e.Prepared = nil
	}
}

// paths checks the list field of .sandboxcore.yaml: each entry a clean
// relative path outside .git, at most max of them; the rest are problems.
func (b *builder) paths(field string, list []string, max int) []string {
	var out []string
	for _, f := range list {
		switch {
		case len(out) >= max:
			b.problem("%s %s: more than %d", OverrideFile, field, max)
			return out
		case f == "" || f == "." || path.IsAbs(f) || path.Clean(f) != f || f == ".." || strings.HasPrefix(f, "../") || strings.ContainsRune(f, 0):
			b.problem("%s %s: %q is not a clean relative path", OverrideFile, field, clip(f))
		case slices.Contains(strings.Split(f, "/"), ".git"):
			b.problem("%s %s: %q is inside .git", OverrideFile, field, clip(f))
		case slices.Contains(out, f):
		default:
			out = append(out, f)
		}
	}
	return out
}

func (b *builder) image(where, img string) {
	if len(img) > 255 || !imageRef.MatchString(img) {
		b.problem("%s: %q is not an image reference", where, clip(img))
		return
	}
	b.e.Image = img
}

func (b *builder) setEnv(where, name, value string) {
	switch {
	case !envName.MatchString(name):
		b.problem("%s: %q is not a variable name", where, clip(name))
	case reserved[name]:
		b.problem("%s: %s is set by the worker and cannot be changed", where, name)
	case len(value) > MaxValueBytes:
		b.problem("%s: %s is %d bytes, more than %d", where, name, len(value), MaxValueBytes)
	case strings.Contains(value, "${"):
		// ${localEnv:…} would read the worker's environment; no
		// substitution is made at all.
		b.problem("%s: %s uses a ${…} substitution, which is not supported", where, name)
	case strings.ContainsRune(value, 0):
		b.problem("%s: %s holds a NUL byte", where, name)
	case len(b.env) >= MaxEnv && !hasKey(b.env, name):
		b.problem("%s: more than %d variables; %s left out", where, MaxEnv, name)
	default:
		b.env[name] = value
	}
}

func (b *builder) addSetup(where string, argv []string) {
	n := 0
	for _, a := range argv {
		n += len(a)
	}
	switch {
	case len(argv) == 0 || argv[0] == "" || (len(argv) == 3 && argv[0] == "sh" && argv[1] == "-c" && strings.TrimSpace(argv[2]) == ""):
		b.problem("%s: an empty command", where)
	case n > MaxCommandBytes:
		b.problem("%s: %d bytes, more than %d", where, n, MaxCommandBytes)
	case slices.ContainsFunc(argv, func(a string) bool { return strings.ContainsRune(a, 0) }):
		b.problem("%s: holds a NUL byte", where)
	case len(b.e.Setup) >= MaxSetup:
		b.problem("%s: more than %d setup commands", where, MaxSetup)
	default:
		b.e.Setup = append(b.e.Setup, argv)
	}
}

// decodeStrict decodes JSON into v refusing duplicate object keys at the
// top level of the value (encoding/json keeps the last one silently).
func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if d, ok := tok.(json.Delim); ok && d == '{' {
		seen := map[string]bool{}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return err
			}
			key, _ := k.(string)
			if seen[key] {
				return fmt.Errorf("duplicate key %q", clip(key))
			}
			seen[key] = true
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return err
			}
		}
	}
	return json.Unmarshal(data, v)
}

func hasKey(m map[string]string, k string) bool { _, ok := m[k]; return ok }

// yamlError is a YAML decoding error on one line, without the Go type
// names the decoder quotes, bounded.
func yamlError(err error) string {
	msg := strings.ReplaceAll(err.Error(), " in type repoenv.override", "")
	msg = strings.Join(strings.Fields(strings.ReplaceAll(msg, "\n", "; ")), " ")
	msg = strings.TrimPrefix(msg, "yaml: unmarshal errors:; ")
	if len(msg) > 200 {
		msg = msg[:200] + "…"
	}
	return msg
}

// clip bounds a repository-provided string quoted in a problem.
func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
