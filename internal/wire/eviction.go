package wire

import (
	"time"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// EvictionHostsResult lists the hosts a run plans for.
type EvictionHostsResult struct {
	Hosts []string `json:"hosts"`
}

// PlanEvictionInput is the planning activity's argument (sent to the host's queue).
type PlanEvictionInput struct {
	HostID string `json:"host_id"`
	// Actions keeps only these action kinds in the plan (empty: all;
	// sandboxapi.EvictionInput.Actions).
	Actions []sandboxapi.EvictionActionKind `json:"actions,omitempty"`
}

// SignalEvictionsInput asks for signal-with-start of each request.
type SignalEvictionsInput struct {
	// TaskQueue is where a session that is not running starts (the shared queue).
	TaskQueue string           `json:"task_queue"`
	Requests  []SessionRequest `json:"requests"`
}

// SessionRequest is one evict signal to one workspace's session.
type SessionRequest struct {
	WorkspaceID string                  `json:"workspace_id"`
	Request     sandboxapi.EvictRequest `json:"request"`
}

// SignalEvictionsResult maps the request ids whose signal could not be sent to the error.
type SignalEvictionsResult struct {
	Failed map[string]string `json:"failed,omitempty"`
}

// EvictActivityInput is the argument of the per-workspace eviction
// activities (run by the session, on the workspace's host).
type EvictActivityInput struct {
	WorkspaceID string                  `json:"workspace_id"`
	Request     sandboxapi.EvictRequest `json:"request"`
}

// RemoveRepoCachesInput asks a host to remove planned repo caches, in
// order, while its usage stays above LowBytes (0: no such check).
type RemoveRepoCachesInput struct {
	HostID   string                      `json:"host_id"`
	Actions  []sandboxapi.EvictionAction `json:"actions"`
	LowBytes int64                       `json:"low_bytes"`
}

// RemoveRepoCachesResult holds one result per planned cache.
type RemoveRepoCachesResult struct {
	Results []sandboxapi.EvictResult `json:"results"`
}

// RemoveDependencyCachesInput asks a host to remove planned dependency
// caches (sandboxapi.EvictionRemoveDependencyCache actions), in order, while
// its usage stays above LowBytes (0: no such check): the shape of
// RemoveRepoCachesInput.
type RemoveDependencyCachesInput = RemoveRepoCachesInput

// RemoveDependencyCachesResult holds one result per planned cache.
type RemoveDependencyCachesResult = RemoveRepoCachesResult

// DeleteOrphanRuntimesInput asks a host to delete the planned orphan
// runtimes (sandboxapi.EvictionDeleteOrphanRuntime actions), each after
// checking again that its workspace does not exist.
type DeleteOrphanRuntimesInput struct {
	HostID  string                      `json:"host_id"`
	Actions []sandboxapi.EvictionAction `json:"actions"`
}

// DeleteOrphanRuntimesResult holds one result per planned orphan.
type DeleteOrphanRuntimesResult struct {
	Results []sandboxapi.EvictResult `json:"results"`
}

// SetPinInput sets (Until non-nil) or clears a workspace's pin in the store.
type SetPinInput struct {
	WorkspaceID string     `json:"workspace_id"`
	Until       *time.Time `json:"until,omitempty"`
}
