package activities

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandboxcore/sandboxcore/internal/gittest"
	"github.com/sandboxcore/sandboxcore/internal/runtime/local"
	"github.com/sandboxcore/sandboxcore/internal/runtime/supervisor/supervisortest"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/internal/wire"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// A command's non-zero exit is a result, not an error; its output comes
// back byte for byte; the runtime is recorded as running.
func TestExecNonZeroExitIsAResult(t *testing.T) {
	h := newTestHost(t)
	ws := h.acquire(h.request(sandboxapi.ModeEdit, "c1")).Workspace
	var res wire.ExecActivityResult
	in := wire.ExecActivityInput{WorkspaceID: ws.ID, Request: sandboxapi.ExecRequest{
		Cmd: []string{"sh", "-c", "printf 'out\\n'; printf 'err' >&2; cat README.md; exit 3"}}}
	if err := h.run(wire.ActivityExec, in, &res); err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 3 || string(res.Stdout) != "out\n# project\n" || string(res.Stderr) != "err" || res.TimedOut || res.Truncated {
		t.Fatalf("exec: exit %d stdout %q stderr %q timed out %v truncated %v", res.ExitCode, res.Stdout, res.Stderr, res.TimedOut, res.Truncated)
	}
	rec, err := h.store.GetRuntime(context.Background(), sandboxapi.RuntimeIDFor(ws.ID))
	if err != nil || rec.State != sandbox.RuntimeRunning || rec.WorkspaceID != ws.ID {
		t.Errorf("runtime row %+v, %v", rec, err)
	}
}

// Malformed exec requests are InvalidArgument, non-retryable, and run nothing.
func TestExecRefusesBadRequests(t *testing.T) {
	h := newTestHost(t)
	ws := h.acquire(h.request(sandboxapi.ModeEdit, "c1")).Workspace
	for name, req := range map[string]sandboxapi.ExecRequest{
		"no command":            {},
		"an empty program":      {Cmd: []string{""}},
		"a cwd out of the root": {Cmd: []string{"touch", "marker"}, Cwd: "../"},
		"an env name with '='":  {Cmd: []string{"touch", "marker"}, Env: map[string]string{"A=B": "c"}},
		"a negative timeout":    {Cmd: []string{"touch", "marker"}, TimeoutS: -1},
	} {
		t.Run(name, func(t *testing.T) {
			err := h.run(wire.ActivityExec, wire.ExecActivityInput{WorkspaceID: ws.ID, Request: req}, nil)
			// A bad cwd is a bad argument of the request here (the
			// runtime's exec validation), not InvalidWorkspacePath.
			wantAppError(t, err, sandboxapi.ErrInvalidArgument)
		})
	}
	if out := gittest.Git(t, ws.LocalPath, "status", "--porcelain"); out != "" {
		t.Errorf("a refused command changed the worktree:\n%s", out)
	}
}

// Hibernate and destroy-runtime are idempotent: a second call (a retry, or
// a runtime already gone) succeeds and changes nothing; neither touches the
// workspace.
func TestHibernateAndDestroyRuntimeTwice(t *testing.T) {
	h := newTestHost(t)
	ws := h.acquire(h.request(sandboxapi.ModeEdit, "c1")).Workspace
	wsIn := wire.WorkspaceActivityInput{WorkspaceID: ws.ID}
	rid := sandboxapi.RuntimeIDFor(ws.ID)

	var hib sandboxapi.HibernateResult
	if err := h.run(wire.ActivityHibernate, wsIn, &hib); err != nil || hib.Stopped || hib.RuntimeID != rid {
		t.Fatalf("hibernate without a runtime: %+v, %v", hib, err)
	}
	if err := h.run(wire.ActivityExec, wire.ExecActivityInput{WorkspaceID: ws.ID, Request: sandboxapi.ExecRequest{Cmd: []string{"sh", "-c", "echo work > made.txt"}}}, nil); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := h.run(wire.ActivityHibernate, wsIn, &hib); err != nil || !hib.Stopped {
			t.Fatalf("hibernate #%d: %+v, %v", i+1, hib, err)
		}
		rec, err := h.store.GetRuntime(context.Background(), rid)
		if err != nil || rec.State != sandbox.RuntimeStopped {
			t.Fatalf("after hibernate #%d the runtime row is %+v, %v", i+1, rec, err)
		}
	}
	for i := range 2 {
		var res sandboxapi.HibernateResult
		if err := h.run(wire.ActivityDestroyRuntime, wsIn, &res); err != nil || !res.Stopped {
			t.Fatalf("destroy runtime #%d: %+v, %v", i+1, res, err)
		}
		if _, err := h.store.GetRuntime(context.Background(), rid); !errors.Is(err, sandboxapi.ErrNotFound) {
			t.Fatalf("after destroy #%d the runtime row: %v", i+1, err)
		}
		if _, err := h.acts.Runtimes.Get(context.Background(), rid); !errors.Is(err, sandboxapi.ErrNotFound) {
			t.Fatalf("after destroy #%d the runtime: %v", i+1, err)
		}
	}
	var read sandboxapi.ReadFileResult
	if err := h.run(wire.OpActivity(sandboxapi.UpdateReadFile), wire.FileActivityInput{WorkspaceID: ws.ID, Path: "made.txt"}, &read); err != nil || string(read.Content) != "work\n" {
		t.Errorf("the workspace after destroying its runtime: %q, %v", read.Content, err)
	}
	wantAppError(t, h.run(wire.ActivityDestroyRuntime, wire.WorkspaceActivityInput{WorkspaceID: "not an id"}, nil), sandboxapi.ErrInvalidArgument)
}

// Committing, then committing the same request again (a retry after the
// first succeeded), leaves one commit on the branch; the second reports
// nothing to commit. The row's dirty flag follows the worktree.
func TestCommitTwiceMakesOneCommit(t *testing.T) {
	h := newTestHost(t)
	ws := h.acquire(h.request(sandboxapi.ModeEdit, "c1")).Workspace
	if err := h.run(wire.OpActivity(sandboxapi.UpdateWriteFile), wire.FileActivityInput{WorkspaceID: ws.ID, Path: "feature.txt", Content: []byte("feature\n")}, nil); err != nil {
		t.Fatal(err)
	}
	in := wire.OpInput[sandboxapi.CommitRequest]{WorkspaceID: ws.ID, Request: sandboxapi.CommitRequest{Message: "add feature"}}
	var first, second sandboxapi.CommitResult
	if err := h.run(wire.OpActivity(sandboxapi.UpdateCommit), in, &first); err != nil {
		t.Fatal(err)
	}
	if first.NothingToCommit || first.Branch != ws.BranchName || first.Commit == "" {
		t.Fatalf("first commit: %+v", first)
	}
	if err := h.run(wire.OpActivity(sandboxapi.UpdateCommit), in, &second); err != nil {
		t.Fatal(err)
	}
	if !second.NothingToCommit {
		t.Errorf("second commit: %+v; want nothing to commit", second)
	}
	if head := gittest.Git(t, ws.LocalPath, "rev-parse", "HEAD"); head != first.Commit {
		t.Errorf("HEAD %s after two commits, want the first's %s", head, first.Commit)
	}
	if n := gittest.Git(t, ws.LocalPath, "rev-list", "--count", ws.BaseCommit+"..HEAD"); n != "1" {
		t.Errorf("%s commits on the branch, want 1", n)
	}
	if msg := gittest.Git(t, ws.LocalPath, "log", "-1", "--format=%s"); msg != "add feature" {
		t.Errorf("commit message %q", msg)
	}
	row, err := h.store.GetWorkspace(context.Background(), ws.ID)
	if err != nil || row.Dirty {
		t.Errorf("row dirty = %v after the commit (%v)", row.Dirty, err)
	}
	wantAppError(t, h.run(wire.OpActivity(sandboxapi.UpdateCommit), wire.OpInput[sandboxapi.CommitRequest]{WorkspaceID: ws.ID, Request: sandboxapi.CommitRequest{Message: ""}}, nil), sandboxapi.ErrInvalidArgument)
}

// A cut output asked to be kept is paged back whole by read_output, the
// same bytes on every read; an unknown output id is SandboxNotFound.
func TestKeptOutputReadsBackWhole(t *testing.T) {
	h := newTestHost(t)
	ws := h.acquire(h.request(sandboxapi.ModeEdit, "c1")).Workspace
	var res wire.ExecActivityResult
	in := wire.ExecActivityInput{WorkspaceID: ws.ID, Request: sandboxapi.ExecRequest{
		Cmd: []string{"sh", "-c", "seq 1 20000"}, MaxOutputBytes: 1024, KeepOutput: true}}
	if err := h.run(wire.ActivityExec, in, &res); err != nil {
		t.Fatal(err)
	}
	if !res.Truncated || res.OutputID == "" || int64(len(res.Stdout)) >= res.StdoutBytes {
		t.Fatalf("exec: truncated %v output id %q, %d stdout bytes", res.Truncated, res.OutputID, len(res.Stdout))
	}
	var want strings.Builder
	for i := 1; i <= 20000; i++ {
		fmt.Fprintf(&want, "%d\n", i)
	}
	if res.StdoutBytes != int64(want.Len()) {
		t.Fatalf("stdout_bytes %d, want %d", res.StdoutBytes, want.Len())
	}
	for range 2 {
		var all []byte
		for off := int64(0); ; {
			var page sandboxapi.ReadOutputResult
			err := h.run(wire.OpActivity(sandboxapi.UpdateReadOutput), wire.OpInput[sandboxapi.ReadOutputInput]{WorkspaceID: ws.ID,
				Request: sandboxapi.ReadOutputInput{OutputID: res.OutputID, Stream: "stdout", Offset: off, Limit: 32 << 10}}, &page)
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, page.Data...)
			off += int64(len(page.Data))
			if page.EOF || len(page.Data) == 0 {
				break
			}
		}
		if string(all) != want.String() {
			t.Fatalf("read_output gave %d bytes, want the whole %d", len(all), want.Len())
		}
	}
	wantAppError(t, h.run(wire.OpActivity(sandboxapi.UpdateReadOutput), wire.OpInput[sandboxapi.ReadOutputInput]{WorkspaceID: ws.ID,
		Request: sandboxapi.ReadOutputInput{OutputID: "out-" + strings.Repeat("0", 32), Stream: "stdout"}}, nil), sandboxapi.ErrNotFound)
}

// A runtime left running by a worker that restarted (unknown to this
// worker, recorded running in the store) is taken over and stopped by
// hibernate, not reported stopped while its background processes run on.
func TestHibernateStopsARuntimeLeftByARestartedWorker(t *testing.T) {
	h := newTestHost(t)
	ws := h.acquire(h.request(sandboxapi.ModeEdit, "c1")).Workspace
	var started sandboxapi.ProcessStartResult
	if err := h.run(wire.ActivityProcessStart, wire.OpInput[sandboxapi.ProcessStartInput]{WorkspaceID: ws.ID,
		Request: sandboxapi.ProcessStartInput{Cmd: []string{"sleep", "300"}}}, &started); err != nil {
		t.Fatal(err)
	}
	// The worker restarts: a new runtime provider over the same state.
	old := h.acts.Runtimes
	h.acts.Runtimes = local.New(local.Options{Supervisor: supervisortest.Binary(t), StateDir: filepath.Join(h.dataDir, "runtimes", "local")})
	t.Cleanup(func() {
		_ = old.Destroy(context.Background(), sandboxapi.RuntimeIDFor(ws.ID))
		_ = h.acts.Runtimes.Destroy(context.Background(), sandboxapi.RuntimeIDFor(ws.ID))
	})
	var hib sandboxapi.HibernateResult
	if err := h.run(wire.ActivityHibernate, wire.WorkspaceActivityInput{WorkspaceID: ws.ID}, &hib); err != nil || !hib.Stopped {
		t.Fatalf("hibernate after a restart: %+v, %v", hib, err)
	}
	var list sandboxapi.ProcessListResult
	if err := h.run(wire.ActivityProcessList, wire.WorkspaceActivityInput{WorkspaceID: ws.ID}, &list); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range list.Processes {
		if p.ID == started.ProcessID {
			found = true
			if !p.Exited || p.ExitReason != sandboxapi.ExitReasonRuntimeStopped {
				t.Fatalf("the background process of the earlier worker's runtime: %+v", p)
			}
		}
	}
	if !found {
		t.Fatalf("process %s not listed after the hibernate: %+v", started.ProcessID, list.Processes)
	}
}
