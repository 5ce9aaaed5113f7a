package workspace

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sandboxcore/sandboxcore/internal/gitx"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
)

// Eviction backups (seed "Workspace Eviction": "Before deleting a dirty
// workspace, consider … a patch artifact … commit to an internal branch";
// DESIGN.md "Non-negotiables": eviction never loses work).
//
// A backup is three things, all verified before the worktree may go:
//
//   - a commit of the worktree's exact content onto sandbox.EvictedRef(id) in
//     the repo cache, parent = HEAD (so unpushed commits stay reachable);
//   - the patch artifact <Dir>/<id>.patch = `git diff --binary HEAD <backup>`;
//   - the manifest <Dir>/<id>.json (sandbox.WorkspaceBackup).
//
// The snapshot is built in a temporary index (never the workspace's own, as
// Diff does): the paths are the tracked ones plus the untracked, not ignored,
// ones (`git ls-files --cached` and `--others --exclude-standard`), and every
// regular file is hashed as raw bytes (`git hash-object --no-filters`), so no
// clean filter, end-of-line conversion or working-tree-encoding attribute can
// change what is saved; symlinks are saved as links (their target text),
// executable bits as git modes, and other permission bits in the manifest.
// Ignored files, empty directories, special files and timestamps are not
// saved. A nested (untracked) git repository cannot be saved: Backup then
// fails and the workspace stays.
//
// Restore writes the backup back as raw bytes through an os.Root (no git
// checkout machinery, no filters), leaving the index alone: every saved
// change then shows as unstaged or untracked (the staged/unstaged split is not
// preserved). It loops until a fresh snapshot of the worktree equals the
// backup's tree, so the result is verified byte for byte.

// Backups is the sandbox.WorkspaceBackupProvider of Manager worktrees. Patch
// artifacts and manifests live in one directory per host, normally
// <data dir>/evicted (README "Eviction").
type Backups struct {
	m   *Manager
	dir string
	// euid and groups decide CheckRemovable (tests pretend to be another user).
	euid   int
	groups []int
}

var _ sandbox.WorkspaceBackupProvider = (*Backups)(nil)

// NewBackups returns the backup provider of m storing patches and manifests
// in dir (made absolute, created 0700 when missing). Errors: a plain error
// when m is nil or dir cannot be created.
func NewBackups(m *Manager, dir string) (*Backups, error) {
	if m == nil {
		return nil, errors.New("workspace: NewBackups needs a Manager")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("workspace: backup dir %q: %w", dir, err)
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return nil, fmt.Errorf("workspace: backup dir %q: %w", abs, err)
	}
	groups, _ := os.Getgroups()
	return &Backups{m: m, dir: abs, euid: os.Geteuid(), groups: append(groups, os.Getegid())}, nil
}

// Dir returns the absolute directory of patch artifacts and manifests.
func (b *Backups) Dir() string { return b.dir }

// PatchPath returns <Dir>/<wsID>.patch.
func (b *Backups) PatchPath(wsID string) string { return filepath.Join(b.dir, wsID+".patch") }

// UnsavedWork reports whether the worktree is dirty (Status: tracked changes
// or untracked, not ignored, files), whether a dirty worktree is exactly
// its newest checkpoint (Checkpointed: HEAD, content and permission bits),
// and how many commits of HEAD are saved nowhere else
// (Status.UnpushedCommits). It changes no ref, index or file (the snapshot
// of a checkpointed comparison writes blobs into the object database only).
// Errors: as Status.
func (b *Backups) UnsavedWork(ctx context.Context, ws sandbox.Workspace) (sandbox.UnsavedWork, error) {
	st, err := b.m.Status(ctx, ws)
	if err != nil {
		return sandbox.UnsavedWork{}, err
	}
	un := sandbox.UnsavedWork{Dirty: st.Dirty, UnpushedCommits: st.UnpushedCommits}
	if st.Dirty {
		// Checkpoints count as saved work (docs/API.md "Checkpoints"): a
		// worktree exactly at its newest checkpoint holds nothing of its own.
		if un.Checkpointed, err = b.matchesNewestCheckpoint(ctx, ws, st.Head); err != nil {
			return sandbox.UnsavedWork{}, err
		}
	}
	return un, nil
}

// savedElsewhere are the rev-list arguments, after --not, naming what holds
// a commit outside this machine: origin's remote-tracking branches, tags, and
// what any workspace pushed (sandbox.PushedRefPrefix; a push goes to an
// explicit URL, so it does not move refs/remotes/origin/*).
var savedElsewhere = []string{"--remotes=origin", "--tags", "--glob=" + sandbox.PushedRefPrefix + "*"}

// bkUnpushedCommits runs `git rev-list --count HEAD --not <savedElsewhere>`.
func bkUnpushedCommits(ctx context.Context, g gitCtx) (int, error) {
	out, err := g.run(ctx, append(append([]string{"rev-list", "--count", "HEAD", "--not"}, savedElsewhere...), "--")...)
	if err != nil {
		return 0, gitx.Classify(err, "git rev-list HEAD --not --remotes", sandbox.ErrWorkspaceUnavailable)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		return 0, sandbox.Errorf(sandbox.ErrWorkspaceUnavailable, "git rev-list --count: %q", out)
	}
	return n, nil
}

// Backup saves the worktree (see the package comment above Backups) and
// returns the verified manifest. Steps: snapshot into a temporary index;
// `git commit-tree <tree> -p HEAD`; `git update-ref <EvictedRef> <commit>` in
// the repo cache; the patch `git diff --binary --full-index HEAD <commit>`
// written to a temporary file, synced and renamed into place; verification
// (the ref resolves to the commit; the commit's tree and parent are the
// snapshot's; the patch has the recorded size and SHA-256 and, applied with
// `git apply --cached` onto HEAD in another temporary index, gives the same
// tree; a second snapshot of the worktree still equals it); then the manifest.
// It takes no lock of its own: the caller holds the session's lock and has
// stopped the runtime. Errors: ErrInvalidArgument (bad workspace id or path),
// ErrWorkspaceNotFound, ErrWorkspaceDirty (a nested repository cannot be
// saved, or the worktree changed during the backup), ErrInsufficientDisk,
// ErrWorkspaceUnavailable (anything else, e.g. an unreadable file).
func (b *Backups) Backup(ctx context.Context, ws sandbox.Workspace) (sandbox.WorkspaceBackup, error) {
	return b.backupAs(ctx, ws, b.evicted())
}

// bkKind is one kind of backup: eviction backups (refs/sandbox/evicted/<id>,
// <Dir>/<id>.{patch,json}) or destroy backups (refs/sandbox/destroyed/<id>,
// <Dir>/destroyed/<id>.{patch,json}; docs/API.md "Destroy"). Both are made,
// verified and restored the same way; they live apart so that a workspace
// re-created after a destroy can be evicted without touching the saved work
// of the one destroyed.
type bkKind struct {
	what string // "eviction", "destroy"
	ref  func(wsID string) string
	dir  string
}

func (b *Backups) evicted() bkKind { return bkKind{"eviction", sandbox.EvictedRef, b.dir} }

func (b *Backups) destroyed() bkKind {
	return bkKind{"destroy", sandbox.DestroyedRef, filepath.Join(b.dir, "destroyed")}
}

func (k bkKind) patchPath(wsID string) string    { return filepath.Join(k.dir, wsID+".patch") }
func (k bkKind) manifestPath(wsID string) string { return filepath.Join(k.dir, wsID+".json") }

// backupAs is Backup for backups of kind k.
func (b *Backups) backupAs(ctx context.Context, ws sandbox.Workspace, k bkKind) (sandbox.WorkspaceBackup, error) {
	if err := os.MkdirAll(k.dir, 0o700); err != nil {
		return sandbox.WorkspaceBackup{}, fsError(err, "backup directory")
	}
	if err := sandbox.ValidateWorkspaceID(ws.ID); err != nil {
		return sandbox.WorkspaceBackup{}, err
	}
	unsaved, err := b.UnsavedWork(ctx, ws)
	if err != nil {
		return sandbox.WorkspaceBackup{}, err
	}
	w, err := b.m.openWorktree(ctx, ws)
	if err != nil {
		return sandbox.WorkspaceBackup{}, err
	}
	headC, branch, err := head(ctx, w.git.with(readEnv))
	if err != nil {
		return sandbox.WorkspaceBackup{}, err
	}
	// A submodule's files are its own repository's: a backup of the
	// superproject cannot hold them, so a workspace with changes there is
	// never evicted (submodules.go).
	if subs, err := b.m.dirtySubmodules(ctx, w); err != nil {
		return sandbox.WorkspaceBackup{}, err
	} else if len(subs) > 0 {
		return sandbox.WorkspaceBackup{}, sandbox.Errorf(sandbox.ErrWorkspaceDirty, "workspace %s has changes inside submodule %s, which a backup cannot save; not evicted", ws.ID, subs[0])
	}
	snap, err := b.snapshot(ctx, w)
	if err != nil {
		return sandbox.WorkspaceBackup{}, err
	}
	bg := b.m.bareGit(w.bare)
	now := b.m.now()
	date := fmt.Sprintf("@%d %s", now.Unix(), now.Format("-0700"))
	what := branch
	if what == "" {
		what = "detached HEAD"
	}
	msg := fmt.Sprintf("sandboxcore: %s backup of %s\n\nworkspace: %s\nbranch: %s\nhead: %s\n", k.what, ws.ID, ws.ID, what, headC)
	out, err := bg.with("GIT_AUTHOR_DATE="+date, "GIT_COMMITTER_DATE="+date).runIO(ctx, strings.NewReader(msg), nil, "commit-tree", snap.tree, "-p", headC)
	if err != nil {
		return sandbox.WorkspaceBackup{}, gitx.Classify(err, "git commit-tree (eviction backup)", sandbox.ErrWorkspaceUnavailable)
	}
	commit := strings.TrimSpace(string(out))
	if !isHex(commit) {
		return sandbox.WorkspaceBackup{}, sandbox.Errorf(sandbox.ErrWorkspaceUnavailable, "git commit-tree: unexpected output %q", out)
	}
	ref := k.ref(ws.ID)
	if _, err := bg.run(ctx, "update-ref", "-m", "sandboxcore: "+k.what+" backup", ref, commit); err != nil {
		return sandbox.WorkspaceBackup{}, gitx.Classify(err, "git update-ref "+ref, sandbox.ErrWorkspaceUnavailable)
	}
	base := ws.BaseCommit
	if !isHex(base) {
		base = readBase(w.admin)
	}
	man := sandbox.WorkspaceBackup{
		WorkspaceID: ws.ID, Ref: ref, Commit: commit, Tree: snap.tree, Head: headC, Branch: branch,
		PatchPath: k.patchPath(ws.ID), Files: snap.files, Modes: snap.modes, Unsaved: unsaved, CreatedAt: now.UTC(), BaseCommit: base,
	}
	if man.PatchBytes, man.PatchSHA256, err = b.writePatch(ctx, bg, headC, commit, man.PatchPath); err != nil {
		return sandbox.WorkspaceBackup{}, err
	}
	if err := b.verify(ctx, bg, man); err != nil {
		return sandbox.WorkspaceBackup{}, err
	}
	again, err := b.snapshot(ctx, w)
	if err != nil {
		return sandbox.WorkspaceBackup{}, err
	}
	if again.tree != snap.tree {
		return sandbox.WorkspaceBackup{}, sandbox.Errorf(sandbox.ErrWorkspaceDirty, "workspace %s changed while it was being saved; not evicted", ws.ID)
	}
	if err := b.writeManifest(k, man); err != nil {
		return sandbox.WorkspaceBackup{}, err
	}
	b.m.log.Info("workspace: backup saved", "kind", k.what, "workspace_id", ws.ID, "ref", ref, "commit", commit,
		"patch", man.PatchPath, "patch_bytes", man.PatchBytes, "dirty", unsaved.Dirty, "unpushed", unsaved.UnpushedCommits)
	return man, nil
}

// writePatch writes `git diff --binary HEAD <commit>` (tree to tree: no
// worktree attributes, filters or external tools) to path atomically and
// returns its size and SHA-256.
func (b *Backups) writePatch(ctx context.Context, bg gitCtx, from, to, path string) (int64, string, error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp-*")
	if err != nil {
		return 0, "", fsError(err, "patch artifact")
	}
	defer os.Remove(tmp.Name())
	h := sha256.New()
	cw := &bkCountWriter{w: io.MultiWriter(tmp, h)}
	_, err = bg.runIO(ctx, nil, cw, "diff", "--binary", "--full-index", "--no-ext-diff", "--no-textconv", "--no-color",
		"--no-renames", "--no-relative", "--src-prefix=a/", "--dst-prefix=b/", "-O/dev/null", "--end-of-options", from, to, "--")
	if err != nil {
		_ = tmp.Close()
		return 0, "", gitx.Classify(err, "git diff --binary (patch artifact)", sandbox.ErrWorkspaceUnavailable)
	}
	if err := errors.Join(tmp.Sync(), tmp.Close()); err != nil {
		return 0, "", fsError(err, "patch artifact")
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return 0, "", fsError(err, "patch artifact")
	}
	bkSyncDir(filepath.Dir(path))
	return cw.n, hex.EncodeToString(h.Sum(nil)), nil
}

// verify checks a freshly written backup (see Backup).
func (b *Backups) verify(ctx context.Context, bg gitCtx, man sandbox.WorkspaceBackup) error {
	fail := func(format string, args ...any) error {
		return sandbox.Errorf(sandbox.ErrWorkspaceUnavailable, "verify backup of %s: "+format, append([]any{man.WorkspaceID}, args...)...)
	}
	got, err := b.m.firstCommit(ctx, bg, man.Ref)
	if err != nil {
		return err
	}
	if got != man.Commit {
		return fail("%s resolves to %q, want %s", man.Ref, got, man.Commit)
	}
	out, err := bg.run(ctx, "log", "-1", "--format=%T %P", "--end-of-options", man.Commit, "--")
	if err != nil {
		return gitx.Classify(err, "git log (verify backup)", sandbox.ErrWorkspaceUnavailable)
	}
	if f := strings.Fields(string(out)); len(f) != 2 || f[0] != man.Tree || f[1] != man.Head {
		return fail("commit %s has tree/parent %q, want %s %s", man.Commit, strings.TrimSpace(string(out)), man.Tree, man.Head)
	}
	n, sum, err := bkFileDigest(man.PatchPath)
	if err != nil {
		return fail("patch artifact: %v", err)
	}
	if n != man.PatchBytes || sum != man.PatchSHA256 {
		return fail("patch artifact %s has %d bytes (sha256 %s), want %d (%s)", man.PatchPath, n, sum, man.PatchBytes, man.PatchSHA256)
	}
	if n == 0 {
		// Only unpushed commits: the tree is HEAD's (checked above).
		if man.Tree != b.treeOf(ctx, bg, man.Head) {
			return fail("empty patch but the tree differs from HEAD's")
		}
		return nil
	}
	idx := filepath.Join(b.dir, man.WorkspaceID+".verify-index")
	defer func() { _ = os.Remove(idx); _ = os.Remove(idx + ".lock") }()
	_ = os.Remove(idx)
	g := bg.with("GIT_INDEX_FILE=" + idx)
	if _, err := g.run(ctx, "read-tree", "--end-of-options", man.Head); err != nil {
		return gitx.Classify(err, "git read-tree (verify backup)", sandbox.ErrWorkspaceUnavailable)
	}
	if _, err := g.run(ctx, "apply", "--cached", "--binary", "--whitespace=nowarn", "-p1", "--", man.PatchPath); err != nil {
		return fail("the patch does not apply onto HEAD: %v", err)
	}
	out, err = g.run(ctx, "write-tree")
	if err != nil {
		return gitx.Classify(err, "git write-tree (verify backup)", sandbox.ErrWorkspaceUnavailable)
	}
	if t := strings.TrimSpace(string(out)); t != man.Tree {
		return fail("the patch applied onto HEAD gives tree %s, want %s", t, man.Tree)
	}
	return nil
}

func (b *Backups) treeOf(ctx context.Context, g gitCtx, commit string) string {
	out, err := g.run(ctx, "rev-parse", "--verify", "--end-of-options", commit+"^{tree}")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// PendingBackup returns the manifest <Dir>/<id>.json when it exists and has
// not been restored. Errors: ErrInvalidArgument (bad id), ErrWorkspaceUnavailable
// (unreadable or malformed manifest).
func (b *Backups) PendingBackup(_ context.Context, ws sandbox.Workspace) (sandbox.WorkspaceBackup, bool, error) {
	return b.pending(ws.ID, b.evicted())
}

// pending is PendingBackup for backups of kind k.
func (b *Backups) pending(wsID string, k bkKind) (sandbox.WorkspaceBackup, bool, error) {
	ws := sandbox.Workspace{ID: wsID}
	if err := sandbox.ValidateWorkspaceID(ws.ID); err != nil {
		return sandbox.WorkspaceBackup{}, false, err
	}
	data, err := os.ReadFile(k.manifestPath(ws.ID))
	if errors.Is(err, fs.ErrNotExist) {
		return sandbox.WorkspaceBackup{}, false, nil
	}
	if err != nil {
		return sandbox.WorkspaceBackup{}, false, fsError(err, "read backup manifest")
	}
	var man sandbox.WorkspaceBackup
	if err := json.Unmarshal(data, &man); err != nil || man.WorkspaceID != ws.ID || !isHex(man.Commit) || !isHex(man.Tree) {
		return sandbox.WorkspaceBackup{}, false, sandbox.Errorf(sandbox.ErrWorkspaceUnavailable, "backup manifest %s is malformed", k.manifestPath(ws.ID))
	}
	if man.RestoredAt != nil {
		return man, false, nil
	}
	return man, true, nil
}

func (b *Backups) writeManifest(k bkKind, man sandbox.WorkspaceBackup) error {
	data, err := json.MarshalIndent(man, "", "  ")
	if err != nil {
		return sandbox.Errorf(sandbox.ErrWorkspaceUnavailable, "encode backup manifest: %v", err)
	}
	path := k.manifestPath(man.WorkspaceID)
	tmp, err := os.CreateTemp(k.dir, filepath.Base(path)+".tmp-*")
	if err != nil {
		return fsError(err, "backup manifest")
	}
	defer os.Remove(tmp.Name())
	_, werr := tmp.Write(append(data, '\n'))
	if err := errors.Join(werr, tmp.Sync(), tmp.Close()); err != nil {
		return fsError(err, "backup manifest")
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fsError(err, "backup manifest")
	}
	bkSyncDir(k.dir)
	return nil
}

// Restore writes the pending backup of ws into its worktree, which Ensure has
// just re-created at the branch tip (edit, task) or at the base commit
// (analysis: HEAD is then moved, detached, to the backup's parent). The
// backup commit must exist with the recorded tree and parent; the ref is
// re-created when missing. The worktree is brought to the backup's tree by
// raw writes and deletions through an os.Root (no git checkout, no filters,
// index untouched), checked with a fresh snapshot (up to three rounds), the
// recorded permission bits are applied, and the manifest is marked restored.
// Calling it again after a success returns false. Errors: ErrConflict (the
// branch is not at the backup's parent: it moved while the workspace was
// evicted; the backup stays in place), ErrWorkspaceUnavailable (backup
// missing or unverifiable, or the worktree cannot be brought to the tree),
// ErrInsufficientDisk, ErrWorkspaceNotFound.
func (b *Backups) Restore(ctx context.Context, ws sandbox.Workspace) (sandbox.WorkspaceBackup, bool, error) {
	man, pending, err := b.PendingBackup(ctx, ws)
	if err != nil || !pending {
		return man, false, err
	}
	w, err := b.m.openWorktree(ctx, ws)
	if err != nil {
		return man, false, err
	}
	bg := b.m.bareGit(w.bare)
	if err := b.checkBackupCommit(ctx, bg, man, ws.ID); err != nil {
		return man, false, err
	}
	headC, branch, err := head(ctx, w.git.with(readEnv))
	if err != nil {
		return man, false, err
	}
	if headC != man.Head || branch != man.Branch {
		if branch != "" || man.Branch != "" {
			return man, false, sandbox.Errorf(sandbox.ErrConflict, "workspace %s: branch %q is at %s, but its eviction backup was taken on %q at %s; the work is kept at %s and %s",
				ws.ID, branch, headC, man.Branch, man.Head, man.Ref, man.PatchPath)
		}
		// Analysis (detached): move HEAD to the backup's parent, index following.
		if _, err := w.git.run(ctx, "update-ref", "--no-deref", "-m", "sandboxcore: restore", "HEAD", man.Head); err != nil {
			return man, false, gitx.Classify(err, "git update-ref HEAD", sandbox.ErrWorkspaceUnavailable)
		}
		if _, err := w.git.run(ctx, "read-tree", "--end-of-options", man.Head); err != nil {
			return man, false, gitx.Classify(err, "git read-tree", sandbox.ErrWorkspaceUnavailable)
		}
	}
	if err := b.bringTo(ctx, w, bg, man.Tree, man.Modes); err != nil {
		return man, false, err
	}
	at := b.m.now().UTC()
	man.RestoredAt = &at
	if err := b.writeManifest(b.evicted(), man); err != nil {
		return man, false, err
	}
	b.m.log.Info("workspace: eviction backup restored", "workspace_id", ws.ID, "commit", man.Commit, "files", man.Files)
	return man, true, nil
}

// checkBackupCommit checks that man's commit exists with the recorded tree
// and parent, and re-creates its ref when missing. Errors: ErrWorkspaceUnavailable.
func (b *Backups) checkBackupCommit(ctx context.Context, bg gitCtx, man sandbox.WorkspaceBackup, wsID string) error {
	out, err := bg.run(ctx, "log", "-1", "--format=%T %P", "--end-of-options", man.Commit, "--")
	if f := strings.Fields(string(out)); err != nil || len(f) != 2 || f[0] != man.Tree || f[1] != man.Head {
		return sandbox.Errorf(sandbox.ErrWorkspaceUnavailable, "backup commit %s of workspace %s is missing or does not match its manifest; the patch is at %s", man.Commit, wsID, man.PatchPath)
	}
	if got, _ := b.m.firstCommit(ctx, bg, man.Ref); got != man.Commit {
		if _, err := bg.run(ctx, "update-ref", "-m", "sandboxcore: restore backup ref", man.Ref, man.Commit); err != nil {
			return gitx.Classify(err, "git update-ref "+man.Ref, sandbox.ErrWorkspaceUnavailable)
		}
	}
	return nil
}

// bringTo makes the worktree's content exactly tree, with the permission
// bits modes (paths absent from modes get 0o644, or 0o755 when executable):
// raw writes and deletions through an os.Root (no git checkout, no filters,
// the index untouched), checked with a fresh snapshot (up to three rounds),
// then every permission bit fixed. Ignored files are left alone. Errors:
// ErrWorkspaceUnavailable (the worktree cannot be brought to the tree),
// ErrInsufficientDisk.
func (b *Backups) bringTo(ctx context.Context, w *wtRepo, bg gitCtx, tree string, modes map[string]uint32) error {
	root, err := os.OpenRoot(w.wt)
	if err != nil {
		return fsError(err, "open worktree")
	}
	defer root.Close()
	var snap bkSnapshot
	done := false
	for round := 0; round < 3 && !done; round++ {
		if snap, err = b.snapshot(ctx, w); err != nil {
			return err
		}
		if snap.tree == tree {
			done = true
			break
		}
		changes, err := bkDiffTrees(ctx, bg, snap.tree, tree)
		if err != nil {
			return err
		}
		if err := b.apply(ctx, bg, root, changes, modes); err != nil {
			return err
		}
	}
	if !done {
		return sandbox.Errorf(sandbox.ErrWorkspaceUnavailable, "worktree %s does not match tree %s after writing it", w.wt, tree)
	}
	// The trees are equal, so every path's git mode is; fix the permission
	// bits git does not record: the wanted ones, and the default ones of
	// paths that have other bits now.
	for p, perm := range modes {
		if err := root.Chmod(p, fs.FileMode(perm)&fs.ModePerm); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fsError(err, "set permissions of "+p)
		}
	}
	for p, cur := range snap.modes {
		if _, ok := modes[p]; ok {
			continue
		}
		want := fs.FileMode(0o644)
		if cur&0o100 != 0 {
			want = 0o755
		}
		if err := root.Chmod(p, want); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fsError(err, "set permissions of "+p)
		}
	}
	return nil
}

// bkTreeChange is one record of `git diff-tree -r -z`.
type bkTreeChange struct {
	newMode string
	newSHA  string
	status  byte
	path    string
}

func bkDiffTrees(ctx context.Context, bg gitCtx, from, to string) ([]bkTreeChange, error) {
	out, err := bg.run(ctx, "diff-tree", "-r", "-z", "--no-renames", "--no-ext-diff", "--no-textconv", "--end-of-options", from, to, "--")
	if err != nil {
		return nil, gitx.Classify(err, "git diff-tree", sandbox.ErrWorkspaceUnavailable)
	}
	var list []bkTreeChange
	fields := strings.Split(string(out), "\x00")
	for i := 0; i+1 < len(fields); i += 2 {
		meta := strings.Fields(strings.TrimPrefix(fields[i], ":"))
		if len(meta) != 5 || len(meta[4]) == 0 {
			return nil, sandbox.Errorf(sandbox.ErrWorkspaceUnavailable, "git diff-tree: unexpected record %q", fields[i])
		}
		list = append(list, bkTreeChange{newMode: meta[1], newSHA: meta[3], status: meta[4][0], path: fields[i+1]})
	}
	return list, nil
}

// apply performs changes on the worktree: deletions first, then writes.
func (b *Backups) apply(ctx context.Context, bg gitCtx, root *os.Root, changes []bkTreeChange, modes map[string]uint32) error {
	for _, c := range changes {
		if c.status != 'D' {
			continue
		}
		if err := root.Remove(c.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			if fi, lerr := root.Lstat(c.path); lerr == nil && fi.IsDir() {
				continue // a gitlink's directory: left alone
			}
			return fsError(err, "restore: delete "+c.path)
		}
	}
	for _, c := range changes {
		if c.status == 'D' || c.newMode == "160000" {
			continue
		}
		if err := bkMakeParents(root, c.path); err != nil {
			return err
		}
		if fi, err := root.Lstat(c.path); err == nil {
			if fi.IsDir() {
				err = root.RemoveAll(c.path)
			} else {
				err = root.Remove(c.path)
			}
			if err != nil {
				return fsError(err, "restore: replace "+c.path)
			}
		}
		switch c.newMode {
		case "120000":
			var target bytes.Buffer
			if _, err := bg.runIO(ctx, nil, &target, "cat-file", "blob", c.newSHA); err != nil {
				return gitx.Classify(err, "git cat-file (restore)", sandbox.ErrWorkspaceUnavailable)
			}
			if err := root.Symlink(target.String(), c.path); err != nil {
				return fsError(err, "restore: symlink "+c.path)
			}
		case "100644", "100755":
			perm := fs.FileMode(0o644)
			if c.newMode == "100755" {
				perm = 0o755
			}
			if p, ok := modes[c.path]; ok {
				perm = fs.FileMode(p) & fs.ModePerm
			}
			f, err := root.OpenFile(c.path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
			if err != nil {
				return fsError(err, "restore: create "+c.path)
			}
			_, err = bg.runIO(ctx, nil, f, "cat-file", "blob", c.newSHA)
			if cerr := f.Close(); err == nil && cerr != nil {
				return fsError(cerr, "restore: write "+c.path)
			}
			if err != nil {
				return gitx.Classify(err, "git cat-file (restore)", sandbox.ErrWorkspaceUnavailable)
			}
			if err := root.Chmod(c.path, perm); err != nil {
				return fsError(err, "restore: chmod "+c.path)
			}
		}
	}
	return nil
}

// bkMakeParents creates the parent directories of rel, replacing any
// non-directory in the way.
func bkMakeParents(root *os.Root, rel string) error {
	parts := strings.Split(rel, "/")
	for i := 1; i < len(parts); i++ {
		dir := strings.Join(parts[:i], "/")
		fi, err := root.Lstat(dir)
		if err == nil && fi.IsDir() {
			continue
		}
		if err == nil {
			if err := root.Remove(dir); err != nil {
				return fsError(err, "restore: replace "+dir)
			}
		} else if !errors.Is(err, fs.ErrNotExist) {
			return fsError(err, "restore: "+dir)
		}
		if err := root.Mkdir(dir, 0o755); err != nil {
			return fsError(err, "restore: mkdir "+dir)
		}
	}
	return nil
}

// bkSnapshot is a worktree's content as a tree object.
type bkSnapshot struct {
	tree  string
	files int
	modes map[string]uint32
}

// snapshot writes the worktree's tracked and untracked (not ignored) files
// into the object database as raw bytes and returns their tree, built in a
// temporary index inside the worktree's administrative directory.
func (b *Backups) snapshot(ctx context.Context, w *wtRepo) (bkSnapshot, error) {
	g := w.git.with(readEnv)
	cached, err := g.run(ctx, "ls-files", "-z", "--cached", "-s")
	if err != nil {
		return bkSnapshot{}, gitx.Classify(err, "git ls-files --cached", sandbox.ErrWorkspaceUnavailable)
	}
	others, err := g.run(ctx, "ls-files", "-z", "--others", "--exclude-standard")
	if err != nil {
		return bkSnapshot{}, gitx.Classify(err, "git ls-files --others", sandbox.ErrWorkspaceUnavailable)
	}
	gitlinks := map[string]string{}
	seen := map[string]bool{}
	var paths []string
	for _, rec := range strings.Split(string(cached), "\x00") {
		meta, p, ok := strings.Cut(rec, "\t")
		if !ok || seen[p] {
			continue
		}
		seen[p] = true
		paths = append(paths, p)
		if f := strings.Fields(meta); len(f) == 3 && f[0] == "160000" {
			gitlinks[p] = f[1]
		}
	}
	for _, p := range strings.Split(string(others), "\x00") {
		if p == "" || seen[p] {
			continue
		}
		if strings.HasSuffix(p, "/") {
			return bkSnapshot{}, sandbox.Errorf(sandbox.ErrWorkspaceDirty, "untracked nested git repository %q cannot be saved; commit or remove it", p)
		}
		seen[p] = true
		paths = append(paths, p)
	}
	sort.Strings(paths)

	root, err := os.OpenRoot(w.wt)
	if err != nil {
		return bkSnapshot{}, fsError(err, "open worktree")
	}
	defer root.Close()
	realDir := map[string]bool{}
	parentsOK := func(p string) bool {
		parts := strings.Split(p, "/")
		for i := 1; i < len(parts); i++ {
			dir := strings.Join(parts[:i], "/")
			ok, known := realDir[dir]
			if !known {
				fi, err := root.Lstat(dir)
				ok = err == nil && fi.IsDir()
				realDir[dir] = ok
			}
			if !ok {
				return false
			}
		}
		return true
	}

	type entry struct {
		mode, sha, path string
	}
	var entries []entry
	var filePaths, linkTargets []string
	var fileIdx, linkIdx []int
	res := bkSnapshot{modes: map[string]uint32{}}
	for _, p := range paths {
		if err := ctx.Err(); err != nil {
			return bkSnapshot{}, err
		}
		if !parentsOK(p) {
			continue // below a path that is no longer a directory: gone
		}
		fi, err := root.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			continue // deleted
		}
		if err != nil {
			return bkSnapshot{}, fsError(err, "inspect "+p)
		}
		switch {
		case fi.IsDir():
			if sha, ok := gitlinks[p]; ok {
				entries = append(entries, entry{"160000", sha, p})
			}
			// else: a tracked file replaced by a directory, whose files are listed on their own.
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := root.Readlink(p)
			if err != nil {
				return bkSnapshot{}, fsError(err, "read symlink "+p)
			}
			linkIdx = append(linkIdx, len(entries))
			linkTargets = append(linkTargets, target)
			entries = append(entries, entry{"120000", "", p})
			res.files++
		case fi.Mode().IsRegular():
			mode := "100644"
			if fi.Mode()&0o100 != 0 {
				mode = "100755"
			}
			if perm := fi.Mode().Perm(); perm != 0o644 && perm != 0o755 {
				res.modes[p] = uint32(perm)
			}
			fileIdx = append(fileIdx, len(entries))
			filePaths = append(filePaths, p)
			entries = append(entries, entry{mode, "", p})
			res.files++
		default:
			// FIFOs, sockets, devices: not work, not saved.
		}
	}
	shas, err := b.hashFiles(ctx, g, root, filePaths)
	if err != nil {
		return bkSnapshot{}, err
	}
	// A file still as checked out (baseline.go: normalised line endings,
	// fetched LFS content) is saved as its committed blob: it is no change,
	// and the re-created worktree checks it out the same way again.
	same, err := b.m.asCheckedOut(ctx, w, baselinePaths(w))
	if err != nil {
		return bkSnapshot{}, err
	}
	for i, sha := range shas {
		if e, ok := same[filePaths[i]]; ok && e.raw == sha {
			sha = e.blob
		}
		entries[fileIdx[i]].sha = sha
	}
	shas, err = b.hashLinks(ctx, g, w.admin, linkTargets)
	if err != nil {
		return bkSnapshot{}, err
	}
	for i, sha := range shas {
		entries[linkIdx[i]].sha = sha
	}

	var info bytes.Buffer
	for _, e := range entries {
		fmt.Fprintf(&info, "%s %s\t%s\x00", e.mode, e.sha, e.path)
	}
	idx := filepath.Join(w.admin, "sandboxcore-backup-index-"+bkRandomSuffix())
	defer func() { _ = os.Remove(idx); _ = os.Remove(idx + ".lock") }()
	gi := w.git.with("GIT_INDEX_FILE=" + idx)
	if _, err := gi.runIO(ctx, &info, nil, "update-index", "-z", "--add", "--index-info"); err != nil {
		return bkSnapshot{}, gitx.Classify(err, "git update-index --index-info (temporary index)", sandbox.ErrWorkspaceUnavailable)
	}
	out, err := gi.run(ctx, "write-tree")
	if err != nil {
		return bkSnapshot{}, gitx.Classify(err, "git write-tree (temporary index)", sandbox.ErrWorkspaceUnavailable)
	}
	res.tree = strings.TrimSpace(string(out))
	if !isHex(res.tree) {
		return bkSnapshot{}, sandbox.Errorf(sandbox.ErrWorkspaceUnavailable, "git write-tree: unexpected output %q", out)
	}
	if len(res.modes) == 0 {
		res.modes = nil
	}
	return res, nil
}

// hashFiles writes the raw bytes of worktree files as blobs and returns their
// ids in order: one `git hash-object --no-filters -w --stdin-paths` for all
// paths, one `--stdin` call (content read through root) per path holding a
// line break.
func (b *Backups) hashFiles(ctx context.Context, g gitCtx, root *os.Root, paths []string) ([]string, error) {
	shas := make([]string, len(paths))
	var batch bytes.Buffer
	var batchIdx []int
	for i, p := range paths {
		if strings.ContainsAny(p, "\n\r") {
			f, err := root.Open(p)
			if err != nil {
				return nil, fsError(err, "read "+p)
			}
			out, err := g.runIO(ctx, f, nil, "hash-object", "--no-filters", "-w", "--stdin")
			_ = f.Close()
			if err != nil {
				return nil, gitx.Classify(err, "git hash-object", sandbox.ErrWorkspaceUnavailable)
			}
			shas[i] = strings.TrimSpace(string(out))
			continue
		}
		batch.WriteString(p + "\n")
		batchIdx = append(batchIdx, i)
	}
	if len(batchIdx) > 0 {
		got, err := b.hashBatch(ctx, g, &batch, len(batchIdx))
		if err != nil {
			return nil, err
		}
		for j, i := range batchIdx {
			shas[i] = got[j]
		}
	}
	return shas, nil
}

// hashLinks stores symlink targets as blobs (through temporary files in the
// administrative directory) and returns their ids in order.
func (b *Backups) hashLinks(ctx context.Context, g gitCtx, admin string, targets []string) ([]string, error) {
	if len(targets) == 0 {
		return nil, nil
	}
	dir, err := os.MkdirTemp(admin, "sandboxcore-links-")
	if err != nil {
		return nil, fsError(err, "temporary directory")
	}
	defer os.RemoveAll(dir)
	var batch bytes.Buffer
	for i, t := range targets {
		p := filepath.Join(dir, strconv.Itoa(i))
		if err := os.WriteFile(p, []byte(t), 0o600); err != nil {
			return nil, fsError(err, "temporary file")
		}
		batch.WriteString(p + "\n")
	}
	return b.hashBatch(ctx, g, &batch, len(targets))
}

func (b *Backups) hashBatch(ctx context.Context, g gitCtx, paths io.Reader, n int) ([]string, error) {
	out, err := g.runIO(ctx, paths, nil, "hash-object", "--no-filters", "-w", "--stdin-paths")
	if err != nil {
		return nil, gitx.Classify(err, "git hash-object --stdin-paths", sandbox.ErrWorkspaceUnavailable)
	}
	var shas []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if s := strings.TrimSpace(sc.Text()); s != "" {
			shas = append(shas, s)
		}
	}
	if len(shas) != n {
		return nil, sandbox.Errorf(sandbox.ErrWorkspaceUnavailable, "git hash-object returned %d ids for %d files", len(shas), n)
	}
	for _, s := range shas {
		if !isHex(s) {
			return nil, sandbox.Errorf(sandbox.ErrWorkspaceUnavailable, "git hash-object: unexpected output %q", s)
		}
	}
	return shas, nil
}

// CheckRemovable walks the worktree (symlinks not followed) and fails on the
// first directory whose entries this process could not delete even after
// making its own directories writable: a directory owned by another uid that
// grants us no write and search permission, or a sticky directory holding
// another uid's entry. Nothing is changed. Errors: ErrWorkspaceNotFound,
// ErrInvalidArgument (LocalPath), ErrWorkspaceUnavailable naming the obstacle.
func (b *Backups) CheckRemovable(ctx context.Context, ws sandbox.Workspace) error {
	l, err := locate(ws)
	if err != nil {
		return err
	}
	if !isDir(l.wt) {
		return sandbox.Errorf(sandbox.ErrWorkspaceNotFound, "workspace %s: worktree directory is missing", ws.ID)
	}
	if b.euid == 0 {
		return nil
	}
	n := 0
	return filepath.WalkDir(l.wt, func(p string, d fs.DirEntry, werr error) error {
		if n++; n%1024 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		if werr != nil {
			if d != nil && d.IsDir() && p != l.wt {
				// Unreadable: fine when it is ours (it is made writable first).
				if fi, err := os.Lstat(p); err == nil && b.owns(fi) {
					return fs.SkipDir
				}
				return sandbox.Errorf(sandbox.ErrWorkspaceUnavailable, "workspace %s: %s cannot be listed by uid %d", ws.ID, bkRel(l.wt, p), b.euid)
			}
			return nil
		}
		if !d.IsDir() {
			return nil
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return nil
		}
		if why := b.undeletableEntries(p, fi); why != "" {
			return sandbox.Errorf(sandbox.ErrWorkspaceUnavailable, "workspace %s: entries of %s cannot be deleted by uid %d: %s", ws.ID, bkRel(l.wt, p), b.euid, why)
		}
		return nil
	})
}

func bkRel(base, p string) string {
	r, err := filepath.Rel(base, p)
	if err != nil || r == "." {
		return "the worktree root"
	}
	return r
}

func (b *Backups) owns(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return !ok || int(st.Uid) == b.euid
}

// undeletableEntries says why the entries of directory p (info fi) cannot be
// deleted by b.euid, or "" when they can.
func (b *Backups) undeletableEntries(p string, fi fs.FileInfo) string {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return ""
	}
	perm := fi.Mode().Perm()
	if int(st.Uid) != b.euid {
		bits := perm & 0o007
		for _, g := range b.groups {
			if uint32(g) == st.Gid {
				bits = (perm >> 3) & 0o007
				break
			}
		}
		if bits&0o3 != 0o3 { // write and search
			return fmt.Sprintf("owned by uid %d, mode %o", st.Uid, perm)
		}
	}
	if fi.Mode()&fs.ModeSticky != 0 && int(st.Uid) != b.euid {
		entries, err := os.ReadDir(p)
		if err != nil {
			return "sticky and unreadable"
		}
		for _, e := range entries {
			if efi, err := e.Info(); err == nil && !b.owns(efi) {
				return fmt.Sprintf("sticky, and %s belongs to another uid", e.Name())
			}
		}
	}
	return ""
}

// RepoCacheHoldsUnsavedWork runs `git rev-list -n1 --branches
// --glob=refs/sandbox/evicted/* --glob=refs/sandbox/destroyed/*
// --glob=refs/sandbox/checkpoints/* --not <savedElsewhere>` in the bare
// mirror: any output is a commit only this mirror has (eviction and destroy
// backups and checkpoints are saved work, docs/API.md "Checkpoints"). A
// missing mirror holds nothing. Errors: ErrInvalidArgument (LocalPath), ErrWorkspaceUnavailable.
func (b *Backups) RepoCacheHoldsUnsavedWork(ctx context.Context, cache sandbox.RepoCache) (bool, error) {
	bare, err := barePath(cache)
	if errors.Is(err, sandbox.ErrRepoCacheUnavailable) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	out, err := b.m.bareGit(bare).run(ctx, append(append([]string{"rev-list", "-n1", "--branches", "--glob=" + sandbox.EvictedRefPrefix + "*",
		"--glob=" + sandbox.DestroyedRefPrefix + "*", "--glob=" + sandbox.CheckpointRefPrefix + "*", "--not"}, savedElsewhere...), "--")...)
	if err != nil {
		return false, gitx.Classify(err, "git rev-list (unsaved work in repo cache)", sandbox.ErrWorkspaceUnavailable)
	}
	return strings.TrimSpace(string(out)) != "", nil
}

type bkCountWriter struct {
	w io.Writer
	n int64
}

func (c *bkCountWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

func bkFileDigest(path string) (int64, string, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, "", err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return 0, "", err
	}
	return n, hex.EncodeToString(h.Sum(nil)), nil
}

func bkSyncDir(dir string) {
	if f, err := os.Open(dir); err == nil {
		_ = f.Sync()
		_ = f.Close()
	}
}

func bkRandomSuffix() string {
	return strconv.FormatInt(time.Now().UnixNano(), 36) + strconv.Itoa(os.Getpid())
}
