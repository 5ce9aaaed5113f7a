package activities

import (
	"context"
	"strings"
	"testing"

	"github.com/sandboxcore/sandboxcore/internal/gittest"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/internal/wire"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// TestAcquireKeepsALegacyWorkspacesBranch: a workspace recorded before
// tenant segments (its row says agent/edits-c1) comes back on that branch
// when an agent acquires it with today's request (no branch_name), also
// after its worktree went (a repair), and by id (resume): the branch comes
// from the row, never from the derivation (docs/API.md "Identity").
func TestAcquireKeepsALegacyWorkspacesBranch(t *testing.T) {
	h := newTestHost(t)
	ctx := context.Background()
	legacy := h.request(sandbox.ModeEdit, "c1")
	legacy.BranchName = "agent/edits-c1"
	ws := h.acquire(legacy).Workspace
	// The row as an older worker wrote it: the legacy branch, no override
	// in the request an agent sends.
	req := h.request(sandbox.ModeEdit, "c1")
	again := h.acquire(req).Workspace
	if again.BranchName != "agent/edits-c1" || again.LocalPath != ws.LocalPath {
		t.Fatalf("re-acquire: branch %q path %q, want the recorded %q %q", again.BranchName, again.LocalPath, "agent/edits-c1", ws.LocalPath)
	}
	// A repair (the directory is gone) re-creates it on the recorded branch.
	if err := h.acts.Workspaces.Remove(ctx, ws); err != nil {
		t.Fatal(err)
	}
	repaired := h.acquire(req).Workspace
	if repaired.BranchName != "agent/edits-c1" || repaired.LocalPath != ws.LocalPath {
		t.Fatalf("repair: branch %q path %q", repaired.BranchName, repaired.LocalPath)
	}
	if head := gittest.Git(t, repaired.LocalPath, "symbolic-ref", "--short", "HEAD"); head != "agent/edits-c1" {
		t.Fatalf("repaired worktree on %s", head)
	}
	var res wire.AcquireActivityResult
	if err := h.run(wire.ActivityAcquire, wire.AcquireActivityInput{WorkspaceID: ws.ID}, &res); err != nil {
		t.Fatal(err)
	}
	if res.Workspace.BranchName != "agent/edits-c1" {
		t.Fatalf("resume by id: branch %q", res.Workspace.BranchName)
	}
	if out := gittest.Git(t, repaired.LocalPath, "branch", "--list", req.Branch()); out != "" {
		t.Fatalf("the derived branch was made for an existing workspace: %q", out)
	}
}

// TestBranchNameHeldByAnotherTenantIsRefused: bob may not name, as his
// branch_name, the branch alice's workspace holds (ready, or evicted with
// its branch kept): SandboxConflict, no row, no worktree, and the message
// names neither alice nor her workspace or path.
func TestBranchNameHeldByAnotherTenantIsRefused(t *testing.T) {
	h := newTestHost(t)
	alice := h.request(sandbox.ModeEdit, "c1")
	alice.BranchName = "agent/feature-x"
	aws := h.acquire(alice).Workspace
	for _, state := range []sandbox.WorkspaceState{sandbox.WorkspaceReady, sandbox.WorkspaceEvicted} {
		row, err := h.store.GetWorkspace(context.Background(), aws.ID)
		if err != nil {
			t.Fatal(err)
		}
		row.State = state
		if err := h.store.UpdateWorkspace(context.Background(), row); err != nil {
			t.Fatal(err)
		}
		bob := h.request(sandbox.ModeEdit, "c1")
		bob.UserID = "bob"
		bob.BranchName = "agent/feature-x"
		id := sandbox.WorkspaceIDForKey(bob.Key())
		err = h.run(wire.ActivityAcquire, wire.AcquireActivityInput{WorkspaceID: id, Request: &bob}, nil)
		app := wantAppError(t, err, sandboxapi.ErrConflict)
		for _, leak := range []string{"alice", aws.ID, aws.LocalPath, "c1_"} {
			if strings.Contains(app.Error(), leak) {
				t.Errorf("%s: the refusal names %q: %v", state, leak, app)
			}
		}
		if _, err := h.store.GetWorkspace(context.Background(), id); err == nil {
			t.Errorf("%s: a refused acquire left a row", state)
		}
	}
	// Alice herself comes back to her branch.
	row, _ := h.store.GetWorkspace(context.Background(), aws.ID)
	row.State = sandbox.WorkspaceReady
	if err := h.store.UpdateWorkspace(context.Background(), row); err != nil {
		t.Fatal(err)
	}
	if got := h.acquire(alice).Workspace.BranchName; got != "agent/feature-x" {
		t.Fatalf("alice's branch %q", got)
	}
}
