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
