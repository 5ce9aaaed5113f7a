package e2b

import (
	"context"
	"errors"
	"path"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sandboxcore/sandboxcore/internal/runtime/e2b/api"
	"github.com/sandboxcore/sandboxcore/internal/runtime/replica"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// confirmFor is how long a sandbox seen running is trusted without asking
// the control plane again: a sandbox that vanished or was paused meanwhile
// shows in the next envd call, which then asks (Runtime.revive).
const confirmFor = 20 * time.Second

// Runtime is one E2B runtime. One handle exists per runtime id and
// provider; it is safe for concurrent use (commands run in parallel).
type Runtime struct {
	p  *Provider
	id string

	held replica.SpecReplica // its spec and replica (their own lock)

	ensureMu sync.Mutex // serializes create/connect
	mu       sync.Mutex
	rec      *record
	recRead  bool
	env      *envdClient
	okAt     time.Time     // the sandbox was last seen running
	ttl      time.Duration // the timeout last set,
	ttlAt    time.Time     // and when
	// instStart is the start of the sandbox's current instance, from which
	// E2B counts its max instance length (instance.go); zero: unknown.
	instStart time.Time
	lastPass  string
	// recreated counts sandboxes this handle had to create again.
	recreated   int
	recreatedAt time.Time

	active   atomic.Int32 // commands in flight
	stopping atomic.Bool  // Stop is killing them: new commands wait

	instMu  sync.Mutex // the admission of commands to the instance (instance.go):
	running int        // commands admitted and not released,
	cycling bool       // a command is giving the sandbox a new instance
}

var _ sandbox.Runtime = (*Runtime)(nil)

// ID returns the runtime id.
func (r *Runtime) ID() string { return r.id }

// home is the sandbox user's home (E2B's templates: /home/<user>, /root).
func (r *Runtime) home() string {
	if r.p.opts.User == "root" {
		return "/root"
	}
	return path.Join("/home", r.p.opts.User)
}

// remoteState is the replica's bookkeeping directory in the sandbox.
func (r *Runtime) remoteState() string { return path.Join(r.home(), ".sandboxcore", r.id) }

func (r *Runtime) recordFile() string { return filepath.Join(r.p.stateDir(r.id), "sandbox.json") }

// record returns the host record of the runtime's sandbox (nil: none known).
func (r *Runtime) record() (*record, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.recRead {
		rec, err := loadRecord(r.recordFile())
		if err != nil {
			return nil, err
		}
		r.rec, r.recRead = rec, true
	}
	if r.rec == nil {
		return nil, nil
	}
	c := *r.rec
	return &c, nil
}

// setRecord records rec (nil: the sandbox is gone) on disk and in the handle.
func (r *Runtime) setRecord(rec *record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := saveRecord(r.recordFile(), rec); err != nil {
		return err
	}
	if rec == nil {
		r.rec, r.env, r.okAt = nil, nil, time.Time{}
		return nil
	}
	c := *rec
	if r.env == nil || r.env.rec != c {
		r.env = r.p.newEnvd(c, r.id)
	}
	r.rec, r.recRead = &c, true
	return nil
}

// ReplicaStatus is what a runtime's handle reports about its replica (for
// the session's describe: Recreated > 0 means the sandbox vanished and was
// rebuilt from the workspace).
type ReplicaStatus struct {
	// SandboxID is the E2B sandbox currently holding the replica ("" = none).
	SandboxID string `json:"sandbox_id,omitempty"`
	// Recreated counts the sandboxes that vanished and were created again
	// (since the replica's host state began).
	Recreated int `json:"recreated"`
	// LastRecreatedAt is when this worker last recreated one (zero: never).
	LastRecreatedAt time.Time `json:"last_recreated_at,omitzero"`
	// Synced: a pass completed since the sandbox was (re)created.
	Synced bool `json:"synced"`
	// Files is the number of files in the agreed state.
	Files int `json:"files"`
}

// Replica reports the replica's state.
func (r *Runtime) Replica() ReplicaStatus {
	rep := r.held.Replica()
	rec, _ := r.record()
	r.mu.Lock()
	at := r.recreatedAt
	r.mu.Unlock()
	out := ReplicaStatus{LastRecreatedAt: at}
	if rec != nil {
		out.SandboxID = rec.SandboxID
	}
	if rep != nil {
		st := rep.Status()
		out.Recreated, out.Synced, out.Files = st.Recreated, st.Synced, st.Files
	}
	return out
}

// current returns the sandbox of the runtime as E2B sees it now: its id and
// details (nil when it does not exist). A record whose sandbox E2B no
// longer knows is dropped; without a record, the sandbox is looked up by
// its metadata. Errors: mapHTTP's.
func (r *Runtime) current(ctx context.Context) (*record, *api.SandboxDetail, error) {
	rec, err := r.record()
	if err != nil {
		return nil, nil, err
	}
	if rec != nil {
		det, err := r.p.getSandbox(ctx, rec.SandboxID)
		if err != nil {
			return nil, nil, err
		}
		if det != nil {
			return rec, det, nil
		}
	}
	found, err := r.p.findByRuntime(ctx, r.id)
	if err != nil || found == nil {
		return nil, nil, err
	}
	det, err := r.p.getSandbox(ctx, found.SandboxID)
	if err != nil || det == nil {
		return nil, nil, err
	}
	// Known by its metadata only (a record lost, or a create whose answer
	// never came): its tokens come with the next connect.
	return &record{SandboxID: found.SandboxID}, det, nil
}

// State returns the sandbox's state (package documentation); a runtime whose
// sandbox does not exist is sandbox.RuntimeMissing.
func (r *Runtime) State(ctx context.Context) (sandbox.RuntimeState, error) {
	_, det, err := r.current(ctx)
	if err != nil {
		return sandbox.RuntimeError, err
	}
	if det == nil {
		return sandbox.RuntimeMissing, nil
	}
	return stateOf(det.State), nil
}

// Start resumes a paused sandbox (connect) and waits until it runs; a
// vanished one is created again when the spec is known, else
// sandboxapi.ErrNotFound.
func (r *Runtime) Start(ctx context.Context) error {
	_ = r.held.Load()
	_, err := r.ensure(ctx)
	return err
}

// ensure makes the sandbox exist and run, and returns its envd client: a
// paused one is resumed (connect), a vanished one created again (the
// replica then re-syncs everything), a running one's timeout refreshed when
// a quarter of it has passed.
func (r *Runtime) ensure(ctx context.Context) (*envdClient, error) {
	r.ensureMu.Lock()
	defer r.ensureMu.Unlock()
	r.mu.Lock()
	env, okAt := r.env, r.okAt
	r.mu.Unlock()
	if env != nil && time.Since(okAt) < confirmFor {
		// A sandbox paused meanwhile (404) or at the end of its instance is
		// revived by the next call that fails.
		if err := r.keepAlive(ctx, env.rec.SandboxID, 0); err != nil && sandboxapi.KindOf(err) != sandboxapi.ErrNotFound && !errors.Is(err, errInstanceOver) {
			return nil, err
		}
		return env, nil
	}
	rec, det, err := r.current(ctx)
	if err != nil {
		return nil, err
	}
	r.noteStart(det)
	switch {
	case det != nil && det.State == api.Running && rec.AccessToken != "":
		if err := r.setRecord(rec); err != nil {
			return nil, err
		}
		if err := r.keepAlive(ctx, rec.SandboxID, 0); err != nil && !errors.Is(err, errInstanceOver) {
			return nil, err
		}
	case det != nil:
		// Paused (or running but known by metadata only): connect resumes it
		// and hands over its tokens.
		nrec, err := r.connect(ctx, rec.SandboxID)
		if err != nil {
			return nil, err
		}
		if nrec == nil {
			return r.recreate(ctx)
		}
		if err := r.setRecord(nrec); err != nil {
			return nil, err
		}
	default:
		return r.recreate(ctx)
	}
	r.mu.Lock()
	r.okAt = time.Now()
	env = r.env
	r.mu.Unlock()
	return env, nil
}

// connect resumes (or confirms) sbID with this runtime's timeout; nil when
// E2B does not know it.
func (r *Runtime) connect(ctx context.Context, sbID string) (*record, error) {
	var res *api.PostSandboxesSandboxIDConnectResponse
	var sent time.Time
	err := r.p.retry(ctx, "connect sandbox "+sbID, func(ctx context.Context) error {
		var err error
		sent = time.Now()
		res, err = r.p.api.PostSandboxesSandboxIDConnectWithResponse(ctx, sbID, api.ConnectSandbox{Timeout: int32(r.p.opts.Timeout / time.Second)})
		return r.p.mapResp(ctx, res, err, "connect sandbox %s", sbID)
	})
	if sandboxapi.KindOf(err) == sandboxapi.ErrNotFound {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	sb := res.JSON200
	if sb == nil {
		// 201: resumed, a new instance (200: it was running, its instance
		// goes on).
		sb = res.JSON201
		r.startedInstance(sent)
	}
	rec, err := r.p.recordFrom(sb)
	if err != nil {
		return nil, err
	}
	r.setTTL(r.p.opts.Timeout)
	return &rec, nil
}

// setTTL records a timeout set now: E2B cut it to the end of the instance,
// when that comes first.
func (r *Runtime) setTTL(d time.Duration) {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.instStart.IsZero() {
		if left := r.instStart.Add(r.p.opts.MaxInstanceLength).Sub(now); left < d {
			d = max(left, 0)
		}
	}
	r.ttl, r.ttlAt = d, now
}

// recreate creates the runtime's sandbox (again, when it vanished).
func (r *Runtime) recreate(ctx context.Context) (*envdClient, error) {
	spec, rep := r.held.Get()
	if spec == nil {
		return nil, sandboxapi.Errorf(sandboxapi.ErrNotFound, "e2b: runtime %s does not exist", r.id)
	}
	hadOne, _ := r.record()
	body := r.p.createBody(*spec)
	var res *api.PostSandboxesResponse
	var sent time.Time
	adopted := false
	err := r.p.retry(ctx, "create sandbox for "+r.id, func(ctx context.Context) error {
		var err error
		sent = time.Now()
		res, err = r.p.api.PostSandboxesWithResponse(ctx, body)
		err = r.p.mapResp(ctx, res, err, "create sandbox for %s", r.id)
		if err != nil && replica.Transient(err) {
			// The answer may have been lost after E2B created it: adopt it
			// rather than making a second one.
			if found, ferr := r.p.findByRuntime(ctx, r.id); ferr == nil && found != nil {
				if rec, cerr := r.connect(ctx, found.SandboxID); cerr == nil && rec != nil {
					res = &api.PostSandboxesResponse{JSON201: &api.Sandbox{SandboxID: rec.SandboxID, EnvdVersion: rec.EnvdVersion,
						EnvdAccessToken: &rec.AccessToken, TrafficAccessToken: &rec.TrafficToken, Domain: &rec.Domain}}
					adopted = true
					return nil
				}
			}
		}
		return err
	})
	if err != nil {
		return nil, r.p.templateError(err)
	}
	rec, err := r.p.recordFrom(res.JSON201)
	if err != nil {
		return nil, err
	}
	if rec.AccessToken == "" {
		r.p.log.Warn("e2b: the sandbox came without an envd access token (secure was asked for)", "runtime", r.id, "sandbox", rec.SandboxID)
	}
	if err := r.setRecord(&rec); err != nil {
		return nil, err
	}
	if !adopted {
		r.startedInstance(sent) // an adopted one was connected: connect knows
	}
	r.setTTL(r.p.opts.Timeout)
	r.mu.Lock()
	r.okAt = time.Now()
	env := r.env
	r.mu.Unlock()
	if rep != nil && (rep.Status().Synced || hadOne != nil) {
		r.p.log.Warn("e2b: the runtime's sandbox had vanished; created it again, the replica re-syncs from the workspace", "runtime", r.id, "sandbox", rec.SandboxID)
		r.mu.Lock()
		r.recreated++
		r.recreatedAt = time.Now().UTC()
		r.mu.Unlock()
		if err := rep.Reset(); err != nil {
			return nil, err
		}
	}
	replica.ClearHibernated(r.p.stateDir(r.id))
	// The bookkeeping directory, through envd's filesystem service.
	if err := env.makeDir(ctx, r.remoteState()); err != nil {
		return nil, err
	}
	return env, nil
}

// keepAlive keeps the sandbox's timeout ahead of its use: with need > 0, at
// least need from now (a command's timeout and a margin); otherwise it is
// set back to Options.Timeout once a quarter of it has passed. Never past
// the end of the instance (instance.go): E2B would only shorten it, and
// refuse it once that end has come; a timeout that cannot reach further
// than the one set is not asked for. Errors: errInstanceOver (E2B says the
// instance is over); mapHTTP's.
func (r *Runtime) keepAlive(ctx context.Context, sbID string, need time.Duration) error {
	r.mu.Lock()
	left := r.ttl - time.Since(r.ttlAt)
	cur := r.ttlAt.Add(r.ttl)
	r.mu.Unlock()
	set := time.Duration(0)
	switch {
	case need > 0 && left < need:
		set = max(need, r.p.opts.Timeout)
	case need == 0 && left < r.p.opts.Timeout*3/4:
		set = r.p.opts.Timeout
	}
	if set == 0 {
		return nil
	}
	set = min(set, MaxTimeout)
	if end := r.instanceEnd(); !end.IsZero() {
		set = min(set, time.Until(end).Truncate(time.Second))
		if set < time.Second || !time.Now().Add(set).After(cur) {
			return nil // nothing to gain: the instance ends first
		}
	}
	err := r.p.retry(ctx, "set timeout of "+sbID, func(ctx context.Context) error {
		res, err := r.p.api.PostSandboxesSandboxIDTimeoutWithResponse(ctx, sbID, api.SandboxTimeoutRequest{Timeout: int32(set / time.Second)})
		return r.p.mapResp(ctx, res, err, "set timeout of %s", sbID)
	})
	if instanceOver(err) {
		return errInstanceOver
	}
	if err != nil {
		return err
	}
	r.setTTL(set)
	return nil
}

// revive is called when an envd call failed: it asks the control plane
// what became of the sandbox. A paused one (E2B's timeout, or paused out of
// band) is resumed and nil returned (call envd again); a vanished one gives
// sandboxapi.ErrNotFound (the caller recreates it); a running one gives cause
// back (a transient failure).
func (r *Runtime) revive(ctx context.Context, cause error) error {
	r.mu.Lock()
	r.okAt = time.Time{}
	r.mu.Unlock()
	rec, det, err := r.current(ctx)
	if err != nil {
		return err
	}
	if det == nil {
		if err := r.setRecord(nil); err != nil {
			return err
		}
		return sandboxapi.Wrap(sandboxapi.ErrNotFound, cause, "e2b: runtime %s: its sandbox vanished", r.id)
	}
	if det.State == api.Paused {
		r.p.log.Info("e2b: the runtime's sandbox was paused under a call; resuming it", "runtime", r.id, "sandbox", rec.SandboxID)
		if _, err := r.ensure(ctx); err != nil {
			return err
		}
		return nil
	}
	return cause
}

// Stop hibernates = pause: the commands in flight are killed (their calls
// return their results, a kill by signal), what the sandbox changed since
// the last command is brought back, then the sandbox is paused, which keeps
// its filesystem, its memory and the processes left running in the
// background (they continue on resume). A paused or missing sandbox is
// success. When the sync fails the sandbox is left running and the error
// returned: nothing it holds is lost.
func (r *Runtime) Stop(ctx context.Context) error {
	_ = r.held.Load()
	rec, det, err := r.current(ctx)
	if err != nil || det == nil || det.State != api.Running {
		return err
	}
	r.stopping.Store(true)
	defer r.stopping.Store(false)
	env, err := r.ensure(ctx)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; r.active.Load() > 0 && time.Now().Before(deadline); i++ {
		if i%10 == 0 {
			r.killCommands(ctx, env)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if rep := r.held.Replica(); rep != nil {
		if _, err := rep.Sync(ctx, r.transport()); err != nil {
			return err
		}
	}
	err = r.pause(ctx, rec.SandboxID)
	switch sandboxapi.KindOf(err) {
	case nil:
	case sandboxapi.ErrNotFound:
		return nil
	case sandboxapi.ErrConflict:
		// Already paused (or pausing): fine when it says so.
		if st, serr := r.State(ctx); serr != nil || st != sandbox.RuntimeStopped {
			return err
		}
	default:
		return err
	}
	r.mu.Lock()
	r.okAt = time.Time{}
	r.mu.Unlock()
	replica.MarkHibernated(r.p.stateDir(r.id))
	return nil
}

// destroy: see Provider.Destroy.
func (r *Runtime) destroy(ctx context.Context) error {
	rec, det, err := r.current(ctx)
	if err != nil {
		return err
	}
	if det != nil {
		if rep := r.held.Replica(); rep != nil && !replica.Hibernated(r.p.stateDir(r.id)) {
			// It may hold changes made after the last command (background
			// processes): bring them back first.
			if _, err := r.ensure(ctx); err != nil {
				return err
			}
			if _, err := rep.Sync(ctx, r.transport()); err != nil {
				return err
			}
		}
		if err := r.p.killSandbox(ctx, rec.SandboxID); err != nil {
			return err
		}
	}
	if err := r.setRecord(nil); err != nil {
		return err
	}
	if rep := r.held.Replica(); rep != nil {
		if err := rep.Forget(); err != nil {
			return err
		}
	}
	replica.ClearHibernated(r.p.stateDir(r.id))
	return nil
}
