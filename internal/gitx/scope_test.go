package gitx

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/gittest"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// countingGit is a git wrapper that appends each call's subcommand line to a
// log, so a test can count the configuration reads Run makes.
func countingGit(t *testing.T) (*Runner, func() int) {
	t.Helper()
	real, err := exec.LookPath("git")
	require.NoError(t, err)
	dir := t.TempDir()
	log := filepath.Join(dir, "calls")
	wrapper := filepath.Join(dir, "git")
	require.NoError(t, os.WriteFile(wrapper, []byte("#!/bin/sh\ncase \" $* \" in *\" config --list \"*) echo inspect >> "+log+";; esac\nexec "+real+" \"$@\"\n"), 0o755))
	r, err := New(Options{Binary: wrapper, AllowFile: true, HomeDir: t.TempDir()})
	require.NoError(t, err)
	return r, func() int {
		b, _ := os.ReadFile(log)
		n := 0
		for _, c := range b {
			if c == '\n' {
				n++
			}
		}
		return n
	}
}

// TestScopeReusesInspectionForLocalCalls: within one ReuseInspections scope
// the local calls on one repository read its configuration once; without a
// scope every call reads it; another directory is inspected on its own.
func TestScopeReusesInspectionForLocalCalls(t *testing.T) {
	r, inspections := countingGit(t)
	repo := gittest.InitRepo(t, filepath.Join(t.TempDir(), "repo"), "main")
	other := gittest.InitRepo(t, filepath.Join(t.TempDir(), "other"), "main")
	run := func(ctx context.Context, dir string, args ...string) {
		_, err := r.Run(ctx, Call{Dir: dir, Args: args, Timeout: time.Minute})
		require.NoError(t, err)
	}
	for range 3 {
		run(context.Background(), repo, "rev-parse", "HEAD")
	}
	require.Equal(t, 3, inspections(), "without a scope every call inspects")

	ctx := ReuseInspections(context.Background())
	run(ctx, repo, "rev-parse", "HEAD")
	run(ctx, repo, "status", "--porcelain")
	run(ctx, repo, "ls-files", "-z")
	assert.Equal(t, 4, inspections(), "one inspection for three local calls in a scope")
	run(ctx, other, "rev-parse", "HEAD")
	assert.Equal(t, 5, inspections(), "another repository has its own")
	run(ReuseInspections(context.Background()), repo, "rev-parse", "HEAD")
	assert.Equal(t, 6, inspections(), "a new scope inspects again")
}

// TestScopeSeesConfigWrites: a configuration call through Run in the scope
// (here one that installs a filter driver) makes the next call inspect
// again, so the driver is neutralized there as without a scope.
func TestScopeSeesConfigWrites(t *testing.T) {
	h := newHostile(t)
	h.write("a.txt", "one\n")
	h.write(".gitattributes", "*.txt filter=evil\n")
	ctx := ReuseInspections(context.Background())
	env := []string{"GIT_DIR=" + filepath.Join(h.repo, ".git"), "GIT_WORK_TREE=" + h.repo}
	call := func(args ...string) error {
		_, err := h.r.Run(ctx, Call{Dir: h.repo, Args: args, Env: env, Timeout: time.Minute})
		return err
	}
	require.NoError(t, call("status", "--porcelain")) // inspected: nothing dangerous yet
	require.NoError(t, call("config", "filter.evil.clean", h.script+" clean"))
	require.NoError(t, call("add", "-A"))
	assert.Empty(t, h.ran(), "the filter installed within the scope is neutralized")
	// Control: plain git runs it.
	h.restage("a.txt")
	assert.Contains(t, h.ran(), "ran "+h.script+" clean")
}

// TestScopeNetworkCallsInspectAfresh: a redirect written into the
// repository after a local call of the scope (by a process the scope does
// not know of) still refuses the scope's next network call.
func TestScopeNetworkCallsInspectAfresh(t *testing.T) {
	h := newHostile(t)
	ctx := ReuseInspections(context.Background())
	env := []string{"GIT_DIR=" + filepath.Join(h.repo, ".git"), "GIT_WORK_TREE=" + h.repo}
	_, err := h.r.Run(ctx, Call{Dir: h.repo, Args: []string{"rev-parse", "HEAD"}, Env: env})
	require.NoError(t, err)
	h.config("url.file://"+h.evil+".insteadOf", "file://"+h.up) // behind the scope's back
	_, err = h.r.Run(ctx, Call{Dir: h.repo, Args: []string{"fetch", "-q", "--end-of-options", "file://" + h.up, "+refs/heads/*:refs/remotes/up/*"}, Env: env})
	require.ErrorIs(t, err, sandboxapi.ErrCommandRejected)
	assert.NotContains(t, gittest.Git(t, h.repo, "for-each-ref"), "refs/remotes/up/")
	_, err = h.r.Run(ctx, Call{Dir: h.repo, Args: []string{"rev-parse", "HEAD"}, Env: env, RemoteURL: "file://" + h.up})
	require.ErrorIs(t, err, sandboxapi.ErrCommandRejected, "a call with RemoteURL is a network call")
}

func TestWritesConfig(t *testing.T) {
	for _, c := range []struct {
		args []string
		want bool
	}{
		{[]string{"config", "--list", "-z"}, false},
		{[]string{"config", "--get", "remote.origin.url"}, false},
		{[]string{"config", "remote.origin.url", "x"}, true},
		{[]string{"config", "--unset-all", "x.y"}, true},
		{[]string{"status", "--porcelain"}, false},
		{[]string{"rev-parse", "HEAD"}, false},
		{[]string{"worktree", "add", "x"}, true},
		{[]string{"branch", "-m", "a", "b"}, true},
		{[]string{"branch", "--quiet", "--no-track", "--end-of-options", "b", "HEAD"}, false},
		{[]string{"branch", "b", "origin/main"}, true},
		{[]string{"branch", "--no-track", "-u", "origin/main"}, true},
		{[]string{"branch", "--no-track", "--set-upstream-to=origin/main"}, true},
		{[]string{"submodule", "init"}, true},
		{[]string{"fetch", "x"}, true},
	} {
		assert.Equal(t, c.want, writesConfig(subcommand(c.args), c.args), "%v", c.args)
	}
}
