// Package diskquota keeps a runtime's disk use within a quota where the file
// system gives none of its own (no project quotas on the data directory's
// file system): it measures what a runtime's writable directories hold (the
// worktree, its /tmp) while the runtime's commands run, and reports when the
// use is over the quota and still growing, so that the runtime kills its
// commands — the way Kubernetes enforces ephemeral-storage limits on nodes
// without quotas (docs/SECURITY.md "Resource limits (bubblewrap)").
//
// The measure is the space the files take: a regular file counts its
// length or its allocated blocks, whichever is more (so the holes of a
// sparse file count: they fill through mmap, which no file size limit
// checks), a hard-linked file's bytes once; plus the number of names
// (files, directories, links, every hard link), which bounds inodes and
// directory space as a file system of the quota's size would.
package diskquota

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// BytesPerFile is the inode density of a quota: Limit.Files defaults to
// Limit.Bytes / BytesPerFile (8 KiB: twice as many entries as ext4's
// default of one inode per 16 KiB allows).
const BytesPerFile = 8 << 10

// Measurement pace: while commands run, the watcher measures again after
// twenty times what the last measurement took (so that measuring costs at
// most a twentieth of a core), at least MinInterval and at most
// MaxInterval apart; a tree that takes longer than MaxInterval/20 to
// measure costs more, as the bound on what a runtime can write unmeasured
// comes first.
const (
	MinInterval = 250 * time.Millisecond
	MaxInterval = 2 * time.Second
	// MaxWalk bounds one measurement: longer counts as a failure (over
	// the quota).
	MaxWalk = 20 * time.Second
)

// Limit is a quota: Bytes of allocated space (bytes, > 0) and Files
// entries (> 0).
type Limit struct {
	Bytes int64
	Files int64
}

// LimitOf returns the quota of gib gibibytes with its default number of
// entries (BytesPerFile).
func LimitOf(gib int64) Limit {
	b := gib << 30
	return Limit{Bytes: b, Files: b / BytesPerFile}
}

// Usage is what a runtime's directories hold: Bytes of allocated space and
// Files entries.
type Usage struct {
	Bytes int64
	Files int64
	// Allocated is the space allocated to the files (blocks, each inode
	// once): what growth is judged by, so that filling the holes of a
	// sparse file (through mmap: no length grows) is growth.
	Allocated int64
}

// Over reports whether u exceeds l in bytes or entries.
func (u Usage) Over(l Limit) bool { return u.Bytes > l.Bytes || u.Files > l.Files }

// grewFrom reports whether u holds more allocated space or entries than
// prev.
func (u Usage) grewFrom(prev Usage) bool { return u.Allocated > prev.Allocated || u.Files > prev.Files }

// Describe is u against l ("1.20 GiB of 1.00 GiB, 12 of 131072 files").
func (u Usage) Describe(l Limit) string {
	return fmt.Sprintf("%s of %s, %d of %d files", gib(u.Bytes), gib(l.Bytes), u.Files, l.Files)
}

func gib(b int64) string { return fmt.Sprintf("%.2f GiB", float64(b)/(1<<30)) }

// MaxDepth is how deep Measure descends below a directory: deeper is an
// error (a tree no file system of the quota's size needs).
const MaxDepth = 4096

// Measure returns what dirs hold together (Usage), not following symbolic
// links and not descending into other file systems mounted below a
// directory. It walks by directory descriptors (each name is opened
// relative to its parent's descriptor), so no path length limits it.
// Entries that vanish while it reads are skipped. A directory whose mode
// keeps the worker, its owner, out (chmod 000 by a command) is opened for
// the measurement, its mode widened to the owner's read and search bits
// while its entries are read and then put back, so that no file can be
// hidden from it; what still cannot be read, and a tree deeper than
// MaxDepth, is an error naming it. A directory of dirs that does not exist
// counts nothing. ctx bounds the walk (its error is returned).
func Measure(ctx context.Context, dirs ...string) (Usage, error) {
	return measure(ctx, Limit{}, true, dirs)
}

// measure is Measure stopping with an error past far.Files (zero: never),
// counting lengths when apparent.
func measure(ctx context.Context, far Limit, apparent bool, dirs []string) (Usage, error) {
	m := measurer{ctx: ctx, far: far, apparent: apparent, seen: map[[2]uint64]bool{}, euid: unix.Geteuid()}
	for _, d := range dirs {
		var st unix.Stat_t
		if err := unix.Lstat(d, &st); err != nil {
			if errors.Is(err, unix.ENOENT) {
				continue
			}
			return Usage{}, &fs.PathError{Op: "lstat", Path: d, Err: err}
		}
		if err := m.add(&st); err != nil {
			return Usage{}, err
		}
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			if err := m.walk(unix.AT_FDCWD, d, place{top: d}, &st, 0); err != nil {
				return Usage{}, err
			}
		}
	}
	return m.u, nil
}

type measurer struct {
	ctx context.Context
	far Limit // stop past its Files (zero: never)
	// apparent: a regular file's Bytes are its length when that is more
	// than its blocks (Watcher.Allocated false).
	apparent bool
	u        Usage
	seen     map[[2]uint64]bool // (dev, inode) of files with more than one link
	euid     int
}

// add counts one name and, once per inode, its bytes (see the package
// documentation); past FarOver times the limit it is an error.
func (m *measurer) add(st *unix.Stat_t) error {
	m.u.Files++
	if m.far.Files > 0 && m.u.Files > m.far.Files {
		return errFarOver(m.u, m.far)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR && st.Nlink > 1 {
		k := [2]uint64{uint64(st.Dev), st.Ino}
		if m.seen[k] {
			return nil
		}
		m.seen[k] = true
	}
	b := st.Blocks * 512
	m.u.Allocated += b
	if m.apparent && st.Mode&unix.S_IFMT == unix.S_IFREG {
		b = max(b, (st.Size+4095)&^4095)
	}
	m.u.Bytes += b
	return nil
}

// FarOver is how many times its quota of names a measurement walks at
// most: past it, the walk stops with an error (the use counts as over the
// quota) rather than spend its time on names a command made in bulk.
const FarOver = 4

func errFarOver(u Usage, far Limit) error {
	return fmt.Errorf("more than %d times the quota (%d names, %s so far)", FarOver, u.Files, gib(u.Bytes))
}

// place is where a directory is, for messages: the directory given to
// Measure and the path below it.
type place struct{ top, rel string }

func (p place) child(name string) place {
	if p.rel == "" {
		return place{p.top, name}
	}
	return place{p.top, p.rel + "/" + name}
}

// String is the place's path, the middle of the part below the top elided
// past 200 bytes (the walk itself never uses it).
func (p place) String() string {
	rel := p.rel
	if len(rel) > 200 {
		rel = rel[:100] + "…" + rel[len(rel)-99:]
	}
	if rel == "" {
		return p.top
	}
	return p.top + "/" + rel
}

// walk adds the entries below the directory name of parent (a descriptor,
// or AT_FDCWD with a full path), st its lstat, at place at in errors.
func (m *measurer) walk(parent int, name string, at place, st *unix.Stat_t, depth int) error {
	if err := m.ctx.Err(); err != nil {
		return err
	}
	if depth > MaxDepth {
		return &fs.PathError{Op: "walk", Path: at.String(), Err: errors.New("deeper than " + strconv.Itoa(MaxDepth) + " directories")}
	}
	fd, restore, err := m.open(parent, name, st)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return &fs.PathError{Op: "open", Path: at.String(), Err: err}
	}
	defer restore()
	f := os.NewFile(uintptr(fd), at.top)
	defer f.Close()
	for {
		names, err := f.Readdirnames(1024)
		for _, n := range names {
			var cst unix.Stat_t
			if err := unix.Fstatat(fd, n, &cst, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				if errors.Is(err, unix.ENOENT) {
					continue
				}
				return &fs.PathError{Op: "lstat", Path: at.child(n).String(), Err: err}
			}
			if err := m.add(&cst); err != nil {
				return err
			}
			if cst.Mode&unix.S_IFMT == unix.S_IFDIR && cst.Dev == st.Dev {
				if err := m.walk(fd, n, at.child(n), &cst, depth+1); err != nil {
					return err
				}
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
	}
}

// open opens directory name of parent for reading and returns the
// descriptor and what puts its mode back. When the mode keeps its owner,
// the worker, from reading or searching it (a command's chmod), the
// directory is opened by path (O_PATH: the very inode lstat saw, never a
// symbolic link swapped in), given the owner's read and search bits
// through that descriptor, opened for reading, and its mode put back by
// restore once the walk below it is done.
func (m *measurer) open(parent int, name string, st *unix.Stat_t) (int, func(), error) {
	const flags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	closed := m.euid != 0 && int(st.Uid) == m.euid && st.Mode&0o500 != 0o500
	if !closed {
		fd, err := unix.Openat(parent, name, flags, 0)
		if err == nil || !errors.Is(err, unix.EACCES) || m.euid == 0 || int(st.Uid) != m.euid {
			return fd, func() {}, err
		}
	}
	pfd, err := unix.Openat(parent, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, nil, err
	}
	var now unix.Stat_t
	if err := unix.Fstat(pfd, &now); err != nil {
		_ = unix.Close(pfd)
		return -1, nil, err
	}
	byFD := "/proc/self/fd/" + strconv.Itoa(pfd)
	mode := now.Mode & 0o7777
	if err := unix.Chmod(byFD, mode|0o500); err != nil {
		_ = unix.Close(pfd)
		return -1, nil, err
	}
	restore := func() {
		_ = unix.Chmod(byFD, mode)
		_ = unix.Close(pfd)
	}
	fd, err := unix.Openat(pfd, ".", flags, 0)
	if err != nil {
		restore()
		return -1, nil, err
	}
	return fd, restore, nil
}

// Watcher keeps a runtime within its quota (docs/SECURITY.md "Resource
// limits (bubblewrap)"). While Active says commands run it measures Dirs
// (see the pace above), and once more after they stop, so that a command
// shorter than an interval is measured when it ends. It calls Exceeded
// when a measurement is over Limit and larger than the one before — a
// runtime over its quota may shrink but not grow — or fails (a tree that
// cannot be measured counts as over the quota: a failure streak calls it
// once, at its first failure). The first measurement is the baseline,
// never reported (a worktree larger than the quota from the start is
// reported once it grows). Blocked tells the runtime to start its next
// commands unable to grow files.
type Watcher struct {
	// Dirs returns the directories to measure (called before each
	// measurement).
	Dirs func() []string
	// Limit is the quota.
	Limit Limit
	// Exceeded is called, on the measuring goroutine, with the usage over
	// Limit (the last good one when the measurement failed: see Failure).
	Exceeded func(Usage)
	// Log receives measurement failures and each time the quota is hit;
	// nil: slog.Default().
	Log *slog.Logger
	// Active, when set, says whether anything that can write runs (the
	// runtime's commands); the watcher measures while it says yes, once
	// more after it says no, and at once when it says yes again.
	Active func() bool
	// Allocated counts a regular file by its allocated blocks alone, not
	// by its length when that is more (a shared cache: a sparse file there
	// must not let one sharer put the others over the quota for nothing).
	Allocated bool
	// Reserve, when set, is asked at each measurement whether the file
	// system keeps its reserve of free space; its error counts as a failed
	// measurement (over the quota). It catches what no walk finds (files
	// deleted while open) before they fill the disk.
	Reserve func() error

	measuring sync.Mutex // one measurement at a time (Run and Blocked)
	doneAt    time.Time  // when the last measurement ended (under measuring)
	took      time.Duration
	// started: a command started (Blocked was asked) since Run last
	// measured, so Run measures again even if it never saw it run.
	started atomic.Bool

	mu       sync.Mutex // guards what follows
	last     Usage
	measured bool // a measurement succeeded (last is the baseline)
	// allowed is Limit, raised to the first measurement where that was
	// larger: a worktree over the quota from the start may stay as it is.
	allowed Limit
	failure error // the last measurement's error; nil after a good one
}

// Last returns the most recent good measurement (zero before the first).
func (w *Watcher) Last() Usage {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last
}

// Failure returns why the last measurement failed, nil when it did not.
func (w *Watcher) Failure() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.failure
}

// Blocked reports whether a command starting now must not grow files: the
// runtime is over its quota (or over its first measurement, when that was
// larger), or its use cannot be measured. When the last
// measurement is at half the quota or more (or there is none), it measures
// first — so that commands too short for the watcher's pace cannot pass
// the quota one after another — and reports growth over the quota as Run
// does. ctx bounds that measurement; its error counts as a failure.
func (w *Watcher) Blocked(ctx context.Context) bool {
	w.started.Store(true)
	asked := time.Now()
	w.mu.Lock()
	near := !w.measured || w.failure != nil || 2*w.last.Bytes >= w.Limit.Bytes || 2*w.last.Files >= w.Limit.Files
	w.mu.Unlock()
	if near {
		w.measureSince(ctx, asked)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.failure != nil || w.last.Over(w.allowed)
}

// measureSince is a command start's measurement: none when one ended
// after asked (starts waiting together share one walk), nor when the last
// walk took longer than SyncWalk (the tree is too large to walk at every
// start: the watcher's next look, which the start asked for, decides).
func (w *Watcher) measureSince(ctx context.Context, asked time.Time) {
	w.measuring.Lock()
	skip := w.doneAt.After(asked) || w.took > SyncWalk
	w.measuring.Unlock()
	if !skip {
		w.measure(ctx)
	}
}

// SyncWalk bounds the walks a command start waits for (Blocked).
const SyncWalk = 200 * time.Millisecond

// measure takes one measurement, records it, and calls Exceeded as the
// type's documentation says; it returns how long the walk took.
func (w *Watcher) measure(ctx context.Context) time.Duration {
	w.measuring.Lock()
	defer w.measuring.Unlock()
	defer func() { w.doneAt = time.Now() }()
	log := w.Log
	if log == nil {
		log = slog.Default()
	}
	start := time.Now()
	wctx, cancel := context.WithTimeout(ctx, MaxWalk)
	u, err := measure(wctx, Limit{Files: FarOver * w.Limit.Files}, !w.Allocated, w.Dirs())
	if err != nil && ctx.Err() == nil && errors.Is(wctx.Err(), context.DeadlineExceeded) {
		err = fmt.Errorf("the measurement took more than %v", MaxWalk)
	}
	cancel()
	// The reserve is asked whatever the walk gave: a host nearly full
	// stops the runtime's commands at every look, not once.
	var reserveErr error
	if w.Reserve != nil {
		reserveErr = w.Reserve()
	}
	took := time.Since(start)
	w.took = took
	w.mu.Lock()
	prev, measured, failedBefore := w.last, w.measured, w.failure != nil
	switch {
	case err != nil:
		w.failure = err
	case reserveErr != nil:
		w.failure = reserveErr
		w.last = u
	default:
		if !w.measured {
			w.allowed = Limit{Bytes: max(w.Limit.Bytes, u.Bytes), Files: max(w.Limit.Files, u.Files)}
		}
		w.last, w.measured, w.failure = u, true, nil
	}
	w.mu.Unlock()
	switch {
	case ctx.Err() != nil:
	case reserveErr != nil:
		log.Warn("disk quota: the host's reserve is reached; counted as over the quota", "error", reserveErr)
		w.Exceeded(prev)
	case err != nil:
		log.Warn("disk quota: measurement failed; counted as over the quota", "error", err)
		if !failedBefore {
			w.Exceeded(prev)
		}
	case failedBefore:
		// The first good look after failures: the new reference (what
		// ran meanwhile, a cleanup's rm among them, was not measured).
	case measured && u.Over(w.Limit) && u.grewFrom(prev):
		log.Warn("disk quota exceeded", "usage", u.Describe(w.Limit), "measured_in", took)
		w.Exceeded(u)
	}
	return took
}

// Run measures until ctx is done.
func (w *Watcher) Run(ctx context.Context) {
	after := false // measure once more: commands ran since the last measurement
	for {
		active := w.Active == nil || w.Active()
		if w.started.Swap(false) {
			// A command started since: it may have ended unseen.
			active = true
		}
		if !active && !after {
			select {
			case <-ctx.Done():
				return
			case <-time.After(MinInterval):
			}
			continue
		}
		after = active
		took := w.measure(ctx)
		if ctx.Err() != nil {
			return
		}
		next := min(max(20*took, MinInterval), MaxInterval)
		if !active {
			next = MinInterval
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(next):
		}
	}
}

// FreeReserve returns a Reserve that fails when a file system holding one
// of dirs has less than reserve bytes free for unprivileged users (statfs
// f_bavail; reserve 0: DefaultReserve).
func FreeReserve(reserve int64, dirs ...string) func() error {
	return func() error {
		for _, d := range dirs {
			var st unix.Statfs_t
			if err := unix.Statfs(d, &st); err != nil {
				continue // a directory not there yet holds nothing
			}
			free := int64(st.Bavail) * st.Bsize
			want := reserve
			if want == 0 {
				want = DefaultReserve
			}
			if free < want {
				return fmt.Errorf("the host's disk is nearly full (%s free, the sandboxes keep %s free)", gib(free), gib(want))
			}
		}
		return nil
	}
}

// DefaultReserve is the free space kept by default: 1 GiB, enough for the
// worker's own writes (its store, checkpoints, logs) when a runtime fills
// the rest.
const DefaultReserve = 1 << 30
