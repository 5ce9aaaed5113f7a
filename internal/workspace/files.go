package workspace

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// File operations are confined to the worktree with os.Root (DESIGN.md
// "Non-negotiables: Paths"): every path is first cleaned with
// sandboxapi.CleanRelPath (absolute paths and ".." are rejected), then resolved
// by the root, which refuses any symlink leading outside the worktree (and
// absolute symlinks). All such failures, and a missing file, are
// ErrInvalidWorkspacePath; a missing file is ErrFileNotFound, which wraps it
// (ErrWorkspaceNotFound is kept for a missing workspace). A path starting with
// '-' is ErrInvalidArgument instead (option injection; "./-n" names
// the file).

// openPath is the start of a read (op, in messages) of path p in ws: ctx
// not done, p cleaned (sandboxapi.CleanRelPath) into rel and not the
// worktree's own .git (readableRel), the worktree opened as a root
// (openRoot; the caller closes it). Errors: ctx's, as readableRel, as
// openRoot.
func (m *Manager) openPath(ctx context.Context, ws sandboxapi.Workspace, op, p string) (*os.Root, string, error) {
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	rel, err := readableRel(op, p)
	if err != nil {
		return nil, "", err
	}
	r, err := m.openRoot(ctx, ws)
	if err != nil {
		return nil, "", err
	}
	return r, rel, nil
}

// isWorktreeGit reports whether the clean path rel is the worktree's own
// .git (its top-level entry, in any case) or below it: the file git keeps
// there names the host's administrative directory (a host path), and
// nothing in it is the agent's. Nested repositories' .git are the agent's.
func isWorktreeGit(rel string) bool {
	first, _, _ := strings.Cut(rel, "/")
	return strings.EqualFold(first, ".git")
}

// readableRel cleans p (sandboxapi.CleanRelPath) for a read or a listing (op,
// in messages): never the worktree's own .git (isWorktreeGit). Errors: as
// CleanRelPath, ErrInvalidWorkspacePath.
func readableRel(op, p string) (string, error) {
	rel, err := sandboxapi.CleanRelPath(p)
	if err != nil {
		return "", err
	}
	if isWorktreeGit(rel) {
		return "", worktreeGitError(op, rel)
	}
	return rel, nil
}

// worktreeGitError is the refusal of an operation on the worktree's own
// .git: ErrInvalidWorkspacePath saying what to do instead.
func worktreeGitError(op, rel string) error {
	return sandboxapi.Errorf(sandboxapi.ErrInvalidWorkspacePath,
		"%s %q: the worktree's .git is the host's git metadata, not a workspace file (run git commands with exec instead)", op, rel)
}

// writableRel cleans p (sandboxapi.CleanRelPath) for a write or an edit (verb,
// in the messages): never the workspace root, never inside .git
// (sandboxapi.IsGitMetadataPath). Errors: as CleanRelPath,
// ErrInvalidWorkspacePath.
func writableRel(verb, p string) (string, error) {
	rel, err := sandboxapi.CleanRelPath(p)
	if err != nil {
		return "", err
	}
	if rel == "." {
		return "", sandboxapi.Errorf(sandboxapi.ErrInvalidWorkspacePath, "%s %q: is the workspace root", verb, p)
	}
	if isWorktreeGit(rel) {
		return "", worktreeGitError(verb, rel)
	}
	if sandboxapi.IsGitMetadataPath(rel) {
		return "", sandboxapi.Errorf(sandboxapi.ErrInvalidWorkspacePath, "%s %q: paths inside .git are not writable", verb, rel)
	}
	return rel, nil
}

// openRoot opens the worktree directory as an os.Root, on its volume
// (onVolume). Errors: as locate, onVolume, ErrWorkspaceNotFound.
func (m *Manager) openRoot(ctx context.Context, ws sandboxapi.Workspace) (*os.Root, error) {
	l, err := locate(ws)
	if err != nil {
		return nil, err
	}
	if err := m.onVolume(ctx, l.wt); err != nil {
		return nil, err
	}
	r, err := os.OpenRoot(l.wt)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return nil, sandboxapi.Errorf(sandboxapi.ErrWorkspaceNotFound, "workspace %s: worktree directory is missing", ws.ID)
		}
		return nil, fsError(err, "open workspace "+ws.ID)
	}
	return r, nil
}

// pathError maps an os.Root failure on rel onto the typed errors.
func pathError(op, rel string, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return sandboxapi.Errorf(sandboxapi.ErrFileNotFound, "%s %q: no such file or directory", op, rel)
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return sandboxapi.Errorf(sandboxapi.ErrInsufficientDisk, "%s %q: %v", op, rel, errors.Unwrap(err))
	case errors.Is(err, syscall.ENOTDIR):
		return sandboxapi.Errorf(sandboxapi.ErrInvalidWorkspacePath, "%s %q: a parent is not a directory", op, rel)
	case errors.Is(err, syscall.EROFS), errors.Is(err, syscall.EIO):
		// A volume's file system turns read-only after an I/O error (its
		// host's disk full): the worktree's, not the path's.
		return sandboxapi.Errorf(sandboxapi.ErrWorkspaceUnavailable, "%s %q: the worktree's file system cannot be written: %v", op, rel, errors.Unwrap(err))
	case errors.Is(err, fs.ErrPermission):
		return sandboxapi.Errorf(sandboxapi.ErrInvalidWorkspacePath, "%s %q: permission denied", op, rel)
	}
	msg := err.Error()
	var pe *fs.PathError
	if errors.As(err, &pe) {
		msg = pe.Err.Error() // e.g. "path escapes from parent"; never a host path
	}
	return sandboxapi.Errorf(sandboxapi.ErrInvalidWorkspacePath, "%s %q: %s", op, rel, msg)
}

// ReadFile returns the content of a regular file in the workspace
// (sandbox.WorkspaceProvider). The file is opened non-blocking (a FIFO cannot
// hang the call) and must be a regular file; symlinks are followed only within
// the worktree. Errors: ErrInvalidArgument (a path starting with '-'),
// ErrInvalidWorkspacePath (bad, escaping or missing
// path; a directory or special file; the worktree's own .git), ErrResourceLimit (larger than
// sandboxapi.MaxFileBytes), ErrWorkspaceNotFound, ErrInvalidArgument (LocalPath).
func (m *Manager) ReadFile(ctx context.Context, ws sandboxapi.Workspace, p string) ([]byte, error) {
	r, rel, err := m.openPath(ctx, ws, "read", p)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	f, err := r.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, pathError("read", rel, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, pathError("read", rel, err)
	}
	if fi.IsDir() {
		return nil, sandboxapi.Errorf(sandboxapi.ErrInvalidWorkspacePath, "read %q: is a directory", rel)
	}
	if !fi.Mode().IsRegular() {
		return nil, sandboxapi.Errorf(sandboxapi.ErrInvalidWorkspacePath, "read %q: not a regular file", rel)
	}
	if gi, err := r.Lstat(".git"); err == nil && os.SameFile(fi, gi) {
		return nil, worktreeGitError("read", rel) // reached through a symlink or hard link
	}
	if fi.Size() > sandboxapi.MaxFileBytes {
		return nil, sandboxapi.Errorf(sandboxapi.ErrResourceLimit, "read %q: %d bytes is over the %d-byte limit", rel, fi.Size(), sandboxapi.MaxFileBytes)
	}
	data, err := io.ReadAll(io.LimitReader(f, sandboxapi.MaxFileBytes+1))
	if err != nil {
		return nil, pathError("read", rel, err)
	}
	if len(data) > sandboxapi.MaxFileBytes {
		return nil, sandboxapi.Errorf(sandboxapi.ErrResourceLimit, "read %q: over the %d-byte limit", rel, sandboxapi.MaxFileBytes)
	}
	return data, nil
}

// WriteFile creates or atomically replaces a regular file in the workspace
// (sandbox.WorkspaceProvider). Missing parent directories are created (0755)
// through the root; the data goes to a temporary file in the same directory
// which is then renamed over the target, so readers never see a partial file
// (the data is not fsynced). Only the permission bits of mode are honored;
// mode 0 means 0644 for a new file and keeps the current permission bits of a
// replaced one (so editing an executable script keeps it executable).
// Errors: ErrCommandRejected (workspace not writable), ErrInvalidArgument (a
// path starting with '-'), ErrInvalidWorkspacePath
// (bad or escaping path, a path inside any ".git" — sandboxapi.IsGitMetadataPath
// — the root itself, a directory, special file or symlink as the last
// component: WriteFile never writes through a symlink), ErrResourceLimit (more
// than sandboxapi.MaxFileBytes), ErrInsufficientDisk, ErrWorkspaceNotFound,
// ErrInvalidArgument (LocalPath).
func (m *Manager) WriteFile(ctx context.Context, ws sandboxapi.Workspace, p string, data []byte, mode uint32) error {
	if err := writable(ws); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(data) > sandboxapi.MaxFileBytes {
		return sandboxapi.Errorf(sandboxapi.ErrResourceLimit, "write %q: %d bytes is over the %d-byte limit", p, len(data), sandboxapi.MaxFileBytes)
	}
	rel, err := writableRel("write", p)
	if err != nil {
		return err
	}
	if err := m.volumes.Room(int64(len(data))); err != nil {
		return err
	}
	r, err := m.openRoot(ctx, ws)
	if err != nil {
		return err
	}
	defer r.Close()
	return replaceFile(r, rel, data, mode, "write")
}

// replaceFile creates or atomically replaces the regular file rel (cleaned,
// not the root, not inside .git) of the worktree r with data: missing
// parents are made (0755), the bytes go to a temporary file in the same
// directory renamed over the target. mode 0 means 0644 for a new file and
// the current permission bits of a replaced one. A symlink, directory or
// special file as the last component is ErrInvalidWorkspacePath. op names
// the operation in messages.
func replaceFile(r *os.Root, rel string, data []byte, mode uint32, op string) error {
	perm := fs.FileMode(mode) & fs.ModePerm
	dir := path.Dir(rel)
	if dir != "." {
		if err := r.MkdirAll(dir, 0o755); err != nil {
			return pathError(op, rel, err)
		}
	}
	switch fi, err := r.Lstat(rel); {
	case errors.Is(err, fs.ErrNotExist):
		if mode == 0 {
			perm = 0o644
		}
	case err != nil:
		return pathError(op, rel, err)
	case fi.Mode()&fs.ModeSymlink != 0:
		if _, serr := r.Stat(rel); serr != nil {
			return pathError(op, rel, serr)
		}
		return sandboxapi.Errorf(sandboxapi.ErrInvalidWorkspacePath, "%s %q: is a symlink; write to its target instead", op, rel)
	case fi.IsDir():
		return sandboxapi.Errorf(sandboxapi.ErrInvalidWorkspacePath, "%s %q: is a directory", op, rel)
	case !fi.Mode().IsRegular():
		return sandboxapi.Errorf(sandboxapi.ErrInvalidWorkspacePath, "%s %q: not a regular file", op, rel)
	default:
		if mode == 0 {
			perm = fi.Mode().Perm()
		}
	}

	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	tmp := path.Join(dir, ".sandboxcore-tmp-"+hex.EncodeToString(rnd[:]))
	f, err := r.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return pathError(op, rel, err)
	}
	_, werr := f.Write(data)
	if werr == nil {
		werr = f.Chmod(perm)
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = r.Rename(tmp, rel)
	}
	if werr != nil {
		_ = r.Remove(tmp)
		return pathError(op, rel, werr)
	}
	return nil
}

// ListDir lists a directory of the workspace, sorted by name and capped at
// MaxListEntries (sandbox.WorkspaceProvider). Entries are described with
// Lstat through the root: a symlink is reported as "symlink" and never
// followed; Type is "file", "dir", "symlink" or "other"; Size in bytes; Mode
// the permission bits; entries named ".git" are never listed (as ListTree
// and Search). The directory itself may be reached through symlinks
// that stay inside the worktree. Errors: ErrInvalidArgument (a path starting
// with '-'), ErrInvalidWorkspacePath (bad,
// escaping or missing path; not a directory; the worktree's own .git), ErrWorkspaceNotFound,
// ErrInvalidArgument (LocalPath).
func (m *Manager) ListDir(ctx context.Context, ws sandboxapi.Workspace, p string) ([]sandboxapi.FileEntry, error) {
	r, rel, err := m.openPath(ctx, ws, "list", p)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	f, err := r.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_DIRECTORY, 0)
	if err != nil {
		if errors.Is(err, syscall.ENOTDIR) {
			return nil, sandboxapi.Errorf(sandboxapi.ErrInvalidWorkspacePath, "list %q: not a directory", rel)
		}
		return nil, pathError("list", rel, err)
	}
	names, err := f.Readdirnames(-1)
	_ = f.Close()
	if err != nil {
		return nil, pathError("list", rel, err)
	}
	names = slices.DeleteFunc(names, func(n string) bool { return n == ".git" }) // as ListTree and Search: never listed
	sort.Strings(names)
	if len(names) > MaxListEntries {
		names = names[:MaxListEntries]
	}
	out := make([]sandboxapi.FileEntry, 0, len(names))
	for _, n := range names {
		fi, err := r.Lstat(path.Join(rel, n))
		if err != nil {
			continue // vanished meanwhile
		}
		e := sandboxapi.FileEntry{Name: n, Type: fileType(fi.Mode()), Size: fi.Size(), Mode: uint32(fi.Mode().Perm())}
		if fi.Mode().IsRegular() && fi.Size() > 0 && fi.Size() <= sandbox.MaxLFSPointerBytes {
			if data, err := readSmall(r, path.Join(rel, n), sandbox.MaxLFSPointerBytes); err == nil {
				_, e.LFSPointer = sandbox.ParseLFSPointer(data)
			}
		}
		out = append(out, e)
	}
	return out, nil
}

// readSmall reads a regular file of at most max bytes through r, opened
// non-blocking (a FIFO swapped in cannot hang it); a larger or special
// file is an error.
func readSmall(r *os.Root, p string, max int64) ([]byte, error) {
	f, err := r.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() || fi.Size() > max {
		return nil, errors.New("not a small regular file")
	}
	return io.ReadAll(io.LimitReader(f, max+1))
}

func fileType(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "file"
	case m.IsDir():
		return "dir"
	case m&fs.ModeSymlink != 0:
		return "symlink"
	}
	return "other"
}

// Search finds lines matching req.Pattern in the workspace's files
// (sandbox.WorkspaceProvider; sandboxapi.SearchRequest). It is a pure Go walk
// through the os.Root, so a pattern starting with '-' is just a pattern. The
// pattern is Go RE2 syntax, or a literal string when req.Literal; IgnoreCase
// makes it case-insensitive; it is matched against each line (without its
// line terminator). The walk is in name order, never follows symlinks (the
// start path may be reached through symlinks inside the worktree), skips
// every ".git" entry, special files, binary files (a NUL in the first 8 KiB)
// and files over MaxSearchFileBytes. Results are capped at req.MaxResults
// (0 = sandboxapi.DefaultSearchResults, at most sandboxapi.MaxSearchResults); each
// line is cut at sandboxapi.MaxSearchLineBytes on a UTF-8 boundary and invalid
// UTF-8 replaced. Truncated is set when the result cap, MaxSearchFiles or
// MaxSearchTotalBytes stopped the search, and TruncatedBy says which (only
// the result cap means more matches exist); files skipped for their size
// are listed (SkippedTooLarge) and binary ones counted. Errors: ErrInvalidArgument (empty,
// over MaxSearchPatternBytes, starting with '-' (sandboxapi.ValidateSearchPattern),
// or invalid pattern; negative MaxResults; a start path starting with '-'),
// ErrInvalidWorkspacePath (bad, escaping or missing start path, or one inside
// .git), ErrWorkspaceNotFound, ctx's error.
func (m *Manager) Search(ctx context.Context, ws sandboxapi.Workspace, req sandboxapi.SearchRequest) (sandboxapi.SearchResult, error) {
	if err := sandboxapi.ValidateSearchPattern(req.Pattern, MaxSearchPatternBytes); err != nil {
		return sandboxapi.SearchResult{}, err
	}
	if req.MaxResults < 0 {
		return sandboxapi.SearchResult{}, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "max_results must not be negative")
	}
	if err := validGlob(req.Glob); err != nil {
		return sandboxapi.SearchResult{}, err
	}
	expr := req.Pattern
	if req.Literal {
		expr = regexp.QuoteMeta(expr)
	}
	if req.IgnoreCase {
		expr = "(?i)" + expr
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return sandboxapi.SearchResult{}, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "search pattern: %v", err)
	}
	limit := req.MaxResults
	if limit == 0 {
		limit = sandboxapi.DefaultSearchResults
	}
	if limit > sandboxapi.MaxSearchResults {
		limit = sandboxapi.MaxSearchResults
	}
	rel, err := sandboxapi.CleanRelPath(req.Path)
	if err != nil {
		return sandboxapi.SearchResult{}, err
	}
	if sandboxapi.IsGitMetadataPath(rel) {
		return sandboxapi.SearchResult{}, sandboxapi.Errorf(sandboxapi.ErrInvalidWorkspacePath, "search %q: .git is never searched", rel)
	}
	r, err := m.openRoot(ctx, ws)
	if err != nil {
		return sandboxapi.SearchResult{}, err
	}
	defer r.Close()
	st, err := r.Stat(rel)
	if err != nil {
		return sandboxapi.SearchResult{}, pathError("search", rel, err)
	}
	s := &searcher{ctx: ctx, root: r, re: re, limit: limit, glob: req.Glob, res: sandboxapi.SearchResult{Matches: []sandboxapi.SearchMatch{}}}
	switch {
	case st.Mode().IsRegular():
		s.file(rel)
	case st.IsDir():
		err = fs.WalkDir(r.FS(), rel, func(p string, d fs.DirEntry, werr error) error {
			if werr != nil {
				if p == rel {
					return werr
				}
				return nil // unreadable directory: skip it
			}
			if d.Name() == ".git" && p != rel {
				if d.IsDir() {
					return fs.SkipDir
				}
				return nil
			}
			if !d.Type().IsRegular() {
				return nil // directories are walked; symlinks and special files skipped
			}
			return s.file(p)
		})
		if err != nil && !errors.Is(err, fs.SkipAll) {
			if ctx.Err() != nil {
				return sandboxapi.SearchResult{}, ctx.Err()
			}
			return sandboxapi.SearchResult{}, pathError("search", rel, err)
		}
	}
	if ctx.Err() != nil {
		return sandboxapi.SearchResult{}, ctx.Err()
	}
	return s.res, nil
}

type searcher struct {
	ctx   context.Context
	root  *os.Root
	re    *regexp.Regexp
	limit int
	glob  string // "" = every file (globMatch)
	files int
	bytes int64
	res   sandboxapi.SearchResult
}

// file searches one file; it returns fs.SkipAll when the search must stop.
func (s *searcher) file(p string) error {
	if s.ctx.Err() != nil {
		return fs.SkipAll
	}
	if s.glob != "" && !globMatch(s.glob, p) {
		return nil
	}
	if s.files >= MaxSearchFiles || s.bytes >= MaxSearchTotalBytes {
		s.res.Truncated, s.res.TruncatedBy = true, sandboxapi.SearchCapFiles
		if s.files < MaxSearchFiles {
			s.res.TruncatedBy = sandboxapi.SearchCapBytes
		}
		return fs.SkipAll
	}
	f, err := s.root.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return nil
	}
	if fi.Size() > MaxSearchFileBytes {
		s.tooLarge(p)
		return nil
	}
	s.files++
	data, err := io.ReadAll(io.LimitReader(f, MaxSearchFileBytes+1))
	s.bytes += int64(len(data))
	if err != nil {
		return nil
	}
	if len(data) > MaxSearchFileBytes {
		s.tooLarge(p) // grew while read
		return nil
	}
	if bytes.IndexByte(data[:min(len(data), 8<<10)], 0) >= 0 {
		s.res.SkippedBinary++
		return nil
	}
	for n := 1; len(data) > 0; n++ {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		line = bytes.TrimSuffix(line, []byte{'\r'})
		if !s.re.Match(line) {
			continue
		}
		if len(s.res.Matches) >= s.limit {
			s.res.Truncated, s.res.TruncatedBy = true, sandboxapi.SearchCapResults
			return fs.SkipAll
		}
		s.res.Matches = append(s.res.Matches, sandboxapi.SearchMatch{Path: filepath.ToSlash(p), Line: n, Text: cutLine(line)})
	}
	return nil
}

// tooLarge records p as skipped for its size.
func (s *searcher) tooLarge(p string) {
	s.res.SkippedTooLargeCount++
	if len(s.res.SkippedTooLarge) < sandboxapi.MaxSearchSkippedPaths {
		s.res.SkippedTooLarge = append(s.res.SkippedTooLarge, filepath.ToSlash(p))
	}
}

// validGlob checks a SearchRequest.Glob. Errors: ErrInvalidArgument.
func validGlob(glob string) error {
	if glob == "" {
		return nil
	}
	if len(glob) > 1024 || !doublestar.ValidatePattern(glob) || strings.ContainsRune(glob, 0) {
		return sandboxapi.FieldError("glob", "search glob %q is not a valid pattern", sandboxapi.Clip(glob, 80))
	}
	return nil
}

// globMatch reports whether the workspace-relative file path p matches glob
// (sandboxapi.SearchRequest.Glob): a glob without "/" against the base
// name, one with "/" against the whole path, "**" spanning directories.
func globMatch(glob, p string) bool {
	if !strings.Contains(glob, "/") {
		ok, _ := doublestar.Match(glob, path.Base(p))
		return ok
	}
	ok, _ := doublestar.Match(strings.TrimPrefix(glob, "./"), p)
	return ok
}

// cutLine cuts a line at sandboxapi.MaxSearchLineBytes on a rune boundary and
// replaces invalid UTF-8.
func cutLine(b []byte) string {
	if len(b) > sandboxapi.MaxSearchLineBytes {
		b = b[:sandboxapi.MaxSearchLineBytes]
		for i := 0; i < utf8.UTFMax && len(b) > 0; i++ {
			if r, size := utf8.DecodeLastRune(b); r != utf8.RuneError || size != 1 {
				break
			}
			b = b[:len(b)-1]
		}
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

// SizeBytes returns the apparent size in bytes of the regular files in the
// worktree directory (sandbox.WorkspaceProvider; used by eviction planning),
// walking without following symlinks and skipping unreadable directories.
// Errors: ErrWorkspaceNotFound (directory missing), ErrInvalidArgument
// (LocalPath), ctx's error.
func (m *Manager) SizeBytes(ctx context.Context, ws sandboxapi.Workspace) (int64, error) {
	l, err := locate(ws)
	if err != nil {
		return 0, err
	}
	if err := m.onVolume(ctx, l.wt); err != nil {
		return 0, err
	}
	if !isDir(l.wt) {
		return 0, sandboxapi.Errorf(sandboxapi.ErrWorkspaceNotFound, "workspace %s: worktree directory is missing", ws.ID)
	}
	var total int64
	n := 0
	err = filepath.WalkDir(l.wt, func(p string, d fs.DirEntry, werr error) error {
		if n++; n%1024 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		if werr != nil || !d.Type().IsRegular() {
			return nil
		}
		if fi, err := d.Info(); err == nil {
			total += fi.Size()
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return total, nil
}
