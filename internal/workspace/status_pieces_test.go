package workspace

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// lfsDecision opens ws afresh and returns hasAttributes, mayTrackLFS and
// the paths git itself lists as filter=lfs in it (`git ls-files
// ':(attr:filter=lfs)'` with the hardened runner and the worktree's own
// attributes), so that every case checks the skip against git.
func lfsDecision(t *testing.T, f *fixture, ws sandboxapi.Workspace) (has, may bool, gitLFS string) {
	t.Helper()
	ctx := context.Background()
	w, err := f.m.openWorktree(ctx, ws)
	require.NoError(t, err)
	has, err = f.m.hasAttributes(ctx, w)
	require.NoError(t, err)
	may, err = f.m.mayTrackLFS(ctx, w)
	require.NoError(t, err)
	out, err := w.git.with(readEnv).run(ctx, "ls-files", "--cached", "--", ":(attr:filter=lfs)")
	require.NoError(t, err)
	return has, may, string(out)
}

// TestMayTrackLFSDecision: the LFS scan is skipped only where git would
// list no filter=lfs path, and runs wherever an attributes source holds
// filter=lfs or cannot be read as git reads it — including a .gitattributes
// the agent wrote untracked, one deleted in the worktree but still in the
// index, one that is a symlink, the repository's info/attributes and a
// configured core.attributesFile.
func TestMayTrackLFSDecision(t *testing.T) {
	t.Run("no attributes", func(t *testing.T) {
		f := newFixture(t)
		ws := f.ensure(f.req(sandboxapi.ModeEdit, "a"))
		has, may, lfs := lfsDecision(t, f, ws)
		assert.False(t, has)
		assert.False(t, may)
		assert.Empty(t, lfs)
	})

	attrs := func(t *testing.T, content string) (*fixture, sandboxapi.Workspace) {
		f := newFixture(t)
		f.writeSrc(".gitattributes", content)
		f.git(f.src, "add", ".gitattributes")
		f.git(f.src, "commit", "-q", "-m", "attributes")
		f.fetch()
		return f, f.ensure(f.req(sandboxapi.ModeEdit, "a"))
	}

	t.Run("attributes without lfs", func(t *testing.T) {
		f, ws := attrs(t, "*.txt text\n*.dat binary\n")
		has, may, lfs := lfsDecision(t, f, ws)
		assert.True(t, has)
		assert.False(t, may, "no attributes source holds filter=lfs")
		assert.Empty(t, lfs)
	})

	t.Run("tracked lfs attributes", func(t *testing.T) {
		f, ws := attrs(t, "*.dat filter=lfs diff=lfs merge=lfs -text\n")
		_, may, lfs := lfsDecision(t, f, ws)
		assert.True(t, may)
		assert.Equal(t, "bin.dat\n", lfs)
	})

	t.Run("lfs through a macro", func(t *testing.T) {
		f, ws := attrs(t, "[attr]big filter=lfs diff=lfs merge=lfs -text\n*.dat big\n")
		_, may, lfs := lfsDecision(t, f, ws)
		assert.True(t, may)
		assert.Equal(t, "bin.dat\n", lfs)
	})

	t.Run("untracked attributes in a directory of tracked files", func(t *testing.T) {
		f, ws := attrs(t, "*.txt text\n")
		require.NoError(t, os.WriteFile(filepath.Join(ws.LocalPath, "src", ".gitattributes"), []byte("*.go filter=lfs\n"), 0o644))
		_, may, lfs := lfsDecision(t, f, ws)
		assert.True(t, may)
		assert.Equal(t, "src/app.go\n", lfs)
	})

	t.Run("edited in the worktree", func(t *testing.T) {
		f, ws := attrs(t, "*.txt text\n")
		require.NoError(t, os.WriteFile(filepath.Join(ws.LocalPath, ".gitattributes"), []byte("*.md filter=lfs\n"), 0o644))
		_, may, lfs := lfsDecision(t, f, ws)
		assert.True(t, may)
		assert.Equal(t, "README.md\n", lfs)
	})

	t.Run("lfs attributes removed in the worktree", func(t *testing.T) {
		f, ws := attrs(t, "*.dat filter=lfs\n")
		require.NoError(t, os.WriteFile(filepath.Join(ws.LocalPath, ".gitattributes"), []byte("*.txt text\n"), 0o644))
		_, may, lfs := lfsDecision(t, f, ws)
		assert.False(t, may, "git reads the worktree's file")
		assert.Empty(t, lfs)
	})

	t.Run("deleted in the worktree, still in the index", func(t *testing.T) {
		f, ws := attrs(t, "*.dat filter=lfs\n")
		require.NoError(t, os.Remove(filepath.Join(ws.LocalPath, ".gitattributes")))
		_, may, lfs := lfsDecision(t, f, ws)
		assert.True(t, may, "git reads the index blob")
		assert.Equal(t, "bin.dat\n", lfs)
	})

	t.Run("a symlink", func(t *testing.T) {
		f, ws := attrs(t, "*.txt text\n")
		p := filepath.Join(ws.LocalPath, ".gitattributes")
		require.NoError(t, os.Remove(p))
		require.NoError(t, os.Symlink("README.md", p))
		_, may, _ := lfsDecision(t, f, ws)
		assert.True(t, may, "not read as git reads it: the scan decides")
	})

	t.Run("info/attributes", func(t *testing.T) {
		f, ws := attrs(t, "*.txt text\n")
		require.NoError(t, os.MkdirAll(filepath.Join(f.bare, "info"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(f.bare, "info", "attributes"), []byte("*.go filter=lfs\n"), 0o644))
		_, may, lfs := lfsDecision(t, f, ws)
		assert.True(t, may)
		assert.Equal(t, "src/app.go\n", lfs)
	})

	t.Run("core.attributesFile", func(t *testing.T) {
		f, ws := attrs(t, "*.txt text\n")
		extra := filepath.Join(t.TempDir(), "attributes")
		require.NoError(t, os.WriteFile(extra, []byte("*.md filter=lfs\n"), 0o644))
		f.git(f.bare, "config", "core.attributesFile", extra)
		_, may, lfs := lfsDecision(t, f, ws)
		assert.True(t, may)
		assert.Equal(t, "README.md\n", lfs)
	})
}

// TestStatusSubmodulesFollowTheIndex: the submodule checks look at the
// index's gitlinks, whatever .gitmodules says: a workspace without any
// reports none; after a merge brings a submodule (gitlink and .gitmodules)
// into it, the next Status reports it uninitialised; a gitlink with no
// .gitmodules entry at all is reported too.
func TestStatusSubmodulesFollowTheIndex(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	ws := f.ensure(f.req(sandboxapi.ModeEdit, "c1"))
	st, err := f.m.Status(ctx, ws)
	require.NoError(t, err)
	assert.Empty(t, st.UninitializedSubmodules)
	assert.False(t, st.Dirty)

	_, commit := withSubmodule(t, f)
	f.git(ws.LocalPath, "merge", "-q", "--ff-only", "refs/remotes/origin/main")
	st, err = f.m.Status(ctx, ws)
	require.NoError(t, err)
	assert.Equal(t, []string{"lib/dep"}, st.UninitializedSubmodules)
	assert.False(t, st.Dirty, st.Files)

	f.git(ws.LocalPath, "update-index", "--add", "--cacheinfo", "160000,"+commit+",vendor/other")
	st, err = f.m.Status(ctx, ws)
	require.NoError(t, err)
	assert.Equal(t, []string{"lib/dep", "vendor/other"}, st.UninitializedSubmodules)
}

// TestAttributesFiles: the .gitattributes entries of an index listing, once
// each, whatever their directory, and nothing that merely ends in the name.
func TestAttributesFiles(t *testing.T) {
	blob := "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"
	listing := "100644 " + blob + " 0\t.gitattributes\x00" +
		"100644 " + blob + " 0\ta.gitattributes\x00" +
		"100644 " + blob + " 1\tsub/.gitattributes\x00" +
		"100644 " + blob + " 2\tsub/.gitattributes\x00" +
		"160000 " + blob + " 0\tlib/dep\x00" +
		"malformed\x00"
	got := attributesFiles([]byte(listing))
	assert.Equal(t, []stageEntry{
		{mode: "100644", blob: blob, stage: "0", path: ".gitattributes"},
		{mode: "100644", blob: blob, stage: "1", path: "sub/.gitattributes"},
	}, got)
	assert.Empty(t, attributesFiles(nil))
	assert.Len(t, parseStage([]byte(listing)), 5)
}

// TestWithDirtySubmodules: a dirty submodule is added as " M" once, after
// the files git listed, and not again when git listed its path already.
func TestWithDirtySubmodules(t *testing.T) {
	files := []sandboxapi.FileStatus{{Path: "a.go", Status: " M"}, {Path: "lib/x", Status: "M "}}
	got := withDirtySubmodules(append([]sandboxapi.FileStatus(nil), files...), []string{"lib/x", "lib/dep"})
	assert.Equal(t, append(files, sandboxapi.FileStatus{Path: "lib/dep", Status: " M"}), got)
	assert.Nil(t, withDirtySubmodules(nil, nil))
	assert.Nil(t, configWarnings(nil))
	assert.Nil(t, uninitializedPaths([]sandbox.Submodule{{Path: "a", CheckedOut: true}}))
	assert.Equal(t, []string{"b"}, uninitializedPaths([]sandbox.Submodule{{Path: "a", CheckedOut: true}, {Path: "b"}}))
}

// TestDiffNames: names are split on NUL, empty ones skipped, a last name
// cut by the buffer's cap dropped, and more than MaxDiffFiles cut; either
// cut reports truncated.
func TestDiffNames(t *testing.T) {
	b := &cappedBuffer{max: 1 << 10}
	_, _ = b.Write([]byte("a.go\x00dir/b c\x00"))
	files, cut := diffNames(b)
	assert.Equal(t, []string{"a.go", "dir/b c"}, files)
	assert.False(t, cut)

	b = &cappedBuffer{max: 8}
	_, _ = b.Write([]byte("a.go\x00longer-name\x00"))
	files, cut = diffNames(b)
	assert.Equal(t, []string{"a.go"}, files)
	assert.True(t, cut)

	files, cut = diffNames(&cappedBuffer{max: 8})
	assert.Equal(t, []string{}, files)
	assert.False(t, cut)

	b = &cappedBuffer{max: 1 << 20}
	for i := 0; i <= MaxDiffFiles; i++ {
		_, _ = b.Write([]byte("f\x00"))
	}
	files, cut = diffNames(b)
	assert.Len(t, files, MaxDiffFiles)
	assert.True(t, cut)
}

// TestCommitArguments: the message, the identity (defaulted) and the paths
// are checked before any git runs; paths become NUL-terminated pathspecs.
func TestCommitArguments(t *testing.T) {
	id, specs, err := commitArguments(sandboxapi.CommitRequest{Message: "m", Paths: []string{"./a.go", "dir/b"}})
	require.NoError(t, err)
	assert.Equal(t, commitIdentity{name: DefaultAuthorName, email: DefaultAuthorEmail}, id)
	assert.Equal(t, "a.go\x00dir/b\x00", specs.String())
	id, specs, err = commitArguments(sandboxapi.CommitRequest{Message: "m", AuthorName: "A", AuthorEmail: "a@example.com"})
	require.NoError(t, err)
	assert.Equal(t, commitIdentity{name: "A", email: "a@example.com"}, id)
	assert.Zero(t, specs.Len())
	for _, req := range []sandboxapi.CommitRequest{
		{Message: " \n"},
		{Message: strings.Repeat("x", MaxCommitMessageBytes+1)},
		{Message: "a\x00b"},
		{Message: "m", AuthorName: "a <b>"},
		{Message: "m", AuthorEmail: "a\nb"},
		{Message: "m", AuthorName: " "},
	} {
		_, _, err := commitArguments(req)
		requireKind(t, err, sandboxapi.ErrInvalidArgument)
	}
	_, _, err = commitArguments(sandboxapi.CommitRequest{Message: "m", Paths: []string{".git/config"}})
	requireKind(t, err, sandboxapi.ErrInvalidWorkspacePath)
	_, _, err = commitArguments(sandboxapi.CommitRequest{Message: "m", Paths: []string{"../x"}})
	requireKind(t, err, sandboxapi.ErrInvalidWorkspacePath)
}
