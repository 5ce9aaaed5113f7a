package repocache

import (
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/gittest"
	"github.com/sandboxcore/sandboxcore/internal/gitx"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// fakeClock is a settable clock for Options.Now.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *fakeClock {
	return &fakeClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newRunner(t testing.TB) *gitx.Runner {
	t.Helper()
	r, err := gitx.New(gitx.Options{AllowFile: true, AllowHTTP: true, HomeDir: t.TempDir()})
	require.NoError(t, err)
	return r
}

// newCache returns a Cache on a fresh root with the given clock (nil = real time).
func newCache(t testing.TB, clk *fakeClock) *Cache {
	t.Helper()
	return newCacheAt(t, t.TempDir(), clk)
}

func newCacheAt(t testing.TB, root string, clk *fakeClock) *Cache {
	t.Helper()
	opts := Options{Root: root, Git: newRunner(t), HostID: "host-test"}
	if clk != nil {
		opts.Now = clk.Now
	}
	c, err := New(opts)
	require.NoError(t, err)
	return c
}

func parse(t testing.TB, url string) sandboxapi.RepoIdentity {
	t.Helper()
	id, err := sandboxapi.ParseRepoURL(url, sandboxapi.URLPolicy{AllowFile: true, AllowHTTP: true})
	require.NoError(t, err)
	return id
}

// fileRepo makes an upstream repository (default branch trunk) and its identity.
func fileRepo(t testing.TB) (src string, id sandboxapi.RepoIdentity) {
	t.Helper()
	src = gittest.NewRepo(t, "trunk")
	return src, parse(t, gittest.FileURL(src))
}

const (
	httpUser = "x-access-token"
	httpPass = "s3cr3t-T0ken-value-9f8e7d"
)

// httpRepo serves an upstream repository (default branch trunk) over smart
// HTTP with basic auth httpUser:httpPass.
func httpRepo(t testing.TB) (srv *gittest.Server, src string, id sandboxapi.RepoIdentity) {
	t.Helper()
	srv = gittest.NewHTTPServer(t, t.TempDir(), httpUser, httpPass)
	src = gittest.InitRepo(t, srv.RepoDir("team/project.git"), "trunk")
	return srv, src, parse(t, srv.URL("team/project.git"))
}

func goodCred() *sandbox.Credential {
	return &sandbox.Credential{Username: httpUser, Secret: httpPass}
}

// bareGit runs git on a bare mirror.
func bareGit(t testing.TB, bare string, args ...string) string {
	t.Helper()
	return gittest.Git(t, bare, args...)
}

func refs(t testing.TB, bare, prefix string) map[string]string {
	t.Helper()
	out := bareGit(t, bare, "for-each-ref", "--format=%(refname) %(objectname)", prefix)
	m := map[string]string{}
	for _, line := range splitLines(out) {
		var name, sha string
		for i := 0; i < len(line); i++ {
			if line[i] == ' ' {
				name, sha = line[:i], line[i+1:]
				break
			}
		}
		m[name] = sha
	}
	return m
}

func splitLines(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			if i > start {
				out = append(out, s[start:i])
			}
			start = i + 1
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

// leftovers lists the staging and trash entries of the cache.
func leftovers(t testing.TB, c *Cache) []string {
	t.Helper()
	var out []string
	for _, d := range []string{c.stagingDir(), c.trashDir()} {
		m, err := filepath.Glob(filepath.Join(d, "*"))
		require.NoError(t, err)
		out = append(out, m...)
	}
	return out
}
