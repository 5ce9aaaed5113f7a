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
	ActivityListDir        = "sandbox.ListDir"
	ActivitySearch         = "sandbox.Search"
	ActivityStatus         = "sandbox.Status"
	ActivityDiff           = "sandbox.Diff"
	ActivityCommit         = "sandbox.Commit"
	ActivityHibernate      = "sandbox.Hibernate"
	ActivityDestroyRuntime = "sandbox.DestroyRuntime"
)

// Activity names of the remote side (issue 5).
const (
	ActivityPush              = "sandbox.Push"
	ActivityCreatePullRequest = "sandbox.CreatePullRequest"
)

// ActivityMergeBranches serves the merge_branches update (issue 7).
const ActivityMergeBranches = "sandbox.MergeBranches"

// ActivityPreviewURL serves the preview_url update (docs/API.md "Preview URLs").
const ActivityPreviewURL = "sandbox.PreviewURL"
