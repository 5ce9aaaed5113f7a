package activities

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/sandboxcore/sandboxcore/internal/wire"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// Writing the same file twice (an activity retry) leaves the same bytes,
// the same result and the same git status; reading it returns those bytes.
func TestWriteFileTwiceLeavesTheSameState(t *testing.T) {
	h := newTestHost(t)
	ws := h.acquire(h.request(sandboxapi.ModeEdit, "c1")).Workspace
	in := wire.FileActivityInput{WorkspaceID: ws.ID, Path: "src/new.txt", Content: []byte("line one\n\x00binary tail"), Mode: 0o755}
	var first, second sandboxapi.WriteFileResult
	var st1, st2 sandboxapi.WorkspaceStatus
	if err := h.run(wire.OpActivity(sandboxapi.UpdateWriteFile), in, &first); err != nil {
		t.Fatal(err)
	}
	if err := h.run(wire.OpActivity(sandboxapi.UpdateStatus), wire.WorkspaceActivityInput{WorkspaceID: ws.ID}, &st1); err != nil {
		t.Fatal(err)
	}
	if err := h.run(wire.OpActivity(sandboxapi.UpdateWriteFile), in, &second); err != nil {
		t.Fatal(err)
	}
	if err := h.run(wire.OpActivity(sandboxapi.UpdateStatus), wire.WorkspaceActivityInput{WorkspaceID: ws.ID}, &st2); err != nil {
		t.Fatal(err)
	}
	if first != second || first.Bytes != int64(len(in.Content)) {
		t.Errorf("results %+v then %+v", first, second)
	}
	if !reflect.DeepEqual(st1, st2) || !st2.Dirty {
		t.Errorf("status after one write %+v, after two %+v", st1, st2)
	}
	p := filepath.Join(ws.LocalPath, "src", "new.txt")
	got, err := os.ReadFile(p)
	if err != nil || !bytes.Equal(got, in.Content) {
		t.Fatalf("file on disk %q, %v", got, err)
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm()&0o100 == 0 {
		t.Errorf("mode %v: the executable bit was dropped", fi.Mode())
	}
	var read sandboxapi.ReadFileResult
	if err := h.run(wire.OpActivity(sandboxapi.UpdateReadFile), wire.FileActivityInput{WorkspaceID: ws.ID, Path: "src/new.txt"}, &read); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(read.Content, in.Content) || read.Size != int64(len(in.Content)) {
		t.Errorf("read_file %q (%d bytes)", read.Content, read.Size)
	}
	row, err := h.store.GetWorkspace(context.Background(), ws.ID)
	if err != nil || !row.Dirty {
		t.Errorf("the row is not marked dirty after a write: %+v, %v", row.Dirty, err)
	}
}

// Paths that leave the worktree, or name nothing, are refused with their
// typed errors and write nothing anywhere.
func TestFileActivitiesRefuseBadPaths(t *testing.T) {
	h := newTestHost(t)
	ws := h.acquire(h.request(sandboxapi.ModeEdit, "c1")).Workspace
	outside := filepath.Join(filepath.Dir(ws.LocalPath), "escaped.txt")
	if err := os.Symlink(filepath.Dir(ws.LocalPath), filepath.Join(ws.LocalPath, "link")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path string
		want *sandboxapi.Kind
	}{
		{"../escaped.txt", sandboxapi.ErrInvalidWorkspacePath},
		{"/etc/passwd", sandboxapi.ErrInvalidWorkspacePath},
		{"link/escaped.txt", sandboxapi.ErrInvalidWorkspacePath}, // through a symlink out of the root
		{"a/../../escaped.txt", sandboxapi.ErrInvalidWorkspacePath},
		{".git/config", sandboxapi.ErrInvalidWorkspacePath},
		{"-n", sandboxapi.ErrInvalidArgument}, // could be read as an option
	} {
		t.Run(c.path, func(t *testing.T) {
			err := h.run(wire.OpActivity(sandboxapi.UpdateWriteFile), wire.FileActivityInput{WorkspaceID: ws.ID, Path: c.path, Content: []byte("x")}, nil)
			wantAppError(t, err, c.want)
		})
	}
	if _, err := os.Lstat(outside); !os.IsNotExist(err) {
		t.Errorf("a refused write created %s (%v)", outside, err)
	}
	wantAppError(t, h.run(wire.OpActivity(sandboxapi.UpdateReadFile), wire.FileActivityInput{WorkspaceID: ws.ID, Path: "missing.txt"}, nil), sandboxapi.ErrFileNotFound)
	wantAppError(t, h.run(wire.OpActivity(sandboxapi.UpdateReadFile), wire.FileActivityInput{WorkspaceID: sandboxapi.WorkspaceIDForKey("edit|x|y|z"), Path: "README.md"}, nil), sandboxapi.ErrWorkspaceNotFound)
}

// An analysis workspace is read-only: write_file, edit_file and commit are
// SandboxCommandRejected and its worktree stays clean.
func TestAnalysisWorkspaceRefusesWrites(t *testing.T) {
	h := newTestHost(t)
	ws := h.acquire(h.request(sandboxapi.ModeAnalysis, "")).Workspace
	if ws.Capabilities.Writable {
		t.Fatal("an analysis workspace is writable")
	}
	wantAppError(t, h.run(wire.OpActivity(sandboxapi.UpdateWriteFile), wire.FileActivityInput{WorkspaceID: ws.ID, Path: "README.md", Content: []byte("changed")}, nil), sandboxapi.ErrCommandRejected)
	wantAppError(t, h.run(wire.ActivityEditFile, wire.EditFileActivityInput{WorkspaceID: ws.ID,
		Request: sandboxapi.EditFileInput{Command: "str_replace", Path: "README.md", OldStr: "project", NewStr: "changed"}}, nil), sandboxapi.ErrCommandRejected)
	wantAppError(t, h.run(wire.OpActivity(sandboxapi.UpdateCommit), wire.OpInput[sandboxapi.CommitRequest]{WorkspaceID: ws.ID, Request: sandboxapi.CommitRequest{Message: "m", AllowEmpty: true}}, nil), sandboxapi.ErrCommandRejected)
	var st sandboxapi.WorkspaceStatus
	if err := h.run(wire.OpActivity(sandboxapi.UpdateStatus), wire.WorkspaceActivityInput{WorkspaceID: ws.ID}, &st); err != nil {
		t.Fatal(err)
	}
	if st.Dirty || st.Head != ws.BaseCommit {
		t.Errorf("after refused writes: dirty %v head %s (base %s)", st.Dirty, st.Head, ws.BaseCommit)
	}
}

// list_dir, search and diff: what they return for real files, and bad
// arguments refused with their typed errors.
func TestReadOnlyOperations(t *testing.T) {
	h := newTestHost(t)
	ws := h.acquire(h.request(sandboxapi.ModeEdit, "c1")).Workspace
	if err := h.run(wire.OpActivity(sandboxapi.UpdateWriteFile), wire.FileActivityInput{WorkspaceID: ws.ID, Path: "pkg/new.go", Content: []byte("package pkg // needle\n")}, nil); err != nil {
		t.Fatal(err)
	}
	var dir sandboxapi.ListDirResult
	if err := h.run(wire.OpActivity(sandboxapi.UpdateListDir), wire.FileActivityInput{WorkspaceID: ws.ID, Path: "pkg"}, &dir); err != nil {
		t.Fatal(err)
	}
	if len(dir.Entries) != 1 || dir.Entries[0].Name != "new.go" || dir.Entries[0].Size != 22 {
		t.Errorf("list_dir pkg: %+v", dir.Entries)
	}
	var found sandboxapi.SearchResult
	if err := h.run(wire.OpActivity(sandboxapi.UpdateSearch), wire.OpInput[sandboxapi.SearchRequest]{WorkspaceID: ws.ID, Request: sandboxapi.SearchRequest{Pattern: "needle", Literal: true}}, &found); err != nil {
		t.Fatal(err)
	}
	if len(found.Matches) != 1 || found.Matches[0].Path != "pkg/new.go" || found.Matches[0].Line != 1 {
		t.Errorf("search: %+v", found.Matches)
	}
	var d sandboxapi.Diff
	if err := h.run(wire.OpActivity(sandboxapi.UpdateDiff), wire.WorkspaceActivityInput{WorkspaceID: ws.ID}, &d); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(d.Files, []string{"pkg/new.go"}) || !bytes.Contains([]byte(d.Patch), []byte("+package pkg // needle")) || d.BaseCommit != ws.BaseCommit {
		t.Errorf("diff: files %v base %s patch:\n%s", d.Files, d.BaseCommit, d.Patch)
	}
	wantAppError(t, h.run(wire.OpActivity(sandboxapi.UpdateListDir), wire.FileActivityInput{WorkspaceID: ws.ID, Path: "../"}, nil), sandboxapi.ErrInvalidWorkspacePath)
	wantAppError(t, h.run(wire.OpActivity(sandboxapi.UpdateSearch), wire.OpInput[sandboxapi.SearchRequest]{WorkspaceID: ws.ID, Request: sandboxapi.SearchRequest{Pattern: "(unclosed"}}, nil), sandboxapi.ErrInvalidArgument)
	wantAppError(t, h.run(wire.OpActivity(sandboxapi.UpdateSearch), wire.OpInput[sandboxapi.SearchRequest]{WorkspaceID: ws.ID, Request: sandboxapi.SearchRequest{Pattern: "x", Path: "/etc"}}, nil), sandboxapi.ErrInvalidWorkspacePath)
}
