package tools

import (
	"context"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// SetupTool is the name of the tool that shows the workspace's setup run
// and runs it again (docs/RUNTIMES.md "Setup").
const SetupTool = "sandbox_setup"

// SetupInput is sandbox_setup's input.
type SetupInput struct {
	Run bool `json:"run,omitempty" jsonschema:"run the repository's setup commands again now and wait for them (default false: only show the last run)"`
}

// SetupOutput is sandbox_setup's structured result: the setup run's state,
// absent when the repository names no setup command.
type SetupOutput struct {
	Setup *sandboxapi.SetupState `json:"setup,omitempty"`
}

// setupTool declares sandbox_setup.
func setupTool() Tool {
	return newTool(SetupTool, "Show the workspace's setup: the commands the repository's .devcontainer/devcontainer.json or .sandboxcore.yaml names to install its dependencies, run once per workspace before your first command. Returns the state (pending, running, done, failed, skipped), exit code, duration, the last lines of its output (the whole of it with sandbox_output and output_id) and whether a prepared dependency tree was restored. run: true runs it again (after changing a lockfile, or when it failed) and waits for it.",
		&mcp.ToolAnnotations{Title: "Setup", DestructiveHint: ptr(true), OpenWorldHint: ptr(true)}, nil,
		func(ctx context.Context, c call, in SetupInput) (SetupOutput, string, error) {
			if in.Run {
				st, err := c.s.Setup(ctx)
				if err != nil {
					return SetupOutput{}, "", err
				}
				return SetupOutput{Setup: &st}, setupText(&st), nil
			}
			d, err := c.s.Describe(ctx)
			if err != nil {
				return SetupOutput{}, "", err
			}
			return SetupOutput{Setup: d.Setup}, setupText(d.Setup), nil
		})
}

// setupText is sandbox_setup's text: one line of outcome, the prepared
// tree's, then the output tails.
func setupText(st *sandboxapi.SetupState) string {
	if st == nil {
		return "This repository names no setup command (.devcontainer/devcontainer.json, .sandboxcore.yaml).\n"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "setup %s", st.State)
	if st.Ended() && st.State != sandboxapi.SetupSkipped {
		fmt.Fprintf(&b, " (exit %d) in %.1f s", st.ExitCode, float64(st.DurationMS)/1000)
	}
	if st.Commands > 0 {
		fmt.Fprintf(&b, "; %d command(s)", st.Commands)
	}
	if st.Error != "" {
		fmt.Fprintf(&b, ": %s", st.Error)
	}
	b.WriteString("\n")
	if p := st.Prepared; p != nil {
		switch p.Action {
		case sandboxapi.PreparedRestored:
			fmt.Fprintf(&b, "prepared tree restored instead of running the commands (%s, %d files)\n", p.Mode, p.Files)
		case sandboxapi.PreparedSaved:
			fmt.Fprintf(&b, "prepared tree saved for the next workspace (%d files)\n", p.Files)
		default:
			fmt.Fprintf(&b, "no prepared tree: %s\n", p.Note)
		}
	}
	for _, t := range []struct{ name, text string }{{"stdout", st.StdoutTail}, {"stderr", st.StderrTail}} {
		if t.text != "" {
			fmt.Fprintf(&b, "--- %s (last %d bytes at most)\n%s", t.name, sandboxapi.SetupOutputTailBytes, t.text)
			if !strings.HasSuffix(t.text, "\n") {
				b.WriteString("\n")
			}
		}
	}
	if st.OutputID != "" {
		fmt.Fprintf(&b, "whole output: sandbox_output output_id=%s\n", st.OutputID)
	}
	return b.String()
}
