package activities

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// The row acquire records: this host, the plan's network policy and base
// ref; a repaired or resumed workspace keeps its creation time, pin, first
// base commit of the same branch and that base's fetch time; a re-used
// tombstone and a new workspace start now (a new one keeps a creation time
// the provider set).
func TestRecordedRow(t *testing.T) {
	a := &Activities{HostID: "h1"}
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	now := t0.Add(48 * time.Hour)
	pin, fetched := t0.Add(time.Hour), t0.Add(time.Minute)
	existing := sandboxapi.Workspace{ID: "ws-1", CreatedAt: t0, PinnedUntil: &pin, BranchName: "b", BaseCommit: "c1", BaseFetchedAt: &fetched, HostID: "h0"}
	p := acquirePlan{found: true, existing: existing, network: sandboxapi.NetworkLimited, networkAllow: []string{"x:1"},
		req: sandboxapi.WorkspaceRequest{BaseRef: "main"}}
	ws := sandboxapi.Workspace{ID: "ws-1", BranchName: "b", BaseCommit: "c2"}

	got := a.recordedRow(ws, p, false, now)
	assert.Equal(t, "h1", got.HostID)
	assert.Equal(t, sandboxapi.NetworkLimited, got.Network)
	assert.Equal(t, []string{"x:1"}, got.NetworkAllow)
	assert.Equal(t, "main", got.BaseRef)
	assert.Equal(t, now, got.LastUsedAt)
	assert.Equal(t, now, got.UpdatedAt)
	assert.Equal(t, t0, got.CreatedAt)
	assert.Equal(t, &pin, got.PinnedUntil)
	assert.Equal(t, "c1", got.BaseCommit, "the branch keeps its first base")
	assert.Equal(t, &fetched, got.BaseFetchedAt)

	other := ws
	other.BranchName = "other"
	got = a.recordedRow(other, p, false, now)
	assert.Equal(t, "c2", got.BaseCommit, "another branch: the new base")
	assert.Nil(t, got.BaseFetchedAt)

	got = a.recordedRow(ws, p, true, now)
	assert.Equal(t, now, got.CreatedAt, "a re-used tombstone is a new workspace")
	assert.Nil(t, got.PinnedUntil)
	assert.Equal(t, "c2", got.BaseCommit)

	p.found = false
	got = a.recordedRow(ws, p, true, now)
	assert.Equal(t, now, got.CreatedAt)
	set := ws
	set.CreatedAt = t0
	assert.Equal(t, t0, a.recordedRow(set, p, true, now).CreatedAt)
}
