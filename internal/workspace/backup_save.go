package workspace

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sandboxcore/sandboxcore/internal/gitx"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// Saving a workspace backup: the commit onto its backup ref, the patch
// artifact, and their verification (the format is described in backup.go).

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
func (b *Backups) Backup(ctx context.Context, ws sandboxapi.Workspace) (sandbox.WorkspaceBackup, error) {
	return b.backupAs(ctx, ws, b.evicted())
}

// backupAs is Backup for backups of kind k.
func (b *Backups) backupAs(ctx context.Context, ws sandboxapi.Workspace, k bkKind) (sandbox.WorkspaceBackup, error) {
	if err := os.MkdirAll(k.dir, 0o700); err != nil {
		return sandbox.WorkspaceBackup{}, fsError(err, "backup directory")
	}
	if err := sandboxapi.ValidateWorkspaceID(ws.ID); err != nil {
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
		return sandbox.WorkspaceBackup{}, sandboxapi.Errorf(sandboxapi.ErrWorkspaceDirty, "workspace %s has changes inside submodule %s, which a backup cannot save; not evicted", ws.ID, subs[0])
	}
	snap, err := b.snapshot(ctx, w)
	if err != nil {
		return sandbox.WorkspaceBackup{}, err
	}
	bg := b.m.bareGit(w.bare)
	now := b.m.now()
	commit, ref, err := commitBackup(ctx, bg, k, ws.ID, snap.tree, headC, branch, now)
	if err != nil {
		return sandbox.WorkspaceBackup{}, err
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
		return sandbox.WorkspaceBackup{}, sandboxapi.Errorf(sandboxapi.ErrWorkspaceDirty, "workspace %s changed while it was being saved; not evicted", ws.ID)
	}
	if err := b.writeManifest(k, man); err != nil {
		return sandbox.WorkspaceBackup{}, err
	}
	b.m.log.Info("workspace: backup saved", "kind", k.what, "workspace_id", ws.ID, "ref", ref, "commit", commit,
		"patch", man.PatchPath, "patch_bytes", man.PatchBytes, "dirty", unsaved.Dirty, "unpushed", unsaved.UnpushedCommits)
	return man, nil
}

// commitBackup records tree as the backup commit of workspace wsID
// (`git commit-tree <tree> -p <head>` in the repo cache, author and committer
// dates now, a message naming the workspace, branch and head) and points the
// kind's ref at it (`git update-ref`). It returns the commit and the ref.
// Errors: ErrWorkspaceUnavailable.
func commitBackup(ctx context.Context, bg gitCtx, k bkKind, wsID, tree, headC, branch string, now time.Time) (string, string, error) {
	date := fmt.Sprintf("@%d %s", now.Unix(), now.Format("-0700"))
	what := branch
	if what == "" {
		what = "detached HEAD"
	}
	msg := fmt.Sprintf("sandboxcore: %s backup of %s\n\nworkspace: %s\nbranch: %s\nhead: %s\n", k.what, wsID, wsID, what, headC)
	out, err := bg.with("GIT_AUTHOR_DATE="+date, "GIT_COMMITTER_DATE="+date).runIO(ctx, strings.NewReader(msg), nil, "commit-tree", tree, "-p", headC)
	if err != nil {
		return "", "", gitx.Classify(err, "git commit-tree (eviction backup)", sandboxapi.ErrWorkspaceUnavailable)
	}
	commit := strings.TrimSpace(string(out))
	if !isHex(commit) {
		return "", "", sandboxapi.Errorf(sandboxapi.ErrWorkspaceUnavailable, "git commit-tree: unexpected output %q", out)
	}
	ref := k.ref(wsID)
	if _, err := bg.run(ctx, "update-ref", "-m", "sandboxcore: "+k.what+" backup", ref, commit); err != nil {
		return "", "", gitx.Classify(err, "git update-ref "+ref, sandboxapi.ErrWorkspaceUnavailable)
	}
	return commit, ref, nil
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
		return 0, "", gitx.Classify(err, "git diff --binary (patch artifact)", sandboxapi.ErrWorkspaceUnavailable)
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
		return sandboxapi.Errorf(sandboxapi.ErrWorkspaceUnavailable, "verify backup of %s: "+format, append([]any{man.WorkspaceID}, args...)...)
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
		return gitx.Classify(err, "git log (verify backup)", sandboxapi.ErrWorkspaceUnavailable)
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
	return b.verifyPatchApplies(ctx, bg, man)
}

// verifyPatchApplies checks that man's patch artifact, applied with `git
// apply --cached` onto its head in a temporary index (in the backup
// directory, removed afterwards), gives man's tree. Errors:
// ErrWorkspaceUnavailable.
func (b *Backups) verifyPatchApplies(ctx context.Context, bg gitCtx, man sandbox.WorkspaceBackup) error {
	idx := filepath.Join(b.dir, man.WorkspaceID+".verify-index")
	defer func() { _ = os.Remove(idx); _ = os.Remove(idx + ".lock") }()
	_ = os.Remove(idx)
	g := bg.with("GIT_INDEX_FILE=" + idx)
	if _, err := g.run(ctx, "read-tree", "--end-of-options", man.Head); err != nil {
		return gitx.Classify(err, "git read-tree (verify backup)", sandboxapi.ErrWorkspaceUnavailable)
	}
	if _, err := g.run(ctx, "apply", "--cached", "--binary", "--whitespace=nowarn", "-p1", "--", man.PatchPath); err != nil {
		return sandboxapi.Errorf(sandboxapi.ErrWorkspaceUnavailable, "verify backup of %s: the patch does not apply onto HEAD: %v", man.WorkspaceID, err)
	}
	out, err := g.run(ctx, "write-tree")
	if err != nil {
		return gitx.Classify(err, "git write-tree (verify backup)", sandboxapi.ErrWorkspaceUnavailable)
	}
	if t := strings.TrimSpace(string(out)); t != man.Tree {
		return sandboxapi.Errorf(sandboxapi.ErrWorkspaceUnavailable, "verify backup of %s: the patch applied onto HEAD gives tree %s, want %s", man.WorkspaceID, t, man.Tree)
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
