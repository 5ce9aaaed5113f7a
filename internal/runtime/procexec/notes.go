package procexec

import "sync"

// MaxNotes is how many exec starts a Notes keeps: the oldest go first.
const MaxNotes = 256

// Notes keeps what a runtime recorded as each exec's command started
// (T: the counters and times its notice compares against), by process id,
// for sandbox.ExecNotices once the command has ended: a result built twice
// (a retried activity) gets the same notice. It holds at most MaxNotes;
// the zero value is ready; safe for concurrent use.
type Notes[T any] struct {
	mu    sync.Mutex
	m     map[string]T
	order []string
}

// Put records v as process id's start (replacing an earlier one).
func (n *Notes[T]) Put(id string, v T) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.m == nil {
		n.m = map[string]T{}
	}
	if _, ok := n.m[id]; !ok {
		n.order = append(n.order, id)
	}
	n.m[id] = v
	for len(n.order) > MaxNotes {
		delete(n.m, n.order[0])
		n.order = n.order[1:]
	}
}

// Get returns process id's start, false when none is kept.
func (n *Notes[T]) Get(id string) (T, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	v, ok := n.m[id]
	return v, ok
}
