package activities

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sandboxcore/sandboxcore/internal/overlaps"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/internal/wire"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// ChangeSummarizer is the optional capability of a workspace provider that
// overlaps needs: what a workspace changed since its base (implemented by
// internal/workspace; docs/API.md "Overlaps").
type ChangeSummarizer interface {
	Changes(ctx context.Context, ws sandboxapi.Workspace) (overlaps.Summary, error)
}

// changeCache keeps the change summaries overlaps read of the host's other
// workspaces, so that asking costs one summary (the caller's own) plus one
// per workspace that changed since it was last read. A workspace "changed"
// when any activity loaded or touched it after the summary was read (every
// operation does, at its start and its end), while an exec of it runs, and,
// for a workspace that ever started a background process on this worker,
// when the summary is older than sandboxapi.OverlapsStaleAfter.
type changeCache struct {
	mu      sync.Mutex
	entries map[string]overlaps.Summary
	marks   map[string]time.Time // last load or touch of each workspace
	procs   map[string]bool      // workspaces that started a background process
}

// mark records that an activity loaded or touched workspace id at t.
func (c *changeCache) mark(id string, t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.marks == nil {
		c.marks = map[string]time.Time{}
	}
	if t.After(c.marks[id]) {
		c.marks[id] = t
	}
}

// markProcess records that workspace id started a background process.
func (c *changeCache) markProcess(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.procs == nil {
		c.procs = map[string]bool{}
	}
	c.procs[id] = true
}

// get returns the summary of id when it is still current at now.
func (c *changeCache) get(id string, now time.Time) (overlaps.Summary, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.entries[id]
	if !ok || !s.ReadAt.After(c.marks[id]) {
		return overlaps.Summary{}, false
	}
	if c.procs[id] && now.Sub(s.ReadAt) >= sandboxapi.OverlapsStaleAfter {
		return overlaps.Summary{}, false
	}
	return s, true
}

func (c *changeCache) put(id string, s overlaps.Summary) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		c.entries = map[string]overlaps.Summary{}
	}
	c.entries[id] = s
}

// forget drops a workspace (destroyed or evicted).
func (c *changeCache) forget(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.entries, id)
}

// execRunning reports whether an exec of workspace id runs on this host.
func (a *Activities) execRunning(id string) bool {
	a.execMu.Lock()
	e := a.execs[id]
	a.execMu.Unlock()
	return e != nil && len(e.sem) > 0
}

// Overlaps answers the overlaps update (docs/API.md "Overlaps"): the other
// live workspaces of this workspace's repository, user and project (never
// anyone else's), with the files both changed since their bases, ordered by
// risk. Workspaces on other hosts, evicted ones and unreadable ones are
// listed as not checked; analysis workspaces (read-only) and removed ones
// are left out. Errors: ErrWorkspaceUnavailable (the caller's own changes
// could not be read, or a store failure), ErrCommandRejected (a provider
// without change summaries).
func (a *Activities) Overlaps(ctx context.Context, in wire.WorkspaceActivityInput) (sandboxapi.OverlapsResult, error) {
	ws, err := a.workspace(ctx, in.WorkspaceID)
	if err != nil {
		return sandboxapi.OverlapsResult{}, err
	}
	cs, ok := a.Workspaces.(ChangeSummarizer)
	if !ok {
		return sandboxapi.OverlapsResult{}, sandboxapi.Errorf(sandboxapi.ErrCommandRejected, "this host's workspace provider cannot summarize changes")
	}
	self, err := whileHeartbeating(ctx, func() (overlaps.Summary, error) { return cs.Changes(ctx, ws) })
	if err != nil {
		return sandboxapi.OverlapsResult{}, err
	}
	res := sandboxapi.OverlapsResult{WorkspaceID: ws.ID, BaseCommit: self.BaseCommit, Changed: len(self.Files), Overlaps: []sandboxapi.Overlap{}}
	rows, err := a.Store.ListWorkspaces(ctx, sandbox.WorkspaceFilter{UserID: ws.UserID, ProjectID: ws.ProjectID})
	if err != nil {
		return sandboxapi.OverlapsResult{}, sandboxapi.Errorf(sandboxapi.ErrWorkspaceUnavailable, "list the workspaces of the repository: %v", err)
	}
	slices.SortFunc(rows, func(x, y sandboxapi.Workspace) int { return strings.Compare(x.ID, y.ID) })
	var others []overlaps.Other
	for _, o := range rows {
		// The store filtered by user and project; checked again here, with
		// the repository, so a filter bug can never show another tenant's work.
		if o.ID == ws.ID || o.UserID != ws.UserID || o.ProjectID != ws.ProjectID || o.Repo.Key() != ws.Repo.Key() ||
			o.Mode == sandboxapi.ModeAnalysis || o.State == sandboxapi.WorkspaceRemoved {
			continue
		}
		skip := sandboxapi.UncheckedWorkspace{WorkspaceID: o.ID, Mode: o.Mode, Branch: o.BranchName, HostID: o.HostID}
		switch {
		case o.HostID != a.HostID:
			skip.Reason = sandboxapi.UncheckedOtherHost
		case o.State == sandboxapi.WorkspaceEvicted:
			a.changes.forget(o.ID)
			skip.Reason = sandboxapi.UncheckedEvicted
		case o.State != sandboxapi.WorkspaceReady:
			skip.Reason, skip.Message = sandboxapi.UncheckedUnreadable, "workspace is "+string(o.State)
		}
		if skip.Reason != "" {
			res.NotChecked = append(res.NotChecked, skip)
			continue
		}
		s, ok := a.changes.get(o.ID, a.now())
		if !ok || a.execRunning(o.ID) {
			if s, err = cs.Changes(ctx, o); err != nil {
				skip.Reason, skip.Message = sandboxapi.UncheckedUnreadable, sandboxapi.Message(err)
				res.NotChecked = append(res.NotChecked, skip)
				continue
			}
			a.changes.put(o.ID, s)
		}
		others = append(others, overlaps.Other{Workspace: o, Summary: s})
	}
	res.Checked = len(others)
	res.Overlaps = overlaps.Find(self, others)
	if len(res.Overlaps) > sandboxapi.MaxOverlapWorkspaces {
		res.Overlaps, res.Truncated = res.Overlaps[:sandboxapi.MaxOverlapWorkspaces], true
	}
	if len(res.NotChecked) > sandboxapi.MaxOverlapWorkspaces {
		res.NotChecked, res.Truncated = res.NotChecked[:sandboxapi.MaxOverlapWorkspaces], true
	}
	a.touch(ctx, ws.ID, false)
	return res, nil
}
