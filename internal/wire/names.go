// Package wire holds the worker-private half of sandboxcore's Temporal
// contract: activity names and payloads, the state a SessionWorkflow run
// carries across continue-as-new, and the strict decoding every update,
// signal and workflow argument goes through. Nothing here is sent or read by
// clients; the public half is package sandboxapi (docs/API.md).
package wire

import "github.com/sandboxcore/sandboxcore/sandboxapi"

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

// Activity names (registered by package activities).
const (
	ActivityLocate         = "sandbox.Locate"
	ActivityAcquire        = "sandbox.Acquire"
	ActivityExec           = sandboxapi.ExecActivityType
	ActivityReadFile       = "sandbox.ReadFile"
	ActivityWriteFile      = "sandbox.WriteFile"
	ActivityEditFile       = "sandbox.EditFile"
	ActivityListDir        = "sandbox.ListDir"
	ActivitySearch         = "sandbox.Search"
	ActivityStatus         = "sandbox.Status"
	ActivityDiff           = "sandbox.Diff"
	ActivityLog            = "sandbox.Log"
	ActivityReadOutput     = "sandbox.ReadOutput"
	ActivityCommit         = "sandbox.Commit"
	ActivityHibernate      = "sandbox.Hibernate"
	ActivityDestroyRuntime = "sandbox.DestroyRuntime"
)

// Activity names of the remote side.
const (
	ActivityPush              = "sandbox.Push"
	ActivityCreatePullRequest = "sandbox.CreatePullRequest"
)

// ActivityMergeBranches serves the merge_branches update.
const ActivityMergeBranches = "sandbox.MergeBranches"

// Activity names of the lifecycle operations (docs/API.md "Checkpoints",
// "Fork", "Destroy", "Cleanup"). The first six are session activities
// (activities.Activities.ByName); ForkAcquire and the Cleanup ones drive
// sessions through the Temporal client (activities.LifecycleActivities).
const (
	ActivityCheckpoint       = "sandbox.Checkpoint"
	ActivityCheckpoints      = "sandbox.Checkpoints"
	ActivityRollback         = "sandbox.Rollback"
	ActivityForkPrepare      = "sandbox.ForkPrepare"
	ActivityDestroy          = "sandbox.Destroy"
	ActivityRestoreDestroyed = "sandbox.RestoreDestroyed"
	ActivityForkAcquire      = "sandbox.ForkAcquire"
	ActivityCleanupSessions  = "sandbox.CleanupSessions"
	ActivityCleanupList      = "sandbox.CleanupList"
	ActivityCleanupDestroy   = "sandbox.CleanupDestroy"
	// ActivityFanoutForkTask forks a fan-out task from the conversation
	// (FanoutInput.FromFork; registered by activities.Fanout).
	ActivityFanoutForkTask = "fanout.ForkTask"
)

// ActivityPreviewURL serves the preview_url update (docs/API.md "Preview URLs").
const ActivityPreviewURL = "sandbox.PreviewURL"

// ActivityOverlaps serves the overlaps update (docs/API.md "Overlaps").
const ActivityOverlaps = "sandbox.Overlaps"

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
