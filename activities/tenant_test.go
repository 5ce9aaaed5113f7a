package activities

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandboxcore/sandboxcore/internal/gittest"
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
	legacy := h.request(sandboxapi.ModeEdit, "c1")
	legacy.BranchName = "agent/edits-c1"
	ws := h.acquire(legacy).Workspace
	// The row as an older worker wrote it: the legacy branch, no override
	// in the request an agent sends.
	req := h.request(sandboxapi.ModeEdit, "c1")
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
	alice := h.request(sandboxapi.ModeEdit, "c1")
	alice.BranchName = "agent/feature-x"
	aws := h.acquire(alice).Workspace
	for _, state := range []sandboxapi.WorkspaceState{sandboxapi.WorkspaceReady, sandboxapi.WorkspaceEvicted} {
		row, err := h.store.GetWorkspace(context.Background(), aws.ID)
		if err != nil {
			t.Fatal(err)
		}
		row.State = state
		if err := h.store.UpdateWorkspace(context.Background(), row); err != nil {
			t.Fatal(err)
		}
		bob := h.request(sandboxapi.ModeEdit, "c1")
		bob.UserID = "bob"
		bob.BranchName = "agent/feature-x"
		id := sandboxapi.WorkspaceIDForKey(bob.Key())
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
	row.State = sandboxapi.WorkspaceReady
	if err := h.store.UpdateWorkspace(context.Background(), row); err != nil {
		t.Fatal(err)
	}
	if got := h.acquire(alice).Workspace.BranchName; got != "agent/feature-x" {
		t.Fatalf("alice's branch %q", got)
	}
}

// TestExecsOfOneWorkspaceNeverOverlapOnTheHost: two exec starts of one
// workspace (as two sessions of it would send them) never run their
// commands at once: the second starts only after the first ended, and one
// whose deadline comes first is refused with SandboxConflict, its command
// never started. Another workspace's exec is not held up.
func TestExecsOfOneWorkspaceNeverOverlapOnTheHost(t *testing.T) {
	h := newTestHost(t)
	ws := h.acquire(h.request(sandboxapi.ModeEdit, "c1")).Workspace
	other := h.acquire(h.request(sandboxapi.ModeEdit, "c2")).Workspace
	ctx := context.Background()
	sh := func(script string) sandboxapi.ExecRequest {
		return sandboxapi.ExecRequest{Cmd: []string{"sh", "-c", script}}
	}
	first, err := h.acts.startExec(ctx, wire.ExecActivityInput{WorkspaceID: ws.ID, ProcessID: "exec-first",
		Request: sh("touch a.start; sleep 2; touch a.end")})
	if err != nil || first.Done {
		t.Fatalf("first start: %+v %v", first, err)
	}
	// Another workspace runs at once.
	began := time.Now()
	if res, err := h.acts.startExec(ctx, wire.ExecActivityInput{WorkspaceID: other.ID, ProcessID: "exec-other", Request: sh("true"), Wait: 5 * time.Second}); err != nil || !res.Done {
		t.Fatalf("other workspace: %+v %v", res, err)
	}
	if time.Since(began) > 1500*time.Millisecond {
		t.Errorf("another workspace's exec waited %s", time.Since(began))
	}
	// A start whose deadline comes before the first ends is refused, and
	// its command never runs.
	short, cancel := context.WithTimeout(ctx, execLockMargin+500*time.Millisecond)
	_, err = h.acts.startExec(short, wire.ExecActivityInput{WorkspaceID: ws.ID, ProcessID: "exec-refused", Request: sh("touch refused")})
	cancel()
	// A direct call returns the typed error (ErrorTranslation makes it an
	// application error on the way out of a worker).
	if !errors.Is(err, sandboxapi.ErrConflict) {
		t.Fatalf("refused start: %v; want %s", err, sandboxapi.ErrConflict.Type)
	}
	// The second waits for the first, then runs.
	second, err := h.acts.startExec(ctx, wire.ExecActivityInput{WorkspaceID: ws.ID, ProcessID: "exec-second",
		Request: sh(`if [ -e a.end ]; then echo after; else echo overlap; fi`), Wait: 10 * time.Second})
	if err != nil || !second.Done {
		t.Fatalf("second start: %+v %v", second, err)
	}
	if got := strings.TrimSpace(string(second.Result.Stdout)); got != "after" {
		t.Fatalf("the second exec ran while the first did: %q", got)
	}
	if _, err := os.Stat(filepath.Join(ws.LocalPath, "refused")); err == nil {
		t.Fatal("the refused exec's command ran")
	}
}
