package workspace

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/sandboxcore/sandboxcore/internal/gitx"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// outsideMarker is the content of every file outside the worktree: no file
// operation may ever return it, and nothing outside may change. outsideTag
// is in the name of every entry outside; no listing may show it.
const (
	outsideMarker = "OUTSIDE-SECRET"
	outsideTag    = "7f3a9c"
)

// confinement is a worktree laid out as the workspace layout requires, full of
// symlinks that lead out of it (absolute, relative, into the repo cache, a
// loop), next to files that must stay untouched.
type confinement struct {
	m       *Manager
	ws      sandboxapi.Workspace
	wt      string
	outside []string // directories that must not change
}

func newConfinement(tb testing.TB, dir string) *confinement {
	repoDir := filepath.Join(dir, "root", "repos", "example.com", "owner", "repo")
	bare := filepath.Join(repoDir, BareDirName)
	wt := filepath.Join(repoDir, WorktreesDir, "u1_c1_agent-edits-c1-12345678")
	outside := filepath.Join(dir, "outside")
	must := func(err error) {
		if err != nil {
			tb.Fatal(err)
		}
	}
	for _, d := range []string{filepath.Join(bare, "hooks"), filepath.Join(wt, "sub", "deep"), filepath.Join(outside, "dir")} {
		must(os.MkdirAll(d, 0o755))
	}
	must(os.WriteFile(filepath.Join(outside, "outside-secret-7f3a9c.txt"), []byte(outsideMarker+"\n"), 0o644))
	must(os.WriteFile(filepath.Join(outside, "dir", "outside-nested-7f3a9c.txt"), []byte(outsideMarker+"\n"), 0o644))
	must(os.WriteFile(filepath.Join(bare, "cache-secret-7f3a9c.txt"), []byte(outsideMarker+"\n"), 0o644))
	must(os.WriteFile(filepath.Join(bare, "hooks", "hook-7f3a9c"), []byte(outsideMarker+"\n"), 0o755))
	must(os.WriteFile(filepath.Join(wt, ".git"), []byte("gitdir: "+filepath.Join(bare, "worktrees", "x")+"\n"), 0o644))
	must(os.WriteFile(filepath.Join(wt, "sub", "ok.txt"), []byte("inside\n"), 0o644))
	rel, err := filepath.Rel(wt, outside)
	must(err)
	for link, target := range map[string]string{
		"abs":         outside,
		"absfile":     filepath.Join(outside, "outside-secret-7f3a9c.txt"),
		"up":          rel,
		"upfile":      filepath.Join(rel, "outside-secret-7f3a9c.txt"),
		"cache":       filepath.Join("..", "..", BareDirName),
		"loop":        "loop",
		"inner":       "sub",
		"sub/back":    "..",
		"sub/esc":     filepath.Join("..", ".."),
		"sub/deep/up": filepath.Join("..", "..", rel),
		"dangling":    filepath.Join(outside, "not-yet"),
		"danglingdir": filepath.Join(outside, "newdir"),
	} {
		must(os.Symlink(target, filepath.Join(wt, link)))
	}
	runner, err := gitx.New(gitx.Options{HomeDir: filepath.Join(dir, "home")})
	must(err)
	m, err := New(Options{Git: runner, Locker: &testLocker{}, HostID: "h"})
	must(err)
	ws := sandboxapi.Workspace{ID: "ws-000000000000000000000001", LocalPath: wt, Mode: sandboxapi.ModeEdit,
		Capabilities: sandboxapi.Capabilities{Writable: true, Persistent: true}}
	return &confinement{m: m, ws: ws, wt: wt, outside: []string{outside, bare}}
}

// snapshot describes every entry under the outside directories.
func (c *confinement) snapshot(tb testing.TB) string {
	var lines []string
	for _, d := range c.outside {
		_ = filepath.WalkDir(d, func(p string, e fs.DirEntry, err error) error {
			if err != nil {
				lines = append(lines, p+" error "+err.Error())
				return nil
			}
			fi, err := e.Info()
			if err != nil {
				return nil
			}
			lines = append(lines, fmt.Sprintf("%s %v %d %d", p, fi.Mode(), fi.Size(), fi.ModTime().UnixNano()))
			return nil
		})
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// check runs one file operation and asserts confinement.
func (c *confinement) check(t *testing.T, op uint8, p string, data []byte) {
	ctx := context.Background()
	before := c.snapshot(t)
	// Inside, nothing may carry the outside's marker or tag (so any sighting is a leak).
	data = bytes.ReplaceAll(data, []byte(outsideMarker), []byte("x"))
	if op%4 == 1 {
		p = strings.ReplaceAll(p, outsideTag, "x")
	}
	var err error
	switch op % 4 {
	case 0:
		var got []byte
		got, err = c.m.ReadFile(ctx, c.ws, p)
		if err == nil && bytes.Contains(got, []byte(outsideMarker)) {
			t.Fatalf("read %q returned a file from outside the worktree", p)
		}
	case 1:
		err = c.m.WriteFile(ctx, c.ws, p, data, 0o644)
	case 2:
		var entries []sandboxapi.FileEntry
		entries, err = c.m.ListDir(ctx, c.ws, p)
		for _, e := range entries {
			if strings.Contains(e.Name, outsideTag) {
				t.Fatalf("list %q shows %q from outside the worktree", p, e.Name)
			}
		}
	case 3:
		var res sandboxapi.SearchResult
		res, err = c.m.Search(ctx, c.ws, sandboxapi.SearchRequest{Pattern: outsideMarker, Path: p, Literal: true})
		if err == nil && len(res.Matches) > 0 {
			t.Fatalf("search from %q found outside content: %+v", p, res.Matches)
		}
	}
	if err != nil && sandboxapi.KindOf(err) == nil {
		t.Fatalf("op %d %q: untyped error %v", op%4, p, err)
	}
	if after := c.snapshot(t); after != before {
		t.Fatalf("op %d %q changed something outside the worktree:\nbefore:\n%s\nafter:\n%s", op%4, p, before, after)
	}
}

// TestConfinementExamples: the escapes through committed or
// agent-created symlinks, for read, write, list and search — including a
// write to a not-yet-existing target through a symlinked directory.
func TestConfinementExamples(t *testing.T) {
	c := newConfinement(t, t.TempDir())
	for _, p := range []string{"abs/outside-secret-7f3a9c.txt", "absfile", "up/outside-secret-7f3a9c.txt", "upfile", "cache/cache-secret-7f3a9c.txt",
		"abs/new.txt", "abs/dir/new.txt", "up/new.txt", "danglingdir/new.txt", "dangling", "sub/esc/outside/x", "sub/deep/up/new.txt",
		"cache/hooks/post-checkout", "loop", "loop/x", "../outside/x", "/etc/passwd", "sub/../../x"} {
		for op := uint8(0); op < 4; op++ {
			c.check(t, op, p, []byte("pwned\n"))
		}
		_, err := c.m.ReadFile(context.Background(), c.ws, p)
		if err == nil {
			t.Errorf("read %q succeeded", p)
		}
	}
	// Symlinks that stay inside keep working.
	got, err := c.m.ReadFile(context.Background(), c.ws, "inner/ok.txt")
	if err != nil || string(got) != "inside\n" {
		t.Fatalf("inner/ok.txt: %q %v", got, err)
	}
	if err := c.m.WriteFile(context.Background(), c.ws, "sub/back/inner/new.txt", []byte("n"), 0); err != nil {
		t.Fatalf("write through inside links: %v", err)
	}
	if _, err := os.Stat(filepath.Join(c.wt, "sub", "new.txt")); err != nil {
		t.Fatal(err)
	}
}

// FuzzConfinement drives ReadFile, WriteFile, ListDir and Search with
// arbitrary paths against a worktree full of escaping symlinks: no operation
// may read, list, find or change anything outside it, and every error is typed.
func FuzzConfinement(f *testing.F) {
	for _, p := range []string{"abs/outside-secret-7f3a9c.txt", "up/x", "danglingdir/new.txt", "sub/esc/outside", "inner/ok.txt", "cache", "../x", "", "."} {
		for op := uint8(0); op < 4; op++ {
			f.Add(op, p, []byte("data"))
		}
	}
	c := newConfinement(f, f.TempDir())
	f.Fuzz(func(t *testing.T, op uint8, p string, data []byte) {
		c.check(t, op, p, data)
	})
}
