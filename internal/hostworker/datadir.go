package hostworker

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// DataDirLockFile is the file under the data dir (SANDBOX_DATA_DIR) a
// worker holds an exclusive flock(2) on for its whole life, with its pid
// in it: one data dir serves one worker at a time (README.md
// "Configuration").
const DataDirLockFile = "worker.lock"

// DataDirLock is a held lock of a data dir (LockDataDir).
type DataDirLock struct {
	f *os.File
}

// LockDataDir takes the data dir's lock: an exclusive, non-blocking
// flock(2) on <dir>/worker.lock (created 0600), then writes this
// process's pid into it. Two workers on one data dir would share the
// repo caches, worktrees, store and embedded Temporal database without
// either knowing, so the second one is refused. The lock belongs to the
// open file: it ends with Unlock or with the process, never stale after
// a crash. Errors: sandboxapi.ErrConflict when another process holds it
// (naming its pid, as far as the file says, and the directory);
// sandboxapi.ErrRuntimeUnavailable when the file cannot be opened or locked.
func LockDataDir(dir string) (*DataDirLock, error) {
	path := filepath.Join(dir, DataDirLockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "data dir %s: lock file: %v", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder := readHolder(f)
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, sandboxapi.Errorf(sandboxapi.ErrConflict,
				"data dir %s is in use by another sandbox-worker (%s, holding %s): stop it, or give this worker its own SANDBOX_DATA_DIR",
				dir, holder, path)
		}
		return nil, sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "data dir %s: lock %s: %v", dir, path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &DataDirLock{f: f}, nil
}

// readHolder names the process whose pid the lock file holds: "pid N", or
// "pid unknown" while it has not been written yet.
func readHolder(f *os.File) string {
	b := make([]byte, 32)
	n, _ := f.ReadAt(b, 0)
	if pid, err := strconv.Atoi(strings.TrimSpace(string(b[:n]))); err == nil && pid > 0 {
		return "pid " + strconv.Itoa(pid)
	}
	return "pid unknown"
}

// Unlock empties the lock file (so that it names no process once this one
// stopped) and releases the lock (the file stays); a nil or released lock
// is a no-op.
func (l *DataDirLock) Unlock() {
	if l == nil || l.f == nil {
		return
	}
	_ = l.f.Truncate(0)
	_ = l.f.Close()
	l.f = nil
}
