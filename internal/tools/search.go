package tools

import (
	"context"
	"fmt"
	"strings"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// SearchInput is sandbox_search's input.
type SearchInput struct {
	Pattern string `json:"pattern" jsonschema:"a regular expression (RE2 syntax), or a plain string with literal"`
	Glob    string `json:"glob,omitempty" jsonschema:"only files matching this glob: *.go matches names, src/**/*.ts paths"`
	Path    string `json:"path,omitempty" jsonschema:"search under this workspace-relative directory or file (default: everything)"`
	Case    string `json:"case,omitempty" jsonschema:"smart (default: case-insensitive unless the pattern has an upper-case letter), sensitive or insensitive"`
	Literal bool   `json:"literal,omitempty" jsonschema:"match pattern as a plain string"`
	MaxHits int    `json:"max_hits,omitempty" jsonschema:"matching lines to return (default 200, at most 5000)"`
}

// SearchOutput is sandbox_search's result.
type SearchOutput struct {
	Matches   []sandboxapi.SearchMatch `json:"matches"`
	Truncated bool                     `json:"truncated"`
	// TruncatedBy says why a truncated search stopped (sandboxapi.SearchResult).
	TruncatedBy string `json:"truncated_by,omitempty"`
	// SkippedTooLarge lists files not searched for their size.
	SkippedTooLarge []string `json:"skipped_too_large,omitempty"`
	// SkippedTooLargeCount counts them all.
	SkippedTooLargeCount int  `json:"skipped_too_large_count,omitempty"`
	IgnoreCase           bool `json:"ignore_case"`
}

func (c call) search(ctx context.Context, in SearchInput) (SearchOutput, string, error) {
	if in.MaxHits == 0 {
		in.MaxHits = DefaultSearchHits
	}
	if in.MaxHits < 1 || in.MaxHits > sandboxapi.MaxSearchResults {
		return SearchOutput{}, "", invalid("max_hits", "max_hits must be between 1 and %d", sandboxapi.MaxSearchResults)
	}
	ignore, err := ignoreCase(in.Case, in.Pattern, in.Literal)
	if err != nil {
		return SearchOutput{}, "", err
	}
	res, err := c.s.Search(ctx, sandboxapi.SearchRequest{Pattern: in.Pattern, Path: in.Path, Literal: in.Literal, IgnoreCase: ignore, MaxResults: in.MaxHits, Glob: in.Glob})
	if err != nil {
		return SearchOutput{}, "", err
	}
	if res.Matches == nil {
		res.Matches = []sandboxapi.SearchMatch{}
	}
	out := SearchOutput{Matches: res.Matches, Truncated: res.Truncated, TruncatedBy: res.TruncatedBy,
		SkippedTooLarge: res.SkippedTooLarge, SkippedTooLargeCount: res.SkippedTooLargeCount, IgnoreCase: ignore}
	return out, SearchText(res), nil
}

// SearchText renders a search result for a model: the matches, then why
// the search stopped early (only the result cap means more matches exist;
// the file and byte limits mean files were left unsearched) and which
// files were skipped for their size.
func SearchText(res sandboxapi.SearchResult) string {
	var b strings.Builder
	if len(res.Matches) == 0 {
		b.WriteString("No matches.\n")
	}
	for _, m := range res.Matches {
		fmt.Fprintf(&b, "%s:%d:%s\n", m.Path, m.Line, m.Text)
	}
	if res.Truncated {
		b.WriteString("(" + SearchStopReason(res) + ")\n")
	}
	if res.SkippedTooLargeCount > 0 {
		fmt.Fprintf(&b, "(%d files over the search's per-file size limit were not searched: %s", res.SkippedTooLargeCount, strings.Join(res.SkippedTooLarge, ", "))
		if res.SkippedTooLargeCount > len(res.SkippedTooLarge) {
			b.WriteString(", …")
		}
		b.WriteString("; read them in parts with sandbox_exec (e.g. grep -n))\n")
	}
	return b.String()
}

// SearchStopReason says in words why a truncated search stopped
// (SearchResult.TruncatedBy); shared with sandboxctl.
func SearchStopReason(res sandboxapi.SearchResult) string {
	switch res.TruncatedBy {
	case sandboxapi.SearchCapFiles, sandboxapi.SearchCapBytes:
		what := "files"
		if res.TruncatedBy == sandboxapi.SearchCapBytes {
			what = "bytes"
		}
		return fmt.Sprintf("the search stopped at its limit of %s read: files were left unsearched and may hold matches; narrow the path or glob", what)
	default:
		return fmt.Sprintf("more matches exist: the first %d are shown; narrow the pattern, path or glob", len(res.Matches))
	}
}
