// Package diskquota keeps a runtime's disk use within a quota where the file
// system gives none of its own (no project quotas on the data directory's
// file system): it measures what a runtime's writable directories hold (the
// worktree, its /tmp) while the runtime's commands run, and reports when the
// use is over the quota and still growing, so that the runtime kills its
// commands — the way Kubernetes enforces ephemeral-storage limits on nodes
// without quotas (docs/SECURITY.md "Resource limits (bubblewrap)").
//
// The measure is the space the files take on disk (allocated blocks, so a
// sparse file counts what it holds, not its length), hard links counted
// once, plus the number of entries (files, directories, links), which
// bounds inodes as a file system of the quota's size would.
package diskquota

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// BytesPerFile is the inode density of a quota: Limit.Files defaults to
// Limit.Bytes / BytesPerFile (8 KiB: twice as many entries as ext4's
// default of one inode per 16 KiB allows).
const BytesPerFile = 8 << 10

// Measurement pace: the watcher measures again after twenty times what the
// last measurement took (so that measuring costs at most a twentieth of a
// core), at least MinInterval and at most MaxInterval apart.
const (
	MinInterval = 250 * time.Millisecond
	MaxInterval = 15 * time.Second
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
}

// Over reports whether u exceeds l in bytes or entries.
func (u Usage) Over(l Limit) bool { return u.Bytes > l.Bytes || u.Files > l.Files }

// grewFrom reports whether u holds more bytes or entries than prev.
func (u Usage) grewFrom(prev Usage) bool { return u.Bytes > prev.Bytes || u.Files > prev.Files }

// Describe is u against l ("1.20 GiB of 1.00 GiB, 12 of 131072 files").
func (u Usage) Describe(l Limit) string {
	return fmt.Sprintf("%s of %s, %d of %d files", gib(u.Bytes), gib(l.Bytes), u.Files, l.Files)
}

func gib(b int64) string { return fmt.Sprintf("%.2f GiB", float64(b)/(1<<30)) }

// Measure returns what dirs hold together (Usage), not following symbolic
// links and not descending into other file systems mounted below a
// directory. Entries that vanish while it reads are skipped. A directory
// whose mode keeps its owner out (chmod 000 by a command) is opened for
// the measurement and its mode put back, so that no file can be hidden from
// it; what still cannot be read is an error naming it. A directory of dirs
// that does not exist counts nothing. ctx bounds the walk (its error is
// returned).
func Measure(ctx context.Context, dirs ...string) (Usage, error) {
	m := measurer{ctx: ctx, seen: map[[2]uint64]bool{}}
	for _, d := range dirs {
		var st unix.Stat_t
		if err := unix.Lstat(d, &st); err != nil {
			if errors.Is(err, unix.ENOENT) {
				continue
			}
			return Usage{}, &fs.PathError{Op: "lstat", Path: d, Err: err}
		}
		m.add(&st)
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			if err := m.walk(d, st.Dev); err != nil {
				return Usage{}, err
			}
		}
	}
	return m.u, nil
}

type measurer struct {
	ctx  context.Context
	u    Usage
	seen map[[2]uint64]bool // (dev, inode) of files with more than one link
}

func (m *measurer) add(st *unix.Stat_t) {
	if st.Mode&unix.S_IFMT != unix.S_IFDIR && st.Nlink > 1 {
		k := [2]uint64{uint64(st.Dev), st.Ino}
		if m.seen[k] {
			return
		}
		m.seen[k] = true
	}
	m.u.Files++
	m.u.Bytes += st.Blocks * 512
}

// walk adds the entries below directory dir of device dev.
func (m *measurer) walk(dir string, dev uint64) error {
	if err := m.ctx.Err(); err != nil {
		return err
	}
	f, err := m.open(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	defer f.Close()
	fd := int(f.Fd())
	for {
		names, err := f.Readdirnames(1024)
		for _, name := range names {
			var st unix.Stat_t
			if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				if errors.Is(err, unix.ENOENT) {
					continue
				}
				return &fs.PathError{Op: "lstat", Path: filepath.Join(dir, name), Err: err}
			}
			m.add(&st)
			if st.Mode&unix.S_IFMT == unix.S_IFDIR && uint64(st.Dev) == dev {
				if err := m.walk(filepath.Join(dir, name), dev); err != nil {
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

// open opens directory dir for reading; when its mode keeps the worker out
// (a command's chmod), it adds the owner's read and search bits for the
// open and puts the mode back.
func (m *measurer) open(dir string) (*os.File, error) {
	f, err := os.Open(dir)
	if err == nil || !errors.Is(err, fs.ErrPermission) {
		return f, err
	}
	var st unix.Stat_t
	if unix.Lstat(dir, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return nil, err
	}
	mode := st.Mode & 0o7777
	if unix.Chmod(dir, mode|0o500) != nil {
		return nil, err
	}
	f, err = os.Open(dir)
	_ = unix.Chmod(dir, mode)
	return f, err
}

// Watcher measures Dirs while it runs and calls Exceeded when their use is
// over Limit and larger than at the previous measurement: a runtime over
// its quota may shrink but not grow. The first measurement is the
// baseline, never reported (a worktree larger than the quota from the start
// is reported once it grows). Its pace is MinInterval's. A failed measurement is logged and retried at
// MaxInterval.
type Watcher struct {
	// Dirs returns the directories to measure (called before each
	// measurement).
	Dirs func() []string
	// Limit is the quota.
	Limit Limit
	// Exceeded is called, on the watcher's goroutine, with the usage over
	// Limit.
	Exceeded func(Usage)
	// Log receives measurement failures and each time the quota is hit;
	// nil: slog.Default().
	Log *slog.Logger
	// Active, when set, says whether anything that can write runs (the
	// runtime's commands); the watcher does not measure while it says no,
	// and measures at once when it says yes again.
	Active func() bool

	mu   sync.Mutex
	last Usage
}

// Last returns the most recent measurement (zero before the first).
func (w *Watcher) Last() Usage {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last
}

// Run measures until ctx is done.
func (w *Watcher) Run(ctx context.Context) {
	log := w.Log
	if log == nil {
		log = slog.Default()
	}
	var prev Usage
	measured := false
	for {
		for w.Active != nil && !w.Active() {
			select {
			case <-ctx.Done():
				return
			case <-time.After(MinInterval):
			}
		}
		start := time.Now()
		u, err := Measure(ctx, w.Dirs()...)
		took := time.Since(start)
		next := min(max(20*took, MinInterval), MaxInterval)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			log.Warn("disk quota: measurement failed", "error", err)
			next = MaxInterval
		default:
			w.mu.Lock()
			w.last = u
			w.mu.Unlock()
			if measured && u.Over(w.Limit) && u.grewFrom(prev) {
				log.Warn("disk quota exceeded", "usage", u.Describe(w.Limit), "measured_in", took)
				w.Exceeded(u)
			}
			prev, measured = u, true
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(next):
		}
	}
}
