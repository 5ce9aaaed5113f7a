package workspace

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sandboxcore/sandboxcore/internal/gitx"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// Checkpoints, forks and destroy backups (docs/API.md "Checkpoints",
// "Fork", "Destroy"): sandbox.LifecycleProvider on the eviction backup
// mechanism of backup.go. A checkpoint is a commit in the repo cache on
// sandboxapi.CheckpointRef(<id>, <n>) whose tree is the worktree's snapshot
// (Backups.snapshot: tracked and untracked, not ignored, files as raw bytes,
// in a temporary index) and whose only parent is HEAD; its message carries
// the metadata git cannot (label, branch, permission bits) as one JSON line
// after checkpointMetaPrefix. Rollbacks, fork manifests and destroy restores
// write trees back with Backups.bringTo (raw writes through an os.Root).

var _ sandbox.LifecycleProvider = (*Backups)(nil)

// checkpointMetaPrefix starts the metadata line of a checkpoint commit's message.
const checkpointMetaPrefix = "sandboxcore-checkpoint: "

// cpMeta is the metadata line of a checkpoint commit.
type cpMeta struct {
	V            int    `json:"v"`
	WorkspaceID  string `json:"workspace_id"`
	ID           int    `json:"id"`
	Label        string `json:"label,omitempty"`
	Branch       string `json:"branch"`
	Head         string `json:"head"`
	FilesChanged int    `json:"files_changed"`
	// CreatedAt is RFC 3339 with nanoseconds (UTC).
	CreatedAt string `json:"created_at"`
	// Modes holds the permission bits git does not record
	// (bkSnapshot.modes), keyed by the base64 (standard) of the path: paths
	// are bytes, JSON strings are UTF-8.
	Modes map[string]uint32 `json:"modes_b64,omitempty"`
}

func encodeModes(m map[string]uint32) map[string]uint32 {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]uint32, len(m))
	for p, v := range m {
		out[base64.StdEncoding.EncodeToString([]byte(p))] = v
	}
	return out
}

func decodeModes(m map[string]uint32) (map[string]uint32, error) {
	if len(m) == 0 {
		return nil, nil
	}
	out := make(map[string]uint32, len(m))
	for k, v := range m {
		p, err := base64.StdEncoding.DecodeString(k)
		if err != nil || v&^0o7777 != 0 {
			return nil, fmt.Errorf("bad mode entry %q", k)
		}
		clean, err := sandboxapi.CleanRelPath(string(p))
		if err != nil || clean != string(p) {
			return nil, fmt.Errorf("bad mode path %q", p)
		}
		out[string(p)] = v
	}
	return out, nil
}

// cpRecord is one checkpoint as read from the repo cache.
type cpRecord struct {
	cp    sandboxapi.Checkpoint
	tree  string
	modes map[string]uint32
}

// checkpointRefs returns the checkpoint numbers of wsID and their commits.
func (b *Backups) checkpointRefs(ctx context.Context, bg gitCtx, wsID string) (map[int]string, error) {
	prefix := sandboxapi.CheckpointRefPrefix + wsID + "/"
	out, err := bg.run(ctx, "for-each-ref", "--format=%(objectname) %(refname)", "--end-of-options", prefix)
	if err != nil {
		return nil, gitx.Classify(err, "git for-each-ref "+prefix, sandboxapi.ErrWorkspaceUnavailable)
	}
	refs := map[int]string{}
	for _, line := range strings.Split(string(out), "\n") {
		sha, name, ok := strings.Cut(line, " ")
		if !ok || !isHex(sha) {
			continue
		}
		n, err := strconv.Atoi(strings.TrimPrefix(name, prefix))
		if err != nil || n < 1 || sandboxapi.CheckpointRef(wsID, n) != name {
			continue // not one of ours: never trusted
		}
		refs[n] = sha
	}
	return refs, nil
}

// readCommits reads the raw commit objects of shas with one `git cat-file --batch`.
func readCommits(ctx context.Context, bg gitCtx, shas []string) (map[string][]byte, error) {
	var in bytes.Buffer
	for _, s := range shas {
		in.WriteString(s + "\n")
	}
	var out bytes.Buffer
	if _, err := bg.runIO(ctx, &in, &out, "cat-file", "--batch"); err != nil {
		return nil, gitx.Classify(err, "git cat-file --batch", sandboxapi.ErrWorkspaceUnavailable)
	}
	res := map[string][]byte{}
	r := bufio.NewReader(&out)
	for {
		header, err := r.ReadString('\n')
		if err != nil {
			break
		}
		f := strings.Fields(header)
		if len(f) != 3 || f[1] != "commit" {
			continue // "<sha> missing", or not a commit
		}
		size, err := strconv.Atoi(f[2])
		if err != nil || size < 0 || size > 64<<20 {
			return nil, sandboxapi.Errorf(sandboxapi.ErrWorkspaceUnavailable, "git cat-file --batch: bad header %q", strings.TrimSpace(header))
		}
		body := make([]byte, size+1)
		if _, err := io.ReadFull(r, body); err != nil {
			return nil, sandboxapi.Errorf(sandboxapi.ErrWorkspaceUnavailable, "git cat-file --batch: short object %s", f[0])
		}
		res[f[0]] = body[:size]
	}
	return res, nil
}

// parseCheckpoint reads checkpoint n of wsID from its raw commit object:
// its tree, its only parent (which must be the recorded head) and the
// metadata line. Errors: a plain error naming what is malformed.
func parseCheckpoint(wsID string, n int, sha string, raw []byte) (cpRecord, error) {
	hdr, msg, ok := bytes.Cut(raw, []byte("\n\n"))
	if !ok {
		return cpRecord{}, errors.New("no message")
	}
	var tree string
	var parents []string
	for _, l := range strings.Split(string(hdr), "\n") {
		if t, ok := strings.CutPrefix(l, "tree "); ok {
			tree = t
		} else if p, ok := strings.CutPrefix(l, "parent "); ok {
			parents = append(parents, p)
		}
	}
	var meta cpMeta
	found := false
	for _, l := range strings.Split(string(msg), "\n") {
		if j, ok := strings.CutPrefix(l, checkpointMetaPrefix); ok {
			if err := json.Unmarshal([]byte(j), &meta); err != nil {
				return cpRecord{}, fmt.Errorf("metadata: %v", err)
			}
			found = true
		}
	}
	switch {
	case !found:
		return cpRecord{}, errors.New("no metadata line")
	case !isHex(tree) || len(parents) != 1 || parents[0] != meta.Head:
		return cpRecord{}, errors.New("tree or parent does not match the metadata")
	case meta.WorkspaceID != wsID || meta.ID != n:
		return cpRecord{}, errors.New("metadata names another checkpoint")
	case meta.Branch != "" && sandboxapi.ValidateRef(meta.Branch) != nil:
		return cpRecord{}, errors.New("bad branch")
	}
	modes, err := decodeModes(meta.Modes)
	if err != nil {
		return cpRecord{}, err
	}
	rec := cpRecord{tree: tree, modes: modes, cp: sandboxapi.Checkpoint{
		ID: n, Label: meta.Label, FilesChanged: meta.FilesChanged, Commit: sha,
		Ref: sandboxapi.CheckpointRef(wsID, n), Head: meta.Head, Branch: meta.Branch,
	}}
	if t, err := time.Parse(time.RFC3339Nano, meta.CreatedAt); err == nil {
		rec.cp.CreatedAt = t
	}
	return rec, nil
}

// records reads every checkpoint of wsID, oldest first; unreadable ones are
// skipped (and logged).
func (b *Backups) records(ctx context.Context, bg gitCtx, wsID string) ([]cpRecord, map[int]string, error) {
	refs, err := b.checkpointRefs(ctx, bg, wsID)
	if err != nil || len(refs) == 0 {
		return nil, refs, err
	}
	ids := make([]int, 0, len(refs))
	shas := make([]string, 0, len(refs))
	for n, sha := range refs {
		ids = append(ids, n)
		shas = append(shas, sha)
	}
	sort.Ints(ids)
	raw, err := readCommits(ctx, bg, shas)
	if err != nil {
		return nil, refs, err
	}
	var out []cpRecord
	for _, n := range ids {
		rec, err := parseCheckpoint(wsID, n, refs[n], raw[refs[n]])
		if err != nil {
			b.m.log.Warn("workspace: unreadable checkpoint skipped", "workspace_id", wsID, "checkpoint", n, "err", err)
			continue
		}
		out = append(out, rec)
	}
	return out, refs, nil
}

// record takes checkpoint n of the open worktree w (label validated).
func (b *Backups) record(ctx context.Context, w *wtRepo, bg gitCtx, wsID string, n int, label string) (cpRecord, error) {
	headC, branch, err := head(ctx, w.git.with(readEnv))
	if err != nil {
		return cpRecord{}, err
	}
	snap, err := b.snapshot(ctx, w)
	if err != nil {
		return cpRecord{}, err
	}
	out, err := bg.run(ctx, "diff-tree", "-r", "-z", "--no-renames", "--name-only", "--no-ext-diff", "--no-textconv", "--end-of-options", headC, snap.tree, "--")
	if err != nil {
		return cpRecord{}, gitx.Classify(err, "git diff-tree (checkpoint)", sandboxapi.ErrWorkspaceUnavailable)
	}
	changed := 0
	for _, p := range strings.Split(string(out), "\x00") {
		if p != "" {
			changed++
		}
	}
	now := b.m.now().UTC()
	meta := cpMeta{V: 1, WorkspaceID: wsID, ID: n, Label: label, Branch: branch, Head: headC, FilesChanged: changed,
		CreatedAt: now.Format("2006-01-02T15:04:05.000000000Z07:00"), Modes: encodeModes(snap.modes)}
	line, err := json.Marshal(meta)
	if err != nil {
		return cpRecord{}, sandboxapi.Errorf(sandboxapi.ErrWorkspaceUnavailable, "encode checkpoint metadata: %v", err)
	}
	subject := fmt.Sprintf("sandboxcore: checkpoint %d of %s", n, wsID)
	if label != "" {
		subject += ": " + label
	}
	msg := subject + "\n\n" + checkpointMetaPrefix + string(line) + "\n"
	date := fmt.Sprintf("@%d +0000", now.Unix())
	out, err = bg.with("GIT_AUTHOR_DATE="+date, "GIT_COMMITTER_DATE="+date).runIO(ctx, strings.NewReader(msg), nil, "commit-tree", snap.tree, "-p", headC)
	if err != nil {
		return cpRecord{}, gitx.Classify(err, "git commit-tree (checkpoint)", sandboxapi.ErrWorkspaceUnavailable)
	}
	commit := strings.TrimSpace(string(out))
	if !isHex(commit) {
		return cpRecord{}, sandboxapi.Errorf(sandboxapi.ErrWorkspaceUnavailable, "git commit-tree: unexpected output %q", out)
	}
	ref := sandboxapi.CheckpointRef(wsID, n)
	// "create" fails when the ref exists: a checkpoint is never overwritten.
	if _, err := bg.runIO(ctx, strings.NewReader("create "+ref+" "+commit+"\n"), nil, "update-ref", "-m", "sandboxcore: checkpoint", "--stdin"); err != nil {
		return cpRecord{}, gitx.Classify(err, "git update-ref "+ref, sandboxapi.ErrWorkspaceUnavailable)
	}
	b.m.log.Info("workspace: checkpoint recorded", "workspace_id", wsID, "checkpoint", n, "commit", commit, "files_changed", changed)
	return cpRecord{tree: snap.tree, modes: snap.modes, cp: sandboxapi.Checkpoint{ID: n, Label: label, CreatedAt: now, FilesChanged: changed,
		Commit: commit, Ref: ref, Head: headC, Branch: branch}}, nil
}

// Checkpoint records ws's exact state as the next checkpoint
// (sandbox.LifecycleProvider): the worktree's snapshot committed onto
// CheckpointRef(ws.ID, n), n = the highest existing number + 1, with HEAD as
// parent; the branch, the index and the files are not touched. Errors:
// ErrInvalidArgument (label), ErrResourceLimit (sandbox.MaxCheckpoints),
// ErrWorkspaceDirty (a nested repository: nestedRepoError), ErrWorkspaceNotFound,
// ErrWorkspaceUnavailable.
func (b *Backups) Checkpoint(ctx context.Context, ws sandboxapi.Workspace, label string) (sandboxapi.Checkpoint, error) {
	if err := (sandboxapi.CheckpointInput{Label: label}).Validate(); err != nil {
		return sandboxapi.Checkpoint{}, err
	}
	if err := sandboxapi.ValidateWorkspaceID(ws.ID); err != nil {
		return sandboxapi.Checkpoint{}, err
	}
	w, err := b.m.openWorktree(ctx, ws)
	if err != nil {
		return sandboxapi.Checkpoint{}, err
	}
	bg := b.m.bareGit(w.bare)
	rec, err := b.next(ctx, w, bg, ws.ID, label)
	return rec.cp, err
}

func (b *Backups) next(ctx context.Context, w *wtRepo, bg gitCtx, wsID, label string) (cpRecord, error) {
	refs, err := b.checkpointRefs(ctx, bg, wsID)
	if err != nil {
		return cpRecord{}, err
	}
	if len(refs) >= sandboxapi.MaxCheckpoints {
		return cpRecord{}, sandboxapi.Errorf(sandboxapi.ErrResourceLimit, "workspace %s has %d checkpoints, the most it may keep", wsID, len(refs))
	}
	n := 1
	for k := range refs {
		n = max(n, k+1)
	}
	return b.record(ctx, w, bg, wsID, n, label)
}

// Checkpoints lists ws's checkpoints, oldest first (sandbox.LifecycleProvider).
// It reads only the repo cache. Errors: ErrInvalidArgument (bad id or
// path), ErrWorkspaceUnavailable.
func (b *Backups) Checkpoints(ctx context.Context, ws sandboxapi.Workspace) ([]sandboxapi.Checkpoint, error) {
	if err := sandboxapi.ValidateWorkspaceID(ws.ID); err != nil {
		return nil, err
	}
	l, err := locate(ws)
	if err != nil {
		return nil, err
	}
	if !isDir(l.bare) {
		return []sandboxapi.Checkpoint{}, nil
	}
	recs, _, err := b.records(ctx, b.m.bareGit(l.bare), ws.ID)
	if err != nil {
		return nil, err
	}
	out := make([]sandboxapi.Checkpoint, 0, len(recs))
	for _, r := range recs {
		out = append(out, r.cp)
	}
	return out, nil
}

// checkpointByID returns checkpoint id of wsID. Errors: ErrNotFound.
func (b *Backups) checkpointByID(ctx context.Context, bg gitCtx, wsID string, id int) (cpRecord, error) {
	refs, err := b.checkpointRefs(ctx, bg, wsID)
	if err != nil {
		return cpRecord{}, err
	}
	sha, ok := refs[id]
	if !ok {
		return cpRecord{}, sandboxapi.Errorf(sandboxapi.ErrNotFound, "workspace %s has no checkpoint %d", wsID, id)
	}
	raw, err := readCommits(ctx, bg, []string{sha})
	if err != nil {
		return cpRecord{}, err
	}
	rec, err := parseCheckpoint(wsID, id, sha, raw[sha])
	if err != nil {
		return cpRecord{}, sandboxapi.Errorf(sandboxapi.ErrWorkspaceUnavailable, "checkpoint %d of workspace %s is unreadable: %v", id, wsID, err)
	}
	return rec, nil
}

// Rollback brings ws back to checkpoint id (sandbox.LifecycleProvider):
// first a checkpoint of the current state is taken (RollbackResult.Undo;
// when a rollback interrupted by a crash left RollbackMarkerFile and the
// worktree is still as it left it, that rollback's undo point is reported
// instead: interruptedUndo), then HEAD is put back — on a checkpoint taken on a branch, that branch is
// moved to the checkpoint's head and checked out; on a detached one, HEAD is
// detached there — the index is reset to HEAD (`git read-tree`), and the
// files are brought to the checkpoint's tree with their permission bits
// (bringTo). Changes show as unstaged or untracked afterwards: the
// staged/unstaged split is not recorded. Errors: ErrNotFound (no such
// checkpoint), ErrConflict (its branch is checked out in another worktree),
// ErrWorkspaceDirty (a merge, rebase, cherry-pick or revert is in progress:
// nothing is changed), ErrResourceLimit, ErrWorkspaceNotFound, ErrWorkspaceUnavailable.
func (b *Backups) Rollback(ctx context.Context, ws sandboxapi.Workspace, id int) (sandboxapi.RollbackResult, error) {
	if err := sandboxapi.ValidateWorkspaceID(ws.ID); err != nil {
		return sandboxapi.RollbackResult{}, err
	}
	w, err := b.m.openWorktree(ctx, ws)
	if err != nil {
		return sandboxapi.RollbackResult{}, err
	}
	bg := b.m.bareGit(w.bare)
	target, err := b.checkpointByID(ctx, bg, ws.ID, id)
	if err != nil {
		return sandboxapi.RollbackResult{}, err
	}
	if c, _ := b.m.firstCommit(ctx, bg, target.cp.Head); c != target.cp.Head {
		return sandboxapi.RollbackResult{}, sandboxapi.Errorf(sandboxapi.ErrWorkspaceUnavailable, "checkpoint %d: its head %s is missing from the repo cache", id, target.cp.Head)
	}
	// An operation the agent left in progress is never thrown away (as
	// merge_branches): its state is not part of a checkpoint.
	for _, f := range inProgressFiles {
		if _, err := os.Lstat(filepath.Join(w.admin, f)); err == nil {
			return sandboxapi.RollbackResult{}, sandboxapi.Errorf(sandboxapi.ErrWorkspaceDirty, "workspace %s: an operation is in progress (%s); finish or abort it before rolling back", ws.ID, f)
		}
	}
	if br := target.cp.Branch; br != "" {
		entries, err := b.m.listWorktrees(ctx, bg)
		if err != nil {
			return sandboxapi.RollbackResult{}, err
		}
		for _, e := range entries {
			if e.Branch == "refs/heads/"+br && e.Path != w.wt {
				return sandboxapi.RollbackResult{}, sandboxapi.Errorf(sandboxapi.ErrConflict, "checkpoint %d is on branch %s, which another workspace has checked out", id, br)
			}
		}
	}
	undo, err := b.interruptedUndo(ctx, w, bg, ws.ID)
	if err != nil {
		return sandboxapi.RollbackResult{}, err
	}
	if undo == nil {
		rec, err := b.next(ctx, w, bg, ws.ID, fmt.Sprintf("before rollback to checkpoint %d", id))
		if err != nil {
			return sandboxapi.RollbackResult{}, err
		}
		undo = &rec
		if err := writeRollbackMarker(w.admin, rollbackMarker{Undo: rec.cp.ID, Target: id}); err != nil {
			return sandboxapi.RollbackResult{}, err
		}
	}
	g := w.git
	if br := target.cp.Branch; br != "" {
		if _, err := g.run(ctx, "update-ref", "-m", fmt.Sprintf("sandboxcore: rollback to checkpoint %d", id), "--end-of-options", "refs/heads/"+br, target.cp.Head); err != nil {
			return sandboxapi.RollbackResult{}, gitx.Classify(err, "git update-ref refs/heads/"+br, sandboxapi.ErrWorkspaceUnavailable)
		}
		if _, err := g.run(ctx, "symbolic-ref", "-m", "sandboxcore: rollback", "HEAD", "refs/heads/"+br); err != nil {
			return sandboxapi.RollbackResult{}, gitx.Classify(err, "git symbolic-ref HEAD", sandboxapi.ErrWorkspaceUnavailable)
		}
	} else if _, err := g.run(ctx, "update-ref", "--no-deref", "-m", fmt.Sprintf("sandboxcore: rollback to checkpoint %d", id), "HEAD", target.cp.Head); err != nil {
		return sandboxapi.RollbackResult{}, gitx.Classify(err, "git update-ref HEAD", sandboxapi.ErrWorkspaceUnavailable)
	}
	if _, err := g.run(ctx, "read-tree", "--end-of-options", target.cp.Head); err != nil {
		return sandboxapi.RollbackResult{}, gitx.Classify(err, "git read-tree", sandboxapi.ErrWorkspaceUnavailable)
	}
	b.m.crash("rollback-moved", w.wt)
	if err := b.bringTo(ctx, w, bg, target.tree, target.modes); err != nil {
		return sandboxapi.RollbackResult{}, err
	}
	if err := os.Remove(filepath.Join(w.admin, RollbackMarkerFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return sandboxapi.RollbackResult{}, fsError(err, "remove rollback marker")
	}
	b.m.log.Info("workspace: rolled back", "workspace_id", ws.ID, "checkpoint", id, "undo", undo.cp.ID, "head", target.cp.Head)
	return sandboxapi.RollbackResult{Checkpoint: target.cp, Undo: undo.cp, Head: target.cp.Head, Branch: target.cp.Branch}, nil
}

// RollbackMarkerFile, in a worktree's administrative directory, records a
// rollback in progress: the checkpoint of the state before it (its undo
// point) and its target, written once the undo checkpoint exists and
// removed when the files are the target's. A rollback interrupted by a
// crash leaves it behind, so the next rollback reports that undo point,
// not the half-rolled-back state (interruptedUndo).
const RollbackMarkerFile = "sandboxcore-rollback"

// rollbackMarker is the content of RollbackMarkerFile.
type rollbackMarker struct {
	Undo   int `json:"undo"`
	Target int `json:"target"`
}

func writeRollbackMarker(admin string, mk rollbackMarker) error {
	data, err := json.Marshal(mk)
	if err != nil {
		return sandboxapi.Errorf(sandboxapi.ErrWorkspaceUnavailable, "encode rollback marker: %v", err)
	}
	return writeFileAtomic(filepath.Join(admin, RollbackMarkerFile), append(data, '\n'))
}

// interruptedUndo returns the undo checkpoint of a rollback that was
// interrupted (RollbackMarkerFile) when the worktree is still in the state
// it left: HEAD at the undo point's or the target's head, and no path
// differing from both the undo point's and the target's trees (each path is
// one of the two, both saved). Then the state before that rollback is the
// one to report as the undo point. Otherwise (no marker, an unreadable one,
// a checkpoint gone, or the worktree changed since) the marker is dropped
// and nil returned: the caller checkpoints the state as it is.
func (b *Backups) interruptedUndo(ctx context.Context, w *wtRepo, bg gitCtx, wsID string) (*cpRecord, error) {
	path := filepath.Join(w.admin, RollbackMarkerFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	drop := func(why string) (*cpRecord, error) {
		b.m.log.Info("workspace: stale rollback marker dropped", "workspace_id", wsID, "why", why)
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fsError(err, "remove rollback marker")
		}
		return nil, nil
	}
	var mk rollbackMarker
	if err != nil || json.Unmarshal(data, &mk) != nil {
		return drop("unreadable")
	}
	undo, err := b.checkpointByID(ctx, bg, wsID, mk.Undo)
	if err != nil {
		return drop("undo checkpoint gone")
	}
	target, err := b.checkpointByID(ctx, bg, wsID, mk.Target)
	if err != nil {
		return drop("target checkpoint gone")
	}
	headC, _, err := head(ctx, w.git.with(readEnv))
	if err != nil {
		return nil, err
	}
	if headC != undo.cp.Head && headC != target.cp.Head {
		return drop("HEAD moved since")
	}
	snap, err := b.snapshot(ctx, w)
	if err != nil {
		return nil, err
	}
	fromUndo, err := bkDiffTrees(ctx, bg, undo.tree, snap.tree)
	if err != nil {
		return nil, err
	}
	fromTarget, err := bkDiffTrees(ctx, bg, target.tree, snap.tree)
	if err != nil {
		return nil, err
	}
	changed := make(map[string]bool, len(fromUndo))
	for _, c := range fromUndo {
		changed[c.path] = true
	}
	for _, c := range fromTarget {
		if changed[c.path] {
			return drop("the worktree changed since")
		}
	}
	b.m.log.Warn("workspace: finishing an interrupted rollback", "workspace_id", wsID, "undo", undo.cp.ID, "interrupted_target", target.cp.ID)
	return &undo, nil
}

// matchesNewestCheckpoint reports whether ws's HEAD, content and permission
// bits are exactly those of its newest checkpoint.
func (b *Backups) matchesNewestCheckpoint(ctx context.Context, ws sandboxapi.Workspace, headC string) (bool, error) {
	w, err := b.m.openWorktree(ctx, ws)
	if err != nil {
		return false, err
	}
	bg := b.m.bareGit(w.bare)
	refs, err := b.checkpointRefs(ctx, bg, ws.ID)
	if err != nil || len(refs) == 0 {
		return false, err
	}
	newest := 0
	for n := range refs {
		newest = max(newest, n)
	}
	rec, err := b.checkpointByID(ctx, bg, ws.ID, newest)
	if err != nil || rec.cp.Head != headC {
		return false, err
	}
	snap, err := b.snapshot(ctx, w)
	if err != nil {
		return false, err
	}
	return snap.tree == rec.tree && maps.Equal(snap.modes, rec.modes), nil
}

// ---------------------------------------------------------------------------
// Forks

func (b *Backups) forkManifestPath(targetID string) string {
	return filepath.Join(b.dir, "forks", targetID+".json")
}

// PrepareFork checkpoints src ("fork to <target>") and leaves a fork manifest for
// the target's first acquire (sandbox.LifecycleProvider). A pending fork manifest of
// the same OpID is returned as it is (a retried fork). Errors:
// ErrInvalidArgument (target), ErrConflict (the target's branch exists in
// the repo cache: the key was used before), the errors of Checkpoint.
func (b *Backups) PrepareFork(ctx context.Context, src sandboxapi.Workspace, target sandbox.ForkTarget) (sandboxapi.Checkpoint, sandbox.ForkManifest, error) {
	if err := sandboxapi.ValidateWorkspaceID(target.ID); err != nil {
		return sandboxapi.Checkpoint{}, sandbox.ForkManifest{}, err
	}
	if err := sandboxapi.ValidateRef(target.Branch); err != nil {
		return sandboxapi.Checkpoint{}, sandbox.ForkManifest{}, err
	}
	if prev, ok, err := b.ForkManifest(ctx, target.ID); err == nil && ok && prev.SourceID == src.ID && prev.OpID == target.OpID && target.OpID != "" {
		w, err := b.m.openWorktree(ctx, src)
		if err != nil {
			return sandboxapi.Checkpoint{}, sandbox.ForkManifest{}, err
		}
		rec, err := b.checkpointByID(ctx, b.m.bareGit(w.bare), src.ID, prev.Checkpoint)
		if err == nil {
			return rec.cp, prev, nil
		}
	}
	w, err := b.m.openWorktree(ctx, src)
	if err != nil {
		return sandboxapi.Checkpoint{}, sandbox.ForkManifest{}, err
	}
	bg := b.m.bareGit(w.bare)
	if tip, err := b.m.firstCommit(ctx, bg, "refs/heads/"+target.Branch); err != nil {
		return sandboxapi.Checkpoint{}, sandbox.ForkManifest{}, err
	} else if tip != "" {
		return sandboxapi.Checkpoint{}, sandbox.ForkManifest{}, sandboxapi.Errorf(sandboxapi.ErrConflict, "branch %s exists already in the repo cache (workspace %s was used before): fork to a new id", target.Branch, target.ID)
	}
	rec, err := b.next(ctx, w, bg, src.ID, "fork to "+target.ID)
	if err != nil {
		return sandboxapi.Checkpoint{}, sandbox.ForkManifest{}, err
	}
	fm := sandbox.ForkManifest{TargetID: target.ID, TargetBranch: target.Branch, SourceID: src.ID, Checkpoint: rec.cp.ID,
		Ref: rec.cp.Ref, Commit: rec.cp.Commit, Tree: rec.tree, Head: rec.cp.Head, OpID: target.OpID, CreatedAt: b.m.now().UTC()}
	if err := b.writeForkManifest(fm); err != nil {
		return sandboxapi.Checkpoint{}, sandbox.ForkManifest{}, err
	}
	return rec.cp, fm, nil
}

func (b *Backups) writeForkManifest(fm sandbox.ForkManifest) error {
	data, err := json.MarshalIndent(fm, "", "  ")
	if err != nil {
		return sandboxapi.Errorf(sandboxapi.ErrWorkspaceUnavailable, "encode fork manifest: %v", err)
	}
	return writeFileAtomic(b.forkManifestPath(fm.TargetID), append(data, '\n'))
}

// writeFileAtomic writes data to path through a synced temporary file in
// the same directory (created 0700 when missing) and a rename.
func writeFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fsError(err, "create "+dir)
	}
	tmp, err := os.CreateTemp(dir, filepath.Base(path)+".tmp-*")
	if err != nil {
		return fsError(err, "write "+path)
	}
	defer os.Remove(tmp.Name())
	_, werr := tmp.Write(data)
	if err := errors.Join(werr, tmp.Sync(), tmp.Close()); err != nil {
		return fsError(err, "write "+path)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fsError(err, "write "+path)
	}
	bkSyncDir(dir)
	return nil
}

// ForkManifest returns the fork manifest left for targetID (sandbox.LifecycleProvider).
// Errors: ErrInvalidArgument (id), ErrWorkspaceUnavailable (malformed fork manifest).
func (b *Backups) ForkManifest(_ context.Context, targetID string) (sandbox.ForkManifest, bool, error) {
	if err := sandboxapi.ValidateWorkspaceID(targetID); err != nil {
		return sandbox.ForkManifest{}, false, err
	}
	data, err := os.ReadFile(b.forkManifestPath(targetID))
	if errors.Is(err, fs.ErrNotExist) {
		return sandbox.ForkManifest{}, false, nil
	}
	if err != nil {
		return sandbox.ForkManifest{}, false, fsError(err, "read fork manifest")
	}
	var fm sandbox.ForkManifest
	if err := json.Unmarshal(data, &fm); err != nil || fm.TargetID != targetID || sandboxapi.ValidateWorkspaceID(fm.SourceID) != nil ||
		!isHex(fm.Commit) || !isHex(fm.Tree) || !isHex(fm.Head) || sandboxapi.ValidateRef(fm.TargetBranch) != nil || fm.Checkpoint < 1 {
		return sandbox.ForkManifest{}, false, sandboxapi.Errorf(sandboxapi.ErrWorkspaceUnavailable, "fork manifest %s is malformed", b.forkManifestPath(targetID))
	}
	return fm, true, nil
}

// ApplyFork writes ws's pending fork manifest into its fresh worktree
// (sandbox.LifecycleProvider): HEAD must be the manifest's Head on the manifest's
// branch; the checkpoint's tree and permission bits are written with
// bringTo, the index is left at HEAD, so the source's uncommitted and
// untracked files show as unstaged and untracked changes. Errors:
// ErrConflict (HEAD is elsewhere), ErrWorkspaceUnavailable (the checkpoint
// is missing or unreadable), ErrWorkspaceNotFound.
func (b *Backups) ApplyFork(ctx context.Context, ws sandboxapi.Workspace) (sandbox.ForkManifest, bool, error) {
	fm, ok, err := b.ForkManifest(ctx, ws.ID)
	if err != nil || !ok {
		return fm, false, err
	}
	if fm.ConsumedAt != nil {
		return fm, true, nil
	}
	w, err := b.m.openWorktree(ctx, ws)
	if err != nil {
		return fm, false, err
	}
	headC, branch, err := head(ctx, w.git.with(readEnv))
	if err != nil {
		return fm, false, err
	}
	if headC != fm.Head || branch != fm.TargetBranch {
		return fm, false, sandboxapi.Errorf(sandboxapi.ErrConflict, "workspace %s is on %q at %s, but its fork from %s starts on %q at %s", ws.ID, branch, headC, fm.SourceID, fm.TargetBranch, fm.Head)
	}
	bg := b.m.bareGit(w.bare)
	rec, err := b.checkpointByID(ctx, bg, fm.SourceID, fm.Checkpoint)
	if err != nil || rec.cp.Commit != fm.Commit || rec.tree != fm.Tree {
		return fm, false, sandboxapi.Errorf(sandboxapi.ErrWorkspaceUnavailable, "fork of %s into %s: checkpoint %d of the source is missing or changed", fm.SourceID, ws.ID, fm.Checkpoint)
	}
	if err := b.bringTo(ctx, w, bg, rec.tree, rec.modes); err != nil {
		return fm, false, err
	}
	at := b.m.now().UTC()
	fm.ConsumedAt = &at
	if err := b.writeForkManifest(fm); err != nil {
		return fm, false, err
	}
	b.m.log.Info("workspace: fork written", "workspace_id", ws.ID, "source", fm.SourceID, "checkpoint", fm.Checkpoint)
	return fm, true, nil
}

// DropForkManifest deletes targetID's fork manifest; a missing one is success.
func (b *Backups) DropForkManifest(_ context.Context, targetID string) error {
	if err := sandboxapi.ValidateWorkspaceID(targetID); err != nil {
		return err
	}
	if err := os.Remove(b.forkManifestPath(targetID)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fsError(err, "remove fork manifest")
	}
	return nil
}

// ---------------------------------------------------------------------------
// Destroy

// SaveForDestroy saves ws's work before a destroy (sandbox.LifecycleProvider):
// a ready workspace whose worktree is dirty or has unpushed commits is
// backed up (Backup's mechanism and verification) onto DestroyedRef with its
// patch and manifest under <Dir>/destroyed; an evicted workspace's pending
// eviction backup is moved there (same commit; ref, patch and manifest
// renamed). It returns false when nothing needed saving. Errors:
// ErrConflict (an earlier destroy backup of this id was never restored:
// restore it, or destroy with discard), the errors of Backup.
func (b *Backups) SaveForDestroy(ctx context.Context, ws sandboxapi.Workspace) (sandbox.WorkspaceBackup, bool, error) {
	dk := b.destroyed()
	if prev, ok, err := b.pending(ws.ID, dk); err != nil {
		return sandbox.WorkspaceBackup{}, false, err
	} else if ok {
		return prev, false, sandboxapi.Errorf(sandboxapi.ErrConflict, "workspace %s still has the unrestored backup of an earlier destroy (%s): restore it first, or destroy with discard", ws.ID, prev.Ref)
	}
	if ws.State == sandboxapi.WorkspaceEvicted {
		return b.adoptEvicted(ctx, ws)
	}
	if ok, err := b.m.Exists(ctx, ws); err != nil || !ok {
		return sandbox.WorkspaceBackup{}, false, err
	}
	un, err := b.UnsavedWork(ctx, ws)
	if err != nil {
		return sandbox.WorkspaceBackup{}, false, err
	}
	if !un.NeedsBackup() {
		return sandbox.WorkspaceBackup{}, false, nil
	}
	man, err := b.backupAs(ctx, ws, dk)
	return man, err == nil, err
}

// adoptEvicted moves the pending eviction backup of ws to the destroy backups.
func (b *Backups) adoptEvicted(ctx context.Context, ws sandboxapi.Workspace) (sandbox.WorkspaceBackup, bool, error) {
	ek, dk := b.evicted(), b.destroyed()
	man, ok, err := b.pending(ws.ID, ek)
	if err != nil || !ok {
		return man, false, err
	}
	l, err := locate(ws)
	if err != nil {
		return man, false, err
	}
	bg := b.m.bareGit(l.bare)
	if err := b.checkBackupCommit(ctx, bg, man, ws.ID); err != nil {
		return man, false, err
	}
	if err := os.MkdirAll(dk.dir, 0o700); err != nil {
		return man, false, fsError(err, "backup directory")
	}
	if _, err := bg.run(ctx, "update-ref", "-m", "sandboxcore: destroy backup (from eviction)", dk.ref(ws.ID), man.Commit); err != nil {
		return man, false, gitx.Classify(err, "git update-ref "+dk.ref(ws.ID), sandboxapi.ErrWorkspaceUnavailable)
	}
	oldPatch := man.PatchPath
	man.Ref, man.PatchPath = dk.ref(ws.ID), dk.patchPath(ws.ID)
	if err := os.Rename(oldPatch, man.PatchPath); err != nil {
		return man, false, fsError(err, "move patch artifact")
	}
	if !isHex(man.BaseCommit) {
		man.BaseCommit = ws.BaseCommit
	}
	if err := b.writeManifest(dk, man); err != nil {
		return man, false, err
	}
	if err := os.Remove(ek.manifestPath(ws.ID)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return man, false, fsError(err, "remove eviction manifest")
	}
	if _, err := bg.run(ctx, "update-ref", "-d", "--end-of-options", ek.ref(ws.ID), man.Commit); err != nil {
		b.m.log.Warn("workspace: drop eviction ref after moving it", "workspace_id", ws.ID, "err", err)
	}
	return man, true, nil
}

// PendingDestroyed returns ws's destroy backup not yet restored
// (sandbox.LifecycleProvider). Errors: ErrInvalidArgument, ErrWorkspaceUnavailable.
func (b *Backups) PendingDestroyed(_ context.Context, ws sandboxapi.Workspace) (sandbox.WorkspaceBackup, bool, error) {
	return b.pending(ws.ID, b.destroyed())
}

// RestoreDestroyed brings ws's pending destroy backup back into its fresh
// worktree (sandbox.LifecycleProvider): the worktree must be clean, on the
// backup's branch, at the workspace's base commit (no commits of its own);
// the branch is moved to the backup's parent, the index reset to it, the
// files written back with their permission bits (bringTo), the backup's base
// commit recorded again, the manifest marked restored and DestroyedRef
// deleted (the work is in the worktree again; the patch stays). Errors:
// ErrWorkspaceDirty (not fresh), ErrConflict (another branch),
// ErrWorkspaceUnavailable, ErrWorkspaceNotFound.
func (b *Backups) RestoreDestroyed(ctx context.Context, ws sandboxapi.Workspace) (sandbox.WorkspaceBackup, bool, error) {
	dk := b.destroyed()
	man, w, bg, err := b.openPending(ctx, ws, dk)
	if err != nil || w == nil {
		return man, false, err
	}
	st, err := b.m.Status(ctx, ws)
	if err != nil {
		return man, false, err
	}
	if st.Branch != man.Branch {
		return man, false, sandboxapi.Errorf(sandboxapi.ErrConflict, "workspace %s is on %q, its destroyed work on %q", ws.ID, st.Branch, man.Branch)
	}
	if st.Dirty || st.Head != st.BaseCommit {
		return man, false, sandboxapi.Errorf(sandboxapi.ErrWorkspaceDirty, "workspace %s has changes of its own since it was created (%d commits, dirty=%t); restore needs it fresh: destroy it with discard first, or keep working and leave the backup at %s",
			ws.ID, st.CommitsSinceBase, st.Dirty, man.Ref)
	}
	g := w.git
	if man.Branch != "" {
		if _, err := g.run(ctx, "update-ref", "-m", "sandboxcore: restore destroyed work", "--end-of-options", "refs/heads/"+man.Branch, man.Head, st.Head); err != nil {
			return man, false, gitx.Classify(err, "git update-ref refs/heads/"+man.Branch, sandboxapi.ErrWorkspaceUnavailable)
		}
	} else if _, err := g.run(ctx, "update-ref", "--no-deref", "-m", "sandboxcore: restore destroyed work", "HEAD", man.Head); err != nil {
		return man, false, gitx.Classify(err, "git update-ref HEAD", sandboxapi.ErrWorkspaceUnavailable)
	}
	if _, err := g.run(ctx, "read-tree", "--end-of-options", man.Head); err != nil {
		return man, false, gitx.Classify(err, "git read-tree", sandboxapi.ErrWorkspaceUnavailable)
	}
	if err := b.bringTo(ctx, w, bg, man.Tree, man.Modes); err != nil {
		return man, false, err
	}
	if isHex(man.BaseCommit) {
		if err := writeBase(w.admin, man.BaseCommit, b.m.now()); err != nil {
			return man, false, err
		}
	}
	at := b.m.now().UTC()
	man.RestoredAt = &at
	if err := b.writeManifest(dk, man); err != nil {
		return man, false, err
	}
	if _, err := bg.run(ctx, "update-ref", "-d", "--end-of-options", man.Ref, man.Commit); err != nil {
		b.m.log.Warn("workspace: drop destroy backup ref after restoring it", "workspace_id", ws.ID, "err", err)
	}
	b.m.log.Info("workspace: destroyed work restored", "workspace_id", ws.ID, "commit", man.Commit, "files", man.Files)
	return man, true, nil
}

// DeleteBranch deletes ws's branch (edit, task) from the repo cache under
// the repository lock (sandbox.LifecycleProvider); a missing branch or
// repo cache is success. Errors: ErrConflict (the branch is checked out in
// a worktree), ErrRepoLocked, ErrWorkspaceUnavailable.
func (b *Backups) DeleteBranch(ctx context.Context, ws sandboxapi.Workspace) error {
	if ws.BranchName == "" {
		return nil
	}
	if err := sandboxapi.ValidateRef(ws.BranchName); err != nil {
		return err
	}
	l, err := locate(ws)
	if err != nil {
		return err
	}
	if !isDir(l.bare) {
		return nil
	}
	unlock, err := b.m.locker.LockRepo(ctx, ws.Repo)
	if err != nil {
		if sandboxapi.KindOf(err) == nil {
			err = sandboxapi.Errorf(sandboxapi.ErrRepoLocked, "lock repository %s: %w", ws.Repo.Key(), err)
		}
		return err
	}
	defer unlock()
	bg := b.m.bareGit(l.bare)
	ref := "refs/heads/" + ws.BranchName
	tip, err := b.m.firstCommit(ctx, bg, ref)
	if err != nil || tip == "" {
		return err
	}
	entries, err := b.m.listWorktrees(ctx, bg)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.Branch == ref {
			return sandboxapi.Errorf(sandboxapi.ErrConflict, "branch %s is checked out by another workspace", ws.BranchName)
		}
	}
	if _, err := bg.run(ctx, "update-ref", "-d", "-m", "sandboxcore: destroy", "--end-of-options", ref, tip); err != nil {
		return gitx.Classify(err, "git update-ref -d "+ref, sandboxapi.ErrWorkspaceUnavailable)
	}
	return nil
}

// Discard drops everything kept for ws (sandbox.LifecycleProvider): its
// checkpoint refs, its eviction and destroy backup refs, patches and
// manifests, and its fork manifest. Errors: ErrWorkspaceUnavailable.
func (b *Backups) Discard(ctx context.Context, ws sandboxapi.Workspace) error {
	if err := sandboxapi.ValidateWorkspaceID(ws.ID); err != nil {
		return err
	}
	var files []string
	for _, k := range []bkKind{b.evicted(), b.destroyed()} {
		files = append(files, k.manifestPath(ws.ID), k.patchPath(ws.ID))
	}
	files = append(files, b.forkManifestPath(ws.ID))
	if l, err := locate(ws); err == nil && isDir(l.bare) {
		bg := b.m.bareGit(l.bare)
		refs, err := b.checkpointRefs(ctx, bg, ws.ID)
		if err != nil {
			return err
		}
		var in strings.Builder
		for n := range refs {
			in.WriteString("delete " + sandboxapi.CheckpointRef(ws.ID, n) + "\n")
		}
		for _, r := range []string{sandbox.EvictedRef(ws.ID), sandboxapi.DestroyedRef(ws.ID)} {
			if c, _ := b.m.firstCommit(ctx, bg, r); c != "" {
				in.WriteString("delete " + r + "\n")
			}
		}
		if in.Len() > 0 {
			if _, err := bg.runIO(ctx, strings.NewReader(in.String()), nil, "update-ref", "-m", "sandboxcore: discard", "--stdin"); err != nil {
				return gitx.Classify(err, "git update-ref --stdin (discard)", sandboxapi.ErrWorkspaceUnavailable)
			}
		}
	}
	for _, f := range files {
		if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fsError(err, "discard "+f)
		}
	}
	b.m.log.Info("workspace: discarded saved work", "workspace_id", ws.ID)
	return nil
}
