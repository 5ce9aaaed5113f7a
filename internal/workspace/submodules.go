package workspace

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/sandboxcore/sandboxcore/internal/gitx"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// Submodules (README "Configuration": SANDBOX_SUBMODULES; docs/API.md
// "Submodules"). A worktree checkout leaves each submodule an empty
// directory (its gitlink). The acquire activity fetches each submodule's
// repository into its own repo cache, with the user's credential per call
// (never written to any config or .gitmodules), and CheckoutSubmodule then
// puts the recorded commit into the workspace: a git directory of the
// submodule inside the superproject worktree's administrative directory
// (<bare>/worktrees/<name>/modules/<hash of the path>, git's own place for
// a linked worktree's submodules, so the isolated runtimes see it read-only
// at the same path), holding only that commit's objects (a shallow copy
// out of the submodule's repo cache: no link to it, so evicting that cache
// breaks nothing), the files checked out by `git read-tree -u`, and
// <path>/.git naming that git directory. Nothing of the superproject's
// configuration is written (git inside the runtime therefore lists the
// submodule as not active in `git submodule status`, while `git status`,
// `git diff` and `git -C <path> log` work). Nested submodules are not
// checked out. Changes inside a checked-out submodule show in status as
// " M <path>" and make the workspace dirty; an eviction backup cannot save
// them, so such a workspace is never evicted (Backup fails, it stays).

// SubmoduleMarker, in a submodule's git directory, holds the commit
// CheckoutSubmodule checked out; it is written last.
const SubmoduleMarker = "sandboxcore-submodule"

// Submodules lists the gitlinks of the workspace's index with their
// .gitmodules entries (from HEAD's .gitmodules, read as a blob: includes
// are not followed) and whether each is checked out. Errors: as Status.
func (m *Manager) Submodules(ctx context.Context, ws sandboxapi.Workspace) ([]sandbox.Submodule, error) {
	w, err := m.openWorktree(ctx, ws)
	if err != nil {
		return nil, err
	}
	return m.submodules(ctx, w)
}

func (m *Manager) submodules(ctx context.Context, w *wtRepo) ([]sandbox.Submodule, error) {
	out, err := w.stageEntries(ctx)
	if err != nil {
		return nil, err
	}
	var subs []sandbox.Submodule
	for _, rec := range strings.Split(string(out), "\x00") {
		meta, p, ok := strings.Cut(rec, "\t")
		if f := strings.Fields(meta); ok && len(f) == 3 && f[0] == "160000" && f[2] == "0" && isFullID(f[1]) {
			subs = append(subs, sandbox.Submodule{Path: p, Commit: f[1]})
		}
	}
	if len(subs) == 0 {
		return nil, nil
	}
	names, urls := map[string]string{}, map[string]string{}
	cfg, err := w.git.with(readEnv).run(ctx, "config", "-z", "--blob", "HEAD:.gitmodules", "--get-regexp", `^submodule\..*\.(path|url)$`)
	if err == nil {
		for _, rec := range strings.Split(string(cfg), "\x00") {
			key, val, ok := strings.Cut(rec, "\n")
			if !ok {
				continue
			}
			name, ok := strings.CutPrefix(key, "submodule.")
			if !ok {
				continue
			}
			switch {
			case strings.HasSuffix(name, ".path"):
				names[val] = strings.TrimSuffix(name, ".path")
			case strings.HasSuffix(name, ".url"):
				urls[strings.TrimSuffix(name, ".url")] = val
			}
		}
	}
	for i := range subs {
		s := &subs[i]
		s.Name = names[s.Path]
		s.URL = urls[s.Name]
		s.CheckedOut = m.submoduleCheckedOut(w, s)
	}
	return subs, nil
}

// submoduleGitDir is where the git directory of the submodule at path lives.
func submoduleGitDir(w *wtRepo, path string) string {
	sum := sha256.Sum256([]byte(path))
	return filepath.Join(w.admin, "modules", "sandboxcore-"+hex.EncodeToString(sum[:10]))
}

// submoduleCheckedOut reports whether s's commit is checked out by
// CheckoutSubmodule (marker and .git file in place) or the directory holds
// some other git repository (the agent's: left alone, not uninitialised).
func (m *Manager) submoduleCheckedOut(w *wtRepo, s *sandbox.Submodule) bool {
	root, err := os.OpenRoot(w.wt)
	if err != nil {
		return false
	}
	defer root.Close()
	if _, err := root.Lstat(filepath.Join(s.Path, ".git")); err != nil {
		return false
	}
	gd := submoduleGitDir(w, s.Path)
	if b, err := os.ReadFile(filepath.Join(gd, SubmoduleMarker)); err == nil {
		return strings.TrimSpace(string(b)) == s.Commit
	}
	return true
}

// uninitializedSubmodules lists the gitlink paths not checked out (Status).
func (m *Manager) uninitializedSubmodules(ctx context.Context, w *wtRepo) ([]string, error) {
	subs, err := m.submodules(ctx, w)
	if err != nil {
		return nil, err
	}
	return uninitializedPaths(subs), nil
}

// uninitializedPaths lists the paths of the subs not checked out, in order
// (nil when every one is).
func uninitializedPaths(subs []sandbox.Submodule) []string {
	var out []string
	for _, s := range subs {
		if !s.CheckedOut {
			out = append(out, s.Path)
		}
	}
	return out
}

// UninitializedSubmodules lists the workspace's gitlinks whose recorded
// commit is not checked out. Errors: as Status.
func (m *Manager) UninitializedSubmodules(ctx context.Context, ws sandboxapi.Workspace) ([]string, error) {
	w, err := m.openWorktree(ctx, ws)
	if err != nil {
		return nil, err
	}
	return m.uninitializedSubmodules(ctx, w)
}

// CheckoutSubmodule checks out sub.Commit at sub.Path from the bare repo
// cache mirror (see the top of this file). The gitlink's directory must be
// empty (a directory holding anything is never touched: ErrConflict); a
// half-done earlier attempt is redone. Errors: ErrRefNotFound (the mirror
// lacks the commit), ErrConflict, ErrInvalidArgument (a path that is not a
// gitlink of the index), ErrInsufficientDisk, ErrWorkspaceUnavailable.
func (m *Manager) CheckoutSubmodule(ctx context.Context, ws sandboxapi.Workspace, sub sandbox.Submodule, mirror string) error {
	if !filepath.IsAbs(mirror) || filepath.Base(mirror) != BareDirName {
		return sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "submodule %s: mirror %q is not a repo cache", sub.Path, mirror)
	}
	w, err := m.openWorktree(ctx, ws)
	if err != nil {
		return err
	}
	subs, err := m.submodules(ctx, w)
	if err != nil {
		return err
	}
	var cur *sandbox.Submodule
	for i := range subs {
		if subs[i].Path == sub.Path && subs[i].Commit == sub.Commit {
			cur = &subs[i]
		}
	}
	if cur == nil {
		return sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "%s at %s is not a gitlink of workspace %s", sub.Path, sub.Commit, ws.ID)
	}
	if cur.CheckedOut {
		return nil
	}
	root, err := os.OpenRoot(w.wt)
	if err != nil {
		return fsError(err, "open worktree")
	}
	defer root.Close()
	if err := emptySubmoduleDir(root, sub.Path); err != nil {
		return err
	}
	mg := m.bareGit(mirror)
	if c, err := m.firstCommit(ctx, mg, sub.Commit); err != nil {
		return err
	} else if c == "" {
		return sandboxapi.Errorf(sandboxapi.ErrRefNotFound, "submodule %s: commit %s is not in its repository", sub.Path, sub.Commit)
	}
	gd := submoduleGitDir(w, sub.Path)
	sg, err := m.initSubmoduleGitDir(ctx, gd)
	if err != nil {
		return err
	}
	if err := m.copySubmoduleCommit(ctx, w, mg, sg, sub.Commit); err != nil {
		return err
	}
	if err := m.checkoutSubmoduleFiles(ctx, w, root, sub, gd); err != nil {
		return err
	}
	m.log.Info("workspace: checked out a submodule", "workspace_id", ws.ID, "path", sub.Path, "commit", sub.Commit)
	return nil
}

// emptySubmoduleDir makes sure the gitlink's directory p (relative to the
// worktree root) exists and is empty: created when missing; a file in its
// place or a directory holding anything is ErrConflict (never touched).
// Errors: ErrConflict, ErrInsufficientDisk, ErrWorkspaceUnavailable.
func emptySubmoduleDir(root *os.Root, p string) error {
	fi, err := root.Lstat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := root.MkdirAll(p, 0o755); err != nil {
			return fsError(err, "create submodule directory "+p)
		}
	case err != nil:
		return fsError(err, "inspect submodule directory "+p)
	case !fi.IsDir():
		return sandboxapi.Errorf(sandboxapi.ErrConflict, "submodule %s: a file is in its place", p)
	}
	if entries, err := readDirNames(root, p); err != nil {
		return fsError(err, "read submodule directory "+p)
	} else if len(entries) > 0 {
		return sandboxapi.Errorf(sandboxapi.ErrConflict, "submodule %s: its directory is not empty; it is left as it is", p)
	}
	return nil
}

// initSubmoduleGitDir makes gd a new, empty git directory (a half-made one
// from an earlier attempt is removed first): `git init --bare` with no
// template, then core.bare=false so it can have a work tree. It returns
// the place to run git in it. Errors: ErrInsufficientDisk,
// ErrWorkspaceUnavailable.
func (m *Manager) initSubmoduleGitDir(ctx context.Context, gd string) (gitCtx, error) {
	if err := os.RemoveAll(gd); err != nil {
		return gitCtx{}, fsError(err, "remove a half-made submodule git directory")
	}
	if err := os.MkdirAll(filepath.Dir(gd), 0o755); err != nil {
		return gitCtx{}, fsError(err, "create modules directory")
	}
	if _, err := m.git.Run(ctx, gitx.Call{Dir: filepath.Dir(gd), Args: []string{"init", "--bare", "--quiet", "--template=", gd}}); err != nil {
		return gitCtx{}, gitx.Classify(err, "git init (submodule)", sandboxapi.ErrWorkspaceUnavailable)
	}
	sg := gitCtx{m: m, dir: gd, env: []string{"GIT_DIR=" + gd}}
	if _, err := sg.run(ctx, "config", "--file", filepath.Join(gd, "config"), "core.bare", "false"); err != nil {
		return gitCtx{}, gitx.Classify(err, "git config (submodule)", sandboxapi.ErrWorkspaceUnavailable)
	}
	return sg, nil
}

// copySubmoduleCommit copies commit's objects — its tree, not its history
// — from the mirror (mg) into the submodule's git directory (sg) as one
// pack (`rev-list --objects --no-walk`, `pack-objects`, `index-pack`
// through a temporary file in the worktree's administrative directory),
// records it as the only shallow commit and points HEAD at it. Errors:
// ErrInsufficientDisk, ErrWorkspaceUnavailable.
func (m *Manager) copySubmoduleCommit(ctx context.Context, w *wtRepo, mg, sg gitCtx, commit string) error {
	list, err := mg.run(ctx, "rev-list", "--objects", "--no-walk", "--end-of-options", commit, "--")
	if err != nil {
		return gitx.Classify(err, "git rev-list --objects (submodule)", sandboxapi.ErrWorkspaceUnavailable)
	}
	var ids bytes.Buffer
	for _, l := range strings.Split(string(list), "\n") {
		if id, _, _ := strings.Cut(l, " "); isFullID(id) {
			ids.WriteString(id + "\n")
		}
	}
	pack, err := os.CreateTemp(w.admin, "sandboxcore-submodule-pack-*")
	if err != nil {
		return fsError(err, "temporary pack")
	}
	defer os.Remove(pack.Name())
	_, err = mg.runIO(ctx, &ids, pack, "pack-objects", "--stdout", "-q")
	if cerr := pack.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return gitx.Classify(err, "git pack-objects (submodule)", sandboxapi.ErrWorkspaceUnavailable)
	}
	in, err := os.Open(pack.Name())
	if err != nil {
		return fsError(err, "temporary pack")
	}
	_, err = sg.runIO(ctx, in, nil, "index-pack", "--stdin")
	_ = in.Close()
	if err != nil {
		return gitx.Classify(err, "git index-pack (submodule)", sandboxapi.ErrWorkspaceUnavailable)
	}
	if err := os.WriteFile(filepath.Join(sg.dir, "shallow"), []byte(commit+"\n"), 0o644); err != nil {
		return fsError(err, "submodule shallow file")
	}
	if _, err := sg.run(ctx, "update-ref", "--no-deref", "HEAD", commit); err != nil {
		return gitx.Classify(err, "git update-ref HEAD (submodule)", sandboxapi.ErrWorkspaceUnavailable)
	}
	return nil
}

// checkoutSubmoduleFiles checks sub.Commit's files out into the submodule's
// directory (`git read-tree -u --reset` with gd as GIT_DIR, through the
// hardened runner), writes <path>/.git naming gd (never over an existing
// one) and, last, the SubmoduleMarker. Errors: ErrInsufficientDisk,
// ErrWorkspaceUnavailable.
func (m *Manager) checkoutSubmoduleFiles(ctx context.Context, w *wtRepo, root *os.Root, sub sandbox.Submodule, gd string) error {
	wt := filepath.Join(w.wt, filepath.FromSlash(sub.Path))
	checkout := gitCtx{m: m, dir: wt, env: []string{"GIT_DIR=" + gd, "GIT_WORK_TREE=" + wt}}
	checkout, err := m.inspected(ctx, checkout)
	if err != nil {
		return err
	}
	if _, err := checkout.run(ctx, "read-tree", "-u", "--reset", "--end-of-options", sub.Commit); err != nil {
		return gitx.Classify(err, "git read-tree -u (submodule)", sandboxapi.ErrWorkspaceUnavailable)
	}
	gf, err := root.OpenFile(filepath.Join(sub.Path, ".git"), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err == nil {
		_, err = gf.WriteString("gitdir: " + gd + "\n")
		err = errors.Join(err, gf.Close())
	}
	if err != nil {
		return fsError(err, "write the submodule's .git file")
	}
	if err := os.WriteFile(filepath.Join(gd, SubmoduleMarker), []byte(sub.Commit+"\n"), 0o644); err != nil {
		return fsError(err, "record the submodule checkout")
	}
	return nil
}

// dirtySubmodules returns the checked-out submodules (CheckoutSubmodule)
// whose files differ from their checkout (`git status --porcelain` in each,
// through the hardened runner).
func (m *Manager) dirtySubmodules(ctx context.Context, w *wtRepo) ([]string, error) {
	subs, err := m.submodules(ctx, w)
	if err != nil {
		return nil, err
	}
	return m.dirtyOf(ctx, w, subs)
}

// dirtyOf is dirtySubmodules of an already listed subs.
func (m *Manager) dirtyOf(ctx context.Context, w *wtRepo, subs []sandbox.Submodule) ([]string, error) {
	var dirty []string
	var err error
	for _, s := range subs {
		gd := submoduleGitDir(w, s.Path)
		if _, err := os.Stat(filepath.Join(gd, SubmoduleMarker)); err != nil || !s.CheckedOut {
			continue
		}
		wt := filepath.Join(w.wt, filepath.FromSlash(s.Path))
		g := gitCtx{m: m, dir: wt, env: []string{"GIT_DIR=" + gd, "GIT_WORK_TREE=" + wt, readEnv}}
		if g, err = m.inspected(ctx, g); err != nil {
			return nil, err
		}
		out, err := g.run(ctx, "status", "--porcelain=v1", "-z", "--untracked-files=all", "--ignore-submodules=all")
		if err != nil {
			return nil, gitx.Classify(err, "git status (submodule "+s.Path+")", sandboxapi.ErrWorkspaceUnavailable)
		}
		if len(out) > 0 {
			dirty = append(dirty, s.Path)
		}
	}
	return dirty, nil
}

func readDirNames(root *os.Root, p string) ([]string, error) {
	f, err := root.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names, err := f.Readdirnames(1)
	if errors.Is(err, io.EOF) {
		return nil, nil
	}
	return names, err
}
