// Package replica is the one sync mechanism of every remote runtime (Daytona,
// E2B): the workspace's host worktree stays its source of truth, and a remote
// sandbox holds a replaceable replica of it at its workdir (docs/DESIGN.md
// "The three things": a runtime may be stopped, recreated or moved without
// deleting the workspace; docs/SECURITY.md "Remote runtimes").
//
// # One pass
//
// Every command runs inside a pass: before it, what changed on the host since
// the last pass goes up; after it, what changed in the replica comes back.
// Tracked and untracked files, deletions, the executable bit and symbolic
// links travel both ways; file contents are byte-exact (no line-ending or
// filter conversion). Ignored files made in the replica (dependency installs,
// build output) stay there as caches and never come back; empty directories,
// special files, other permission bits of unchanged files, timestamps and
// untracked nested git repositories are not synced either.
//
//	host                                   remote ($W replica, $S state)
//	Begin: walk the worktree (lstat only,  rp_apply: extract the changes, delete
//	hash what changed), tar the changes,   the deleted paths, build the host's
//	manifest of (mode, blob) per path      view as a tree (no blobs stored),
//	upload                                 set the replica's git HEAD
//	                                       ... the command runs ...
//	Finish: download, validate every       rp_collect: git ls-files -m -d -o
//	entry, write through os.Root, record   on the bookkeeping index (a stat
//	the new state                          cache, ignored files excluded),
//	                                       diff the host's view against the
//	                                       replica, tar what differs
//
// The cost of a pass follows what changed, not the repository: both sides
// stat every file (as git status does) but hash, transfer and write only the
// changed ones; the host's view is built from its recorded blob ids, so the
// remote never re-reads unchanged files. docs/BENCHMARKS.md "Replica sync".
//
// # Consistency
//
// The host records the last agreed tree (Tree) and the number of the
// remote's last collect (Seq). A report is always a diff between the host's
// view and the replica, so a pass whose result never reached the host (a
// worker that died, a dropped response) loses nothing: the next pass reports
// the same differences again. Reports apply in collect order; an older one
// arriving after a newer one is dropped (the newer covers it), and a report
// whose base the host has moved past forces the next pass to compare the
// host's whole manifest (mode "manifest": metadata only, no contents). When
// the sandbox is new (created, or recreated after it vanished) the next pass
// uploads every file (mode "upload"). A file changed on both sides since the
// last pass is a conflict, never settled silently: the host's version stays
// at its path and the replica's is kept beside it as <path>.remote-conflict
// (Conflict; rp_guard when the host's change goes up, Finish when the
// replica's comes back), reported by the pass and by Status.
//
// # Git inside the replica
//
// The replica has its own .git, fed with git bundles made on the host from the
// workspace's repository (the first one with HEAD's history, later ones
// incremental), with HEAD on the workspace's branch (detached for analysis
// workspaces) and its index at HEAD: git status, log and diff work in the
// sandbox without any credential there and without contacting the code host.
// Its directories are made read-only (LockGit), so `git add` and `git commit`
// fail there as they do in the isolated local runtimes; commit through the
// workflow's commit update. Whatever happens to the replica's git, the next
// pass resets HEAD to the workspace's.
//
// # What the remote providers share
//
// Beyond the sync, the package holds the skeleton every remote provider
// builds on: the table of its runtime handles (Handles), the transport of
// its API key (HeaderTransport, NoRedirect), its Create (CreateFlow), a
// handle's spec and replica and the checks before a command (SpecReplica),
// the hibernation mark (Hibernated) and the retries of its calls (Retrier).
// A backend writes its own API calls, states, error mapping and names.
//
// # Remote requirements
//
// sh, GNU coreutils, GNU findutils, GNU tar 1.29 or later, util-linux's
// flock, and git 2.20 or later in the sandbox image.
package replica

import (
	"context"
	"crypto/rand"
	"encoding/gob"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/sandboxcore/sandboxcore/internal/gitx"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// EmptyTree is git's empty tree object id.
const EmptyTree = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"

// Defaults.
const (
	// DefaultPartBytes bounds one uploaded part, in bytes.
	DefaultPartBytes = 32 << 20
	// DefaultMaxReportBytes bounds what one pass may bring back, in bytes.
	DefaultMaxReportBytes = 2 << 30
)

// Source is the workspace on the host: its worktree and git directories.
type Source struct {
	// WorkTree is the host worktree (absolute): the source of truth.
	WorkTree string
	// GitDir is the worktree's git administrative directory
	// (<bare>/worktrees/<name>), whose HEAD is the workspace's; "" for a
	// directory that is not a git worktree (the replica then has no git).
	GitDir string
	// ReadOnly: changes made in the replica are reverted, never applied
	// (analysis workspaces).
	ReadOnly bool
}

// Layout names the remote paths.
type Layout struct {
	// Workdir is the replica's absolute path in the sandbox.
	Workdir string
	// StateDir is an absolute path outside Workdir for the bookkeeping.
	StateDir string
}

// Options configure a Replica.
type Options struct {
	Source Source
	Remote Layout
	// StateFile is the host path where the sync state is kept (its directory
	// is created); a missing file means "never synced".
	StateFile string
	// Git runs the host-side git calls (HEAD, bundles).
	Git *gitx.Runner
	// LockGit makes the replica's .git directories read-only after each
	// change of its HEAD.
	LockGit bool
	// PartBytes bounds one uploaded part; 0 means DefaultPartBytes.
	PartBytes int64
	// MaxReportBytes bounds one pass's report; 0 means DefaultMaxReportBytes.
	MaxReportBytes int64
	// Logger receives warnings (files that could not be synced); nil: slog.Default().
	Logger *slog.Logger
}

// Replica is the host side of one remote replica. It is safe for
// concurrent use: passes may overlap, their reports apply in collect order.
type Replica struct {
	src       Source
	remote    Layout
	stateFile string
	git       *gitx.Runner
	lockGit   bool
	partBytes int64
	maxReport int64
	log       *slog.Logger

	mu sync.Mutex
	st state
}

// state is what the host remembers between passes (gob-encoded: paths may be
// any bytes).
type state struct {
	// Tree is the last agreed tree; "" = none.
	Tree string
	// Seq is the number of the remote collect last applied, in Epoch.
	Seq int64
	// Epoch is the id of the remote bookkeeping Seq counts in.
	Epoch string
	// Head and Branch are the replica's git state last confirmed.
	Head, Branch string
	// Mode forces the next pass's mode ("" = incremental when Tree is set).
	Mode mode
	// Files is the manifest of the agreed state, by slash path.
	Files map[string]entry
	// Revert lists paths a read-only replica changed: the next pass restores them.
	Revert map[string]bool
	// Recheck lists paths whose host entry the next pass states in the
	// host's view, so that any difference is reported again (a write that
	// failed, a file that changed while it was sent).
	Recheck map[string]bool
	// Recreated counts Reset calls (sandboxes recreated) since the state began.
	Recreated int
	// RecreatedAt is when Reset was last called (zero: never).
	RecreatedAt time.Time
	// NotSynced lists the nested git repositories the last collect found in
	// the replica (never synced back), at most MaxNotSynced.
	NotSynced []string
	// Conflicts are the last MaxConflicts files found changed on both sides.
	Conflicts []Conflict
}

// MaxNotSynced bounds Status.NotSynced.
const MaxNotSynced = 20

// entry is one file of the manifest: its git mode and blob id, and the host
// stat signature it had when recorded.
type entry struct {
	Mode  uint32 // 0100644, 0100755 or 0120000
	Blob  string // 40 hex digits
	Size  int64
	Mtime int64 // ns
	Ctime int64 // ns
	Ino   uint64
}

type mode string

const (
	modeIncr     mode = "incr"
	modeManifest mode = "manifest"
	modeUpload   mode = "upload"
)

// Open loads (or starts) the host state of a replica. Errors:
// sandboxapi.ErrInvalidArgument for missing options.
func Open(opts Options) (*Replica, error) {
	if !filepath.IsAbs(opts.Source.WorkTree) || opts.Source.GitDir != "" && !filepath.IsAbs(opts.Source.GitDir) {
		return nil, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "replica: the worktree and git dir must be absolute paths")
	}
	if !strings.HasPrefix(opts.Remote.Workdir, "/") || !strings.HasPrefix(opts.Remote.StateDir, "/") {
		return nil, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "replica: remote paths must be absolute")
	}
	if opts.StateFile == "" || opts.Git == nil {
		return nil, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "replica: StateFile and Git are required")
	}
	r := &Replica{
		src: opts.Source, remote: opts.Remote, stateFile: opts.StateFile, git: opts.Git, lockGit: opts.LockGit,
		partBytes: opts.PartBytes, maxReport: opts.MaxReportBytes, log: opts.Logger,
	}
	if r.partBytes <= 0 {
		r.partBytes = DefaultPartBytes
	}
	if r.maxReport <= 0 {
		r.maxReport = DefaultMaxReportBytes
	}
	if r.log == nil {
		r.log = slog.Default()
	}
	if err := r.load(); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *Replica) load() error {
	r.st = state{Files: map[string]entry{}}
	f, err := os.Open(r.stateFile)
	if errors.Is(err, os.ErrNotExist) {
		r.st.Mode = modeUpload
		return nil
	}
	if err != nil {
		return sandboxapi.Wrap(sandboxapi.ErrRuntimeUnavailable, err, "replica: read state")
	}
	defer f.Close()
	var st state
	if err := gob.NewDecoder(f).Decode(&st); err != nil {
		// A damaged state file costs one full pass, never the workspace.
		r.log.Warn("replica: unreadable sync state; the next pass uploads everything", "file", r.stateFile, "error", err)
		r.st.Mode = modeUpload
		return nil
	}
	if st.Files == nil {
		st.Files = map[string]entry{}
	}
	r.st = st
	return nil
}

// save writes the state atomically. Called with r.mu held.
func (r *Replica) save() error {
	if err := os.MkdirAll(filepath.Dir(r.stateFile), 0o700); err != nil {
		return sandboxapi.Wrap(sandboxapi.ErrRuntimeUnavailable, err, "replica: state dir")
	}
	tmp, err := os.CreateTemp(filepath.Dir(r.stateFile), ".replica-*")
	if err != nil {
		return sandboxapi.Wrap(sandboxapi.ErrRuntimeUnavailable, err, "replica: write state")
	}
	defer os.Remove(tmp.Name())
	if err := gob.NewEncoder(tmp).Encode(&r.st); err != nil {
		tmp.Close()
		return sandboxapi.Wrap(sandboxapi.ErrRuntimeUnavailable, err, "replica: encode state")
	}
	if err := tmp.Close(); err != nil {
		return sandboxapi.Wrap(sandboxapi.ErrRuntimeUnavailable, err, "replica: write state")
	}
	if err := os.Rename(tmp.Name(), r.stateFile); err != nil {
		return sandboxapi.Wrap(sandboxapi.ErrRuntimeUnavailable, err, "replica: write state")
	}
	return nil
}

// SetStateDir sets the remote bookkeeping directory (Layout.StateDir) once
// the backend knows it (e.g. from the sandbox's user). Passes begun later use it.
func (r *Replica) SetStateDir(dir string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.remote.StateDir = dir
}

// Reset records that the remote sandbox is new (created again after it
// vanished, or replaced): the next pass uploads every file and a full
// bundle. The host's worktree is untouched.
func (r *Replica) Reset() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.st.Tree, r.st.Head, r.st.Branch, r.st.Mode = "", "", "", modeUpload
	r.st.Revert, r.st.NotSynced = nil, nil
	r.st.Recreated++
	r.st.RecreatedAt = time.Now().UTC()
	return r.save()
}

// Forget deletes the host state (the runtime was destroyed on purpose).
func (r *Replica) Forget() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.st = state{Files: map[string]entry{}, Mode: modeUpload}
	if err := os.Remove(r.stateFile); err != nil && !errors.Is(err, os.ErrNotExist) {
		return sandboxapi.Wrap(sandboxapi.ErrRuntimeUnavailable, err, "replica: remove state")
	}
	return nil
}

// Status is the host's view of a replica.
type Status struct {
	// Synced: a pass has completed since the sandbox was (re)created.
	Synced bool
	// Files is the number of files in the agreed state.
	Files int
	// Recreated counts the times the remote sandbox had to be recreated.
	Recreated int
	// RecreatedAt is when that last happened (zero: never).
	RecreatedAt time.Time
	// NotSynced lists the nested git repositories (slash paths, each ending
	// in "/") the last pass found in the replica: their files are not synced
	// back and exist only in the sandbox.
	NotSynced []string
	// Conflicts are the open conflicts (Conflict): files changed both in
	// the workspace and in the replica whose replica version is still kept
	// beside them, and replica deletions of the last day; oldest first.
	Conflicts []Conflict
}

// Status reports the replica's host state (a stat of each remembered
// conflict's copy; no remote call).
func (r *Replica) Status() Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	return Status{Synced: r.st.Tree != "", Files: len(r.st.Files), Recreated: r.st.Recreated,
		RecreatedAt: r.st.RecreatedAt, NotSynced: append([]string(nil), r.st.NotSynced...), Conflicts: r.openConflicts(time.Now())}
}

// API is st as the wire says it (sandboxapi.RuntimeReplica).
func (st Status) API() sandboxapi.RuntimeReplica {
	out := sandboxapi.RuntimeReplica{Recreated: st.Recreated, Synced: st.Synced, Files: st.Files, NotSynced: st.NotSynced,
		Conflicts: APIConflicts(st.Conflicts)}
	if !st.RecreatedAt.IsZero() {
		at := st.RecreatedAt
		out.LastRecreatedAt = &at
	}
	return out
}

// recheck marks fp for the next pass's view. Called with r.mu held.
func (r *Replica) recheck(fp string) {
	if r.st.Recheck == nil {
		r.st.Recheck = map[string]bool{}
	}
	r.st.Recheck[fp] = true
}

func newID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Report is what one pass brought back.
type Report struct {
	// Changed, Deleted: paths written or removed on the host.
	Changed, Deleted int
	// Skipped: the report was older than one already applied.
	Skipped bool
	// Reverted: paths a read-only replica changed, restored by the next pass.
	Reverted int
	// Warnings: paths that could not be synced, with why.
	Warnings []string
	// Conflicts: files this pass found changed on both sides (Conflict).
	Conflicts []Conflict
}

// NeedsRevert reports whether a read-only replica holds changes the next pass
// must undo.
func (r *Replica) NeedsRevert() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.st.Revert) > 0
}

func pathErr(p, why string) error {
	return sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "replica: remote path %q refused: %s", sandboxapi.Clip(p, 200), why)
}

// validPath checks a slash path coming from the remote (hostile): relative,
// no empty, "." or ".." components, no ".git" component in any case, no NUL.
func validPath(p string) error {
	if p == "" || len(p) > 4096 || strings.HasPrefix(p, "/") || strings.ContainsRune(p, 0) {
		return pathErr(p, "not a relative path")
	}
	for _, c := range strings.Split(p, "/") {
		if c == "" || c == "." || c == ".." {
			return pathErr(p, "empty, . or .. component")
		}
		if strings.EqualFold(c, ".git") {
			return pathErr(p, ".git component")
		}
	}
	return nil
}

// ctxErr maps a context error to the sandbox kinds (ContextError); nil
// while ctx lasts.
func ctxErr(ctx context.Context, what string) error {
	if ctx.Err() == nil {
		return nil
	}
	return ContextError(ctx, "replica", what)
}

var errShort = fmt.Errorf("file changed while it was read")
