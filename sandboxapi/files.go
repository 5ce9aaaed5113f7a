package sandboxapi

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// FileEntry is one directory entry (list_dir).
type FileEntry struct {
	Name string `json:"name"`
	// Type is "file", "dir", "symlink" or "other".
	Type string `json:"type"`
	Size int64  `json:"size"` // bytes
	Mode uint32 `json:"mode"` // permission bits
	// LFSPointer is set on a regular file whose content is a Git LFS
	// pointer (ParseLFSPointer): its real content was not fetched.
	LFSPointer bool `json:"lfs_pointer,omitempty"`
}

// SearchRequest asks for lines matching Pattern (Go RE2 syntax, or a literal
// string when Literal) in files under Path (workspace-relative, "" = root).
// Symlinks are never followed; .git is skipped; binary files are skipped.
type SearchRequest struct {
	Pattern    string `json:"pattern"`
	Path       string `json:"path,omitempty"`
	Literal    bool   `json:"literal,omitempty"`
	IgnoreCase bool   `json:"ignore_case,omitempty"`
	// MaxResults caps the matches returned; 0 means DefaultSearchResults.
	MaxResults int `json:"max_results,omitempty"`
	// Glob, when set, keeps only files whose path matches it: a glob without
	// "/" is matched against the file's name ("*.go"), one with "/" against
	// its workspace-relative path, where "**" matches any number of
	// directories ("src/**/*.ts"). Syntax as Go's path.Match otherwise.
	Glob string `json:"glob,omitempty"`
}

// Search limits.
const (
	DefaultSearchResults = 200
	MaxSearchResults     = 5000
	// MaxSearchPatternBytes bounds SearchRequest.Pattern, in bytes.
	MaxSearchPatternBytes = 16 << 10
	// MaxSearchLineBytes cuts each returned line.
	MaxSearchLineBytes = 512
)

// SearchMatch is one matching line.
type SearchMatch struct {
	Path string `json:"path"`
	Line int    `json:"line"` // 1-based
	Text string `json:"text"`
}

// Why a search stopped early (SearchResult.TruncatedBy).
const (
	// SearchCapResults: the result cap was reached; more matches exist.
	SearchCapResults = "max_results"
	// SearchCapFiles: the per-search file limit was reached; files were
	// left unsearched (they may hold matches).
	SearchCapFiles = "max_files"
	// SearchCapBytes: the per-search byte limit was reached; files were
	// left unsearched (they may hold matches).
	SearchCapBytes = "max_bytes"
)

// MaxSearchSkippedPaths bounds SearchResult.SkippedTooLarge.
const MaxSearchSkippedPaths = 100

// SearchResult is the outcome of a search (docs/API.md "Updates", `search`).
type SearchResult struct {
	// Matches are the matching lines, in path order.
	Matches []SearchMatch `json:"matches"`
	// Truncated: the search stopped early; TruncatedBy says why.
	Truncated bool `json:"truncated"`
	// TruncatedBy is SearchCapResults, SearchCapFiles or SearchCapBytes
	// when Truncated ("" otherwise): only SearchCapResults means that more
	// matches exist; the others mean that files were left unsearched.
	TruncatedBy string `json:"truncated_by,omitempty"`
	// SkippedTooLarge lists the files not searched because they are over
	// the per-file size limit (the first MaxSearchSkippedPaths of them;
	// SkippedTooLargeCount counts them all).
	SkippedTooLarge []string `json:"skipped_too_large,omitempty"`
	// SkippedTooLargeCount is how many files were not searched for their size.
	SkippedTooLargeCount int `json:"skipped_too_large_count,omitempty"`
	// SkippedBinary is how many binary files (a NUL in the first 8 KiB) were not searched.
	SkippedBinary int `json:"skipped_binary,omitempty"`
}

// MaxFileBytes bounds read_file and write_file payloads.
const MaxFileBytes = 1 << 20

// ReadFileInput is read_file's argument (Path workspace-relative).
type ReadFileInput struct {
	Path string `json:"path"`
}

// ReadFileResult carries the bytes (base64 in JSON).
type ReadFileResult struct {
	Path    string `json:"path"`
	Content []byte `json:"content"`
	Size    int64  `json:"size"`
	// LFSPointer is set when Content is a Git LFS pointer
	// (ParseLFSPointer): the file's real content was not fetched.
	LFSPointer bool `json:"lfs_pointer,omitempty"`
	// ContentHash is ContentHash(Content): give it as if_match to a later
	// write_file or edit_file to make it fail, rather than overwrite, when
	// the file changed meanwhile (docs/API.md "Optimistic concurrency").
	ContentHash string `json:"content_hash"`
}

// WriteFileInput is write_file's argument; Mode 0 means 0644.
type WriteFileInput struct {
	Path    string `json:"path"`
	Content []byte `json:"content"`
	Mode    uint32 `json:"mode,omitempty"`
	// IfMatch, when set, is the ContentHash the file must still have: the
	// write fails with ErrConflict (SandboxConflict) and changes nothing
	// when the file's content differs or the file is gone.
	IfMatch string `json:"if_match,omitempty"`
}

// WriteFileResult confirms a write.
type WriteFileResult struct {
	Path  string `json:"path"`
	Bytes int64  `json:"bytes"`
	// ContentHash is the written content's ContentHash.
	ContentHash string `json:"content_hash"`
}

// ContentHash is a file content's hash as read_file, write_file and
// edit_file report it and if_match takes it: "sha256:" and the 64 lowercase
// hex digits of the SHA-256 of the bytes.
func ContentHash(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// ValidateIfMatch checks an if_match value ("" = none, else a ContentHash).
// Errors: ErrInvalidArgument naming if_match.
func ValidateIfMatch(v string) error {
	if v == "" {
		return nil
	}
	h, ok := strings.CutPrefix(v, "sha256:")
	if !ok || len(h) != 64 || strings.Trim(h, "0123456789abcdef") != "" {
		return FieldError("if_match", "if_match %q: want the content_hash a read returned (sha256: and 64 lowercase hex digits)", clip(v))
	}
	return nil
}

// ListDirInput is list_dir's argument ("" = the workspace root). Depth 0
// or 1 lists the directory itself; 2 or 3 also lists the subdirectories
// that many levels down (entries are then named by their path relative to
// Path, "sub/file.go"). SkipHidden leaves out entries whose name starts
// with "."; SkipIgnored leaves out what git ignores (.gitignore and the
// repository's exclude rules; tracked files are never ignored). ".git" is
// never descended into.
type ListDirInput struct {
	Path        string `json:"path,omitempty"`
	Depth       int    `json:"depth,omitempty"`
	SkipHidden  bool   `json:"skip_hidden,omitempty"`
	SkipIgnored bool   `json:"skip_ignored,omitempty"`
}

// MaxListDepth is the deepest ListDirInput.Depth.
const MaxListDepth = 3

// ListDirResult lists one directory (and, with a depth, its
// subdirectories), sorted by path; Truncated is set when more than the
// entry cap (1000 per directory, 5000 in all) existed.
type ListDirResult struct {
	Path      string      `json:"path"`
	Entries   []FileEntry `json:"entries"`
	Truncated bool        `json:"truncated,omitempty"`
}

// FileEntry types (FileEntry.Type).
const (
	EntryFile    = "file"
	EntryDir     = "dir"
	EntrySymlink = "symlink"
	EntryOther   = "other"
)

// FileEntryTypes lists every FileEntry.Type, for documentation and schemas.
var FileEntryTypes = []string{EntryFile, EntryDir, EntrySymlink, EntryOther}
