package bwrap

import (
	"time"

	"golang.org/x/sys/unix"
)

// unixOPath opens the supervisor binary for fexecve (execute permission
// suffices: the copy is execute-only).
const unixOPath = unix.O_PATH | unix.O_CLOEXEC

// DrainGrace bounds how long the supervisor waits, once a command's tree
// has ended, for output pipes still held by a process outside it; then they
// are closed and the call returns.
const DrainGrace = 500 * time.Millisecond
