package workspace

import (
	"bytes"
	"context"
	"slices"
	"strconv"
	"strings"

	"github.com/sandboxcore/sandboxcore/internal/gitx"
	"github.com/sandboxcore/sandboxcore/internal/overlaps"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// MaxChangedFiles caps the files of one change summary (Changes): a
// workspace that changed more is summarized by its first MaxChangedFiles
// paths.
const MaxChangedFiles = 20000

// Changes summarizes what the workspace changed since its base commit, for
// overlaps (docs/API.md "Overlaps"): the same change set Diff reports
// (committed and uncommitted changes, untracked files included, files
// still as checked out are no change), with renames followed (`git diff -M`,
// git's default 50 % similarity) and each file's changed line ranges in the
// base's lines (`-U0` hunks). The work tree is staged into a copy of the
// index (the worktree's own index is never written); git reads each file
// whose stat data changed, never the whole worktree. Binary files,
// submodules, symbolic links, type changes and files with more than
// sandboxapi.MaxOverlapRanges ranges are summarized as a whole. Errors:
// ErrWorkspaceNotFound, ErrInvalidArgument (LocalPath), ErrRefNotFound (base
// commit missing), ErrRepoLocked, ErrWorkspaceUnavailable.
func (m *Manager) Changes(ctx context.Context, ws sandboxapi.Workspace) (overlaps.Summary, error) {
	w, err := m.openWorktree(ctx, ws)
	if err != nil {
		return overlaps.Summary{}, err
	}
	base, err := baseOf(ws, w)
	if err != nil {
		return overlaps.Summary{}, err
	}
	read := m.now()
	tmp, err := m.indexCopy(ctx, w, "sandboxcore-changes-index-*")
	if err != nil {
		return overlaps.Summary{}, err
	}
	defer removeIndex(tmp)
	g := w.git.with(readEnv, "GIT_INDEX_FILE="+tmp)
	if err := m.stageWorkTree(ctx, w, g); err != nil {
		return overlaps.Summary{}, err
	}
	common := []string{"diff", "--cached", "-M", "--no-ext-diff", "--no-textconv", "--no-color", "--no-relative",
		"--ignore-submodules=none", "--diff-algorithm=myers"}
	raw := &cappedBuffer{max: 16 << 20}
	args := append(slices.Clone(common), "--raw", "-z", "--no-abbrev", "--end-of-options", base, "--")
	if _, err := g.runIO(ctx, nil, raw, args...); err != nil {
		return overlaps.Summary{}, gitx.Classify(err, "git diff --raw "+base, sandboxapi.ErrWorkspaceUnavailable)
	}
	files, sections := parseRawDiff(raw.buf.Bytes(), raw.total > int64(raw.buf.Len()))
	hunks := &hunkScanner{}
	args = append(slices.Clone(common), "-U0", "--src-prefix=a/", "--dst-prefix=b/", "--end-of-options", base, "--")
	if _, err := g.runIO(ctx, nil, hunks, args...); err != nil {
		return overlaps.Summary{}, gitx.Classify(err, "git diff -U0 "+base, sandboxapi.ErrWorkspaceUnavailable)
	}
	hunks.flush()
	attachRanges(files, sections, hunks.files)
	slices.SortFunc(files, func(a, b overlaps.FileChange) int { return strings.Compare(a.Key(), b.Key()) })
	files = slices.CompactFunc(files, func(a, b overlaps.FileChange) bool { return a.Key() == b.Key() })
	return overlaps.Summary{BaseCommit: base, Files: files, ReadAt: read}, nil
}

// parseRawDiff parses `git diff --raw -z --no-abbrev` records
// (":<old mode> <new mode> <old id> <new id> <status>\0<path>\0", or
// "…R<score>\0<old path>\0<new path>\0" for a rename) into file changes, at
// most MaxChangedFiles, and returns how many patch sections each record
// has in `git diff -p` (a type change is a deletion and an addition: two).
// cut: the output was capped, so the last record may be partial.
func parseRawDiff(out []byte, cut bool) ([]overlaps.FileChange, []int) {
	fields := strings.Split(string(out), "\x00")
	var files []overlaps.FileChange
	var sections []int
	for i := 0; i < len(fields); {
		meta := fields[i]
		if !strings.HasPrefix(meta, ":") {
			i++
			continue
		}
		parts := strings.Fields(meta[1:])
		if len(parts) != 5 || i+1 >= len(fields) {
			break
		}
		oldMode, newMode, oldID, newID, status := parts[0], parts[1], parts[2], parts[3], parts[4]
		f := overlaps.FileChange{}
		n := 1
		switch status[0] {
		case 'R':
			if i+2 >= len(fields) {
				i = len(fields)
				continue
			}
			f.BasePath, f.Path, f.Change = fields[i+1], fields[i+2], overlaps.Renamed
			i += 3
		default:
			p := fields[i+1]
			i += 2
			switch status[0] {
			case 'A':
				f.Path, f.Change = p, overlaps.Added
			case 'D':
				f.BasePath, f.Change = p, overlaps.Deleted
			case 'T':
				f.BasePath, f.Path, f.Change, n = p, p, overlaps.TypeChanged, 2
			default: // M, and anything unexpected as a modification
				f.BasePath, f.Path, f.Change = p, p, overlaps.Modified
			}
		}
		if f.BasePath != "" {
			f.BaseBlob = oldID
		}
		if f.Path != "" && strings.Trim(newID, "0") != "" {
			f.NewBlob = newID
		}
		// Symbolic links, submodules and type changes are compared whole.
		for _, mode := range []string{oldMode, newMode} {
			if mode == "120000" || mode == "160000" {
				f.Whole = true
			}
		}
		if f.Change == overlaps.TypeChanged {
			f.Whole = true
		}
		if len(files) == MaxChangedFiles {
			break
		}
		files = append(files, f)
		sections = append(sections, n)
	}
	if cut && len(files) > 0 {
		// The last record may be partial: drop it (the summary is cut anyway).
		files, sections = files[:len(files)-1], sections[:len(sections)-1]
	}
	return files, sections
}

// attachRanges gives each file the ranges of its patch sections (in the
// same order as the raw records: git emits both from one diff queue). When
// the counts disagree, every file is compared as a whole: never a range
// attached to the wrong file.
func attachRanges(files []overlaps.FileChange, sections []int, patch []patchSection) {
	total := 0
	for _, n := range sections {
		total += n
	}
	if total != len(patch) {
		for i := range files {
			files[i].Whole, files[i].Ranges = true, nil
		}
		return
	}
	k := 0
	for i, n := range sections {
		secs := patch[k : k+n]
		k += n
		if files[i].Whole {
			continue
		}
		s := secs[0]
		switch {
		case s.binary, s.over:
			files[i].Whole = true
		default:
			files[i].Ranges = s.ranges
		}
	}
}

// patchSection is what hunkScanner keeps of one `diff --git` section.
type patchSection struct {
	binary bool
	ranges []sandboxapi.LineRange
	over   bool // more than MaxOverlapRanges hunks
}

// hunkScanner is the io.Writer `git diff -U0` writes its patch to: it keeps
// only the start of each line (never a whole line: memory stays bounded
// whatever the files hold) and from it the sections and their hunk headers.
type hunkScanner struct {
	line  []byte
	files []patchSection
}

// maxKeptLine bounds the bytes of one patch line hunkScanner looks at.
const maxKeptLine = 200

func (h *hunkScanner) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		chunk := p
		if i >= 0 {
			chunk = p[:i]
		}
		if room := maxKeptLine - len(h.line); room > 0 {
			h.line = append(h.line, chunk[:min(room, len(chunk))]...)
		}
		if i < 0 {
			break
		}
		h.endLine()
		p = p[i+1:]
	}
	return n, nil
}

// flush ends a last line without a newline.
func (h *hunkScanner) flush() {
	if len(h.line) > 0 {
		h.endLine()
	}
}

// endLine looks at one line: a section start ("diff --git "), a binary
// notice, or a hunk header "@@ -<start>[,<count>] +…" (content lines start
// with '+', '-' or '\', never with these).
func (h *hunkScanner) endLine() {
	line := h.line
	h.line = h.line[:0]
	switch {
	case bytes.HasPrefix(line, []byte("diff --git ")):
		if len(h.files) < MaxChangedFiles*2 {
			h.files = append(h.files, patchSection{})
		}
	case len(h.files) == 0:
	case bytes.HasPrefix(line, []byte("Binary files ")), bytes.HasPrefix(line, []byte("GIT binary patch")):
		h.files[len(h.files)-1].binary = true
	case bytes.HasPrefix(line, []byte("@@ -")):
		s := &h.files[len(h.files)-1]
		if s.over {
			return
		}
		r, ok := parseHunkOld(line[len("@@ -"):])
		if !ok || len(s.ranges) == sandboxapi.MaxOverlapRanges {
			s.over, s.ranges = true, nil
			return
		}
		s.ranges = append(s.ranges, r)
	}
}

// parseHunkOld parses the old side of a hunk header, "<a>[,<b>] …", into a
// LineRange in the base's lines: b lines from a, or, when b is 0, an
// insertion after line a (before line a+1).
func parseHunkOld(rest []byte) (sandboxapi.LineRange, bool) {
	field, _, ok := bytes.Cut(rest, []byte(" "))
	if !ok {
		return sandboxapi.LineRange{}, false
	}
	a, b, hasCount := bytes.Cut(field, []byte(","))
	start, err := strconv.Atoi(string(a))
	if err != nil || start < 0 {
		return sandboxapi.LineRange{}, false
	}
	count := 1
	if hasCount {
		if count, err = strconv.Atoi(string(b)); err != nil || count < 0 {
			return sandboxapi.LineRange{}, false
		}
	}
	if count == 0 {
		return sandboxapi.LineRange{Start: start + 1, Count: 0}, true
	}
	return sandboxapi.LineRange{Start: start, Count: count}, true
}
