package activities

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/sandboxcore/sandboxcore/internal/eviction"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/internal/wire"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// EvictionHosts lists the hosts to plan for: this host, every host id of a
// workspace or repo cache row, and every row of the host registry
// (Store.ListHosts), sorted.
func (e *EvictionActivities) EvictionHosts(ctx context.Context) (wire.EvictionHostsResult, error) {
	seen := map[string]bool{e.HostID: true}
	wss, err := e.Store.ListWorkspaces(ctx, sandbox.WorkspaceFilter{})
	if err != nil {
		return wire.EvictionHostsResult{}, err
	}
	for _, w := range wss {
		if w.State != sandboxapi.WorkspaceRemoved {
			seen[w.HostID] = true
		}
	}
	caches, err := e.Store.ListRepoCaches(ctx)
	if err != nil {
		return wire.EvictionHostsResult{}, err
	}
	for _, c := range caches {
		if c.State == sandbox.RepoCacheReady {
			seen[c.HostID] = true
		}
	}
	hosts, err := e.Store.ListHosts(ctx)
	if err != nil {
		return wire.EvictionHostsResult{}, err
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
	return whileHeartbeating(ctx, func() (sandboxapi.PlanEvictionResult, error) { return e.planEviction(ctx, in) })
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

// measure walks DataDir once (symlinks not followed; VolumesDir's images
// left out), adding each regular file's size to the owner whose directory
// contains it, and returns the
// usage and budget (see EvictionActivities.DiskBudgetBytes).
func (e *EvictionActivities) measure(ctx context.Context, owners map[string]string) (used, budget int64, sizes map[string]int64, mode string, err error) {
	sizes = map[string]int64{}
	var total int64
	type frame struct{ dir, owner string }
	var stack []frame
	n := 0
	root := filepath.Clean(e.DataDir)
	volumes := ""
	if e.VolumesDir != "" {
		volumes = filepath.Clean(e.VolumesDir)
	}
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
			if volumes != "" && p == volumes {
				return filepath.SkipDir
			}
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
