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
	"strings"

	"github.com/sandboxcore/sandboxcore/internal/gitx"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// The checkout baseline (docs/API.md "status": an untouched workspace is
// clean). A fresh checkout can differ from what git would commit from it
// without anyone changing anything: a file committed with CRLF line endings
// under a `text` attribute is normalised by git's clean step, so git calls
// it modified; an LFS file whose content sandboxcore fetched (lfs.go) is
// not its committed pointer. Left alone, such a workspace would be dirty,
// its diff would list the file, its commit would be a line-ending-only
// commit and its eviction would save a "dirty" backup of nothing.
//
// So, right after a worktree is created (and when LFS content replaces a
// pointer), the paths whose worktree bytes differ from their index blob are
// recorded in BaselineFile, inside the worktree's administrative directory
// (out of an agent's reach in the isolated runtimes), each with its mode,
// the index blob and the raw worktree bytes' blob id (git hash-object
// --no-filters). A path is "as checked out" while its index entry is still
// that blob with that mode and its worktree bytes still hash to that id;
// status, diff, commit, merge and the eviction backup treat such a path as
// unchanged. Any real change — to its bytes, its mode or its index entry —
// makes it an ordinary change again.

// BaselineFile is the name of the baseline record in a worktree's
// administrative directory: NUL-terminated records "<mode> <blob> <raw> <path>".
const BaselineFile = "sandboxcore-baseline"

// baselineEntry is one recorded path.
type baselineEntry struct {
	mode string // index mode, "100644" or "100755"
	blob string // index blob at checkout
	raw  string // blob id of the worktree's raw bytes at checkout
}

type baseline map[string]baselineEntry

// readBaseline loads admin's baseline (empty when there is none or it is unreadable).
func readBaseline(admin string) baseline {
	b, err := os.ReadFile(filepath.Join(admin, BaselineFile))
	if err != nil {
		return nil
	}
	out := baseline{}
	for _, rec := range strings.Split(string(b), "\x00") {
		f := strings.SplitN(rec, " ", 4)
		if len(f) != 4 || !isFullID(f[1]) || !isFullID(f[2]) || (f[0] != "100644" && f[0] != "100755") || f[3] == "" {
			continue
		}
		out[f[3]] = baselineEntry{mode: f[0], blob: f[1], raw: f[2]}
	}
	return out
}

// writeBaseline replaces admin's baseline atomically (removes it when empty).
func writeBaseline(admin string, b baseline) error {
	path := filepath.Join(admin, BaselineFile)
	if len(b) == 0 {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fsError(err, "remove checkout baseline")
		}
		return nil
	}
	paths := make([]string, 0, len(b))
	for p := range b {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var buf bytes.Buffer
	for _, p := range paths {
		e := b[p]
		fmt.Fprintf(&buf, "%s %s %s %s\x00", e.mode, e.blob, e.raw, p)
	}
	tmp, err := os.CreateTemp(admin, BaselineFile+".tmp-*")
	if err != nil {
		return fsError(err, "record checkout baseline")
	}
	_, werr := tmp.Write(buf.Bytes())
	if err := errors.Join(werr, tmp.Close()); err != nil {
		_ = os.Remove(tmp.Name())
		return fsError(err, "record checkout baseline")
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		_ = os.Remove(tmp.Name())
		return fsError(err, "record checkout baseline")
	}
	return nil
}

// recordBaseline computes the baseline of a freshly checked-out worktree:
// every tracked file is cleaned again into a copy of the index (`git add
// --renormalize`, so no stat information is trusted), and each path whose
// cleaned content differs from its index blob is recorded with the raw
// bytes' id. Errors: as Diff.
func (m *Manager) recordBaseline(ctx context.Context, w *wtRepo) error {
	if has, err := m.hasAttributes(ctx, w); err != nil || !has {
		// No attribute can convert anything (host-side git pins core.autocrlf
		// and core.eol): a checkout is exactly its blobs.
		if err != nil {
			return err
		}
		return writeBaseline(w.admin, nil)
	}
	tmp, err := m.indexCopy(ctx, w, "sandboxcore-baseline-index-*")
	if err != nil {
		return err
	}
	defer removeIndex(tmp)
	g := w.git.with(readEnv, "GIT_INDEX_FILE="+tmp)
	if _, err := g.run(ctx, "add", "--renormalize", "--", "."); err != nil {
		return gitx.Classify(err, "git add --renormalize (checkout baseline)", sandboxapi.ErrWorkspaceUnavailable)
	}
	// Right after the checkout the real index is HEAD: what the copy now
	// holds differently is what git would change.
	out, err := g.run(ctx, "diff-index", "--cached", "-z", "--no-renames", "--ignore-submodules=all", "HEAD", "--")
	if err != nil {
		return gitx.Classify(err, "git diff-index (checkout baseline)", sandboxapi.ErrWorkspaceUnavailable)
	}
	b := baseline{}
	var paths []string
	fields := strings.Split(string(out), "\x00")
	for i := 0; i+1 < len(fields); i += 2 {
		// ":<old mode> <new mode> <old sha> <new sha> <status>" then the path.
		f := strings.Fields(strings.TrimPrefix(fields[i], ":"))
		if len(f) != 5 || f[4] != "M" || f[0] != f[1] || (f[0] != "100644" && f[0] != "100755") {
			continue
		}
		b[fields[i+1]] = baselineEntry{mode: f[0], blob: f[2]}
		paths = append(paths, fields[i+1])
	}
	if len(paths) == 0 {
		return writeBaseline(w.admin, nil)
	}
	raws, err := m.rawIDs(ctx, w, paths)
	if err != nil {
		return err
	}
	for i, p := range paths {
		if raws[i] == "" {
			delete(b, p)
			continue
		}
		e := b[p]
		e.raw = raws[i]
		b[p] = e
	}
	if len(b) > 0 {
		m.log.Info("workspace: the fresh checkout differs from what git would commit (line endings, filters); recorded as its baseline",
			"path", w.wt, "files", len(b))
	}
	return writeBaseline(w.admin, b)
}

// hasAttributes reports whether any gitattributes file can apply to the
// worktree: a tracked .gitattributes anywhere, or the repository's
// info/attributes. Without one, git converts nothing on checkout or add
// (no text, eol, filter, ident or working-tree-encoding attribute; the
// runner pins core.autocrlf=false and core.eol=lf), and nothing is LFS.
func (m *Manager) hasAttributes(ctx context.Context, w *wtRepo) (bool, error) {
	if w.attrs != nil {
		return *w.attrs, nil
	}
	has := false
	for _, dir := range []string{w.bare, w.admin} {
		if fi, err := os.Stat(filepath.Join(dir, "info", "attributes")); err == nil && fi.Size() > 0 {
			has = true
		}
	}
	if !has {
		out, err := w.stageEntries(ctx)
		if err != nil {
			return false, err
		}
		has = len(attributesFiles(out)) > 0
	}
	w.attrs = &has
	return has, nil
}

// attributesFiles returns the .gitattributes entries of an index listing
// (`git ls-files -s -z`: "<mode> <blob> <stage>\t<path>\0"), each path once
// (the first stage listed), in index order: the paths `git ls-files --cached
// -- ':(glob).gitattributes' ':(glob)**/.gitattributes'` prints, read from
// the listing the operation already holds instead of another git process.
func attributesFiles(stage []byte) []stageEntry {
	var out []stageEntry
	for _, e := range parseStage(stage) {
		if (e.path == ".gitattributes" || strings.HasSuffix(e.path, "/.gitattributes")) && (len(out) == 0 || out[len(out)-1].path != e.path) {
			out = append(out, e)
		}
	}
	return out
}

// stageEntry is one record of `git ls-files -s -z`.
type stageEntry struct {
	mode, blob, stage, path string
}

// parseStage parses `git ls-files -s -z` ("<mode> <blob> <stage>\t<path>\0"
// per entry), skipping malformed records.
func parseStage(out []byte) []stageEntry {
	var list []stageEntry
	for _, rec := range strings.Split(string(out), "\x00") {
		meta, p, ok := strings.Cut(rec, "\t")
		if f := strings.Fields(meta); ok && len(f) == 3 {
			list = append(list, stageEntry{mode: f[0], blob: f[1], stage: f[2], path: p})
		}
	}
	return list
}

// addBaseline records paths (just written by sandboxcore, e.g. LFS content
// replacing its pointer) as checked out, keeping the other entries.
func (m *Manager) addBaseline(ctx context.Context, w *wtRepo, paths []string) error {
	if len(paths) == 0 {
		return nil
	}
	w.forgetStage()
	idx, err := m.indexEntries(ctx, w, paths)
	if err != nil {
		return err
	}
	raws, err := m.rawIDs(ctx, w, paths)
	if err != nil {
		return err
	}
	b := readBaseline(w.admin)
	if b == nil {
		b = baseline{}
	}
	for i, p := range paths {
		e, ok := idx[p]
		if !ok || raws[i] == "" || raws[i] == e.blob {
			continue
		}
		e.raw = raws[i]
		b[p] = e
	}
	return writeBaseline(w.admin, b)
}

// asCheckedOut returns those of paths that are still as checked out (see
// the top of this file), judged against the real index. Paths not in the
// baseline are never returned.
func (m *Manager) asCheckedOut(ctx context.Context, w *wtRepo, paths []string) (map[string]baselineEntry, error) {
	b := readBaseline(w.admin)
	var cands []string
	for _, p := range paths {
		if _, ok := b[p]; ok {
			cands = append(cands, p)
		}
	}
	if len(cands) == 0 {
		return nil, nil
	}
	idx, err := m.indexEntries(ctx, w, cands)
	if err != nil {
		return nil, err
	}
	raws, err := m.rawIDs(ctx, w, cands)
	if err != nil {
		return nil, err
	}
	out := map[string]baselineEntry{}
	for i, p := range cands {
		want := b[p]
		if got, ok := idx[p]; ok && got == (baselineEntry{mode: want.mode, blob: want.blob}) && raws[i] == want.raw && m.modeMatches(w, p, want.mode) {
			out[p] = want
		}
	}
	return out, nil
}

// modeMatches reports whether the worktree file's executable bit is the one
// mode records.
func (m *Manager) modeMatches(w *wtRepo, p, mode string) bool {
	root, err := os.OpenRoot(w.wt)
	if err != nil {
		return false
	}
	defer root.Close()
	fi, err := root.Lstat(p)
	if err != nil || !fi.Mode().IsRegular() {
		return false
	}
	return (fi.Mode()&0o100 != 0) == (mode == "100755")
}

// indexEntries returns the stage-0 entries (mode, blob) of paths in the
// real index (from `git ls-files -s -z`, which takes no
// --pathspec-from-file: everything is listed once and picked).
func (m *Manager) indexEntries(ctx context.Context, w *wtRepo, paths []string) (map[string]baselineEntry, error) {
	out, err := w.stageEntries(ctx)
	if err != nil {
		return nil, err
	}
	want := map[string]bool{}
	for _, p := range paths {
		want[p] = true
	}
	res := map[string]baselineEntry{}
	for _, rec := range strings.Split(string(out), "\x00") {
		meta, p, ok := strings.Cut(rec, "\t")
		if !ok || !want[p] {
			continue
		}
		if f := strings.Fields(meta); len(f) == 3 && f[2] == "0" {
			res[p] = baselineEntry{mode: f[0], blob: f[1]}
		}
	}
	return res, nil
}

// rawIDs returns the blob id of each path's raw worktree bytes (`git
// hash-object --no-filters`, nothing written), "" for a path that is not a
// regular file (gone, a directory, a symlink) or whose name holds a line
// break.
func (m *Manager) rawIDs(ctx context.Context, w *wtRepo, paths []string) ([]string, error) {
	root, err := os.OpenRoot(w.wt)
	if err != nil {
		return nil, fsError(err, "open worktree")
	}
	defer root.Close()
	ids := make([]string, len(paths))
	var batch bytes.Buffer
	var idx []int
	for i, p := range paths {
		fi, err := root.Lstat(p)
		if err != nil || !fi.Mode().IsRegular() || strings.ContainsAny(p, "\n\r") {
			continue
		}
		batch.WriteString(p + "\n")
		idx = append(idx, i)
	}
	if len(idx) == 0 {
		return ids, nil
	}
	out, err := w.git.with(readEnv).runIO(ctx, &batch, nil, "hash-object", "--no-filters", "--stdin-paths")
	if err != nil {
		return nil, gitx.Classify(err, "git hash-object --no-filters", sandboxapi.ErrWorkspaceUnavailable)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	j := 0
	for sc.Scan() {
		if s := strings.TrimSpace(sc.Text()); s != "" && j < len(idx) {
			ids[idx[j]] = s
			j++
		}
	}
	if j != len(idx) {
		return nil, sandboxapi.Errorf(sandboxapi.ErrWorkspaceUnavailable, "git hash-object returned %d ids for %d files", j, len(idx))
	}
	return ids, nil
}

// restoreCheckedOut puts the index entry recorded at checkout back for every
// path of entries, in the index g uses (after `git add` staged the file's
// cleaned content), so a path as checked out is never staged or committed.
func restoreCheckedOut(ctx context.Context, g gitCtx, entries map[string]baselineEntry) error {
	if len(entries) == 0 {
		return nil
	}
	var info bytes.Buffer
	for p, e := range entries {
		fmt.Fprintf(&info, "%s %s\t%s\x00", e.mode, e.blob, p)
	}
	if _, err := g.runIO(ctx, &info, nil, "update-index", "-z", "--index-info"); err != nil {
		return gitx.Classify(err, "git update-index --index-info (checkout baseline)", sandboxapi.ErrWorkspaceUnavailable)
	}
	return nil
}

// indexCopy copies the worktree's index to a temporary file in its
// administrative directory, named by pattern (os.CreateTemp); with no index
// yet, HEAD's tree is read into it. The caller removes it (removeIndex).
// Errors: ErrInsufficientDisk, ErrWorkspaceUnavailable.
func (m *Manager) indexCopy(ctx context.Context, w *wtRepo, pattern string) (string, error) {
	tmp, err := os.CreateTemp(w.admin, pattern)
	if err != nil {
		return "", fsError(err, "temporary index")
	}
	name := tmp.Name()
	real, rerr := os.Open(filepath.Join(w.admin, "index"))
	if rerr == nil {
		_, err = io.Copy(tmp, real)
		_ = real.Close()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		removeIndex(name)
		return "", fsError(err, "temporary index")
	}
	if rerr != nil {
		_ = os.Remove(name)
		if _, err := w.git.with("GIT_INDEX_FILE="+name).run(ctx, "read-tree", "HEAD"); err != nil {
			return "", gitx.Classify(err, "git read-tree HEAD", sandboxapi.ErrWorkspaceUnavailable)
		}
	}
	return name, nil
}

func removeIndex(name string) {
	_ = os.Remove(name)
	_ = os.Remove(name + ".lock")
}
