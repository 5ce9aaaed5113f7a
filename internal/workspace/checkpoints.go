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

// ---------------------------------------------------------------------------
// Forks

// ---------------------------------------------------------------------------
// Destroy
