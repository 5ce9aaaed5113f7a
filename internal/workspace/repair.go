package workspace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/sandboxcore/sandboxcore/internal/gitx"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// The host's own git metadata of a worktree, repaired wherever it is found
// broken (docs/DESIGN.md "Workspace lifecycle"): the worktree's ".git" file
// ("gitdir: <admin>"), its administrative directory <bare>/worktrees/<name>
// (HEAD, index, commondir, the recorded base) and that directory's "gitdir"
// back-pointer to <wt>/.git. An agent may delete or overwrite the ".git"
// file from a command (the file API refuses it, a shell does not), and a
// `git worktree prune` on the repository then deletes the administrative
// directory of a worktree whose ".git" is gone. Neither may strand the
// workspace: the files of the worktree are never touched by a repair.

// RepairMetadata detects and repairs ws's worktree metadata before an
// operation (the activities call it on every operation; openWorktree and
// Ensure on theirs): a missing or wrong ".git" file is rewritten (a ".git"
// directory the agent put there is moved aside to ".git.agent-<n>", not
// deleted), and a worktree directory that is no longer registered (its
// administrative directory pruned, or its back-pointer corrupted) is
// registered again under the repository lock — HEAD on ws's branch (or, for
// analysis, detached at its base commit), the index read from HEAD, the
// base commit recorded from ws — so uncommitted changes show as unstaged
// and untracked changes afterwards and nothing in the worktree is lost.
// A workspace whose directory is missing is left to Ensure. Errors:
// ErrInvalidArgument (LocalPath, branch), ErrRepoLocked, ErrWorkspaceUnavailable
// (the administrative directory of its name belongs to another worktree,
// or git failed), ErrInsufficientDisk.
func (m *Manager) RepairMetadata(ctx context.Context, ws sandboxapi.Workspace) error {
	l, err := locate(ws)
	if err != nil {
		return err
	}
	if err := m.onVolume(ctx, l.wt); err != nil {
		return err
	}
	if !isDir(l.wt) {
		return nil
	}
	_, err = m.repairAt(ctx, ws, l)
	return err
}

// repairAt repairs the metadata of ws's worktree l, whose directory exists
// (RepairMetadata), and returns its administrative directory.
func (m *Manager) repairAt(ctx context.Context, ws sandboxapi.Workspace, l loc) (string, error) {
	admin := adminDir(l)
	if admin == "" {
		unlock, err := m.locker.LockRepo(ctx, ws.Repo)
		if err != nil {
			if sandboxapi.KindOf(err) == nil {
				err = sandboxapi.Errorf(sandboxapi.ErrRepoLocked, "lock repository %s: %w", ws.Repo.Key(), err)
			}
			return "", err
		}
		defer unlock()
		if admin = adminDir(l); admin == "" {
			if admin, err = m.reregister(ctx, l, ws); err != nil {
				return "", err
			}
		}
	}
	return admin, m.fixGitFile(l.wt, admin)
}

// fixGitFile makes <wt>/.git the file "gitdir: <admin>" when it is anything
// else (missing, other content, a symlink); a directory there is the
// agent's and is moved aside to ".git.agent-<unix nanoseconds>". Errors: an
// fsError.
func (m *Manager) fixGitFile(wt, admin string) error {
	p := filepath.Join(wt, ".git")
	want := "gitdir: " + admin
	right := func() bool {
		// Never following a link, never hanging on a fifo swapped in
		// since the Lstat, never reading more than a .git file holds.
		f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
		if err != nil {
			return false
		}
		defer f.Close()
		if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
			return false
		}
		b, err := io.ReadAll(io.LimitReader(f, 4096))
		return err == nil && strings.TrimSpace(string(b)) == want
	}
	fi, err := os.Lstat(p)
	switch {
	case err == nil && fi.Mode().IsRegular():
		if right() {
			return nil
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fsError(err, "replace .git file")
		}
	case err == nil && fi.IsDir():
		aside := filepath.Join(wt, fmt.Sprintf(".git.agent-%d", m.now().UnixNano()))
		if err := os.Rename(p, aside); err != nil {
			return fsError(err, "move the agent's .git directory aside")
		}
		m.log.Warn("workspace: moved a .git directory aside", "path", wt, "to", aside)
	case err == nil:
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fsError(err, "replace .git")
		}
	case !errors.Is(err, fs.ErrNotExist):
		return fsError(err, "inspect .git")
	}
	// O_EXCL: never follows a symlink planted meanwhile.
	gf, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err == nil {
		_, err = gf.WriteString(want + "\n")
		err = errors.Join(err, gf.Close())
	}
	if errors.Is(err, fs.ErrExist) && right() {
		return nil // a concurrent repair wrote it
	}
	if err != nil {
		return fsError(err, "restore .git file")
	}
	m.log.Warn("workspace: restored the .git file", "path", wt)
	return nil
}

// reregister registers the existing worktree directory l again (caller
// holds the repository lock; adminDir(l) is ""), as RepairMetadata
// describes, and returns its administrative directory. An administrative
// directory of its name whose back-pointer is wrong is reused (its HEAD
// and index kept) unless another worktree's ".git" points at it.
func (m *Manager) reregister(ctx context.Context, l loc, ws sandboxapi.Workspace) (string, error) {
	if !simpleName(strings.ReplaceAll(l.name, ".", "-")) {
		return "", sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "workspace %s: its path has no usable directory name", ws.ID)
	}
	branch := ws.BranchName
	if ws.Mode == sandboxapi.ModeAnalysis {
		branch = ""
	} else if err := sandboxapi.ValidateRef(branch); err != nil {
		return "", err
	}
	if !isHex(ws.BaseCommit) {
		return "", sandboxapi.Errorf(sandboxapi.ErrWorkspaceUnavailable, "workspace %s: worktree %s is not registered and no base commit is recorded to register it again", ws.ID, l.wt)
	}
	admin := filepath.Join(l.bare, WorktreesDir, l.name)
	if owner, ok := adminOwner(admin); ok && owner != filepath.Join(l.wt, ".git") {
		return "", sandboxapi.Errorf(sandboxapi.ErrWorkspaceUnavailable, "workspace %s: the administrative directory %s belongs to the worktree at %s", ws.ID, admin, filepath.Dir(owner))
	}
	bg := m.bareGit(l.bare)
	if err := os.MkdirAll(admin, 0o755); err != nil {
		return "", fsError(err, "create the administrative directory of "+l.wt)
	}
	real, err := filepath.EvalSymlinks(l.wt)
	if err != nil {
		return "", fsError(err, "resolve worktree "+l.wt)
	}
	write := func(name, content string) error {
		if err := os.WriteFile(filepath.Join(admin, name), []byte(content+"\n"), 0o644); err != nil {
			return fsError(err, "write "+name)
		}
		return nil
	}
	if err := errors.Join(write("gitdir", filepath.Join(real, ".git")), write("commondir", "../..")); err != nil {
		return "", err
	}
	g := gitCtx{m: m, dir: l.wt, ins: bg.ins, env: []string{"GIT_DIR=" + admin, "GIT_WORK_TREE=" + l.wt}}
	headOK := false
	if _, err := os.Stat(filepath.Join(admin, "HEAD")); err == nil {
		_, err := g.run(ctx, "rev-parse", "--verify", "-q", "HEAD^{commit}")
		headOK = err == nil
	}
	if !headOK {
		if err := m.reregisterHead(ctx, bg, admin, branch, ws.BaseCommit); err != nil {
			return "", err
		}
	}
	if _, err := os.Stat(filepath.Join(admin, "index")); err != nil {
		// The index from HEAD; the files are not touched, so what the agent
		// changed shows as unstaged or untracked.
		if _, err := g.run(ctx, "read-tree", "HEAD"); err != nil {
			return "", gitx.Classify(err, "git read-tree HEAD", sandboxapi.ErrWorkspaceUnavailable)
		}
		_, _ = g.run(ctx, "update-index", "-q", "--refresh")
	}
	if readBase(admin) == "" {
		created := ws.CreatedAt
		if created.IsZero() {
			created = m.now()
		}
		if err := writeBase(admin, ws.BaseCommit, created); err != nil {
			return "", err
		}
	}
	m.log.Warn("workspace: registered its worktree again", "workspace_id", ws.ID, "path", l.wt, "branch", branch)
	return admin, nil
}

// reregisterHead writes admin's HEAD: on refs/heads/<branch> (created at
// base when the repo cache lacks it), or detached at base (analysis).
func (m *Manager) reregisterHead(ctx context.Context, bg gitCtx, admin, branch, base string) error {
	if branch == "" {
		if err := os.WriteFile(filepath.Join(admin, "HEAD"), []byte(base+"\n"), 0o644); err != nil {
			return fsError(err, "write HEAD")
		}
		return nil
	}
	tip, err := m.firstCommit(ctx, bg, "refs/heads/"+branch)
	if err != nil {
		return err
	}
	if tip == "" {
		if _, err := bg.run(ctx, "branch", "--quiet", "--no-track", "--end-of-options", branch, base); err != nil {
			return gitx.Classify(err, "git branch "+branch, sandboxapi.ErrWorkspaceUnavailable)
		}
	}
	if err := os.WriteFile(filepath.Join(admin, "HEAD"), []byte("ref: refs/heads/"+branch+"\n"), 0o644); err != nil {
		return fsError(err, "write HEAD")
	}
	return nil
}

// adminOwner returns the <wt>/.git an administrative directory's gitdir
// names when that worktree is live (its .git file points back at admin).
func adminOwner(admin string) (string, bool) {
	b, err := os.ReadFile(filepath.Join(admin, "gitdir"))
	if err != nil {
		return "", false
	}
	owner := filepath.Clean(strings.TrimSpace(string(b)))
	link, err := os.ReadFile(owner)
	if err != nil || strings.TrimSpace(string(link)) != "gitdir: "+admin {
		return "", false
	}
	return owner, true
}
