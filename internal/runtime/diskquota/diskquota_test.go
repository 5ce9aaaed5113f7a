package diskquota

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// writeFile writes n zero bytes at path and syncs them, so that the
// blocks the file system allocates are settled before a watcher looks (a
// later writeback would count as growth).
func writeFile(t *testing.T, path string, n int) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	require.NoError(t, err)
	_, err = f.Write(make([]byte, n))
	require.NoError(t, err)
	require.NoError(t, f.Sync())
	require.NoError(t, f.Close())
}

func TestMeasureCountsSpaceAndNames(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(a, "one"), 1<<20)
	writeFile(t, filepath.Join(a, "sub", "deep", "two"), 1<<20)
	writeFile(t, filepath.Join(b, "three"), 1<<20)
	// A sparse file of 1 GiB counts its length: its holes fill through
	// mmap, which no file size limit checks.
	f, err := os.Create(filepath.Join(b, "sparse"))
	require.NoError(t, err)
	require.NoError(t, f.Truncate(1<<30))
	require.NoError(t, f.Close())
	// A hard link is one more name, its bytes counted once; symbolic links
	// are not followed.
	require.NoError(t, os.Link(filepath.Join(a, "one"), filepath.Join(b, "one-again")))
	require.NoError(t, os.Symlink("/usr", filepath.Join(a, "usr")))

	u, err := Measure(context.Background(), a, b, filepath.Join(a, "missing"))
	require.NoError(t, err)
	// Names: a, one, sub, deep, two, usr; b, three, sparse, one-again.
	require.Equal(t, int64(10), u.Files)
	require.GreaterOrEqual(t, u.Bytes, int64(3<<20+1<<30))
	require.Less(t, u.Bytes, int64(3<<20+1<<30)+256<<10, "the link's bytes once")
}

// Past FarOver times the limit the walk stops, an error: a command's
// million names cost one bounded walk.
func TestMeasureStopsFarOverTheLimit(t *testing.T) {
	d := t.TempDir()
	for i := range 50 {
		writeFile(t, filepath.Join(d, fmt.Sprintf("f%d", i)), 1)
	}
	_, err := measure(context.Background(), Limit{Bytes: 1 << 30, Files: 20}, true, []string{d})
	require.ErrorContains(t, err, "more than 4 times the quota (21 names")
	u, err := measure(context.Background(), Limit{Bytes: 1 << 30, Files: 60}, true, []string{d})
	require.NoError(t, err)
	require.Equal(t, int64(51), u.Files)
}

func TestMeasureSeesIntoClosedDirectories(t *testing.T) {
	d := t.TempDir()
	writeFile(t, filepath.Join(d, "closed", "big"), 2<<20)
	require.NoError(t, os.Chmod(filepath.Join(d, "closed"), 0))
	t.Cleanup(func() { _ = os.Chmod(filepath.Join(d, "closed"), 0o755) })
	u, err := Measure(context.Background(), d)
	require.NoError(t, err)
	require.GreaterOrEqual(t, u.Bytes, int64(2<<20))
	st, err := os.Lstat(filepath.Join(d, "closed"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0), st.Mode().Perm(), "the directory's mode is put back")
}

func TestMeasureStopsWithItsContext(t *testing.T) {
	d := t.TempDir()
	writeFile(t, filepath.Join(d, "a", "b"), 1)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Measure(ctx, d)
	require.ErrorIs(t, err, context.Canceled)
}

func TestLimitOf(t *testing.T) {
	require.Equal(t, Limit{Bytes: 10 << 30, Files: 10 << 30 / BytesPerFile}, LimitOf(10))
	require.True(t, Usage{Bytes: 2, Files: 1}.Over(Limit{Bytes: 1, Files: 5}))
	require.True(t, Usage{Bytes: 1, Files: 6}.Over(Limit{Bytes: 1, Files: 5}))
	require.False(t, Usage{Bytes: 1, Files: 5}.Over(Limit{Bytes: 1, Files: 5}))
}

// The watcher reports a use over the quota once while it does not grow,
// and again when it grows.
func TestWatcherReportsGrowthOverTheQuota(t *testing.T) {
	d := t.TempDir()
	var mu sync.Mutex
	var hits []Usage
	w := &Watcher{
		Dirs:  func() []string { return []string{d} },
		Limit: Limit{Bytes: 1 << 20, Files: 1000},
		Exceeded: func(u Usage) {
			mu.Lock()
			defer mu.Unlock()
			hits = append(hits, u)
		},
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx) }()
	defer func() { cancel(); <-done }()
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(hits) }

	writeFile(t, filepath.Join(d, "small"), 4096)
	time.Sleep(2500 * time.Millisecond)
	require.Equal(t, 0, count(), "within the quota")
	writeFile(t, filepath.Join(d, "big"), 2<<20)
	require.Eventually(t, func() bool { return count() == 1 }, 5*time.Second, 50*time.Millisecond)
	time.Sleep(2500 * time.Millisecond)
	require.Equal(t, 1, count(), "over but not growing: no new report")
	writeFile(t, filepath.Join(d, "more"), 1<<20)
	require.Eventually(t, func() bool { return count() == 2 }, 5*time.Second, 50*time.Millisecond)
	require.NoError(t, os.Remove(filepath.Join(d, "big")))
	require.NoError(t, os.Remove(filepath.Join(d, "more")))
	require.Eventually(t, func() bool { return w.Last().Bytes < 1<<20 }, 5*time.Second, 50*time.Millisecond)
	require.Equal(t, 2, count(), "shrinking is never reported")
}

// A use already over the quota when the watcher starts is the baseline:
// reported only once it grows.
func TestWatcherTakesItsFirstMeasurementAsTheBaseline(t *testing.T) {
	d := t.TempDir()
	writeFile(t, filepath.Join(d, "big"), 2<<20)
	hits := make(chan Usage, 10)
	w := &Watcher{Dirs: func() []string { return []string{d} }, Limit: Limit{Bytes: 1 << 20, Files: 1000}, Exceeded: func(u Usage) { hits <- u }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx) }()
	defer func() { cancel(); <-done }()
	require.Eventually(t, func() bool { return w.Last().Bytes >= 2<<20 }, 5*time.Second, 10*time.Millisecond)
	time.Sleep(time.Second)
	require.Empty(t, hits)
	writeFile(t, filepath.Join(d, "more"), 4096)
	select {
	case u := <-hits:
		require.Greater(t, u.Bytes, int64(2<<20))
	case <-time.After(20 * time.Second):
		t.Fatal("growth over the quota not reported")
	}
}

// A tree whose paths are far longer than PATH_MAX is measured whole (the
// walk opens each name relative to its parent); one deeper than MaxDepth
// is an error naming where.
func TestMeasureLongAndDeepTrees(t *testing.T) {
	d := t.TempDir()
	name := strings.Repeat("n", 200)
	long := d
	require.NoError(t, os.Chdir(d))
	t.Cleanup(func() { _ = os.Chdir("/") })
	for range 40 { // 8,000 bytes of path
		require.NoError(t, os.Mkdir(name, 0o755))
		require.NoError(t, os.Chdir(name))
		long += "/" + name
	}
	require.NoError(t, os.WriteFile("deep", make([]byte, 1<<20), 0o644))
	u, err := Measure(context.Background(), d)
	require.NoError(t, err)
	require.Equal(t, int64(42), u.Files, "the top, 40 directories and the file")
	require.GreaterOrEqual(t, u.Bytes, int64(1<<20))

	for range MaxDepth {
		require.NoError(t, os.Mkdir("d", 0o755))
		require.NoError(t, os.Chdir("d"))
	}
	_, err = Measure(context.Background(), d)
	require.ErrorContains(t, err, "deeper than 4096 directories")
	require.ErrorContains(t, err, d+"/"+name[:50], "the top and the head of the path")
	require.Less(t, len(err.Error()), 400)
}

// TestMeasureAsItsOwner: a worker that is not root measures directories a
// command closed to it (chmod 000, read without search, search without
// read) as their owner, puts their modes back, and follows no symbolic
// link. As root, the test measures as nobody in a child process.
func TestMeasureAsItsOwner(t *testing.T) {
	if os.Getenv("DISKQUOTA_MEASURE") != "" {
		u, err := Measure(context.Background(), os.Getenv("DISKQUOTA_MEASURE"))
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(3)
		}
		fmt.Printf("%d %d\n", u.Files, u.Bytes)
		os.Exit(0)
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to measure as another user")
	}
	const nobody = 65534
	base, err := os.MkdirTemp("", "diskquota-owner-")
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = filepath.Walk(base, func(p string, _ os.FileInfo, _ error) error { _ = os.Chmod(p, 0o755); return nil })
		_ = os.RemoveAll(base)
	})
	require.NoError(t, os.Chmod(base, 0o755))
	exe, err := os.Executable()
	require.NoError(t, err)
	bin := filepath.Join(base, "measure.test")
	data, err := os.ReadFile(exe)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(bin, data, 0o755))
	tree := filepath.Join(base, "tree")
	modes := map[string]os.FileMode{"closed": 0, "readonly": 0o400, "searchonly": 0o100}
	for dir := range modes {
		writeFile(t, filepath.Join(tree, dir, "inner", "f"), 1<<20)
	}
	require.NoError(t, os.Symlink("/usr", filepath.Join(tree, "closed", "usr")))
	require.NoError(t, filepath.Walk(tree, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, nobody, nobody)
	}))
	for dir, mode := range modes {
		require.NoError(t, os.Chmod(filepath.Join(tree, dir), mode))
		// A directory closed below a closed one too.
		require.NoError(t, os.Chmod(filepath.Join(tree, dir, "inner"), 0))
	}
	cmd := exec.Command(bin, "-test.run=^TestMeasureAsItsOwner$")
	cmd.Env = append(os.Environ(), "DISKQUOTA_MEASURE="+tree)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	var files, bytes int64
	_, err = fmt.Sscanf(string(out), "%d %d", &files, &bytes)
	require.NoError(t, err, "%s", out)
	// tree; per dir: dir, inner, f (3 × 3); the link.
	require.Equal(t, int64(11), files, "%s", out)
	require.GreaterOrEqual(t, bytes, int64(3<<20))
	for dir, mode := range modes {
		st, err := os.Lstat(filepath.Join(tree, dir))
		require.NoError(t, err)
		require.Equal(t, mode, st.Mode().Perm(), dir)
		st, err = os.Lstat(filepath.Join(tree, dir, "inner"))
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0), st.Mode().Perm(), dir+"/inner")
	}
}

// A worktree over the quota from the start does not block commands as
// long as it does not grow; one that grew past the quota does.
func TestBlockedAllowsTheBaseline(t *testing.T) {
	d := t.TempDir()
	writeFile(t, filepath.Join(d, "big"), 2<<20)
	w := &Watcher{Dirs: func() []string { return []string{d} }, Limit: Limit{Bytes: 1 << 20, Files: 1000}, Exceeded: func(Usage) {}}
	ctx := context.Background()
	require.False(t, w.Blocked(ctx), "the baseline, over the quota")
	require.False(t, w.Blocked(ctx), "still the baseline")
	writeFile(t, filepath.Join(d, "more"), 64<<10)
	require.True(t, w.Blocked(ctx), "grew past the baseline")
	require.NoError(t, os.Remove(filepath.Join(d, "more")))
	require.False(t, w.Blocked(ctx), "back to the baseline")

	small := t.TempDir()
	w = &Watcher{Dirs: func() []string { return []string{small} }, Limit: Limit{Bytes: 1 << 20, Files: 1000}, Exceeded: func(Usage) {}}
	require.False(t, w.Blocked(ctx))
	writeFile(t, filepath.Join(small, "big"), 2<<20)
	w.measure(ctx) // the watcher's next look
	require.True(t, w.Blocked(ctx), "a runtime that passed its quota")
}

// Filling a sparse file's holes (as mmap does: no length grows) is
// growth; the first good look after failed ones is a new reference, so a
// cleanup that ran meanwhile is never taken for growth.
func TestWatcherGrowthIsAllocatedSpace(t *testing.T) {
	d := t.TempDir()
	sparse := filepath.Join(d, "sparse")
	f, err := os.Create(sparse)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(4<<20))
	hits := 0
	w := &Watcher{Dirs: func() []string { return []string{d} }, Limit: Limit{Bytes: 1 << 20, Files: 1000}, Exceeded: func(Usage) { hits++ }}
	ctx := context.Background()
	w.measure(ctx)
	w.measure(ctx)
	require.Equal(t, 0, hits, "the baseline, not growing")
	_, err = f.WriteAt(make([]byte, 1<<20), 1<<20) // into a hole: the length stays
	require.NoError(t, err)
	require.NoError(t, f.Sync())
	require.NoError(t, f.Close())
	w.measure(ctx)
	require.Equal(t, 1, hits, "a hole filled over the quota is growth")

	fail := true
	w.Reserve = func() error {
		if fail {
			return errors.New("full")
		}
		return nil
	}
	w.measure(ctx)
	w.measure(ctx)
	require.Equal(t, 3, hits, "the host's reserve stops commands at every look")
	fail = false
	w.Dirs = func() []string { return []string{filepath.Join(d, "missing")} }
	w.measure(ctx) // the first good look: a reference, no report
	w.Dirs = func() []string { return []string{d} }
	w.measure(ctx) // back to the sparse file: grew from nothing, but over
	require.Equal(t, 4, hits)
}
