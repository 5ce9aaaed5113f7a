package tools

import (
	"context"
	"fmt"
	"strings"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// EditorInput is sandbox_text_editor's input.
type EditorInput struct {
	Command    string `json:"command" jsonschema:"view (a file's numbered lines, or a directory two levels deep), create (write file_text as the whole file), str_replace (replace the one occurrence of old_str with new_str), insert (insert new_str after line insert_line)"`
	Path       string `json:"path" jsonschema:"workspace-relative path of the file (or, for view, the directory; \".\" is the root)"`
	ViewRange  []int  `json:"view_range,omitempty" jsonschema:"view of a file: [start, end] lines, 1-based, end -1 = to the last line"`
	FileText   string `json:"file_text,omitempty" jsonschema:"create: the whole content of the file"`
	OldStr     string `json:"old_str,omitempty" jsonschema:"str_replace: the exact text to replace; it must occur exactly once in the file, whitespace included"`
	NewStr     string `json:"new_str,omitempty" jsonschema:"str_replace: the replacement (may be empty); insert: the lines to insert"`
	InsertLine *int   `json:"insert_line,omitempty" jsonschema:"insert: insert after this line (0 = before the first line)"`
	IfMatch    string `json:"if_match,omitempty" jsonschema:"create, str_replace, insert: change the file only if it still has this content_hash (from a view); otherwise fail with SandboxConflict and change nothing"`
}

// EditorOutput is sandbox_text_editor's result: Text holds the numbered
// lines of a view, a directory listing, or the numbered lines around an edit.
type EditorOutput struct {
	Command string `json:"command"`
	Path    string `json:"path"`
	// Kind is "file", "directory" or "edit".
	Kind string `json:"kind"`
	Text string `json:"text"`
	// Lines is a viewed file's line count; Bytes a viewed or edited file's size.
	Lines     int   `json:"lines,omitempty"`
	Bytes     int64 `json:"bytes,omitempty"`
	Truncated bool  `json:"truncated,omitempty"`
	// ContentHash is a viewed or edited file's content hash afterwards
	// (the if_match of a later edit).
	ContentHash string `json:"content_hash,omitempty"`
}

func (c call) editor(ctx context.Context, in EditorInput) (EditorOutput, string, error) {
	switch in.Command {
	case "view":
		return c.view(ctx, in)
	case sandboxapi.EditCreate, sandboxapi.EditStrReplace, sandboxapi.EditInsert:
		if in.ViewRange != nil {
			return EditorOutput{}, "", invalid("view_range", "view_range is for view only")
		}
		req := sandboxapi.EditFileInput{Path: in.Path, Command: in.Command, OldStr: in.OldStr, NewStr: in.NewStr, FileText: in.FileText, IfMatch: in.IfMatch}
		if in.Command == sandboxapi.EditInsert {
			if in.InsertLine == nil {
				return EditorOutput{}, "", invalid("insert_line", "insert needs insert_line (0 = before the first line)")
			}
			req.InsertLine = *in.InsertLine
		} else if in.InsertLine != nil {
			return EditorOutput{}, "", invalid("insert_line", "insert_line is for insert only")
		}
		res, err := c.s.EditFile(ctx, req)
		if err != nil {
			return EditorOutput{}, "", err
		}
		out := EditorOutput{Command: in.Command, Path: res.Path, Kind: "edit", Text: res.Snippet, Bytes: res.Bytes, ContentHash: res.ContentHash}
		verb := map[string]string{sandboxapi.EditCreate: "Wrote", sandboxapi.EditStrReplace: "Edited", sandboxapi.EditInsert: "Inserted into"}[in.Command]
		return out, fmt.Sprintf("%s %s (%d bytes). The lines around the change:\n%s", verb, res.Path, res.Bytes, res.Snippet), nil
	}
	return EditorOutput{}, "", invalid("command", "command %q: want view, create, str_replace or insert", sandboxapi.Clip(in.Command, 40))
}

func (c call) view(ctx context.Context, in EditorInput) (EditorOutput, string, error) {
	if in.OldStr != "" || in.NewStr != "" || in.FileText != "" || in.InsertLine != nil || in.IfMatch != "" {
		return EditorOutput{}, "", invalid("command", "view takes path and view_range only")
	}
	p := in.Path
	if p == "" {
		p = "."
	}
	if p != "." {
		data, err := c.s.ReadFile(ctx, p)
		if err == nil {
			out, text, err := viewFile(p, data, in.ViewRange)
			out.ContentHash = sandboxapi.ContentHash(data)
			return out, text, err
		}
		if !sandboxapi.IsInvalidWorkspacePath(err) || sandboxapi.IsFileNotFound(err) {
			return EditorOutput{}, "", err
		}
		// Not a readable file: a directory?
		out, text, lerr := c.viewDir(ctx, p, in.ViewRange)
		if lerr != nil {
			return EditorOutput{}, "", err // the read's error says what p is
		}
		return out, text, nil
	}
	return c.viewDir(ctx, p, in.ViewRange)
}

func (c call) viewDir(ctx context.Context, p string, viewRange []int) (EditorOutput, string, error) {
	res, err := c.s.ListTree(ctx, sandboxapi.ListDirInput{Path: p, Depth: 2, SkipHidden: true, SkipIgnored: true})
	if err != nil {
		return EditorOutput{}, "", err
	}
	if viewRange != nil {
		return EditorOutput{}, "", invalid("view_range", "view_range is for files, %s is a directory", p)
	}
	var b strings.Builder
	for _, e := range res.Entries {
		b.WriteString(e.Name)
		if e.Type == sandboxapi.EntryDir {
			b.WriteByte('/')
		}
		b.WriteByte('\n')
	}
	out := EditorOutput{Command: "view", Path: p, Kind: "directory", Text: b.String(), Truncated: res.Truncated}
	head := fmt.Sprintf("Files and directories in %s, two levels deep (hidden and git-ignored ones left out):\n", p)
	if res.Truncated {
		head = fmt.Sprintf("The first %d entries of %s, two levels deep (hidden and git-ignored ones left out):\n", len(res.Entries), p)
	}
	return out, head + out.Text, nil
}
