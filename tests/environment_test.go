package tests

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/gittest"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// TestGoTestRunsWithTheHostToolchainAndSharedCaches (docs/RUNTIMES.md
// "Runtime environment", "Dependency caches"): `go test ./...` of a Go
// repository passes in a new workspace with no PATH of the caller's (the
// host's /usr/local/go/bin is on the runtime's PATH); a second workspace of
// the same user and repository finds the test result in the shared build
// cache ("(cached)"); another user's workspace of the same repository sees
// neither that cache nor a file the first user planted in the module
// cache.
func TestGoTestRunsWithTheHostToolchainAndSharedCaches(t *testing.T) {
	h := startHost(t, "envgo")
	if k := h.Activities.Runtimes.Kind(); k != "bwrap" && k != "local" {
		t.Skipf("the host toolchain's PATH is the bubblewrap and local runtimes' (this host runs %s)", k)
	}
	upstream := gittest.InitRepo(t, filepath.Join(t.TempDir(), "team", "gomod"), "main")
	gittest.Commit(t, upstream, "go.mod", "module example.com/m\n\ngo 1.21\n", "module")
	gittest.Commit(t, upstream, "m.go", "package main\n\n// Add adds.\nfunc Add(a, b int) int { return a + b }\n", "code")
	gittest.Commit(t, upstream, "m_test.go", "package main\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {\n\tif Add(2, 3) != 5 {\n\t\tt.Fatal(\"2+3\")\n\t}\n}\n", "test")
	url := gittest.FileURL(upstream)
	ctx := ctxFor(t, 8*time.Minute)
	alice, bob := uniq(t, "alice"), uniq(t, "bob")
	goTest := sandboxapi.ExecRequest{Cmd: []string{"go", "test", "./..."}, TimeoutS: 300}

	s1, _, err := h.client.Acquire(ctx, editRequest(alice, "p", "c1", url))
	require.NoError(t, err)
	res, err := s1.Exec(ctx, goTest)
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode, "stdout %s\nstderr %s", res.Stdout, res.Stderr)
	assert.Contains(t, string(res.Stdout), "ok  \texample.com/m")
	assert.NotContains(t, string(res.Stdout), "(cached)", "a cold cache")
	plant, err := s1.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"sh", "-c", `mkdir -p "$GOMODCACHE/cache/download" && echo evil > "$GOMODCACHE/cache/download/planted" && go env GOCACHE`}})
	require.NoError(t, err)
	require.Equal(t, 0, plant.ExitCode, "%s", plant.Stderr)
	gocache := strings.TrimSpace(string(plant.Stdout))
	assert.NotContains(t, gocache, "/workspace", "the cache is never in the worktree")

	s2, _, err := h.client.Acquire(ctx, editRequest(alice, "p", "c2", url))
	require.NoError(t, err)
	res, err = s2.Exec(ctx, goTest)
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode, "%s", res.Stderr)
	assert.Contains(t, string(res.Stdout), "(cached)", "the same user's next workspace of the repository is warm")

	s3, _, err := h.client.Acquire(ctx, editRequest(bob, "p", "c1", url))
	require.NoError(t, err)
	probe, err := s3.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"sh", "-c", `go env GOCACHE; test -e "$GOMODCACHE/cache/download/planted" && echo planted-visible; ls -A "$(go env GOCACHE)" 2>/dev/null | wc -l`}})
	require.NoError(t, err)
	require.Equal(t, 0, probe.ExitCode, "%s", probe.Stderr)
	lines := strings.Split(strings.TrimSpace(string(probe.Stdout)), "\n")
	require.Len(t, lines, 2, "%s", probe.Stdout)
	assert.NotEqual(t, gocache, lines[0], "another user has a cache of its own")
	assert.Equal(t, "0", strings.TrimSpace(lines[1]), "another user's cache starts empty")
	assert.NotContains(t, string(probe.Stdout), "planted-visible", "a file planted in one user's cache never reaches another's")

	st, err := s1.Status(ctx)
	require.NoError(t, err)
	assert.False(t, st.Dirty, "the caches are not in the worktree: %+v", st.Files)
}
