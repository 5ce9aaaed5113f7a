package sandboxapi

import (
	"fmt"
	"strings"
)

// User metadata: the fixed summary and details a workflow is started with
// (Temporal's StaticSummary and StaticDetails), shown by the Web UI and the
// CLI on the workflow's page (docs/OPERATIONS.md "What a session shows").
// They are Temporal markdown built only from validated identifiers (user,
// project, conversation and task ids, the repository's host/owner/name, the
// branch and base ref), never from a URL's credentials or a secret, and every
// value is escaped with EscapeMarkdown.

// SessionSummary returns a session's one-line static summary,
// "user · project · repository · mode · conversation <id>" (edit),
// "… · task <id>" (task) or "… · ref <base ref>" (analysis; "default
// branch" when none was asked for). Without a request (a session started
// to resume a workspace by id, or to deliver a signal) it is
// "workspace <wsID>". A repository URL that does not parse shows as
// "(invalid repository)"; the URL itself never appears.
func SessionSummary(wsID string, req *WorkspaceRequest) string {
	if req == nil {
		return "workspace " + EscapeMarkdown(wsID)
	}
	parts := []string{EscapeMarkdown(req.UserID), EscapeMarkdown(req.ProjectID), repoLabel(req.RepoURL), EscapeMarkdown(string(req.Mode))}
	if s := scopeLabel(req); s != "" {
		parts = append(parts, s)
	}
	return strings.Join(parts, " · ")
}

// SessionDetails returns a session's multi-line static details: the
// workspace and workflow ids, user, project, repository, mode with its
// conversation, task or base ref, and the branch (markdown, one fact per
// line). Without a request only the ids are known.
func SessionDetails(wsID string, req *WorkspaceRequest) string {
	var b strings.Builder
	b.WriteString("**Workspace** " + EscapeMarkdown(wsID))
	if wfID, err := SessionWorkflowID(wsID); err == nil {
		b.WriteString(" · **Workflow** " + EscapeMarkdown(wfID))
	}
	if req == nil {
		b.WriteString("\n\nStarted without a workspace request (resume by id, or a signal); the run's current details name the workspace once it is loaded.")
		return b.String()
	}
	b.WriteString("\n\n**User** " + EscapeMarkdown(req.UserID) + " · **Project** " + EscapeMarkdown(req.ProjectID))
	b.WriteString("\n\n**Repository** " + repoLabel(req.RepoURL))
	b.WriteString("\n\n**Mode** " + EscapeMarkdown(string(req.Mode)))
	if s := scopeLabel(req); s != "" {
		b.WriteString(" · " + s)
	}
	if br := req.Branch(); br != "" && req.Mode != ModeAnalysis {
		b.WriteString("\n\n**Branch** " + EscapeMarkdown(br))
		if req.FromBranch != "" {
			b.WriteString(" from " + EscapeMarkdown(req.FromBranch))
		} else if req.BaseRef != "" {
			b.WriteString(" from " + EscapeMarkdown(req.BaseRef))
		}
	}
	return b.String()
}

// scopeLabel names what the workspace is for: its conversation, task or base ref.
func scopeLabel(req *WorkspaceRequest) string {
	switch req.Mode {
	case ModeEdit:
		return "conversation " + EscapeMarkdown(req.ConversationID)
	case ModeTask:
		return "task " + EscapeMarkdown(req.TaskID)
	case ModeAnalysis:
		if req.BaseRef == "" {
			return "ref (default branch)"
		}
		return "ref " + EscapeMarkdown(req.BaseRef)
	}
	return ""
}

// repoLabel is a repository's host/owner/name, or "(invalid repository)".
func repoLabel(url string) string {
	repo, err := ParseRepoURL(url, PermissiveURLs)
	if err != nil {
		return "(invalid repository)"
	}
	return EscapeMarkdown(repo.Key())
}

// EscapeMarkdown returns s with every character that Temporal markdown
// (CommonMark) could read as emphasis, code, a link, HTML, a table or a
// strikethrough inside a line (\ ` * _ [ ] < > | ~) preceded by a backslash,
// and line breaks and other control characters replaced by spaces, so a
// value placed after a label renders as the literal text it is, on one line.
// (Characters that only matter at the start of a line, such as # - + 1.,
// are left alone: callers never start a line with a value.)
func EscapeMarkdown(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r < 0x20 || r == 0x7f:
			b.WriteByte(' ')
		case strings.ContainsRune("\\`*_[]<>|~", r):
			b.WriteByte('\\')
			b.WriteRune(r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// FanoutSummary returns a fan-out's one-line static summary: "fan-out <id>:
// N tasks (at most P at once) from conversation workspace <ws>", naming the
// conversation's user, project, repository and conversation when the input
// carries its request.
func FanoutSummary(fanoutID string, in FanoutInput) string {
	ws, _ := in.ConversationWorkspace()
	s := fmt.Sprintf("fan-out %s: %d tasks (at most %d at once) from workspace %s", EscapeMarkdown(fanoutID), len(in.Tasks), in.Parallel(), EscapeMarkdown(ws))
	if in.Conversation != nil {
		s += " · " + SessionSummary(ws, in.Conversation)
	}
	return s
}

// EvictionRunSummary returns an eviction run's one-line static summary:
// "eviction run (<trigger>)", then "dry run" and the hosts it is limited to.
// trigger says who started it, e.g. "schedule sandbox-eviction" or "manual".
func EvictionRunSummary(trigger string, in EvictionInput) string {
	s := "eviction run (" + EscapeMarkdown(trigger) + ")"
	if in.DryRun {
		s += " · dry run: plans only"
	}
	if len(in.Hosts) > 0 {
		hosts := make([]string, len(in.Hosts))
		for i, h := range in.Hosts {
			hosts[i] = EscapeMarkdown(h)
		}
		s += " · hosts " + strings.Join(hosts, ", ")
	}
	return s
}

// CleanupRunSummary returns a cleanup run's one-line static summary:
// "cleanup of user <u>[ · project <p>]", then "discard" and "dry run" when
// asked (docs/API.md "Cleanup"; docs/OPERATIONS.md).
func CleanupRunSummary(in CleanupInput) string {
	s := "cleanup of user " + EscapeMarkdown(in.UserID)
	if in.ProjectID != "" {
		s += " · project " + EscapeMarkdown(in.ProjectID)
	}
	if in.Discard {
		s += " · discard: nothing is kept"
	}
	if in.DryRun {
		s += " · dry run: lists only"
	}
	return s
}
