package replica

import (
	"archive/tar"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

func TestPassMode(t *testing.T) {
	tree := strings.Repeat("a", 40)
	m, base := passMode("", tree)
	require.Equal(t, modeIncr, m)
	require.Equal(t, tree, base)
	m, base = passMode("", "")
	require.Equal(t, modeUpload, m)
	require.Equal(t, EmptyTree, base)
	m, base = passMode(modeManifest, tree)
	require.Equal(t, modeManifest, m)
	require.Equal(t, EmptyTree, base, "a manifest pass compares with the empty tree")
}

func blobEntry(b string) entry { return entry{Mode: modeFile, Blob: strings.Repeat(b, 40)} }

func TestPlanIncremental(t *testing.T) {
	p := &Pass{mode: modeIncr, host: map[string]hostFile{
		"same":    {entry: blobEntry("1")},
		"changed": {entry: blobEntry("2")},
		"new":     {entry: blobEntry("3")},
		"revert":  {entry: blobEntry("4")},
		"recheck": {entry: blobEntry("5")},
	}}
	known := map[string]entry{
		"same": blobEntry("1"), "changed": blobEntry("9"), "revert": blobEntry("4"),
		"recheck": blobEntry("5"), "gone": blobEntry("6"),
	}
	revert := map[string]bool{"revert": true, "replica-only": true}
	recheck := map[string]bool{"recheck": true, "absent": true, "replica-only": true}
	send, view := p.plan(known, revert, recheck)
	require.Equal(t, []string{"changed", "new", "revert"}, send)
	require.Equal(t, []string{"changed", "new", "recheck", "revert"}, view)
	require.Equal(t, []string{"gone", "replica-only"}, p.deleted)
	require.Equal(t, []string{"absent"}, p.absent)
}

func TestPlanUploadSendsEverything(t *testing.T) {
	p := &Pass{mode: modeUpload, host: map[string]hostFile{"a": {entry: blobEntry("1")}, "b": {entry: blobEntry("2")}}}
	send, view := p.plan(map[string]entry{"a": blobEntry("1")}, nil, nil)
	require.Equal(t, []string{"a", "b"}, send)
	require.Equal(t, []string{"a", "b"}, view)
	require.Empty(t, p.deleted)
}

func TestControlFiles(t *testing.T) {
	zero := strings.Repeat("0", 40)
	host := map[string]hostFile{"a": {entry: blobEntry("1")}, "m": {entry: blobEntry("2")}}
	p := &Pass{mode: modeIncr, host: host, deleted: []string{"d"}, absent: []string{"x"}}
	hv, add, del := p.controlFiles([]string{"a", "vanished"}, []string{"a", "m", "vanished"})
	require.Equal(t, "100644 "+strings.Repeat("1", 40)+"\ta\x00100644 "+strings.Repeat("2", 40)+"\tm\x000 "+zero+"\td\x000 "+zero+"\tx\x00", string(hv))
	require.Equal(t, "a\x00", string(add))
	require.Equal(t, "d\x00", string(del))

	p.mode = modeManifest
	hv, add, del = p.controlFiles([]string{"a"}, []string{"a", "m"})
	require.Equal(t, "100644 "+strings.Repeat("1", 40)+"\ta\x00100644 "+strings.Repeat("2", 40)+"\tm\x00", string(hv), "no zero entries outside the incremental mode")
	require.Equal(t, "a\x00m\x00", string(add), "a manifest pass adds every view path")
	require.Equal(t, "d\x00", string(del))
}

func TestValidChanges(t *testing.T) {
	var rep Report
	changes, err := validChanges([]diffRecord{
		{status: 'A', newMode: modeFile, path: "a"},
		{status: 'D', oldMode: modeFile, path: "d"},
		{status: 'A', newMode: modeGitlink, path: "sub"},
		{status: 'T', newMode: modeSymlink, path: "l"},
	}, &rep)
	require.NoError(t, err)
	require.Len(t, changes, 3)
	require.Contains(t, changes, "a")
	require.NotContains(t, changes, "sub")
	require.Equal(t, []string{"sub: a nested git repository is not synced"}, rep.Warnings)

	for _, bad := range []diffRecord{
		{status: 'A', newMode: 0o040000, path: "dir"},
		{status: 'R', newMode: modeFile, path: "r"},
		{status: 'A', newMode: modeFile, path: "../escape"},
	} {
		_, err := validChanges([]diffRecord{bad}, &Report{})
		require.ErrorIs(t, err, sandboxapi.ErrRuntimeUnavailable, "%+v", bad)
	}
}

func TestEntryMatchesAndWriteEntry(t *testing.T) {
	require.Error(t, entryMatches(&tar.Header{Name: "./a", Typeflag: tar.TypeReg}, diffRecord{newMode: modeSymlink}))
	require.Error(t, entryMatches(&tar.Header{Name: "a", Typeflag: tar.TypeReg, Size: -1}, diffRecord{newMode: modeFile}))
	require.Error(t, entryMatches(&tar.Header{Name: "a", Typeflag: tar.TypeSymlink}, diffRecord{newMode: modeFile}))
	require.Error(t, entryMatches(&tar.Header{Name: "a", Typeflag: tar.TypeDir}, diffRecord{newMode: modeFile}))
	require.NoError(t, entryMatches(&tar.Header{Name: "a", Typeflag: tar.TypeReg}, diffRecord{newMode: modeExec}))

	dir := t.TempDir()
	root, err := os.OpenRoot(dir)
	require.NoError(t, err)
	defer root.Close()
	_, gm, err := writeEntry(root, "x", &tar.Header{Name: "./x", Typeflag: tar.TypeReg, Size: 2, Mode: 0o644}, strings.NewReader("hi"), diffRecord{newMode: modeExec})
	require.NoError(t, err)
	require.Equal(t, uint32(modeExec), gm)
	fi, err := os.Stat(filepath.Join(dir, "x"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o744), fi.Mode().Perm(), "executable exactly as the diff says")
	_, gm, err = writeEntry(root, "y", &tar.Header{Name: "y", Typeflag: tar.TypeReg, Size: 2, Mode: 0o755}, strings.NewReader("ho"), diffRecord{newMode: modeFile})
	require.NoError(t, err)
	require.Equal(t, uint32(modeFile), gm)
	fi, err = os.Stat(filepath.Join(dir, "y"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o644), fi.Mode().Perm())
	_, gm, err = writeEntry(root, "l", &tar.Header{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "x"}, nil, diffRecord{newMode: modeSymlink})
	require.NoError(t, err)
	require.Equal(t, uint32(modeSymlink), gm)
	target, err := os.Readlink(filepath.Join(dir, "l"))
	require.NoError(t, err)
	require.Equal(t, "x", target)
}

func TestResultParse(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644))
	}
	tree := strings.Repeat("b", 40)
	write("tree", tree+"\n")
	write("seq", "7\n")
	write("diff", "")
	write("warnings", "  careful \n")
	write("nested", "vendor/x/\x00../bad/\x00")
	write("epoch", "e1\n")
	pr, err := Result{Dir: dir}.parse()
	require.NoError(t, err)
	require.Equal(t, tree, pr.tree)
	require.Equal(t, int64(7), pr.seq)
	require.Equal(t, "e1", pr.epoch)
	require.Equal(t, []string{"vendor/x/"}, pr.nested)
	require.Equal(t, []string{"remote: careful", "vendor/x/: a nested git repository made in the sandbox is not synced back (its files exist only there)"}, pr.warnings)

	write("seq", "0")
	_, err = Result{Dir: dir}.parse()
	require.ErrorIs(t, err, sandboxapi.ErrRuntimeUnavailable)
	write("seq", "7")
	write("tree", strings.Repeat("b", 101))
	_, err = Result{Dir: dir}.parse()
	require.ErrorIs(t, err, sandboxapi.ErrResourceLimit)
}
