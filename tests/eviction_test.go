package tests

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/sandboxcore/sandboxcore/internal/depcache"
	"github.com/sandboxcore/sandboxcore/internal/eviction"
	"github.com/sandboxcore/sandboxcore/internal/gittest"
	"github.com/sandboxcore/sandboxcore/internal/hostworker"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
	"github.com/sandboxcore/sandboxcore/sandboxclient"
	"github.com/sandboxcore/sandboxcore/workflows"
)

// withEviction configures eviction on a test host: no schedule (runs are
// started by the test), then f.
func withEviction(f func(*hostworker.EvictionConfig)) hostOption {
	return func(c *hostworker.Config) {
		c.Eviction.Interval = 0
		f(&c.Eviction)
	}
}

// aggressive makes every rule's age threshold 1 ns: whatever a tier allows goes now.
func aggressive(budget int64) hostOption {
	return withEviction(func(e *hostworker.EvictionConfig) {
		p := &e.Policy
		p.RuntimeIdleStop, p.RuntimeStoppedDestroy = time.Nanosecond, time.Nanosecond
		p.AnalysisTTL, p.TaskTTL, p.EditTTL, p.PressureMinIdle = time.Nanosecond, time.Nanosecond, time.Nanosecond, time.Nanosecond
		e.DiskBudgetBytes = budget
	})
}

// tinyBudget is a 1-byte budget: always severe pressure.
const tinyBudget = 1

// hugeBudget is never under pressure.
const hugeBudget = 1 << 60

type evEnv struct {
	t    *testing.T
	h    *testHost
	user string
	up   string
	url  string
}

func newEvEnv(t *testing.T, name string, opts ...hostOption) *evEnv {
	up := gittest.InitRepo(t, filepath.Join(t.TempDir(), "team", "project"), "trunk")
	return &evEnv{t: t, h: startHost(t, name, opts...), user: uniq(t, "u"), up: up, url: gittest.FileURL(up)}
}

func (e *evEnv) acquire(mode sandboxapi.WorkspaceMode, scope string) (*sandboxclient.Session, sandboxapi.Handle) {
	e.t.Helper()
	req := sandboxapi.WorkspaceRequest{UserID: e.user, ProjectID: "p", RepoURL: e.url, Mode: mode}
	switch mode {
	case sandboxapi.ModeEdit:
		req.ConversationID = scope
	case sandboxapi.ModeTask:
		req.TaskID = scope
	}
	s, hd, err := e.h.client.Acquire(ctxFor(e.t, time.Minute), req)
	require.NoError(e.t, err)
	return s, hd
}

func (e *evEnv) run(dry bool) sandboxapi.EvictionRunResult {
	e.t.Helper()
	res, err := e.h.client.RunEviction(ctxFor(e.t, 3*time.Minute), sandboxapi.EvictionInput{DryRun: dry})
	require.NoError(e.t, err)
	require.Len(e.t, res.Hosts, 1, "%+v", res.Hosts)
	require.Equal(e.t, e.h.Config.HostID, res.Hosts[0].HostID)
	require.NotNil(e.t, res.Hosts[0].Plan, res.Hosts[0].Error)
	return res
}

func (e *evEnv) bare(hd sandboxapi.Handle) string {
	return filepath.Join(filepath.Dir(filepath.Dir(hd.LocalPath)), ".bare")
}

func (e *evEnv) row(id string) sandboxapi.Workspace {
	e.t.Helper()
	ws, err := e.h.Store.GetWorkspace(context.Background(), id)
	require.NoError(e.t, err)
	return ws
}

func resultsByID(res sandboxapi.EvictionRunResult) map[string]sandboxapi.EvictResult {
	out := map[string]sandboxapi.EvictResult{}
	for _, h := range res.Hosts {
		for _, r := range h.Results {
			out[string(r.Action)+":"+r.ID] = r
		}
	}
	return out
}

type plannedAction struct {
	Kind eviction.ActionKind
	Tier eviction.Tier
	ID   string
}

func planOf(res sandboxapi.EvictionRunResult) []plannedAction {
	var out []plannedAction
	for _, a := range res.Hosts[0].Plan.Plan.Actions {
		out = append(out, plannedAction{a.Kind, a.Tier, a.ID})
	}
	return out
}

func heldOf(res sandboxapi.EvictionRunResult) map[string]string {
	out := map[string]string{}
	for _, h := range res.Hosts[0].Plan.Plan.Held {
		out[h.ID] = h.Reason
	}
	return out
}

// fileInfo is one worktree entry: type, permission bits, bytes (or link target).
type fileInfo struct {
	Kind    string
	Perm    fs.FileMode
	Content string
}

// worktreeSnapshot lists every file and symlink of a worktree but .git.
func worktreeSnapshot(t *testing.T, dir string) map[string]fileInfo {
	t.Helper()
	out := map[string]fileInfo{}
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		require.NoError(t, err)
		rel, _ := filepath.Rel(dir, p)
		if rel == ".git" {
			return nil
		}
		fi, err := os.Lstat(p)
		require.NoError(t, err)
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			require.NoError(t, err)
			out[rel] = fileInfo{"symlink", 0, target}
		case fi.Mode().IsRegular():
			data, err := os.ReadFile(p)
			require.NoError(t, err)
			out[rel] = fileInfo{"file", fi.Mode().Perm(), string(data)}
		}
		return nil
	}))
	return out
}

func branchLog(t *testing.T, bare, branch string) string {
	return gittest.Git(t, bare, "log", "--format=%H %T %P", "refs/heads/"+branch)
}

func TestEvictionTiersInOrderUnderSmallBudget(t *testing.T) {
	e := newEvEnv(t, "evtiers", aggressive(tinyBudget))
	ctx := ctxFor(t, 5*time.Minute)

	sAna, hAna := e.acquire(sandboxapi.ModeAnalysis, "")
	_, err := sAna.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"true"}}) // a running runtime
	require.NoError(t, err)
	_, hTaskClean := e.acquire(sandboxapi.ModeTask, "t-clean")
	_, hEditClean := e.acquire(sandboxapi.ModeEdit, "c-clean")
	sTaskDirty, hTaskDirty := e.acquire(sandboxapi.ModeTask, "t-dirty")
	require.NoError(t, sTaskDirty.WriteFile(ctx, "task-notes.txt", []byte("untracked work\n"), 0))
	sEditDirty, hEditDirty := e.acquire(sandboxapi.ModeEdit, "c-dirty")
	require.NoError(t, sEditDirty.WriteFile(ctx, "README.md", []byte("edited\n"), 0))
	sPinned, hPinned := e.acquire(sandboxapi.ModeEdit, "c-pinned")
	require.NoError(t, sPinned.WriteFile(ctx, "pinned.txt", []byte("keep me\n"), 0))
	_, err = sPinned.Pin(ctx, time.Now().Add(time.Hour))
	require.NoError(t, err)

	// A second repository whose only workspace is gone: its cache is free to go.
	upB := gittest.InitRepo(t, filepath.Join(t.TempDir(), "team", "other"), "trunk")
	sB, hB, err := e.h.client.Acquire(ctx, sandboxapi.WorkspaceRequest{UserID: e.user, ProjectID: "p-other", RepoURL: gittest.FileURL(upB), Mode: sandboxapi.ModeAnalysis})
	require.NoError(t, err)
	_, err = sB.Release(ctx, true)
	require.NoError(t, err)
	waitClosed(t, hB.WorkflowID, 30*time.Second)
	require.NoError(t, e.h.Activities.Workspaces.Remove(ctx, e.row(hB.WorkspaceID)))
	require.NoError(t, e.h.Store.DeleteWorkspace(ctx, hB.WorkspaceID))
	rowB := e.row(hEditClean.WorkspaceID).RepoCacheID
	cacheB := sandbox.RepoCacheIDFor(hB.HostID, hB.Repo)

	depCaches := e.h.Activities.DepCaches
	depCache := string(depCaches.Scope) + "/" + depcache.Key(depCaches.Scope, e.row(hAna.WorkspaceID))
	depDir := depCaches.Dir(e.row(hAna.WorkspaceID))
	require.DirExists(t, depDir, "a command's runtime got the dependency cache")

	dry := e.run(true)
	assert.Equal(t, string(eviction.PressureSevere), dry.Hosts[0].Plan.Plan.Pressure)
	assert.Equal(t, []plannedAction{
		{eviction.ActionStopRuntime, eviction.TierRuntimeIdle, sandboxapi.RuntimeIDFor(hAna.WorkspaceID)},
		{eviction.ActionEvictWorkspace, eviction.TierCleanAnalysis, hAna.WorkspaceID},
		{eviction.ActionEvictWorkspace, eviction.TierCleanTask, hTaskClean.WorkspaceID},
		{eviction.ActionEvictWorkspace, eviction.TierCleanEdit, hEditClean.WorkspaceID},
		{eviction.ActionEvictWorkspace, eviction.TierDirtyTask, hTaskDirty.WorkspaceID},
		{eviction.ActionEvictWorkspace, eviction.TierDirtyEdit, hEditDirty.WorkspaceID},
		// The analysis workspace's command got the user's dependency cache of the repository.
		{eviction.ActionRemoveDependencyCache, eviction.TierDependencyCacheLRU, depCache},
		{eviction.ActionRemoveRepoCache, eviction.TierRepoCacheLRU, cacheB},
	}, planOf(dry), "tiers in the documented order")
	held := heldOf(dry)
	assert.Contains(t, held[hPinned.WorkspaceID], "pinned until")
	assert.Equal(t, "used by workspaces", held[rowB])
	assert.Empty(t, dry.Hosts[0].Results, "a dry run changes nothing")
	assert.DirExists(t, hAna.LocalPath)
	assert.DirExists(t, hEditDirty.LocalPath)

	res := e.run(false)
	got := resultsByID(res)
	for _, a := range planOf(res) {
		r := got[string(a.Kind)+":"+a.ID]
		assert.Equal(t, sandboxapi.OutcomeDone, r.Outcome, "%s %s: %s", a.Kind, a.ID, r.Reason)
	}
	s := res.Summary
	assert.Equal(t, 1, s.Stopped)
	assert.Equal(t, 5, s.Evicted)
	assert.Equal(t, 1, s.CachesFreed)
	assert.Equal(t, 1, s.DependencyCachesRemoved)
	assert.NoDirExists(t, depDir, "the dependency cache went")
	assert.Zero(t, s.Blocked+s.Failed+s.Pending)
	assert.Positive(t, s.FreedBytes)

	for _, hd := range []sandboxapi.Handle{hAna, hTaskClean, hEditClean, hTaskDirty, hEditDirty} {
		assert.NoDirExists(t, hd.LocalPath, hd.WorkspaceID)
		assert.Equal(t, sandboxapi.WorkspaceEvicted, e.row(hd.WorkspaceID).State)
	}
	assert.DirExists(t, hPinned.LocalPath, "pinned never")
	assert.Equal(t, sandboxapi.WorkspaceReady, e.row(hPinned.WorkspaceID).State)
	assert.DirExists(t, e.bare(hEditClean), "a repo cache with workspaces is never removed")
	assert.NoDirExists(t, e.bare(hB), "the unused repo cache went")
	// Work saved only for the dirty ones.
	for _, hd := range []sandboxapi.Handle{hTaskDirty, hEditDirty} {
		r := got["evict_workspace:"+hd.WorkspaceID]
		assert.Equal(t, sandbox.EvictedRef(hd.WorkspaceID), r.BackupRef)
		assert.FileExists(t, r.PatchPath)
		gittest.Git(t, e.bare(hd), "rev-parse", "--verify", r.BackupRef)
	}
	for _, hd := range []sandboxapi.Handle{hAna, hTaskClean, hEditClean} {
		assert.Empty(t, got["evict_workspace:"+hd.WorkspaceID].BackupRef, "clean: nothing to save")
	}
	// The sessions ran the evictions and ended as "evicted".
	d, err := e.h.client.Session(hEditDirty.WorkspaceID)
	require.NoError(t, err)
	desc, err := d.Describe(ctx)
	require.NoError(t, err)
	assert.Equal(t, sandboxapi.StateEvicted, desc.State)

	// The run's summary is its memo (Web UI).
	dd, err := tc.DescribeWorkflowExecution(ctx, res.WorkflowID, "")
	require.NoError(t, err)
	var memo sandboxapi.EvictionSummary
	require.NoError(t, converter.GetDefaultDataConverter().FromPayload(dd.GetWorkflowExecutionInfo().GetMemo().GetFields()[sandboxapi.MemoEviction], &memo))
	assert.Equal(t, res.Summary, memo)
	require.Eventually(t, func() bool { // visibility is eventually consistent
		last, err := e.h.client.LastEviction(ctx, false)
		return err == nil && last.WorkflowID == res.WorkflowID
	}, 10*time.Second, 100*time.Millisecond, "eviction last shows this run")

	// Nothing left but what is held; the cache whose workspaces are all evicted stays.
	again := e.run(true)
	assert.Empty(t, planOf(again))
	assert.Equal(t, "used by workspaces", heldOf(again)[rowB])

	// Acquiring an evicted workspace brings its work back.
	hd2, err := sTaskDirty.Resume(ctx)
	require.NoError(t, err)
	assert.Equal(t, sandbox.EvictedRef(hTaskDirty.WorkspaceID), hd2.RestoredFrom)
	data, err := sTaskDirty.ReadFile(ctx, "task-notes.txt")
	require.NoError(t, err)
	assert.Equal(t, "untracked work\n", string(data))

	// Every history involved replays against the current code; with
	// SANDBOXCORE_UPDATE_HISTORIES=1 the session runs that handled evict and
	// pin signals (and the restoring acquire) are recorded for
	// workflows.TestReplayRecordedHistories.
	replayer := worker.NewWorkflowReplayer()
	replayer.RegisterWorkflowWithOptions(workflows.SessionWorkflow, workflow.RegisterOptions{Name: sandboxapi.SessionWorkflowType})
	replayer.RegisterWorkflowWithOptions(workflows.EvictionCronWorkflow, workflow.RegisterOptions{Name: sandboxapi.EvictionCronWorkflowType})
	for w, wf := range []string{res.WorkflowID, hEditDirty.WorkflowID, hAna.WorkflowID, hPinned.WorkflowID, hTaskDirty.WorkflowID} {
		for i, runID := range runIDs(t, wf) {
			hist := history(t, wf, runID)
			require.NoError(t, replayed(replayer, hist), "%s run %s", wf, runID)
			// Run 0 of a session is the acquire already covered by session-run-*.json.
			if os.Getenv(updateHistoriesEnv) == "1" && w > 0 && i > 0 {
				data, err := protojson.MarshalOptions{Indent: "  "}.Marshal(hist)
				require.NoError(t, err)
				name := filepath.Join("..", "workflows", "testdata", "histories", fmt.Sprintf("session-evict-%d-%d.json", w, i))
				require.NoError(t, os.WriteFile(name, data, 0o644))
			}
		}
	}
}

func TestEvictionBlockedWhenWorkCannotBeSaved(t *testing.T) {
	e := newEvEnv(t, "evblocked", aggressive(tinyBudget))
	ctx := ctxFor(t, 3*time.Minute)
	s, hd := e.acquire(sandboxapi.ModeTask, "nested")
	require.NoError(t, s.WriteFile(ctx, "vendor/lib/code.go", []byte("package lib\n"), 0))
	gittest.Git(t, filepath.Join(hd.LocalPath, "vendor", "lib"), "init", "--quiet") // a nested repository cannot be saved

	res := e.run(false)
	r := resultsByID(res)["evict_workspace:"+hd.WorkspaceID]
	assert.Equal(t, sandboxapi.OutcomeBlocked, r.Outcome)
	assert.Contains(t, r.Reason, "vendor/lib/")
	assert.Equal(t, 1, res.Summary.Blocked)
	assert.Zero(t, res.Summary.Evicted)
	// Never treated as discard: the workspace stays as it was, and usable.
	assert.FileExists(t, filepath.Join(hd.LocalPath, "vendor", "lib", "code.go"))
	assert.Equal(t, sandboxapi.WorkspaceReady, e.row(hd.WorkspaceID).State)
	_, ok, err := e.h.Activities.Backups.PendingBackup(ctx, e.row(hd.WorkspaceID))
	require.NoError(t, err)
	assert.False(t, ok)
	data, err := s.ReadFile(ctx, "vendor/lib/code.go")
	require.NoError(t, err)
	assert.Equal(t, "package lib\n", string(data))
}

func TestEvictionWithoutPressureKeepsUnsavedWork(t *testing.T) {
	e := newEvEnv(t, "evnopress", aggressive(hugeBudget))
	ctx := ctxFor(t, 3*time.Minute)
	_, hClean := e.acquire(sandboxapi.ModeEdit, "clean")
	sDirty, hDirty := e.acquire(sandboxapi.ModeEdit, "dirty")
	require.NoError(t, sDirty.WriteFile(ctx, "x.txt", []byte("x"), 0))
	sTask, hTask := e.acquire(sandboxapi.ModeTask, "dirty-task")
	require.NoError(t, sTask.WriteFile(ctx, "y.txt", []byte("y"), 0))
	sUnpushed, hUnpushed := e.acquire(sandboxapi.ModeTask, "unpushed")
	require.NoError(t, sUnpushed.WriteFile(ctx, "z.txt", []byte("z"), 0))
	_, err := sUnpushed.Commit(ctx, sandboxapi.CommitRequest{Message: "local only"})
	require.NoError(t, err)

	res := e.run(false)
	assert.Equal(t, string(eviction.PressureNone), res.Hosts[0].Plan.Plan.Pressure)
	assert.Equal(t, []plannedAction{{eviction.ActionEvictWorkspace, eviction.TierCleanEdit, hClean.WorkspaceID}}, planOf(res),
		"without pressure only clean workspaces past their TTL go")
	assert.Equal(t, 1, res.Summary.Evicted)
	assert.NoDirExists(t, hClean.LocalPath)
	for _, hd := range []sandboxapi.Handle{hDirty, hTask, hUnpushed} {
		assert.DirExists(t, hd.LocalPath)
		assert.Equal(t, sandboxapi.WorkspaceReady, e.row(hd.WorkspaceID).State)
	}
}

func TestEvictedWorkIsRestoredByteForByte(t *testing.T) {
	bin := buildCLI(t)
	e := newEvEnv(t, "evrestore", aggressive(tinyBudget))
	ctx := ctxFor(t, 5*time.Minute)

	// Modified tracked files (plus new ones of every kind).
	sMod, hMod := e.acquire(sandboxapi.ModeEdit, "modified")
	require.NoError(t, sMod.WriteFile(ctx, "README.md", []byte("# changed\r\nCRLF kept\r\n"), 0))
	require.NoError(t, sMod.WriteFile(ctx, "bin/tool.sh", []byte("#!/bin/sh\necho tool\n"), 0o755))
	require.NoError(t, sMod.WriteFile(ctx, "secret.env", []byte("K=V\n"), 0o600))
	require.NoError(t, sMod.WriteFile(ctx, "blob.bin", []byte{0, 1, 2, 0xff, '\r', '\n', 0}, 0))
	require.NoError(t, os.Symlink("README.md", filepath.Join(hMod.LocalPath, "readme-link")))
	require.NoError(t, os.Remove(filepath.Join(hMod.LocalPath, "main.go")))
	// Untracked files only.
	sUntracked, hUntracked := e.acquire(sandboxapi.ModeTask, "untracked")
	require.NoError(t, sUntracked.WriteFile(ctx, "new/dir/file.txt", []byte("only here\n"), 0))
	// Committed but not pushed.
	sUnpushed, hUnpushed := e.acquire(sandboxapi.ModeEdit, "unpushed")
	require.NoError(t, sUnpushed.WriteFile(ctx, "feature.go", []byte("package main\n"), 0))
	c1, err := sUnpushed.Commit(ctx, sandboxapi.CommitRequest{Message: "feature"})
	require.NoError(t, err)
	require.NoError(t, sUnpushed.WriteFile(ctx, "feature.go", []byte("package main\n\n// more\n"), 0))
	_, err = sUnpushed.Commit(ctx, sandboxapi.CommitRequest{Message: "more"})
	require.NoError(t, err)

	handles := []sandboxapi.Handle{hMod, hUntracked, hUnpushed}
	before := map[string]map[string]fileInfo{}
	logs := map[string]string{}
	for _, hd := range handles {
		before[hd.WorkspaceID] = worktreeSnapshot(t, hd.LocalPath)
		logs[hd.WorkspaceID] = branchLog(t, e.bare(hd), hd.Branch)
	}

	res := e.run(false)
	got := resultsByID(res)
	for _, hd := range handles {
		r := got["evict_workspace:"+hd.WorkspaceID]
		require.Equal(t, sandboxapi.OutcomeDone, r.Outcome, r.Reason)
		assert.Equal(t, sandbox.EvictedRef(hd.WorkspaceID), r.BackupRef, "dirty or unpushed: saved")
		assert.FileExists(t, r.PatchPath)
		assert.NoDirExists(t, hd.LocalPath)
		assert.Equal(t, logs[hd.WorkspaceID], branchLog(t, e.bare(hd), hd.Branch), "the branch stays")
		backup := gittest.Git(t, e.bare(hd), "rev-parse", sandbox.EvictedRef(hd.WorkspaceID)+"^")
		assert.Equal(t, strings.Fields(logs[hd.WorkspaceID])[0], backup, "backup parent = HEAD")
	}
	patch, err := os.ReadFile(got["evict_workspace:"+hMod.WorkspaceID].PatchPath)
	require.NoError(t, err)
	assert.Contains(t, string(patch), "GIT binary patch")
	assert.Contains(t, string(patch), "deleted file mode 100644")
	unpushedPatch, err := os.Stat(got["evict_workspace:"+hUnpushed.WorkspaceID].PatchPath)
	require.NoError(t, err)
	assert.Zero(t, unpushedPatch.Size(), "only commits: nothing uncommitted to patch")

	// Restore one through the CLI, the others through the client.
	r := runCLI(t, bin, e.h.Config.TaskQueue, "", "restore", hMod.WorkspaceID)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "restored at "+hMod.LocalPath+" from "+sandbox.EvictedRef(hMod.WorkspaceID))
	for _, s := range []*sandboxclient.Session{sUntracked, sUnpushed} {
		hd, err := s.Restore(ctx)
		require.NoError(t, err)
		assert.Equal(t, sandbox.EvictedRef(s.WorkspaceID()), hd.RestoredFrom)
	}
	for _, hd := range handles {
		assert.Equal(t, before[hd.WorkspaceID], worktreeSnapshot(t, hd.LocalPath), "%s: every file's bytes and mode", hd.WorkspaceID)
		assert.Equal(t, logs[hd.WorkspaceID], branchLog(t, e.bare(hd), hd.Branch), "%s: the branch commits", hd.WorkspaceID)
		assert.Equal(t, sandboxapi.WorkspaceReady, e.row(hd.WorkspaceID).State)
	}
	st, err := sMod.Status(ctx)
	require.NoError(t, err)
	assert.True(t, st.Dirty)
	st, err = sUnpushed.Status(ctx)
	require.NoError(t, err)
	assert.False(t, st.Dirty)
	assert.Equal(t, 2, st.CommitsSinceBase)
	assert.NotEqual(t, c1.Commit, st.Head)
	// The restored workspaces work as before.
	out, err := sMod.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"sh", "-c", "./bin/tool.sh"}})
	require.NoError(t, err)
	assert.Equal(t, "tool\n", string(out.Stdout))
	// Restoring again has nothing to do.
	hd, err := sMod.Restore(ctx)
	require.NoError(t, err)
	assert.Empty(t, hd.RestoredFrom)
}

func TestEvictionWaitsForRunningExec(t *testing.T) {
	e := newEvEnv(t, "evexec", aggressive(tinyBudget))
	ctx := ctxFor(t, 3*time.Minute)
	s, hd := e.acquire(sandboxapi.ModeEdit, "busy")
	require.NoError(t, s.WriteFile(ctx, "before.txt", []byte("before\n"), 0))

	var wg sync.WaitGroup
	var execRes sandboxapi.ExecResult
	var execErr error
	var execEnd time.Time
	wg.Add(1)
	go func() {
		defer wg.Done()
		execRes, execErr = s.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"sh", "-c", "sleep 4; echo done > after.txt; echo finished"}})
		execEnd = time.Now()
	}()
	require.Eventually(t, func() bool {
		d, err := s.Describe(ctx)
		return err == nil && d.InFlight > 0
	}, 20*time.Second, 50*time.Millisecond, "the exec is running")

	res := e.run(false)
	wg.Wait()
	require.NoError(t, execErr)
	assert.Equal(t, 0, execRes.ExitCode)
	assert.Equal(t, "finished\n", string(execRes.Stdout), "the command ran to its end")
	r := resultsByID(res)["evict_workspace:"+hd.WorkspaceID]
	require.Equal(t, sandboxapi.OutcomeDone, r.Outcome, r.Reason)
	assert.False(t, r.At.Before(execEnd.Add(-time.Second)), "the eviction ran after the command (%s vs %s)", r.At, execEnd)
	assert.NoDirExists(t, hd.LocalPath)

	// What the command wrote was saved with the rest.
	hd2, err := s.Restore(ctx)
	require.NoError(t, err)
	assert.NotEmpty(t, hd2.RestoredFrom)
	data, err := s.ReadFile(ctx, "after.txt")
	require.NoError(t, err)
	assert.Equal(t, "done\n", string(data))
}

func TestPinUnpinAndEvictionCLI(t *testing.T) {
	bin := buildCLI(t)
	e := newEvEnv(t, "evpin", aggressive(tinyBudget))
	ctx := ctxFor(t, 3*time.Minute)
	q := e.h.Config.TaskQueue
	s, hd := e.acquire(sandboxapi.ModeEdit, "pinme")
	require.NoError(t, s.WriteFile(ctx, "work.txt", []byte("w\n"), 0))
	_, err := s.Release(ctx, false)
	require.NoError(t, err)
	waitClosed(t, hd.WorkflowID, 30*time.Second)

	// pin reaches a session that is not running (signal-with-start).
	r := runCLI(t, bin, q, "", "pin", hd.WorkspaceID, "--for", "1h")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "pinned until")
	pinned := e.row(hd.WorkspaceID).PinnedUntil
	require.NotNil(t, pinned)
	assert.WithinDuration(t, time.Now().Add(time.Hour), *pinned, time.Minute)
	r = runCLI(t, bin, q, "", "pin", hd.WorkspaceID, "--until", "2001-01-01T00:00:00Z")
	assert.Equal(t, 2, r.code, "a pin in the past is refused: %s", r.stderr)

	r = runCLI(t, bin, q, "", "eviction", "run", "--dry-run")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "kept workspace "+hd.WorkspaceID+": pinned until")
	assert.Contains(t, r.stdout, "pressure severe")

	res := e.run(false)
	assert.Zero(t, res.Summary.Evicted)
	assert.DirExists(t, hd.LocalPath, "pinned never")

	r = runCLI(t, bin, q, "", "unpin", hd.WorkspaceID)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Nil(t, e.row(hd.WorkspaceID).PinnedUntil)

	r = runCLI(t, bin, q, "", "eviction", "run", "--dry-run")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "evict_workspace")
	assert.Contains(t, r.stdout, hd.WorkspaceID)
	assert.DirExists(t, hd.LocalPath, "a dry run only plans")

	r = runCLI(t, bin, q, "", "eviction", "run")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "evicted 1")
	assert.NoDirExists(t, hd.LocalPath)
	assert.Eventually(t, func() bool { // visibility is eventually consistent
		r = runCLI(t, bin, q, "", "eviction", "last", "--json")
		return r.code == 0 && strings.Contains(r.stdout, `"evicted": 1`)
	}, 20*time.Second, 200*time.Millisecond, "eviction last: %s %s", r.stdout, r.stderr)
}

func TestEvictionRuntimeIdleStopAndDestroyLeaveWorkspaceUsable(t *testing.T) {
	e := newEvEnv(t, "evruntime", withIdle(time.Hour, 2*time.Hour), withEviction(func(c *hostworker.EvictionConfig) {
		c.Policy.RuntimeIdleStop, c.Policy.RuntimeStoppedDestroy = time.Nanosecond, time.Nanosecond
		c.DiskBudgetBytes = hugeBudget
	}))
	ctx := ctxFor(t, 3*time.Minute)
	s, hd := e.acquire(sandboxapi.ModeEdit, "rt")
	require.NoError(t, s.WriteFile(ctx, "keep.txt", []byte("kept\n"), 0))
	_, err := s.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"true"}})
	require.NoError(t, err)
	rid := sandboxapi.RuntimeIDFor(hd.WorkspaceID)

	res := e.run(false)
	assert.Equal(t, []plannedAction{{eviction.ActionStopRuntime, eviction.TierRuntimeIdle, rid}}, planOf(res))
	assert.Equal(t, 1, res.Summary.Stopped)
	rec, err := e.h.Store.GetRuntime(ctx, rid)
	require.NoError(t, err)
	assert.Equal(t, sandbox.RuntimeStopped, rec.State)
	d, err := s.Describe(ctx)
	require.NoError(t, err)
	assert.False(t, d.RuntimeRunning)
	assert.Equal(t, sandboxapi.StateIdle, d.State)

	res = e.run(false)
	assert.Equal(t, []plannedAction{{eviction.ActionDestroyRuntime, eviction.TierRuntimeStopped, rid}}, planOf(res))
	assert.Equal(t, 1, res.Summary.Destroyed)
	_, err = e.h.Store.GetRuntime(ctx, rid)
	assert.ErrorIs(t, err, sandboxapi.ErrNotFound)

	// The workspace never moved.
	assert.DirExists(t, hd.LocalPath)
	assert.Equal(t, sandboxapi.WorkspaceReady, e.row(hd.WorkspaceID).State)
	out, err := s.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"cat", "keep.txt"}})
	require.NoError(t, err)
	assert.Equal(t, "kept\n", string(out.Stdout))
	data, err := s.ReadFile(ctx, "keep.txt")
	require.NoError(t, err)
	assert.Equal(t, "kept\n", string(data))
}

func TestEvictionScheduleIsCreatedAndUpdated(t *testing.T) {
	h := startHost(t, "evsched", func(c *hostworker.Config) { c.Eviction.Interval = time.Hour })
	ctx := ctxFor(t, time.Minute)
	id := sandboxapi.EvictionScheduleIDFor(h.Config.TaskQueue)
	assert.Equal(t, "sandbox-eviction-q-evsched", id)
	assert.Equal(t, "sandbox-eviction", sandboxapi.EvictionScheduleIDFor(sandboxapi.DefaultTaskQueue))
	handle := tc.ScheduleClient().GetHandle(ctx, id)
	t.Cleanup(func() { _ = handle.Delete(context.Background()) })
	desc, err := handle.Describe(ctx)
	require.NoError(t, err)
	require.Len(t, desc.Schedule.Spec.Intervals, 1)
	assert.Equal(t, time.Hour, desc.Schedule.Spec.Intervals[0].Every)
	assert.Equal(t, enumspb.SCHEDULE_OVERLAP_POLICY_SKIP, desc.Schedule.Policy.Overlap)
	wa, ok := desc.Schedule.Action.(*client.ScheduleWorkflowAction)
	require.True(t, ok, "%T", desc.Schedule.Action)
	assert.Equal(t, sandboxapi.EvictionCronWorkflowType, wa.Workflow)
	assert.Equal(t, h.Config.TaskQueue, wa.TaskQueue)

	// Starting again (another worker, another interval) updates it in place.
	require.NoError(t, hostworker.EnsureEvictionSchedule(ctx, tc, h.Config.TaskQueue, 7*time.Minute))
	require.NoError(t, hostworker.EnsureEvictionSchedule(ctx, tc, h.Config.TaskQueue, 7*time.Minute))
	desc, err = handle.Describe(ctx)
	require.NoError(t, err)
	assert.Equal(t, 7*time.Minute, desc.Schedule.Spec.Intervals[0].Every)
	assert.Equal(t, enumspb.SCHEDULE_OVERLAP_POLICY_SKIP, desc.Schedule.Policy.Overlap)

	// A triggered run completes (nothing to do on an empty host).
	require.NoError(t, handle.Trigger(ctx, client.ScheduleTriggerOptions{}))
	sc := sandboxclient.New(tc, sandboxclient.Options{TaskQueue: h.Config.TaskQueue})
	require.Eventually(t, func() bool {
		res, err := sc.LastEviction(ctx, false)
		return err == nil && strings.HasPrefix(res.WorkflowID, id+"-run")
	}, 30*time.Second, 200*time.Millisecond)
}
