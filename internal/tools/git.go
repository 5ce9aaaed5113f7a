package tools

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// GitInput is sandbox_git's input.
type GitInput struct {
	Command        string   `json:"command" jsonschema:"status, diff (against the workspace's base commit; optional paths), log (limit), commit (message, optional paths), push (force_with_lease), checkpoint (label), checkpoints or rollback (checkpoint)"`
	Paths          []string `json:"paths,omitempty" jsonschema:"diff: only these files or directories; commit: only these paths (default: every change, untracked files included)"`
	Limit          int      `json:"limit,omitempty" jsonschema:"log: commits to show (default 20, at most 500)"`
	Message        string   `json:"message,omitempty" jsonschema:"commit: the commit message"`
	ForceWithLease bool     `json:"force_with_lease,omitempty" jsonschema:"push: replace the remote branch, but only while it is still at what this workspace pushed last"`
	Label          string   `json:"label,omitempty" jsonschema:"checkpoint: a one-line label shown by checkpoints"`
	Checkpoint     int      `json:"checkpoint,omitempty" jsonschema:"rollback: the id of the checkpoint to go back to (see checkpoints)"`
}

// GitOutput is sandbox_git's result: the field of the command that ran.
type GitOutput struct {
	Command string                      `json:"command"`
	Status  *sandboxapi.WorkspaceStatus `json:"status,omitempty"`
	Diff    *sandboxapi.Diff            `json:"diff,omitempty"`
	Log     *sandboxapi.LogResult       `json:"log,omitempty"`
	Commit  *sandboxapi.CommitResult    `json:"commit,omitempty"`
	Push    *sandboxapi.PushResult      `json:"push,omitempty"`
	// Checkpoint is the checkpoint taken (checkpoint).
	Checkpoint *sandboxapi.Checkpoint `json:"checkpoint,omitempty"`
	// Checkpoints lists the workspace's checkpoints, oldest first (checkpoints).
	Checkpoints []sandboxapi.Checkpoint `json:"checkpoints,omitempty"`
	// Rollback says what a rollback did (rollback).
	Rollback *sandboxapi.RollbackResult `json:"rollback,omitempty"`
}

func (c call) git(ctx context.Context, in GitInput, writable bool) (GitOutput, string, error) {
	out := GitOutput{Command: in.Command}
	if err := checkGitInput(in, writable); err != nil {
		return out, "", err
	}
	switch in.Command {
	case "status", "diff", "log", "checkpoints":
		return c.gitRead(ctx, in, out)
	case "commit", "push", "checkpoint", "rollback":
		return c.gitChange(ctx, in, out)
	}
	return out, "", invalid("command", "command %q: want status, diff, log, commit, push, checkpoint, checkpoints or rollback", sandboxapi.Clip(in.Command, 40))
}

// checkGitInput refuses a sandbox_git field given to a command it is not
// for (limit: log, message: commit, force_with_lease: push, label:
// checkpoint, checkpoint: rollback, paths: diff and commit), in that order,
// and a changing command on a read-only workspace. Errors:
// ErrInvalidArgument on the field.
func checkGitInput(in GitInput, writable bool) error {
	onlyFor := func(field, cmd string, set bool) error {
		if set && in.Command != cmd {
			return invalid(field, "%s is for %s only", field, cmd)
		}
		return nil
	}
	for _, e := range []error{
		onlyFor("limit", "log", in.Limit != 0),
		onlyFor("message", "commit", in.Message != ""),
		onlyFor("force_with_lease", "push", in.ForceWithLease),
		onlyFor("label", "checkpoint", in.Label != ""),
		onlyFor("checkpoint", "rollback", in.Checkpoint != 0),
	} {
		if e != nil {
			return e
		}
	}
	if in.Paths != nil && in.Command != "diff" && in.Command != "commit" {
		return invalid("paths", "paths is for diff and commit only")
	}
	if !writable && slices.Contains(writeGitCommands, in.Command) {
		return invalid("command", "command %q: this workspace is read-only (status, diff, log)", in.Command)
	}
	return nil
}

// gitRead runs the sandbox_git commands that change nothing: status, diff
// (filtered to in.Paths), log (DefaultLogCommits when no limit) and
// checkpoints, each with its text. Errors: the session's.
func (c call) gitRead(ctx context.Context, in GitInput, out GitOutput) (GitOutput, string, error) {
	switch in.Command {
	case "status":
		st, err := c.s.Status(ctx)
		if err != nil {
			return out, "", err
		}
		out.Status = &st
		return out, statusText(st), nil
	case "diff":
		d, err := c.s.Diff(ctx)
		if err != nil {
			return out, "", err
		}
		if len(in.Paths) > 0 {
			if d, err = filterDiff(d, in.Paths); err != nil {
				return out, "", err
			}
		}
		out.Diff = &d
		return out, diffText(d), nil
	case "log":
		if in.Limit == 0 {
			in.Limit = DefaultLogCommits
		}
		l, err := c.s.Log(ctx, in.Limit)
		if err != nil {
			return out, "", err
		}
		out.Log = &l
		return out, logText(l), nil
	default: // checkpoints
		cps, err := c.s.Checkpoints(ctx)
		if err != nil {
			return out, "", err
		}
		out.Checkpoints = cps
		if out.Checkpoints == nil {
			out.Checkpoints = []sandboxapi.Checkpoint{}
		}
		return out, checkpointsText(cps), nil
	}
}

// gitChange runs the sandbox_git commands that change the workspace or
// its remote: commit (a message required), push, checkpoint and rollback
// (a checkpoint id required), each with its text. Errors:
// ErrInvalidArgument (message, checkpoint), the session's.
func (c call) gitChange(ctx context.Context, in GitInput, out GitOutput) (GitOutput, string, error) {
	switch in.Command {
	case "commit":
		if strings.TrimSpace(in.Message) == "" {
			return out, "", invalid("message", "commit needs a message")
		}
		r, err := c.s.Commit(ctx, sandboxapi.CommitRequest{Message: in.Message, Paths: in.Paths})
		if err != nil {
			return out, "", err
		}
		out.Commit = &r
		if r.NothingToCommit {
			return out, "Nothing to commit: the workspace is clean.\n", nil
		}
		return out, fmt.Sprintf("Committed %s on %s.\n", r.Commit, r.Branch), nil
	case "push":
		r, err := c.s.Push(ctx, in.ForceWithLease)
		if err != nil {
			return out, "", err
		}
		out.Push = &r
		return out, fmt.Sprintf("Push of %s: %s (remote at %s, was %s).\n", r.Branch, r.Status, short(r.Commit), orNone(short(r.PreviousRemoteCommit))), nil
	case "checkpoint":
		cp, err := c.s.Checkpoint(ctx, in.Label)
		if err != nil {
			return out, "", err
		}
		out.Checkpoint = &cp
		return out, fmt.Sprintf("Checkpoint %d taken (%s, %d files changed against HEAD %s); undo later edits with rollback checkpoint=%d.\n",
			cp.ID, orNone(cp.Label), cp.FilesChanged, short(cp.Head), cp.ID), nil
	default: // rollback
		if in.Checkpoint < 1 {
			return out, "", invalid("checkpoint", "rollback needs checkpoint: the id of a checkpoint (see checkpoints)")
		}
		r, err := c.s.Rollback(ctx, in.Checkpoint)
		if err != nil {
			return out, "", err
		}
		out.Rollback = &r
		return out, fmt.Sprintf("Rolled back to checkpoint %d (HEAD %s on %s); the state left is checkpoint %d: rollback checkpoint=%d undoes this.\n",
			r.Checkpoint.ID, short(r.Head), orNone(r.Branch), r.Undo.ID, r.Undo.ID), nil
	}
}

// diffText is a diff's text: its patch (with a note when it was cut), or a
// line saying there is no change against the base commit.
func diffText(d sandboxapi.Diff) string {
	if d.Patch == "" {
		return "No changes against the base commit " + short(d.BaseCommit) + ".\n"
	}
	t := d.Patch
	if d.Truncated {
		t += fmt.Sprintf("\n(the diff is cut: %d bytes in all; name paths to see less)\n", d.TotalBytes)
	}
	return t
}

// logText is a log's text: one line per commit (short id, date, author,
// subject), and a note when older commits exist.
func logText(l sandboxapi.LogResult) string {
	var b strings.Builder
	for _, cm := range l.Commits {
		fmt.Fprintf(&b, "%s %s %s: %s\n", short(cm.Commit), cm.Date, cm.AuthorName, cm.Subject)
	}
	if l.Truncated {
		b.WriteString("(older commits exist)\n")
	}
	return b.String()
}

// checkpointsText is the checkpoints' text: one line each (id, time in
// RFC 3339 UTC, label, files changed, HEAD), or a line saying there are none.
func checkpointsText(cps []sandboxapi.Checkpoint) string {
	if len(cps) == 0 {
		return "No checkpoints yet.\n"
	}
	var b strings.Builder
	for _, cp := range cps {
		fmt.Fprintf(&b, "%d %s %s (%d files changed, HEAD %s)\n", cp.ID, cp.CreatedAt.UTC().Format(time.RFC3339), orNone(cp.Label), cp.FilesChanged, short(cp.Head))
	}
	return b.String()
}

// writeGitCommands are sandbox_git's commands that change the workspace or
// its remote, or need a writable workspace: offered on writable workspaces only (docs/API.md "Checkpoints"; README "Use it from an agent").
var writeGitCommands = []string{"commit", "push", "checkpoint", "checkpoints", "rollback"}

func statusText(st sandboxapi.WorkspaceStatus) string {
	var b strings.Builder
	branch := st.Branch
	if branch == "" {
		branch = "(detached)"
	}
	fmt.Fprintf(&b, "On %s at %s; base %s; %d commit(s) since base, %d unpushed.\n", branch, short(st.Head), short(st.BaseCommit), st.CommitsSinceBase, st.UnpushedCommits)
	if !st.Dirty {
		b.WriteString("Working tree clean.\n")
	}
	for _, f := range st.Files {
		fmt.Fprintf(&b, "%s %s\n", f.Status, f.Path)
	}
	for _, w := range st.ConfigWarnings {
		fmt.Fprintf(&b, "warning: git config %s\n", w)
	}
	return b.String()
}

func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
