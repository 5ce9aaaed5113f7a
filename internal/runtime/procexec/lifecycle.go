package procexec

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// errHalted is the cancellation cause Lifecycle gives a command's context
// when its runtime is stopped or destroyed; Run tells such a kill from a
// timeout or a cancellation by it.
var errHalted = errors.New("runtime stopped")

// Lifecycle is the backend-independent state of one runtime whose commands
// are host processes (docs/DESIGN.md "Ports"): running (after
// Create or Start), stopped (after Stop; the next command starts it again) or
// destroyed, with its spec, the backend's configuration C derived from the
// spec, and the commands in flight, which Stop and Destroy kill and wait for.
// Registry.Create makes one. It is safe for concurrent use.
type Lifecycle[C any] struct {
	id   string
	root string // symlink-free host path of the workdir; fixed

	mu        sync.Mutex
	spec      sandbox.RuntimeSpec
	conf      C
	state     sandbox.RuntimeState
	destroyed bool
	running   map[*command]struct{}
}

// command lets Stop and Destroy kill a running command and wait for it.
type command struct {
	kill context.CancelCauseFunc
	done chan struct{}
}

// ID returns the runtime id (RuntimeSpec.ID).
func (l *Lifecycle[C]) ID() string { return l.id }

// Root returns the symlink-free host path of the runtime's workdir, as given
// to Registry.Create.
func (l *Lifecycle[C]) Root() string { return l.root }

// Conf returns the backend configuration last given to Registry.Create.
func (l *Lifecycle[C]) Conf() C {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.conf
}

// State returns sandbox.RuntimeRunning or sandbox.RuntimeStopped, or
// sandbox.RuntimeMissing once destroyed.
func (l *Lifecycle[C]) State() sandbox.RuntimeState {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.destroyed {
		return sandbox.RuntimeMissing
	}
	return l.state
}

// Start marks the runtime running after ready, the backend's own check of
// the current configuration (the workdir is still there, …), has passed;
// ready runs with the runtime locked, and its error is returned as it is.
// Errors wrap sandboxapi.ErrNotFound once the runtime is destroyed.
func (l *Lifecycle[C]) Start(ready func(C) error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.startLocked(ready)
}

func (l *Lifecycle[C]) startLocked(ready func(C) error) error {
	if l.destroyed {
		return sandboxapi.Errorf(sandboxapi.ErrNotFound, "runtime %s was destroyed", l.id)
	}
	if err := ready(l.conf); err != nil {
		return err
	}
	l.state = sandbox.RuntimeRunning
	return nil
}

// Stop marks the runtime stopped and kills every command still running in
// it (the context of each is cancelled, so Run kills its process group),
// waiting for them, bounded by ctx: an expired ctx returns an error wrapping
// sandboxapi.ErrTimeout. Stopping a destroyed runtime is success.
func (l *Lifecycle[C]) Stop(ctx context.Context) error { return l.halt(ctx, false) }

// Destroy marks the runtime destroyed (State reports sandbox.RuntimeMissing
// and Start and Exec fail with sandboxapi.ErrNotFound from then on), then kills
// and waits for its commands as Stop does. It is meant for a Lifecycle just
// taken out of its Registry (Registry.Remove).
func (l *Lifecycle[C]) Destroy(ctx context.Context) error { return l.halt(ctx, true) }

func (l *Lifecycle[C]) halt(ctx context.Context, destroy bool) error {
	l.mu.Lock()
	if destroy {
		l.destroyed = true
	}
	l.state = sandbox.RuntimeStopped
	cmds := make([]*command, 0, len(l.running))
	for c := range l.running {
		cmds = append(cmds, c)
	}
	l.mu.Unlock()
	for _, c := range cmds {
		c.kill(errHalted)
	}
	for _, c := range cmds {
		select {
		case <-c.done:
		case <-ctx.Done():
			return sandboxapi.Wrap(sandboxapi.ErrTimeout, ctx.Err(), "runtime %s: waiting for commands to die", l.id)
		}
	}
	return nil
}

// Exec runs one command: it starts the runtime as Start does (ready has the
// same role), registers the command so that Stop and Destroy kill it, and
// calls run with the context to run it under (derived from ctx, and
// cancelled when the runtime is stopped or destroyed: hand it to Run) and
// the spec and configuration as they are now. Exec returns what run returns
// once the command is unregistered.
func (l *Lifecycle[C]) Exec(ctx context.Context, ready func(C) error,
	run func(killCtx context.Context, spec sandbox.RuntimeSpec, conf C) (sandboxapi.ExecResult, error),
) (sandboxapi.ExecResult, error) {
	killCtx, kill := context.WithCancelCause(ctx)
	defer kill(nil)
	c := &command{kill: kill, done: make(chan struct{})}
	defer close(c.done)
	l.mu.Lock()
	if err := l.startLocked(ready); err != nil {
		l.mu.Unlock()
		return sandboxapi.ExecResult{}, err
	}
	spec, conf := l.spec, l.conf
	l.running[c] = struct{}{}
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		delete(l.running, c)
		l.mu.Unlock()
	}()
	return run(killCtx, spec, conf)
}

// Registry is a provider's in-memory set of runtimes by id; nothing outlives
// the process, so after a worker restart Create with the same spec recreates
// an entry. C is the backend's configuration type (see Lifecycle). The zero
// value is an empty Registry; it is safe for concurrent use.
type Registry[C any] struct {
	mu      sync.Mutex
	entries map[string]registered[C]
}

type registered[C any] struct {
	rt   sandbox.Runtime
	life *Lifecycle[C]
}

// Create returns the runtime registered as spec.ID (idempotent). An existing
// one keeps its state and takes a copy of spec and conf, unless its workdir
// is not root: then the error wraps sandboxapi.ErrConflict. A missing one is
// registered as returned by build, which receives its new Lifecycle (state
// running, holding a copy of spec and conf) and is called with the Registry
// locked; an error from build registers nothing and is returned as it is.
func (g *Registry[C]) Create(spec sandbox.RuntimeSpec, root string, conf C, build func(*Lifecycle[C]) (sandbox.Runtime, error)) (sandbox.Runtime, error) {
	spec = cloneSpec(spec)
	g.mu.Lock()
	defer g.mu.Unlock()
	if e, ok := g.entries[spec.ID]; ok {
		e.life.mu.Lock()
		defer e.life.mu.Unlock()
		if e.life.root != root {
			return nil, sandboxapi.Errorf(sandboxapi.ErrConflict, "runtime %s already exists on workdir %s, not %s", spec.ID, e.life.root, root)
		}
		e.life.spec, e.life.conf = spec, conf
		return e.rt, nil
	}
	life := &Lifecycle[C]{id: spec.ID, root: root, spec: spec, conf: conf, state: sandbox.RuntimeRunning, running: map[*command]struct{}{}}
	rt, err := build(life)
	if err != nil {
		return nil, err
	}
	if g.entries == nil {
		g.entries = map[string]registered[C]{}
	}
	g.entries[spec.ID] = registered[C]{rt: rt, life: life}
	return rt, nil
}

// Get returns the runtime registered as id, or an error wrapping
// sandboxapi.ErrNotFound.
func (g *Registry[C]) Get(id string) (sandbox.Runtime, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	e, ok := g.entries[id]
	if !ok {
		return nil, sandboxapi.Errorf(sandboxapi.ErrNotFound, "runtime %q not found", clip(id))
	}
	return e.rt, nil
}

// List returns the runtimes whose labels contain every given label pair (nil
// or empty labels match all), sorted by id.
func (g *Registry[C]) List(labels map[string]string) []sandbox.RuntimeSummary {
	g.mu.Lock()
	entries := slices.Collect(maps.Values(g.entries))
	g.mu.Unlock()
	out := []sandbox.RuntimeSummary{}
	for _, e := range entries {
		e.life.mu.Lock()
		s := sandbox.RuntimeSummary{ID: e.life.id, State: e.life.state, Labels: maps.Clone(e.life.spec.Labels)}
		e.life.mu.Unlock()
		match := true
		for k, v := range labels {
			if got, ok := s.Labels[k]; !ok || got != v {
				match = false
				break
			}
		}
		if match {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b sandbox.RuntimeSummary) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// Remove takes the runtime registered as id out of the Registry and returns
// its Lifecycle (to Destroy), or false when there is none.
func (g *Registry[C]) Remove(id string) (*Lifecycle[C], bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	e, ok := g.entries[id]
	delete(g.entries, id)
	return e.life, ok
}

// cloneSpec returns a copy of s that shares no map, slice or pointer with it.
func cloneSpec(s sandbox.RuntimeSpec) sandbox.RuntimeSpec {
	s.Mounts = slices.Clone(s.Mounts)
	s.Env = maps.Clone(s.Env)
	s.Labels = maps.Clone(s.Labels)
	if s.Resources != nil {
		r := *s.Resources
		s.Resources = &r
	}
	return s
}

// Halted reports whether ctx (the killCtx Lifecycle.Exec handed a run
// function) ended because the runtime was stopped or destroyed.
func Halted(ctx context.Context) bool { return errors.Is(context.Cause(ctx), errHalted) }

// Spec returns a copy of the spec last given to Registry.Create.
func (l *Lifecycle[C]) Spec() sandbox.RuntimeSpec {
	l.mu.Lock()
	defer l.mu.Unlock()
	return cloneSpec(l.spec)
}
