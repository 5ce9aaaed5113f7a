package supervisor

import (
	"encoding/json"
	"os"
	"slices"
	"sync"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// Archive keeps the background processes of stopped supervisors (their
// last Info and buffered output) so they stay readable, in memory and in a
// file that a restarted worker loads. It is safe for concurrent use; a nil
// *Archive is empty.
type Archive struct {
	path  string
	mu    sync.Mutex
	procs map[string]Final
	order []string
}

// LoadArchive returns the archive kept at path (empty when missing or
// unreadable).
func LoadArchive(path string) *Archive {
	a := &Archive{path: path, procs: map[string]Final{}}
	b, err := os.ReadFile(path)
	if err != nil {
		return a
	}
	var fs []Final
	if json.Unmarshal(b, &fs) == nil {
		a.add(fs)
	}
	return a
}

func (a *Archive) add(fs []Final) {
	for _, f := range fs {
		if _, ok := a.procs[f.Info.ID]; !ok {
			a.order = append(a.order, f.Info.ID)
		}
		a.procs[f.Info.ID] = f
	}
	// The newest KeptExited background and KeptExec exec processes stay.
	var bg, ex int
	// A new slice: filling a.order[:0] while reading a.order backwards
	// overwrote ids not read yet (one process listed twice, another lost).
	keep := make([]string, 0, len(a.order))
	for i := len(a.order) - 1; i >= 0; i-- {
		id := a.order[i]
		n := &bg
		limit := KeptExited
		if a.procs[id].Info.Exec {
			n, limit = &ex, KeptExec
		}
		if *n < limit {
			*n++
			keep = append(keep, id)
		} else {
			delete(a.procs, id)
		}
	}
	slices.Reverse(keep)
	a.order = keep
}

// Add records fs and writes the archive file (0600).
func (a *Archive) Add(fs []Final) error {
	if a == nil || len(fs) == 0 {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.add(fs)
	all := make([]Final, 0, len(a.order))
	for _, id := range a.order {
		all = append(all, a.procs[id])
	}
	b, err := json.Marshal(all)
	if err != nil {
		return err
	}
	tmp := a.path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, a.path)
}

// Clear forgets everything and removes the file.
func (a *Archive) Clear() {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.procs, a.order = map[string]Final{}, nil
	_ = os.Remove(a.path)
}

// Read serves a read of an archived process; false when id is not archived.
func (a *Archive) Read(id string, idx int, off int64, max int) (sandbox.ProcessOutput, bool) {
	if a == nil {
		return sandbox.ProcessOutput{}, false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	f, ok := a.procs[id]
	if !ok {
		return sandbox.ProcessOutput{}, false
	}
	start, data, head := f.Starts[idx], f.Data[idx], f.Heads[idx]
	end := start + int64(len(data))
	out := sandbox.ProcessOutput{Offset: off, Process: ToInfo(f.Info)}
	if off < start && off < int64(len(head)) {
		n := min(int64(max), int64(len(head))-off)
		out.Data = slices.Clone(head[off : off+n])
		out.NextOffset = off + n
		return out, true
	}
	if off < start {
		out.DroppedBytes, out.Offset = start-off, start
	}
	out.Offset = min(out.Offset, end)
	n := min(int64(max), end-out.Offset)
	out.Data = slices.Clone(data[out.Offset-start : out.Offset-start+n])
	out.NextOffset = out.Offset + n
	out.EOF = out.NextOffset == end
	return out, true
}

// List returns the archived processes, oldest first.
func (a *Archive) List() []sandboxapi.ProcessInfo {
	out := []sandboxapi.ProcessInfo{}
	if a == nil {
		return out
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, id := range a.order {
		if f := a.procs[id]; !f.Info.Exec {
			out = append(out, ToInfo(f.Info))
		}
	}
	return out
}
