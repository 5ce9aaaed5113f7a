package sandboxapi

import "unicode/utf8"

// Commands of edit_file (EditFileInput.Command).
const (
	// EditStrReplace replaces the one occurrence of OldStr with NewStr.
	EditStrReplace = "str_replace"
	// EditInsert inserts NewStr after line InsertLine (0 = before the first line).
	EditInsert = "insert"
	// EditCreate writes FileText as the whole file (parents made), creating or replacing it.
	EditCreate = "create"
)

// EditCommands lists every EditFileInput.Command, for documentation and schemas.
var EditCommands = []string{EditStrReplace, EditInsert, EditCreate}

// EditFileInput is edit_file's argument (docs/API.md "Updates"): one edit
// of one text file, applied by the worker in one step under the session's
// exclusive lock, so two agents' edits never lose each other (there is no
// client-side read-then-write). Path is workspace-relative.
//
//   - str_replace: OldStr (not empty) must occur exactly once in the file;
//     it is replaced with NewStr (which may be empty). Zero or several
//     occurrences are ErrInvalidArgument saying how many.
//   - insert: NewStr is inserted as whole lines after line InsertLine
//     (1-based; 0 = before the first line; at most the file's line count).
//   - create: FileText becomes the file's content; missing parents are made;
//     an existing file is replaced (its permission bits kept).
type EditFileInput struct {
	Path       string `json:"path"`
	Command    string `json:"command"`
	OldStr     string `json:"old_str,omitempty"`
	NewStr     string `json:"new_str,omitempty"`
	InsertLine int    `json:"insert_line,omitempty"`
	FileText   string `json:"file_text,omitempty"`
	// IfMatch, when set, is the ContentHash the file must still have (as
	// WriteFileInput.IfMatch): ErrConflict, and nothing changes, otherwise.
	IfMatch string `json:"if_match,omitempty"`
}

// EditFileResult says what edit_file wrote: the file's size afterwards in
// bytes and Snippet, a few numbered lines around the change ("%6d\t<line>"
// per line, as a text editor's view prints them).
type EditFileResult struct {
	Path    string `json:"path"`
	Bytes   int64  `json:"bytes"`
	Snippet string `json:"snippet"`
	// ContentHash is the file's ContentHash after the edit.
	ContentHash string `json:"content_hash"`
}

// Validate checks an edit_file argument without reading the file: a known
// command, the fields that command needs, text that is valid UTF-8 without
// NUL bytes, and sizes within MaxFileBytes. Errors: ErrInvalidArgument
// (with the field), ErrResourceLimit (a text over MaxFileBytes).
func (in EditFileInput) Validate() error {
	if err := ValidateIfMatch(in.IfMatch); err != nil {
		return err
	}
	switch in.Command {
	case EditStrReplace:
		if in.OldStr == "" {
			return FieldError("old_str", "edit_file str_replace needs a non-empty old_str")
		}
		if in.FileText != "" || in.InsertLine != 0 {
			return FieldError("command", "edit_file str_replace takes old_str and new_str only")
		}
	case EditInsert:
		if in.InsertLine < 0 {
			return FieldError("insert_line", "insert_line must be 0 (before the first line) or a line number")
		}
		if in.OldStr != "" || in.FileText != "" {
			return FieldError("command", "edit_file insert takes insert_line and new_str only")
		}
	case EditCreate:
		if in.OldStr != "" || in.NewStr != "" || in.InsertLine != 0 {
			return FieldError("command", "edit_file create takes file_text only")
		}
	case "":
		return FieldError("command", "edit_file needs a command (%s, %s or %s)", EditStrReplace, EditInsert, EditCreate)
	default:
		return FieldError("command", "edit_file command %q: want %s, %s or %s", Clip(in.Command, 40), EditStrReplace, EditInsert, EditCreate)
	}
	for _, f := range []struct{ name, v string }{{"old_str", in.OldStr}, {"new_str", in.NewStr}, {"file_text", in.FileText}} {
		if len(f.v) > MaxFileBytes {
			return Errorf(ErrResourceLimit, "edit_file %s is larger than %d bytes", f.name, MaxFileBytes)
		}
		if !IsText([]byte(f.v)) {
			return FieldError(f.name, "edit_file %s is not text (it holds a NUL byte or invalid UTF-8)", f.name)
		}
	}
	return nil
}

// IsText reports whether b is text edit_file may change: valid UTF-8 with no
// NUL byte.
func IsText(b []byte) bool {
	for _, c := range b {
		if c == 0 {
			return false
		}
	}
	return utf8.Valid(b)
}

// LogRequest is log's argument: at most Limit commits (0 = DefaultLogCommits,
// at most MaxLogCommits) reachable from HEAD, newest first.
type LogRequest struct {
	Limit int `json:"limit,omitempty"`
}

// Log limits.
const (
	DefaultLogCommits = 20
	MaxLogCommits     = 500
)

// LogCommit is one commit of log. Date is the author date (RFC 3339).
type LogCommit struct {
	Commit      string `json:"commit"`
	AuthorName  string `json:"author_name"`
	AuthorEmail string `json:"author_email"`
	Date        string `json:"date"`
	Subject     string `json:"subject"`
}

// LogResult lists commits reachable from HEAD, newest first; Truncated is
// set when more commits exist than were returned.
type LogResult struct {
	Commits   []LogCommit `json:"commits"`
	Truncated bool        `json:"truncated"`
}

// Output streams of read_output (ReadOutputInput.Stream) and process_read
// (ProcessReadInput.Stream, with StreamPTY).
const (
	StreamStdout = "stdout"
	StreamStderr = "stderr"
)

// Kept output limits (docs/API.md "Kept output").
const (
	// MaxKeptStreamBytes bounds what is kept of one stream of one command;
	// bytes past it are counted but not kept (ReadOutputResult.Kept).
	MaxKeptStreamBytes = 32 << 20
	// MaxKeptOutputBytes bounds the kept output of one workspace: when a new
	// command's output is kept, the oldest outputs are dropped first until
	// the workspace's total is within it.
	MaxKeptOutputBytes = 64 << 20
	// DefaultReadOutputBytes is read_output's page size when Limit is 0.
	DefaultReadOutputBytes = 64 << 10
	// MaxReadOutputBytes is the largest read_output page (base64 in JSON
	// keeps it far below Temporal's payload limit).
	MaxReadOutputBytes = 1 << 20
)

// ReadOutputInput is read_output's argument: a page of the whole output of
// an exec that kept it (ExecRequest.KeepOutput, ExecResult.OutputID). Stream
// is "stdout" (default, "") or "stderr"; Offset a byte offset into that
// stream; Limit the page size in bytes (0 = DefaultReadOutputBytes, at most
// MaxReadOutputBytes).
type ReadOutputInput struct {
	OutputID string `json:"output_id"`
	Stream   string `json:"stream,omitempty"`
	Offset   int64  `json:"offset,omitempty"`
	Limit    int    `json:"limit,omitempty"`
}

// ReadOutputResult is one page of kept output: Data covers [Offset,
// Offset+len(Data)) of the stream; Total is the stream's full byte count as
// the command wrote it, Kept how many of those bytes are kept (Total unless
// the stream was larger than MaxKeptStreamBytes); EOF is set when the page
// reaches the end of the kept bytes.
type ReadOutputResult struct {
	OutputID string `json:"output_id"`
	Stream   string `json:"stream"`
	Offset   int64  `json:"offset"`
	Data     []byte `json:"data"`
	Total    int64  `json:"total"`
	Kept     int64  `json:"kept"`
	EOF      bool   `json:"eof"`
}

// Validate checks a read_output argument. Errors: ErrInvalidArgument (with
// the field).
func (in ReadOutputInput) Validate() error {
	if err := ValidateOutputID(in.OutputID); err != nil {
		return err
	}
	if in.Stream != "" && in.Stream != StreamStdout && in.Stream != StreamStderr {
		return FieldError("stream", "read_output stream %q: want stdout or stderr", Clip(in.Stream, 40))
	}
	if in.Offset < 0 {
		return FieldError("offset", "read_output offset must not be negative")
	}
	if in.Limit < 0 || in.Limit > MaxReadOutputBytes {
		return FieldError("limit", "read_output limit must be between 0 and %d", MaxReadOutputBytes)
	}
	return nil
}

// OutputIDPrefix starts every kept output's id ("out-" and 32 hex digits).
const OutputIDPrefix = "out-"

// ValidateOutputID checks the shape of an output id. Errors: ErrInvalidArgument.
func ValidateOutputID(id string) error {
	if len(id) != len(OutputIDPrefix)+32 || id[:len(OutputIDPrefix)] != OutputIDPrefix {
		return FieldError("output_id", "output id %q: want %s followed by 32 hex digits", Clip(id, 60), OutputIDPrefix)
	}
	for _, c := range id[len(OutputIDPrefix):] {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return FieldError("output_id", "output id %q: want %s followed by 32 hex digits", Clip(id, 60), OutputIDPrefix)
		}
	}
	return nil
}
