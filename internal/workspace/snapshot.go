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
	"github.com/sandboxcore/sandboxcore/sandboxapi"
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
// temporary index inside the worktree's administrative directory. Steps:
// snapshotPaths (which paths), snapshotEntries (what each is on disk),
// hashEntries (their blob ids), writeSnapshotTree (the tree).
func (b *Backups) snapshot(ctx context.Context, w *wtRepo) (bkSnapshot, error) {
	g := w.git.with(readEnv)
	paths, gitlinks, err := snapshotPaths(ctx, g)
	if err != nil {
		return bkSnapshot{}, err
	}
	root, err := os.OpenRoot(w.wt)
	if err != nil {
		return bkSnapshot{}, fsError(err, "open worktree")
	}
	defer root.Close()
	es, err := snapshotEntries(ctx, root, paths, gitlinks)
	if err != nil {
		return bkSnapshot{}, err
	}
	if err := b.hashEntries(ctx, g, w, root, &es); err != nil {
		return bkSnapshot{}, err
	}
	tree, err := writeSnapshotTree(ctx, w, es.entries)
	if err != nil {
		return bkSnapshot{}, err
	}
	res := bkSnapshot{tree: tree, files: es.files, modes: es.modes}
	if len(res.modes) == 0 {
		res.modes = nil
	}
	return res, nil
}

// snapshotPaths lists the paths a snapshot saves: `git ls-files --cached -s`
// and `--others --exclude-standard` (parseSnapshotPaths). Errors:
// ErrWorkspaceDirty (nested repositories, untracked or staged as new
// gitlinks: nestedRepoError), ErrWorkspaceUnavailable.
func snapshotPaths(ctx context.Context, g gitCtx) ([]string, map[string]string, error) {
	cached, err := g.run(ctx, "ls-files", "-z", "--cached", "-s")
	if err != nil {
		return nil, nil, gitx.Classify(err, "git ls-files --cached", sandboxapi.ErrWorkspaceUnavailable)
	}
	others, err := g.run(ctx, "ls-files", "-z", "--others", "--exclude-standard")
	if err != nil {
		return nil, nil, gitx.Classify(err, "git ls-files --others", sandboxapi.ErrWorkspaceUnavailable)
	}
	paths, gitlinks, nested := parseSnapshotPaths(cached, others)
	if len(gitlinks) > 0 {
		// A gitlink HEAD lacks is a repository the agent staged: only
		// its commit id would be saved, never its files.
		staged, err := newGitlinks(ctx, g)
		if err != nil {
			return nil, nil, err
		}
		nested = append(nested, staged...)
	}
	if len(nested) > 0 {
		sort.Strings(nested)
		return nil, nil, nestedRepoError("saving the workspace (checkpoint, fork, destroy, eviction)", nested)
	}
	return paths, gitlinks, nil
}

// parseSnapshotPaths merges the NUL-separated output of `git ls-files -z
// --cached -s` (records "<mode> <sha> <stage>\t<path>") and of `git ls-files
// -z --others` (paths) into one sorted list without duplicates (a conflicted
// path has several stages), and returns the gitlinks (mode 160000: path →
// commit) among the cached ones, and the untracked paths ending in "/":
// nested git repositories, which a snapshot cannot hold.
func parseSnapshotPaths(cached, others []byte) (paths []string, gitlinks map[string]string, nested []string) {
	gitlinks = map[string]string{}
	seen := map[string]bool{}
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
			nested = append(nested, p)
			continue
		}
		seen[p] = true
		paths = append(paths, p)
	}
	sort.Strings(paths)
	return paths, gitlinks, nested
}

// realDirs answers whether every parent of a worktree path is a real
// directory (not a symlink, not a file), remembering each answer.
type realDirs struct {
	root  *os.Root
	known map[string]bool
}

// parentsAreDirs reports whether every proper parent directory of the
// slash-separated path p is a directory under root (Lstat: a symlink to a
// directory is not one).
func (r *realDirs) parentsAreDirs(p string) bool {
	if r.known == nil {
		r.known = map[string]bool{}
	}
	parts := strings.Split(p, "/")
	for i := 1; i < len(parts); i++ {
		dir := strings.Join(parts[:i], "/")
		ok, known := r.known[dir]
		if !known {
			fi, err := r.root.Lstat(dir)
			ok = err == nil && fi.IsDir()
			r.known[dir] = ok
		}
		if !ok {
			return false
		}
	}
	return true
}

// bkEntry is one record of a snapshot's temporary index.
type bkEntry struct {
	mode, sha, path string
}

// bkEntries are a snapshot's index records before hashing: the regular
// files' and symlinks' paths (link targets) with the positions of their
// records, so that hashEntries can fill in the blob ids in two batches.
type bkEntries struct {
	entries     []bkEntry
	filePaths   []string
	fileIdx     []int
	linkTargets []string
	linkIdx     []int
	// files counts regular files and symlinks.
	files int
	// modes holds the permission bits of regular files that are neither
	// 0644 nor 0755 (git records only the executable bit).
	modes map[string]uint32
}

// snapshotEntries inspects each path (Lstat through root) and returns the
// records of what is there: regular files (mode 100644, or 100755 when the
// owner may execute), symlinks (120000, their target to be hashed) and
// gitlinks (160000, a directory at a path listed in gitlinks, with its
// commit). Paths deleted, or below a path that is no longer a directory,
// and special files (FIFOs, sockets, devices) are skipped. Errors: the
// context's, or an fsError for an entry that cannot be inspected.
func snapshotEntries(ctx context.Context, root *os.Root, paths []string, gitlinks map[string]string) (bkEntries, error) {
	dirs := realDirs{root: root}
	es := bkEntries{modes: map[string]uint32{}}
	for _, p := range paths {
		if err := ctx.Err(); err != nil {
			return bkEntries{}, err
		}
		if !dirs.parentsAreDirs(p) {
			continue // below a path that is no longer a directory: gone
		}
		fi, err := root.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			continue // deleted
		}
		if err != nil {
			return bkEntries{}, fsError(err, "inspect "+p)
		}
		switch {
		case fi.IsDir():
			if sha, ok := gitlinks[p]; ok {
				es.entries = append(es.entries, bkEntry{"160000", sha, p})
			}
			// else: a tracked file replaced by a directory, whose files are listed on their own.
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := root.Readlink(p)
			if err != nil {
				return bkEntries{}, fsError(err, "read symlink "+p)
			}
			es.linkIdx = append(es.linkIdx, len(es.entries))
			es.linkTargets = append(es.linkTargets, target)
			es.entries = append(es.entries, bkEntry{"120000", "", p})
			es.files++
		case fi.Mode().IsRegular():
			mode := "100644"
			if fi.Mode()&0o100 != 0 {
				mode = "100755"
			}
			if perm := fi.Mode().Perm(); perm != 0o644 && perm != 0o755 {
				es.modes[p] = uint32(perm)
			}
			es.fileIdx = append(es.fileIdx, len(es.entries))
			es.filePaths = append(es.filePaths, p)
			es.entries = append(es.entries, bkEntry{mode, "", p})
			es.files++
		default:
			// FIFOs, sockets, devices: not work, not saved.
		}
	}
	return es, nil
}

// hashEntries writes the blobs of es's regular files (raw bytes, hashFiles)
// and symlink targets (hashLinks) and fills in their ids. A file still as
// checked out gets its committed blob instead.
func (b *Backups) hashEntries(ctx context.Context, g gitCtx, w *wtRepo, root *os.Root, es *bkEntries) error {
	shas, err := b.hashFiles(ctx, g, root, es.filePaths)
	if err != nil {
		return err
	}
	// A file still as checked out (baseline.go: normalised line endings,
	// fetched LFS content) is saved as its committed blob: it is no change,
	// and the re-created worktree checks it out the same way again.
	same, err := b.m.asCheckedOut(ctx, w, baselinePaths(w))
	if err != nil {
		return err
	}
	for i, sha := range shas {
		if e, ok := same[es.filePaths[i]]; ok && e.raw == sha {
			sha = e.blob
		}
		es.entries[es.fileIdx[i]].sha = sha
	}
	shas, err = b.hashLinks(ctx, g, w.admin, es.linkTargets)
	if err != nil {
		return err
	}
	for i, sha := range shas {
		es.entries[es.linkIdx[i]].sha = sha
	}
	return nil
}

// indexInfo renders entries as the input of `git update-index -z
// --index-info`: "<mode> <sha>\t<path>" records, each ended by NUL.
func indexInfo(entries []bkEntry) *bytes.Buffer {
	var info bytes.Buffer
	for _, e := range entries {
		fmt.Fprintf(&info, "%s %s\t%s\x00", e.mode, e.sha, e.path)
	}
	return &info
}

// writeSnapshotTree loads entries into a fresh temporary index in the
// worktree's administrative directory (removed afterwards) and returns
// `git write-tree`'s tree id. Errors: ErrWorkspaceUnavailable.
func writeSnapshotTree(ctx context.Context, w *wtRepo, entries []bkEntry) (string, error) {
	idx := filepath.Join(w.admin, "sandboxcore-backup-index-"+bkRandomSuffix())
	defer func() { _ = os.Remove(idx); _ = os.Remove(idx + ".lock") }()
	gi := w.git.with("GIT_INDEX_FILE=" + idx)
	if _, err := gi.runIO(ctx, indexInfo(entries), nil, "update-index", "-z", "--add", "--index-info"); err != nil {
		return "", gitx.Classify(err, "git update-index --index-info (temporary index)", sandboxapi.ErrWorkspaceUnavailable)
	}
	out, err := gi.run(ctx, "write-tree")
	if err != nil {
		return "", gitx.Classify(err, "git write-tree (temporary index)", sandboxapi.ErrWorkspaceUnavailable)
	}
	tree := strings.TrimSpace(string(out))
	if !isHex(tree) {
		return "", sandboxapi.Errorf(sandboxapi.ErrWorkspaceUnavailable, "git write-tree: unexpected output %q", out)
	}
	return tree, nil
}

// hashFiles writes the raw bytes of worktree files as blobs and returns their
// ids in order: one `git hash-object --no-filters -w --stdin-paths` for all
// paths, one `--stdin` call (content read through root) per path holding a
// line break. With volumes, ErrInsufficientDisk when their bytes would
// take the host's reserve (volume.Manager.Room).
func (b *Backups) hashFiles(ctx context.Context, g gitCtx, root *os.Root, paths []string) ([]string, error) {
	if b.m.volumes != nil {
		// The blobs go to the repository's objects, on the host's disk
		// that the volumes draw on: at most their bytes (a file git
		// streams whole into a pack is written even when known).
		var total int64
		for _, p := range paths {
			if fi, err := root.Lstat(p); err == nil && fi.Mode().IsRegular() {
				total += fi.Size()
			}
		}
		if err := b.m.volumes.Room(total); err != nil {
			return nil, err
		}
	}
	shas := make([]string, len(paths))
	var batch bytes.Buffer
	var batchIdx []int
	for i, p := range paths {
		if strings.ContainsAny(p, "\n\r") {
			// O_NONBLOCK: a name a background process swapped for a fifo
			// since the listing must not hang the snapshot.
			f, err := root.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
			if err != nil {
				return nil, fsError(err, "read "+p)
			}
			if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
				_ = f.Close()
				return nil, sandboxapi.Errorf(sandboxapi.ErrConflict, "read %q: it changed while it was read (no longer a regular file)", p)
			}
			out, err := g.runIO(ctx, f, nil, "hash-object", "--no-filters", "-w", "--stdin")
			_ = f.Close()
			if err != nil {
				return nil, gitx.Classify(err, "git hash-object", sandboxapi.ErrWorkspaceUnavailable)
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
		return nil, gitx.Classify(err, "git hash-object --stdin-paths", sandboxapi.ErrWorkspaceUnavailable)
	}
	var shas []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if s := strings.TrimSpace(sc.Text()); s != "" {
			shas = append(shas, s)
		}
	}
	if len(shas) != n {
		return nil, sandboxapi.Errorf(sandboxapi.ErrWorkspaceUnavailable, "git hash-object returned %d ids for %d files", len(shas), n)
	}
	for _, s := range shas {
		if !isHex(s) {
			return nil, sandboxapi.Errorf(sandboxapi.ErrWorkspaceUnavailable, "git hash-object: unexpected output %q", s)
		}
	}
	return shas, nil
}
