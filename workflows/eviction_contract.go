package workflows

import (
	"time"

	"github.com/sandboxcore/sandboxcore/internal/eviction"
)

// Eviction wire contract (issue 6; seed "Eviction Policy"; docs/API.md
// "Eviction"). EvictionCronWorkflow, started by a Temporal Schedule, plans per
// host and carries every runtime and workspace action out THROUGH that
// workspace's SessionWorkflow (signal-with-start "evict"), which runs it
// under its mutating lock and reports back by signalling the cron run
// ("eviction_reply").

// EvictionCronWorkflowType is the registered name of the eviction run.
const EvictionCronWorkflowType = "EvictionCronWorkflow"

// EvictionScheduleID is the id of the Temporal Schedule that starts
// EvictionCronWorkflow on the default task queue; workers on another shared
// queue use EvictionScheduleIDFor.
const EvictionScheduleID = "sandbox-eviction"

// EvictionScheduleIDFor returns the schedule id of a shared task queue:
// EvictionScheduleID for DefaultTaskQueue, else EvictionScheduleID + "-" + queue
// (several deployments can share one namespace).
func EvictionScheduleIDFor(taskQueue string) string {
	if taskQueue == "" || taskQueue == DefaultTaskQueue {
		return EvictionScheduleID
	}
	return EvictionScheduleID + "-" + taskQueue
}

// Signals of SessionWorkflow (DESIGN.md "Temporal shape": pin, unpin, evict).
// Send them with signal-with-start (workflow id SessionWorkflowID, task queue
// the shared one, SessionInput{WorkspaceID} only): a session that is not
// running starts, handles the signal and completes.
const (
	// SignalEvict carries an EvictRequest.
	SignalEvict = "evict"
	// SignalPin carries a PinRequest: the workspace is never evicted before Until.
	SignalPin = "pin"
	// SignalUnpin carries a PinRequest (Until ignored): the pin is dropped.
	SignalUnpin = "unpin"
	// SignalEvictionReply is sent by a session to the requesting
	// EvictionCronWorkflow run; it carries an EvictResult.
	SignalEvictionReply = "eviction_reply"
)

// QueryEviction returns a session's EvictionState.
const QueryEviction = "eviction"

// StateEvicted is the SandboxState of a session run that ended because its
// workspace was evicted (the next acquire restores it).
const StateEvicted = "evicted"

// MemoEviction is the memo field of an EvictionCronWorkflow run holding its
// EvictionSummary (shown in the Web UI).
const MemoEviction = "eviction"

// Activity names of eviction (registered by activities.EvictionActivities).
const (
	ActivityEvictionHosts    = "sandbox.EvictionHosts"
	ActivityPlanEviction     = "sandbox.PlanEviction"
	ActivitySignalEvictions  = "sandbox.SignalEvictions"
	ActivityEvictWorkspace   = "sandbox.EvictWorkspace"
	ActivityEvictRuntime     = "sandbox.EvictRuntime"
	ActivityRemoveRepoCaches = "sandbox.RemoveRepoCaches"
	ActivitySetPin           = "sandbox.SetPin"
)

// Defaults of an eviction run.
const (
	// DefaultEvictionReplyTimeout is how long a run waits for the sessions'
	// replies (an eviction waits for a running command to finish first).
	DefaultEvictionReplyTimeout = 15 * time.Minute
	// DefaultEvictionHostTimeout is how long a host's planning activity may
	// wait to be picked up before the host counts as unreachable.
	DefaultEvictionHostTimeout = time.Minute
	// MaxEvictionActionsPerHost caps one host's plan per run (payload size);
	// the rest is planned again by the next run.
	MaxEvictionActionsPerHost = 500
)

// EvictionInput starts an EvictionCronWorkflow run. The schedule passes the
// zero value.
type EvictionInput struct {
	// DryRun: plan only; nothing is stopped, destroyed or evicted.
	DryRun bool `json:"dry_run,omitempty"`
	// Hosts limits the run to these host ids (empty: every live host).
	Hosts []string `json:"hosts,omitempty"`
	// ReplyTimeout overrides DefaultEvictionReplyTimeout.
	ReplyTimeout time.Duration `json:"reply_timeout,omitempty"`
	// HostTimeout overrides DefaultEvictionHostTimeout.
	HostTimeout time.Duration `json:"host_timeout,omitempty"`
}

// EvictRequest is the evict signal's payload.
type EvictRequest struct {
	// RequestID identifies the reply.
	RequestID string `json:"request_id"`
	// ReplyTo is the workflow id to signal the EvictResult to ("" = none).
	ReplyTo string `json:"reply_to,omitempty"`
	// Action is eviction.ActionStopRuntime, ActionDestroyRuntime or ActionEvictWorkspace.
	Action eviction.ActionKind `json:"action"`
	// Tier says why (eviction.Tier), for the record.
	Tier eviction.Tier `json:"tier,omitempty"`
	// AllowUnsaved: the workspace may be evicted although it has unsaved work
	// (which is then saved and verified first). Without it such a workspace
	// is skipped.
	AllowUnsaved bool `json:"allow_unsaved,omitempty"`
	// MinIdle is re-checked when the request runs: the workspace (or runtime)
	// must have been unused at least this long, else it is skipped.
	MinIdle time.Duration `json:"min_idle,omitempty"`
}

// Eviction outcomes (EvictResult.Outcome).
const (
	// OutcomeDone: stopped, destroyed, evicted or removed as asked.
	OutcomeDone = "done"
	// OutcomeSkipped: no longer eligible (used, pinned, gone, …); nothing changed.
	OutcomeSkipped = "skipped"
	// OutcomeBlocked: eligible but could not be carried out safely (the work
	// could not be saved, or the worktree cannot be deleted); it stays intact.
	OutcomeBlocked = "blocked"
	// OutcomeFailed: an error; nothing was deleted that was not saved.
	OutcomeFailed = "failed"
	// OutcomePending: no reply before the run's reply timeout; the session
	// still carries the request out when it can.
	OutcomePending = "pending"
)

// EvictResult is the outcome of one action (the eviction_reply signal's
// payload, and an element of HostEvictionResult.Results).
type EvictResult struct {
	RequestID   string              `json:"request_id,omitempty"`
	Action      eviction.ActionKind `json:"action"`
	Tier        eviction.Tier       `json:"tier,omitempty"`
	ID          string              `json:"id"`
	WorkspaceID string              `json:"workspace_id,omitempty"`
	Outcome     string              `json:"outcome"`
	Reason      string              `json:"reason,omitempty"`
	// FreedBytes is what the action freed on disk.
	FreedBytes int64 `json:"freed_bytes,omitempty"`
	// BackupRef (sandbox.EvictedRef) and PatchPath name the saved work of an
	// evicted workspace that had any (sandbox.WorkspaceBackup); empty for a
	// clean one.
	BackupRef string    `json:"backup_ref,omitempty"`
	PatchPath string    `json:"patch_path,omitempty"`
	At        time.Time `json:"at"`
}

// PinRequest is the pin and unpin signals' payload.
type PinRequest struct {
	// RequestID lets the sender see it applied (EvictionState.LastPinRequest).
	RequestID string `json:"request_id"`
	// Until is the end of the pin (pin only; must be in the future).
	Until *time.Time `json:"until,omitempty"`
}

// EvictionState is the eviction query's result.
type EvictionState struct {
	WorkspaceID string     `json:"workspace_id"`
	PinnedUntil *time.Time `json:"pinned_until,omitempty"`
	// LastPinRequest and PinError describe the last pin or unpin handled.
	LastPinRequest string `json:"last_pin_request,omitempty"`
	PinError       string `json:"pin_error,omitempty"`
	// PinErrorType is PinError's stable error type (docs/API.md "Errors").
	PinErrorType string `json:"pin_error_type,omitempty"`
	// Evicted: this run evicted the workspace.
	Evicted   bool         `json:"evicted"`
	LastEvict *EvictResult `json:"last_evict,omitempty"`
}

// EvictionHostsResult lists the hosts a run plans for.
type EvictionHostsResult struct {
	Hosts []string `json:"hosts"`
}

// PlanEvictionInput is the planning activity's argument (sent to the host's queue).
type PlanEvictionInput struct {
	HostID string `json:"host_id"`
}

// PlanEvictionResult is one host's plan.
type PlanEvictionResult struct {
	Plan   eviction.Plan   `json:"plan"`
	Policy eviction.Policy `json:"policy"`
	// Budget says how the budget was set: "bytes" (SANDBOX_DISK_BUDGET_BYTES,
	// usage = bytes under the data root) or "fraction" (of the filesystem,
	// usage = the filesystem's used bytes).
	Budget string `json:"budget"`
	// Truncated counts actions left to the next run (MaxEvictionActionsPerHost).
	Truncated int `json:"truncated,omitempty"`
	// Notes lists workspaces or caches that could not be inspected (treated as holding work).
	Notes []string `json:"notes,omitempty"`
}

// SignalEvictionsInput asks for signal-with-start of each request.
type SignalEvictionsInput struct {
	// TaskQueue is where a session that is not running starts (the shared queue).
	TaskQueue string           `json:"task_queue"`
	Requests  []SessionRequest `json:"requests"`
}

// SessionRequest is one evict signal to one workspace's session.
type SessionRequest struct {
	WorkspaceID string       `json:"workspace_id"`
	Request     EvictRequest `json:"request"`
}

// SignalEvictionsResult maps the request ids whose signal could not be sent to the error.
type SignalEvictionsResult struct {
	Failed map[string]string `json:"failed,omitempty"`
}

// EvictActivityInput is the argument of the per-workspace eviction
// activities (run by the session, on the workspace's host).
type EvictActivityInput struct {
	WorkspaceID string       `json:"workspace_id"`
	Request     EvictRequest `json:"request"`
}

// RemoveRepoCachesInput asks a host to remove planned repo caches, in
// order, while its usage stays above LowBytes (0: no such check).
type RemoveRepoCachesInput struct {
	HostID   string            `json:"host_id"`
	Actions  []eviction.Action `json:"actions"`
	LowBytes int64             `json:"low_bytes"`
}

// RemoveRepoCachesResult holds one result per planned cache.
type RemoveRepoCachesResult struct {
	Results []EvictResult `json:"results"`
}

// SetPinInput sets (Until non-nil) or clears a workspace's pin in the store.
type SetPinInput struct {
	WorkspaceID string     `json:"workspace_id"`
	Until       *time.Time `json:"until,omitempty"`
}

// HostEvictionResult is one host's part of a run.
type HostEvictionResult struct {
	HostID string `json:"host_id"`
	// Unreachable: no worker of the host picked the planning activity up in time.
	Unreachable bool                `json:"unreachable,omitempty"`
	Error       string              `json:"error,omitempty"`
	Plan        *PlanEvictionResult `json:"plan,omitempty"`
	Results     []EvictResult       `json:"results,omitempty"`
}

// EvictionRunResult is an EvictionCronWorkflow run's result.
type EvictionRunResult struct {
	WorkflowID string               `json:"workflow_id"`
	DryRun     bool                 `json:"dry_run"`
	StartedAt  time.Time            `json:"started_at"`
	FinishedAt time.Time            `json:"finished_at"`
	Hosts      []HostEvictionResult `json:"hosts"`
	Summary    EvictionSummary      `json:"summary"`
}

// EvictionSummary counts a run's outcomes (the run's memo field MemoEviction).
type EvictionSummary struct {
	Hosts       int   `json:"hosts"`
	Unreachable int   `json:"unreachable"`
	Planned     int   `json:"planned"`
	Stopped     int   `json:"stopped"`
	Destroyed   int   `json:"destroyed"`
	Evicted     int   `json:"evicted"`
	CachesFreed int   `json:"caches_removed"`
	Skipped     int   `json:"skipped"`
	Blocked     int   `json:"blocked"`
	Failed      int   `json:"failed"`
	Pending     int   `json:"pending"`
	FreedBytes  int64 `json:"freed_bytes"`
}

// Summarize counts the results of every host.
func (r *EvictionRunResult) Summarize() {
	s := EvictionSummary{Hosts: len(r.Hosts)}
	for _, h := range r.Hosts {
		if h.Unreachable {
			s.Unreachable++
		}
		if h.Plan != nil {
			s.Planned += len(h.Plan.Plan.Actions)
		}
		for _, res := range h.Results {
			s.FreedBytes += res.FreedBytes
			switch res.Outcome {
			case OutcomeDone:
				switch res.Action {
				case eviction.ActionStopRuntime:
					s.Stopped++
				case eviction.ActionDestroyRuntime:
					s.Destroyed++
				case eviction.ActionEvictWorkspace:
					s.Evicted++
				case eviction.ActionRemoveRepoCache:
					s.CachesFreed++
				}
			case OutcomeSkipped:
				s.Skipped++
			case OutcomeBlocked:
				s.Blocked++
			case OutcomeFailed:
				s.Failed++
			case OutcomePending:
				s.Pending++
			}
		}
	}
	r.Summary = s
}
