package sandboxapi

import "time"

// The eviction wire contract (docs/API.md "Eviction"). EvictionCronWorkflow,
// started by a Temporal Schedule, plans per host and carries every runtime
// and workspace action out through that workspace's SessionWorkflow
// (signal-with-start "evict"), which runs it under its mutating lock and
// reports back by signalling the cron run ("eviction_reply").

// EvictionActionKind is what an eviction action does.
type EvictionActionKind string

// Eviction action kinds (EvictRequest.Action, EvictionAction.Kind).
const (
	EvictionStopRuntime     EvictionActionKind = "stop_runtime"
	EvictionDestroyRuntime  EvictionActionKind = "destroy_runtime"
	EvictionEvictWorkspace  EvictionActionKind = "evict_workspace"
	EvictionRemoveRepoCache EvictionActionKind = "remove_repo_cache"
	// EvictionDeleteOrphanRuntime deletes a remote runtime (a Daytona
	// sandbox labelled managed-by=sandboxcore by this host) whose workspace
	// no longer exists; carried out by the host, not by a session.
	EvictionDeleteOrphanRuntime EvictionActionKind = "delete_orphan_runtime"
	// EvictionRemoveDependencyCache deletes a dependency cache
	// ("<scope>/<key>", docs/RUNTIMES.md "Dependency caches") no runtime was
	// given for a while; carried out by the host, not by a session.
	EvictionRemoveDependencyCache EvictionActionKind = "remove_dependency_cache"
)

// EvictionActionKinds lists every action kind, for documentation and schemas.
var EvictionActionKinds = []EvictionActionKind{EvictionStopRuntime, EvictionDestroyRuntime, EvictionEvictWorkspace, EvictionRemoveRepoCache, EvictionDeleteOrphanRuntime, EvictionRemoveDependencyCache}

// Valid reports whether k is one of EvictionActionKinds.
func (k EvictionActionKind) Valid() bool {
	for _, v := range EvictionActionKinds {
		if k == v {
			return true
		}
	}
	return false
}

// EvictionTier names why an action is planned (docs/API.md "Eviction": the
// plan, in order).
type EvictionTier string

// Eviction tiers in plan order.
const (
	// TierRuntimeOrphan: a remote runtime whose workspace no longer exists.
	TierRuntimeOrphan  EvictionTier = "runtime-orphan"
	TierRuntimeIdle    EvictionTier = "runtime-idle"
	TierRuntimeStopped EvictionTier = "runtime-stopped"
	TierCleanAnalysis  EvictionTier = "clean-analysis-ttl"
	TierCleanTask      EvictionTier = "clean-task-ttl"
	TierCleanEdit      EvictionTier = "clean-edit-ttl"
	TierDirtyTask      EvictionTier = "dirty-task-pressure"
	TierDirtyEdit      EvictionTier = "dirty-edit-severe"
	// TierDependencyCacheLRU: dependency caches under pressure, before repo
	// caches (a package registry is nearer than a clone).
	TierDependencyCacheLRU EvictionTier = "dependency-cache-lru"
	TierRepoCacheLRU       EvictionTier = "repo-cache-lru"
)

// EvictionTiers lists every tier in plan order.
var EvictionTiers = []EvictionTier{TierRuntimeOrphan, TierRuntimeIdle, TierRuntimeStopped, TierCleanAnalysis, TierCleanTask, TierCleanEdit, TierDirtyTask, TierDirtyEdit, TierDependencyCacheLRU, TierRepoCacheLRU}

// EvictionPolicy holds the thresholds a host planned with. Durations are in
// nanoseconds on the wire; water marks are fractions of the budget in (0, 1].
type EvictionPolicy struct {
	RuntimeIdleStop       time.Duration `json:"runtime_idle_stop"`
	RuntimeStoppedDestroy time.Duration `json:"runtime_stopped_destroy"`
	AnalysisTTL           time.Duration `json:"analysis_ttl"`
	TaskTTL               time.Duration `json:"task_ttl"`
	EditTTL               time.Duration `json:"edit_ttl"`
	PressureMinIdle       time.Duration `json:"pressure_min_idle"`
	HighWater             float64       `json:"high_water"`
	LowWater              float64       `json:"low_water"`
	SevereWater           float64       `json:"severe_water"`
}

// EvictionUsage is a host's disk usage against its budget, in bytes (a zero
// budget: never any pressure).
type EvictionUsage struct {
	UsedBytes   int64 `json:"used_bytes"`
	BudgetBytes int64 `json:"budget_bytes"`
	// RepoCacheBytes and WorkspaceBytes are the bytes of the host's repo
	// caches and of its workspaces' worktrees (part of UsedBytes), as the
	// planner measured them; absent from plans made before they were reported.
	RepoCacheBytes int64 `json:"repo_cache_bytes,omitempty"`
	WorkspaceBytes int64 `json:"workspace_bytes,omitempty"`
	// DependencyCacheBytes are the bytes of the host's dependency caches
	// (part of UsedBytes); absent when it keeps none.
	DependencyCacheBytes int64 `json:"dependency_cache_bytes,omitempty"`
}

// EvictionAction is one step of a host's plan.
type EvictionAction struct {
	Kind EvictionActionKind `json:"kind"`
	Tier EvictionTier       `json:"tier"`
	// ID is the runtime id, workspace id, repo cache id or dependency
	// cache id ("<scope>/<key>").
	ID string `json:"id"`
	// WorkspaceID is the workspace whose session carries the action out;
	// empty for repo and dependency caches.
	WorkspaceID string        `json:"workspace_id,omitempty"`
	Mode        WorkspaceMode `json:"mode,omitempty"`
	// SaveWork: the workspace has unsaved work, saved and verified first.
	SaveWork bool `json:"save_work,omitempty"`
	// MinIdle (nanoseconds) is re-checked when the action runs.
	MinIdle time.Duration `json:"min_idle"`
	// LastUsedAt is the target's last use as the plan saw it.
	LastUsedAt time.Time `json:"last_used_at"`
	// Bytes is what the action is expected to free.
	Bytes int64 `json:"bytes"`
	// ProjectedUsedBytes is the usage expected after this and every earlier action.
	ProjectedUsedBytes int64 `json:"projected_used_bytes"`
}

// EvictionHeld is a workspace or repo cache the plan deliberately keeps
// although an age or pressure rule would have picked it.
type EvictionHeld struct {
	ID string `json:"id"`
	// Kind is "workspace" or "repo_cache".
	Kind   string `json:"kind"`
	Reason string `json:"reason"`
}

// EvictionPlan is one host's ordered plan.
type EvictionPlan struct {
	HostID string        `json:"host_id"`
	Now    time.Time     `json:"now"`
	Usage  EvictionUsage `json:"usage"`
	// Pressure is "none", "high" or "severe".
	Pressure string `json:"pressure"`
	// HighBytes, LowBytes and SevereBytes are the water marks in bytes (0 without a budget).
	HighBytes   int64            `json:"high_bytes"`
	LowBytes    int64            `json:"low_bytes"`
	SevereBytes int64            `json:"severe_bytes"`
	Actions     []EvictionAction `json:"actions"`
	// ProjectedUsedBytes is the usage expected after every action.
	ProjectedUsedBytes int64          `json:"projected_used_bytes"`
	Held               []EvictionHeld `json:"held,omitempty"`
}

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

// Signals of SessionWorkflow (docs/API.md "Eviction"). Send them with
// signal-with-start (workflow id SessionWorkflowID, task queue the shared
// one, SessionInput{WorkspaceID} only): a session that is not running starts
// and handles the signal.
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

// MemoEviction is the memo field of an EvictionCronWorkflow run holding its
// EvictionSummary (shown in the Web UI).
const MemoEviction = "eviction"

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
	// Actions limits the run to these action kinds (EvictionActionKinds;
	// empty: all), e.g. [delete_orphan_runtime] for `sandboxctl runtimes
	// gc`. An unknown kind fails every host's plan with InvalidArgument.
	Actions []EvictionActionKind `json:"actions,omitempty"`
}

// EvictRequest is the evict signal's payload.
type EvictRequest struct {
	// RequestID identifies the reply.
	RequestID string `json:"request_id"`
	// ReplyTo is the workflow id to signal the EvictResult to ("" = none).
	ReplyTo string `json:"reply_to,omitempty"`
	// Action is EvictionStopRuntime, EvictionDestroyRuntime or EvictionEvictWorkspace.
	Action EvictionActionKind `json:"action"`
	// Tier says why (EvictionTier), for the record.
	Tier EvictionTier `json:"tier,omitempty"`
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
	RequestID   string             `json:"request_id,omitempty"`
	Action      EvictionActionKind `json:"action"`
	Tier        EvictionTier       `json:"tier,omitempty"`
	ID          string             `json:"id"`
	WorkspaceID string             `json:"workspace_id,omitempty"`
	Outcome     string             `json:"outcome"`
	Reason      string             `json:"reason,omitempty"`
	// FreedBytes is what the action freed on disk.
	FreedBytes int64 `json:"freed_bytes,omitempty"`
	// BackupRef (EvictedRef) and PatchPath name the saved work of an
	// evicted workspace that had any (WorkspaceBackup); empty for a
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

// PlanEvictionResult is one host's plan.
type PlanEvictionResult struct {
	Plan   EvictionPlan   `json:"plan"`
	Policy EvictionPolicy `json:"policy"`
	// Budget says how the budget was set: "bytes" (SANDBOX_DISK_BUDGET_BYTES,
	// usage = bytes under the data root) or "fraction" (of the filesystem,
	// usage = the filesystem's used bytes).
	Budget string `json:"budget"`
	// Truncated counts actions left to the next run (MaxEvictionActionsPerHost).
	Truncated int `json:"truncated,omitempty"`
	// Notes lists workspaces or caches that could not be inspected (treated as holding work).
	Notes []string `json:"notes,omitempty"`
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
	Hosts       int `json:"hosts"`
	Unreachable int `json:"unreachable"`
	Planned     int `json:"planned"`
	Stopped     int `json:"stopped"`
	Destroyed   int `json:"destroyed"`
	Evicted     int `json:"evicted"`
	CachesFreed int `json:"caches_removed"`
	// OrphansDeleted counts remote runtimes deleted because their workspace
	// no longer exists.
	OrphansDeleted int `json:"orphans_deleted"`
	// DependencyCachesRemoved counts dependency caches removed
	// (remove_dependency_cache).
	DependencyCachesRemoved int   `json:"dependency_caches_removed,omitempty"`
	Skipped                 int   `json:"skipped"`
	Blocked                 int   `json:"blocked"`
	Failed                  int   `json:"failed"`
	Pending                 int   `json:"pending"`
	FreedBytes              int64 `json:"freed_bytes"`
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
				case EvictionStopRuntime:
					s.Stopped++
				case EvictionDestroyRuntime:
					s.Destroyed++
				case EvictionEvictWorkspace:
					s.Evicted++
				case EvictionRemoveRepoCache:
					s.CachesFreed++
				case EvictionDeleteOrphanRuntime:
					s.OrphansDeleted++
				case EvictionRemoveDependencyCache:
					s.DependencyCachesRemoved++
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
