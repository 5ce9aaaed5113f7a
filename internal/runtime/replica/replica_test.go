package replica

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/gitx"
	"github.com/sandboxcore/sandboxcore/internal/runtime/runtimetest"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// dirTransport is a Transport over a directory of this machine standing for
// the sandbox: scripts run with the real sh, git and tar; files are copied.
type dirTransport struct {
	// failDownload makes the next Download fail (a dropped response).
	failDownload bool
}

func (d *dirTransport) Upload(_ context.Context, local, remote string) error {
	if err := os.MkdirAll(filepath.Dir(remote), 0o755); err != nil {
		return err
	}
	return copyFile(local, remote)
}

func (d *dirTransport) Run(ctx context.Context, script string) (int, []byte, error) {
	cmd := exec.CommandContext(ctx, "sh", "-c", script)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent"}
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), out, nil
	}
	return 0, out, err
}

func (d *dirTransport) Download(_ context.Context, remote, local string, _ int64) error {
	if d.failDownload {
		d.failDownload = false
		return sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "connection reset")
	}
	return copyFile(remote, local)
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

type fixture struct {
	t      *testing.T
	wt     string // host worktree
	bare   string
	remote string // replica workdir
	state  string // remote state dir
	rep    *Replica
	tr     *dirTransport
	opts   Options
}

func newFixture(t *testing.T, readOnly bool) *fixture {
	t.Helper()
	bare, wt := runtimetest.GitFixture(t)
	git, err := gitx.New(gitx.Options{HomeDir: t.TempDir()})
	require.NoError(t, err)
	sb := t.TempDir()
	f := &fixture{t: t, wt: wt, bare: bare, remote: filepath.Join(sb, "workspace"), state: filepath.Join(sb, "state"), tr: &dirTransport{}}
	f.opts = Options{
		Source:    Source{WorkTree: wt, GitDir: filepath.Join(bare, "worktrees", "w1"), ReadOnly: readOnly},
		Remote:    Layout{Workdir: f.remote, StateDir: f.state},
		StateFile: filepath.Join(t.TempDir(), "replica.state"),
		Git:       git,
		LockGit:   true,
	}
	f.rep, err = Open(f.opts)
	require.NoError(t, err)
	return f
}

func (f *fixture) sync() Report {
	f.t.Helper()
	rep, err := f.rep.Sync(context.Background(), f.tr)
	require.NoError(f.t, err)
	return rep
}

// sh runs a script in the replica (as a command would).
func (f *fixture) sh(script string) string {
	f.t.Helper()
	cmd := exec.Command("sh", "-c", script)
	cmd.Dir = f.remote
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + f.t.TempDir(), "GIT_AUTHOR_NAME=a", "GIT_AUTHOR_EMAIL=a@a", "GIT_COMMITTER_NAME=a", "GIT_COMMITTER_EMAIL=a@a"}
	out, err := cmd.CombinedOutput()
	require.NoError(f.t, err, "%s: %s", script, out)
	return string(out)
}

func read(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	return string(b)
}

func TestSyncBothWays(t *testing.T) {
	f := newFixture(t, false)
	require.NoError(t, os.WriteFile(filepath.Join(f.wt, "untracked.txt"), []byte("u\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(f.wt, ".gitignore"), []byte("node_modules/\n*.log\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(f.wt, "host.log"), []byte("ignored but from the host\n"), 0o644))
	f.sync()

	// The replica has the files and a working git.
	require.Equal(t, "a\n", read(t, filepath.Join(f.remote, "a.txt")))
	require.Equal(t, "u\n", read(t, filepath.Join(f.remote, "untracked.txt")))
	require.Equal(t, "ignored but from the host\n", read(t, filepath.Join(f.remote, "host.log")))
	out := f.sh("git status --porcelain; git log --oneline; git rev-parse --abbrev-ref HEAD")
	require.Contains(t, out, "?? untracked.txt")
	require.Contains(t, out, "?? .gitignore")
	require.Contains(t, out, "init")
	require.Contains(t, out, "agent/edits-1")
	require.NotContains(t, out, " M a.txt")

	// git add/commit are refused in the replica (read-only .git), unless
	// the command runs as root (this test may).
	if os.Getuid() != 0 {
		cmd := exec.Command("sh", "-c", "git add -A")
		cmd.Dir = f.remote
		o, err := cmd.CombinedOutput()
		require.Error(t, err, "%s", o)
	}

	// Changes made in the replica come back; ignored ones stay there.
	f.sh(`echo more >> a.txt && mkdir -p d/e && printf 'new\0bin' > d/e/new.bin && rm untracked.txt &&
		printf '#!/bin/sh\necho x\n' > run.sh && chmod +x run.sh && ln -s a.txt link && mkdir -p node_modules/x &&
		echo cache > node_modules/x/index.js && echo log >> build.log && echo changed >> host.log &&
		printf 'x\r\ny\r\n' > crlf.txt`)
	rep := f.sync()
	require.Empty(t, rep.Warnings)
	require.Equal(t, "a\nmore\n", read(t, filepath.Join(f.wt, "a.txt")))
	require.Equal(t, "new\x00bin", read(t, filepath.Join(f.wt, "d/e/new.bin")))
	require.Equal(t, "x\r\ny\r\n", read(t, filepath.Join(f.wt, "crlf.txt")), "bytes are exact")
	require.NoFileExists(t, filepath.Join(f.wt, "untracked.txt"))
	fi, err := os.Stat(filepath.Join(f.wt, "run.sh"))
	require.NoError(t, err)
	require.NotZero(t, fi.Mode()&0o100, "the executable bit comes back")
	target, err := os.Readlink(filepath.Join(f.wt, "link"))
	require.NoError(t, err)
	require.Equal(t, "a.txt", target)
	require.NoDirExists(t, filepath.Join(f.wt, "node_modules"), "ignored files stay in the replica")
	require.NoFileExists(t, filepath.Join(f.wt, "build.log"))
	require.Equal(t, "ignored but from the host\nchanged\n", read(t, filepath.Join(f.wt, "host.log")), "a host file stays tracked even when ignored")

	// Changes on the host go up; an idle pass changes nothing.
	require.NoError(t, os.WriteFile(filepath.Join(f.wt, "a.txt"), []byte("from host\n"), 0o644))
	require.NoError(t, os.Remove(filepath.Join(f.wt, "d/e/new.bin")))
	rep = f.sync()
	require.Zero(t, rep.Changed+rep.Deleted)
	require.Equal(t, "from host\n", read(t, filepath.Join(f.remote, "a.txt")))
	require.NoFileExists(t, filepath.Join(f.remote, "d/e/new.bin"))
	require.DirExists(t, filepath.Join(f.remote, "node_modules/x"), "caches survive")
	rep = f.sync()
	require.Zero(t, rep.Changed+rep.Deleted)

	// A commit on the host moves the replica's HEAD (incremental bundle).
	git := func(args ...string) string {
		cmd := exec.Command("git", append([]string{"-c", "user.name=h", "-c", "user.email=h@h"}, args...)...)
		cmd.Dir = f.wt
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		return string(out)
	}
	git("add", "-A")
	git("commit", "-qm", "host commit")
	f.sync()
	out = f.sh("git log --oneline -1; git status --porcelain")
	require.Contains(t, out, "host commit")
	require.Equal(t, 1, strings.Count(out, "\n"), "clean after the host's commit: %s", out)
}

func TestNothingIsLostWhenAResultIsDropped(t *testing.T) {
	f := newFixture(t, false)
	f.sync()
	f.sh("echo one > one.txt")
	f.tr.failDownload = true
	_, err := f.rep.Sync(context.Background(), f.tr)
	require.ErrorIs(t, err, sandboxapi.ErrRuntimeUnavailable)
	require.NoFileExists(t, filepath.Join(f.wt, "one.txt"))
	f.sh("echo two > two.txt")
	f.sync()
	require.Equal(t, "one\n", read(t, filepath.Join(f.wt, "one.txt")))
	require.Equal(t, "two\n", read(t, filepath.Join(f.wt, "two.txt")))
}

func TestRemoteStateLostAndSandboxRecreated(t *testing.T) {
	f := newFixture(t, false)
	f.sync()
	f.sh("echo r > remote.txt")
	require.NoError(t, os.RemoveAll(f.state)) // the agent wiped the bookkeeping
	rep := f.sync()
	require.GreaterOrEqual(t, rep.Changed, 1)
	require.Equal(t, "r\n", read(t, filepath.Join(f.wt, "remote.txt")))

	// The sandbox vanished: everything goes up again, nothing on the host changes.
	before := runtimetest.TreeSum(t, f.wt)
	require.NoError(t, os.RemoveAll(f.remote))
	require.NoError(t, os.RemoveAll(f.state))
	require.NoError(t, f.rep.Reset())
	f.sync()
	require.Equal(t, before, runtimetest.TreeSum(t, f.wt))
	require.Equal(t, "r\n", read(t, filepath.Join(f.remote, "remote.txt")))
	require.Contains(t, f.sh("git log --oneline"), "init")
	require.Equal(t, 1, f.rep.Status().Recreated)

	// A worker restart (a new Replica over the same state file) continues.
	rep2, err := Open(f.opts)
	require.NoError(t, err)
	f.rep = rep2
	f.sh("echo after > after.txt")
	f.sync()
	require.Equal(t, "after\n", read(t, filepath.Join(f.wt, "after.txt")))
}

func TestReadOnlyReplicaIsReverted(t *testing.T) {
	f := newFixture(t, true)
	f.sync()
	f.sh("echo changed > a.txt; echo new > new.txt")
	rep := f.sync()
	require.Equal(t, 2, rep.Reverted)
	require.Equal(t, "a\n", read(t, filepath.Join(f.wt, "a.txt")))
	require.NoFileExists(t, filepath.Join(f.wt, "new.txt"))
	require.True(t, f.rep.NeedsRevert())
	f.sync()
	require.Equal(t, "a\n", read(t, filepath.Join(f.remote, "a.txt")))
	require.NoFileExists(t, filepath.Join(f.remote, "new.txt"))
	require.False(t, f.rep.NeedsRevert())
}

func TestHostileResultsAreRefused(t *testing.T) {
	for _, p := range []string{"../x", "/etc/passwd", "a/../../x", ".git/config", "sub/.GIT/hooks/x", "a//b", ""} {
		require.Error(t, validPath(p), p)
	}
	require.NoError(t, validPath("a/b.txt"))
	require.NoError(t, validPath("-n"))

	f := newFixture(t, false)
	f.sync()
	// A replica that lies: a diff naming a path outside, or a tar entry the
	// diff does not name, is refused and nothing is written.
	f.sh(`echo x > ok.txt`)
	p, err := f.rep.Begin(context.Background())
	require.NoError(t, err)
	defer p.Close()
	_, _, err = p.run(context.Background(), &lyingTransport{f.tr}, "")
	require.ErrorIs(t, err, sandboxapi.ErrRuntimeUnavailable)
	require.NoFileExists(t, filepath.Join(filepath.Dir(f.wt), "evil"))
	require.NoFileExists(t, filepath.Join(f.wt, "ok.txt"))
}

// lyingTransport rewrites the result's diff to name a path outside.
type lyingTransport struct{ *dirTransport }

func (l *lyingTransport) Run(ctx context.Context, script string) (int, []byte, error) {
	script = strings.Replace(script, "rp_collect\n", "rp_collect\nprintf ':000000 100644 0000000000000000000000000000000000000000 e69de29bb2d1d6434b8b29ae775ad8c2e48c5391 A\\000../evil\\000' >> \"$P/out/diff\"\n", 1)
	return l.dirTransport.Run(ctx, script)
}
