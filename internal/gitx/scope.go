package gitx

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// An inspection scope lets the calls of one workspace operation share the
// inspection of a repository's configuration (docs/SECURITY.md "Git
// hardening", item 3, and "Known gaps", "Inspection race"): within a context
// from ReuseInspections, Run reads the configuration of a (directory,
// environment) once and reuses it for the later local calls, until a call
// that may write configuration; network calls always read it again, so a
// redirect added meanwhile still refuses them.

type scopeKey struct{}

// inspectionScope holds the inspections of one operation, by
// directory and environment (the map made by the first one: most
// activities run no git at all).
type inspectionScope struct {
	mu   sync.Mutex
	seen map[string]*Inspection
}

// ReuseInspections returns ctx carrying a new inspection scope: the git
// calls Run makes with it (or a context derived from it) share the
// inspection of each repository's configuration as described above. It is
// meant for the span of one workspace operation (one activity): a
// configuration written meanwhile by a process the operation did not start
// is not seen by its local calls (docs/SECURITY.md "Known gaps").
func ReuseInspections(ctx context.Context) context.Context {
	return context.WithValue(ctx, scopeKey{}, &inspectionScope{})
}

func scopeOf(ctx context.Context) *inspectionScope {
	s, _ := ctx.Value(scopeKey{}).(*inspectionScope)
	return s
}

// scopeEntry names a repository as a call sees it: its directory and the
// environment that can point git elsewhere (GIT_DIR, GIT_WORK_TREE …).
func scopeEntry(dir string, env []string) string {
	return filepath.Clean(dir) + "\x00" + strings.Join(env, "\x00")
}

func (s *inspectionScope) get(key string) *Inspection {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seen[key]
}

func (s *inspectionScope) put(key string, ins *Inspection) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seen == nil {
		s.seen = map[string]*Inspection{}
	}
	s.seen[key] = ins
}

// forget drops every inspection: a call may have changed some repository's
// configuration (a worktree's is its repository's).
func (s *inspectionScope) forget() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.seen)
}

// configWriters are the subcommands that may write a repository's
// configuration (remotes, branch tracking, submodules, worktrees, LFS,
// sparse checkout …); after one of them the scope inspects again.
var configWriters = map[string]bool{
	"init": true, "clone": true, "worktree": true, "branch": true, "checkout": true, "switch": true,
	"remote": true, "submodule": true, "push": true, "pull": true, "fetch": true, "lfs": true,
	"sparse-checkout": true, "maintenance": true,
}

// configReads are the `git config` options that only read.
var configReads = []string{"--list", "-l", "--get", "--get-all", "--get-regexp", "--get-urlmatch", "--get-color", "--get-colorbool"}

// writesConfig reports whether a call with this subcommand and these
// arguments may write configuration.
func writesConfig(sub string, args []string) bool {
	switch sub {
	case "config":
		return !slices.ContainsFunc(args, func(a string) bool { return slices.Contains(configReads, a) })
	case "branch":
		// A branch created with --no-track writes no configuration (without
		// it, branch.autoSetupMerge may record an upstream); renaming,
		// copying or setting an upstream does.
		return !slices.Contains(args, "--no-track") || slices.ContainsFunc(args, func(a string) bool {
			return slices.Contains(branchConfigWrites, a) || strings.HasPrefix(a, "--set-upstream-to=") || strings.HasPrefix(a, "--track=")
		})
	}
	return configWriters[sub]
}

// branchConfigWrites are the `git branch` options that write configuration
// even with --no-track.
var branchConfigWrites = []string{"-m", "-M", "-c", "-C", "--move", "--copy", "-u", "--set-upstream-to", "--unset-upstream", "--track", "-t", "--edit-description"}
