package workspace

import (
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
	"strconv"
	"strings"
	"time"

	"github.com/sandboxcore/sandboxcore/internal/gitx"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// Eviction backups (docs/DESIGN.md "Eviction policy": "Before deleting a dirty
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
// saved. A nested git repository (untracked, or staged as a new gitlink)
// cannot be saved: Backup then fails and the workspace stays.
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
func (b *Backups) UnsavedWork(ctx context.Context, ws sandboxapi.Workspace) (sandbox.UnsavedWork, error) {
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
		return 0, gitx.Classify(err, "git rev-list HEAD --not --remotes", sandboxapi.ErrWorkspaceUnavailable)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		return 0, sandboxapi.Errorf(sandboxapi.ErrWorkspaceUnavailable, "git rev-list --count: %q", out)
	}
	return n, nil
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
	return bkKind{"destroy", sandboxapi.DestroyedRef, filepath.Join(b.dir, "destroyed")}
}

func (k bkKind) patchPath(wsID string) string { return filepath.Join(k.dir, wsID+".patch") }

func (k bkKind) manifestPath(wsID string) string { return filepath.Join(k.dir, wsID+".json") }

// PendingBackup returns the manifest <Dir>/<id>.json when it exists and has
// not been restored. Errors: ErrInvalidArgument (bad id), ErrWorkspaceUnavailable
// (unreadable or malformed manifest).
func (b *Backups) PendingBackup(_ context.Context, ws sandboxapi.Workspace) (sandbox.WorkspaceBackup, bool, error) {
	return b.pending(ws.ID, b.evicted())
}

// pending is PendingBackup for backups of kind k.
func (b *Backups) pending(wsID string, k bkKind) (sandbox.WorkspaceBackup, bool, error) {
	ws := sandboxapi.Workspace{ID: wsID}
	if err := sandboxapi.ValidateWorkspaceID(ws.ID); err != nil {
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
		return sandbox.WorkspaceBackup{}, false, sandboxapi.Errorf(sandboxapi.ErrWorkspaceUnavailable, "backup manifest %s is malformed", k.manifestPath(ws.ID))
	}
	if man.RestoredAt != nil {
		return man, false, nil
	}
	return man, true, nil
}

func (b *Backups) writeManifest(k bkKind, man sandbox.WorkspaceBackup) error {
	data, err := json.MarshalIndent(man, "", "  ")
	if err != nil {
		return sandboxapi.Errorf(sandboxapi.ErrWorkspaceUnavailable, "encode backup manifest: %v", err)
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

// RepoCacheHoldsUnsavedWork runs `git rev-list -n1 --branches
// --glob=refs/sandbox/evicted/* --glob=refs/sandbox/destroyed/*
// --glob=refs/sandbox/checkpoints/* --not <savedElsewhere>` in the bare
// mirror: any output is a commit only this mirror has (eviction and destroy
// backups and checkpoints are saved work, docs/API.md "Checkpoints"). A
// missing mirror holds nothing. Errors: ErrInvalidArgument (LocalPath), ErrWorkspaceUnavailable.
func (b *Backups) RepoCacheHoldsUnsavedWork(ctx context.Context, cache sandbox.RepoCache) (bool, error) {
	bare, err := barePath(cache)
	if errors.Is(err, sandboxapi.ErrRepoCacheUnavailable) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	out, err := b.m.bareGit(bare).run(ctx, append(append([]string{"rev-list", "-n1", "--branches", "--glob=" + sandbox.EvictedRefPrefix + "*",
		"--glob=" + sandboxapi.DestroyedRefPrefix + "*", "--glob=" + sandboxapi.CheckpointRefPrefix + "*", "--not"}, savedElsewhere...), "--")...)
	if err != nil {
		return false, gitx.Classify(err, "git rev-list (unsaved work in repo cache)", sandboxapi.ErrWorkspaceUnavailable)
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
