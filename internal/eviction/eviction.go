// Package eviction is the pure planner of sandboxcore's tiered, volume-aware
// eviction (docs/DESIGN.md "Eviction policy": runtime, workspace and repo-cache tiers,
// and its follow-up "a volume-based policy so disk use is bounded"; DESIGN.md
// layout "eviction/: pure planning: snapshot in, ordered plan out").
//
// NewPlan takes a Snapshot of one host (its workspaces, repo caches and
// runtimes, the disk usage against a budget, and the time) and a Policy, and
// returns the ordered Plan. It does no I/O and reads no clock; carrying the
// plan out (through each workspace's SessionWorkflow, saving work first) is
// the caller's business (workflows.EvictionCronWorkflow).
//
// The tiers, in plan order ("Compute is cheap to recreate; repo clones are
// expensive"):
//
//  1. Runtimes (docs/DESIGN.md "Eviction policy"): stop those running and idle for at
//     least Policy.RuntimeIdleStop (default 20 min); destroy those stopped (or
//     failed) for at least Policy.RuntimeStoppedDestroy (default 6 h). A
//     runtime action never deletes a workspace and frees no planned disk.
//  2. Workspaces (docs/DESIGN.md "Eviction policy", in its order of priority), never
//     a pinned one (PinnedUntil in the future):
//     a. clean analysis workspaces idle for at least Policy.AnalysisTTL,
//     b. clean task workspaces idle for at least Policy.TaskTTL,
//     c. clean edit workspaces idle for at least Policy.EditTTL (default 14 days)
//     — these three whatever the disk usage, because their TTL expired —
//     d. dirty unpinned task (and analysis) workspaces, only under disk
//     pressure (usage at or above the high water mark) and only while the
//     projected usage stays above the low water mark,
//     e. dirty unpinned edit workspaces, only under severe pressure (usage
//     at or above the severe mark) and only while the projected usage stays
//     at or above it.
//     "Dirty" means anything a deletion would lose: uncommitted changes,
//     untracked files, commits on no remote branch, or a state that could not
//     be read. Tiers d and e also need Policy.PressureMinIdle without use.
//  3. Dependency caches (docs/RUNTIMES.md "Dependency caches"), only under
//     pressure and only while the projected usage stays above the low water
//     mark: highest idle time × size first, never one used within
//     Policy.PressureMinIdle. They hold nothing that cannot be fetched
//     again, so they go before the repo caches.
//  4. Repo caches (docs/DESIGN.md "Eviction policy"), only under pressure and only
//     while the projected usage stays above the low water mark: least
//     recently used weighted by size (score = idle time × size, highest
//     first), never one that any workspace row still references (evicted
//     workspaces keep their backup refs there), never one holding commits
//     only it has, never one used within Policy.PressureMinIdle.
//
// Within a tier, the least recently used goes first (ties by id).
//
// Every time of the snapshot is clamped to Snapshot.Now first (NotAfter): a
// last use or state change in the future (a skewed clock, a bad row) counts
// as "now", never as a negative idle time. Clamping alone would hold such a
// row forever (it is "used now" at every plan); the caller resets it in its
// store (activities.EvictionActivities.PlanEviction), so it ages from then on.
package eviction

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// Policy holds the thresholds of the plan. Durations are compared with
// "idle at least" (>=); water marks are fractions of the budget in (0, 1].
type Policy struct {
	// RuntimeIdleStop: stop a running runtime unused this long (docs/DESIGN.md "Eviction policy").
	RuntimeIdleStop time.Duration `json:"runtime_idle_stop"`
	// RuntimeStoppedDestroy: destroy a runtime stopped this long (docs/DESIGN.md "Eviction policy").
	RuntimeStoppedDestroy time.Duration `json:"runtime_stopped_destroy"`
	// AnalysisTTL, TaskTTL, EditTTL: a clean workspace of the mode unused this
	// long is evicted whatever the disk usage (docs/DESIGN.md "Eviction policy").
	AnalysisTTL time.Duration `json:"analysis_ttl"`
	TaskTTL     time.Duration `json:"task_ttl"`
	EditTTL     time.Duration `json:"edit_ttl"`
	// PressureMinIdle: under pressure, a dirty workspace or a repo cache must
	// have been unused this long to be evicted.
	PressureMinIdle time.Duration `json:"pressure_min_idle"`
	// HighWater: usage/budget at or above it is pressure.
	HighWater float64 `json:"high_water"`
	// LowWater: pressure-driven eviction stops once the projected usage is at
	// or below it.
	LowWater float64 `json:"low_water"`
	// SevereWater: usage/budget at or above it is severe pressure (dirty edit
	// workspaces may go).
	SevereWater float64 `json:"severe_water"`
}

// Defaults of DefaultPolicy.
const (
	DefaultRuntimeIdleStop       = 20 * time.Minute
	DefaultRuntimeStoppedDestroy = 6 * time.Hour
	DefaultAnalysisTTL           = 24 * time.Hour
	DefaultTaskTTL               = 3 * 24 * time.Hour
	DefaultEditTTL               = 14 * 24 * time.Hour
	DefaultPressureMinIdle       = time.Hour
	DefaultHighWater             = 0.85
	DefaultLowWater              = 0.70
	DefaultSevereWater           = 0.95
)

// DefaultPolicy returns the documented defaults (README "Configuration").
func DefaultPolicy() Policy {
	return Policy{
		RuntimeIdleStop: DefaultRuntimeIdleStop, RuntimeStoppedDestroy: DefaultRuntimeStoppedDestroy,
		AnalysisTTL: DefaultAnalysisTTL, TaskTTL: DefaultTaskTTL, EditTTL: DefaultEditTTL,
		PressureMinIdle: DefaultPressureMinIdle,
		HighWater:       DefaultHighWater, LowWater: DefaultLowWater, SevereWater: DefaultSevereWater,
	}
}

// Validate checks that every duration is positive and that
// 0 < LowWater < HighWater <= SevereWater <= 1. Errors wrap
// sandboxapi.ErrInvalidArgument and name the field.
func (p Policy) Validate() error {
	for name, d := range map[string]time.Duration{
		"runtime_idle_stop": p.RuntimeIdleStop, "runtime_stopped_destroy": p.RuntimeStoppedDestroy,
		"analysis_ttl": p.AnalysisTTL, "task_ttl": p.TaskTTL, "edit_ttl": p.EditTTL, "pressure_min_idle": p.PressureMinIdle,
	} {
		if d <= 0 {
			return sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "eviction policy: %s must be positive, got %s", name, d)
		}
	}
	if !(p.LowWater > 0 && p.LowWater < p.HighWater && p.HighWater <= p.SevereWater && p.SevereWater <= 1) {
		return sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "eviction policy: want 0 < low_water (%v) < high_water (%v) <= severe_water (%v) <= 1", p.LowWater, p.HighWater, p.SevereWater)
	}
	return nil
}

// Usage is a host's disk usage against its budget, in bytes. A zero budget
// means "no budget": never any pressure.
type Usage struct {
	UsedBytes   int64 `json:"used_bytes"`
	BudgetBytes int64 `json:"budget_bytes"`
}

// Fraction returns UsedBytes/BudgetBytes (0 without a budget).
func (u Usage) Fraction() float64 {
	if u.BudgetBytes <= 0 {
		return 0
	}
	return float64(u.UsedBytes) / float64(u.BudgetBytes)
}

// Workspace is one workspace row as the planner sees it.
type Workspace struct {
	ID          string                    `json:"id"`
	RepoCacheID string                    `json:"repo_cache_id"`
	Mode        sandboxapi.WorkspaceMode  `json:"mode"`
	State       sandboxapi.WorkspaceState `json:"state"`
	// Dirty: uncommitted changes or untracked (not ignored) files.
	Dirty bool `json:"dirty"`
	// UnpushedCommits: commits of HEAD on no remote branch or tag.
	UnpushedCommits int `json:"unpushed_commits"`
	// Unknown: the worktree could not be inspected; treated as dirty.
	Unknown     bool       `json:"unknown,omitempty"`
	PinnedUntil *time.Time `json:"pinned_until,omitempty"`
	LastUsedAt  time.Time  `json:"last_used_at"`
	// SizeBytes is what evicting it frees (its worktree's files).
	SizeBytes int64 `json:"size_bytes"`
}

// HasUnsavedWork reports whether deleting the worktree without a backup
// would lose anything (Dirty, UnpushedCommits or Unknown).
func (w Workspace) HasUnsavedWork() bool { return w.Dirty || w.UnpushedCommits > 0 || w.Unknown }

// Pinned reports whether the workspace is pinned at now.
func (w Workspace) Pinned(now time.Time) bool {
	return w.PinnedUntil != nil && w.PinnedUntil.After(now)
}

// RepoCache is one repo cache on the host as the planner sees it.
type RepoCache struct {
	ID         string                 `json:"id"`
	State      sandbox.RepoCacheState `json:"state"`
	LastUsedAt time.Time              `json:"last_used_at"`
	SizeBytes  int64                  `json:"size_bytes"`
	// HoldsUnsavedWork: commits only this mirror has (agent branches or
	// backup refs on no remote branch or tag), or unknown.
	HoldsUnsavedWork bool `json:"holds_unsaved_work,omitempty"`
}

// DependencyCache is one dependency cache on the host as the planner sees
// it (depcache.Entry).
type DependencyCache struct {
	// ID is "<scope>/<key>".
	ID         string    `json:"id"`
	LastUsedAt time.Time `json:"last_used_at"`
	SizeBytes  int64     `json:"size_bytes"`
}

// Runtime is one runtime row as the planner sees it.
type Runtime struct {
	ID          string               `json:"id"`
	WorkspaceID string               `json:"workspace_id"`
	State       sandbox.RuntimeState `json:"state"`
	LastUsedAt  time.Time            `json:"last_used_at"`
	// StateSince is when the runtime entered State (the row's updated_at).
	StateSince time.Time `json:"state_since"`
}

// Snapshot is everything the planner needs about one host.
type Snapshot struct {
	HostID     string      `json:"host_id"`
	Now        time.Time   `json:"now"`
	Usage      Usage       `json:"usage"`
	Workspaces []Workspace `json:"workspaces"`
	RepoCaches []RepoCache `json:"repo_caches"`
	Runtimes   []Runtime   `json:"runtimes"`
	// DependencyCaches are the host's dependency caches.
	DependencyCaches []DependencyCache `json:"dependency_caches,omitempty"`
}

// Pressure is the disk pressure level of a snapshot.
type Pressure string

// Pressure levels.
const (
	PressureNone   Pressure = "none"   // below the high water mark (or no budget)
	PressureHigh   Pressure = "high"   // at or above the high water mark
	PressureSevere Pressure = "severe" // at or above the severe mark
)

// ActionKind is what an Action does: the wire contract's kinds
// (sandboxapi.EvictionActionKind, docs/API.md "Eviction").
type ActionKind = sandboxapi.EvictionActionKind

// Action kinds.
const (
	ActionStopRuntime     = sandboxapi.EvictionStopRuntime
	ActionDestroyRuntime  = sandboxapi.EvictionDestroyRuntime
	ActionEvictWorkspace  = sandboxapi.EvictionEvictWorkspace
	ActionRemoveRepoCache = sandboxapi.EvictionRemoveRepoCache
	// ActionRemoveDependencyCache deletes a dependency cache.
	ActionRemoveDependencyCache = sandboxapi.EvictionRemoveDependencyCache
)

// Tier names why an action is planned (see the package comment): the wire
// contract's tiers (sandboxapi.EvictionTier).
type Tier = sandboxapi.EvictionTier

// Tiers in plan order.
const (
	TierRuntimeIdle    = sandboxapi.TierRuntimeIdle
	TierRuntimeStopped = sandboxapi.TierRuntimeStopped
	TierCleanAnalysis  = sandboxapi.TierCleanAnalysis
	TierCleanTask      = sandboxapi.TierCleanTask
	TierCleanEdit      = sandboxapi.TierCleanEdit
	TierDirtyTask      = sandboxapi.TierDirtyTask
	TierDirtyEdit      = sandboxapi.TierDirtyEdit
	// TierDependencyCacheLRU is tier 3 of the package comment.
	TierDependencyCacheLRU = sandboxapi.TierDependencyCacheLRU
	TierRepoCacheLRU       = sandboxapi.TierRepoCacheLRU
)

// Action is one step of a plan.
type Action struct {
	Kind ActionKind `json:"kind"`
	Tier Tier       `json:"tier"`
	// ID is the runtime id, workspace id or repo cache id.
	ID string `json:"id"`
	// WorkspaceID is the workspace the runtime or workspace action goes
	// through (its SessionWorkflow); empty for repo caches.
	WorkspaceID string                   `json:"workspace_id,omitempty"`
	Mode        sandboxapi.WorkspaceMode `json:"mode,omitempty"`
	// SaveWork: the workspace has unsaved work; it must be backed up first
	// (and the action may proceed only when the backup is verified).
	SaveWork bool `json:"save_work,omitempty"`
	// MinIdle is re-checked when the action runs: the target must still have
	// been unused at least this long, else the action is skipped.
	MinIdle time.Duration `json:"min_idle"`
	// LastUsedAt is the target's last use as the snapshot saw it.
	LastUsedAt time.Time `json:"last_used_at"`
	// Bytes is what the action is expected to free.
	Bytes int64 `json:"bytes"`
	// ProjectedUsedBytes is the usage expected after this and every earlier action.
	ProjectedUsedBytes int64 `json:"projected_used_bytes"`
}

// Held is a workspace or repo cache the plan deliberately keeps although an
// age or pressure rule would have picked it.
type Held struct {
	ID     string `json:"id"`
	Kind   string `json:"kind"` // "workspace" or "repo_cache"
	Reason string `json:"reason"`
}

// Plan is NewPlan's ordered result for one host.
type Plan struct {
	HostID   string    `json:"host_id"`
	Now      time.Time `json:"now"`
	Usage    Usage     `json:"usage"`
	Pressure Pressure  `json:"pressure"`
	// HighBytes, LowBytes and SevereBytes are the water marks in bytes (0 without a budget).
	HighBytes   int64 `json:"high_bytes"`
	LowBytes    int64 `json:"low_bytes"`
	SevereBytes int64 `json:"severe_bytes"`
	// Actions, in the order they are to be carried out.
	Actions []Action `json:"actions"`
	// ProjectedUsedBytes is the usage expected after every action.
	ProjectedUsedBytes int64  `json:"projected_used_bytes"`
	Held               []Held `json:"held,omitempty"`
}

func marks(u Usage, f float64) int64 {
	if u.BudgetBytes <= 0 {
		return 0
	}
	return int64(math.Floor(float64(u.BudgetBytes) * f))
}

// NotAfter returns t, or now when t is after now: a time from a store or a
// caller is never later than the present (see the package comment).
func NotAfter(t, now time.Time) time.Time {
	if t.After(now) {
		return now
	}
	return t
}

// Idle returns how long before now t was, never negative (a t in the future
// is "now", NotAfter).
func Idle(t, now time.Time) time.Duration { return now.Sub(NotAfter(t, now)) }

// clamped returns a copy of s whose times are at most s.Now (NotAfter).
func clamped(s Snapshot) Snapshot {
	s.Workspaces, s.RepoCaches, s.Runtimes = slices.Clone(s.Workspaces), slices.Clone(s.RepoCaches), slices.Clone(s.Runtimes)
	s.DependencyCaches = slices.Clone(s.DependencyCaches)
	for i := range s.DependencyCaches {
		s.DependencyCaches[i].LastUsedAt = NotAfter(s.DependencyCaches[i].LastUsedAt, s.Now)
	}
	for i := range s.Workspaces {
		s.Workspaces[i].LastUsedAt = NotAfter(s.Workspaces[i].LastUsedAt, s.Now)
	}
	for i := range s.RepoCaches {
		s.RepoCaches[i].LastUsedAt = NotAfter(s.RepoCaches[i].LastUsedAt, s.Now)
	}
	for i := range s.Runtimes {
		r := &s.Runtimes[i]
		r.LastUsedAt, r.StateSince = NotAfter(r.LastUsedAt, s.Now), NotAfter(r.StateSince, s.Now)
	}
	return s
}

// NewPlan computes the ordered plan for s under p (see the package comment),
// every time of s clamped to s.Now first. p should be valid
// (Policy.Validate); s is not modified.
func NewPlan(s Snapshot, p Policy) Plan {
	s = clamped(s)
	b := &planner{p: p, now: s.Now, projected: s.Usage.UsedBytes,
		plan: Plan{HostID: s.HostID, Now: s.Now, Usage: s.Usage, Pressure: PressureNone, Actions: []Action{}}}
	if s.Usage.BudgetBytes > 0 {
		b.plan.HighBytes, b.plan.LowBytes, b.plan.SevereBytes = marks(s.Usage, p.HighWater), marks(s.Usage, p.LowWater), marks(s.Usage, p.SevereWater)
		switch {
		case s.Usage.UsedBytes >= b.plan.SevereBytes:
			b.plan.Pressure = PressureSevere
		case s.Usage.UsedBytes >= b.plan.HighBytes:
			b.plan.Pressure = PressureHigh
		}
	}
	b.runtimes(s.Runtimes)
	b.workspaces(s.Workspaces)
	b.dependencyCaches(s.DependencyCaches)
	b.repoCaches(s.Workspaces, s.RepoCaches)
	b.plan.ProjectedUsedBytes = b.projected
	return b.plan
}

// planner builds one Plan: the actions in order, each with the usage
// projected after it.
type planner struct {
	p         Policy
	now       time.Time
	projected int64
	plan      Plan
}

// add appends a, projecting the usage after it.
func (b *planner) add(a Action) {
	b.projected -= a.Bytes
	a.ProjectedUsedBytes = b.projected
	b.plan.Actions = append(b.plan.Actions, a)
}

func (b *planner) idle(t time.Time) time.Duration { return Idle(t, b.now) }

// runtimes plans the runtime tiers, least recently used first: stop the
// running (or starting) ones idle for RuntimeIdleStop, then destroy the
// stopped (or failed) ones in that state for RuntimeStoppedDestroy (since
// their last use when the state's time is unknown).
func (b *planner) runtimes(all []Runtime) {
	rts := slices.Clone(all)
	slices.SortFunc(rts, func(a, b Runtime) int {
		return cmp.Or(a.LastUsedAt.Compare(b.LastUsedAt), cmp.Compare(a.ID, b.ID))
	})
	p := b.p
	for _, r := range rts {
		if (r.State == sandbox.RuntimeRunning || r.State == sandbox.RuntimeStarting) && b.idle(r.LastUsedAt) >= p.RuntimeIdleStop {
			b.add(Action{Kind: ActionStopRuntime, Tier: TierRuntimeIdle, ID: r.ID, WorkspaceID: r.WorkspaceID, MinIdle: p.RuntimeIdleStop, LastUsedAt: r.LastUsedAt})
		}
	}
	for _, r := range rts {
		since := r.StateSince
		if since.IsZero() {
			since = r.LastUsedAt
		}
		if (r.State == sandbox.RuntimeStopped || r.State == sandbox.RuntimeError) && b.idle(since) >= p.RuntimeStoppedDestroy {
			b.add(Action{Kind: ActionDestroyRuntime, Tier: TierRuntimeStopped, ID: r.ID, WorkspaceID: r.WorkspaceID, MinIdle: p.RuntimeStoppedDestroy, LastUsedAt: since})
		}
	}
}

// workspaces plans the workspace tiers (docs/DESIGN.md "Eviction policy"),
// least recently used first within each: clean analysis, task and edit
// workspaces past their TTL whatever the pressure; under pressure, dirty
// task and analysis ones while the projection stays above the low water
// mark; under severe pressure, dirty edit ones while it stays at or above
// the severe mark. Pinned ready workspaces are held.
func (b *planner) workspaces(all []Workspace) {
	wss := slices.Clone(all)
	slices.SortFunc(wss, func(a, b Workspace) int {
		return cmp.Or(a.LastUsedAt.Compare(b.LastUsedAt), cmp.Compare(a.ID, b.ID))
	})
	var ready []Workspace
	for _, w := range wss {
		if w.State != sandboxapi.WorkspaceReady {
			continue
		}
		if w.Pinned(b.now) {
			b.plan.Held = append(b.plan.Held, Held{ID: w.ID, Kind: "workspace", Reason: "pinned until " + w.PinnedUntil.UTC().Format(time.RFC3339)})
			continue
		}
		ready = append(ready, w)
	}
	evict := func(w Workspace, tier Tier, minIdle time.Duration) {
		b.add(Action{Kind: ActionEvictWorkspace, Tier: tier, ID: w.ID, WorkspaceID: w.ID, Mode: w.Mode,
			SaveWork: w.HasUnsavedWork(), MinIdle: minIdle, LastUsedAt: w.LastUsedAt, Bytes: w.SizeBytes})
	}
	p := b.p
	for _, t := range []struct {
		tier Tier
		mode sandboxapi.WorkspaceMode
		ttl  time.Duration
	}{
		{TierCleanAnalysis, sandboxapi.ModeAnalysis, p.AnalysisTTL},
		{TierCleanTask, sandboxapi.ModeTask, p.TaskTTL},
		{TierCleanEdit, sandboxapi.ModeEdit, p.EditTTL},
	} {
		for _, w := range ready {
			if w.Mode == t.mode && !w.HasUnsavedWork() && b.idle(w.LastUsedAt) >= t.ttl {
				evict(w, t.tier, t.ttl)
			}
		}
	}
	if b.plan.Pressure != PressureNone {
		for _, w := range ready {
			if b.projected <= b.plan.LowBytes {
				break
			}
			if (w.Mode == sandboxapi.ModeTask || w.Mode == sandboxapi.ModeAnalysis) && w.HasUnsavedWork() && b.idle(w.LastUsedAt) >= p.PressureMinIdle {
				evict(w, TierDirtyTask, p.PressureMinIdle)
			}
		}
	}
	if b.plan.Pressure == PressureSevere {
		for _, w := range ready {
			if b.projected < b.plan.SevereBytes {
				break
			}
			if w.Mode == sandboxapi.ModeEdit && w.HasUnsavedWork() && b.idle(w.LastUsedAt) >= p.PressureMinIdle {
				evict(w, TierDirtyEdit, p.PressureMinIdle)
			}
		}
	}
}

// dependencyCaches plans the dependency cache tier, only under pressure and
// while the projection stays above the low water mark: caches unused for
// PressureMinIdle, highest idle time × size first.
func (b *planner) dependencyCaches(all []DependencyCache) {
	if b.plan.Pressure == PressureNone {
		return
	}
	var idle []cacheCandidate
	for _, c := range all {
		if b.idle(c.LastUsedAt) >= b.p.PressureMinIdle {
			idle = append(idle, cacheCandidate{c.ID, c.LastUsedAt, c.SizeBytes})
		}
	}
	b.removeLRUBySize(idle, ActionRemoveDependencyCache, TierDependencyCacheLRU)
}

// cacheCandidate is a cache a tier may remove: its id, last use and size.
type cacheCandidate struct {
	id       string
	lastUsed time.Time
	size     int64
}

// removeLRUBySize plans removing candidates, highest idle time × size
// first (ties: least recently used, then id), while the projection stays
// above the low water mark.
func (b *planner) removeLRUBySize(candidates []cacheCandidate, kind ActionKind, tier Tier) {
	score := func(c cacheCandidate) float64 { return b.idle(c.lastUsed).Seconds() * float64(max(c.size, 1)) }
	slices.SortFunc(candidates, func(x, y cacheCandidate) int {
		return cmp.Or(cmp.Compare(score(y), score(x)), x.lastUsed.Compare(y.lastUsed), cmp.Compare(x.id, y.id))
	})
	for _, c := range candidates {
		if b.projected <= b.plan.LowBytes {
			break
		}
		b.add(Action{Kind: kind, Tier: tier, ID: c.id, MinIdle: b.p.PressureMinIdle, LastUsedAt: c.lastUsed, Bytes: c.size})
	}
}

// repoCaches plans the repo cache tier, only under pressure and while the
// projection stays above the low water mark: ready caches no workspace row
// (but removed ones) references, holding no commits only they have, unused
// for PressureMinIdle, highest idle time × size first. Referenced and
// unsaved-work caches are held (reported under pressure only).
func (b *planner) repoCaches(wss []Workspace, all []RepoCache) {
	refs := map[string]int{}
	for _, w := range wss {
		if w.State != sandboxapi.WorkspaceRemoved && w.RepoCacheID != "" {
			refs[w.RepoCacheID]++
		}
	}
	var caches []cacheCandidate
	pressure := b.plan.Pressure != PressureNone
	for _, c := range all {
		if c.State != sandbox.RepoCacheReady {
			continue
		}
		switch {
		case refs[c.ID] > 0:
			if pressure {
				b.plan.Held = append(b.plan.Held, Held{ID: c.ID, Kind: "repo_cache", Reason: "used by workspaces"})
			}
			continue
		case c.HoldsUnsavedWork:
			if pressure {
				b.plan.Held = append(b.plan.Held, Held{ID: c.ID, Kind: "repo_cache", Reason: "holds commits on no remote branch"})
			}
			continue
		case b.idle(c.LastUsedAt) < b.p.PressureMinIdle:
			continue
		}
		caches = append(caches, cacheCandidate{c.ID, c.LastUsedAt, c.SizeBytes})
	}
	if !pressure {
		return
	}
	b.removeLRUBySize(caches, ActionRemoveRepoCache, TierRepoCacheLRU)
}

// Count returns how many actions of kind the plan holds.
func (p Plan) Count(kind ActionKind) int {
	n := 0
	for _, a := range p.Actions {
		if a.Kind == kind {
			n++
		}
	}
	return n
}
