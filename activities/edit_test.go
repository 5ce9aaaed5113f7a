package activities

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/sandboxcore/sandboxcore/internal/wire"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// An edit_file retried with the same update id (the activity ran, its
// result was lost) is applied once: the second run returns the first's
// result and the file holds one edit. A new update id edits again.
func TestEditFileRetriedWithTheSameUpdateIDAppliesOnce(t *testing.T) {
	h := newTestHost(t)
	ws := h.acquire(h.request(sandboxapi.ModeEdit, "c1")).Workspace
	in := wire.EditFileActivityInput{WorkspaceID: ws.ID, UpdateID: "u-1",
		Request: sandboxapi.EditFileInput{Command: "insert", Path: "README.md", InsertLine: 0, NewStr: "added"}}
	var first, second sandboxapi.EditFileResult
	if err := h.run(wire.ActivityEditFile, in, &first); err != nil {
		t.Fatal(err)
	}
	if err := h.run(wire.ActivityEditFile, in, &second); err != nil {
		t.Fatal(err)
	}
	readme := filepath.Join(ws.LocalPath, "README.md")
	if got, _ := os.ReadFile(readme); string(got) != "added\n# project\n" {
		t.Fatalf("after the edit and its retry: %q", got)
	}
	if first.Bytes != second.Bytes || first.Snippet != second.Snippet {
		t.Errorf("the retry's result %+v differs from the first's %+v", second, first)
	}
	in.UpdateID = "u-2"
	if err := h.run(wire.ActivityEditFile, in, nil); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(readme); string(got) != "added\nadded\n# project\n" {
		t.Fatalf("after a second update: %q", got)
	}
}

// A str_replace whose old_str occurs other than once is InvalidArgument
// naming the field, and the file is unchanged.
func TestEditFileRefusesAmbiguousReplacements(t *testing.T) {
	h := newTestHost(t)
	ws := h.acquire(h.request(sandboxapi.ModeEdit, "c1")).Workspace
	if err := h.run(wire.OpActivity(sandboxapi.UpdateWriteFile), wire.FileActivityInput{WorkspaceID: ws.ID, Path: "twice.txt", Content: []byte("x\nx\n")}, nil); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ path, old string }{{"twice.txt", "x"}, {"twice.txt", "absent"}} {
		err := h.run(wire.ActivityEditFile, wire.EditFileActivityInput{WorkspaceID: ws.ID, UpdateID: "u-" + c.old,
			Request: sandboxapi.EditFileInput{Command: "str_replace", Path: c.path, OldStr: c.old, NewStr: "y"}}, nil)
		app := wantAppError(t, err, sandboxapi.ErrInvalidArgument)
		var d sandboxapi.ErrorDetails
		if app.Details(&d) != nil || d.Field != "old_str" {
			t.Errorf("old_str %q: details %+v; want field old_str", c.old, d)
		}
	}
	if got, _ := os.ReadFile(filepath.Join(ws.LocalPath, "twice.txt")); string(got) != "x\nx\n" {
		t.Errorf("a refused edit changed the file: %q", got)
	}
	wantAppError(t, h.run(wire.ActivityEditFile, wire.EditFileActivityInput{WorkspaceID: ws.ID,
		Request: sandboxapi.EditFileInput{Command: "rewrite", Path: "twice.txt"}}, nil), sandboxapi.ErrInvalidArgument)
}

// Rolling back to a checkpoint brings the files back byte for byte; rolling
// back to it again leaves the same files. An unknown checkpoint is
// SandboxNotFound, and analysis workspaces take no checkpoints.
func TestCheckpointAndRollback(t *testing.T) {
	h := newTestHost(t)
	ws := h.acquire(h.request(sandboxapi.ModeEdit, "c1")).Workspace
	write := func(path, content string) {
		t.Helper()
		if err := h.run(wire.OpActivity(sandboxapi.UpdateWriteFile), wire.FileActivityInput{WorkspaceID: ws.ID, Path: path, Content: []byte(content)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	write("work.txt", "version 1\n")
	var cp sandboxapi.Checkpoint
	if err := h.run(wire.OpActivity(sandboxapi.UpdateCheckpoint), wire.CheckpointActivityInput{WorkspaceID: ws.ID, Label: "v1"}, &cp); err != nil {
		t.Fatal(err)
	}
	if cp.ID != 1 || cp.Label != "v1" || cp.FilesChanged != 1 {
		t.Fatalf("checkpoint %+v", cp)
	}
	write("work.txt", "version 2\n")
	write("later.txt", "made after the checkpoint\n")
	for i := range 2 {
		var res sandboxapi.RollbackResult
		if err := h.run(wire.OpActivity(sandboxapi.UpdateRollback), wire.RollbackActivityInput{WorkspaceID: ws.ID, Checkpoint: cp.ID}, &res); err != nil {
			t.Fatalf("rollback #%d: %v", i+1, err)
		}
		if res.Checkpoint.ID != cp.ID || res.Undo.ID == 0 {
			t.Errorf("rollback #%d: %+v", i+1, res)
		}
		if got, _ := os.ReadFile(filepath.Join(ws.LocalPath, "work.txt")); string(got) != "version 1\n" {
			t.Errorf("rollback #%d: work.txt %q", i+1, got)
		}
		if _, err := os.Lstat(filepath.Join(ws.LocalPath, "later.txt")); !os.IsNotExist(err) {
			t.Errorf("rollback #%d: later.txt still there (%v)", i+1, err)
		}
	}
	var list sandboxapi.CheckpointList
	if err := h.run(wire.OpActivity(sandboxapi.UpdateCheckpoints), wire.WorkspaceActivityInput{WorkspaceID: ws.ID}, &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Checkpoints) != 3 || list.Checkpoints[0].ID != 1 {
		t.Errorf("checkpoints after two rollbacks (each takes an undo checkpoint): %+v", list.Checkpoints)
	}
	wantAppError(t, h.run(wire.OpActivity(sandboxapi.UpdateRollback), wire.RollbackActivityInput{WorkspaceID: ws.ID, Checkpoint: 99}, nil), sandboxapi.ErrNotFound)

	analysis := h.acquire(h.request(sandboxapi.ModeAnalysis, "")).Workspace
	wantAppError(t, h.run(wire.OpActivity(sandboxapi.UpdateCheckpoint), wire.CheckpointActivityInput{WorkspaceID: analysis.ID}, nil), sandboxapi.ErrCommandRejected)
}
