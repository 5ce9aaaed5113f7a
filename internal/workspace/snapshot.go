package workspace

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/sandboxcore/sandboxcore/internal/gitx"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
)

// Snapshots: a worktree's exact content as a git tree, built in a temporary
// index (backups, checkpoints and forks compare and save them).

// bkSnapshot is a worktree's content as a tree object.
type bkSnapshot struct {
	tree  string
	files int
	modes map[string]uint32
}

// snapshot writes the worktree's tracked and untracked (not ignored) files
// into the object database as raw bytes and returns their tree, built in a
// temporary index inside the worktree's administrative directory.
func (b *Backups) snapshot(ctx context.Context, w *wtRepo) (bkSnapshot, error) {
	g := w.git.with(readEnv)
	cached, err := g.run(ctx, "ls-files", "-z", "--cached", "-s")
	if err != nil {
		return bkSnapshot{}, gitx.Classify(err, "git ls-files --cached", sandbox.ErrWorkspaceUnavailable)
	}
	others, err := g.run(ctx, "ls-files", "-z", "--others", "--exclude-standard")
	if err != nil {
		return bkSnapshot{}, gitx.Classify(err, "git ls-files --others", sandbox.ErrWorkspaceUnavailable)
	}
	gitlinks := map[string]string{}
	seen := map[string]bool{}
	var paths []string
	for _, rec := range strings.Split(string(cached), "\x00") {
		meta, p, ok := strings.Cut(rec, "\t")
		if !ok || seen[p] {
			continue
		}
		seen[p] = true
		paths = append(paths, p)
		if f := strings.Fields(meta); len(f) == 3 && f[0] == "160000" {
			gitlinks[p] = f[1]
		}
	}
	for _, p := range strings.Split(string(others), "\x00") {
		if p == "" || seen[p] {
			continue
		}
		if strings.HasSuffix(p, "/") {
			return bkSnapshot{}, sandbox.Errorf(sandbox.ErrWorkspaceDirty, "untracked nested git repository %q cannot be saved; commit or remove it", p)
		}
		seen[p] = true
		paths = append(paths, p)
	}
	sort.Strings(paths)

	root, err := os.OpenRoot(w.wt)
	if err != nil {
		return bkSnapshot{}, fsError(err, "open worktree")
	}
	defer root.Close()
	realDir := map[string]bool{}
	parentsOK := func(p string) bool {
		parts := strings.Split(p, "/")
		for i := 1; i < len(parts); i++ {
			dir := strings.Join(parts[:i], "/")
			ok, known := realDir[dir]
			if !known {
				fi, err := root.Lstat(dir)
				ok = err == nil && fi.IsDir()
				realDir[dir] = ok
			}
			if !ok {
				return false
			}
		}
		return true
	}

	type entry struct {
		mode, sha, path string
	}
	var entries []entry
	var filePaths, linkTargets []string
	var fileIdx, linkIdx []int
	res := bkSnapshot{modes: map[string]uint32{}}
	for _, p := range paths {
		if err := ctx.Err(); err != nil {
			return bkSnapshot{}, err
		}
		if !parentsOK(p) {
			continue // below a path that is no longer a directory: gone
		}
		fi, err := root.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			continue // deleted
		}
		if err != nil {
			return bkSnapshot{}, fsError(err, "inspect "+p)
		}
		switch {
		case fi.IsDir():
			if sha, ok := gitlinks[p]; ok {
				entries = append(entries, entry{"160000", sha, p})
			}
			// else: a tracked file replaced by a directory, whose files are listed on their own.
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := root.Readlink(p)
			if err != nil {
				return bkSnapshot{}, fsError(err, "read symlink "+p)
			}
			linkIdx = append(linkIdx, len(entries))
			linkTargets = append(linkTargets, target)
			entries = append(entries, entry{"120000", "", p})
			res.files++
		case fi.Mode().IsRegular():
			mode := "100644"
			if fi.Mode()&0o100 != 0 {
				mode = "100755"
			}
			if perm := fi.Mode().Perm(); perm != 0o644 && perm != 0o755 {
				res.modes[p] = uint32(perm)
			}
			fileIdx = append(fileIdx, len(entries))
			filePaths = append(filePaths, p)
			entries = append(entries, entry{mode, "", p})
			res.files++
		default:
			// FIFOs, sockets, devices: not work, not saved.
		}
	}
	shas, err := b.hashFiles(ctx, g, root, filePaths)
	if err != nil {
		return bkSnapshot{}, err
	}
	// A file still as checked out (baseline.go: normalised line endings,
	// fetched LFS content) is saved as its committed blob: it is no change,
	// and the re-created worktree checks it out the same way again.
	same, err := b.m.asCheckedOut(ctx, w, baselinePaths(w))
	if err != nil {
		return bkSnapshot{}, err
	}
	for i, sha := range shas {
		if e, ok := same[filePaths[i]]; ok && e.raw == sha {
			sha = e.blob
		}
		entries[fileIdx[i]].sha = sha
	}
	shas, err = b.hashLinks(ctx, g, w.admin, linkTargets)
	if err != nil {
		return bkSnapshot{}, err
	}
	for i, sha := range shas {
		entries[linkIdx[i]].sha = sha
	}

	var info bytes.Buffer
	for _, e := range entries {
		fmt.Fprintf(&info, "%s %s\t%s\x00", e.mode, e.sha, e.path)
	}
	idx := filepath.Join(w.admin, "sandboxcore-backup-index-"+bkRandomSuffix())
	defer func() { _ = os.Remove(idx); _ = os.Remove(idx + ".lock") }()
	gi := w.git.with("GIT_INDEX_FILE=" + idx)
	if _, err := gi.runIO(ctx, &info, nil, "update-index", "-z", "--add", "--index-info"); err != nil {
		return bkSnapshot{}, gitx.Classify(err, "git update-index --index-info (temporary index)", sandbox.ErrWorkspaceUnavailable)
	}
	out, err := gi.run(ctx, "write-tree")
	if err != nil {
		return bkSnapshot{}, gitx.Classify(err, "git write-tree (temporary index)", sandbox.ErrWorkspaceUnavailable)
	}
	res.tree = strings.TrimSpace(string(out))
	if !isHex(res.tree) {
		return bkSnapshot{}, sandbox.Errorf(sandbox.ErrWorkspaceUnavailable, "git write-tree: unexpected output %q", out)
	}
	if len(res.modes) == 0 {
		res.modes = nil
	}
	return res, nil
}

// hashFiles writes the raw bytes of worktree files as blobs and returns their
// ids in order: one `git hash-object --no-filters -w --stdin-paths` for all
// paths, one `--stdin` call (content read through root) per path holding a
// line break.
func (b *Backups) hashFiles(ctx context.Context, g gitCtx, root *os.Root, paths []string) ([]string, error) {
	shas := make([]string, len(paths))
	var batch bytes.Buffer
	var batchIdx []int
	for i, p := range paths {
		if strings.ContainsAny(p, "\n\r") {
			f, err := root.Open(p)
			if err != nil {
				return nil, fsError(err, "read "+p)
			}
			out, err := g.runIO(ctx, f, nil, "hash-object", "--no-filters", "-w", "--stdin")
			_ = f.Close()
			if err != nil {
				return nil, gitx.Classify(err, "git hash-object", sandbox.ErrWorkspaceUnavailable)
			}
			shas[i] = strings.TrimSpace(string(out))
			continue
		}
		batch.WriteString(p + "\n")
		batchIdx = append(batchIdx, i)
	}
	if len(batchIdx) > 0 {
		got, err := b.hashBatch(ctx, g, &batch, len(batchIdx))
		if err != nil {
			return nil, err
		}
		for j, i := range batchIdx {
			shas[i] = got[j]
		}
	}
	return shas, nil
}

// hashLinks stores symlink targets as blobs (through temporary files in the
// administrative directory) and returns their ids in order.
func (b *Backups) hashLinks(ctx context.Context, g gitCtx, admin string, targets []string) ([]string, error) {
	if len(targets) == 0 {
		return nil, nil
	}
	dir, err := os.MkdirTemp(admin, "sandboxcore-links-")
	if err != nil {
		return nil, fsError(err, "temporary directory")
	}
	defer os.RemoveAll(dir)
	var batch bytes.Buffer
	for i, t := range targets {
		p := filepath.Join(dir, strconv.Itoa(i))
		if err := os.WriteFile(p, []byte(t), 0o600); err != nil {
			return nil, fsError(err, "temporary file")
		}
		batch.WriteString(p + "\n")
	}
	return b.hashBatch(ctx, g, &batch, len(targets))
}

func (b *Backups) hashBatch(ctx context.Context, g gitCtx, paths io.Reader, n int) ([]string, error) {
	out, err := g.runIO(ctx, paths, nil, "hash-object", "--no-filters", "-w", "--stdin-paths")
	if err != nil {
		return nil, gitx.Classify(err, "git hash-object --stdin-paths", sandbox.ErrWorkspaceUnavailable)
	}
	var shas []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if s := strings.TrimSpace(sc.Text()); s != "" {
			shas = append(shas, s)
		}
	}
	if len(shas) != n {
		return nil, sandbox.Errorf(sandbox.ErrWorkspaceUnavailable, "git hash-object returned %d ids for %d files", len(shas), n)
	}
	for _, s := range shas {
		if !isHex(s) {
			return nil, sandbox.Errorf(sandbox.ErrWorkspaceUnavailable, "git hash-object: unexpected output %q", s)
		}
	}
	return shas, nil
}
