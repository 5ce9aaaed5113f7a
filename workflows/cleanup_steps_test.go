package workflows

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/wire"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// A workspace listed by its session and by its host's store is one
// outcome: the first listing's fields win, the later ones only fill gaps;
// outcomes come in workspace id order.
func TestCleanupCandidatesMergeListings(t *testing.T) {
	c := cleanupCandidates{found: map[string]*sandboxapi.CleanupOutcome{}}
	c.add([]wire.CleanupCandidate{{WorkspaceID: "ws-b", State: "active"}, {WorkspaceID: "ws-c", HostID: "h1", Mode: "edit"}})
	c.add([]wire.CleanupCandidate{{WorkspaceID: "ws-b", HostID: "h2", Mode: "task", ProjectID: "p", State: "removed"}, {WorkspaceID: "ws-a", HostID: "h2"}})
	got := c.outcomes()
	require.Len(t, got, 3)
	assert.Equal(t, []string{"ws-a", "ws-b", "ws-c"}, []string{got[0].WorkspaceID, got[1].WorkspaceID, got[2].WorkspaceID})
	assert.Equal(t, sandboxapi.CleanupOutcome{WorkspaceID: "ws-b", HostID: "h2", Mode: "task", ProjectID: "p", State: "active", Outcome: sandboxapi.CleanupWouldDestroy}, got[1])
	assert.Equal(t, "h1", got[2].HostID)
	empty := cleanupCandidates{found: map[string]*sandboxapi.CleanupOutcome{}}
	assert.NotNil(t, empty.outcomes(), "no workspaces is an empty list, not null")
}

func TestRecordDestroyAndSummarize(t *testing.T) {
	rep := sandboxapi.CleanupReport{Workspaces: make([]sandboxapi.CleanupOutcome, 4)}
	recordDestroy(&rep.Workspaces[0], sandboxapi.DestroyResult{Existed: true, BackupRef: "refs/sandbox/backup/x", Message: "saved"}, nil)
	recordDestroy(&rep.Workspaces[1], sandboxapi.DestroyResult{Existed: true}, nil)
	recordDestroy(&rep.Workspaces[2], sandboxapi.DestroyResult{Message: "nothing there"}, nil)
	recordDestroy(&rep.Workspaces[3], sandboxapi.DestroyResult{Existed: true}, sandboxapi.Errorf(sandboxapi.ErrConflict, "backup pending"))
	assert.Equal(t, sandboxapi.CleanupDestroyed, rep.Workspaces[0].Outcome)
	assert.Equal(t, "saved", rep.Workspaces[0].Message)
	assert.Equal(t, sandboxapi.CleanupGone, rep.Workspaces[2].Outcome)
	assert.Equal(t, sandboxapi.CleanupFailed, rep.Workspaces[3].Outcome)
	assert.Nil(t, rep.Workspaces[3].Result, "a failure records no result")
	assert.Contains(t, rep.Workspaces[3].Message, "backup pending")
	summarizeCleanup(&rep)
	assert.Equal(t, 2, rep.Summary.Destroyed)
	assert.Equal(t, 1, rep.Summary.Backups)
	assert.Equal(t, 1, rep.Summary.Gone)
	assert.Equal(t, 1, rep.Summary.Failed)
}
