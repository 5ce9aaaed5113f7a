package workspace

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/sandboxcore/sandboxcore/internal/gitx"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// snippetContext is how many unchanged lines EditFile's snippet shows
// around the change; snippetMaxLines bounds the snippet.
const (
	snippetContext  = 4
	snippetMaxLines = 40
	snippetLineMax  = 240
)

// EditFile applies one edit_file command to a text file of the workspace in
// one host-side step (sandbox.WorkspaceProvider; sandboxapi.EditFileInput):
// the file is read and rewritten through the worktree's os.Root, the new
// content written to a temporary file renamed over it (replaceFile: never a
// partial file, permission bits kept). The caller (the session's exclusive
// lock) makes it atomic with respect to every other operation of the
// workspace. Errors: ErrCommandRejected (read-only workspace),
// ErrInvalidArgument (an invalid command or field; old_str occurring zero or
// several times — the message says how many; insert_line past the end; the
// file is binary: a NUL byte or invalid UTF-8), ErrInvalidWorkspacePath (bad,
// escaping, missing — ErrFileNotFound — path; .git; a symlink, directory or
// special file), ErrResourceLimit (the file before or after the edit is over
// sandboxapi.MaxFileBytes), ErrInsufficientDisk, ErrWorkspaceNotFound.
//
// editID (the edit_file update's id; "" = none) makes a retry idempotent:
// the last applied edit is recorded in the worktree's administrative
// directory (editRecordFile), and the same id on the same file whose
// content is still what that edit wrote returns the recorded result
// without applying the edit again (an insert retried after a crash would
// otherwise insert twice).
func (m *Manager) EditFile(ctx context.Context, ws sandboxapi.Workspace, in sandboxapi.EditFileInput, editID string) (sandboxapi.EditFileResult, error) {
	if err := writable(ws); err != nil {
		return sandboxapi.EditFileResult{}, err
	}
	if err := ctx.Err(); err != nil {
		return sandboxapi.EditFileResult{}, err
	}
	if err := in.Validate(); err != nil {
		return sandboxapi.EditFileResult{}, err
	}
	rel, err := writableRel("edit", in.Path)
	if err != nil {
		return sandboxapi.EditFileResult{}, err
	}
	if err := m.volumes.Room(int64(len(in.NewStr) + len(in.FileText))); err != nil {
		return sandboxapi.EditFileResult{}, err
	}
	r, err := m.openRoot(ctx, ws)
	if err != nil {
		return sandboxapi.EditFileResult{}, err
	}
	defer r.Close()
	recPath := editRecordPath(ws, editID)
	if recPath != "" {
		if res, ok := appliedEdit(r, recPath, editID, rel); ok {
			return res, nil
		}
	}
	if err := checkIfMatch(r, rel, in.IfMatch); err != nil {
		return sandboxapi.EditFileResult{}, err
	}
	data, first, last, err := editedContent(r, rel, in)
	if err != nil {
		return sandboxapi.EditFileResult{}, err
	}
	if len(data) > sandboxapi.MaxFileBytes {
		return sandboxapi.EditFileResult{}, sandboxapi.Errorf(sandboxapi.ErrResourceLimit, "edit %q: the result would be %d bytes, over the %d-byte limit", rel, len(data), sandboxapi.MaxFileBytes)
	}
	// The record first, then the file: a worker killed in between leaves a
	// record whose content the file does not hold (the retry applies the
	// edit), never an applied edit without its record (the retry would
	// apply it twice).
	res := sandboxapi.EditFileResult{Path: rel, Bytes: int64(len(data)), Snippet: Snippet(data, first, last), ContentHash: sandboxapi.ContentHash(data)}
	recordEdit(recPath, editRecord{ID: editID, Path: rel, Result: res}, data)
	editStep("recorded")
	if err := replaceFile(r, rel, data, 0, "edit"); err != nil {
		return sandboxapi.EditFileResult{}, err
	}
	editStep("replaced")
	return res, nil
}

// checkIfMatch refuses an edit whose precondition no longer holds
// (sandboxapi.EditFileInput.IfMatch; "" = none): ErrConflict when the file's
// content hash differs or the file is gone; nothing is changed.
func checkIfMatch(r *os.Root, rel, ifMatch string) error {
	if ifMatch == "" {
		return nil
	}
	cur, err := r.ReadFile(rel)
	if errors.Is(err, fs.ErrNotExist) {
		return sandboxapi.Errorf(sandboxapi.ErrConflict, "edit %q: the file was removed since it was read (if_match %s)", rel, ifMatch)
	}
	if err != nil {
		return fsError(err, "read "+rel)
	}
	if h := sandboxapi.ContentHash(cur); h != ifMatch {
		return sandboxapi.Errorf(sandboxapi.ErrConflict, "edit %q: the file changed since it was read (if_match %s, now %s); read it again and redo the edit", rel, ifMatch, h)
	}
	return nil
}

// editRecordPath is where ws's last applied edit is recorded (editRecordFile
// in its administrative directory); "" without an editID or when the
// directory cannot be identified (the edit then runs unrecorded).
func editRecordPath(ws sandboxapi.Workspace, editID string) string {
	if editID == "" {
		return ""
	}
	l, err := locate(ws)
	if err != nil {
		return ""
	}
	if admin := adminDir(l); admin != "" {
		return filepath.Join(admin, editRecordFile)
	}
	return ""
}

// editedContent returns the file's content after in (create: FileText;
// str_replace and insert: applied to the current text of rel, readText)
// and the 1-based lines of it the snippet is centred on. Errors: as
// readText, those of replaceOnce and insertAt.
func editedContent(r *os.Root, rel string, in sandboxapi.EditFileInput) ([]byte, int, int, error) {
	if in.Command == sandboxapi.EditCreate {
		return []byte(in.FileText), 1, 1, nil
	}
	old, err := readText(r, rel)
	if err != nil {
		return nil, 0, 0, err
	}
	if in.Command == sandboxapi.EditStrReplace {
		return replaceOnce(old, rel, in.OldStr, in.NewStr)
	}
	return insertAt(old, rel, in.InsertLine, in.NewStr)
}

// replaceOnce replaces the one occurrence of oldStr in old with newStr and
// returns the result with the lines the replacement spans. Errors:
// ErrInvalidArgument on old_str (no occurrence, or more than one).
func replaceOnce(old []byte, rel, oldStr, newStr string) ([]byte, int, int, error) {
	n := bytes.Count(old, []byte(oldStr))
	switch {
	case n == 0:
		return nil, 0, 0, sandboxapi.FieldError("old_str", "edit %q: old_str does not occur in the file (0 times); it must occur exactly once, whitespace included", rel)
	case n > 1:
		return nil, 0, 0, sandboxapi.FieldError("old_str", "edit %q: old_str occurs %d times in the file; it must occur exactly once (add surrounding lines to make it unique)", rel, n)
	}
	at := bytes.Index(old, []byte(oldStr))
	data := slices.Concat(old[:at], []byte(newStr), old[at+len(oldStr):])
	first := bytes.Count(old[:at], []byte{'\n'}) + 1
	return data, first, first + strings.Count(newStr, "\n"), nil
}

// insertAt inserts text as whole lines after line (0: before the first)
// of old — a newline is added after a last line without one, and after
// text when lines follow it — and returns the result with the inserted
// lines. Errors: ErrInvalidArgument on insert_line (past the end).
func insertAt(old []byte, rel string, line int, text string) ([]byte, int, int, error) {
	if lines := countLines(old); line > lines {
		return nil, 0, 0, sandboxapi.FieldError("insert_line", "edit %q: insert_line %d is past the end of the file (%d lines)", rel, line, lines)
	}
	at := lineOffset(old, line)
	ins := text
	if at == len(old) && len(old) > 0 && old[len(old)-1] != '\n' {
		ins = "\n" + ins // after a last line without its newline
	}
	if at < len(old) && !strings.HasSuffix(ins, "\n") {
		ins += "\n" // whole lines: what followed stays on its own line
	}
	first := line + 1
	return slices.Concat(old[:at], []byte(ins), old[at:]), first, first + max(strings.Count(strings.TrimSuffix(text, "\n"), "\n"), 0), nil
}

// recordEdit writes rec (with data's SHA-256) to recPath through a
// temporary file and a rename, so that a retried edit finds it
// (appliedEdit); "" records nothing, and a failure to write is not an
// error (the edit is then only unrecorded).
func recordEdit(recPath string, rec editRecord, data []byte) {
	if recPath == "" {
		return
	}
	sum := sha256.Sum256(data)
	rec.SHA256 = hex.EncodeToString(sum[:])
	b, _ := json.Marshal(rec)
	if err := os.WriteFile(recPath+".tmp", b, 0o600); err == nil {
		_ = os.Rename(recPath+".tmp", recPath)
	}
}

// editRecordFile, in a worktree's administrative directory, records the
// last edit EditFile applied (editRecord).
const editRecordFile = "sandboxcore-last-edit.json"

// editStep is called after each step of an edit that a retry must find
// ("recorded", "replaced"); tests replace it to stop an edit there as a
// kill -9 of the worker would.
var editStep = func(step string) {}

// editRecord is the last applied edit: its id, file, the SHA-256 of the
// content it wrote, and its result.
type editRecord struct {
	ID     string                    `json:"id"`
	Path   string                    `json:"path"`
	SHA256 string                    `json:"sha256"`
	Result sandboxapi.EditFileResult `json:"result"`
}

// appliedEdit returns the recorded result when edit id was the last one
// applied to rel and the file still holds what it wrote.
func appliedEdit(r *os.Root, recPath, id, rel string) (sandboxapi.EditFileResult, bool) {
	b, err := os.ReadFile(recPath)
	var rec editRecord
	if err != nil || json.Unmarshal(b, &rec) != nil || rec.ID != id || rec.Path != rel {
		return sandboxapi.EditFileResult{}, false
	}
	f, err := r.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return sandboxapi.EditFileResult{}, false
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, io.LimitReader(f, sandboxapi.MaxFileBytes+1)); err != nil || hex.EncodeToString(h.Sum(nil)) != rec.SHA256 {
		return sandboxapi.EditFileResult{}, false
	}
	return rec.Result, true
}

// readText reads the regular text file rel for an edit: not through a
// symlink as its last component, at most sandboxapi.MaxFileBytes, and text
// (sandboxapi.IsText). Errors as EditFile.
func readText(r *os.Root, rel string) ([]byte, error) {
	fi, err := r.Lstat(rel)
	if err != nil {
		return nil, pathError("edit", rel, err)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		if _, serr := r.Stat(rel); serr != nil {
			return nil, pathError("edit", rel, serr)
		}
		return nil, sandboxapi.Errorf(sandboxapi.ErrInvalidWorkspacePath, "edit %q: is a symlink; edit its target instead", rel)
	}
	f, err := r.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, pathError("edit", rel, err)
	}
	defer f.Close()
	if fi, err = f.Stat(); err != nil {
		return nil, pathError("edit", rel, err)
	}
	switch {
	case fi.IsDir():
		return nil, sandboxapi.Errorf(sandboxapi.ErrInvalidWorkspacePath, "edit %q: is a directory", rel)
	case !fi.Mode().IsRegular():
		return nil, sandboxapi.Errorf(sandboxapi.ErrInvalidWorkspacePath, "edit %q: not a regular file", rel)
	case fi.Size() > sandboxapi.MaxFileBytes:
		return nil, sandboxapi.Errorf(sandboxapi.ErrResourceLimit, "edit %q: %d bytes is over the %d-byte limit", rel, fi.Size(), sandboxapi.MaxFileBytes)
	}
	data, err := io.ReadAll(io.LimitReader(f, sandboxapi.MaxFileBytes+1))
	if err != nil {
		return nil, pathError("edit", rel, err)
	}
	if len(data) > sandboxapi.MaxFileBytes {
		return nil, sandboxapi.Errorf(sandboxapi.ErrResourceLimit, "edit %q: over the %d-byte limit", rel, sandboxapi.MaxFileBytes)
	}
	if !sandboxapi.IsText(data) {
		return nil, sandboxapi.FieldError("path", "edit %q: is a binary file (a NUL byte or invalid UTF-8): edit_file changes text files only; replace it with write_file", rel)
	}
	return data, nil
}

// countLines returns the number of lines of data: a last line without a
// newline counts, an empty file has none.
func countLines(data []byte) int {
	n := bytes.Count(data, []byte{'\n'})
	if len(data) > 0 && data[len(data)-1] != '\n' {
		n++
	}
	return n
}

// lineOffset returns the byte offset just past line n (1-based; 0 = the
// start), or len(data) when data has fewer lines.
func lineOffset(data []byte, n int) int {
	at := 0
	for i := 0; i < n; i++ {
		j := bytes.IndexByte(data[at:], '\n')
		if j < 0 {
			return len(data)
		}
		at += j + 1
	}
	return at
}

// Snippet returns lines first-snippetContext .. last+snippetContext of data
// (1-based, clamped to the file, at most snippetMaxLines), each as
// "%6d\t<line>\n" with long lines cut; "" for an empty file.
func Snippet(data []byte, first, last int) string {
	lines := strings.Split(string(data), "\n")
	if len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	if len(lines) == 0 {
		return ""
	}
	from := max(first-snippetContext, 1)
	to := min(max(last, first)+snippetContext, len(lines))
	if to-from+1 > snippetMaxLines {
		to = from + snippetMaxLines - 1
	}
	var b strings.Builder
	for n := from; n <= to; n++ {
		line := lines[n-1]
		if len(line) > snippetLineMax {
			line = cutLine([]byte(line[:snippetLineMax])) + "…"
		}
		fmt.Fprintf(&b, "%6d\t%s\n", n, line)
	}
	return b.String()
}

// MaxTreeEntries caps ListTree's result (a listing with a depth).
const MaxTreeEntries = 5000

// ListTree lists a directory of the workspace to a depth (list_dir with
// sandboxapi.ListDirInput's Depth, SkipHidden, SkipIgnored;
// sandbox.WorkspaceProvider): a walk through the worktree's os.Root that
// never follows symlinks and never enters ".git", entries named by their
// path relative to in.Path and sorted by it, at most MaxListEntries per
// directory and MaxTreeEntries in all (Truncated says so). Ignored entries
// are those host-side `git check-ignore` (hardened: gitx) reports for the
// worktree — tracked files never are — and everything below an ignored
// directory. Errors: as ListDir, ErrInvalidArgument (a depth outside
// 0..sandboxapi.MaxListDepth), ErrWorkspaceUnavailable (git failed).
func (m *Manager) ListTree(ctx context.Context, ws sandboxapi.Workspace, in sandboxapi.ListDirInput) (sandboxapi.ListDirResult, error) {
	if in.Depth < 0 || in.Depth > sandboxapi.MaxListDepth {
		return sandboxapi.ListDirResult{}, sandboxapi.FieldError("depth", "list_dir depth must be between 0 and %d", sandboxapi.MaxListDepth)
	}
	rel, err := readableRel("list", in.Path)
	if err != nil {
		return sandboxapi.ListDirResult{}, err
	}
	r, err := m.openRoot(ctx, ws)
	if err != nil {
		return sandboxapi.ListDirResult{}, err
	}
	defer r.Close()
	entries, paths, truncated, err := walkTree(ctx, r, rel, max(in.Depth, 1), in.SkipHidden)
	if err != nil {
		return sandboxapi.ListDirResult{}, err
	}
	res := sandboxapi.ListDirResult{Path: in.Path, Entries: entries, Truncated: truncated}
	if in.SkipIgnored && len(paths) > 0 {
		ignored, err := m.ignored(ctx, ws, paths, res.Entries)
		if err != nil {
			return sandboxapi.ListDirResult{}, err
		}
		res.Entries = withoutIgnored(res.Entries, paths, ignored)
	}
	slices.SortFunc(res.Entries, func(a, b sandboxapi.FileEntry) int { return strings.Compare(a.Name, b.Name) })
	return res, nil
}

// walkTree lists the directory rel of r breadth first to depth levels (1:
// its entries only), never following symlinks, never entering ".git",
// skipping dot-names with skipHidden: each entry named relative to rel,
// in the walk's order, with paths[i] its workspace-relative path, at most
// MaxListEntries per directory and MaxTreeEntries in all (truncated). A
// directory below rel that vanished or cannot be read is skipped. Errors:
// ctx's, ErrInvalidWorkspacePath (rel is not a directory, or cannot be
// listed), as pathError.
func walkTree(ctx context.Context, r *os.Root, rel string, depth int, skipHidden bool) (entries []sandboxapi.FileEntry, paths []string, truncated bool, err error) {
	type dirAt struct {
		rel   string // workspace-relative
		name  string // relative to rel of the listing ("" for it)
		level int
	}
	entries = []sandboxapi.FileEntry{}
	queue := []dirAt{{rel: rel, level: 1}}
	for len(queue) > 0 && !truncated {
		if err := ctx.Err(); err != nil {
			return nil, nil, false, err
		}
		d := queue[0]
		queue = queue[1:]
		f, err := r.OpenFile(d.rel, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_DIRECTORY, 0)
		if err != nil {
			if d.level > 1 {
				continue // vanished or unreadable below the listing: skip it
			}
			if errors.Is(err, syscall.ENOTDIR) {
				return nil, nil, false, sandboxapi.Errorf(sandboxapi.ErrInvalidWorkspacePath, "list %q: not a directory", rel)
			}
			return nil, nil, false, pathError("list", rel, err)
		}
		names, err := f.Readdirnames(-1)
		_ = f.Close()
		if err != nil {
			if d.level > 1 {
				continue
			}
			return nil, nil, false, pathError("list", rel, err)
		}
		slices.Sort(names)
		if len(names) > MaxListEntries {
			names, truncated = names[:MaxListEntries], true
		}
		for _, n := range names {
			if n == ".git" || (skipHidden && strings.HasPrefix(n, ".")) {
				continue
			}
			p := path.Join(d.rel, n)
			fi, err := r.Lstat(p)
			if err != nil {
				continue // vanished meanwhile
			}
			if len(entries) >= MaxTreeEntries {
				truncated = true
				break
			}
			name := path.Join(d.name, n)
			entries = append(entries, sandboxapi.FileEntry{Name: name, Type: fileType(fi.Mode()), Size: fi.Size(), Mode: uint32(fi.Mode().Perm())})
			paths = append(paths, p)
			if fi.IsDir() && d.level < depth {
				queue = append(queue, dirAt{rel: p, name: name, level: d.level + 1})
			}
		}
	}
	return entries, paths, truncated, nil
}

// withoutIgnored drops from entries (in walk order: a directory before
// what it holds) those whose paths[i] ignored holds, and everything below
// an ignored directory.
func withoutIgnored(entries []sandboxapi.FileEntry, paths []string, ignored map[string]bool) []sandboxapi.FileEntry {
	kept := entries[:0]
	var dropped []string // ignored directories, as "<name>/"
	for i, e := range entries {
		if ignored[paths[i]] || slices.ContainsFunc(dropped, func(d string) bool { return strings.HasPrefix(e.Name, d) }) {
			if e.Type == sandboxapi.EntryDir {
				dropped = append(dropped, e.Name+"/")
			}
			continue
		}
		kept = append(kept, e)
	}
	return kept
}

// ignored runs `git check-ignore --stdin -z` on the worktree for paths
// (directories with a trailing "/", so directory-only rules apply) and
// returns the set of those git ignores. Paths travel on stdin, never argv.
func (m *Manager) ignored(ctx context.Context, ws sandboxapi.Workspace, paths []string, entries []sandboxapi.FileEntry) (map[string]bool, error) {
	w, err := m.openWorktree(ctx, ws)
	if err != nil {
		return nil, err
	}
	var in bytes.Buffer
	for i, p := range paths {
		if entries[i].Type == sandboxapi.EntryDir {
			p += "/"
		}
		in.WriteString(p)
		in.WriteByte(0)
	}
	var out bytes.Buffer
	_, err = w.git.with(readEnv).runIO(ctx, &in, &out, "check-ignore", "--stdin", "-z")
	var ge *gitx.Error
	if err != nil && !(errors.As(err, &ge) && ge.ExitCode == 1) { // 1: nothing is ignored
		return nil, gitx.Classify(err, "git check-ignore", sandboxapi.ErrWorkspaceUnavailable)
	}
	set := map[string]bool{}
	for _, p := range strings.Split(out.String(), "\x00") {
		if p != "" {
			set[strings.TrimSuffix(p, "/")] = true
		}
	}
	return set, nil
}

// Log lists the newest commits reachable from the worktree's HEAD
// (sandbox.WorkspaceProvider; sandboxapi.LogRequest): host-side `git log`
// through the hardened runner (gitx), no decoration, no signatures, no
// mailmap. Errors: ErrInvalidArgument (a limit outside
// 0..sandboxapi.MaxLogCommits), ErrWorkspaceNotFound,
// ErrWorkspaceUnavailable (git failed).
func (m *Manager) Log(ctx context.Context, ws sandboxapi.Workspace, req sandboxapi.LogRequest) (sandboxapi.LogResult, error) {
	if req.Limit < 0 || req.Limit > sandboxapi.MaxLogCommits {
		return sandboxapi.LogResult{}, sandboxapi.FieldError("limit", "log limit must be between 0 and %d", sandboxapi.MaxLogCommits)
	}
	limit := req.Limit
	if limit == 0 {
		limit = sandboxapi.DefaultLogCommits
	}
	w, err := m.openWorktree(ctx, ws)
	if err != nil {
		return sandboxapi.LogResult{}, err
	}
	out, err := w.git.with(readEnv).run(ctx, "log", "-z", fmt.Sprintf("--max-count=%d", limit+1), "--no-color", "--no-decorate",
		"--no-mailmap", "--no-show-signature", "--format=%H%x1f%an%x1f%ae%x1f%aI%x1f%s", "--end-of-options", "HEAD", "--")
	if err != nil {
		return sandboxapi.LogResult{}, gitx.Classify(err, "git log", sandboxapi.ErrWorkspaceUnavailable)
	}
	res := sandboxapi.LogResult{Commits: []sandboxapi.LogCommit{}}
	for _, rec := range strings.Split(string(out), "\x00") {
		f := strings.SplitN(strings.TrimPrefix(rec, "\n"), "\x1f", 5)
		if len(f) != 5 || !isHex(f[0]) {
			continue
		}
		if len(res.Commits) == limit {
			res.Truncated = true
			break
		}
		res.Commits = append(res.Commits, sandboxapi.LogCommit{Commit: f[0], AuthorName: strings.ToValidUTF8(f[1], "\uFFFD"),
			AuthorEmail: strings.ToValidUTF8(f[2], "\uFFFD"), Date: f[3], Subject: cutLine([]byte(f[4]))})
	}
	return res, nil
}
