package workspace

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

func TestWriteReadRoundTrip(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	ws := f.ensure(f.req(sandboxapi.ModeEdit, "c1"))

	all := make([]byte, 0, 512)
	for i := 0; i < 512; i++ {
		all = append(all, byte(i))
	}
	cases := map[string][]byte{
		"deep/new/dir/bin.dat": all,
		"empty.txt":            {},
		"crlf.txt":             []byte("a\r\nb\r\n"),
		"unicode ✓.txt":        []byte("héllo\n"),
		"./-dash.txt":          []byte("-n\n"), // "-dash.txt" alone is refused (option injection)
	}
	for p, data := range cases {
		require.NoError(t, f.m.WriteFile(ctx, ws, p, data, 0), p)
		got, err := f.m.ReadFile(ctx, ws, p)
		require.NoError(t, err, p)
		assert.True(t, bytes.Equal(data, got), p)
		fi, err := os.Stat(filepath.Join(ws.LocalPath, p))
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o644), fi.Mode().Perm(), p)
	}
	got, err := f.m.ReadFile(ctx, ws, "bin.dat")
	require.NoError(t, err)
	assert.Equal(t, binaryContent, got)

	// Modes: only permission bits; mode 0 keeps an existing file's bits.
	require.NoError(t, f.m.WriteFile(ctx, ws, "run.sh", []byte("#!/bin/sh\n"), 0o4755))
	fi, err := os.Stat(filepath.Join(ws.LocalPath, "run.sh"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o755), fi.Mode()&(os.ModePerm|os.ModeSetuid))
	require.NoError(t, f.m.WriteFile(ctx, ws, "run.sh", []byte("#!/bin/sh\necho\n"), 0))
	fi, err = os.Stat(filepath.Join(ws.LocalPath, "run.sh"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o755), fi.Mode().Perm())
	require.NoError(t, f.m.WriteFile(ctx, ws, "run.sh", []byte("x"), 0o600))
	fi, err = os.Stat(filepath.Join(ws.LocalPath, "run.sh"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())

	// No temporary files are left behind.
	entries, err := os.ReadDir(ws.LocalPath)
	require.NoError(t, err)
	for _, e := range entries {
		assert.False(t, strings.HasPrefix(e.Name(), ".sandboxcore-tmp-"), e.Name())
	}

	// Limits and non-files.
	big := make([]byte, sandboxapi.MaxFileBytes+1)
	requireKind(t, f.m.WriteFile(ctx, ws, "big.bin", big, 0), sandboxapi.ErrResourceLimit)
	require.NoError(t, os.WriteFile(filepath.Join(ws.LocalPath, "big.bin"), big, 0o644))
	_, err = f.m.ReadFile(ctx, ws, "big.bin")
	requireKind(t, err, sandboxapi.ErrResourceLimit)
	_, err = f.m.ReadFile(ctx, ws, "src")
	requireKind(t, err, sandboxapi.ErrInvalidWorkspacePath)
	_, err = f.m.ReadFile(ctx, ws, "nope.txt")
	requireKind(t, err, sandboxapi.ErrInvalidWorkspacePath)
	assert.Contains(t, err.Error(), "no such file")
	requireKind(t, f.m.WriteFile(ctx, ws, "src", []byte("x"), 0), sandboxapi.ErrInvalidWorkspacePath)
	requireKind(t, f.m.WriteFile(ctx, ws, "", []byte("x"), 0), sandboxapi.ErrInvalidWorkspacePath)
	requireKind(t, f.m.WriteFile(ctx, ws, "README.md/x", []byte("x"), 0), sandboxapi.ErrInvalidWorkspacePath)
}

func TestListDir(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	ws := f.ensure(f.req(sandboxapi.ModeEdit, "c1"))
	require.NoError(t, os.Symlink("src", filepath.Join(ws.LocalPath, "link")))
	require.NoError(t, os.Symlink("/etc", filepath.Join(ws.LocalPath, "etc")))

	entries, err := f.m.ListDir(ctx, ws, "")
	require.NoError(t, err)
	var names []string
	types := map[string]string{}
	for _, e := range entries {
		names = append(names, e.Name)
		types[e.Name] = e.Type
	}
	assert.Equal(t, []string{"README.md", "bin.dat", "etc", "link", "src"}, names, "the worktree's .git is never listed")
	assert.Equal(t, map[string]string{"README.md": "file", "bin.dat": "file", "etc": "symlink", "link": "symlink", "src": "dir"}, types)
	for _, e := range entries {
		if e.Name == "README.md" {
			assert.Equal(t, int64(len("hello\nworld\n")), e.Size)
			assert.Equal(t, uint32(0o644), e.Mode)
		}
	}

	sub, err := f.m.ListDir(ctx, ws, "link") // a symlink inside the worktree
	require.NoError(t, err)
	require.Len(t, sub, 1)
	assert.Equal(t, "app.go", sub[0].Name)

	_, err = f.m.ListDir(ctx, ws, "README.md")
	requireKind(t, err, sandboxapi.ErrInvalidWorkspacePath)
	_, err = f.m.ListDir(ctx, ws, "missing")
	requireKind(t, err, sandboxapi.ErrInvalidWorkspacePath)
}

func TestPathsCannotEscape(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	ws := f.ensure(f.req(sandboxapi.ModeEdit, "c1"))
	outside := filepath.Join(filepath.Dir(f.root), "outside")
	require.NoError(t, os.MkdirAll(outside, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("secret needle\n"), 0o644))
	require.NoError(t, os.Symlink("/etc", filepath.Join(ws.LocalPath, "etc")))
	require.NoError(t, os.Symlink("../..", filepath.Join(ws.LocalPath, "up")))
	require.NoError(t, os.Symlink(outside, filepath.Join(ws.LocalPath, "out")))
	rel, err := filepath.Rel(filepath.Join(ws.LocalPath, "src"), outside)
	require.NoError(t, err)
	require.NoError(t, os.Symlink(rel, filepath.Join(ws.LocalPath, "src", "relout")))

	before := snapshot(t, filepath.Dir(f.root))
	etcBefore, err := os.ReadDir("/etc")
	require.NoError(t, err)

	paths := []string{
		"../x", "/etc/passwd", "a/../../x", "../../outside/secret.txt",
		"etc/passwd", "etc", "etc/new.txt",
		"up", "up/x", "up/outside/secret.txt",
		"out", "out/secret.txt", "out/new.txt",
		"src/relout/secret.txt", "src/relout/new.txt",
	}
	for _, p := range paths {
		_, err := f.m.ReadFile(ctx, ws, p)
		requireKind(t, err, sandboxapi.ErrInvalidWorkspacePath)
		requireKind(t, f.m.WriteFile(ctx, ws, p, []byte("pwned\n"), 0o644), sandboxapi.ErrInvalidWorkspacePath)
		_, err = f.m.ListDir(ctx, ws, p)
		requireKind(t, err, sandboxapi.ErrInvalidWorkspacePath)
		_, err = f.m.Search(ctx, ws, sandboxapi.SearchRequest{Pattern: "needle", Path: p})
		requireKind(t, err, sandboxapi.ErrInvalidWorkspacePath)
	}
	res, err := f.m.Search(ctx, ws, sandboxapi.SearchRequest{Pattern: "needle|root:"})
	require.NoError(t, err)
	assert.Empty(t, res.Matches)

	assert.Equal(t, before, snapshot(t, filepath.Dir(f.root)), "nothing may change, inside or outside")
	etcAfter, err := os.ReadDir("/etc")
	require.NoError(t, err)
	assert.Equal(t, len(etcBefore), len(etcAfter))
	assert.NoFileExists(t, "/etc/new.txt")
}

func TestGitMetadataIsNotWritable(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	ws := f.ensure(f.req(sandboxapi.ModeEdit, "c1"))
	gitfile, err := os.ReadFile(filepath.Join(ws.LocalPath, ".git"))
	require.NoError(t, err)
	for _, p := range []string{".git", ".git/config", "sub/.git/hooks/x", ".GIT/config", "a/.Git"} {
		requireKind(t, f.m.WriteFile(ctx, ws, p, []byte("x"), 0), sandboxapi.ErrInvalidWorkspacePath)
	}
	after, err := os.ReadFile(filepath.Join(ws.LocalPath, ".git"))
	require.NoError(t, err)
	assert.Equal(t, gitfile, after)
	assert.NoDirExists(t, filepath.Join(ws.LocalPath, "sub"))
	assert.NoDirExists(t, filepath.Join(ws.LocalPath, "a"))

	// Nor through a symlink as the last component.
	require.NoError(t, os.Symlink(".git", filepath.Join(ws.LocalPath, "gl")))
	requireKind(t, f.m.WriteFile(ctx, ws, "gl", []byte("gitdir: /tmp\n"), 0), sandboxapi.ErrInvalidWorkspacePath)
	after, err = os.ReadFile(filepath.Join(ws.LocalPath, ".git"))
	require.NoError(t, err)
	assert.Equal(t, gitfile, after)
}

// The worktree's own .git (a file naming the host's administrative
// directory: a host path) is no workspace file: list_dir and search never
// show it, and reading, listing or writing it — by name in any case, or
// through a symlink — is InvalidWorkspacePath saying what it is, with no
// host path in the message; nothing changes.
func TestWorktreeGitIsHiddenAndRefused(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	ws := f.ensure(f.req(sandboxapi.ModeEdit, "c1"))
	gitfile, err := os.ReadFile(filepath.Join(ws.LocalPath, ".git"))
	require.NoError(t, err)
	require.NoError(t, os.Symlink(".git", filepath.Join(ws.LocalPath, "gl")))
	require.NoError(t, os.MkdirAll(filepath.Join(ws.LocalPath, "src", ".git"), 0o755)) // a nested repository's

	entries, err := f.m.ListDir(ctx, ws, "")
	require.NoError(t, err)
	tree, err := f.m.ListTree(ctx, ws, sandboxapi.ListDirInput{Depth: 3})
	require.NoError(t, err)
	sub, err := f.m.ListDir(ctx, ws, "src")
	require.NoError(t, err)
	for _, e := range append(append(entries, tree.Entries...), sub...) {
		assert.NotEqual(t, ".git", path.Base(e.Name), "list_dir shows %s", e.Name)
	}
	res, err := f.m.Search(ctx, ws, sandboxapi.SearchRequest{Pattern: "gitdir"})
	require.NoError(t, err)
	assert.Empty(t, res.Matches)

	refused := func(err error) {
		t.Helper()
		requireKind(t, err, sandboxapi.ErrInvalidWorkspacePath)
		assert.Contains(t, err.Error(), "the worktree's .git is the host's git metadata, not a workspace file")
		assert.NotContains(t, err.Error(), f.root, "no host path")
	}
	for _, p := range []string{".git", ".GIT", "./.git", "gl"} {
		data, err := f.m.ReadFile(ctx, ws, p)
		refused(err)
		assert.Nil(t, data)
	}
	_, err = f.m.ListDir(ctx, ws, ".git")
	refused(err)
	_, err = f.m.ListTree(ctx, ws, sandboxapi.ListDirInput{Path: ".git/x", Depth: 2})
	refused(err)
	refused(f.m.WriteFile(ctx, ws, ".git", []byte("gitdir: /tmp\n"), 0))
	_, err = f.m.EditFile(ctx, ws, sandboxapi.EditFileInput{Command: sandboxapi.EditCreate, Path: ".Git", FileText: "x"}, "")
	refused(err)
	after, err := os.ReadFile(filepath.Join(ws.LocalPath, ".git"))
	require.NoError(t, err)
	assert.Equal(t, gitfile, after)
}

func TestSearch(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	ws := f.ensure(f.req(sandboxapi.ModeAnalysis, "")) // search works read-only
	w := func(p, content string) {
		full := filepath.Join(ws.LocalPath, p)
		require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
		require.NoError(t, os.WriteFile(full, []byte(content), 0o644))
	}
	w("a.txt", "Hello World\nfoo -bar\nnothing\n")
	w("sub/b.go", "package b\n// hello there\r\n")
	w("sub/deep/c.md", "HELLO loud\n")
	w("bin.raw", "hello\x00binary\n")
	w("nested/.git/HEAD", "hello from git metadata\n")
	w("long.txt", strings.Repeat("é", 400)+"hello"+strings.Repeat("z", 1000)+"\n")
	outside := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(outside, "o.txt"), []byte("hello outside\n"), 0o644))
	require.NoError(t, os.Symlink("sub", filepath.Join(ws.LocalPath, "dirlink")))
	require.NoError(t, os.Symlink("a.txt", filepath.Join(ws.LocalPath, "filelink.txt")))
	require.NoError(t, os.Symlink(outside, filepath.Join(ws.LocalPath, "outlink")))

	paths := func(r sandboxapi.SearchResult) []string {
		var out []string
		for _, m := range r.Matches {
			out = append(out, m.Path)
		}
		return out
	}

	res, err := f.m.Search(ctx, ws, sandboxapi.SearchRequest{Pattern: "hello"})
	require.NoError(t, err)
	assert.Equal(t, []string{"README.md", "long.txt", "sub/b.go"}, paths(res))
	assert.False(t, res.Truncated)
	assert.Equal(t, sandboxapi.SearchMatch{Path: "sub/b.go", Line: 2, Text: "// hello there"}, res.Matches[2])
	assert.LessOrEqual(t, len(res.Matches[1].Text), sandboxapi.MaxSearchLineBytes)
	assert.True(t, strings.HasPrefix(res.Matches[1].Text, "éé"))
	assert.NotContains(t, res.Matches[1].Text, "\uFFFD")

	res, err = f.m.Search(ctx, ws, sandboxapi.SearchRequest{Pattern: "hello", IgnoreCase: true})
	require.NoError(t, err)
	assert.Equal(t, []string{"README.md", "a.txt", "long.txt", "sub/b.go", "sub/deep/c.md"}, paths(res))

	_, err = f.m.Search(ctx, ws, sandboxapi.SearchRequest{Pattern: "-bar", Literal: true})
	require.ErrorIs(t, err, sandboxapi.ErrInvalidArgument, "a pattern starting with '-' is refused")
	_, err = f.m.ReadFile(ctx, ws, "-dash.txt")
	require.ErrorIs(t, err, sandboxapi.ErrInvalidArgument, "a path starting with '-' is refused")
	res, err = f.m.Search(ctx, ws, sandboxapi.SearchRequest{Pattern: `\-bar`})
	require.NoError(t, err)
	require.Len(t, res.Matches, 1)
	assert.Equal(t, sandboxapi.SearchMatch{Path: "a.txt", Line: 2, Text: "foo -bar"}, res.Matches[0])

	res, err = f.m.Search(ctx, ws, sandboxapi.SearchRequest{Pattern: "o.*r$"})
	require.NoError(t, err)
	assert.Equal(t, []string{"a.txt"}, paths(res))
	res, err = f.m.Search(ctx, ws, sandboxapi.SearchRequest{Pattern: "(", Literal: true})
	require.NoError(t, err)
	assert.Empty(t, res.Matches)

	res, err = f.m.Search(ctx, ws, sandboxapi.SearchRequest{Pattern: "^h.llo", IgnoreCase: true, Path: "sub"})
	require.NoError(t, err)
	assert.Equal(t, []string{"sub/deep/c.md"}, paths(res))

	res, err = f.m.Search(ctx, ws, sandboxapi.SearchRequest{Pattern: "hello", IgnoreCase: true, MaxResults: 2})
	require.NoError(t, err)
	assert.Len(t, res.Matches, 2)
	assert.True(t, res.Truncated)

	res, err = f.m.Search(ctx, ws, sandboxapi.SearchRequest{Pattern: "hello", Path: "a.txt", IgnoreCase: true})
	require.NoError(t, err)
	assert.Equal(t, []string{"a.txt"}, paths(res))

	_, err = f.m.Search(ctx, ws, sandboxapi.SearchRequest{Pattern: "("})
	requireKind(t, err, sandboxapi.ErrInvalidArgument)
	_, err = f.m.Search(ctx, ws, sandboxapi.SearchRequest{Pattern: ""})
	requireKind(t, err, sandboxapi.ErrInvalidArgument)
	_, err = f.m.Search(ctx, ws, sandboxapi.SearchRequest{Pattern: "x", Path: ".git"})
	requireKind(t, err, sandboxapi.ErrInvalidWorkspacePath)
	_, err = f.m.Search(ctx, ws, sandboxapi.SearchRequest{Pattern: "x", Path: "outlink"})
	requireKind(t, err, sandboxapi.ErrInvalidWorkspacePath)
}

func TestSizeBytes(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	ws := f.ensure(f.req(sandboxapi.ModeEdit, "c1"))
	base, err := f.m.SizeBytes(ctx, ws)
	require.NoError(t, err)
	assert.Positive(t, base)
	require.NoError(t, f.m.WriteFile(ctx, ws, "d/x.bin", make([]byte, 10000), 0))
	bigOutside := filepath.Join(t.TempDir(), "big")
	require.NoError(t, os.WriteFile(bigOutside, make([]byte, 1<<20), 0o644))
	require.NoError(t, os.Symlink(bigOutside, filepath.Join(ws.LocalPath, "big-link")))
	require.NoError(t, os.Symlink(filepath.Dir(bigOutside), filepath.Join(ws.LocalPath, "dir-link")))
	got, err := f.m.SizeBytes(ctx, ws)
	require.NoError(t, err)
	assert.Equal(t, base+10000, got)

	require.NoError(t, os.RemoveAll(ws.LocalPath))
	_, err = f.m.SizeBytes(ctx, ws)
	requireKind(t, err, sandboxapi.ErrWorkspaceNotFound)
}

// TestWritableRel: a write or an edit never targets the workspace root or
// a path inside .git, and names its verb in the refusal.
func TestWritableRel(t *testing.T) {
	rel, err := writableRel("write", "./src/a.go")
	require.NoError(t, err)
	assert.Equal(t, "src/a.go", rel)
	for _, p := range []string{".", "", ".git/config", "sub/.git/HEAD"} {
		_, err := writableRel("edit", p)
		requireKind(t, err, sandboxapi.ErrInvalidWorkspacePath)
		assert.Contains(t, sandboxapi.Message(err), "edit ", p)
	}
	_, err = writableRel("write", "../x")
	requireKind(t, err, sandboxapi.ErrInvalidWorkspacePath)
}

// A search that stopped at its file limit says so (TruncatedBy
// "max_files"), not that more matches exist, even with no match at all;
// files skipped for their size are listed and binary ones counted.
func TestSearchSaysWhyItStopped(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	ws := f.ensure(f.req(sandboxapi.ModeAnalysis, ""))
	big := filepath.Join(ws.LocalPath, "aa-big.log")
	require.NoError(t, os.WriteFile(big, append(bytes.Repeat([]byte("needle\n"), MaxSearchFileBytes/7), []byte("needle\n")...), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(ws.LocalPath, "aa-bin.raw"), []byte("needle\x00\n"), 0o644))

	res, err := f.m.Search(ctx, ws, sandboxapi.SearchRequest{Pattern: "needle"})
	require.NoError(t, err)
	assert.Empty(t, res.Matches)
	assert.False(t, res.Truncated)
	assert.Equal(t, "", res.TruncatedBy)
	assert.Equal(t, []string{"aa-big.log"}, res.SkippedTooLarge)
	assert.Equal(t, 1, res.SkippedTooLargeCount)
	assert.GreaterOrEqual(t, res.SkippedBinary, 1)

	many := filepath.Join(ws.LocalPath, "many")
	require.NoError(t, os.Mkdir(many, 0o755))
	for i := 0; i <= MaxSearchFiles; i++ {
		require.NoError(t, os.WriteFile(filepath.Join(many, fmt.Sprintf("f%05d.txt", i)), []byte("hay\n"), 0o644))
	}
	res, err = f.m.Search(ctx, ws, sandboxapi.SearchRequest{Pattern: "needle"})
	require.NoError(t, err)
	assert.Empty(t, res.Matches)
	assert.True(t, res.Truncated)
	assert.Equal(t, sandboxapi.SearchCapFiles, res.TruncatedBy, "the file limit, not the result cap")

	res, err = f.m.Search(ctx, ws, sandboxapi.SearchRequest{Pattern: "hay", MaxResults: 3})
	require.NoError(t, err)
	assert.Len(t, res.Matches, 3)
	assert.Equal(t, sandboxapi.SearchCapResults, res.TruncatedBy)
}
