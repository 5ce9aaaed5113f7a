package workspace

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

func TestParseDiffTree(t *testing.T) {
	z := strings.Repeat("0", 40)
	a, b := strings.Repeat("a", 40), strings.Repeat("b", 40)
	out := ":100644 100755 " + a + " " + b + " M\x00run.sh\x00" +
		":000000 120000 " + z + " " + b + " A\x00name\twith\nbreak\x00" +
		":100644 000000 " + a + " " + z + " D\x00gone.txt\x00"
	got, err := parseDiffTree([]byte(out))
	require.NoError(t, err)
	assert.Equal(t, []bkTreeChange{
		{newMode: "100755", newSHA: b, status: 'M', path: "run.sh"},
		{newMode: "120000", newSHA: b, status: 'A', path: "name\twith\nbreak"},
		{newMode: "000000", newSHA: z, status: 'D', path: "gone.txt"},
	}, got)
	got, err = parseDiffTree(nil)
	require.NoError(t, err)
	assert.Empty(t, got)
	_, err = parseDiffTree([]byte(":100644 " + a + " M\x00x\x00"))
	assert.ErrorIs(t, err, sandboxapi.ErrWorkspaceUnavailable)
}

func TestChangePerm(t *testing.T) {
	modes := map[string]uint32{"secret": 0o600, "odd": 0o4751}
	assert.Equal(t, fs.FileMode(0o644), changePerm(bkTreeChange{newMode: "100644", path: "a"}, modes))
	assert.Equal(t, fs.FileMode(0o755), changePerm(bkTreeChange{newMode: "100755", path: "a"}, modes))
	assert.Equal(t, fs.FileMode(0o600), changePerm(bkTreeChange{newMode: "100644", path: "secret"}, modes))
	assert.Equal(t, fs.FileMode(0o751), changePerm(bkTreeChange{newMode: "100755", path: "odd"}, modes), "only permission bits")
}

// restoreFixture is a worktree root, the repo cache's git and two blobs.
func restoreFixture(t *testing.T) (root *os.Root, dir string, bg gitCtx, text, link string) {
	f := newFixture(t)
	dir = t.TempDir()
	var err error
	root, err = os.OpenRoot(dir)
	require.NoError(t, err)
	t.Cleanup(func() { root.Close() })
	bg = f.m.bareGit(f.bare)
	text = f.git(f.bare, "rev-parse", f.c1+":README.md") // "hello\n"
	out, err := bg.runIO(context.Background(), strings.NewReader("README.md"), nil, "hash-object", "-w", "--stdin")
	require.NoError(t, err)
	link = strings.TrimSpace(string(out))
	return root, dir, bg, text, link
}

func TestApplyDeletions(t *testing.T) {
	root, dir, _, _, _ := restoreFixture(t)
	write(t, dir, "a.txt", []byte("a"), 0o644)
	write(t, dir, "keep.txt", []byte("k"), 0o644)
	write(t, dir, "sub/gitlink/inner", []byte("i"), 0o644)
	require.NoError(t, applyDeletions(root, []bkTreeChange{
		{status: 'D', path: "a.txt"},
		{status: 'D', path: "never-there.txt"},
		{status: 'D', path: "sub/gitlink"}, // a non-empty directory: left alone
		{status: 'M', path: "keep.txt"},
	}))
	assert.NoFileExists(t, filepath.Join(dir, "a.txt"))
	assert.FileExists(t, filepath.Join(dir, "keep.txt"))
	assert.FileExists(t, filepath.Join(dir, "sub", "gitlink", "inner"))
}

func TestWriteChange(t *testing.T) {
	root, dir, bg, text, link := restoreFixture(t)
	ctx := context.Background()
	// In the way: a file where a parent directory must go, and a directory
	// where the file must go.
	write(t, dir, "deep", []byte("a file, not a directory"), 0o644)
	write(t, dir, "was-dir/inner", []byte("x"), 0o644)
	modes := map[string]uint32{"deep/secret": 0o600}
	for _, c := range []bkTreeChange{
		{newMode: "100644", newSHA: text, status: 'A', path: "deep/secret"},
		{newMode: "100755", newSHA: text, status: 'A', path: "was-dir"},
		{newMode: "120000", newSHA: link, status: 'A', path: "link"},
	} {
		require.NoError(t, writeChange(ctx, bg, root, c, modes), c.path)
	}
	for p, want := range map[string]fs.FileMode{"deep/secret": 0o600, "was-dir": 0o755} {
		data, err := os.ReadFile(filepath.Join(dir, p))
		require.NoError(t, err)
		assert.Equal(t, "hello\n", string(data), p)
		fi, err := os.Lstat(filepath.Join(dir, p))
		require.NoError(t, err)
		assert.Equal(t, want, fi.Mode().Perm(), p)
	}
	target, err := os.Readlink(filepath.Join(dir, "link"))
	require.NoError(t, err)
	assert.Equal(t, "README.md", target)

	err = writeChange(ctx, bg, root, bkTreeChange{newMode: "100644", newSHA: strings.Repeat("e", 40), status: 'A', path: "bad"}, nil)
	assert.ErrorIs(t, err, sandboxapi.ErrWorkspaceUnavailable, "a blob that does not exist")
}

func TestFixPermissions(t *testing.T) {
	root, dir, _, _, _ := restoreFixture(t)
	write(t, dir, "wanted", []byte("w"), 0o644)
	write(t, dir, "odd-exec", []byte("o"), 0o711)
	write(t, dir, "odd-plain", []byte("p"), 0o664)
	require.NoError(t, fixPermissions(root,
		map[string]uint32{"wanted": 0o640, "gone": 0o600},
		map[string]uint32{"odd-exec": 0o711, "odd-plain": 0o664, "wanted": 0o644, "gone-too": 0o600}))
	for p, want := range map[string]fs.FileMode{"wanted": 0o640, "odd-exec": 0o755, "odd-plain": 0o644} {
		fi, err := os.Stat(filepath.Join(dir, p))
		require.NoError(t, err)
		assert.Equal(t, want, fi.Mode().Perm(), p)
	}
}

// commitBackup makes a commit of the tree on the head, dated now, and
// points the kind's ref at it; verifyPatchApplies accepts the patch that
// gives the tree and refuses one that does not.
func TestCommitBackupAndVerifyPatchApplies(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	b := newBackups(t, f)
	bg := f.m.bareGit(f.bare)
	tree := f.git(f.bare, "rev-parse", f.c2+"^{tree}")
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	wsID := sandboxapi.WorkspaceIDForKey("edit|u|p|c")
	commit, ref, err := commitBackup(ctx, bg, b.evicted(), wsID, tree, f.c1, tb+"edits-c", now)
	require.NoError(t, err)
	assert.Equal(t, sandbox.EvictedRef(wsID), ref)
	assert.Equal(t, commit, f.git(f.bare, "rev-parse", ref))
	assert.Equal(t, tree+" "+f.c1+" "+"1893553445", f.git(f.bare, "log", "-1", "--format=%T %P %ct", commit))
	assert.Contains(t, f.git(f.bare, "log", "-1", "--format=%B", commit), "branch: "+tb+"edits-c\nhead: "+f.c1)

	man := sandbox.WorkspaceBackup{WorkspaceID: wsID, Commit: commit, Tree: tree, Head: f.c1, PatchPath: b.PatchPath(wsID)}
	_, _, err = b.writePatch(ctx, bg, f.c1, commit, man.PatchPath)
	require.NoError(t, err)
	require.NoError(t, b.verifyPatchApplies(ctx, bg, man))
	left, err := filepath.Glob(filepath.Join(b.Dir(), "*.verify-index*"))
	require.NoError(t, err)
	assert.Empty(t, left, "temporary index left behind")

	wrong := man
	wrong.Tree = f.git(f.bare, "rev-parse", f.c3+"^{tree}")
	assert.ErrorIs(t, b.verifyPatchApplies(ctx, bg, wrong), sandboxapi.ErrWorkspaceUnavailable)
	require.NoError(t, os.WriteFile(man.PatchPath, []byte("diff --git a/x b/x\nnot a patch\n"), 0o600))
	assert.ErrorIs(t, b.verifyPatchApplies(ctx, bg, man), sandboxapi.ErrWorkspaceUnavailable)
}
