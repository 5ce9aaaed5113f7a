package workflows

import (
	"fmt"
	"strings"

	"go.temporal.io/sdk/workflow"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// watchDetails keeps a run's current details (Temporal user metadata, shown
// by the Web UI on the workflow's page and read with the built-in
// __temporal_workflow_metadata query; docs/OPERATIONS.md) equal to render():
// set now, then again whenever the rendered text changes. Setting current
// details is no command and no history event, so keeping them fresh on
// every operation, read-only ones included, grows no history, and replay of
// histories recorded before they existed is unaffected. The watching
// coroutine only awaits a condition (no timer, no command). render must be
// deterministic and cheap: it runs whenever the workflow's coroutines are
// woken.
func watchDetails(ctx workflow.Context, render func() string) {
	last := render()
	workflow.SetCurrentDetails(ctx, last)
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			var next string
			if err := workflow.Await(ctx, func() bool { next = render(); return next != last }); err != nil {
				return
			}
			last = next
			workflow.SetCurrentDetails(ctx, last)
		}
	})
}

// details renders a fan-out's current details: its state, the
// conversation's branch and start commit, task counts by status, then one
// line per task (the first maxDetailTasks).
func (f *fanout) details() string {
	md := sandboxapi.EscapeMarkdown
	r := &f.report
	head := "**State** " + md(r.State)
	if r.Branch != "" {
		head += " · **Branch** " + md(r.Branch)
	}
	if r.StartCommit != "" {
		head += " from " + md(shortCommit(r.StartCommit))
	}
	counts := map[string]int{}
	var order []string
	for _, t := range r.Tasks {
		if counts[t.Status] == 0 {
			order = append(order, t.Status)
		}
		counts[t.Status]++
	}
	var parts []string
	for _, st := range order {
		parts = append(parts, fmt.Sprintf("%d %s", counts[st], md(st)))
	}
	head += fmt.Sprintf(" · **Tasks** %d (%s) · **Running** %d of at most %d", len(r.Tasks), strings.Join(parts, ", "), r.Running, r.MaxParallel)
	lines := []string{head}
	if r.Error != "" {
		lines = append(lines, "**Error** "+md(sandboxapi.Clip(r.Error, 300)))
	}
	for i, t := range r.Tasks {
		if i == maxDetailTasks {
			lines = append(lines, fmt.Sprintf("… and %d more tasks (progress query)", len(r.Tasks)-i))
			break
		}
		l := "- " + md(t.TaskID) + " (" + md(t.Kind) + "): " + md(t.Status)
		if t.ExitCode != nil {
			l += fmt.Sprintf(", exit %d", *t.ExitCode)
		}
		if t.TimedOut {
			l += ", timed out"
		}
		if t.Merge != "" {
			l += " · merge " + md(t.Merge)
		}
		lines = append(lines, l)
	}
	return strings.Join(lines, "\n\n")
}

// maxDetailTasks bounds the task lines of a fan-out's current details.
const maxDetailTasks = 20

// evictionDetails renders an eviction run's current details: its phase,
// then each host's usage against its budget and its planned actions, and the
// summary once the run finished.
func evictionDetails(phase string, res *sandboxapi.EvictionRunResult) string {
	md := sandboxapi.EscapeMarkdown
	lines := []string{"**Phase** " + md(phase)}
	for i, h := range res.Hosts {
		if i == maxDetailTasks {
			lines = append(lines, fmt.Sprintf("… and %d more hosts", len(res.Hosts)-i))
			break
		}
		l := "- " + md(h.HostID) + ": "
		switch {
		case h.Unreachable:
			l += "unreachable"
		case h.Error != "":
			l += "failed: " + md(sandboxapi.Clip(h.Error, 200))
		case h.Plan != nil:
			u := h.Plan.Plan.Usage
			l += fmt.Sprintf("%d of %d bytes used, pressure %s, %d actions planned", u.UsedBytes, u.BudgetBytes, md(h.Plan.Plan.Pressure), len(h.Plan.Plan.Actions))
			if len(h.Results) > 0 {
				done := 0
				for _, r := range h.Results {
					if r.Outcome != sandboxapi.OutcomePending {
						done++
					}
				}
				l += fmt.Sprintf(", %d of %d answered", done, len(h.Results))
			}
		default:
			l += "planning"
		}
		lines = append(lines, l)
	}
	if !res.FinishedAt.IsZero() {
		s := res.Summary
		lines = append(lines, fmt.Sprintf("**Summary** %d planned · %d stopped · %d destroyed · %d evicted · %d caches removed · %d orphan runtimes deleted · %d skipped · %d blocked · %d failed · %d pending · %d bytes freed",
			s.Planned, s.Stopped, s.Destroyed, s.Evicted, s.CachesFreed, s.OrphansDeleted, s.Skipped, s.Blocked, s.Failed, s.Pending, s.FreedBytes))
	}
	return strings.Join(lines, "\n\n")
}

// cleanupDetails renders a cleanup run's current details: whether it is
// done, its hosts, then one line per workspace found (the first
// maxDetailTasks) with its outcome, and the summary once finished.
func cleanupDetails(rep *sandboxapi.CleanupReport) string {
	md := sandboxapi.EscapeMarkdown
	state := "running"
	if rep.Done {
		state = "done"
	}
	head := "**State** " + state + fmt.Sprintf(" · **Workspaces** %d · **Hosts** %d", len(rep.Workspaces), len(rep.Hosts))
	lines := []string{head}
	for _, h := range rep.Hosts {
		if h.Unreachable || h.Error != "" {
			l := "- host " + md(h.HostID) + ": "
			if h.Unreachable {
				l += "unreachable"
			} else {
				l += "failed: " + md(sandboxapi.Clip(h.Error, 200))
			}
			lines = append(lines, l)
		}
	}
	for i, o := range rep.Workspaces {
		if i == maxDetailTasks {
			lines = append(lines, fmt.Sprintf("… and %d more workspaces (progress query)", len(rep.Workspaces)-i))
			break
		}
		l := "- " + md(o.WorkspaceID) + " (" + md(o.Mode) + ", " + md(o.State) + "): " + md(o.Outcome)
		if o.Message != "" && o.Outcome == sandboxapi.CleanupFailed {
			l += " — " + md(sandboxapi.Clip(o.Message, 200))
		}
		lines = append(lines, l)
	}
	if rep.Done {
		s := rep.Summary
		lines = append(lines, fmt.Sprintf("**Summary** %d found · %d destroyed · %d gone · %d failed · %d backups kept", s.Found, s.Destroyed, s.Gone, s.Failed, s.Backups))
	}
	return strings.Join(lines, "\n\n")
}
