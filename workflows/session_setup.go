package workflows

import (
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/sandboxcore/sandboxcore/internal/wire"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// changeSetup: an acquire plans the repository's setup run (docs/RUNTIMES.md
// "Setup"); runs recorded before never ran one.
const changeSetup = "session-setup"

// changePrepared: a setup run whose environment names prepared directories
// restores a prepared tree in place of its commands, or saves its output
// as one (docs/RUNTIMES.md "Prepared trees"); runs recorded before did
// neither.
const changePrepared = "setup-prepared-trees"

// planSetup decides, for an acquire with setup mode mode, whether the
// workspace's setup runs: a workspace whose repository environment names
// setup commands runs them once, and again when its lockfiles' hash
// changed since; skip records it skipped. A planned run is started at once
// (startSetup) and carried across continue-as-new while it is pending.
func (s *session) planSetup(ctx workflow.Context, mode string) {
	env := s.ws.Environment
	if env == nil || len(env.Setup) == 0 {
		return
	}
	if s.setup != nil && !s.setup.Ended() {
		if s.setup.State == sandboxapi.SetupPending && s.setupRuns == 0 {
			s.startSetup(ctx, nil) // carried pending into a dormant run: start it now
		}
		return // pending or running already
	}
	if s.setup != nil && s.setup.LockfilesHash == env.LockfilesHash && s.setup.State != sandboxapi.SetupSkipped {
		return // done or failed for these lockfiles: `sandboxctl exec` runs it again by hand
	}
	if mode == sandboxapi.SetupSkip {
		s.setup = &sandboxapi.SetupState{State: sandboxapi.SetupSkipped, LockfilesHash: env.LockfilesHash, Commands: len(env.Setup)}
		return
	}
	s.startSetup(ctx, env)
}

// startSetup records a pending setup run of env's commands (env nil: the
// pending run s.setup already holds, carried from the previous run) and
// runs it in a coroutine of its own, under the session's exclusive lock
// (operations sent meanwhile wait for it).
func (s *session) startSetup(ctx workflow.Context, env *sandboxapi.RepoEnvironment) {
	if env != nil {
		s.setup = &sandboxapi.SetupState{State: sandboxapi.SetupPending, LockfilesHash: env.LockfilesHash, Commands: len(env.Setup)}
	}
	s.setupRuns++
	n := s.setupRuns
	workflow.Go(ctx, func(ctx workflow.Context) { s.runSetup(ctx, n) })
}

// runSetup runs the workspace's setup commands as one exec (sh -ec, the
// commands in order, network limited unless the workspace has none, output
// kept whole and its tails recorded) and records the outcome in s.setup.
// A failed setup never touches the workspace.
func (s *session) runSetup(ctx workflow.Context, n int) {
	st := s.setup
	if err := s.begin(ctx, true); err != nil {
		now := workflow.Now(ctx)
		st.State, st.Error, st.FinishedAt = sandboxapi.SetupFailed, sandboxapi.Message(err), &now
		return
	}
	defer s.end(ctx, true)
	s.holder.op = "setup"
	env := s.ws.Environment
	if env == nil || len(env.Setup) == 0 || st.State != sandboxapi.SetupPending {
		return
	}
	start := workflow.Now(ctx)
	st.State, st.StartedAt = sandboxapi.SetupRunning, &start
	prepared := len(env.Prepared) > 0 && workflow.GetVersion(ctx, changePrepared, workflow.DefaultVersion, 1) == 1
	if prepared {
		st.Prepared = s.preparedTree(ctx, wire.ActivityRestorePreparedTree, st.LockfilesHash)
		if h := st.Prepared.LockfilesHash; h != "" {
			// The lockfiles as the commands see them (the agent may have
			// changed them since the acquire): the save keys by these.
			st.LockfilesHash = h
		}
		if st.Prepared.Action == sandboxapi.PreparedRestored {
			end := workflow.Now(ctx)
			st.State, st.FinishedAt, st.DurationMS = sandboxapi.SetupDone, &end, end.Sub(start).Milliseconds()
			return
		}
	}
	s.runtimeRunning = true
	if s.state != sandboxapi.StateActive {
		s.setState(ctx, sandboxapi.StateActive)
	}
	req := sandboxapi.ExecRequest{Cmd: setupScript(env.Setup), TimeoutS: int(sandboxapi.SetupTimeout / time.Second),
		MaxOutputBytes: sandboxapi.SetupOutputTailBytes, KeepOutput: true, Network: setupNetwork(s.ws)}
	run := workflow.GetInfo(ctx).WorkflowExecution.RunID
	in := wire.ExecActivityInput{WorkspaceID: s.wsID, Request: req, UpdateID: fmt.Sprintf("%s%.8s-%d", sandboxapi.SetupExecPrefix, run, n), Setup: true}
	// Listed by ps and stopped by cancel (and by release and hibernate)
	// like an exec, under its own id: the command is the activity's own, so
	// cancelling cancels the activity, which kills it.
	e := &execRun{updateID: in.UpdateID, started: true}
	if s.execs == nil {
		s.execs = map[string]*execRun{}
	}
	s.execs[e.updateID] = e
	defer s.untrackExec(e)
	waitCtx, abort := workflow.WithCancel(ctx)
	e.abort = abort
	var out wire.ExecActivityResult
	s.setupExec = e
	err := s.call(waitCtx, s.hostOptions(opExec, req.Timeout()), wire.ActivityExec, in, &out)
	s.setupExec = nil
	if out.RuntimeReplica != nil {
		s.replica = out.RuntimeReplica
	}
	end := workflow.Now(ctx)
	st.FinishedAt, st.DurationMS = &end, end.Sub(start).Milliseconds()
	if e.cancel != "" {
		s.lastError = ""
		e.cancelled = true
		st.State, st.ExitCode, st.Error = sandboxapi.SetupFailed, 130, "cancelled ("+e.cancel+")"
		return
	}
	if err != nil {
		st.State, st.Error = sandboxapi.SetupFailed, sandboxapi.Message(err)
		return
	}
	r := out.ExecResult
	st.ExitCode, st.OutputID = r.ExitCode, r.OutputID
	st.StdoutTail, st.StderrTail = outputTail(r.Stdout), outputTail(r.Stderr)
	switch {
	case r.TimedOut:
		st.State, st.Error = sandboxapi.SetupFailed, fmt.Sprintf("timed out after %s", sandboxapi.SetupTimeout)
	case r.ExitCode != 0:
		st.State = sandboxapi.SetupFailed
	default:
		if prepared {
			// Before done: an acquire waiting for the setup sees the save.
			st.Prepared = s.preparedTree(ctx, wire.ActivitySavePreparedTree, st.LockfilesHash)
		}
		st.State = sandboxapi.SetupDone
	}
}

// preparedTree runs the prepared-tree activity name for this workspace's
// setup run of the lockfiles hash; a failure is a result whose action is
// none, with the reason as its note (the setup runs, or stays done).
func (s *session) preparedTree(ctx workflow.Context, name, hash string) *sandboxapi.PreparedTree {
	var out sandboxapi.PreparedTree
	in := wire.PreparedTreeInput{WorkspaceID: s.wsID, LockfilesHash: hash}
	if err := s.call(ctx, s.hostOptions(opGit, 0), name, in, &out); err != nil {
		s.lastError = ""
		return &sandboxapi.PreparedTree{Action: sandboxapi.PreparedNone, Note: sandboxapi.Message(err)}
	}
	return &out
}

// rerunSetup is the setup update: it runs the setup commands again now (a
// running or pending run is waited for instead) and returns the outcome.
// Errors: ErrInvalidArgument when the repository names no setup command
// (or the worker runs none, SANDBOX_SETUP=off).
func (s *session) rerunSetup(ctx workflow.Context, _ sandboxapi.None) (sandboxapi.SetupState, error) {
	if err := s.waitReady(ctx); err != nil {
		return sandboxapi.SetupState{}, err
	}
	env := s.ws.Environment
	if env == nil || len(env.Setup) == 0 {
		why := "its repository names none, or this worker runs none"
		if env != nil && len(env.Problems) > 0 {
			why = fmt.Sprintf("its environment has %d problem(s), which describe lists (a file that is not used names no command)", len(env.Problems))
		}
		return sandboxapi.SetupState{}, appError(sandboxapi.Errorf(sandboxapi.ErrInvalidArgument,
			"workspace %s has no setup command to run: %s (docs/RUNTIMES.md \"Setup\")", s.wsID, why))
	}
	if s.setup == nil || s.setup.Ended() {
		s.startSetup(ctx, env)
	}
	if err := s.awaitSetup(ctx); err != nil {
		return sandboxapi.SetupState{}, err
	}
	return *s.setupCopy(), nil
}

// awaitSetup waits until the setup run planned for this acquire ended
// (setup mode wait).
func (s *session) awaitSetup(ctx workflow.Context) error {
	return workflow.Await(ctx, func() bool { return s.setup == nil || s.setup.Ended() })
}

// setupNetwork is the network of a setup run: limited (the allow-list,
// package registries included), none for a workspace without network, ""
// (the workspace's policy) when its policy is not recorded.
func setupNetwork(ws *sandboxapi.Workspace) sandboxapi.Network {
	switch ws.Network {
	case sandboxapi.NetworkLimited, sandboxapi.NetworkDefault:
		return sandboxapi.NetworkLimited
	case sandboxapi.NetworkNone:
		return sandboxapi.NetworkNone
	}
	return ""
}

// setupScript returns the argv running cmds (each an argv) one after the
// other under `sh -ec`: the first failing command ends the run with its
// exit code. Each argument is single-quoted.
func setupScript(cmds [][]string) []string {
	var b strings.Builder
	for _, argv := range cmds {
		for i, a := range argv {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString("'" + strings.ReplaceAll(a, "'", `'\''`) + "'")
		}
		b.WriteByte('\n')
	}
	return []string{"sh", "-ec", b.String()}
}

// outputTail is the last SetupOutputTailBytes of out as valid UTF-8.
func outputTail(out []byte) string {
	if len(out) > sandboxapi.SetupOutputTailBytes {
		out = out[len(out)-sandboxapi.SetupOutputTailBytes:]
	}
	return strings.ToValidUTF8(string(out), "\uFFFD")
}

// setupCopy returns a copy of the setup state for a result (nil: none).
func (s *session) setupCopy() *sandboxapi.SetupState {
	if s.setup == nil {
		return nil
	}
	c := *s.setup
	return &c
}
