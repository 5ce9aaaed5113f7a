package devserver

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"

	tlog "go.temporal.io/server/common/log"
	"go.temporal.io/server/common/log/tag"
)

// fatalTrap is the logger handed to the embedded Temporal server. The
// server calls Logger.Fatal where it cannot go on (e.g. "Failed to start
// gRPC listener" when a port was taken after it was checked), and a zap
// logger's Fatal calls os.Exit: that would end the worker or a whole test
// binary. fatalTrap logs the message as an error instead and records it
// (the first one is returned by Start, or by Server.Err afterwards). While
// the server starts — where it calls Fatal, synchronously, from the
// goroutine startTrapped runs it on — it panics with a fatalPanic that
// startTrapped recovers into Start's error; afterwards it ends only the
// calling goroutine (runtime.Goexit). Either way the process lives on and
// the caller decides (DESIGN.md "Temporal versions and the embedded server").
type fatalTrap struct {
	tlog.Logger
	starting atomic.Bool
	mu       sync.Mutex
	first    error
}

// fatalPanic is what Fatal panics with during start.
type fatalPanic struct{ err error }

// Fatal logs msg as an error, records it, and stops the calling goroutine.
func (f *fatalTrap) Fatal(msg string, tags ...tag.Tag) {
	f.Logger.Error(msg, tags...)
	parts := make([]string, 0, len(tags))
	for _, t := range tags {
		parts = append(parts, fmt.Sprintf("%s=%v", t.Key(), t.Value()))
	}
	err := errors.New("embedded temporal: " + msg)
	if len(parts) > 0 {
		err = fmt.Errorf("embedded temporal: %s (%s)", msg, strings.Join(parts, ", "))
	}
	f.mu.Lock()
	if f.first == nil {
		f.first = err
	}
	f.mu.Unlock()
	if f.starting.Load() {
		panic(fatalPanic{err})
	}
	slog.Error("embedded temporal: fatal error; the goroutine that raised it stopped (the process keeps running)", "error", err)
	runtime.Goexit()
}

// err returns the first recorded fatal error, or nil.
func (f *fatalTrap) err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.first
}
