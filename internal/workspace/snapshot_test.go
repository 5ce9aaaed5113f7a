package workspace

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

func TestParseSnapshotPaths(t *testing.T) {
	sub := strings.Repeat("a", 40)
	cached := "100644 " + strings.Repeat("1", 40) + " 0\tb.txt\x00" +
		// a conflicted path: three stages, listed once
		"100644 " + strings.Repeat("2", 40) + " 1\tc.txt\x00100644 " + strings.Repeat("3", 40) + " 2\tc.txt\x00100644 " + strings.Repeat("4", 40) + " 3\tc.txt\x00" +
		"160000 " + sub + " 0\tvendor/lib\x00" +
		"100755 " + strings.Repeat("5", 40) + " 0\tname\twith tab\x00"
	others := "a.txt\x00b.txt\x00new dir/n.md\x00"
	paths, gitlinks, nested := parseSnapshotPaths([]byte(cached), []byte(others))
	assert.Empty(t, nested)
	assert.Equal(t, []string{"a.txt", "b.txt", "c.txt", "name\twith tab", "new dir/n.md", "vendor/lib"}, paths)
	assert.Equal(t, map[string]string{"vendor/lib": sub}, gitlinks)

	_, _, nested = parseSnapshotPaths([]byte(cached), []byte("a.txt\x00nested/\x00z/again/\x00"))
	assert.Equal(t, []string{"nested/", "z/again/"}, nested, "every nested repository, not only the first")
	err := nestedRepoError("checkpoint", nested)
	assert.ErrorIs(t, err, sandboxapi.ErrWorkspaceDirty)
	assert.Contains(t, err.Error(), `"nested/", "z/again/"`)

	paths, gitlinks, nested = parseSnapshotPaths(nil, nil)
	assert.Empty(t, nested)
	assert.Empty(t, paths)
	assert.Empty(t, gitlinks)
}

func TestRealDirsParentsAreDirs(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "a", "b"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "file"), nil, 0o644))
	require.NoError(t, os.Symlink("a", filepath.Join(dir, "link")))
	root, err := os.OpenRoot(dir)
	require.NoError(t, err)
	defer root.Close()
	r := realDirs{root: root}
	for p, want := range map[string]bool{
		"top.txt":        true, // no parent
		"a/x":            true,
		"a/b/x":          true,
		"a/missing/x":    false,
		"file/x":         false, // a file where a directory was
		"link/x":         false, // a symlink to a directory is not one
		"link/b/x":       false,
		"a/b/deeper/and": false,
	} {
		assert.Equal(t, want, r.parentsAreDirs(p), p)
	}
	// Answers are remembered: a directory removed afterwards still counts.
	require.NoError(t, os.RemoveAll(filepath.Join(dir, "a", "b")))
	assert.True(t, r.parentsAreDirs("a/b/x"))
}

func TestSnapshotEntries(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "plain.txt", []byte("p"), 0o644)
	write(t, dir, "run.sh", []byte("r"), 0o755)
	write(t, dir, "secret", []byte("s"), 0o600)
	write(t, dir, "sub/deep.txt", []byte("d"), 0o644)
	require.NoError(t, os.Symlink("plain.txt", filepath.Join(dir, "link")))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "vendor", "lib"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "was-a-file"), 0o755))
	require.NoError(t, syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "gone-dir"), nil, 0o644))
	root, err := os.OpenRoot(dir)
	require.NoError(t, err)
	defer root.Close()
	sub := strings.Repeat("a", 40)
	paths := []string{"deleted.txt", "fifo", "gone-dir/x", "link", "plain.txt", "run.sh", "secret", "sub/deep.txt", "vendor/lib", "was-a-file"}
	es, err := snapshotEntries(context.Background(), root, paths, map[string]string{"vendor/lib": sub})
	require.NoError(t, err)
	assert.Equal(t, []bkEntry{
		{"120000", "", "link"},
		{"100644", "", "plain.txt"},
		{"100755", "", "run.sh"},
		{"100644", "", "secret"},
		{"100644", "", "sub/deep.txt"},
		{"160000", sub, "vendor/lib"},
	}, es.entries)
	assert.Equal(t, 5, es.files)
	assert.Equal(t, []string{"plain.txt", "run.sh", "secret", "sub/deep.txt"}, es.filePaths)
	assert.Equal(t, []int{1, 2, 3, 4}, es.fileIdx)
	assert.Equal(t, []string{"plain.txt"}, es.linkTargets)
	assert.Equal(t, []int{0}, es.linkIdx)
	assert.Equal(t, map[string]uint32{"secret": 0o600}, es.modes)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = snapshotEntries(ctx, root, paths, nil)
	assert.ErrorIs(t, err, context.Canceled)
}

func TestIndexInfo(t *testing.T) {
	got := indexInfo([]bkEntry{{"100644", "ab", "a b.txt"}, {"120000", "cd", "line\nbreak"}}).String()
	assert.Equal(t, "100644 ab\ta b.txt\x00120000 cd\tline\nbreak\x00", got)
	assert.Empty(t, indexInfo(nil).String())
}

// writeSnapshotTree builds exactly the tree of its entries, in a temporary
// index it removes, without touching the worktree's own index.
func TestWriteSnapshotTree(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	ws := f.ensure(f.req(sandboxapi.ModeEdit, "conv"))
	w, err := f.m.openWorktree(ctx, ws)
	require.NoError(t, err)
	index, err := os.ReadFile(filepath.Join(w.admin, "index"))
	require.NoError(t, err)
	blob := f.git(ws.LocalPath, "rev-parse", "HEAD:README.md")
	tree, err := writeSnapshotTree(ctx, w, []bkEntry{{"100644", blob, "docs/readme"}, {"100755", blob, "x.sh"}})
	require.NoError(t, err)
	assert.Equal(t, "100644 blob "+blob+"\tdocs/readme\n100755 blob "+blob+"\tx.sh", f.git(ws.LocalPath, "ls-tree", "-r", tree))
	after, err := os.ReadFile(filepath.Join(w.admin, "index"))
	require.NoError(t, err)
	assert.Equal(t, index, after, "the worktree's own index changed")
	left, err := filepath.Glob(filepath.Join(w.admin, "sandboxcore-backup-index-*"))
	require.NoError(t, err)
	assert.Empty(t, left, "temporary index left behind")

	empty, err := writeSnapshotTree(ctx, w, nil)
	require.NoError(t, err)
	assert.Equal(t, "4b825dc642cb6eb9a060e54bf8d69288fbee4904", empty, "no entries: the empty tree")
}
