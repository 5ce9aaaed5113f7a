package workflows

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sandboxcore/sandboxcore/internal/wire"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// A session's current details (docs/OPERATIONS.md "What a session shows"),
// kept up to date by watchDetails from what the workflow already knows from
// its operations' results (wire.SessionFacts): no activity, query or
// history event is added for them.

// learn records what an operation's result says about the workspace and
// the operation itself. in is the decoded argument, out the result (a zero
// value when err is set), took its duration in workflow time.
func (s *session) learn(ctx workflow.Context, name string, in, out any, err error, took time.Duration) {
	f := &s.facts
	f.LastOp, f.LastOutcome, f.LastTookMS, f.LastAt = name, "ok", took.Milliseconds(), workflow.Now(ctx)
	if err != nil {
		f.LastOutcome = errorType(err)
		return
	}
	yes, no := true, false
	switch v := out.(type) {
	case sandboxapi.Handle:
		if s.ws != nil && f.Dirty == nil {
			// The stored flag, only when nothing newer is known (an acquire of
			// an active session returns the handle it already had).
			d := s.ws.Dirty
			f.Dirty, f.DirtyFrom = &d, name
		}
	case sandboxapi.WorkspaceStatus:
		n := v.UnpushedCommits
		f.Head, f.HeadFrom, f.Dirty, f.DirtyFrom, f.Unpushed, f.UnpushedFrom = v.Head, name, &v.Dirty, name, &n, name
		f.Stale = ""
	case sandboxapi.CommitResult:
		if !v.NothingToCommit {
			f.Head, f.HeadFrom = v.Commit, name
			if f.Unpushed != nil {
				n := *f.Unpushed + 1
				f.Unpushed, f.UnpushedFrom = &n, name
			}
		}
		if req, ok := in.(sandboxapi.CommitRequest); ok && len(req.Paths) == 0 {
			// Everything was committed (git add -A), whatever a command
			// changed since the facts were learnt: clean. Before
			// changeCommitClean a command in between kept the old value
			// (SandboxDirty stayed true after the commit).
			if f.Stale == "" || workflow.GetVersion(ctx, changeCommitClean, workflow.DefaultVersion, 1) == 1 {
				f.Dirty, f.DirtyFrom = &no, name
			}
		}
	case sandboxapi.PushResult:
		zero := 0
		f.Head, f.HeadFrom, f.Unpushed, f.UnpushedFrom = v.Commit, name, &zero, name
	case sandboxapi.MergeResult:
		if v.DryRun {
			break // a preview changes nothing
		}
		f.Head, f.HeadFrom, f.Dirty, f.DirtyFrom = v.Head, name, &no, name
		f.Unpushed = nil
	case sandboxapi.OverlapsResult:
		n, high := len(v.Overlaps), v.HighRisk()
		f.Overlaps, f.OverlapsHigh, f.OverlapsAt = &n, high, workflow.Now(ctx)
	case sandboxapi.WriteFileResult, sandboxapi.EditFileResult:
		f.Dirty, f.DirtyFrom = &yes, name
	case sandboxapi.Checkpoint:
		if v.Head != "" {
			f.Head, f.HeadFrom = v.Head, name
		}
	case sandboxapi.RollbackResult:
		// The worktree is the checkpoint's: its head, dirty when the
		// checkpoint held changes; the unpushed count may have changed.
		d := v.Checkpoint.FilesChanged > 0
		f.Head, f.HeadFrom, f.Dirty, f.DirtyFrom = v.Head, name, &d, name
		f.Unpushed, f.Stale = nil, ""
	case sandboxapi.DestroyResult:
		// The worktree is gone: nothing known holds any longer (a restore
		// starts again from the stored record).
		f.Head, f.HeadFrom, f.Dirty, f.DirtyFrom, f.Unpushed, f.UnpushedFrom, f.Stale = "", "", nil, "", nil, "", ""
	case sandboxapi.ExecResult:
		f.LastOutcome = execOutcome(v)
		if s.ws != nil && s.ws.Capabilities.Writable && f.Stale == "" {
			f.Stale = name // a command may change files and commits
		}
	}
	s.publishDirty(ctx)
}

// execOutcome is "exit N" or "timed out".
func execOutcome(r sandboxapi.ExecResult) string {
	if r.TimedOut {
		return "timed out"
	}
	return fmt.Sprintf("exit %d", r.ExitCode)
}

// errorType is an update failure's stable error type (docs/API.md "Errors").
func errorType(err error) string {
	var app *temporal.ApplicationError
	if errors.As(err, &app) && app.Type() != "" {
		return app.Type()
	}
	return sandboxapi.ErrSandbox.Type
}

// details renders the current details (Temporal markdown, every value
// escaped): the summary line, then state and runtime, git facts, the last
// operation, and the next idle deadline.
func (s *session) details() string {
	lines := []string{s.detailsSummary(), s.detailsState()}
	if ws := s.ws; ws != nil {
		lines = append(lines, gitDetails(ws.BranchName, ws.BaseCommit, s.facts))
	}
	if f := s.facts; f.Overlaps != nil {
		lines = append(lines, fmt.Sprintf("**SandboxOverlaps** %d (%d high risk) from overlaps at %s", *f.Overlaps, f.OverlapsHigh,
			f.OverlapsAt.UTC().Format(time.RFC3339)))
	}
	lines = append(lines, s.detailsRecent()...)
	if next := s.detailsNextIdle(); next != "" {
		lines = append(lines, next)
	}
	return strings.Join(lines, "\n\n")
}

// detailsSummary is the first line of the details: the session summary of
// the workspace (or, before it exists, of the request).
func (s *session) detailsSummary() string {
	if ws := s.ws; ws != nil {
		req := sandboxapi.WorkspaceRequest{UserID: ws.UserID, ProjectID: ws.ProjectID, RepoURL: ws.Repo.URL, BaseRef: ws.BaseRef,
			Mode: ws.Mode, ConversationID: ws.ConversationID, TaskID: ws.TaskID}
		return sandboxapi.SessionSummary(s.wsID, &req)
	}
	return sandboxapi.SessionSummary(s.wsID, s.request)
}

// detailsState is the state line: state (dormant or not), runtime kind and
// whether it runs, host, operations in flight.
func (s *session) detailsState() string {
	md := sandboxapi.EscapeMarkdown
	state := "**State** " + md(s.state)
	if s.phase == phaseDormant {
		state += " (dormant: the next operation resumes the workspace)"
	}
	if kind := s.settings.RuntimeKind; kind != "" {
		run := "stopped"
		if s.runtimeRunning {
			run = "running"
		}
		state += " · **Runtime** " + md(kind) + ", " + run
	}
	if ws := s.ws; ws != nil && ws.HostID != "" {
		state += " · **Host** " + md(ws.HostID)
	}
	if s.inFlight > 0 {
		state += fmt.Sprintf(" · **In flight** %d", s.inFlight)
	}
	return state
}

// gitDetails is the git line: branch (or the detached base commit), head,
// dirty and unpushed as last learnt (f, each with the operation it came
// from, or unknown), and a note when a command ran since.
func gitDetails(branch, baseCommit string, f wire.SessionFacts) string {
	md := sandboxapi.EscapeMarkdown
	var git []string
	if branch != "" {
		git = append(git, "**Branch** "+md(branch))
	} else {
		git = append(git, "**Detached at** "+md(shortCommit(baseCommit)))
	}
	if f.Head != "" {
		git = append(git, "**Head** "+md(shortCommit(f.Head))+" ("+md(f.HeadFrom)+")")
	} else {
		git = append(git, "**Head** unknown (send status)")
	}
	if f.Dirty != nil {
		v := "no"
		if *f.Dirty {
			v = "yes"
		}
		git = append(git, "**Dirty** "+v+" ("+md(f.DirtyFrom)+")")
	} else {
		git = append(git, "**Dirty** unknown")
	}
	if f.Unpushed != nil {
		git = append(git, fmt.Sprintf("**Unpushed** %d (%s)", *f.Unpushed, md(f.UnpushedFrom)))
	} else {
		git = append(git, "**Unpushed** unknown")
	}
	line := strings.Join(git, " · ")
	if f.Stale != "" {
		line += " — " + md(f.Stale) + " ran since: send status for fresh values"
	}
	return line
}

// detailsRecent are the lines of what happened last: the last operation,
// the last eviction request, the last error (each only when there is one).
func (s *session) detailsRecent() []string {
	md := sandboxapi.EscapeMarkdown
	var lines []string
	if f := s.facts; f.LastOp != "" {
		lines = append(lines, fmt.Sprintf("**Last operation** %s: %s in %s at %s", md(f.LastOp), md(f.LastOutcome),
			(time.Duration(f.LastTookMS)*time.Millisecond).String(), f.LastAt.UTC().Format(time.RFC3339)))
	}
	if e := s.ev.lastEvict; e != nil {
		lines = append(lines, fmt.Sprintf("**Last eviction request** %s: %s at %s", md(string(e.Action)), md(e.Outcome), e.At.UTC().Format(time.RFC3339)))
	}
	if s.lastError != "" {
		lines = append(lines, "**Last error** "+md(sandboxapi.Clip(s.lastError, 300)))
	}
	return lines
}

// detailsNextIdle is the line of the next idle deadlines (hibernation when
// the runtime runs, the session's close), "" for a session without a
// workspace, dormant or released.
func (s *session) detailsNextIdle() string {
	if s.ws == nil || s.phase == phaseDormant || s.ending {
		return ""
	}
	var next []string
	if s.runtimeRunning {
		next = append(next, "runtime hibernates at "+s.lastActivity.Add(s.settings.IdleStop).UTC().Format(time.RFC3339))
	}
	next = append(next, "session closes at "+s.lastActivity.Add(s.settings.IdleClose).UTC().Format(time.RFC3339))
	return "**Next idle deadline** " + strings.Join(next, " · ") + " (unless an operation comes first)"
}

// shortCommit is the first 12 characters of a commit id.
func shortCommit(c string) string {
	if len(c) > 12 {
		return c[:12]
	}
	return c
}

// carryFacts returns the facts to hand to the next run.
func (s *session) carryFacts() *wire.SessionFacts {
	f := s.facts
	return &f
}
