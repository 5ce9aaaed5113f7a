package workspace

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sandboxcore/sandboxcore/internal/gitx"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// Git LFS content (README "Configuration": SANDBOX_LFS, SANDBOX_LFS_TIMEOUT;
// docs/API.md "lfs_pointer"). A repository using Git LFS commits small
// pointer files (sandbox.ParseLFSPointer) for paths with the attribute
// filter=lfs; host-side git runs no filter, so a checkout leaves the
// pointers. FetchLFS then downloads the content with the real git-lfs
// client (`git lfs fetch`, through the hardened runner: the user's
// credential per call as an Authorization header scoped to the
// repository's URL, no prompt, no helper, bounded in time), into the repo
// cache's own LFS store (<bare>/lfs/objects, shared by the repository's
// workspaces, so a second workspace fetches nothing), and writes each
// object, verified by its SHA-256 and size, over its pointer — only while
// the file still is that pointer — recording it in the checkout baseline
// (baseline.go) so the workspace stays clean. What remains a pointer (the
// policy is off, git-lfs is missing, the download failed or timed out) is
// reported: WorkspaceStatus.LFSPointers, and lfs_pointer on read_file and
// list_dir.

// DefaultLFSTimeout bounds one FetchLFS when LFSOptions.Timeout is zero.
const DefaultLFSTimeout = 5 * time.Minute

// LFSOptions configure Git LFS handling (Options.LFS).
type LFSOptions struct {
	// Disabled leaves every LFS file a pointer (flagged) (SANDBOX_LFS=off).
	Disabled bool
	// Timeout bounds one FetchLFS, downloads included; 0 means DefaultLFSTimeout.
	Timeout time.Duration
	// MaxBytes caps the content one FetchLFS downloads (pointers' sizes
	// summed, largest files skipped first); 0 means no cap.
	MaxBytes int64
}

// lfsFile is one LFS-tracked path whose worktree file is still a pointer.
type lfsFile struct {
	path string
	ptr  sandbox.LFSPointer
	mode fs.FileMode
}

// lfsPointers lists the LFS-tracked paths (attribute filter=lfs) whose
// worktree file is a pointer.
func (m *Manager) lfsPointers(ctx context.Context, w *wtRepo) ([]lfsFile, error) {
	if may, err := m.mayTrackLFS(ctx, w); err != nil || !may {
		return nil, err // nothing can be filter=lfs
	}
	out, err := w.git.with(readEnv).run(ctx, "ls-files", "-z", "--cached", "--", ":(attr:filter=lfs)")
	if err != nil {
		return nil, gitx.Classify(err, "git ls-files (LFS files)", sandboxapi.ErrWorkspaceUnavailable)
	}
	root, err := os.OpenRoot(w.wt)
	if err != nil {
		return nil, fsError(err, "open worktree")
	}
	defer root.Close()
	var files []lfsFile
	seen := map[string]bool{}
	for _, p := range strings.Split(string(out), "\x00") {
		if p == "" || seen[p] {
			continue
		}
		seen[p] = true
		fi, err := root.Lstat(p)
		if err != nil || !fi.Mode().IsRegular() || fi.Size() > sandbox.MaxLFSPointerBytes {
			continue
		}
		data, err := readSmall(root, p, sandbox.MaxLFSPointerBytes)
		if err != nil {
			continue
		}
		if ptr, ok := sandbox.ParseLFSPointer(data); ok {
			files = append(files, lfsFile{path: p, ptr: ptr, mode: fi.Mode().Perm()})
		}
	}
	return files, nil
}

// maxAttributesRead bounds the gitattributes file mayTrackLFS reads; a
// larger one is not read (the LFS scan runs).
const maxAttributesRead = 1 << 20

// mayTrackLFS reports whether any tracked path can carry filter=lfs, so
// that lfsPointers runs its `git ls-files ':(attr:filter=lfs)'` only then
// (memoized in w.lfsAttr). False only when it is certain: no gitattributes
// file applies (hasAttributes), or none of the files git reads attributes
// from for a tracked path holds the bytes "filter=lfs" (an attribute is
// set by a `filter=lfs` token, or by a macro whose definition holds one):
// the repository's info/attributes, and `.gitattributes` in the worktree
// root and in every directory holding a tracked path (git reads a
// directory's worktree file, tracked or not, and that path's index entry
// when the worktree has none; gitattributes(5)). Anything it cannot read as
// git would — the configuration sets core.attributesFile or attr.tree, a
// conflicted or worktree-deleted .gitattributes (git would read the index
// blob), one that is not a regular file, too large, or out of reach —
// answers true. Errors: as stageEntries.
func (m *Manager) mayTrackLFS(ctx context.Context, w *wtRepo) (bool, error) {
	if w.lfsAttr != nil {
		return *w.lfsAttr, nil
	}
	may, err := m.lfsAttributesPossible(ctx, w)
	if err != nil {
		return false, err
	}
	w.lfsAttr = &may
	return may, nil
}

// lfsAttributesPossible is mayTrackLFS without the memo.
func (m *Manager) lfsAttributesPossible(ctx context.Context, w *wtRepo) (bool, error) {
	if has, err := m.hasAttributes(ctx, w); err != nil || !has {
		return false, err
	}
	if w.git.ins.Sets("core.attributesfile") || w.git.ins.Sets("attr.tree") {
		return true, nil
	}
	for _, dir := range []string{w.bare, w.admin} {
		b, err := os.ReadFile(filepath.Join(dir, "info", "attributes"))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil || bytes.Contains(b, []byte("filter=lfs")) {
			return true, nil
		}
	}
	stage, err := w.stageEntries(ctx)
	if err != nil {
		return false, err
	}
	entries := parseStage(stage)
	tracked := map[string]bool{} // .gitattributes paths of the index
	dirs := map[string]bool{"": true}
	for _, e := range entries {
		if e.path == ".gitattributes" || strings.HasSuffix(e.path, "/.gitattributes") {
			if e.stage != "0" {
				return true, nil
			}
			tracked[e.path] = true
		}
		for d := path.Dir(e.path); d != "." && !dirs[d]; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	root, err := os.OpenRoot(w.wt)
	if err != nil {
		return true, nil
	}
	defer root.Close()
	for d := range dirs {
		if attributesMayHoldLFS(root, path.Join(d, ".gitattributes"), tracked) {
			return true, nil
		}
	}
	return false, nil
}

// attributesMayHoldLFS reports whether the worktree's gitattributes file p
// (slash-separated, relative to root) may set filter=lfs (mayTrackLFS): it
// holds the bytes, or it cannot be read as git reads it. A missing file is
// false unless the index tracks p (git then reads the index blob).
func attributesMayHoldLFS(root *os.Root, p string, tracked map[string]bool) bool {
	fi, err := root.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return tracked[p]
	}
	if err != nil || !fi.Mode().IsRegular() || fi.Size() > maxAttributesRead {
		return true
	}
	data, err := readSmall(root, p, maxAttributesRead)
	return err != nil || bytes.Contains(data, []byte("filter=lfs"))
}

// LFSPointers lists the workspace's LFS-tracked files that are still
// pointers (capped at MaxStatusFiles). Errors: as Status.
func (m *Manager) LFSPointers(ctx context.Context, ws sandboxapi.Workspace) ([]string, error) {
	w, err := m.openWorktree(ctx, ws)
	if err != nil {
		return nil, err
	}
	files, err := m.lfsPointers(ctx, w)
	if err != nil {
		return nil, err
	}
	return lfsPaths(files), nil
}

func lfsPaths(files []lfsFile) []string {
	var out []string
	for _, f := range files {
		if len(out) == MaxStatusFiles {
			break
		}
		out = append(out, f.path)
	}
	return out
}

// FetchLFS replaces the workspace's LFS pointers with their content (see
// the top of this file) and returns the paths that remain pointers. A
// failure to download is no error (the pointers stay and are reported, the
// reason logged); errors are the workspace's own: ErrWorkspaceNotFound,
// ErrInvalidArgument (LocalPath), ErrInsufficientDisk,
// ErrWorkspaceUnavailable. repo is the workspace's repository (its URL
// names the LFS endpoint, <url>/info/lfs); cred may be nil.
func (m *Manager) FetchLFS(ctx context.Context, ws sandboxapi.Workspace, repo sandboxapi.RepoIdentity, cred *sandbox.Credential) ([]string, error) {
	w, err := m.openWorktree(ctx, ws)
	if err != nil {
		return nil, err
	}
	files, err := m.lfsPointers(ctx, w)
	if err != nil || len(files) == 0 {
		return nil, err
	}
	if m.lfs.Disabled {
		return lfsPaths(files), nil
	}
	if _, err := exec.LookPath("git-lfs"); err != nil {
		m.log.Warn("workspace: git-lfs is not installed; LFS files stay pointers", "workspace_id", ws.ID, "files", len(files))
		return lfsPaths(files), nil
	}
	if !strings.HasPrefix(repo.URL, "https://") && !strings.HasPrefix(repo.URL, "http://") {
		m.log.Warn("workspace: LFS content is fetched over http(s) only; LFS files stay pointers", "workspace_id", ws.ID, "files", len(files))
		return lfsPaths(files), nil
	}
	want := files
	if m.lfs.MaxBytes > 0 {
		want = withinBudget(files, m.lfs.MaxBytes)
	}
	timeout := m.lfs.Timeout
	if timeout <= 0 {
		timeout = DefaultLFSTimeout
	}
	if len(want) > 0 {
		m.fetchLFSObjects(ctx, w, ws, repo, cred, want, timeout)
	}
	var replaced []string
	for _, f := range files {
		ok, err := m.checkoutLFS(w, f)
		if err != nil {
			return nil, err
		}
		if ok {
			replaced = append(replaced, f.path)
		}
	}
	if err := m.addBaseline(ctx, w, replaced); err != nil {
		return nil, err
	}
	left, err := m.lfsPointers(ctx, w)
	if err != nil {
		return nil, err
	}
	m.log.Info("workspace: Git LFS content", "workspace_id", ws.ID, "fetched", len(replaced), "pointers_left", len(left))
	return lfsPaths(left), nil
}

// withinBudget keeps the smallest files whose sizes sum to at most max.
func withinBudget(files []lfsFile, max int64) []lfsFile {
	sorted := append([]lfsFile(nil), files...)
	for i := 1; i < len(sorted); i++ {
		for j := i; j > 0 && sorted[j].ptr.Size < sorted[j-1].ptr.Size; j-- {
			sorted[j], sorted[j-1] = sorted[j-1], sorted[j]
		}
	}
	var out []lfsFile
	var sum int64
	for _, f := range sorted {
		if sum+f.ptr.Size > max {
			break
		}
		sum += f.ptr.Size
		out = append(out, f)
	}
	return out
}

// fetchLFSObjects runs `git lfs fetch` for the objects of files (by oid,
// through --include of their paths is not needed: the objects of HEAD are
// asked for, those present are skipped), against <repo URL>/info/lfs with
// the credential scoped to the repository URL (http.<url>.extraHeader
// reaches the batch endpoint below it, and nothing else). Failures are
// logged, never returned.
func (m *Manager) fetchLFSObjects(ctx context.Context, w *wtRepo, ws sandboxapi.Workspace, repo sandboxapi.RepoIdentity, cred *sandbox.Credential, files []lfsFile, timeout time.Duration) {
	missing := 0
	for _, f := range files {
		if m.lfsObject(w, f.ptr.OID) == "" {
			missing++
		}
	}
	if missing == 0 {
		return
	}
	secs := strconv.Itoa(int(max(timeout/time.Second, 1)))
	endpoint := strings.TrimSuffix(repo.URL, "/") + "/info/lfs"
	cfg := []gitx.ConfigEntry{
		{Key: "lfs.url", Value: endpoint},
		{Key: "lfs.concurrenttransfers", Value: "4"},
		{Key: "lfs.transfer.maxretries", Value: "2"},
		{Key: "lfs.transfer.maxretrydelay", Value: "2"},
		{Key: "lfs.dialtimeout", Value: "30"},
		{Key: "lfs.tlstimeout", Value: "30"},
		{Key: "lfs.activitytimeout", Value: secs},
		{Key: "lfs.keepalive", Value: "30"},
		{Key: "lfs.fetchrecentrefsdays", Value: "0"},
		{Key: "lfs.fetchrecentcommitsdays", Value: "0"},
		{Key: "lfs.fetchrecentalways", Value: "false"},
		{Key: "lfs.locksverify", Value: "false"},
		{Key: "lfs.skipdownloaderrors", Value: "true"},
		{Key: "lfs.setlockablereadonly", Value: "false"},
	}
	start := time.Now()
	_, err := m.git.Run(ctx, gitx.Call{
		Dir:       w.wt,
		Args:      []string{"lfs", "fetch", "origin", "HEAD"}, // constants: no user value reaches git-lfs's argv
		Env:       append(append([]string(nil), w.git.env...), "GIT_LFS_SKIP_SMUDGE=1"),
		Config:    cfg,
		Cred:      cred,
		RemoteURL: repo.URL,
		Stdout:    io.Discard,
		Timeout:   timeout,
	})
	if err != nil {
		m.log.Warn("workspace: git lfs fetch failed; LFS files stay pointers", "workspace_id", ws.ID, "repo", repo.Key(),
			"duration", time.Since(start).Round(time.Millisecond), "error", sandboxapi.Message(gitx.Classify(err, "git lfs fetch", sandboxapi.ErrRepoCacheUnavailable)))
	}
}

// lfsObject returns the path of oid in the repository's LFS store
// (<common dir>/lfs/objects/<oid[0:2]>/<oid[2:4]>/<oid>, git-lfs's layout;
// the worktree's own administrative directory is looked at too), or "".
func (m *Manager) lfsObject(w *wtRepo, oid string) string {
	for _, dir := range []string{w.bare, w.admin} {
		p := filepath.Join(dir, "lfs", "objects", oid[0:2], oid[2:4], oid)
		if fi, err := os.Lstat(p); err == nil && fi.Mode().IsRegular() {
			return p
		}
	}
	return ""
}

// checkoutLFS writes f's object over its pointer, when the object is in
// the store with the pointer's size and SHA-256 and the worktree file still
// is exactly the pointer; it reports whether it did. The file keeps its
// permission bits; it is replaced atomically (a temporary file in the same
// directory, then a rename through the worktree's os.Root).
func (m *Manager) checkoutLFS(w *wtRepo, f lfsFile) (bool, error) {
	obj := m.lfsObject(w, f.ptr.OID)
	if obj == "" {
		return false, nil
	}
	src, err := os.Open(obj)
	if err != nil {
		return false, nil
	}
	defer src.Close()
	if fi, err := src.Stat(); err != nil || fi.Size() != f.ptr.Size {
		return false, nil
	}
	root, err := os.OpenRoot(w.wt)
	if err != nil {
		return false, fsError(err, "open worktree")
	}
	defer root.Close()
	if cur, err := readSmall(root, f.path, sandbox.MaxLFSPointerBytes); err != nil {
		return false, nil
	} else if p, ok := sandbox.ParseLFSPointer(cur); !ok || p != f.ptr {
		return false, nil // changed meanwhile: never overwritten
	}
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	tmp := path.Join(path.Dir(f.path), ".sandboxcore-lfs-"+hex.EncodeToString(rnd[:]))
	dst, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return false, fsError(err, "write LFS content of "+f.path)
	}
	h := sha256.New()
	_, err = io.Copy(io.MultiWriter(dst, h), src)
	err = errors.Join(err, dst.Close())
	if err == nil && hex.EncodeToString(h.Sum(nil)) != f.ptr.OID {
		err = errors.New("content does not match its oid")
	}
	if err == nil {
		err = root.Chmod(tmp, f.mode)
	}
	if err == nil {
		err = root.Rename(tmp, f.path)
	}
	if err != nil {
		_ = root.Remove(tmp)
		if errors.Is(err, fs.ErrNotExist) || strings.Contains(err.Error(), "oid") {
			m.log.Warn("workspace: LFS object unusable; the pointer stays", "path", f.path, "error", err)
			return false, nil
		}
		return false, fsError(err, "write LFS content of "+f.path)
	}
	return true, nil
}
