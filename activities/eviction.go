package activities

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"

	"github.com/sandboxcore/sandboxcore/internal/depcache"
	"github.com/sandboxcore/sandboxcore/internal/eviction"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/internal/wire"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// EvictionActivities are the activities of eviction (docs/DESIGN.md
// "Eviction policy"): listing hosts, planning on a host, sending the evict
// signals, and — called by each workspace's SessionWorkflow under its lock —
// evicting a workspace or a runtime; plus removing repo caches and pinning.
// They share the ports of Activities (embedded); Backups must be set on it
// for workspaces with unsaved work to be evicted at all.
type EvictionActivities struct {
	*Activities
	// Client sends the evict signals (signal-with-start of sessions).
	Client client.Client
	// DataDir is the host's data root (SANDBOX_DATA_DIR): disk usage is
	// measured under it.
	DataDir string
	// Policy is this host's eviction policy (eviction.DefaultPolicy and the
	// SANDBOX_EVICTION_* variables).
	Policy eviction.Policy
	// DiskBudgetBytes > 0: the budget in bytes, against the bytes of the
	// files under DataDir. Otherwise the budget is DiskBudgetFraction (0 means
	// 1) of the filesystem holding DataDir, against that filesystem's used bytes.
	DiskBudgetBytes    int64
	DiskBudgetFraction float64
}

// Register registers the eviction activities on w under their contract
// names (workflows.ActivityEviction*, ActivityEvict*, ActivitySetPin …).
func (e *EvictionActivities) Register(w interface {
	RegisterActivityWithOptions(any, activity.RegisterOptions)
}) {
	reg := func(fn any, name string) { w.RegisterActivityWithOptions(fn, activity.RegisterOptions{Name: name}) }
	reg(e.EvictionHosts, wire.ActivityEvictionHosts)
	reg(e.PlanEviction, wire.ActivityPlanEviction)
	reg(e.SignalEvictions, wire.ActivitySignalEvictions)
	reg(e.EvictWorkspace, wire.ActivityEvictWorkspace)
	reg(e.EvictRuntime, wire.ActivityEvictRuntime)
	reg(e.RemoveRepoCaches, wire.ActivityRemoveRepoCaches)
	reg(e.SetPin, wire.ActivitySetPin)
	reg(e.DeleteOrphanRuntimes, wire.ActivityDeleteOrphanRuntimes)
	reg(e.RemoveDependencyCaches, wire.ActivityRemoveDependencyCaches)
}

// EvictionHosts lists the hosts to plan for: this host, every host id of a
// workspace or repo cache row, and every row of the host registry
// (Store.ListHosts), sorted.
func (e *EvictionActivities) EvictionHosts(ctx context.Context) (wire.EvictionHostsResult, error) {
	seen := map[string]bool{e.HostID: true}
	wss, err := e.Store.ListWorkspaces(ctx, sandbox.WorkspaceFilter{})
	if err != nil {
		return wire.EvictionHostsResult{}, ToApplicationError(err)
	}
	for _, w := range wss {
		if w.State != sandboxapi.WorkspaceRemoved {
			seen[w.HostID] = true
		}
	}
	caches, err := e.Store.ListRepoCaches(ctx)
	if err != nil {
		return wire.EvictionHostsResult{}, ToApplicationError(err)
	}
	for _, c := range caches {
		if c.State == sandbox.RepoCacheReady {
			seen[c.HostID] = true
		}
	}
	hosts, err := e.Store.ListHosts(ctx)
	if err != nil {
		return wire.EvictionHostsResult{}, ToApplicationError(err)
	}
	for _, h := range hosts {
		seen[h.HostID] = true
	}
	out := wire.EvictionHostsResult{Hosts: []string{}}
	for h := range seen {
		if sandboxapi.ValidateID("host id", h) == nil {
			out.Hosts = append(out.Hosts, h)
		}
	}
	slices.Sort(out.Hosts)
	return out, nil
}

// inspectAfter is the shortest idle time any tier needs: younger workspaces
// cannot be planned, so their worktrees are not inspected.
func (e *EvictionActivities) inspectAfter() time.Duration {
	p := e.Policy
	return min(p.AnalysisTTL, p.TaskTTL, p.EditTTL, p.PressureMinIdle)
}

// PlanEviction measures this host and plans its eviction (package eviction).
// Usage: with DiskBudgetBytes, the bytes of the regular files under DataDir
// (symlinks not followed); otherwise the used bytes of DataDir's filesystem
// against DiskBudgetFraction of its size. Each ready workspace idle long
// enough to be a candidate is inspected for unsaved work (a failure counts as
// unsaved); each repo cache present on this host is checked for commits only
// it holds. Errors: ErrWorkspaceUnavailable when the plan is asked of the
// wrong host; store errors.
func (e *EvictionActivities) PlanEviction(ctx context.Context, in wire.PlanEvictionInput) (sandboxapi.PlanEvictionResult, error) {
	res, err := whileHeartbeating(ctx, func() (sandboxapi.PlanEvictionResult, error) { return e.planEviction(ctx, in) })
	return res, ToApplicationError(err)
}

func (e *EvictionActivities) planEviction(ctx context.Context, in wire.PlanEvictionInput) (sandboxapi.PlanEvictionResult, error) {
	if in.HostID != e.HostID {
		return sandboxapi.PlanEvictionResult{}, sandboxapi.Errorf(sandboxapi.ErrWorkspaceUnavailable, "plan for host %s asked of host %s", in.HostID, e.HostID)
	}
	now := e.now()
	out := sandboxapi.PlanEvictionResult{Policy: publicPolicy(e.Policy)}
	rows, err := e.Store.ListWorkspaces(ctx, sandbox.WorkspaceFilter{HostID: e.HostID})
	if err != nil {
		return out, err
	}
	cacheRows, err := e.Store.ListRepoCaches(ctx)
	if err != nil {
		return out, err
	}
	caches, owners := e.localOwners(rows, cacheRows)
	rts, err := e.Store.ListRuntimes(ctx, "")
	if err != nil {
		return out, err
	}
	out.Notes = append(out.Notes, e.resetFutureTimes(ctx, now, rows, caches, rts)...)
	used, budget, sizes, mode, err := e.measure(ctx, owners)
	if err != nil {
		return out, err
	}
	out.Budget = mode
	snap := eviction.Snapshot{HostID: e.HostID, Now: now, Usage: eviction.Usage{UsedBytes: used, BudgetBytes: budget}}
	onHost := map[string]bool{}
	for _, w := range rows {
		onHost[w.ID] = true
		pw, note := e.plannedWorkspace(ctx, w, now, sizes["ws:"+w.ID])
		if note != "" {
			out.Notes = append(out.Notes, note)
		}
		snap.Workspaces = append(snap.Workspaces, pw)
	}
	for _, c := range caches {
		pc, note := e.plannedRepoCache(ctx, c, sizes["rc:"+c.row.ID])
		if note != "" {
			out.Notes = append(out.Notes, note)
		}
		snap.RepoCaches = append(snap.RepoCaches, pc)
	}
	for _, r := range rts {
		if onHost[r.WorkspaceID] {
			snap.Runtimes = append(snap.Runtimes, eviction.Runtime{ID: r.ID, WorkspaceID: r.WorkspaceID, State: r.State, LastUsedAt: r.LastUsedAt, StateSince: r.UpdatedAt})
		}
	}
	if e.DepCaches != nil {
		deps, err := e.DepCaches.List()
		if err != nil {
			out.Notes = append(out.Notes, "dependency caches not listed: "+sandboxapi.Message(err))
		}
		for _, d := range deps {
			snap.DependencyCaches = append(snap.DependencyCaches, eviction.DependencyCache{ID: d.ID(), LastUsedAt: d.LastUsedAt, SizeBytes: d.SizeBytes})
		}
	}
	out.Plan = publicPlan(eviction.NewPlan(snap, e.Policy))
	out.Plan.Usage.RepoCacheBytes, out.Plan.Usage.WorkspaceBytes = usageByKind(sizes)
	for _, d := range snap.DependencyCaches {
		out.Plan.Usage.DependencyCacheBytes += d.SizeBytes
	}
	if orphans, note := e.planOrphans(ctx, used); note != "" {
		out.Notes = append(out.Notes, note)
	} else if len(orphans) > 0 {
		// Pure waste (no workspace can use them): first.
		out.Plan.Actions = append(orphans, out.Plan.Actions...)
	}
	if err := limitActions(&out, in.Actions); err != nil {
		return out, err
	}
	e.log().Info("eviction planned", "host", e.HostID, "used", used, "budget", budget, "pressure", out.Plan.Pressure, "actions", len(out.Plan.Actions))
	return out, nil
}

// futureSlack is how far ahead of this host's clock a stored time may be
// before PlanEviction resets it: a nearer one is only clamped to now by the
// planner (eviction.NotAfter).
const futureSlack = time.Minute

// resetFutureTimes writes now over every last use (and runtime state
// change) of this host's rows that lies more than futureSlack after now —
// a clock that jumped back, another host's skewed clock, a bad row — and
// updates the rows in place, returning a note for each (docs/DESIGN.md
// "Eviction policy"). The planner counts a future time as "used now"; only
// this reset lets such a row age: left alone it would be exempt from
// eviction forever. A failed write is a note, and the row is clamped for
// this plan only.
func (e *EvictionActivities) resetFutureTimes(ctx context.Context, now time.Time, rows []sandboxapi.Workspace, caches []localCache, rts []sandbox.RuntimeRecord) []string {
	var notes []string
	future := func(t time.Time) bool { return t.After(now.Add(futureSlack)) }
	note := func(kind, id string, t time.Time, err error) {
		n := fmt.Sprintf("%s %s: last used %s, in the future: reset to now", kind, id, t.UTC().Format(time.RFC3339))
		if err != nil {
			n = fmt.Sprintf("%s %s: last used %s, in the future: reset failed: %s", kind, id, t.UTC().Format(time.RFC3339), sandboxapi.Message(err))
		}
		e.log().Warn("eviction: " + n)
		notes = append(notes, n)
	}
	onHost := map[string]bool{}
	for i := range rows {
		w := &rows[i]
		onHost[w.ID] = true
		if future(w.LastUsedAt) {
			note("workspace", w.ID, w.LastUsedAt, e.Store.TouchWorkspace(ctx, w.ID, now))
			w.LastUsedAt = now
		}
	}
	for i := range caches {
		c := &caches[i].row
		if !future(c.LastUsedAt) {
			continue
		}
		at := c.LastUsedAt
		row, err := e.Store.GetRepoCache(ctx, c.ID)
		if err == nil {
			row.LastUsedAt = eviction.NotAfter(row.LastUsedAt, now)
			row.UpdatedAt = eviction.NotAfter(row.UpdatedAt, now)
			err = e.Store.UpsertRepoCache(ctx, row)
		}
		note("repo cache", c.ID, at, err)
		c.LastUsedAt = now
	}
	for i := range rts {
		r := &rts[i]
		if !onHost[r.WorkspaceID] || !(future(r.LastUsedAt) || future(r.UpdatedAt)) {
			continue
		}
		at := r.LastUsedAt
		if future(r.UpdatedAt) && !future(at) {
			at = r.UpdatedAt
		}
		rec, err := e.Store.GetRuntime(ctx, r.ID)
		if err == nil {
			rec.LastUsedAt, rec.UpdatedAt = eviction.NotAfter(rec.LastUsedAt, now), eviction.NotAfter(rec.UpdatedAt, now)
			err = e.Store.UpsertRuntime(ctx, rec)
		}
		note("runtime", r.ID, at, err)
		r.LastUsedAt, r.UpdatedAt = eviction.NotAfter(r.LastUsedAt, now), eviction.NotAfter(r.UpdatedAt, now)
	}
	return notes
}

// localCache is a ready repo cache row whose mirror is on this host, at path.
type localCache struct {
	row  sandbox.RepoCache
	path string
}

// localOwners returns the ready repo caches present on this host and the
// owner of each directory measure attributes bytes to: "ws:<id>" for a ready
// workspace's worktree, "rc:<id>" for a cache's mirror.
func (e *EvictionActivities) localOwners(rows []sandboxapi.Workspace, cacheRows []sandbox.RepoCache) ([]localCache, map[string]string) {
	owners := map[string]string{}
	for _, w := range rows {
		if w.State == sandboxapi.WorkspaceReady && filepath.IsAbs(w.LocalPath) {
			owners[filepath.Clean(w.LocalPath)] = "ws:" + w.ID
		}
	}
	var caches []localCache
	for _, c := range cacheRows {
		if c.State != sandbox.RepoCacheReady {
			continue
		}
		p := e.cachePath(c)
		if p == "" || !isDirectory(p) {
			continue
		}
		caches = append(caches, localCache{c, p})
		owners[p] = "rc:" + c.ID
	}
	return caches, owners
}

// plannedWorkspace is the planner's view of workspace row w (size bytes at
// now): a ready workspace idle long enough to be a candidate is inspected
// for unsaved work (a failure counts as unknown, with a note); younger ones,
// and all without Backups, are unknown; a ready row whose worktree is gone
// has nothing left to lose.
func (e *EvictionActivities) plannedWorkspace(ctx context.Context, w sandboxapi.Workspace, now time.Time, size int64) (eviction.Workspace, string) {
	pw := eviction.Workspace{ID: w.ID, RepoCacheID: w.RepoCacheID, Mode: w.Mode, State: w.State,
		PinnedUntil: w.PinnedUntil, LastUsedAt: w.LastUsedAt, SizeBytes: size}
	if w.State != sandboxapi.WorkspaceReady {
		return pw, ""
	}
	switch {
	case eviction.Idle(w.LastUsedAt, now) < e.inspectAfter():
		pw.Unknown = true // not a candidate yet: not inspected
		return pw, ""
	case e.Backups == nil:
		pw.Unknown = true
		return pw, ""
	}
	if ok, err := e.Workspaces.Exists(ctx, w); err == nil && !ok {
		return pw, "" // the worktree is gone: nothing left to lose
	}
	var note string
	un, err := e.Backups.UnsavedWork(ctx, w)
	if err != nil {
		pw.Unknown = true
		note = fmt.Sprintf("workspace %s: %s", w.ID, sandboxapi.Message(err))
	}
	// Checkpoints count as saved work (docs/API.md "Checkpoints"): a
	// worktree exactly at its newest checkpoint is planned like a clean one
	// (and still saved when evicted).
	pw.Dirty, pw.UnpushedCommits = un.Dirty && !un.Checkpointed, un.UnpushedCommits
	return pw, note
}

// plannedRepoCache is the planner's view of local cache c (size bytes): it
// holds unsaved work when Backups says so, when the check fails (with a
// note) and when there are no Backups to ask.
func (e *EvictionActivities) plannedRepoCache(ctx context.Context, c localCache, size int64) (eviction.RepoCache, string) {
	pc := eviction.RepoCache{ID: c.row.ID, State: c.row.State, LastUsedAt: c.row.LastUsedAt, SizeBytes: size, HoldsUnsavedWork: true}
	if e.Backups == nil {
		return pc, ""
	}
	row := c.row
	row.LocalPath = c.path
	holds, err := e.Backups.RepoCacheHoldsUnsavedWork(ctx, row)
	if err != nil {
		return pc, fmt.Sprintf("repo cache %s: %s", c.row.ID, sandboxapi.Message(err))
	}
	pc.HoldsUnsavedWork = holds
	return pc, ""
}

// usageByKind sums measure's sizes per owner kind: repo caches ("rc:") and
// workspaces ("ws:"), in bytes.
func usageByKind(sizes map[string]int64) (repoCacheBytes, workspaceBytes int64) {
	for owner, n := range sizes {
		switch {
		case strings.HasPrefix(owner, "rc:"):
			repoCacheBytes += n
		case strings.HasPrefix(owner, "ws:"):
			workspaceBytes += n
		}
	}
	return repoCacheBytes, workspaceBytes
}

// limitActions keeps only the plan's actions of the kinds asked for (all
// when none are; ErrInvalidArgument on the field "actions" for an unknown
// kind), then at most sandboxapi.MaxEvictionActionsPerHost of them, counting
// the rest in out.Truncated.
func limitActions(out *sandboxapi.PlanEvictionResult, kinds []sandboxapi.EvictionActionKind) error {
	if len(kinds) > 0 {
		for _, k := range kinds {
			if !k.Valid() {
				return sandboxapi.FieldError("actions", "unknown eviction action %q (want one of %v)", sandboxapi.Clip(string(k), 40), sandboxapi.EvictionActionKinds)
			}
		}
		out.Plan.Actions = slices.DeleteFunc(out.Plan.Actions, func(a sandboxapi.EvictionAction) bool { return !slices.Contains(kinds, a.Kind) })
	}
	if n := len(out.Plan.Actions); n > sandboxapi.MaxEvictionActionsPerHost {
		out.Truncated = n - sandboxapi.MaxEvictionActionsPerHost
		out.Plan.Actions = out.Plan.Actions[:sandboxapi.MaxEvictionActionsPerHost]
	}
	return nil
}

// cachePath is where repo cache c's mirror lives on this host ("" if unknown).
func (e *EvictionActivities) cachePath(c sandbox.RepoCache) string {
	if p, ok := e.Repos.(RepoCachePather); ok {
		id, err := sandboxapi.ParseRepoURL(c.RepoURL, sandboxapi.URLPolicy{AllowFile: true, AllowHTTP: true})
		if err == nil {
			if path := p.Path(id); path != "" {
				return filepath.Clean(path)
			}
		}
	}
	if c.HostID == e.HostID && filepath.IsAbs(c.LocalPath) {
		return filepath.Clean(c.LocalPath)
	}
	return ""
}

func isDirectory(p string) bool {
	fi, err := os.Lstat(p)
	return err == nil && fi.IsDir()
}

// measure walks DataDir once (symlinks not followed), adding each regular
// file's size to the owner whose directory contains it, and returns the
// usage and budget (see EvictionActivities.DiskBudgetBytes).
func (e *EvictionActivities) measure(ctx context.Context, owners map[string]string) (used, budget int64, sizes map[string]int64, mode string, err error) {
	sizes = map[string]int64{}
	var total int64
	type frame struct{ dir, owner string }
	var stack []frame
	n := 0
	root := filepath.Clean(e.DataDir)
	werr := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if n++; n%4096 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			return nil // unreadable or vanished: skipped
		}
		for len(stack) > 0 && !strings.HasPrefix(p, stack[len(stack)-1].dir+string(filepath.Separator)) {
			stack = stack[:len(stack)-1]
		}
		if d.IsDir() {
			if o, ok := owners[p]; ok {
				stack = append(stack, frame{p, o})
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		total += fi.Size()
		if len(stack) > 0 {
			sizes[stack[len(stack)-1].owner] += fi.Size()
		}
		return nil
	})
	if werr != nil {
		return 0, 0, nil, "", werr
	}
	if e.DiskBudgetBytes > 0 {
		return total, e.DiskBudgetBytes, sizes, "bytes", nil
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(root, &st); err != nil {
		return 0, 0, nil, "", sandboxapi.Errorf(sandboxapi.ErrWorkspaceUnavailable, "statfs %s: %v", root, err)
	}
	bs := int64(st.Bsize)
	fsUsed := (int64(st.Blocks) - int64(st.Bfree)) * bs
	capacity := fsUsed + int64(st.Bavail)*bs
	frac := e.DiskBudgetFraction
	if frac <= 0 || frac > 1 {
		frac = 1
	}
	return fsUsed, int64(float64(capacity) * frac), sizes, "fraction", nil
}

// EvictWorkspace evicts one workspace; its SessionWorkflow calls it under
// the mutating lock, on the workspace's host. It re-checks the rules first
// (skipped: not ready, pinned, used within MinIdle, unsaved work the tier
// does not allow), destroys the runtime (never the workspace), checks that
// every entry of the worktree can be deleted, saves unsaved work (backup ref
// + patch + manifest, verified), and only then removes the worktree (the
// branch stays) and marks the row evicted. When the check or the backup
// fails the outcome is "blocked" and the workspace stays intact. If removal
// fails after the work was saved, the row is marked evicted anyway (the next
// acquire restores the saved work over whatever is left); without saved work
// the outcome is "failed". Errors are reserved for store failures.
func (e *EvictionActivities) EvictWorkspace(ctx context.Context, in wire.EvictActivityInput) (sandboxapi.EvictResult, error) {
	res, err := whileHeartbeating(ctx, func() (sandboxapi.EvictResult, error) { return e.evictWorkspace(ctx, in) })
	return res, ToApplicationError(err)
}

func (e *EvictionActivities) evictWorkspace(ctx context.Context, in wire.EvictActivityInput) (sandboxapi.EvictResult, error) {
	now := e.now()
	res := sandboxapi.EvictResult{RequestID: in.Request.RequestID, Action: eviction.ActionEvictWorkspace, Tier: in.Request.Tier,
		ID: in.WorkspaceID, WorkspaceID: in.WorkspaceID, At: now}
	outcome := func(o, reason string) (sandboxapi.EvictResult, error) {
		res.Outcome, res.Reason = o, reason
		e.log().Info("eviction", "workspace", in.WorkspaceID, "outcome", o, "reason", res.Reason)
		return res, nil
	}
	if err := sandboxapi.ValidateWorkspaceID(in.WorkspaceID); err != nil {
		return res, err
	}
	ws, err := e.Store.GetWorkspace(ctx, in.WorkspaceID)
	if errors.Is(err, sandboxapi.ErrWorkspaceNotFound) {
		return outcome(sandboxapi.OutcomeSkipped, "no such workspace")
	}
	if err != nil {
		return res, err
	}
	if o, reason := workspaceEvictionRefusal(ws, in.Request, e.HostID, now); o != "" {
		return outcome(o, reason)
	}
	o, reason, err := e.saveAndRemove(ctx, ws, in.Request, &res)
	if err != nil {
		return res, err
	}
	return outcome(o, reason)
}

// workspaceEvictionRefusal is the outcome and reason of a workspace the
// request may not evict at now, re-checked before any work (docs/DESIGN.md
// "Eviction policy"): failed when it lives on another host; skipped when it
// is not ready, pinned, or used within the request's MinIdle. "" when it
// may go on.
func workspaceEvictionRefusal(ws sandboxapi.Workspace, req sandboxapi.EvictRequest, hostID string, now time.Time) (outcome, reason string) {
	switch {
	case ws.HostID != hostID:
		return sandboxapi.OutcomeFailed, fmt.Sprintf("workspace lives on host %s, not %s", ws.HostID, hostID)
	case ws.State != sandboxapi.WorkspaceReady:
		return sandboxapi.OutcomeSkipped, fmt.Sprintf("workspace is %s", ws.State)
	case ws.PinnedUntil != nil && ws.PinnedUntil.After(now):
		return sandboxapi.OutcomeSkipped, fmt.Sprintf("pinned until %s", ws.PinnedUntil.UTC().Format(time.RFC3339))
	}
	if idle := eviction.Idle(ws.LastUsedAt, now); idle < req.MinIdle {
		return sandboxapi.OutcomeSkipped, fmt.Sprintf("used %s ago (rule needs %s)", idle.Round(time.Second), req.MinIdle)
	}
	return "", ""
}

// saveAndRemove evicts ready workspace ws (EvictWorkspace from its unsaved
// work check on) and returns the outcome and its reason, setting res's
// BackupRef, PatchPath and FreedBytes. The error is a store failure's.
func (e *EvictionActivities) saveAndRemove(ctx context.Context, ws sandboxapi.Workspace, req sandboxapi.EvictRequest, res *sandboxapi.EvictResult) (outcome, reason string, err error) {
	markEvicted := func(dirty bool) error {
		ws.State, ws.Dirty, ws.SizeBytes, ws.UpdatedAt = sandboxapi.WorkspaceEvicted, dirty, 0, e.now()
		return e.Store.UpdateWorkspace(ctx, ws)
	}
	exists, err := e.Workspaces.Exists(ctx, ws)
	if err != nil {
		return sandboxapi.OutcomeFailed, sandboxapi.Message(err), nil
	}
	if !exists {
		if err := markEvicted(false); err != nil {
			return "", "", err
		}
		return sandboxapi.OutcomeDone, "the worktree was already gone", nil
	}
	if e.Backups == nil {
		return sandboxapi.OutcomeBlocked, "this host cannot save work (no backup provider)", nil
	}
	un, err := e.Backups.UnsavedWork(ctx, ws)
	if err != nil {
		return sandboxapi.OutcomeBlocked, "cannot inspect the worktree: " + sandboxapi.Message(err), nil
	}
	if un.Any() && !req.AllowUnsaved {
		return sandboxapi.OutcomeSkipped, fmt.Sprintf("has unsaved work (dirty=%t, unpushed commits=%d) that rule %s does not evict", un.Dirty, un.UnpushedCommits, req.Tier), nil
	}
	size, _ := e.Workspaces.SizeBytes(ctx, ws)
	// The runtime goes first: nothing may run in (or hold) the worktree while it is saved and removed.
	rid := sandboxapi.RuntimeIDFor(ws.ID)
	if err := e.Runtimes.Destroy(ctx, rid); err != nil {
		return sandboxapi.OutcomeBlocked, fmt.Sprintf("destroy runtime %s: %s", rid, sandboxapi.Message(err)), nil
	}
	if err := e.Store.DeleteRuntime(ctx, rid); err != nil && !errors.Is(err, sandboxapi.ErrNotFound) {
		e.log().Warn("eviction: delete runtime row", "runtime", rid, "error", err)
	}
	if err := e.Backups.CheckRemovable(ctx, ws); err != nil {
		return sandboxapi.OutcomeBlocked, sandboxapi.Message(err), nil
	}
	saved := false
	if un.NeedsBackup() {
		man, err := e.Backups.Backup(ctx, ws)
		if err != nil {
			return sandboxapi.OutcomeBlocked, "saving the work failed, the workspace stays: " + sandboxapi.Message(err), nil
		}
		saved, res.BackupRef, res.PatchPath = true, man.Ref, man.PatchPath
	}
	if err := e.Workspaces.Remove(ctx, ws); err != nil {
		if !saved {
			return sandboxapi.OutcomeFailed, "remove worktree: " + sandboxapi.Message(err), nil
		}
		if merr := markEvicted(un.Dirty); merr != nil {
			return "", "", merr
		}
		res.FreedBytes = 0
		return sandboxapi.OutcomeDone, fmt.Sprintf("the worktree was only partly removed (%s); its work is saved and the next acquire restores it", sandboxapi.Message(err)), nil
	}
	if err := markEvicted(un.Dirty); err != nil {
		return "", "", err
	}
	if e.Outputs != nil { // kept command output goes with the worktree
		if err := e.Outputs.RemoveWorkspace(ws.ID); err != nil {
			e.log().Warn("eviction: remove kept output", "workspace", ws.ID, "error", err)
		}
	}
	res.FreedBytes = size
	if saved {
		return sandboxapi.OutcomeDone, fmt.Sprintf("work saved to %s and %s", res.BackupRef, res.PatchPath), nil
	}
	return sandboxapi.OutcomeDone, "clean", nil
}

// EvictRuntime stops (stop_runtime) or destroys (destroy_runtime) one
// workspace's runtime; its SessionWorkflow calls it under the mutating lock,
// on the workspace's host. The workspace is never touched. Re-checks: a stop
// needs the runtime unused for MinIdle; a destroy needs it not running and in
// its state for MinIdle (else skipped). A runtime the backend no longer has
// is recorded as such.
func (e *EvictionActivities) EvictRuntime(ctx context.Context, in wire.EvictActivityInput) (sandboxapi.EvictResult, error) {
	res, err := e.evictRuntime(ctx, in)
	return res, ToApplicationError(err)
}

func (e *EvictionActivities) evictRuntime(ctx context.Context, in wire.EvictActivityInput) (sandboxapi.EvictResult, error) {
	now := e.now()
	rid := sandboxapi.RuntimeIDFor(in.WorkspaceID)
	res := sandboxapi.EvictResult{RequestID: in.Request.RequestID, Action: in.Request.Action, Tier: in.Request.Tier, ID: rid, WorkspaceID: in.WorkspaceID, At: now}
	outcome := func(o, format string, args ...any) (sandboxapi.EvictResult, error) {
		res.Outcome, res.Reason = o, fmt.Sprintf(format, args...)
		return res, nil
	}
	rec, err := e.Store.GetRuntime(ctx, rid)
	found := err == nil
	if err != nil && !errors.Is(err, sandboxapi.ErrNotFound) {
		return res, err
	}
	switch in.Request.Action {
	case eviction.ActionStopRuntime:
		if !found {
			return outcome(sandboxapi.OutcomeSkipped, "no runtime")
		}
		if rec.State != sandbox.RuntimeRunning && rec.State != sandbox.RuntimeStarting {
			return outcome(sandboxapi.OutcomeSkipped, "runtime is %s", rec.State)
		}
		if idle := eviction.Idle(rec.LastUsedAt, now); idle < in.Request.MinIdle {
			return outcome(sandboxapi.OutcomeSkipped, "used %s ago (rule needs %s)", idle.Round(time.Second), in.Request.MinIdle)
		}
		rt, err := e.Runtimes.Get(ctx, rid)
		switch {
		case errors.Is(err, sandboxapi.ErrNotFound):
			rec.State = sandbox.RuntimeMissing
		case err != nil:
			return outcome(sandboxapi.OutcomeFailed, "%s", sandboxapi.Message(err))
		default:
			if err := rt.Stop(ctx); err != nil {
				return outcome(sandboxapi.OutcomeFailed, "stop: %s", sandboxapi.Message(err))
			}
			rec.State = sandbox.RuntimeStopped
		}
		rec.UpdatedAt = now
		if err := e.Store.UpsertRuntime(ctx, rec); err != nil {
			return res, err
		}
		return outcome(sandboxapi.OutcomeDone, "idle since %s", rec.LastUsedAt.UTC().Format(time.RFC3339))
	case eviction.ActionDestroyRuntime:
		if found {
			if rec.State == sandbox.RuntimeRunning || rec.State == sandbox.RuntimeStarting {
				return outcome(sandboxapi.OutcomeSkipped, "runtime is running again")
			}
			if since := eviction.Idle(rec.UpdatedAt, now); since < in.Request.MinIdle {
				return outcome(sandboxapi.OutcomeSkipped, "%s for only %s (rule needs %s)", rec.State, since.Round(time.Second), in.Request.MinIdle)
			}
		}
		if err := e.Runtimes.Destroy(ctx, rid); err != nil {
			return outcome(sandboxapi.OutcomeFailed, "destroy: %s", sandboxapi.Message(err))
		}
		if err := e.Store.DeleteRuntime(ctx, rid); err != nil && !errors.Is(err, sandboxapi.ErrNotFound) {
			return res, err
		}
		return outcome(sandboxapi.OutcomeDone, "destroyed")
	}
	return outcome(sandboxapi.OutcomeFailed, "unknown action %q", in.Request.Action)
}

// RemoveRepoCaches removes the planned repo caches of this host in order,
// while the usage (measured once, minus what was freed) stays above
// in.LowBytes. Each removal is decided under the repository lock
// (repocache.Cache.RemoveUnused): no registered worktree, no workspace row on
// this host referencing the cache, no commits only it holds, unused for the
// action's MinIdle; a cache failing a check is skipped. The row is then
// marked evicted. Errors are reserved for store failures.
func (e *EvictionActivities) RemoveRepoCaches(ctx context.Context, in wire.RemoveRepoCachesInput) (wire.RemoveRepoCachesResult, error) {
	res, err := whileHeartbeating(ctx, func() (wire.RemoveRepoCachesResult, error) { return e.removeRepoCaches(ctx, in) })
	return res, ToApplicationError(err)
}

func (e *EvictionActivities) removeRepoCaches(ctx context.Context, in wire.RemoveRepoCachesInput) (wire.RemoveRepoCachesResult, error) {
	out := wire.RemoveRepoCachesResult{Results: []sandboxapi.EvictResult{}}
	if in.HostID != e.HostID {
		return out, sandboxapi.Errorf(sandboxapi.ErrWorkspaceUnavailable, "repo caches of host %s asked of host %s", in.HostID, e.HostID)
	}
	used, _, _, _, err := e.measure(ctx, nil)
	if err != nil {
		return out, err
	}
	remover, canRemove := e.Repos.(RepoCacheRemover)
	for _, a := range in.Actions {
		r := sandboxapi.EvictResult{Action: eviction.ActionRemoveRepoCache, Tier: a.Tier, ID: a.ID, At: e.now()}
		done := func(o, format string, args ...any) {
			r.Outcome, r.Reason = o, fmt.Sprintf(format, args...)
			out.Results = append(out.Results, r)
		}
		if in.LowBytes > 0 && used <= in.LowBytes {
			done(sandboxapi.OutcomeSkipped, "pressure relieved (%d bytes used, low water %d)", used, in.LowBytes)
			continue
		}
		if !canRemove {
			done(sandboxapi.OutcomeSkipped, "the repo cache provider cannot remove a cache safely")
			continue
		}
		row, err := e.Store.GetRepoCache(ctx, a.ID)
		if errors.Is(err, sandboxapi.ErrNotFound) {
			done(sandboxapi.OutcomeSkipped, "no such repo cache")
			continue
		}
		if err != nil {
			return out, err
		}
		repo, err := sandboxapi.ParseRepoURL(row.RepoURL, sandboxapi.URLPolicy{AllowFile: true, AllowHTTP: true})
		if err != nil {
			done(sandboxapi.OutcomeFailed, "%s", sandboxapi.Message(err))
			continue
		}
		var freed int64
		err = remover.RemoveUnused(ctx, repo, func(bare string) error {
			if err := e.checkRepoCacheRemovable(ctx, row, a.MinIdle, bare); err != nil {
				return err
			}
			freed = regularFileBytes(bare)
			return nil
		})
		switch {
		case errors.Is(err, sandboxapi.ErrConflict):
			done(sandboxapi.OutcomeSkipped, "%s", sandboxapi.Message(err))
			continue
		case err != nil:
			done(sandboxapi.OutcomeFailed, "%s", sandboxapi.Message(err))
			continue
		}
		row.State, row.SizeBytes, row.UpdatedAt = sandbox.RepoCacheEvicted, 0, e.now()
		if err := e.Store.UpsertRepoCache(ctx, row); err != nil {
			return out, err
		}
		used -= freed
		r.FreedBytes = freed
		done(sandboxapi.OutcomeDone, "removed (%d bytes)", freed)
	}
	return out, nil
}

// RemoveDependencyCaches removes the planned dependency caches of this host
// in order, while the usage (measured once, minus what was freed) stays
// above in.LowBytes; a cache given to a runtime within the action's
// MinIdle since the plan is skipped, a missing one is done. A command using
// a cache while it is removed downloads what it needs again: a cache holds
// nothing that cannot be fetched (docs/RUNTIMES.md "Dependency caches").
// Errors: ErrWorkspaceUnavailable when asked of another host.
func (e *EvictionActivities) RemoveDependencyCaches(ctx context.Context, in wire.RemoveDependencyCachesInput) (wire.RemoveDependencyCachesResult, error) {
	res, err := whileHeartbeating(ctx, func() (wire.RemoveDependencyCachesResult, error) { return e.removeDependencyCaches(ctx, in) })
	return res, ToApplicationError(err)
}

func (e *EvictionActivities) removeDependencyCaches(ctx context.Context, in wire.RemoveDependencyCachesInput) (wire.RemoveDependencyCachesResult, error) {
	out := wire.RemoveDependencyCachesResult{Results: []sandboxapi.EvictResult{}}
	if in.HostID != e.HostID {
		return out, sandboxapi.Errorf(sandboxapi.ErrWorkspaceUnavailable, "dependency caches of host %s asked of host %s", in.HostID, e.HostID)
	}
	used, _, _, _, err := e.measure(ctx, nil)
	if err != nil {
		return out, err
	}
	var entries map[string]depcache.Entry
	if e.DepCaches != nil {
		list, err := e.DepCaches.List()
		if err != nil {
			return out, err
		}
		entries = map[string]depcache.Entry{}
		for _, d := range list {
			entries[d.ID()] = d
		}
	}
	now := e.now()
	for _, a := range in.Actions {
		r := sandboxapi.EvictResult{Action: eviction.ActionRemoveDependencyCache, Tier: a.Tier, ID: a.ID, At: now}
		done := func(o, format string, args ...any) {
			r.Outcome, r.Reason = o, fmt.Sprintf(format, args...)
			out.Results = append(out.Results, r)
		}
		d, found := entries[a.ID]
		switch {
		case a.Kind != eviction.ActionRemoveDependencyCache:
			done(sandboxapi.OutcomeFailed, "not a dependency cache action: %q", a.Kind)
			continue
		case e.DepCaches == nil:
			done(sandboxapi.OutcomeSkipped, "this host keeps no dependency caches")
			continue
		case in.LowBytes > 0 && used <= in.LowBytes:
			done(sandboxapi.OutcomeSkipped, "pressure relieved (%d bytes used, low water %d)", used, in.LowBytes)
			continue
		case !found:
			done(sandboxapi.OutcomeDone, "already gone")
			continue
		case eviction.Idle(d.LastUsedAt, now) < a.MinIdle:
			done(sandboxapi.OutcomeSkipped, "used %s ago (rule needs %s)", eviction.Idle(d.LastUsedAt, now).Round(time.Second), a.MinIdle)
			continue
		}
		if err := e.DepCaches.Remove(a.ID); err != nil {
			done(sandboxapi.OutcomeFailed, "%s", sandboxapi.Message(err))
			continue
		}
		used -= d.SizeBytes
		r.FreedBytes = d.SizeBytes
		done(sandboxapi.OutcomeDone, "removed (%d bytes)", d.SizeBytes)
	}
	return out, nil
}

// RepoCachePather is the optional capability of a RepoCacheProvider that
// knows where a repository's bare mirror lives on this host (Path: the
// absolute directory, "" when it has none; repocache.Cache): planning
// measures a cache there (the row's local_path otherwise).
type RepoCachePather interface {
	Path(repo sandboxapi.RepoIdentity) string
}

// RepoCacheRemover is the optional capability of a RepoCacheProvider that
// removes a repository's mirror safely (repocache.Cache): RemoveUnused takes
// the repository's lock, refuses (ErrConflict) a mirror that still registers
// a worktree, calls check with the bare directory and removes the mirror
// only when check returns nil (check's error is returned as is); a missing
// mirror is success.
// Without it no repo cache is evicted (docs/DESIGN.md "Eviction policy").
type RepoCacheRemover interface {
	RemoveUnused(ctx context.Context, repo sandboxapi.RepoIdentity, check func(bare string) error) error
}

// checkRepoCacheRemovable decides, under the repository's lock, whether
// repo cache row (its mirror at bare) may be removed (docs/DESIGN.md
// "Eviction policy"): ErrConflict when it was used within minIdle, a
// workspace row on this host that is not removed references it, there are
// no Backups to check it for unsaved work, or it holds commits on no remote
// branch; other errors are the store's or the check's.
func (e *EvictionActivities) checkRepoCacheRemovable(ctx context.Context, row sandbox.RepoCache, minIdle time.Duration, bare string) error {
	if idle := eviction.Idle(row.LastUsedAt, e.now()); idle < minIdle {
		return sandboxapi.Errorf(sandboxapi.ErrConflict, "used %s ago", idle.Round(time.Second))
	}
	wss, err := e.Store.ListWorkspaces(ctx, sandbox.WorkspaceFilter{RepoCacheID: row.ID, HostID: e.HostID})
	if err != nil {
		return err
	}
	for _, w := range wss {
		if w.State != sandboxapi.WorkspaceRemoved {
			return sandboxapi.Errorf(sandboxapi.ErrConflict, "used by workspace %s (%s)", w.ID, w.State)
		}
	}
	if e.Backups == nil {
		return sandboxapi.Errorf(sandboxapi.ErrConflict, "cannot check it for unsaved work")
	}
	local := row
	local.LocalPath = bare
	holds, err := e.Backups.RepoCacheHoldsUnsavedWork(ctx, local)
	if err != nil {
		return err
	}
	if holds {
		return sandboxapi.Errorf(sandboxapi.ErrConflict, "holds commits on no remote branch")
	}
	return nil
}

// regularFileBytes is the total size in bytes of the regular files under
// dir (symlinks not followed; unreadable entries skipped).
func regularFileBytes(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// OrphanCollector is the optional capability of remote runtime providers
// whose runtimes outlive the worker (docs/API.md "Eviction": orphans):
// Orphans lists this host's runtimes whose workspace no longer exists
// (exists decides, per workspace id), DeleteOrphan deletes one (a missing
// one is success). Implemented by the Daytona provider.
type OrphanCollector interface {
	Orphans(ctx context.Context, exists func(ctx context.Context, workspaceID string) (bool, error)) ([]sandbox.RuntimeSummary, error)
	DeleteOrphan(ctx context.Context, runtimeID string) error
}

// workspaceExists reports whether a workspace row exists and is not
// removed (an evicted workspace exists: the next acquire restores it).
func (e *EvictionActivities) workspaceExists(ctx context.Context, id string) (bool, error) {
	if sandboxapi.ValidateWorkspaceID(id) != nil {
		return false, nil // no workspace can have that id
	}
	ws, err := e.Store.GetWorkspace(ctx, id)
	if errors.Is(err, sandboxapi.ErrWorkspaceNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return ws.State != sandboxapi.WorkspaceRemoved, nil
}

// planOrphans lists the host's orphan remote runtimes as
// EvictionDeleteOrphanRuntime actions (none when the runtime provider has
// no OrphanCollector); a failure is returned as a note and plans nothing.
func (e *EvictionActivities) planOrphans(ctx context.Context, used int64) ([]sandboxapi.EvictionAction, string) {
	oc, ok := e.Runtimes.(OrphanCollector)
	if !ok {
		return nil, ""
	}
	orphans, err := oc.Orphans(ctx, e.workspaceExists)
	if err != nil {
		return nil, "orphan runtimes: " + sandboxapi.Message(err)
	}
	var out []sandboxapi.EvictionAction
	for _, o := range orphans {
		out = append(out, sandboxapi.EvictionAction{Kind: sandboxapi.EvictionDeleteOrphanRuntime, Tier: sandboxapi.TierRuntimeOrphan,
			ID: o.ID, WorkspaceID: o.Labels["sandboxcore.workspace"], ProjectedUsedBytes: used})
	}
	return out, ""
}

// DeleteOrphanRuntimes deletes the planned orphan runtimes of this host,
// each only after checking again that its workspace does not exist (an
// acquire may have created it meanwhile: then it is skipped), and drops
// their runtime rows. Outcomes per action; errors are reserved for asking
// the wrong host.
func (e *EvictionActivities) DeleteOrphanRuntimes(ctx context.Context, in wire.DeleteOrphanRuntimesInput) (wire.DeleteOrphanRuntimesResult, error) {
	res, err := whileHeartbeating(ctx, func() (wire.DeleteOrphanRuntimesResult, error) { return e.deleteOrphanRuntimes(ctx, in) })
	return res, ToApplicationError(err)
}

func (e *EvictionActivities) deleteOrphanRuntimes(ctx context.Context, in wire.DeleteOrphanRuntimesInput) (wire.DeleteOrphanRuntimesResult, error) {
	out := wire.DeleteOrphanRuntimesResult{Results: []sandboxapi.EvictResult{}}
	if in.HostID != e.HostID {
		return out, sandboxapi.Errorf(sandboxapi.ErrWorkspaceUnavailable, "orphan runtimes of host %s asked of host %s", in.HostID, e.HostID)
	}
	oc, canDelete := e.Runtimes.(OrphanCollector)
	for _, a := range in.Actions {
		r := sandboxapi.EvictResult{Action: a.Kind, Tier: a.Tier, ID: a.ID, WorkspaceID: a.WorkspaceID, At: e.now()}
		done := func(o, format string, args ...any) {
			r.Outcome, r.Reason = o, fmt.Sprintf(format, args...)
			e.log().Info("eviction: orphan runtime", "runtime", a.ID, "workspace", a.WorkspaceID, "outcome", o, "reason", r.Reason)
			out.Results = append(out.Results, r)
		}
		switch {
		case a.Kind != sandboxapi.EvictionDeleteOrphanRuntime:
			done(sandboxapi.OutcomeFailed, "not an orphan runtime action (%s)", a.Kind)
			continue
		case !canDelete:
			done(sandboxapi.OutcomeSkipped, "the %s runtime provider has no orphan runtimes", e.Runtimes.Kind())
			continue
		}
		exists, err := e.workspaceExists(ctx, a.WorkspaceID)
		if err != nil {
			done(sandboxapi.OutcomeFailed, "%s", sandboxapi.Message(err))
			continue
		}
		if exists {
			done(sandboxapi.OutcomeSkipped, "workspace %s exists again", a.WorkspaceID)
			continue
		}
		if err := oc.DeleteOrphan(ctx, a.ID); err != nil {
			done(sandboxapi.OutcomeFailed, "delete: %s", sandboxapi.Message(err))
			continue
		}
		if err := e.Store.DeleteRuntime(ctx, a.ID); err != nil && !errors.Is(err, sandboxapi.ErrNotFound) {
			e.log().Warn("eviction: delete the runtime row of an orphan", "runtime", a.ID, "error", err)
		}
		done(sandboxapi.OutcomeDone, "deleted: workspace %s no longer exists", a.WorkspaceID)
	}
	return out, nil
}

// SetPin sets or clears (Until nil) a workspace's pin in the store (docs/DESIGN.md
// "Eviction policy": never evict pinned workspaces). Errors:
// ErrWorkspaceNotFound, ErrInvalidArgument.
func (e *EvictionActivities) SetPin(ctx context.Context, in wire.SetPinInput) error {
	if err := sandboxapi.ValidateWorkspaceID(in.WorkspaceID); err != nil {
		return ToApplicationError(err)
	}
	ws, err := e.Store.GetWorkspace(ctx, in.WorkspaceID)
	if err != nil {
		return ToApplicationError(err)
	}
	if in.Until != nil {
		u := in.Until.UTC()
		ws.PinnedUntil = &u
	} else {
		ws.PinnedUntil = nil
	}
	ws.UpdatedAt = e.now()
	return ToApplicationError(e.Store.UpdateWorkspace(ctx, ws))
}

// restoreEvicted writes back the saved work of an evicted workspace that
// acquire has just re-created (ws), and returns the backup ref it came from
// ("" when there was none). A failure fails the acquire and leaves the
// backup pending (ErrConflict when the branch moved meanwhile).
func (a *Activities) restoreEvicted(ctx context.Context, found bool, existing, ws sandboxapi.Workspace) (string, error) {
	if !found || existing.State != sandboxapi.WorkspaceEvicted || a.Backups == nil {
		return "", nil
	}
	out, err := whileHeartbeating(ctx, func() (restoreOut, error) {
		m, ok, err := a.Backups.Restore(ctx, ws)
		return restoreOut{m, ok}, err
	})
	if err != nil || !out.ok {
		return "", err
	}
	a.log().Info("evicted workspace restored", "workspace", ws.ID, "ref", out.man.Ref, "files", out.man.Files)
	return out.man.Ref, nil
}

type restoreOut struct {
	man sandbox.WorkspaceBackup
	ok  bool
}

// publicPolicy is the wire form of the planner's policy (docs/API.md "Eviction").
func publicPolicy(p eviction.Policy) sandboxapi.EvictionPolicy {
	return sandboxapi.EvictionPolicy{
		RuntimeIdleStop: p.RuntimeIdleStop, RuntimeStoppedDestroy: p.RuntimeStoppedDestroy,
		AnalysisTTL: p.AnalysisTTL, TaskTTL: p.TaskTTL, EditTTL: p.EditTTL, PressureMinIdle: p.PressureMinIdle,
		HighWater: p.HighWater, LowWater: p.LowWater, SevereWater: p.SevereWater,
	}
}

// publicPlan is the wire form of a planner's plan: the contract owns its
// shape, so the planner's types can change without changing the wire.
func publicPlan(p eviction.Plan) sandboxapi.EvictionPlan {
	out := sandboxapi.EvictionPlan{
		HostID: p.HostID, Now: p.Now, Usage: sandboxapi.EvictionUsage{UsedBytes: p.Usage.UsedBytes, BudgetBytes: p.Usage.BudgetBytes},
		Pressure: string(p.Pressure), HighBytes: p.HighBytes, LowBytes: p.LowBytes, SevereBytes: p.SevereBytes,
		ProjectedUsedBytes: p.ProjectedUsedBytes, Actions: make([]sandboxapi.EvictionAction, 0, len(p.Actions)),
	}
	for _, a := range p.Actions {
		out.Actions = append(out.Actions, sandboxapi.EvictionAction{
			Kind: a.Kind, Tier: a.Tier, ID: a.ID, WorkspaceID: a.WorkspaceID, Mode: a.Mode, SaveWork: a.SaveWork,
			MinIdle: a.MinIdle, LastUsedAt: a.LastUsedAt, Bytes: a.Bytes, ProjectedUsedBytes: a.ProjectedUsedBytes,
		})
	}
	for _, h := range p.Held {
		out.Held = append(out.Held, sandboxapi.EvictionHeld{ID: h.ID, Kind: h.Kind, Reason: h.Reason})
	}
	return out
}
