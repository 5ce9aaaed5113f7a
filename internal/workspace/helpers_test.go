package workspace

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/gitx"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// testLocker is a trivial in-process sandbox.RepoLocker.
type testLocker struct {
	mu    sync.Mutex
	locks map[string]*sync.Mutex
	calls int
}

func (l *testLocker) LockRepo(ctx context.Context, repo sandboxapi.RepoIdentity) (func(), error) {
	l.mu.Lock()
	if l.locks == nil {
		l.locks = map[string]*sync.Mutex{}
	}
	mu := l.locks[repo.Key()]
	if mu == nil {
		mu = &sync.Mutex{}
		l.locks[repo.Key()] = mu
	}
	l.calls++
	l.mu.Unlock()
	mu.Lock()
	var once sync.Once
	return func() { once.Do(mu.Unlock) }, nil
}

// fixture is a bare repo cache laid out as repocache lays it out, with the
// source repository it was fetched from.
type fixture struct {
	t      testing.TB
	root   string // <root>
	home   string
	src    string // working repository the cache was fetched from
	bare   string // <root>/repos/example.com/owner/repo/.bare
	cache  sandbox.RepoCache
	m      *Manager
	locker *testLocker
	c1     string // main~1, tagged v1 (annotated)
	c2     string // main
	c3     string // dev
}

var binaryContent = []byte{0, 1, 2, 0xff, 0xfe, '\n', 0, 'x', '\r', '\n', 0x80}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	tmp := t.TempDir()
	f := &fixture{t: t, root: filepath.Join(tmp, "root"), home: filepath.Join(tmp, "home"), src: filepath.Join(tmp, "src")}
	require.NoError(t, os.MkdirAll(f.home, 0o755))
	f.git(tmp, "init", "-q", "-b", "main", f.src)
	f.writeSrc("README.md", "hello\n")
	f.writeSrc("src/app.go", "package app\n")
	require.NoError(t, os.WriteFile(filepath.Join(f.src, "bin.dat"), binaryContent, 0o644))
	f.git(f.src, "add", "-A")
	f.git(f.src, "commit", "-q", "-m", "c1")
	f.c1 = f.git(f.src, "rev-parse", "HEAD")
	f.git(f.src, "tag", "-a", "v1", "-m", "v1")
	f.git(f.src, "checkout", "-q", "-b", "dev")
	f.writeSrc("dev.txt", "dev\n")
	f.git(f.src, "add", "-A")
	f.git(f.src, "commit", "-q", "-m", "c3")
	f.c3 = f.git(f.src, "rev-parse", "HEAD")
	f.git(f.src, "checkout", "-q", "main")
	f.writeSrc("README.md", "hello\nworld\n")
	f.git(f.src, "commit", "-q", "-am", "c2")
	f.c2 = f.git(f.src, "rev-parse", "HEAD")

	f.bare = filepath.Join(f.root, "repos", "example.com", "owner", "repo", ".bare")
	require.NoError(t, os.MkdirAll(filepath.Dir(f.bare), 0o755))
	f.git(tmp, "init", "-q", "--bare", f.bare)
	f.fetch()

	f.cache = sandbox.RepoCache{
		ID: "rc-test", RepoName: "owner/repo", RepoURL: "https://example.com/owner/repo.git",
		Provider: "local", ProviderHost: "example.com", LocalPath: f.bare, DefaultBranch: "main",
		HostID: "host-1", State: sandbox.RepoCacheReady,
	}
	runner, err := gitx.New(gitx.Options{HomeDir: filepath.Join(tmp, "gitx-home")})
	require.NoError(t, err)
	f.locker = &testLocker{}
	f.m, err = New(Options{Git: runner, Locker: f.locker, HostID: "host-1"})
	require.NoError(t, err)
	return f
}

func (f *fixture) fetch() {
	f.git(f.bare, "fetch", "-q", f.src, "+refs/heads/*:refs/remotes/origin/*", "+refs/tags/*:refs/tags/*")
}

func (f *fixture) writeSrc(rel, content string) {
	p := filepath.Join(f.src, rel)
	require.NoError(f.t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(f.t, os.WriteFile(p, []byte(content), 0o644))
}

// env is a clean environment for the test's own plain git.
func (f *fixture) env() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIT_") {
			env = append(env, kv)
		}
	}
	return append(env, "HOME="+f.home, "XDG_CONFIG_HOME="+f.home, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com",
		"GIT_TERMINAL_PROMPT=0", "LC_ALL=C")
}

// gitRaw runs plain git with no hardening at all (as an agent would).
func (f *fixture) gitRaw(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	cmd.Env = f.env()
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// git runs the test's own git with hooks and fsmonitor off, failing the test on error.
func (f *fixture) git(dir string, args ...string) string {
	f.t.Helper()
	out, err := f.gitRaw(dir, append([]string{"-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "-c", "protocol.file.allow=always"}, args...)...)
	require.NoError(f.t, err, "git %v: %s", args, out)
	return out
}

func (f *fixture) req(mode sandboxapi.WorkspaceMode, scope string) sandboxapi.WorkspaceRequest {
	r := sandboxapi.WorkspaceRequest{UserID: "u1", ProjectID: "p1", RepoURL: "https://example.com/owner/repo", Mode: mode}
	switch mode {
	case sandboxapi.ModeEdit:
		r.ConversationID = scope
	case sandboxapi.ModeTask:
		r.TaskID = scope
	case sandboxapi.ModeAnalysis:
		r.BaseRef = scope
	}
	return r
}

func (f *fixture) ensure(req sandboxapi.WorkspaceRequest) sandboxapi.Workspace {
	f.t.Helper()
	ws, err := f.m.Ensure(context.Background(), f.cache, req, nil)
	require.NoError(f.t, err)
	return ws
}

func (f *fixture) branchExists(branch string) bool {
	_, err := f.gitRaw(f.bare, "rev-parse", "--verify", "--quiet", "refs/heads/"+branch)
	return err == nil
}

// registered lists the registered worktree paths (the bare itself excluded).
func (f *fixture) registered() []string {
	out := f.git(f.bare, "worktree", "list", "--porcelain")
	var paths []string
	for _, l := range strings.Split(out, "\n") {
		if p, ok := strings.CutPrefix(l, "worktree "); ok && p != f.bare {
			paths = append(paths, p)
		}
	}
	return paths
}

func (f *fixture) worktreesDir() string { return filepath.Join(filepath.Dir(f.bare), WorktreesDir) }

func requireKind(t *testing.T, err error, kind *sandboxapi.Kind) {
	t.Helper()
	require.Error(t, err)
	require.Truef(t, errors.Is(err, kind), "want %s, got %v", kind.Type, err)
}

// snapshot lists every path under dirs with its size and mode (symlinks not followed).
func snapshot(t *testing.T, dirs ...string) []string {
	t.Helper()
	var out []string
	for _, d := range dirs {
		require.NoError(t, filepath.WalkDir(d, func(p string, e fs.DirEntry, err error) error {
			require.NoError(t, err)
			fi, err := e.Info()
			require.NoError(t, err)
			out = append(out, fmt.Sprintf("%s %v %d", p, fi.Mode(), fi.Size()))
			return nil
		}))
	}
	sort.Strings(out)
	return out
}

// tb is the branch namespace of the fixture's tenant (user u1, project p1):
// the derived branches are tb + "edits-<conversation>" and tb + "task-<task>"
// (docs/API.md "Identity").
var tb = "agent/" + sandboxapi.TenantSegment("u1", "p1") + "/"
