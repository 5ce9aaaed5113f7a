package activities

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandboxcore/sandboxcore/internal/gittest"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/internal/wire"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// Bad input to acquire is refused with its typed, non-retryable error
// before any git work: no repo cache, no worktree, no row.
func TestAcquireRefusesBadInputAndChangesNothing(t *testing.T) {
	h := newTestHost(t)
	good := h.request(sandboxapi.ModeEdit, "c1")
	goodID := sandboxapi.WorkspaceIDForKey(good.Key())
	noConv := h.request(sandboxapi.ModeEdit, "")
	hostile := good
	hostile.RepoURL = "ext::sh -c touch% /tmp/pwned"
	badBranch := good
	badBranch.BranchName = "../../main"
	cases := []struct {
		name string
		in   wire.AcquireActivityInput
		want *sandboxapi.Kind
	}{
		{"workspace id with a path", wire.AcquireActivityInput{WorkspaceID: "../ws", Request: &good}, sandboxapi.ErrInvalidArgument},
		{"the request's key is another workspace's", wire.AcquireActivityInput{WorkspaceID: sandboxapi.WorkspaceIDForKey("edit|bob|p1|c9"), Request: &good}, sandboxapi.ErrInvalidArgument},
		{"edit mode without a conversation", wire.AcquireActivityInput{WorkspaceID: sandboxapi.WorkspaceIDForKey(noConv.Key()), Request: &noConv}, sandboxapi.ErrInvalidArgument},
		{"a transport that runs commands", wire.AcquireActivityInput{WorkspaceID: goodID, Request: &hostile}, sandboxapi.ErrInvalidArgument},
		{"a branch that climbs", wire.AcquireActivityInput{WorkspaceID: goodID, Request: &badBranch}, sandboxapi.ErrInvalidArgument},
		{"resume of an unknown workspace", wire.AcquireActivityInput{WorkspaceID: goodID}, sandboxapi.ErrWorkspaceNotFound},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := h.run(wire.ActivityAcquire, c.in, nil)
			wantAppError(t, err, c.want)
		})
	}
	if _, err := os.Stat(filepath.Join(h.dataDir, "repos")); err == nil {
		entries, _ := os.ReadDir(filepath.Join(h.dataDir, "repos"))
		if len(entries) != 0 {
			t.Errorf("refused acquires left %d entries under repos/", len(entries))
		}
	}
	wss, err := h.store.ListWorkspaces(context.Background(), sandbox.WorkspaceFilter{})
	if err != nil {
		t.Fatal(err)
	}
	caches, err := h.store.ListRepoCaches(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(wss) != 0 || len(caches) != 0 {
		t.Errorf("refused acquires recorded %d workspaces and %d repo caches", len(wss), len(caches))
	}
}

// A base ref the repository does not have is RefNotFound (after a fetch),
// non-retryable, and records no workspace.
func TestAcquireUnknownBaseRefIsRefNotFound(t *testing.T) {
	h := newTestHost(t)
	req := h.request(sandboxapi.ModeEdit, "c1")
	req.BaseRef = "no-such-branch"
	err := h.run(wire.ActivityAcquire, wire.AcquireActivityInput{WorkspaceID: sandboxapi.WorkspaceIDForKey(req.Key()), Request: &req}, nil)
	wantAppError(t, err, sandboxapi.ErrRefNotFound)
	if _, err := h.store.GetWorkspace(context.Background(), sandboxapi.WorkspaceIDForKey(req.Key())); !errors.Is(err, sandboxapi.ErrWorkspaceNotFound) {
		t.Errorf("a refused acquire left a workspace row (GetWorkspace: %v)", err)
	}
}

// Acquiring the same key twice (an activity retry, or a second session run)
// returns the same workspace and leaves the same state: one row, one
// worktree at the same path, branch and commit, the agent's files intact.
func TestAcquireTwiceLeavesTheSameState(t *testing.T) {
	h := newTestHost(t)
	req := h.request(sandboxapi.ModeEdit, "c1")
	first := h.acquire(req)
	if !first.Created {
		t.Errorf("first acquire: Created = false")
	}
	ws := first.Workspace
	if ws.BranchName != req.Branch() || ws.HostID != testHostID || ws.State != sandboxapi.WorkspaceReady {
		t.Fatalf("first acquire: branch %q host %q state %q", ws.BranchName, ws.HostID, ws.State)
	}
	upstreamHead := gittest.Git(t, h.upstream, "rev-parse", "main")
	if head := gittest.Git(t, ws.LocalPath, "rev-parse", "HEAD"); head != upstreamHead {
		t.Fatalf("worktree HEAD %s, upstream main %s", head, upstreamHead)
	}
	// The agent's uncommitted work must survive the second acquire.
	if err := os.WriteFile(filepath.Join(ws.LocalPath, "notes.txt"), []byte("keep me\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	second := h.acquire(req)
	if second.Created {
		t.Errorf("second acquire: Created = true")
	}
	w2 := second.Workspace
	if w2.ID != ws.ID || w2.LocalPath != ws.LocalPath || w2.BranchName != ws.BranchName || w2.BaseCommit != ws.BaseCommit || w2.RepoCacheID != ws.RepoCacheID {
		t.Errorf("second acquire: %+v\nfirst: %+v", w2, ws)
	}
	if got, err := os.ReadFile(filepath.Join(ws.LocalPath, "notes.txt")); err != nil || string(got) != "keep me\n" {
		t.Errorf("the agent's file after the second acquire: %q, %v", got, err)
	}
	wss, err := h.store.ListWorkspaces(context.Background(), sandbox.WorkspaceFilter{})
	if err != nil {
		t.Fatal(err)
	}
	caches, err := h.store.ListRepoCaches(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(wss) != 1 || len(caches) != 1 {
		t.Errorf("after two acquires: %d workspace rows, %d repo cache rows; want 1 and 1", len(wss), len(caches))
	}
	out := gittest.Git(t, ws.LocalPath, "worktree", "list", "--porcelain")
	checkedOut := 0
	for _, line := range strings.Split(out, "\n") {
		if line == "branch refs/heads/"+req.Branch() {
			checkedOut++
		}
	}
	if checkedOut != 1 {
		t.Errorf("the branch is checked out in %d worktrees, want 1:\n%s", checkedOut, out)
	}
}

// Acquire repairs a worktree whose directory went missing, at the same
// path and branch, keeping the row (the workspace's identity).
func TestAcquireRepairsAMissingWorktree(t *testing.T) {
	h := newTestHost(t)
	req := h.request(sandboxapi.ModeEdit, "c1")
	ws := h.acquire(req).Workspace
	committed := gittest.Git(t, ws.LocalPath, "rev-parse", "HEAD")
	if err := os.RemoveAll(ws.LocalPath); err != nil {
		t.Fatal(err)
	}
	res := h.acquire(req)
	if res.Created || res.Workspace.LocalPath != ws.LocalPath || res.Workspace.BranchName != ws.BranchName {
		t.Fatalf("repair: created %v path %q branch %q; want false %q %q", res.Created, res.Workspace.LocalPath, res.Workspace.BranchName, ws.LocalPath, ws.BranchName)
	}
	if head := gittest.Git(t, ws.LocalPath, "rev-parse", "HEAD"); head != committed {
		t.Errorf("repaired worktree at %s, want %s", head, committed)
	}
	if !res.Workspace.CreatedAt.Equal(ws.CreatedAt) {
		t.Errorf("repair changed created_at: %v, was %v", res.Workspace.CreatedAt, ws.CreatedAt)
	}
}

// A key already bound to one repository refuses another with SandboxConflict.
func TestAcquireAnotherRepositoryUnderTheSameKeyIsAConflict(t *testing.T) {
	h := newTestHost(t)
	req := h.request(sandboxapi.ModeEdit, "c1")
	ws := h.acquire(req).Workspace
	other := req
	other.RepoURL = gittest.FileURL(gittest.InitRepo(t, filepath.Join(t.TempDir(), "up", "team", "other"), "main"))
	err := h.run(wire.ActivityAcquire, wire.AcquireActivityInput{WorkspaceID: ws.ID, Request: &other}, nil)
	wantAppError(t, err, sandboxapi.ErrConflict)
	got, err := h.store.GetWorkspace(context.Background(), ws.ID)
	if err != nil || got.Repo.Key() != ws.Repo.Key() {
		t.Errorf("after the conflict the row is %+v, %v", got.Repo, err)
	}
}

// A workspace recorded by another host is WorkspaceUnavailable here, for
// acquire and for every operation that loads it.
func TestAWorkspaceOfAnotherHostIsUnavailable(t *testing.T) {
	h := newTestHost(t)
	req := h.request(sandboxapi.ModeEdit, "c1")
	ws := h.acquire(req).Workspace
	ws.HostID = "host-b"
	if err := h.store.UpdateWorkspace(context.Background(), ws); err != nil {
		t.Fatal(err)
	}
	wantAppError(t, h.run(wire.ActivityAcquire, wire.AcquireActivityInput{WorkspaceID: ws.ID, Request: &req}, nil), sandboxapi.ErrWorkspaceUnavailable)
	wantAppError(t, h.run(wire.OpActivity(sandboxapi.UpdateStatus), wire.WorkspaceActivityInput{WorkspaceID: ws.ID}, nil), sandboxapi.ErrWorkspaceUnavailable)
	wantAppError(t, h.run(wire.OpActivity(sandboxapi.UpdateReadFile), wire.FileActivityInput{WorkspaceID: ws.ID, Path: "README.md"}, nil), sandboxapi.ErrWorkspaceUnavailable)
}

// Locate reads only the store: an unknown workspace is not an error, a
// malformed id is InvalidArgument.
func TestLocate(t *testing.T) {
	h := newTestHost(t)
	var res wire.LocateResult
	if err := h.run(wire.ActivityLocate, wire.WorkspaceActivityInput{WorkspaceID: sandboxapi.WorkspaceIDForKey("edit|a|p|c")}, &res); err != nil || res.Exists {
		t.Fatalf("unknown workspace: %+v, %v", res, err)
	}
	wantAppError(t, h.run(wire.ActivityLocate, wire.WorkspaceActivityInput{WorkspaceID: "ws-\n"}, nil), sandboxapi.ErrInvalidArgument)
	ws := h.acquire(h.request(sandboxapi.ModeEdit, "c1")).Workspace
	if err := h.run(wire.ActivityLocate, wire.WorkspaceActivityInput{WorkspaceID: ws.ID}, &res); err != nil || !res.Exists || res.HostID != testHostID {
		t.Fatalf("acquired workspace: %+v, %v", res, err)
	}
}
