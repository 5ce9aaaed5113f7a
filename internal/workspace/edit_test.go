package workspace

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

func TestEditFileCommands(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	ws := f.ensure(f.req(sandboxapi.ModeEdit, "c1"))
	read := func(p string) string {
		b, err := os.ReadFile(filepath.Join(ws.LocalPath, p))
		require.NoError(t, err)
		return string(b)
	}
	edit := func(in sandboxapi.EditFileInput) (sandboxapi.EditFileResult, error) {
		return f.m.EditFile(ctx, ws, in, "")
	}

	// create: parents made, snippet numbered, an existing file replaced with its bits kept.
	res, err := edit(sandboxapi.EditFileInput{Path: "a/b/c.txt", Command: "create", FileText: "one\ntwo\nthree\n"})
	require.NoError(t, err)
	assert.Equal(t, sandboxapi.EditFileResult{Path: "a/b/c.txt", Bytes: 14, Snippet: "     1\tone\n     2\ttwo\n     3\tthree\n",
		ContentHash: sandboxapi.ContentHash([]byte("one\ntwo\nthree\n"))}, res)
	require.NoError(t, os.Chmod(filepath.Join(ws.LocalPath, "a/b/c.txt"), 0o755))

	// str_replace: exactly once.
	res, err = edit(sandboxapi.EditFileInput{Path: "a/b/c.txt", Command: "str_replace", OldStr: "two\n", NewStr: "TWO\n2b\n"})
	require.NoError(t, err)
	assert.Equal(t, "one\nTWO\n2b\nthree\n", read("a/b/c.txt"))
	assert.Equal(t, int64(17), res.Bytes)
	assert.Contains(t, res.Snippet, "     2\tTWO\n     3\t2b\n")
	fi, err := os.Stat(filepath.Join(ws.LocalPath, "a/b/c.txt"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o755), fi.Mode().Perm())

	_, err = edit(sandboxapi.EditFileInput{Path: "a/b/c.txt", Command: "str_replace", OldStr: "missing", NewStr: "x"})
	require.ErrorIs(t, err, sandboxapi.ErrInvalidArgument)
	assert.Contains(t, err.Error(), "0 times")
	require.NoError(t, os.WriteFile(filepath.Join(ws.LocalPath, "dup.txt"), []byte("x = 1\nx = 1\nx = 1\n"), 0o644))
	_, err = edit(sandboxapi.EditFileInput{Path: "dup.txt", Command: "str_replace", OldStr: "x = 1", NewStr: "y"})
	require.ErrorIs(t, err, sandboxapi.ErrInvalidArgument)
	assert.Contains(t, err.Error(), "occurs 3 times")
	var se *sandboxapi.Error
	require.ErrorAs(t, err, &se)
	assert.Equal(t, "old_str", se.Field)
	assert.Equal(t, "x = 1\nx = 1\nx = 1\n", read("dup.txt"), "a refused edit changes nothing")
	// Deleting text: new_str empty.
	_, err = edit(sandboxapi.EditFileInput{Path: "a/b/c.txt", Command: "str_replace", OldStr: "2b\n"})
	require.NoError(t, err)
	assert.Equal(t, "one\nTWO\nthree\n", read("a/b/c.txt"))

	// insert: 0 = before the first line; N = after line N; whole lines.
	_, err = edit(sandboxapi.EditFileInput{Path: "a/b/c.txt", Command: "insert", InsertLine: 0, NewStr: "zero"})
	require.NoError(t, err)
	_, err = edit(sandboxapi.EditFileInput{Path: "a/b/c.txt", Command: "insert", InsertLine: 4, NewStr: "four\n"})
	require.NoError(t, err)
	res, err = edit(sandboxapi.EditFileInput{Path: "a/b/c.txt", Command: "insert", InsertLine: 2, NewStr: "1.5\n1.7\n"})
	require.NoError(t, err)
	assert.Equal(t, "zero\none\n1.5\n1.7\nTWO\nthree\nfour\n", read("a/b/c.txt"))
	assert.Contains(t, res.Snippet, "     3\t1.5\n     4\t1.7\n")
	_, err = edit(sandboxapi.EditFileInput{Path: "a/b/c.txt", Command: "insert", InsertLine: 8, NewStr: "x"})
	require.ErrorIs(t, err, sandboxapi.ErrInvalidArgument)
	assert.Contains(t, err.Error(), "7 lines")
	// After a last line without its newline.
	require.NoError(t, os.WriteFile(filepath.Join(ws.LocalPath, "nonl.txt"), []byte("a\nb"), 0o644))
	_, err = edit(sandboxapi.EditFileInput{Path: "nonl.txt", Command: "insert", InsertLine: 2, NewStr: "c"})
	require.NoError(t, err)
	assert.Equal(t, "a\nb\nc", read("nonl.txt"))

	// Binary and oversized files are refused with typed errors; nothing changes.
	_, err = edit(sandboxapi.EditFileInput{Path: "bin.dat", Command: "str_replace", OldStr: "x", NewStr: "y"})
	require.ErrorIs(t, err, sandboxapi.ErrInvalidArgument)
	assert.Contains(t, err.Error(), "binary")
	big := strings.Repeat("a", sandboxapi.MaxFileBytes) + "b"
	require.NoError(t, os.WriteFile(filepath.Join(ws.LocalPath, "big.txt"), []byte(big), 0o644))
	_, err = edit(sandboxapi.EditFileInput{Path: "big.txt", Command: "str_replace", OldStr: "b", NewStr: "c"})
	require.ErrorIs(t, err, sandboxapi.ErrResourceLimit)
	require.NoError(t, os.WriteFile(filepath.Join(ws.LocalPath, "almost.txt"), []byte(big[:sandboxapi.MaxFileBytes-1]+"b"), 0o644))
	_, err = edit(sandboxapi.EditFileInput{Path: "almost.txt", Command: "str_replace", OldStr: "b", NewStr: "ccc"})
	require.ErrorIs(t, err, sandboxapi.ErrResourceLimit, "the result would be oversized")

	// Paths: escapes, .git, a missing file, a symlink, a directory.
	for p, kind := range map[string]*sandboxapi.Kind{
		"../../etc/passwd": sandboxapi.ErrInvalidWorkspacePath,
		".git/config":      sandboxapi.ErrInvalidWorkspacePath,
		"nope.txt":         sandboxapi.ErrFileNotFound,
		"a":                sandboxapi.ErrInvalidWorkspacePath,
		"-n":               sandboxapi.ErrInvalidArgument,
	} {
		_, err := edit(sandboxapi.EditFileInput{Path: p, Command: "str_replace", OldStr: "x", NewStr: "y"})
		require.ErrorIs(t, err, kind, p)
	}
	require.NoError(t, os.Symlink("a/b/c.txt", filepath.Join(ws.LocalPath, "link.txt")))
	_, err = edit(sandboxapi.EditFileInput{Path: "link.txt", Command: "str_replace", OldStr: "one", NewStr: "1"})
	require.ErrorIs(t, err, sandboxapi.ErrInvalidWorkspacePath)
	require.NoError(t, os.Symlink("/etc/passwd", filepath.Join(ws.LocalPath, "out.txt")))
	_, err = edit(sandboxapi.EditFileInput{Path: "out.txt", Command: "create", FileText: "x"})
	require.ErrorIs(t, err, sandboxapi.ErrInvalidWorkspacePath)

	// Bad arguments.
	for _, in := range []sandboxapi.EditFileInput{
		{Path: "x", Command: "view"},
		{Path: "x", Command: "str_replace"},
		{Path: "x", Command: "insert", InsertLine: -1},
		{Path: "x", Command: "create", FileText: "a\x00b"},
	} {
		_, err := edit(in)
		require.ErrorIs(t, err, sandboxapi.ErrInvalidArgument, "%+v", in)
	}

	// An analysis workspace refuses edits.
	ro := f.ensure(f.req(sandboxapi.ModeAnalysis, "main"))
	_, err = f.m.EditFile(ctx, ro, sandboxapi.EditFileInput{Path: "README.md", Command: "create", FileText: "x"}, "")
	require.ErrorIs(t, err, sandboxapi.ErrCommandRejected)
}

func TestEditFileRetryIsNotAppliedTwice(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	ws := f.ensure(f.req(sandboxapi.ModeEdit, "c1"))
	ins := sandboxapi.EditFileInput{Path: "README.md", Command: "insert", InsertLine: 0, NewStr: "top"}
	first, err := f.m.EditFile(ctx, ws, ins, "upd-1")
	require.NoError(t, err)
	again, err := f.m.EditFile(ctx, ws, ins, "upd-1") // a retried activity
	require.NoError(t, err)
	assert.Equal(t, first, again)
	b, err := os.ReadFile(filepath.Join(ws.LocalPath, "README.md"))
	require.NoError(t, err)
	assert.Equal(t, "top\nhello\nworld\n", string(b))
	_, err = f.m.EditFile(ctx, ws, ins, "upd-2") // another update inserts again
	require.NoError(t, err)
	b, err = os.ReadFile(filepath.Join(ws.LocalPath, "README.md"))
	require.NoError(t, err)
	assert.Equal(t, "top\ntop\nhello\nworld\n", string(b))
	// The same id after the file changed otherwise is applied (the record no longer matches).
	require.NoError(t, f.m.WriteFile(ctx, ws, "README.md", []byte("x\n"), 0))
	_, err = f.m.EditFile(ctx, ws, ins, "upd-2")
	require.NoError(t, err)
	b, err = os.ReadFile(filepath.Join(ws.LocalPath, "README.md"))
	require.NoError(t, err)
	assert.Equal(t, "top\nx\n", string(b))
}

func TestListTreeDepthHiddenIgnored(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	ws := f.ensure(f.req(sandboxapi.ModeEdit, "c1"))
	for p, data := range map[string]string{
		".gitignore":              "build/\n*.log\n",
		"src/deep/inner/x.go":     "package x\n",
		"src/.hidden":             "h\n",
		"build/out.bin":           "o\n",
		"keep.log":                "l\n",
		"src/pkg/y.go":            "package y\n",
		"node/.cache/thing":       "c\n",
		"src/deep/inner/more/z.c": "z\n",
	} {
		require.NoError(t, f.m.WriteFile(ctx, ws, p, []byte(data), 0))
	}
	names := func(res sandboxapi.ListDirResult) []string {
		var out []string
		for _, e := range res.Entries {
			out = append(out, e.Name)
		}
		return out
	}
	res, err := f.m.ListTree(ctx, ws, sandboxapi.ListDirInput{Depth: 2, SkipHidden: true, SkipIgnored: true})
	require.NoError(t, err)
	assert.Equal(t, []string{"README.md", "bin.dat", "node", "src", "src/app.go", "src/deep", "src/pkg"}, names(res))

	res, err = f.m.ListTree(ctx, ws, sandboxapi.ListDirInput{Depth: 2})
	require.NoError(t, err)
	for _, want := range []string{".gitignore", "build", "build/out.bin", "keep.log", "src/.hidden", "node/.cache"} {
		assert.Contains(t, names(res), want)
	}
	assert.NotContains(t, names(res), ".git")
	assert.NotContains(t, names(res), "src/deep/inner", "depth 2 stops there")

	res, err = f.m.ListTree(ctx, ws, sandboxapi.ListDirInput{Path: "src", Depth: 3, SkipIgnored: true})
	require.NoError(t, err)
	assert.Contains(t, names(res), "deep/inner/x.go")
	assert.Contains(t, names(res), ".hidden")
	assert.NotContains(t, names(res), "deep/inner/more/z.c")

	_, err = f.m.ListTree(ctx, ws, sandboxapi.ListDirInput{Depth: 4})
	require.ErrorIs(t, err, sandboxapi.ErrInvalidArgument)
	_, err = f.m.ListTree(ctx, ws, sandboxapi.ListDirInput{Path: "../x", Depth: 2})
	require.ErrorIs(t, err, sandboxapi.ErrInvalidWorkspacePath)
	_, err = f.m.ListTree(ctx, ws, sandboxapi.ListDirInput{Path: "README.md", Depth: 2})
	require.ErrorIs(t, err, sandboxapi.ErrInvalidWorkspacePath)
}

func TestLogAndSearchGlob(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	ws := f.ensure(f.req(sandboxapi.ModeEdit, "c1"))
	res, err := f.m.Log(ctx, ws, sandboxapi.LogRequest{})
	require.NoError(t, err)
	require.NotEmpty(t, res.Commits)
	assert.Equal(t, f.c2, res.Commits[0].Commit)
	assert.NotEmpty(t, res.Commits[0].Subject)
	assert.NotEmpty(t, res.Commits[0].Date)
	one, err := f.m.Log(ctx, ws, sandboxapi.LogRequest{Limit: 1})
	require.NoError(t, err)
	assert.Len(t, one.Commits, 1)
	assert.Equal(t, len(res.Commits) > 1, one.Truncated)
	_, err = f.m.Log(ctx, ws, sandboxapi.LogRequest{Limit: -1})
	require.ErrorIs(t, err, sandboxapi.ErrInvalidArgument)

	require.NoError(t, f.m.WriteFile(ctx, ws, "web/src/a/b.ts", []byte("needle\n"), 0))
	require.NoError(t, f.m.WriteFile(ctx, ws, "web/c.ts", []byte("needle\n"), 0))
	require.NoError(t, f.m.WriteFile(ctx, ws, "web/src/d.go", []byte("needle\n"), 0))
	paths := func(glob string) []string {
		r, err := f.m.Search(ctx, ws, sandboxapi.SearchRequest{Pattern: "needle", Glob: glob})
		require.NoError(t, err, glob)
		var out []string
		for _, m := range r.Matches {
			out = append(out, m.Path)
		}
		return out
	}
	assert.Equal(t, []string{"web/c.ts", "web/src/a/b.ts"}, paths("*.ts"))
	assert.Equal(t, []string{"web/src/a/b.ts"}, paths("web/src/**/*.ts"))
	assert.Equal(t, []string{"web/c.ts", "web/src/a/b.ts", "web/src/d.go"}, paths(""))
	_, err = f.m.Search(ctx, ws, sandboxapi.SearchRequest{Pattern: "needle", Glob: "[a"})
	require.ErrorIs(t, err, sandboxapi.ErrInvalidArgument)
}

// An edit whose worker dies (kill -9) at any point is applied exactly once
// by the retried activity (same update id): the edit record is written
// before the file is replaced, so a retry finds either the record and the
// new content (done: the recorded result) or the old content (not done:
// applied now). Before, the file was replaced first: a worker killed
// between the replace and the record left the edit applied but unrecorded,
// and the retry inserted the lines a second time (a str_replace then failed
// with "old_str does not occur").
func TestEditFileKilledMidwayIsAppliedOnce(t *testing.T) {
	for _, step := range []string{"recorded", "replaced"} {
		t.Run(step, func(t *testing.T) {
			f := newFixture(t)
			ctx := context.Background()
			ws := f.ensure(f.req(sandboxapi.ModeEdit, "c1"))
			ins := sandboxapi.EditFileInput{Path: "README.md", Command: "insert", InsertLine: 0, NewStr: "top"}
			editStep = func(s string) {
				if s == step {
					panic("killed")
				}
			}
			func() {
				defer func() { _ = recover() }()
				_, _ = f.m.EditFile(ctx, ws, ins, "upd-1")
			}()
			editStep = func(string) {}
			t.Cleanup(func() { editStep = func(string) {} })
			res, err := f.m.EditFile(ctx, ws, ins, "upd-1") // the retried activity
			require.NoError(t, err)
			b, err := os.ReadFile(filepath.Join(ws.LocalPath, "README.md"))
			require.NoError(t, err)
			assert.Equal(t, "top\nhello\nworld\n", string(b))
			assert.Equal(t, int64(len(b)), res.Bytes)
			assert.Contains(t, res.Snippet, "top")
		})
	}
}

// TestReplaceOnceAndInsertAt: the pure steps of an edit, with the lines the
// snippet is centred on and the refusals on their fields.
func TestReplaceOnceAndInsertAt(t *testing.T) {
	data, first, last, err := replaceOnce([]byte("a\nb\nc\n"), "f", "b\n", "x\ny\n")
	require.NoError(t, err)
	assert.Equal(t, "a\nx\ny\nc\n", string(data))
	assert.Equal(t, []int{2, 4}, []int{first, last})
	_, _, _, err = replaceOnce([]byte("a a"), "f", "a", "b")
	requireKind(t, err, sandboxapi.ErrInvalidArgument)
	assert.Contains(t, sandboxapi.Message(err), "occurs 2 times")
	_, _, _, err = replaceOnce([]byte("a"), "f", "z", "b")
	requireKind(t, err, sandboxapi.ErrInvalidArgument)

	data, first, last, err = insertAt([]byte("a\nb"), "f", 2, "c")
	require.NoError(t, err)
	assert.Equal(t, "a\nb\nc", string(data), "after a last line without its newline")
	assert.Equal(t, []int{3, 3}, []int{first, last})
	data, first, last, err = insertAt([]byte("a\nb\n"), "f", 0, "x\ny")
	require.NoError(t, err)
	assert.Equal(t, "x\ny\na\nb\n", string(data), "whole lines before what follows")
	assert.Equal(t, []int{1, 2}, []int{first, last})
	_, _, _, err = insertAt([]byte("a\n"), "f", 2, "x")
	requireKind(t, err, sandboxapi.ErrInvalidArgument)
}

// TestWithoutIgnored: an ignored entry goes, and so does everything below
// an ignored directory, whether git named it or not.
func TestWithoutIgnored(t *testing.T) {
	entries := []sandboxapi.FileEntry{
		{Name: "a.go", Type: sandboxapi.EntryFile},
		{Name: "build", Type: sandboxapi.EntryDir},
		{Name: "build.go", Type: sandboxapi.EntryFile},
		{Name: "build/out", Type: sandboxapi.EntryFile},
		{Name: "x.log", Type: sandboxapi.EntryFile},
	}
	paths := []string{"d/a.go", "d/build", "d/build.go", "d/build/out", "d/x.log"}
	got := withoutIgnored(entries, paths, map[string]bool{"d/build": true, "d/x.log": true})
	assert.Equal(t, []sandboxapi.FileEntry{{Name: "a.go", Type: sandboxapi.EntryFile}, {Name: "build.go", Type: sandboxapi.EntryFile}}, got)
}
