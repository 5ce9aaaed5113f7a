package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// ---- durability and concurrency ----

func testPersistsAcrossReopen(t *testing.T, f Factory) {
	ctx := context.Background()
	s, reopen := openStore(t, f)

	rc := repoCache("rc-1")
	analysis := workspace(sandboxapi.ModeAnalysis, "u1", "p1", "main")
	analysis.PinnedUntil = nil
	edit := workspace(sandboxapi.ModeEdit, "u1", "p1", "conv-1")
	rt := runtimeRecord(sandboxapi.RuntimeIDFor(edit.ID), edit.ID)
	require.NoError(t, s.UpsertRepoCache(ctx, rc))
	require.NoError(t, s.CreateWorkspace(ctx, analysis))
	require.NoError(t, s.CreateWorkspace(ctx, edit))
	require.NoError(t, s.UpsertRuntime(ctx, rt))
	require.NoError(t, s.TouchWorkspace(ctx, edit.ID, ts(9*time.Hour+9)))
	edit.LastUsedAt, edit.UpdatedAt = ts(9*time.Hour+9), ts(9*time.Hour+9)
	require.NoError(t, s.Close())

	s = reopen()
	gotRC, err := s.GetRepoCache(ctx, rc.ID)
	require.NoError(t, err)
	assert.Equal(t, rc, gotRC)
	wss, err := s.ListWorkspaces(ctx, sandbox.WorkspaceFilter{})
	require.NoError(t, err)
	assert.Equal(t, []sandboxapi.Workspace{analysis, edit}, wss)
	gotRT, err := s.GetRuntime(ctx, rt.ID)
	require.NoError(t, err)
	assert.Equal(t, rt, gotRT)

	// Uniqueness still holds after reopening.
	dup := edit
	dup.ID, dup.Key = "ws-dup", "dup"
	require.ErrorIs(t, s.CreateWorkspace(ctx, dup), sandboxapi.ErrConflict)

	// And writes made after reopening persist too.
	require.NoError(t, s.DeleteWorkspace(ctx, analysis.ID))
	require.NoError(t, s.Close())
	s = reopen()
	_, err = s.GetWorkspace(ctx, analysis.ID)
	require.ErrorIs(t, err, sandboxapi.ErrWorkspaceNotFound)
	got, err := s.GetWorkspace(ctx, edit.ID)
	require.NoError(t, err)
	assert.Equal(t, edit, got)
}

const goroutines = 8

func testConcurrentCreateSameKey(t *testing.T, f Factory) {
	ctx := context.Background()
	s, _ := openStore(t, f)
	base := workspace(sandboxapi.ModeEdit, "u1", "p1", "conv-1")

	// Half the callers use the derived id (the normal case), half a different
	// id with the same (user, project, conversation) key: both must collide.
	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
		errs  = make([]error, goroutines)
	)
	for i := range goroutines {
		ws := base
		if i%2 == 1 {
			ws.ID = fmt.Sprintf("ws-racer-%d", i)
			ws.Key = fmt.Sprintf("racer-%d", i)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			errs[i] = s.CreateWorkspace(ctx, ws)
		}()
	}
	close(start)
	wg.Wait()

	ok := 0
	for i, err := range errs {
		if err == nil {
			ok++
			continue
		}
		assert.ErrorIs(t, err, sandboxapi.ErrConflict, "goroutine %d: %v", i, err)
	}
	assert.Equal(t, 1, ok, "exactly one concurrent create succeeds")
	all, err := s.ListWorkspaces(ctx, sandbox.WorkspaceFilter{})
	require.NoError(t, err)
	assert.Len(t, all, 1)
}

func testConcurrentCreateDistinctKeys(t *testing.T, f Factory) {
	ctx := context.Background()
	s, _ := openStore(t, f)
	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
		errs  = make([]error, goroutines)
	)
	for i := range goroutines {
		ws := workspace(sandboxapi.ModeEdit, "u1", "p1", fmt.Sprintf("conv-%d", i))
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			if errs[i] = s.CreateWorkspace(ctx, ws); errs[i] != nil {
				return
			}
			if errs[i] = s.TouchWorkspace(ctx, ws.ID, ts(time.Duration(i))); errs[i] != nil {
				return
			}
			_, errs[i] = s.ListWorkspaces(ctx, sandbox.WorkspaceFilter{UserID: "u1"})
		}()
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "goroutine %d", i)
	}
	all, err := s.ListWorkspaces(ctx, sandbox.WorkspaceFilter{})
	require.NoError(t, err)
	assert.Len(t, all, goroutines)
}
