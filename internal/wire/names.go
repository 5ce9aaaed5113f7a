// Package wire holds the worker-private half of sandboxcore's Temporal
// contract: activity names and payloads, the state a SessionWorkflow run
// carries across continue-as-new, and the strict decoding every update,
// signal and workflow argument goes through. Nothing here is sent or read by
// clients; the public half is package sandboxapi (docs/API.md).
package wire

import (
	"strings"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// SessionActivityPrefix begins the name of every session activity: package
// activities registers its Activities by method set, each method under this
// prefix and its own name ("sandbox.ReadFile"). Those names are recorded in
// workflow histories, so a method is never renamed.
const SessionActivityPrefix = "sandbox."

// OpActivity returns the name of the activity serving the update named
// update when the operation table does not name one: SessionActivityPrefix
// and the update's name in Go's CamelCase, with Go's initialisms
// ("read_file" → "sandbox.ReadFile", "preview_url" → "sandbox.PreviewURL").
// The activities.Activities method of that name serves it.
func OpActivity(update string) string {
	return SessionActivityPrefix + GoName(update)
}

// GoName is an update name in Go's CamelCase, with Go's initialisms:
// "create_pull_request" → "CreatePullRequest", "preview_url" → "PreviewURL".
// It names the update's activity method (OpActivity) and its
// sandboxclient method.
func GoName(update string) string {
	var b strings.Builder
	for _, w := range strings.Split(update, "_") {
		switch w {
		case "":
		case "url", "id":
			b.WriteString(strings.ToUpper(w))
		default:
			b.WriteString(strings.ToUpper(w[:1]) + w[1:])
		}
	}
	return b.String()
}

// Activity names of eviction (registered by activities.EvictionActivities).
const (
	ActivityEvictionHosts    = "sandbox.EvictionHosts"
	ActivityPlanEviction     = "sandbox.PlanEviction"
	ActivitySignalEvictions  = "sandbox.SignalEvictions"
	ActivityEvictWorkspace   = "sandbox.EvictWorkspace"
	ActivityEvictRuntime     = "sandbox.EvictRuntime"
	ActivityRemoveRepoCaches = "sandbox.RemoveRepoCaches"
	ActivitySetPin           = "sandbox.SetPin"
	// ActivityDeleteOrphanRuntimes deletes a host's orphan remote runtimes.
	ActivityDeleteOrphanRuntimes = "sandbox.DeleteOrphanRuntimes"
	// ActivityRemoveDependencyCaches removes a host's planned dependency caches.
	ActivityRemoveDependencyCaches = "sandbox.RemoveDependencyCaches"
)

// Activity names of TaskFanoutWorkflow (registered by activities.Fanout on
// the shared task queue: they only talk to Temporal, never to files).
const (
	ActivityFanoutPrepare     = "fanout.Prepare"
	ActivityFanoutAcquireTask = "fanout.AcquireTask"
	ActivityFanoutRunScript   = "fanout.RunScript"
	ActivityFanoutFinishTask  = "fanout.FinishTask"
	ActivityFanoutMerge       = "fanout.Merge"
)

// HostTaskQueue returns "sandbox-host-<hostID>".
func HostTaskQueue(hostID string) string { return sandboxapi.HostTaskQueuePrefix + hostID }

// Names of session activities that code names outside the operation
// table's generic calls (registered by package activities, by method set;
// an operation served by .call needs no constant: wire.OpActivity).
const (
	ActivityLocate         = "sandbox.Locate"
	ActivityAcquire        = "sandbox.Acquire"
	ActivityExec           = sandboxapi.ExecActivityType
	ActivityEditFile       = "sandbox.EditFile"
	ActivityHibernate      = "sandbox.Hibernate"
	ActivityDestroyRuntime = "sandbox.DestroyRuntime"
	// ActivityMergeBranches serves the merge_branches update.
	ActivityMergeBranches = "sandbox.MergeBranches"
	// ActivityOverlaps serves the overlaps update (docs/API.md "Overlaps").
	ActivityOverlaps = "sandbox.Overlaps"
)

// Activity names of the lifecycle operations (docs/API.md "Fork",
// "Destroy", "Cleanup"). The first four are session activities
// (activities.Activities); ForkAcquire and the Cleanup ones drive sessions
// through the Temporal client (activities.LifecycleActivities).
const (
	ActivityForkPrepare      = "sandbox.ForkPrepare"
	ActivityDestroy          = "sandbox.Destroy"
	ActivityRestoreDestroyed = "sandbox.RestoreDestroyed"
	ActivityCleanupList      = "sandbox.CleanupList"
	ActivityForkAcquire      = "sandbox.ForkAcquire"
	ActivityCleanupSessions  = "sandbox.CleanupSessions"
	ActivityCleanupDestroy   = "sandbox.CleanupDestroy"
	// ActivityFanoutForkTask forks a fan-out task from the conversation
	// (FanoutInput.FromFork; registered by activities.Fanout).
	ActivityFanoutForkTask = "fanout.ForkTask"
)

// Activity names of prepared trees (docs/RUNTIMES.md "Prepared trees"): a
// setup run restores one in place of its commands, or saves its output as
// one. Both take PreparedTreeInput and return sandboxapi.PreparedTree.
const (
	ActivityRestorePreparedTree = "sandbox.RestorePreparedTree"
	ActivitySavePreparedTree    = "sandbox.SavePreparedTree"
)

// PreparedTreeInput names the workspace whose setup run restores or saves a
// prepared tree, and the lockfiles' hash the run was planned with
// (SetupState.LockfilesHash), which keys the tree.
type PreparedTreeInput struct {
	WorkspaceID   string `json:"workspace_id"`
	LockfilesHash string `json:"lockfiles_hash"`
}
