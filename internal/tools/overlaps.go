package tools

import (
	"context"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// Overlaps is the name of the tool that reports which other workspaces of
// the repository changed the same files (docs/API.md "Overlaps").
const Overlaps = "sandbox_overlaps"

// OverlapsInput is sandbox_overlaps's input: none.
type OverlapsInput struct{}

// overlapsTool declares sandbox_overlaps (read-only).
func overlapsTool() Tool {
	return newTool(Overlaps, "Check whether other agents working on this repository for the same user and project changed the files this workspace changed since its base (committed or not, renames followed), and whether the changed line ranges intersect — a likely merge conflict. Highest risk first; workspaces on other hosts are listed as not checked. Read-only: call it before large edits or before merging.",
		&mcp.ToolAnnotations{Title: "Overlaps", ReadOnlyHint: true, IdempotentHint: true, DestructiveHint: ptr(false), OpenWorldHint: ptr(false)}, nil,
		func(ctx context.Context, c call, _ OverlapsInput) (sandboxapi.OverlapsResult, string, error) {
			res, err := c.s.Overlaps(ctx)
			if err != nil {
				return sandboxapi.OverlapsResult{}, "", err
			}
			return res, overlapsText(res), nil
		})
}

// overlapsText is sandbox_overlaps's text: one line per overlapping
// workspace, then one per shared file, then the workspaces not checked.
func overlapsText(res sandboxapi.OverlapsResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d files changed here since the base; %d other workspaces checked", res.Changed, res.Checked)
	if len(res.Overlaps) == 0 {
		b.WriteString(": no overlap.\n")
	} else {
		fmt.Fprintf(&b, ", %d changed the same files:\n", len(res.Overlaps))
	}
	for _, o := range res.Overlaps {
		who := string(o.Mode)
		if o.TaskID != "" {
			who += " task " + o.TaskID
		} else if o.ConversationID != "" {
			who += " conversation " + o.ConversationID
		}
		fmt.Fprintf(&b, "- %s risk: %s (%s, branch %s): %d shared files, %d intersecting\n", o.Risk, o.WorkspaceID, who, o.Branch, len(o.Files), o.Intersecting)
		for _, f := range o.Files {
			what := "different lines"
			switch {
			case f.RangesIntersect && f.Comparable:
				what = "the same or adjacent lines"
			case f.RangesIntersect:
				what = "whole file (" + f.ThisChange + " here, " + f.OtherChange + " there)"
			}
			fmt.Fprintf(&b, "  %s: %s\n", f.Path, what)
		}
	}
	for _, u := range res.NotChecked {
		fmt.Fprintf(&b, "- not checked: %s (%s, host %s)\n", u.WorkspaceID, u.Reason, u.HostID)
	}
	return b.String()
}
