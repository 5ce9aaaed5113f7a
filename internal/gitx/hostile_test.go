package gitx

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/gittest"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// hostile is one repository an agent has poisoned: a non-bare repository
// (its own work tree) whose config, attributes and hooks the test sets, a
// script that records every run in a marker file, an upstream bare
// repository, an "evil" bare repository, and an HTTP server with basic auth.
type hostile struct {
	t      *testing.T
	r      *Runner
	repo   string // work tree; its git dir is repo/.git
	marker string
	script string
	up     string // file:// upstream (bare)
	evil   string // file:// repository a redirect would fetch from
	srv    *gittest.Server
	srvURL string
}

const (
	srvUser = "agent"
	srvPass = "hostile-test-secret-4242"
)

func newRunnerT(t testing.TB) *Runner {
	t.Helper()
	r, err := New(Options{AllowFile: true, AllowHTTP: true, HomeDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	return r
}

func newHostile(t *testing.T) *hostile {
	t.Helper()
	tmp := t.TempDir()
	h := &hostile{t: t, r: newRunnerT(t), marker: filepath.Join(tmp, "marker"), script: filepath.Join(tmp, "evil.sh")}
	// Records the run; behaves as an identity filter for clean/smudge, fails otherwise.
	require.NoError(t, os.WriteFile(h.script, []byte("#!/bin/sh\necho \"ran $0 $*\" >> "+h.marker+"\ncase \"$1\" in clean|smudge) exec cat;; esac\nexit 1\n"), 0o755))
	h.repo = gittest.InitRepo(t, filepath.Join(tmp, "repo"), "main")
	h.up = filepath.Join(tmp, "up.git")
	gittest.Git(t, tmp, "clone", "--quiet", "--bare", h.repo, h.up)
	evilSrc := gittest.InitRepo(t, filepath.Join(tmp, "evilsrc"), "main")
	gittest.Git(t, evilSrc, "checkout", "-q", "-b", "evilbranch")
	h.evil = filepath.Join(tmp, "evil.git")
	gittest.Git(t, tmp, "clone", "--quiet", "--bare", evilSrc, h.evil)
	h.srv = gittest.NewHTTPServer(t, filepath.Join(tmp, "srv"), srvUser, srvPass)
	gittest.InitRepo(t, h.srv.RepoDir("o/r.git"), "main")
	h.srvURL = h.srv.URL("o/r.git")
	return h
}

// config sets a variable in the repository's own (local) config, as an
// agent's `git config` would.
func (h *hostile) config(k, v string) { gittest.Git(h.t, h.repo, "config", k, v) }

func (h *hostile) write(rel, content string) {
	p := filepath.Join(h.repo, rel)
	require.NoError(h.t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(h.t, os.WriteFile(p, []byte(content), 0o644))
}

// run is a hardened call in the repository (GIT_DIR and GIT_WORK_TREE pinned, as the workspace does).
func (h *hostile) run(args ...string) (string, error) {
	out, err := h.r.Run(context.Background(), Call{Dir: h.repo, Args: args, Timeout: time.Minute,
		Env: []string{"GIT_DIR=" + filepath.Join(h.repo, ".git"), "GIT_WORK_TREE=" + h.repo,
			"GIT_AUTHOR_NAME=a", "GIT_AUTHOR_EMAIL=a@example.invalid", "GIT_COMMITTER_NAME=a", "GIT_COMMITTER_EMAIL=a@example.invalid"}})
	return string(out), err
}

// restage rewrites rel with content of another size and stages it with plain
// git: after the hardened `add` staged the same bytes, the index entry is
// only re-hashed (and the filter run) when git sees a change, and a same-size
// rewrite inside the index's timestamp granularity is invisible to it.
func (h *hostile) restage(rel string) {
	h.write(rel, "control rewrite of another size\n")
	h.raw("add", "-A")
}

// raw is the same command with plain git (no hardening): the control.
func (h *hostile) raw(args ...string) { rawGit(h.repo, args...) }

// rawGit runs plain git (gittest.Env, no hardening) for at most 20 seconds.
func rawGit(dir string, args ...string) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
	cmd.Env = gittest.Env()
	_ = cmd.Run()
}

func (h *hostile) ran() string {
	b, _ := os.ReadFile(h.marker)
	return string(b)
}

func (h *hostile) hooks(dir string) {
	require.NoError(h.t, os.MkdirAll(dir, 0o755))
	for _, name := range []string{"pre-commit", "commit-msg", "prepare-commit-msg", "post-commit", "post-checkout",
		"reference-transaction", "post-index-change", "pre-auto-gc", "post-merge", "pre-merge-commit", "post-rewrite", "pre-push"} {
		require.NoError(h.t, os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\necho \"hook "+name+"\" >> "+h.marker+"\n"), 0o755))
	}
}

// TestHostileConfigNeverRunsInHostSideGit: for every kind of agent-writable
// configuration that makes git run a program or redirect it, a hardened call
// runs nothing (the marker stays absent) while plain git in the same
// repository does (the control proves the setup is live).
func TestHostileConfigNeverRunsInHostSideGit(t *testing.T) {
	type tc struct {
		name    string
		setup   func(h *hostile)
		op      func(h *hostile) error
		control func(h *hostile) // plain git that must run the script
		wantErr *sandboxapi.Kind // nil: the call must succeed; sandboxapi.ErrSandbox: any error
	}
	cases := []tc{
		{name: "core.fsmonitor",
			setup:   func(h *hostile) { h.config("core.fsmonitor", h.script) },
			op:      func(h *hostile) error { _, err := h.run("status", "--porcelain"); return err },
			control: func(h *hostile) { h.raw("status") }},
		{name: "core.hooksPath",
			setup: func(h *hostile) {
				h.hooks(filepath.Join(filepath.Dir(h.marker), "hooks"))
				h.config("core.hooksPath", filepath.Join(filepath.Dir(h.marker), "hooks"))
			},
			op:      func(h *hostile) error { _, err := h.run("commit", "-q", "--allow-empty", "-m", "x"); return err },
			control: func(h *hostile) { h.raw("commit", "-q", "--allow-empty", "-m", "x") }},
		{name: "hooks dropped into the hooks dir",
			setup:   func(h *hostile) { h.hooks(filepath.Join(h.repo, ".git", "hooks")) },
			op:      func(h *hostile) error { _, err := h.run("commit", "-q", "--allow-empty", "-m", "x"); return err },
			control: func(h *hostile) { h.raw("commit", "-q", "--allow-empty", "-m", "x") }},
		{name: "filter clean",
			setup: func(h *hostile) {
				h.config("filter.evil.clean", h.script+" clean")
				h.config("filter.evil.required", "true")
				h.write(".gitattributes", "*.txt filter=evil\n")
				h.write("a.txt", "a\n")
			},
			op:      func(h *hostile) error { _, err := h.run("add", "-A"); return err },
			control: func(h *hostile) { h.restage("a.txt") }},
		{name: "filter process with an odd driver name",
			setup: func(h *hostile) {
				h.config("filter.we.ird=name.process", h.script+" process")
				h.write(".gitattributes", "*.md filter=we.ird=name\n")
				h.write("README.md", "changed\n")
			},
			op:      func(h *hostile) error { _, err := h.run("add", "-A"); return err },
			control: func(h *hostile) { h.restage("README.md") }},
		{name: "filter smudge on checkout",
			setup: func(h *hostile) {
				h.write(".gitattributes", "*.txt filter=evil\n")
				h.write("s.txt", "s\n")
				gittest.Git(h.t, h.repo, "add", "-A")
				gittest.Git(h.t, h.repo, "commit", "-q", "-m", "attrs")
				h.config("filter.evil.smudge", h.script+" smudge")
				require.NoError(h.t, os.Remove(filepath.Join(h.repo, "s.txt")))
			},
			op: func(h *hostile) error { _, err := h.run("checkout", "-f", "--", "s.txt"); return err },
			control: func(h *hostile) {
				_ = os.Remove(filepath.Join(h.repo, "s.txt"))
				h.raw("checkout", "-f", "--", "s.txt")
			}},
		{name: "diff.external",
			setup:   func(h *hostile) { h.config("diff.external", h.script); h.write("README.md", "changed\n") },
			op:      func(h *hostile) error { _, err := h.run("diff"); return err },
			control: func(h *hostile) { h.raw("diff") },
			wantErr: sandboxapi.ErrSandbox}, // fails closed (diff.external is the empty command) without --no-ext-diff
		{name: "diff driver command",
			setup: func(h *hostile) {
				h.config("diff.evil.command", h.script)
				h.write(".gitattributes", "*.md diff=evil\n")
				h.write("README.md", "changed\n")
			},
			op:      func(h *hostile) error { _, err := h.run("diff"); return err },
			control: func(h *hostile) { h.raw("diff") },
			wantErr: sandboxapi.ErrSandbox}, // fails closed without --no-ext-diff
		{name: "diff driver textconv",
			setup: func(h *hostile) {
				h.config("diff.evil.textconv", h.script)
				h.config("diff.evil.cachetextconv", "true")
				h.write(".gitattributes", "*.md diff=evil\n")
				h.write("README.md", "changed\n")
			},
			// --no-ext-diff (always passed) but not --no-textconv: the override alone holds.
			op:      func(h *hostile) error { _, err := h.run("diff", "--no-ext-diff"); return err },
			control: func(h *hostile) { h.raw("diff") }},
		{name: "merge driver",
			setup: func(h *hostile) {
				h.write(".gitattributes", "*.md merge=evil\n")
				gittest.Git(h.t, h.repo, "add", "-A")
				gittest.Git(h.t, h.repo, "commit", "-q", "-m", "attrs")
				gittest.Git(h.t, h.repo, "checkout", "-q", "-b", "other")
				gittest.Commit(h.t, h.repo, "README.md", "other\n", "other")
				gittest.Git(h.t, h.repo, "checkout", "-q", "main")
				gittest.Commit(h.t, h.repo, "README.md", "mine\n", "mine")
				h.config("merge.evil.driver", h.script+" %O %A %B")
			},
			op: func(h *hostile) error { _, err := h.run("merge", "-q", "--no-edit", "other"); return err },
			control: func(h *hostile) {
				gittest.Git(h.t, h.repo, "reset", "-q", "--hard")
				h.raw("merge", "-q", "--no-edit", "other")
			},
			wantErr: sandboxapi.ErrSandbox}, // the file conflicts instead
		{name: "gpg program with signing on",
			setup:   func(h *hostile) { h.config("gpg.program", h.script); h.config("commit.gpgSign", "true") },
			op:      func(h *hostile) error { _, err := h.run("commit", "-q", "--allow-empty", "-m", "x"); return err },
			control: func(h *hostile) { h.raw("commit", "-q", "--allow-empty", "-m", "x") }},
		{name: "core.sshCommand",
			setup: func(h *hostile) { h.config("core.sshCommand", h.script) },
			op: func(h *hostile) error {
				_, err := h.run("ls-remote", "--end-of-options", "ssh://git@127.0.0.1:1/o/r.git")
				return err
			},
			control: func(h *hostile) { h.raw("ls-remote", "ssh://git@127.0.0.1:1/o/r.git") },
			wantErr: sandboxapi.ErrSandbox},
		{name: "credential helpers and askpass",
			setup: func(h *hostile) {
				h.config("credential.helper", "!"+h.script)
				h.config("credential."+h.srv.BaseURL()+".helper", "!"+h.script)
				h.config("core.askPass", h.script)
			},
			op: func(h *hostile) error {
				_, err := h.run("ls-remote", "--end-of-options", h.srvURL)
				return Classify(err, "ls-remote", sandboxapi.ErrRepoCacheUnavailable)
			},
			control: func(h *hostile) { h.raw("ls-remote", h.srvURL) },
			wantErr: sandboxapi.ErrRepoAuthFailed},
		{name: "protocol.ext.allow",
			setup: func(h *hostile) { h.config("protocol.ext.allow", "always") },
			op: func(h *hostile) error {
				_, err := h.run("ls-remote", "--end-of-options", "ext::"+h.script+" %S")
				return err
			},
			control: func(h *hostile) { h.raw("ls-remote", "ext::"+h.script+" %S") },
			wantErr: sandboxapi.ErrSandbox},
		{name: "remote uploadpack of a named remote",
			setup: func(h *hostile) {
				h.config("remote.origin.url", "file://"+h.up)
				h.config("remote.origin.uploadpack", h.script)
			},
			op:      func(h *hostile) error { _, err := h.run("fetch", "-q", "origin"); return err },
			control: func(h *hostile) { h.raw("fetch", "-q", "origin") },
			wantErr: sandboxapi.ErrCommandRejected}, // git keeps the first uploadpack: not overridable
		{name: "included config file",
			setup: func(h *hostile) {
				inc := filepath.Join(filepath.Dir(h.marker), "included.cfg")
				require.NoError(h.t, os.WriteFile(inc, []byte("[filter \"inc\"]\n\tclean = "+h.script+" clean\n"), 0o644))
				h.config("include.path", inc)
				h.write(".gitattributes", "*.txt filter=inc\n")
				h.write("b.txt", "b\n")
			},
			op:      func(h *hostile) error { _, err := h.run("add", "-A"); return err },
			control: func(h *hostile) { h.restage("b.txt") }},
		{name: "alternate refs command",
			setup: func(h *hostile) {
				require.NoError(h.t, os.WriteFile(filepath.Join(h.repo, ".git", "objects", "info", "alternates"), []byte(filepath.Join(h.evil, "objects")+"\n"), 0o644))
				h.config("core.alternateRefsCommand", h.script)
			},
			op: func(h *hostile) error {
				_, err := h.run("fetch", "-q", "--end-of-options", "file://"+h.up, "+refs/heads/*:refs/remotes/up/*")
				return err
			},
			control: func(h *hostile) { h.raw("fetch", "-q", "file://"+h.up, "+refs/heads/*:refs/remotes/up2/*") }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			h := newHostile(t)
			c.setup(h)
			err := c.op(h)
			switch {
			case c.wantErr == nil:
				require.NoError(t, err)
			case c.wantErr == sandboxapi.ErrSandbox:
				require.Error(t, err)
			default:
				require.ErrorIs(t, err, c.wantErr)
			}
			assert.Empty(t, h.ran(), "hardened git ran the agent's program")
			if c.control != nil {
				c.control(h)
				assert.NotEmpty(t, h.ran(), "control: plain git should have run the agent's program (the case is not live)")
			}
		})
	}
}

// TestRedirectingConfigRefusesNetworkCalls: url.<base>.insteadOf and a remote
// named like a URL would make `git fetch <url>` fetch from elsewhere (checked
// with plain git); hardened network calls refuse with ErrCommandRejected
// naming the key, and local calls still work.
func TestRedirectingConfigRefusesNetworkCalls(t *testing.T) {
	for name, set := range map[string]func(h *hostile){
		"insteadOf":        func(h *hostile) { h.config("url.file://"+h.evil+".insteadOf", "file://"+h.up) },
		"pushInsteadOf":    func(h *hostile) { h.config("url.file://"+h.evil+".pushInsteadOf", "file://"+h.up) },
		"remote named URL": func(h *hostile) { h.config("remote.file://"+h.up+".url", "file://"+h.evil) },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := newHostile(t)
			set(h)
			if name != "pushInsteadOf" {
				h.raw("fetch", "-q", "file://"+h.up, "+refs/heads/*:refs/remotes/control/*")
				assert.Contains(t, gittest.Git(t, h.repo, "for-each-ref"), "refs/remotes/control/evilbranch", "control: plain git is redirected")
			}
			_, err := h.run("fetch", "-q", "--end-of-options", "file://"+h.up, "+refs/heads/*:refs/remotes/up/*")
			require.ErrorIs(t, err, sandboxapi.ErrCommandRejected)
			assert.Contains(t, err.Error(), "refused")
			assert.NotContains(t, gittest.Git(t, h.repo, "for-each-ref"), "refs/remotes/up/")
			// Classify keeps the kind.
			assert.ErrorIs(t, Classify(err, "fetch", sandboxapi.ErrRepoCacheUnavailable), sandboxapi.ErrCommandRejected)
			// RemoteURL alone marks a call as a network call.
			_, err = h.r.Run(context.Background(), Call{Dir: h.repo, Args: []string{"rev-parse", "HEAD"}, RemoteURL: "file://" + h.up})
			require.ErrorIs(t, err, sandboxapi.ErrCommandRejected)
			// Local calls are unaffected.
			_, err = h.run("rev-parse", "HEAD")
			require.NoError(t, err)
			ins, err := h.r.Inspect(context.Background(), Call{Dir: h.repo})
			require.NoError(t, err)
			require.Len(t, ins.Redirects(), 1)
		})
	}
}

// TestHTTPConfigCannotDivertTheCredential: a proxy, cookie jar or extra
// header configured per URL in the repository is overridden; the credential
// still reaches the server and only it.
func TestHTTPConfigCannotDivertTheCredential(t *testing.T) {
	h := newHostile(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	var proxied atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			proxied.Add(1)
			_ = c.Close()
		}
	}()
	jar := filepath.Join(filepath.Dir(h.marker), "cookies")
	for _, scope := range []string{h.srv.BaseURL() + "/", h.srvURL} {
		h.config("http."+scope+".proxy", "http://"+ln.Addr().String())
		h.config("http."+scope+".extraHeader", "Authorization: Basic ZXZpbDpldmls")
		h.config("http."+scope+".cookieFile", jar)
		h.config("http."+scope+".saveCookies", "true")
		h.config("http."+scope+".sslVerify", "false")
	}
	h.config("http.proxy", "http://"+ln.Addr().String())
	h.raw("ls-remote", h.srvURL)
	require.Positive(t, proxied.Load(), "control: plain git uses the proxy")
	proxied.Store(0)

	cred := &sandbox.Credential{Username: srvUser, Secret: srvPass}
	out, err := h.r.Run(context.Background(), Call{Dir: h.repo, Args: []string{"ls-remote", "--end-of-options", h.srvURL, "HEAD"},
		Cred: cred, RemoteURL: h.srvURL, Timeout: time.Minute})
	require.NoError(t, err)
	assert.Contains(t, string(out), "HEAD")
	assert.Zero(t, proxied.Load(), "no request went through the repository's proxy")
	assert.NoFileExists(t, jar)

	ins, err := h.r.Inspect(context.Background(), Call{Dir: h.repo})
	require.NoError(t, err)
	var keys []string
	for _, p := range ins.Poisoned {
		keys = append(keys, p.Key)
		assert.NotContains(t, p.String(), "ZXZpbDpldmls", "values are never reported")
	}
	assert.Contains(t, keys, "http."+h.srvURL+".proxy")
	assert.Contains(t, keys, "http.proxy")
}

// TestCredentialIsScopedToItsURL: the header goes to RemoteURL only (not to
// another repository of the same server), and the secret appears in no error.
func TestCredentialIsScopedToItsURL(t *testing.T) {
	h := newHostile(t)
	gittest.InitRepo(t, h.srv.RepoDir("o/other.git"), "main")
	cred := &sandbox.Credential{Username: srvUser, Secret: srvPass}
	_, err := h.r.Run(context.Background(), Call{Dir: t.TempDir(), Args: []string{"ls-remote", "--end-of-options", h.srv.URL("o/other.git")},
		Cred: cred, RemoteURL: h.srvURL, Timeout: time.Minute})
	require.Error(t, err)
	err = Classify(err, "ls-remote", sandboxapi.ErrRepoCacheUnavailable)
	require.ErrorIs(t, err, sandboxapi.ErrRepoAuthFailed)
	assert.NotContains(t, err.Error(), srvPass)

	wrong := &sandbox.Credential{Username: srvUser, Secret: "wrong-secret-value"}
	_, err = h.r.Run(context.Background(), Call{Dir: t.TempDir(), Args: []string{"ls-remote", "--end-of-options", h.srvURL},
		Cred: wrong, RemoteURL: h.srvURL, Timeout: time.Minute})
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "wrong-secret-value")
	assert.ErrorIs(t, Classify(err, "ls-remote", sandboxapi.ErrRepoCacheUnavailable), sandboxapi.ErrRepoAuthFailed)
}

// TestWorktreeConfigIsInspected: with extensions.worktreeConfig a linked
// worktree reads its own config.worktree; a filter defined there is
// neutralized for calls on that worktree too.
func TestWorktreeConfigIsInspected(t *testing.T) {
	h := newHostile(t)
	wt := filepath.Join(t.TempDir(), "wt")
	gittest.Git(t, h.repo, "worktree", "add", "-q", "-b", "w", wt)
	gittest.Git(t, wt, "config", "extensions.worktreeConfig", "true")
	gittest.Git(t, wt, "config", "--worktree", "filter.wt.clean", h.script+" clean")
	require.NoError(t, os.WriteFile(filepath.Join(wt, ".gitattributes"), []byte("*.txt filter=wt\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(wt, "w.txt"), []byte("w\n"), 0o644))
	admin := strings.TrimSpace(gittest.Git(t, wt, "rev-parse", "--absolute-git-dir"))
	env := []string{"GIT_DIR=" + admin, "GIT_WORK_TREE=" + wt}
	ins, err := h.r.Inspect(context.Background(), Call{Dir: wt, Env: env})
	require.NoError(t, err)
	var scopes []string
	for _, p := range ins.Poisoned {
		scopes = append(scopes, p.Scope+":"+p.Key)
	}
	assert.Contains(t, scopes, "worktree:filter.wt.clean")
	assert.Contains(t, scopes, "local:extensions.worktreeconfig")
	_, err = h.r.Run(context.Background(), Call{Dir: wt, Env: env, Args: []string{"add", "-A"}, Inspection: ins})
	require.NoError(t, err)
	assert.Empty(t, h.ran())
	rawGit(wt, "add", "-A", "--renormalize")
	assert.NotEmpty(t, h.ran(), "control")
}

// TestConfigEntriesMerge: GIT_CONFIG_* entries of Call.Env, Call.Config, the
// repository overrides and the credential header all reach git, in that
// order, under one GIT_CONFIG_COUNT.
func TestConfigEntriesMerge(t *testing.T) {
	h := newHostile(t)
	h.config("filter.x.clean", h.script)
	cred := &sandbox.Credential{Username: "u", Secret: "merge-test-secret"}
	out, err := h.r.Run(context.Background(), Call{Dir: h.repo,
		Args:   []string{"var", "-l"}, // not `config`: gets the repository overrides
		Env:    []string{"GIT_CONFIG_COUNT=2", "GIT_CONFIG_KEY_0=test.a", "GIT_CONFIG_VALUE_0=1", "GIT_CONFIG_KEY_1=test.b", "GIT_CONFIG_VALUE_1=2"},
		Config: []ConfigEntry{{Key: "test.c", Value: "3"}}, Cred: cred, RemoteURL: "https://example.invalid/o/r.git"})
	require.NoError(t, err)
	s := string(out)
	ia, ib, ic := strings.Index(s, "test.a=1"), strings.Index(s, "test.b=2"), strings.Index(s, "test.c=3")
	ifl := strings.Index(s, "filter.x.clean=\n")
	ih := strings.Index(s, "http.https://example.invalid/o/r.git.extraheader=Authorization: Basic ")
	require.True(t, ia >= 0 && ib > ia && ic > ib && ifl > ic && ih > ifl, "order a<b<c<filter<header:\n%s", s)

	_, err = h.r.Run(context.Background(), Call{Dir: h.repo, Args: []string{"status"}, Env: []string{"GIT_CONFIG_PARAMETERS='a.b'='c'"}})
	require.ErrorIs(t, err, sandboxapi.ErrInvalidArgument)
	_, err = h.r.Run(context.Background(), Call{Dir: h.repo, Args: []string{"status"}, Env: []string{"GIT_CONFIG_COUNT=2", "GIT_CONFIG_KEY_0=a.b"}})
	require.ErrorIs(t, err, sandboxapi.ErrInvalidArgument)
}

// TestStaleLocks: a lock file left by a dead process (old, open nowhere) is
// removed and the call retried; a young one, or one a live process has open,
// is ErrRepoLocked naming the path.
func TestStaleLocks(t *testing.T) {
	h := newHostile(t)
	gitDir := filepath.Join(h.repo, ".git")
	lock := filepath.Join(gitDir, "index.lock")
	env := []string{"GIT_DIR=" + gitDir, "GIT_WORK_TREE=" + h.repo}
	h.write("n.txt", "n\n")
	old := time.Now().Add(-10 * time.Minute)

	// A git process killed while it held index.lock (kill -9, as a worker
	// killed mid-commit): the lock stays behind, young and empty. No live
	// git runs in the repository, so the very next call clears it.
	crashed := exec.Command("git", "-C", h.repo, "update-index", "--index-info")
	crashed.Env = gittest.Env()
	in, err := crashed.StdinPipe()
	require.NoError(t, err)
	require.NoError(t, crashed.Start())
	require.Eventually(t, func() bool { _, err := os.Stat(lock); return err == nil }, 10*time.Second, 10*time.Millisecond)
	require.NoError(t, crashed.Process.Kill())
	_ = crashed.Wait()
	_ = in.Close()
	require.FileExists(t, lock, "the killed git left its lock")
	_, err = h.r.Run(context.Background(), Call{Dir: h.repo, Args: []string{"add", "--pathspec-from-file=-"}, Stdin: strings.NewReader("n.txt\n"), Env: env})
	require.NoError(t, err, "a young lock no live git holds is cleared on the retry")
	assert.NoFileExists(t, lock)
	assert.Contains(t, gittest.Git(t, h.repo, "diff", "--cached", "--name-only"), "n.txt")

	// A young lock while a git process runs in the repository (it may own
	// the lock without holding it open): left alone.
	h.write("m.txt", "m\n")
	require.NoError(t, os.WriteFile(lock, nil, 0o644))
	live := exec.Command("git", "-C", h.repo, "hash-object", "--stdin")
	live.Env = gittest.Env()
	liveIn, err := live.StdinPipe()
	require.NoError(t, err)
	require.NoError(t, live.Start())
	defer func() { _ = liveIn.Close(); _ = live.Wait() }()
	_, err = h.run("add", "-A")
	err = Classify(err, "git add", sandboxapi.ErrWorkspaceUnavailable)
	require.ErrorIs(t, err, sandboxapi.ErrRepoLocked)
	assert.Contains(t, err.Error(), lock)
	assert.FileExists(t, lock, "a young lock is left alone while git runs in the repository")
	// … but not past StaleLockAge.
	require.NoError(t, os.Chtimes(lock, old, old))
	_, err = h.r.Run(context.Background(), Call{Dir: h.repo, Args: []string{"add", "-A"}, Env: env})
	require.NoError(t, err, "an old lock open nowhere is stale")
	assert.NoFileExists(t, lock)
	_ = liveIn.Close()
	_ = live.Wait()

	// Held open by a live process: left alone even when old and with no git around.
	require.NoError(t, os.WriteFile(lock, nil, 0o644))
	f, err := os.OpenFile(lock, os.O_RDWR, 0)
	require.NoError(t, err)
	require.NoError(t, os.Chtimes(lock, old, old))
	_, err = h.run("add", "-A")
	require.ErrorIs(t, Classify(err, "git add", sandboxapi.ErrWorkspaceUnavailable), sandboxapi.ErrRepoLocked)
	assert.FileExists(t, lock)
	require.NoError(t, f.Close())
	require.NoError(t, os.Remove(lock))

	// A lock outside the call's repository directories is never touched.
	outside := filepath.Join(t.TempDir(), "x.lock")
	require.NoError(t, os.WriteFile(outside, nil, 0o644))
	require.NoError(t, os.Chtimes(outside, old, old))
	assert.False(t, h.r.removeStaleLock(outside, h.repo, []string{"GIT_DIR=" + gitDir}))
	assert.FileExists(t, outside)

	// Never, when disabled.
	r2, err := New(Options{HomeDir: t.TempDir(), StaleLockAge: -1})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(lock, nil, 0o644))
	require.NoError(t, os.Chtimes(lock, old, old))
	assert.False(t, r2.removeStaleLock(lock, h.repo, nil))
}

// TestNoPromptNoLeftover: a remote that asks for credentials gets none and no
// prompt: the call fails fast even with a terminal-less stdin that never closes.
func TestNoPromptNoLeftover(t *testing.T) {
	h := newHostile(t)
	pr, pw := io.Pipe()
	defer pw.Close()
	start := time.Now()
	_, err := h.r.Run(context.Background(), Call{Dir: t.TempDir(), Args: []string{"ls-remote", "--end-of-options", h.srvURL}, Stdin: io.LimitReader(pr, 0), Timeout: time.Minute})
	require.Error(t, err)
	assert.ErrorIs(t, Classify(err, "ls-remote", sandboxapi.ErrRepoCacheUnavailable), sandboxapi.ErrRepoAuthFailed)
	assert.Less(t, time.Since(start), 10*time.Second)
	var ge *Error
	require.True(t, errors.As(err, &ge))
}

// TestInspectionSets: Sets names the variables the repository's own
// configuration sets (as `git config --list` spells them), never the
// runner's `-c` hardening, and a nil Inspection sets nothing.
func TestInspectionSets(t *testing.T) {
	h := newHostile(t)
	ins, err := h.r.Inspect(context.Background(), Call{Dir: h.repo})
	require.NoError(t, err)
	assert.False(t, ins.Sets("core.attributesfile"))
	assert.False(t, ins.Sets("core.hookspath"), "the runner's own -c is not the repository's")
	h.config("core.attributesFile", "/dev/null")
	ins, err = h.r.Inspect(context.Background(), Call{Dir: h.repo})
	require.NoError(t, err)
	assert.True(t, ins.Sets("core.attributesfile"))
	assert.False(t, (*Inspection)(nil).Sets("core.attributesfile"))
}
