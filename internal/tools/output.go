package tools

import (
	"context"
	"fmt"
	"strings"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// OutputInput is sandbox_output's input.
type OutputInput struct {
	OutputID string `json:"output_id" jsonschema:"the output_id sandbox_shell returned for a cut output"`
	Offset   int64  `json:"offset,omitempty" jsonschema:"byte offset to start at (next_offset of the previous page)"`
	Limit    int    `json:"limit,omitempty" jsonschema:"bytes to return (default 80000, at most 1048576)"`
	Stream   string `json:"stream,omitempty" jsonschema:"stdout (default) or stderr"`
}

// OutputPage is sandbox_output's result: Text covers bytes [Offset,
// NextOffset) of the stream (cut on a UTF-8 boundary); EOF is set at the end.
type OutputPage struct {
	OutputID   string `json:"output_id"`
	Stream     string `json:"stream"`
	Offset     int64  `json:"offset"`
	NextOffset int64  `json:"next_offset"`
	Total      int64  `json:"total"`
	EOF        bool   `json:"eof"`
	Text       string `json:"text"`
}

func (c call) output(ctx context.Context, in OutputInput) (OutputPage, string, error) {
	if in.Limit == 0 {
		in.Limit = DefaultOutputPageBytes
	}
	res, err := c.s.ReadOutput(ctx, sandboxapi.ReadOutputInput{OutputID: in.OutputID, Stream: in.Stream, Offset: in.Offset, Limit: in.Limit})
	if err != nil {
		return OutputPage{}, "", err
	}
	data := res.Data
	if !res.EOF {
		data = cutToRune(data)
	}
	page := OutputPage{OutputID: res.OutputID, Stream: res.Stream, Offset: res.Offset, NextOffset: res.Offset + int64(len(data)),
		Total: res.Total, EOF: res.EOF && int64(len(data)) == int64(len(res.Data)), Text: text(data)}
	var b strings.Builder
	fmt.Fprintf(&b, "%s of %s, bytes %d-%d of %d", page.Stream, page.OutputID, page.Offset, page.NextOffset, page.Total)
	switch {
	case page.EOF && res.Kept < res.Total:
		fmt.Fprintf(&b, " (the end of what was kept: the first %d bytes)", res.Kept)
	case page.EOF:
		b.WriteString(" (the end)")
	default:
		fmt.Fprintf(&b, " (more: offset %d)", page.NextOffset)
	}
	b.WriteString(":\n")
	b.WriteString(page.Text)
	return page, b.String(), nil
}
