package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/gittest"
	"github.com/sandboxcore/sandboxcore/internal/hostworker"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
	"github.com/sandboxcore/sandboxcore/sandboxclient"
	"github.com/sandboxcore/sandboxcore/workflows"
)

// The lifecycle end to end (docs/API.md "Checkpoints", "Fork", "Destroy",
// "Cleanup"): real git, the embedded Temporal, real worker hosts.

// makeEverythingDirty changes a workspace in every way its state can differ
// from HEAD: tracked file modified with CRLF bytes, tracked file deleted,
// untracked files deep down, permission bits git records (0755) and ones it
// does not (0600), a symlink, and an ignored file.
func makeEverythingDirty(t *testing.T, ctx context.Context, s *sandboxclient.Session, hd sandboxapi.Handle, tag string) {
	t.Helper()
	require.NoError(t, s.WriteFile(ctx, ".gitignore", []byte("*.log\n"), 0))
	require.NoError(t, s.WriteFile(ctx, "README.md", []byte("# changed "+tag+"\r\nCRLF kept\r\n"), 0))
	require.NoError(t, s.WriteFile(ctx, "bin/tool.sh", []byte("#!/bin/sh\necho "+tag+"\n"), 0o755))
	require.NoError(t, s.WriteFile(ctx, "secret.env", []byte("K="+tag+"\n"), 0o600))
	require.NoError(t, s.WriteFile(ctx, "deep/new/file.txt", []byte("untracked "+tag+"\n"), 0))
	require.NoError(t, s.WriteFile(ctx, "build.log", []byte("ignored "+tag+"\n"), 0))
	_ = os.Remove(filepath.Join(hd.LocalPath, "readme-link"))
	require.NoError(t, os.Symlink("README.md", filepath.Join(hd.LocalPath, "readme-link")))
	res, err := s.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"rm", "-f", "main.go"}})
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode, string(res.Stderr))
}

// withoutIgnored drops the ignored file from a worktree snapshot.
func withoutIgnored(m map[string]fileInfo) map[string]fileInfo {
	out := map[string]fileInfo{}
	for k, v := range m {
		if k != "build.log" {
			out[k] = v
		}
	}
	return out
}

func headOf(t *testing.T, dir string) string { return gittest.Git(t, dir, "rev-parse", "HEAD") }

func TestCheckpointEditRollbackAndUndo(t *testing.T) {
	bin := buildCLI(t)
	h := startHost(t, "checkpoint")
	ctx := ctxFor(t, 3*time.Minute)
	s, hd, _ := newEditSession(t, h)
	ws := hd.WorkspaceID

	// State A: a commit and every kind of uncommitted change.
	require.NoError(t, s.WriteFile(ctx, "committed.txt", []byte("committed A\n"), 0))
	_, err := s.Commit(ctx, sandboxapi.CommitRequest{Message: "A", Paths: []string{"committed.txt"}})
	require.NoError(t, err)
	makeEverythingDirty(t, ctx, s, hd, "A")
	headA := headOf(t, hd.LocalPath)
	stateA := withoutIgnored(worktreeSnapshot(t, hd.LocalPath))
	statusA, err := s.Status(ctx)
	require.NoError(t, err)

	r := runCLI(t, bin, h.Config.TaskQueue, "", "checkpoint", ws, "-m", "state A", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var cp sandboxapi.Checkpoint
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &cp))
	assert.Equal(t, 1, cp.ID)
	assert.Equal(t, headA, cp.Head)
	assert.Equal(t, hd.Branch, cp.Branch)
	assert.Equal(t, "state A", cp.Label)
	statusAfter, err := s.Status(ctx)
	require.NoError(t, err)
	assert.Equal(t, statusA, statusAfter, "a checkpoint changes nothing in the workspace")
	assert.Equal(t, stateA, withoutIgnored(worktreeSnapshot(t, hd.LocalPath)))

	// State B: another commit, more edits, a deletion, a re-moded file.
	_, err = s.Commit(ctx, sandboxapi.CommitRequest{Message: "B"})
	require.NoError(t, err)
	require.NoError(t, s.WriteFile(ctx, "secret.env", []byte("K=B\n"), 0o644))
	require.NoError(t, s.WriteFile(ctx, "only-b.txt", []byte("B\n"), 0o640))
	res, err := s.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"rm", "committed.txt"}})
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode)
	headB := headOf(t, hd.LocalPath)
	require.NotEqual(t, headA, headB)
	stateB := withoutIgnored(worktreeSnapshot(t, hd.LocalPath))

	rb, err := s.Rollback(ctx, 1)
	require.NoError(t, err)
	assert.Equal(t, 1, rb.Checkpoint.ID)
	assert.Equal(t, 2, rb.Undo.ID)
	assert.Equal(t, stateA, withoutIgnored(worktreeSnapshot(t, hd.LocalPath)), "bytes, modes, deletions and untracked files of A")
	assert.Equal(t, headA, headOf(t, hd.LocalPath), "the branch head of A")
	assert.Equal(t, hd.Branch, gittest.Git(t, hd.LocalPath, "symbolic-ref", "--short", "HEAD"))
	st, err := s.Status(ctx)
	require.NoError(t, err)
	assert.True(t, st.Dirty)
	assert.Equal(t, headA, st.Head)
	out, err := s.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"sh", "-c", "./bin/tool.sh"}})
	require.NoError(t, err)
	assert.Equal(t, "A\n", string(out.Stdout), "the restored script runs")

	// Undo the rollback through the CLI.
	r = runCLI(t, bin, h.Config.TaskQueue, "", "rollback", ws, strconv.Itoa(rb.Undo.ID))
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "rolled back to checkpoint 2")
	assert.Equal(t, stateB, withoutIgnored(worktreeSnapshot(t, hd.LocalPath)), "the undo brings B back exactly")
	assert.Equal(t, headB, headOf(t, hd.LocalPath))

	r = runCLI(t, bin, h.Config.TaskQueue, "", "checkpoint", "list", ws)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "state A")
	assert.Contains(t, r.stdout, "before rollback to checkpoint 1")
	assert.Contains(t, r.stdout, "before rollback to checkpoint 2")
	list, err := s.Checkpoints(ctx)
	require.NoError(t, err)
	require.Len(t, list, 3)
	_, err = s.Rollback(ctx, 99)
	assert.ErrorIs(t, err, sandboxapi.ErrNotFound)
	_, err = s.Checkpoint(ctx, strings.Repeat("x", sandboxapi.MaxCheckpointLabelBytes+1))
	assert.ErrorIs(t, err, sandboxapi.ErrInvalidArgument)
}

func TestForkHasTheSourceFilesAndDivergesIndependently(t *testing.T) {
	bin := buildCLI(t)
	h := startHost(t, "fork")
	ctx := ctxFor(t, 3*time.Minute)
	src, hd, _ := newEditSession(t, h)
	require.NoError(t, src.WriteFile(ctx, "committed.txt", []byte("c\n"), 0))
	_, err := src.Commit(ctx, sandboxapi.CommitRequest{Message: "c"})
	require.NoError(t, err)
	makeEverythingDirty(t, ctx, src, hd, "S")
	srcFiles := worktreeSnapshot(t, hd.LocalPath)
	srcStatus, err := src.Status(ctx)
	require.NoError(t, err)
	head := headOf(t, hd.LocalPath)

	fr, err := src.Fork(ctx, sandboxapi.ForkInput{TaskID: "alt-1"})
	require.NoError(t, err)
	fh := fr.Handle
	assert.Equal(t, sandboxapi.WorkspaceIDForKey("task|"+hd.UserID+"|p|alt-1"), fh.WorkspaceID)
	assert.Equal(t, hd.WorkspaceID, fh.ForkedFrom)
	assert.Equal(t, sandboxapi.ModeTask, fh.Mode)
	assert.Equal(t, sandboxapi.TaskBranch(hd.UserID, "p", "alt-1"), fh.Branch)
	assert.Equal(t, head, fh.BaseCommit, "its branch starts at the source's HEAD")
	assert.Equal(t, hd.HostID, fh.HostID)
	assert.NotEqual(t, hd.LocalPath, fh.LocalPath)
	assert.Equal(t, withoutIgnored(srcFiles), worktreeSnapshot(t, fh.LocalPath), "uncommitted and untracked files, modes; the ignored one not")
	assert.Equal(t, srcFiles, worktreeSnapshot(t, hd.LocalPath), "the source is not changed")
	after, err := src.Status(ctx)
	require.NoError(t, err)
	assert.Equal(t, srcStatus, after)

	fs, err := h.client.Session(fh.WorkspaceID)
	require.NoError(t, err)
	fst, err := fs.Status(ctx)
	require.NoError(t, err)
	assert.True(t, fst.Dirty, "the source's changes are the fork's uncommitted changes")
	assert.Equal(t, head, fst.Head)
	assert.Equal(t, 0, fst.CommitsSinceBase)
	d, err := fs.Diff(ctx)
	require.NoError(t, err)
	assert.Contains(t, d.Files, "deep/new/file.txt")
	assert.Contains(t, d.Files, "main.go")

	// They diverge: each one's changes, and each one's runtime, are its own.
	require.NoError(t, fs.WriteFile(ctx, "only-fork.txt", []byte("f\n"), 0))
	require.NoError(t, src.WriteFile(ctx, "only-source.txt", []byte("s\n"), 0))
	res, err := fs.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"sh", "-c", "ls only-*"}})
	require.NoError(t, err)
	assert.Equal(t, "only-fork.txt\n", string(res.Stdout), string(res.Stderr))
	fc, err := fs.Commit(ctx, sandboxapi.CommitRequest{Message: "fork work"})
	require.NoError(t, err)
	assert.Equal(t, sandboxapi.TaskBranch(hd.UserID, "p", "alt-1"), fc.Branch)
	assert.NoFileExists(t, filepath.Join(hd.LocalPath, "only-fork.txt"))
	assert.NoFileExists(t, filepath.Join(fh.LocalPath, "only-source.txt"))
	assert.Equal(t, head, headOf(t, hd.LocalPath), "the fork's commit is not the source's")

	list, err := src.Checkpoints(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Equal(t, "fork to "+fh.WorkspaceID, list[0].Label, "the source records what was forked")
	assert.Equal(t, list[0].ID, fr.Checkpoint.ID)

	// The same key again: a conflict, and nothing of the first fork changes.
	_, err = src.Fork(ctx, sandboxapi.ForkInput{TaskID: "alt-1"})
	assert.ErrorIs(t, err, sandboxapi.ErrConflict)
	assert.FileExists(t, filepath.Join(fh.LocalPath, "only-fork.txt"))

	// The CLI forks into an edit workspace.
	r := runCLI(t, bin, h.Config.TaskQueue, "", "fork", hd.WorkspaceID, "--conversation", "alt-conv", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var cfr sandboxapi.ForkResult
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &cfr))
	assert.Equal(t, sandboxapi.ModeEdit, cfr.Handle.Mode)
	assert.Equal(t, sandboxapi.EditBranch(hd.UserID, "p", "alt-conv"), cfr.Handle.Branch)
	data, err := os.ReadFile(filepath.Join(cfr.Handle.LocalPath, "only-source.txt"))
	require.NoError(t, err)
	assert.Equal(t, "s\n", string(data), "a fork has the source's state when it is made")
}

// sessionStatus returns the Temporal status of the session's current run.
func sessionStatus(t *testing.T, wfID string) enumspb.WorkflowExecutionStatus {
	t.Helper()
	d, err := tc.DescribeWorkflowExecution(context.Background(), wfID, "")
	require.NoError(t, err)
	return d.GetWorkflowExecutionInfo().GetStatus()
}

// listedSoon waits until the sessions visibility lists for query are
// exactly the workspaces want (in any order), for at most 10 s: a run that
// just started, closed or continued shows in visibility a moment later.
func listedSoon(t *testing.T, sc *sandboxclient.Client, query string, want ...string) []sandboxclient.SessionSummary {
	t.Helper()
	var got []sandboxclient.SessionSummary
	var lastErr error
	ok := assert.Eventually(t, func() bool {
		got, lastErr = sc.ListSessions(context.Background(), query, 0)
		if lastErr != nil || len(got) != len(want) {
			return false
		}
		seen := map[string]bool{}
		for _, row := range got {
			seen[row.WorkspaceID] = true
		}
		for _, id := range want {
			if !seen[id] {
				return false
			}
		}
		return true
	}, 10*time.Second, 100*time.Millisecond, "sessions listed for %q: want %v", query, want)
	if !ok {
		t.Fatalf("listed: %+v (error %v)", got, lastErr)
	}
	return got
}

func TestDestroyLeavesARestorableBackup(t *testing.T) {
	bin := buildCLI(t)
	h := startHost(t, "destroy")
	ctx := ctxFor(t, 4*time.Minute)
	upstream := gittest.InitRepo(t, filepath.Join(t.TempDir(), "team", "project"), "trunk")
	user := uniq(t, "u")
	req := editRequest(user, "p", "doomed", gittest.FileURL(upstream))
	s, hd, err := h.client.Acquire(ctx, req)
	require.NoError(t, err)
	bare := filepath.Join(filepath.Dir(filepath.Dir(hd.LocalPath)), ".bare")
	require.NoError(t, s.WriteFile(ctx, "unpushed.txt", []byte("u\n"), 0))
	_, err = s.Commit(ctx, sandboxapi.CommitRequest{Message: "unpushed work"})
	require.NoError(t, err)
	makeEverythingDirty(t, ctx, s, hd, "D")
	headD := headOf(t, hd.LocalPath)
	want := withoutIgnored(worktreeSnapshot(t, hd.LocalPath))
	_, err = s.Checkpoint(ctx, "kept through the destroy")
	require.NoError(t, err)

	r := runCLI(t, bin, h.Config.TaskQueue, "", "destroy", hd.WorkspaceID, "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var dr sandboxapi.DestroyResult
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &dr))
	assert.True(t, dr.Existed)
	assert.Equal(t, sandboxapi.DestroyedRef(hd.WorkspaceID), dr.BackupRef)
	assert.FileExists(t, dr.PatchPath)
	assert.Equal(t, 1, dr.CheckpointsKept)
	assert.Equal(t, hd.Branch, dr.BranchDeleted)
	assert.NoDirExists(t, hd.LocalPath, "the worktree is gone")
	_, err = gittest.TryGit(bare, "rev-parse", "--verify", "-q", "refs/heads/"+hd.Branch)
	assert.Error(t, err, "the branch is gone")
	assert.Equal(t, headD, gittest.Git(t, bare, "rev-parse", dr.BackupRef+"^"), "the unpushed commit stays reachable from the backup")
	row, err := h.Store.GetWorkspace(ctx, hd.WorkspaceID)
	require.NoError(t, err)
	assert.Equal(t, sandboxapi.WorkspaceRemoved, row.State, "a tombstone keeps the key on the host holding its saved work")
	assert.NotEqual(t, enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, sessionStatus(t, hd.WorkflowID), "destroy completes the session")
	d, err := s.Describe(ctx)
	require.NoError(t, err)
	assert.Equal(t, sandboxapi.StateDestroyed, d.State)
	listedSoon(t, h.client, "SandboxUser = '"+user+"'") // a destroyed workspace is not listed
	_, err = s.Status(ctx)
	assert.ErrorIs(t, err, sandboxapi.ErrWorkspaceNotFound, "its operations fail; nothing is resurrected by them")

	// A later acquire of the key starts fresh and offers the restore.
	s2, fresh, err := h.client.Acquire(ctx, req)
	require.NoError(t, err)
	assert.True(t, fresh.Created)
	assert.Equal(t, dr.BackupRef, fresh.Restorable)
	st, err := s2.Status(ctx)
	require.NoError(t, err)
	assert.False(t, st.Dirty)
	assert.Equal(t, 0, st.CommitsSinceBase)
	assert.NoFileExists(t, filepath.Join(fresh.LocalPath, "unpushed.txt"))
	cps, err := s2.Checkpoints(ctx)
	require.NoError(t, err)
	assert.Len(t, cps, 1, "the destroyed workspace's checkpoints are kept")

	// restore brings it back byte for byte.
	r = runCLI(t, bin, h.Config.TaskQueue, "", "restore", hd.WorkspaceID)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "from "+dr.BackupRef)
	assert.Equal(t, want, withoutIgnored(worktreeSnapshot(t, fresh.LocalPath)))
	assert.Equal(t, headD, headOf(t, fresh.LocalPath))
	st, err = s2.Status(ctx)
	require.NoError(t, err)
	assert.True(t, st.Dirty)
	assert.Equal(t, 1, st.CommitsSinceBase, "the base is the original one again")
	again, err := s2.Restore(ctx)
	require.NoError(t, err)
	assert.Empty(t, again.RestoredFrom, "nothing left to restore")

	// With discard nothing is kept: the key starts fresh with nothing offered.
	dr, err = s2.Destroy(ctx, true)
	require.NoError(t, err)
	assert.True(t, dr.Discarded)
	assert.Empty(t, dr.BackupRef)
	_, err = h.Store.GetWorkspace(ctx, hd.WorkspaceID)
	assert.ErrorIs(t, err, sandboxapi.ErrWorkspaceNotFound, "the record is gone")
	for _, ref := range []string{sandboxapi.DestroyedRef(hd.WorkspaceID), sandboxapi.CheckpointRef(hd.WorkspaceID, 1)} {
		_, err = gittest.TryGit(bare, "rev-parse", "--verify", "-q", ref)
		assert.Error(t, err, ref)
	}
	_, err = s2.Restore(ctx)
	assert.ErrorIs(t, err, sandboxapi.ErrWorkspaceNotFound, "nothing to restore")
	_, third, err := h.client.Acquire(ctx, req)
	require.NoError(t, err)
	assert.True(t, third.Created)
	assert.Empty(t, third.Restorable)
	assert.NoFileExists(t, filepath.Join(third.LocalPath, "unpushed.txt"))
}

// restore of a destroyed workspace whose key was not acquired since
// re-creates it from its tombstone, saved work included.
func TestRestoreRecreatesADestroyedWorkspace(t *testing.T) {
	h := startHost(t, "restoretomb")
	ctx := ctxFor(t, 3*time.Minute)
	s, hd, _ := newEditSession(t, h)
	makeEverythingDirty(t, ctx, s, hd, "T")
	want := withoutIgnored(worktreeSnapshot(t, hd.LocalPath))
	head := headOf(t, hd.LocalPath)
	dr, err := s.Destroy(ctx, false)
	require.NoError(t, err)
	require.NotEmpty(t, dr.BackupRef)
	assert.NoDirExists(t, hd.LocalPath)

	back, err := s.Restore(ctx)
	require.NoError(t, err)
	assert.Equal(t, dr.BackupRef, back.RestoredFrom)
	assert.Equal(t, hd.LocalPath, back.LocalPath)
	assert.Equal(t, want, withoutIgnored(worktreeSnapshot(t, back.LocalPath)), "byte for byte")
	assert.Equal(t, head, headOf(t, back.LocalPath))
	assert.Equal(t, hd.BaseCommit, back.BaseCommit)
	res, err := s.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"cat", "secret.env"}})
	require.NoError(t, err)
	assert.Equal(t, "K=T\n", string(res.Stdout))
	row, err := h.Store.GetWorkspace(ctx, hd.WorkspaceID)
	require.NoError(t, err)
	assert.Equal(t, sandboxapi.WorkspaceReady, row.State)
}

// Every operation that would change an analysis (read-only) workspace is
// SandboxCommandRejected and changes nothing; destroy ends it.
func TestChangingOperationsOnAnAnalysisWorkspaceAreRejected(t *testing.T) {
	h := startHost(t, "analysislife")
	upstream := gittest.InitRepo(t, filepath.Join(t.TempDir(), "team", "project"), "trunk")
	ctx := ctxFor(t, 2*time.Minute)
	s, hd, err := h.client.Acquire(ctx, sandboxapi.WorkspaceRequest{UserID: uniq(t, "u"), ProjectID: "p", RepoURL: gittest.FileURL(upstream), Mode: sandboxapi.ModeAnalysis})
	require.NoError(t, err)
	before := worktreeSnapshot(t, hd.LocalPath)
	bare := filepath.Join(filepath.Dir(filepath.Dir(hd.LocalPath)), ".bare")
	refsBefore := gittest.Git(t, bare, "for-each-ref")
	ops := map[string]func() error{
		"write_file": func() error { return s.WriteFile(ctx, "x.txt", []byte("x"), 0) },
		"commit": func() error {
			_, err := s.Commit(ctx, sandboxapi.CommitRequest{Message: "m"})
			return err
		},
		"push": func() error { _, err := s.Push(ctx, false); return err },
		"create_pull_request": func() error {
			_, err := s.CreatePullRequest(ctx, sandboxapi.PullRequestInput{Title: "t"})
			return err
		},
		"merge_branches": func() error {
			_, err := s.MergeBranches(ctx, sandboxapi.MergeRequest{Branches: []string{"agent/x"}})
			return err
		},
		"checkpoint": func() error { _, err := s.Checkpoint(ctx, ""); return err },
		"rollback":   func() error { _, err := s.Rollback(ctx, 1); return err },
		"fork": func() error {
			_, err := s.Fork(ctx, sandboxapi.ForkInput{TaskID: "from-analysis"})
			return err
		},
		"restore": func() error { _, err := s.Restore(ctx); return err },
	}
	for name, op := range ops {
		assert.ErrorIs(t, op(), sandboxapi.ErrCommandRejected, name)
	}
	assert.Equal(t, before, worktreeSnapshot(t, hd.LocalPath), "nothing changed")
	assert.Equal(t, refsBefore, gittest.Git(t, bare, "for-each-ref"), "no ref was written")
	list, err := s.Checkpoints(ctx)
	require.NoError(t, err)
	assert.Empty(t, list)

	dr, err := s.Destroy(ctx, false)
	require.NoError(t, err)
	assert.True(t, dr.Existed)
	assert.Empty(t, dr.BackupRef, "a read-only workspace has nothing to save")
	assert.NoDirExists(t, hd.LocalPath)
	_, err = h.Store.GetWorkspace(ctx, hd.WorkspaceID)
	assert.ErrorIs(t, err, sandboxapi.ErrWorkspaceNotFound)
}

// A user with five workspaces on two hosts is cleaned up by one
// CleanupWorkflow: all five destroyed (each through its session, on its
// host), another user's untouched.
func TestCleanupOfAUserAcrossTwoHosts(t *testing.T) {
	dsn := freshDatabaseSchema(t)
	bin := buildCLI(t)
	hostCfg := func(name string) hostworker.Config {
		cfg := baseConfig(t, name)
		cfg.DatabaseURL = dsn
		cfg.SessionOnHostQueue = false
		cfg.HostWait = 10 * time.Second
		return cfg
	}
	start := func(cfg hostworker.Config) *hostworker.Host {
		h, err := hostworker.Start(context.Background(), cfg, hostworker.Options{Client: tc, Credentials: creds, Logger: quiet})
		require.NoError(t, err)
		t.Cleanup(h.Stop)
		return h
	}
	// Each host polls its own shared queue, so where a workspace lands is
	// the test's choice; the cleanup finds them all through visibility and
	// the shared store, and reaches each through its session.
	cfgA, cfgB := hostCfg(uniq(t, "hA")), hostCfg(uniq(t, "hB"))
	hostA := start(cfgA)
	start(cfgB)
	scA := sandboxclient.New(tc, sandboxclient.Options{TaskQueue: cfgA.TaskQueue})
	scB := sandboxclient.New(tc, sandboxclient.Options{TaskQueue: cfgB.TaskQueue})
	upstream := gittest.InitRepo(t, filepath.Join(t.TempDir(), "team", "project"), "trunk")
	url := gittest.FileURL(upstream)
	ctx := ctxFor(t, 5*time.Minute)
	user, other := uniq(t, "u"), uniq(t, "v")

	type made struct {
		s  *sandboxclient.Session
		hd sandboxapi.Handle
	}
	var mine, theirs []made
	acquire := func(sc *sandboxclient.Client, req sandboxapi.WorkspaceRequest, host string) made {
		s, hd, err := sc.Acquire(ctx, req)
		require.NoError(t, err)
		require.Equal(t, host, hd.HostID)
		return made{s, hd}
	}
	for i, p := range []string{"p1", "p1", "p2"} {
		m := acquire(scA, editRequest(user, p, "a"+strconv.Itoa(i), url), cfgA.HostID)
		require.NoError(t, m.s.WriteFile(ctx, "work.txt", []byte("unsaved "+strconv.Itoa(i)+"\n"), 0))
		mine = append(mine, m)
	}
	mine = append(mine, acquire(scB, sandboxapi.WorkspaceRequest{UserID: user, ProjectID: "p1", RepoURL: url, Mode: sandboxapi.ModeTask, TaskID: "b0"}, cfgB.HostID))
	mine = append(mine, acquire(scB, sandboxapi.WorkspaceRequest{UserID: user, ProjectID: "p2", RepoURL: url, Mode: sandboxapi.ModeAnalysis}, cfgB.HostID))
	theirs = append(theirs, acquire(scA, editRequest(other, "p1", "x", url), cfgA.HostID))
	theirs = append(theirs, acquire(scB, editRequest(other, "p1", "y", url), cfgB.HostID))
	for _, m := range theirs {
		require.NoError(t, m.s.WriteFile(ctx, "theirs.txt", []byte("keep me\n"), 0))
	}

	// A dry run through the CLI lists all five and changes nothing.
	r := runCLI(t, bin, cfgA.TaskQueue, "", "cleanup", "--user", user, "--dry-run", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var dry sandboxapi.CleanupReport
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &dry))
	require.Len(t, dry.Workspaces, 5, "%+v", dry.Workspaces)
	for _, o := range dry.Workspaces {
		assert.Equal(t, sandboxapi.CleanupWouldDestroy, o.Outcome)
	}
	for _, m := range mine {
		assert.DirExists(t, m.hd.LocalPath)
	}

	r = runCLI(t, bin, cfgA.TaskQueue, "", "cleanup", "--user", user, "--json")
	require.Equal(t, 0, r.code, r.stdout+r.stderr)
	var rep sandboxapi.CleanupReport
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep))
	assert.Equal(t, sandboxapi.CleanupSummary{Found: 5, Destroyed: 5, Backups: 3}, rep.Summary, "%+v", rep.Workspaces)
	byID := map[string]sandboxapi.CleanupOutcome{}
	for _, o := range rep.Workspaces {
		byID[o.WorkspaceID] = o
	}
	for _, m := range mine {
		o := byID[m.hd.WorkspaceID]
		assert.Equal(t, sandboxapi.CleanupDestroyed, o.Outcome, "%s: %s", m.hd.WorkspaceID, o.Message)
		assert.Equal(t, m.hd.HostID, o.HostID)
		assert.NoDirExists(t, m.hd.LocalPath)
		assert.NotEqual(t, enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, sessionStatus(t, m.hd.WorkflowID))
	}
	hosts := map[string]sandboxapi.CleanupHost{}
	for _, hr := range rep.Hosts {
		hosts[hr.HostID] = hr
	}
	assert.Equal(t, 3, hosts[cfgA.HostID].Workspaces)
	assert.Equal(t, 2, hosts[cfgB.HostID].Workspaces)
	// The dirty ones keep a restorable backup on their host.
	back, err := mine[0].s.Restore(ctx)
	require.NoError(t, err)
	assert.Equal(t, sandboxapi.DestroyedRef(mine[0].hd.WorkspaceID), back.RestoredFrom)
	data, err := mine[0].s.ReadFile(ctx, "work.txt")
	require.NoError(t, err)
	assert.Equal(t, "unsaved 0\n", string(data))

	// The other user's workspaces are untouched and work.
	for _, m := range theirs {
		data, err := m.s.ReadFile(ctx, "theirs.txt")
		require.NoError(t, err)
		assert.Equal(t, "keep me\n", string(data))
		assert.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, sessionStatus(t, m.hd.WorkflowID))
	}
	listedSoon(t, scA, "SandboxUser = '"+user+"'", mine[0].hd.WorkspaceID) // only the restored one

	// With --discard and a project, the restored one goes for good.
	r = runCLI(t, bin, cfgB.TaskQueue, "", "cleanup", "--user", user, "--project", "p1", "--discard")
	require.Equal(t, 0, r.code, r.stdout+r.stderr)
	assert.Contains(t, r.stdout, "destroyed")
	for _, m := range mine {
		if m.hd.ProjectID != "p1" {
			continue
		}
		row, err := hostA.Store.GetWorkspace(ctx, m.hd.WorkspaceID)
		assert.ErrorIs(t, err, sandboxapi.ErrWorkspaceNotFound, "%s: %+v", m.hd.WorkspaceID, row)
	}
}

// Checkpoints count as saved work for eviction and eviction keeps them: a
// dirty workspace exactly at its newest checkpoint is evicted like a clean
// one (and restored exactly), a dirty one without is kept without pressure;
// a repo cache whose only unsaved commits are a destroyed workspace's
// checkpoints is held, and released once they are discarded.
func TestCheckpointsAreSavedWorkForEviction(t *testing.T) {
	e := newEvEnv(t, "evcheckpoint", aggressive(hugeBudget))
	ctx := ctxFor(t, 5*time.Minute)
	sCp, hCp := e.acquire(sandboxapi.ModeEdit, "checkpointed")
	require.NoError(t, sCp.WriteFile(ctx, "wip.txt", []byte("saved in a checkpoint\n"), 0o600))
	require.NoError(t, sCp.WriteFile(ctx, "README.md", []byte("edited\r\n"), 0))
	cp, err := sCp.Checkpoint(ctx, "before eviction")
	require.NoError(t, err)
	before := worktreeSnapshot(t, hCp.LocalPath)
	sDirty, hDirty := e.acquire(sandboxapi.ModeEdit, "dirty")
	require.NoError(t, sDirty.WriteFile(ctx, "wip.txt", []byte("only in the worktree\n"), 0))

	res := e.run(false)
	got := resultsByID(res)
	r := got["evict_workspace:"+hCp.WorkspaceID]
	require.Equal(t, sandboxapi.OutcomeDone, r.Outcome, r.Reason)
	assert.Equal(t, sandboxapi.TierCleanEdit, r.Tier, "planned like a clean workspace")
	assert.Equal(t, sandbox.EvictedRef(hCp.WorkspaceID), r.BackupRef, "and still saved, so the restore is exact")
	_, planned := got["evict_workspace:"+hDirty.WorkspaceID]
	assert.False(t, planned, "uncheckpointed work is not evicted without pressure")
	assert.DirExists(t, hDirty.LocalPath)
	assert.Equal(t, cp.Commit, gittest.Git(t, e.bare(hCp), "rev-parse", cp.Ref), "eviction keeps the checkpoint")

	hd, err := sCp.Restore(ctx)
	require.NoError(t, err)
	assert.Equal(t, r.BackupRef, hd.RestoredFrom)
	assert.Equal(t, before, worktreeSnapshot(t, hCp.LocalPath))
	list, err := sCp.Checkpoints(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1)

	// A destroyed workspace's kept checkpoint holds the repo cache.
	p := newEvEnv(t, "evcheckpointcache", aggressive(tinyBudget))
	sW, hW := p.acquire(sandboxapi.ModeTask, "w")
	require.NoError(t, sW.WriteFile(ctx, "precious.txt", []byte("p\n"), 0))
	_, err = sW.Checkpoint(ctx, "")
	require.NoError(t, err)
	res2, err := sW.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"rm", "precious.txt"}})
	require.NoError(t, err)
	require.Equal(t, 0, res2.ExitCode)
	dr, err := sW.Destroy(ctx, false)
	require.NoError(t, err)
	assert.Empty(t, dr.BackupRef, "clean: nothing to back up")
	assert.Equal(t, 1, dr.CheckpointsKept)
	cache := sandbox.RepoCacheIDFor(hW.HostID, hW.Repo)
	run := p.run(false)
	assert.Equal(t, "holds commits on no remote branch", heldOf(run)[cache])
	assert.DirExists(t, p.bare(hW), "the repo cache stays")

	_, err = sW.Destroy(ctx, true)
	require.NoError(t, err)
	run = p.run(false)
	assert.Equal(t, sandboxapi.OutcomeDone, resultsByID(run)["remove_repo_cache:"+cache].Outcome, "%+v", run.Hosts[0].Results)
	assert.NoDirExists(t, p.bare(hW), "without workspaces or saved work the cache follows the normal rules")
}

// A fan-out with FromFork commits nothing first: each task is a fork of the
// conversation, holding its uncommitted and untracked files.
func TestFanoutFromForkCarriesTheConversationsUncommittedWork(t *testing.T) {
	h := startHost(t, "fanoutfork")
	s, hd := conversation(t, h.client, uniq(t, "u"))
	ctx := ctxFor(t, 3*time.Minute)
	require.NoError(t, s.WriteFile(ctx, "wip.txt", []byte("uncommitted\n"), 0))
	head := headOf(t, hd.LocalPath)
	f, err := h.client.StartFanout(ctx, tenantOf(hd), uniq(t, "f"), sandboxapi.FanoutInput{ConversationWorkspaceID: hd.WorkspaceID, FromFork: true,
		Tasks: []sandboxapi.TaskSpec{{TaskID: uniq(t, "k1"), Script: "cat wip.txt > seen.txt"}, {TaskID: uniq(t, "k2"), Script: "test -f nope"}}})
	require.NoError(t, err)
	rep, err := f.Result(ctx)
	require.NoError(t, err)
	assert.Equal(t, sandboxapi.FanoutCompleted, rep.State, rep.Error)
	assert.True(t, rep.FromFork)
	assert.False(t, rep.Checkpointed, "nothing was committed first")
	assert.Equal(t, head, rep.StartCommit)
	k1, k2 := rep.Tasks[0], rep.Tasks[1]
	assert.Equal(t, sandboxapi.TaskSucceeded, k1.Status, k1.Message)
	assert.Equal(t, sandboxapi.TaskMergeMerged, k1.Merge, k1.Message)
	assert.Equal(t, sandboxapi.TaskFailed, k2.Status)
	require.NotNil(t, k1.Diff)
	assert.ElementsMatch(t, []string{"seen.txt", "wip.txt"}, k1.Diff.Files, "the fork started with the conversation's uncommitted file")
	data, err := s.ReadFile(ctx, "seen.txt")
	require.NoError(t, err)
	assert.Equal(t, "uncommitted\n", string(data), "the task saw it")
	requireCleanAt(t, s, rep.Head)
	replayFanout(t, f.WorkflowID(), "fanout-from-fork.json")
}

// TestLifecycleHistoriesReplay drives checkpoint, checkpoints, rollback,
// fork, restore and destroy through one session and a cleanup, replays every
// run against the current workflow code and, with
// SANDBOXCORE_UPDATE_HISTORIES=1, records them for the workflows package's
// replay tests.
func TestLifecycleHistoriesReplay(t *testing.T) {
	h := startHost(t, "lifereplay")
	ctx := ctxFor(t, 3*time.Minute)
	s, hd, _ := newEditSession(t, h)
	require.NoError(t, s.WriteFile(ctx, "a.txt", []byte("a\n"), 0))
	cp, err := s.Checkpoint(ctx, "a")
	require.NoError(t, err)
	require.NoError(t, s.WriteFile(ctx, "b.txt", []byte("b\n"), 0))
	_, err = s.Checkpoints(ctx)
	require.NoError(t, err)
	_, err = s.Rollback(ctx, cp.ID)
	require.NoError(t, err)
	fr, err := s.Fork(ctx, sandboxapi.ForkInput{TaskID: uniq(t, "t")})
	require.NoError(t, err)
	_, err = s.Restore(ctx)
	require.NoError(t, err)
	_, err = s.Destroy(ctx, false)
	require.NoError(t, err)
	_, err = s.Restore(ctx)
	require.NoError(t, err)
	_, err = s.Destroy(ctx, true)
	require.NoError(t, err)
	cl, err := h.client.StartCleanup(ctx, sandboxapi.CleanupInput{UserID: fr.Handle.UserID, Discard: true})
	require.NoError(t, err)
	rep, err := cl.Result(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, rep.Summary.Destroyed, "%+v", rep.Workspaces)

	replayer := worker.NewWorkflowReplayer()
	replayer.RegisterWorkflowWithOptions(workflows.SessionWorkflow, workflow.RegisterOptions{Name: sandboxapi.SessionWorkflowType})
	record := func(hist *historypb.History, dir, name string) {
		if os.Getenv(updateHistoriesEnv) != "1" {
			return
		}
		data, err := protojson.MarshalOptions{Indent: "  "}.Marshal(hist)
		require.NoError(t, err)
		p := filepath.Join("..", "workflows", "testdata", dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, data, 0o644))
	}
	runs := 0
	for _, wfID := range []string{hd.WorkflowID, fr.Handle.WorkflowID} {
		for _, runID := range runIDs(t, wfID) {
			hist := history(t, wfID, runID)
			require.NoError(t, replayed(replayer, hist), "%s run %s", wfID, runID)
			runs++
			record(hist, "histories", fmt.Sprintf("session-lifecycle-%d.json", runs))
		}
	}
	require.GreaterOrEqual(t, runs, 4)
	creplayer := worker.NewWorkflowReplayer()
	creplayer.RegisterWorkflowWithOptions(workflows.CleanupWorkflow, workflow.RegisterOptions{Name: sandboxapi.CleanupWorkflowType})
	hist := history(t, cl.WorkflowID(), "")
	require.NoError(t, replayed(creplayer, hist))
	record(hist, "cleanup-histories", "cleanup-discard.json")
}
