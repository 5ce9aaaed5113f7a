package daytona

import (
	"context"
	"net/http"
	"os"
	"path"
	"strings"
	"sync"
	"time"

	apiclient "github.com/daytonaio/daytona/libs/api-client-go"
	toolbox "github.com/daytonaio/daytona/libs/toolbox-api-client-go"

	"github.com/sandboxcore/sandboxcore/internal/runtime/replica"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// Runtime is one Daytona runtime. One handle exists per runtime id and
// provider; it is safe for concurrent use (commands run in parallel).
type Runtime struct {
	p  *Provider
	id string

	held replica.SpecReplica // its spec and replica (their own lock, taken after mu)

	ensureMu sync.Mutex // serializes create/start
	mu       sync.Mutex
	sbID     string
	homeDir  string // the sandbox user's home (cacheSandbox)
	tb       *toolbox.APIClient
	lastPass string
}

var _ sandbox.Runtime = (*Runtime)(nil)

// ID returns the runtime id (the sandbox's name).
func (r *Runtime) ID() string { return r.id }

// Replica reports the runtime's replica for the session's handle and
// describe (sandboxapi.RuntimeReplica; docs/API.md "Remote runtimes"):
// Recreated > 0 means its sandbox vanished and was rebuilt from the
// workspace; NotSynced names nested git repositories left in the sandbox.
// It reads host state only (no call to Daytona).
func (r *Runtime) Replica() sandboxapi.RuntimeReplica {
	rep := r.held.Replica()
	if rep == nil {
		return sandboxapi.RuntimeReplica{}
	}
	return rep.Status().API()
}

// State returns the sandbox's state (package documentation); a runtime whose
// sandbox does not exist is sandbox.RuntimeMissing.
func (r *Runtime) State(ctx context.Context) (sandbox.RuntimeState, error) {
	sb, err := r.p.getSandbox(ctx, r.id)
	if err != nil {
		return sandbox.RuntimeError, err
	}
	if sb == nil {
		return sandbox.RuntimeMissing, nil
	}
	return runtimeState(sb.GetState()), nil
}

// Start starts the sandbox (stopped or archived ones too) and waits until it
// runs; a vanished one is created again when the spec is known, else
// sandboxapi.ErrNotFound.
func (r *Runtime) Start(ctx context.Context) error {
	_ = r.held.Load()
	_, err := r.ensure(ctx)
	return err
}

// Stop hibernates: what the sandbox changed since the last command is
// brought back first, then the sandbox is stopped (its processes end; its
// files stay until it is destroyed). A stopped, archived or missing sandbox
// is success. When the sync fails the sandbox is left running and the error
// returned: nothing it holds is lost.
func (r *Runtime) Stop(ctx context.Context) error {
	_ = r.held.Load()
	sb, err := r.p.getSandbox(ctx, r.id)
	if err != nil || sb == nil {
		return err
	}
	switch sb.GetState() {
	case apiclient.SANDBOXSTATE_STARTED:
	case apiclient.SANDBOXSTATE_STARTING, apiclient.SANDBOXSTATE_CREATING, apiclient.SANDBOXSTATE_RESTORING:
		if sb, err = r.waitStable(ctx, false); err != nil {
			return err
		}
		if sb.GetState() != apiclient.SANDBOXSTATE_STARTED {
			return nil
		}
	default:
		return nil
	}
	if err := r.cacheSandbox(ctx, sb); err != nil {
		return err
	}
	if rep := r.held.Replica(); rep != nil {
		if _, err := rep.Sync(ctx, r.transport()); err != nil {
			return err
		}
	}
	err = r.p.retry(ctx, "stop sandbox "+r.id, func(ctx context.Context) error {
		_, resp, err := r.p.api.SandboxAPI.StopSandbox(ctx, r.p.sandboxName(r.id)).Execute()
		return r.p.mapErr(ctx, resp, err, "stop sandbox %s", r.id)
	})
	if sandboxapi.KindOf(err) == sandboxapi.ErrNotFound {
		return nil
	}
	if err != nil {
		return err
	}
	if _, err := r.waitStable(ctx, false); err != nil {
		return err
	}
	replica.MarkHibernated(r.p.stateDir(r.id))
	return nil
}

// destroy: see Provider.Destroy.
func (r *Runtime) destroy(ctx context.Context) error {
	sb, err := r.p.getSandbox(ctx, r.id)
	if err != nil {
		return err
	}
	if sb != nil && runtimeState(sb.GetState()) != sandbox.RuntimeMissing {
		if rep := r.held.Replica(); rep != nil && !replica.Hibernated(r.p.stateDir(r.id)) && runtimeState(sb.GetState()) != sandbox.RuntimeError {
			// It may hold changes made after the last command (background
			// processes, an auto-stop): bring them back first.
			if _, err := r.ensure(ctx); err != nil {
				return err
			}
			if _, err := rep.Sync(ctx, r.transport()); err != nil {
				return err
			}
		}
		if err := r.p.deleteSandbox(ctx, r.id); err != nil {
			return err
		}
	}
	// Nothing of the runtime is left: its host state goes too (the next
	// Create records its spec again and starts a fresh replica).
	r.mu.Lock()
	rep := r.held.Clear()
	r.sbID, r.tb, r.homeDir = "", nil, ""
	r.mu.Unlock()
	if rep != nil {
		if err := rep.Forget(); err != nil {
			return err
		}
	}
	if err := os.RemoveAll(r.p.stateDir(r.id)); err != nil {
		return sandboxapi.Wrap(sandboxapi.ErrRuntimeUnavailable, err, "daytona: remove the state of runtime %s", r.id)
	}
	return nil
}

// ensure makes the sandbox exist and run: created when missing (again, when
// it vanished: the replica then re-syncs everything), started when stopped
// or archived, recovered (Daytona's recover route) when in a recoverable
// error, waited for while in a transitional state.
func (r *Runtime) ensure(ctx context.Context) (*apiclient.Sandbox, error) {
	r.ensureMu.Lock()
	defer r.ensureMu.Unlock()
	sb, err := r.p.getSandbox(ctx, r.id)
	if err != nil {
		return nil, err
	}
	if sb != nil && (sb.GetState() == apiclient.SANDBOXSTATE_ERROR || sb.GetState() == apiclient.SANDBOXSTATE_BUILD_FAILED) && !sb.GetRecoverable() {
		r.p.log.Warn("daytona: sandbox in an unrecoverable error state; replacing it", "runtime", r.id, "reason", sb.GetErrorReason())
		if err := r.p.deleteSandbox(ctx, r.id); err != nil {
			return nil, err
		}
		if _, err := r.waitGone(ctx); err != nil {
			return nil, err
		}
		sb = nil
	}
	if sb == nil || runtimeState(sb.GetState()) == sandbox.RuntimeMissing {
		if sb, err = r.create(ctx); err != nil {
			return nil, err
		}
	}
	for attempt := 0; ; attempt++ {
		switch runtimeState(sb.GetState()) {
		case sandbox.RuntimeRunning:
			if err := r.cacheSandbox(ctx, sb); err != nil {
				return nil, err
			}
			return sb, nil
		case sandbox.RuntimeStopped:
			if st := sb.GetState(); st == apiclient.SANDBOXSTATE_STOPPED || st == apiclient.SANDBOXSTATE_ARCHIVED || st == apiclient.SANDBOXSTATE_PAUSED {
				err := r.p.retry(ctx, "start sandbox "+r.id, func(ctx context.Context) error {
					_, resp, err := r.p.api.SandboxAPI.StartSandbox(ctx, r.p.sandboxName(r.id)).Execute()
					return r.p.mapErr(ctx, resp, err, "start sandbox %s", r.id)
				})
				if err != nil && sandboxapi.KindOf(err) != sandboxapi.ErrConflict {
					return nil, err
				}
			}
		case sandbox.RuntimeError:
			// Daytona refuses start for an errored sandbox (400 "Sandbox is
			// in an errored state", apps/api/src/sandbox/services/
			// sandbox.service.ts:164-168, 2060, v0.190.0); recover takes a
			// recoverable one in error back to started (2242-2281).
			if attempt == 0 && sb.GetRecoverable() && sb.GetState() == apiclient.SANDBOXSTATE_ERROR {
				r.p.log.Warn("daytona: recovering a sandbox in error", "runtime", r.id, "reason", sandboxapi.Clip(sb.GetErrorReason(), 300))
				err := r.p.retry(ctx, "recover sandbox "+r.id, func(ctx context.Context) error {
					_, resp, err := r.p.api.SandboxAPI.RecoverSandbox(ctx, r.p.sandboxName(r.id)).Execute()
					return r.p.mapErr(ctx, resp, err, "recover sandbox %s", r.id)
				})
				if err == nil {
					break
				}
			}
			return nil, sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "daytona: sandbox %s is in state %s: %s", r.id, sb.GetState(), sandboxapi.Clip(sb.GetErrorReason(), 300))
		}
		if attempt > 3 {
			return nil, sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "daytona: sandbox %s does not start (state %s)", r.id, sb.GetState())
		}
		if sb, err = r.waitStable(ctx, true); err != nil {
			return nil, err
		}
		if sb == nil {
			if sb, err = r.create(ctx); err != nil {
				return nil, err
			}
		}
	}
}

// create creates the sandbox of the handle's spec; a create refused for the
// disk quota deletes this deployment's least recently used clean stopped
// replicas and is tried once more. One refused for CPU or memory deletes
// nothing: stopped sandboxes hold disk only (diskQuota).
func (r *Runtime) create(ctx context.Context) (*apiclient.Sandbox, error) {
	spec, rep := r.held.Get()
	if spec == nil {
		return nil, sandboxapi.Errorf(sandboxapi.ErrNotFound, "daytona: runtime %s does not exist", r.id)
	}
	body, err := r.p.createBody(*spec)
	if err != nil {
		return nil, err
	}
	var sb *apiclient.Sandbox
	do := func() error {
		return r.p.retry(ctx, "create sandbox "+r.id, func(ctx context.Context) error {
			var resp *http.Response
			var err error
			sb, resp, err = r.p.api.SandboxAPI.CreateSandbox(ctx).CreateSandbox(body).Execute()
			return r.p.mapErr(ctx, resp, err, "create sandbox %s", r.id)
		})
	}
	err = do()
	if sandboxapi.KindOf(err) == sandboxapi.ErrResourceLimit && !diskQuota(err) {
		return nil, sandboxapi.Wrap(sandboxapi.ErrResourceLimit, err,
			"daytona: no room for runtime %s: the organization's CPU or memory is held by its running sandboxes (stopped ones hold only disk: none was deleted)", r.id)
	}
	if sandboxapi.KindOf(err) == sandboxapi.ErrResourceLimit {
		n := r.p.reclaim(ctx, r.id, reclaimAtMost)
		if n > 0 {
			err = do()
		}
		if sandboxapi.KindOf(err) == sandboxapi.ErrResourceLimit {
			if n == 0 {
				return nil, sandboxapi.Wrap(sandboxapi.ErrResourceLimit, err, "daytona: no room for runtime %s, and no stopped replica of this deployment could be deleted", r.id)
			}
			return nil, sandboxapi.Wrap(sandboxapi.ErrResourceLimit, err, "daytona: no room for runtime %s, even after deleting %d stopped replicas of this deployment", r.id, n)
		}
	}
	if sandboxapi.KindOf(err) == sandboxapi.ErrConflict {
		// Created meanwhile (a retried create whose answer was lost, another
		// worker): adopt it when it is ours.
		existing, gerr := r.p.getSandbox(ctx, r.id)
		if gerr != nil {
			return nil, gerr
		}
		if existing != nil {
			return existing, nil
		}
	}
	if err != nil {
		return nil, err
	}
	if rep != nil && rep.Status().Synced {
		r.p.log.Warn("daytona: the runtime's sandbox had vanished; created it again, the replica re-syncs from the workspace", "runtime", r.id)
		if err := rep.Reset(); err != nil {
			return nil, err
		}
	}
	replica.ClearHibernated(r.p.stateDir(r.id))
	return sb, nil
}

// waitStable polls until the sandbox leaves its transitional states
// (startOK: until it runs or stops); nil when it vanished.
func (r *Runtime) waitStable(ctx context.Context, startOK bool) (*apiclient.Sandbox, error) {
	deadline := time.Now().Add(readyTimeout)
	delay := 50 * time.Millisecond
	for {
		sb, err := r.p.getSandbox(ctx, r.id)
		if err != nil || sb == nil {
			return nil, err
		}
		switch sb.GetState() {
		case apiclient.SANDBOXSTATE_STARTED, apiclient.SANDBOXSTATE_STOPPED, apiclient.SANDBOXSTATE_ARCHIVED,
			apiclient.SANDBOXSTATE_PAUSED, apiclient.SANDBOXSTATE_ERROR, apiclient.SANDBOXSTATE_BUILD_FAILED:
			return sb, nil
		case apiclient.SANDBOXSTATE_DESTROYED:
			return nil, nil
		}
		if time.Now().After(deadline) {
			return nil, sandboxapi.Errorf(sandboxapi.ErrTimeout, "daytona: sandbox %s stayed %s for %v", r.id, sb.GetState(), readyTimeout)
		}
		select {
		case <-ctx.Done():
			return nil, r.p.mapErr(ctx, nil, ctx.Err(), "wait for sandbox %s", r.id)
		case <-time.After(delay):
		}
		delay = min(delay*2, time.Second)
	}
}

func (r *Runtime) waitGone(ctx context.Context) (bool, error) {
	for i := 0; i < 600; i++ {
		sb, err := r.p.getSandbox(ctx, r.id)
		if err != nil {
			return false, err
		}
		if sb == nil || sb.GetState() == apiclient.SANDBOXSTATE_DESTROYED {
			return true, nil
		}
		select {
		case <-ctx.Done():
			return false, r.p.mapErr(ctx, nil, ctx.Err(), "wait for sandbox %s", r.id)
		case <-time.After(100 * time.Millisecond):
		}
	}
	return false, sandboxapi.Errorf(sandboxapi.ErrTimeout, "daytona: sandbox %s is not deleted", r.id)
}

// cacheSandbox keeps the sandbox's id and toolbox client and, once per
// sandbox, asks its toolbox for the user's home directory (the replica's
// bookkeeping lives below it: remoteState), so that no image layout is
// assumed. A daemon without that endpoint (404) falls back to Daytona's
// convention, /home/<user> (/root for root). Errors: mapErr's.
func (r *Runtime) cacheSandbox(ctx context.Context, sb *apiclient.Sandbox) error {
	r.mu.Lock()
	if r.sbID == sb.GetId() && r.tb != nil && r.homeDir != "" {
		r.mu.Unlock()
		return nil
	}
	cfg := toolbox.NewConfiguration()
	cfg.Servers = toolbox.ServerConfigurations{{URL: strings.TrimSuffix(sb.GetToolboxProxyUrl(), "/") + "/" + sb.GetId()}}
	cfg.HTTPClient = r.p.hc
	cfg.UserAgent = "sandboxcore"
	tb := toolbox.NewAPIClient(cfg)
	r.mu.Unlock()

	var home string
	err := r.p.retry(ctx, "home directory in "+r.id, func(ctx context.Context) error {
		res, resp, err := tb.InfoAPI.GetUserHomeDir(ctx).Execute()
		if err := r.p.mapErr(ctx, resp, err, "home directory in %s", r.id); err != nil {
			return err
		}
		home = res.GetDir()
		return nil
	})
	switch {
	case sandboxapi.KindOf(err) == sandboxapi.ErrNotFound:
		home = conventionalHome(sb.GetUser())
		r.p.log.Debug("daytona: the toolbox has no user-home-dir endpoint; assuming Daytona's convention", "runtime", r.id, "home", home)
	case err != nil:
		return err
	}
	home = path.Clean(home)
	if !path.IsAbs(home) || home == "/" || strings.ContainsAny(home, "\x00\n") {
		return sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "daytona: sandbox %s reports an unusable home directory %q", r.id, sandboxapi.Clip(home, 100))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sbID, r.tb, r.homeDir = sb.GetId(), tb, home
	if rep := r.held.Replica(); rep != nil {
		rep.SetStateDir(path.Join(home, ".sandboxcore", r.id))
	}
	return nil
}

// conventionalHome is Daytona's home of a sandbox user: /home/<user>, /root.
func conventionalHome(user string) string {
	if user == "" || user == "root" || strings.ContainsAny(user, "/\x00") || user == "." || user == ".." {
		return "/root"
	}
	return path.Join("/home", user)
}

// home is the sandbox user's home directory (cacheSandbox first).
func (r *Runtime) home() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.homeDir == "" {
		return "/root"
	}
	return r.homeDir
}

// remoteState is the replica's bookkeeping directory in the sandbox.
func (r *Runtime) remoteState() string { return path.Join(r.home(), ".sandboxcore", r.id) }

// client returns the toolbox client (ensure first).
func (r *Runtime) client() (*toolbox.APIClient, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.tb, r.sbID
}
