package sandboxapi

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// Branch name prefixes (docs/DESIGN.md "The three things").
const (
	// AgentBranchPrefix starts every branch a workspace may check out.
	AgentBranchPrefix = "agent/"
	EditBranchPrefix  = "agent/edits-"
	TaskBranchPrefix  = "agent/task-"
)

// Validate checks every field of a request and returns the parsed repository
// identity. Required per mode: analysis needs nothing more (BaseRef empty means
// the default branch), edit needs ConversationID, task needs TaskID. Returns
// ErrInvalidArgument naming the first bad field; nothing is changed.
func (r WorkspaceRequest) Validate(policy URLPolicy) (RepoIdentity, error) {
	if !r.Mode.Valid() {
		return RepoIdentity{}, Errorf(ErrInvalidArgument, "mode %q: must be analysis, edit or task", clip(string(r.Mode)))
	}
	if err := ValidateID("user_id", r.UserID); err != nil {
		return RepoIdentity{}, err
	}
	if err := ValidateID("project_id", r.ProjectID); err != nil {
		return RepoIdentity{}, err
	}
	id, err := ParseRepoURL(r.RepoURL, policy)
	if err != nil {
		return RepoIdentity{}, err
	}
	if r.RepoName != "" && r.RepoName != id.FullName() {
		return RepoIdentity{}, Errorf(ErrInvalidArgument, "repo_name %q does not match the URL's %q", clip(r.RepoName), id.FullName())
	}
	if r.BaseRef != "" {
		if err := ValidateRef(r.BaseRef); err != nil {
			return RepoIdentity{}, err
		}
	}
	switch r.Mode {
	case ModeEdit:
		if err := ValidateID("conversation_id", r.ConversationID); err != nil {
			return RepoIdentity{}, err
		}
		if r.TaskID != "" {
			return RepoIdentity{}, Errorf(ErrInvalidArgument, "task_id is only for task workspaces")
		}
	case ModeTask:
		if err := ValidateID("task_id", r.TaskID); err != nil {
			return RepoIdentity{}, err
		}
	case ModeAnalysis:
		if r.ConversationID != "" || r.TaskID != "" || r.BranchName != "" || r.FromBranch != "" {
			return RepoIdentity{}, Errorf(ErrInvalidArgument, "analysis workspaces take no conversation_id, task_id, branch_name or from_branch")
		}
	}
	if err := ValidateNetwork("network", r.Network); err != nil {
		return RepoIdentity{}, err
	}
	if _, err := ParseNetworkAllow("network_allow", r.NetworkAllow); err != nil {
		return RepoIdentity{}, err
	}
	if r.BranchName != "" {
		if err := ValidateRef(r.BranchName); err != nil {
			return RepoIdentity{}, err
		}
		// An override stays in the agents' namespace: a workspace must never
		// check out (and later push) the default or another human branch.
		if !strings.HasPrefix(r.BranchName, AgentBranchPrefix) || r.BranchName == AgentBranchPrefix {
			return RepoIdentity{}, Errorf(ErrInvalidArgument, "branch_name %q: must start with %q", clip(r.BranchName), AgentBranchPrefix)
		}
	}
	if r.FromBranch != "" {
		if r.Mode != ModeTask {
			return RepoIdentity{}, Errorf(ErrInvalidArgument, "from_branch is only for task workspaces")
		}
		if err := ValidateRef(r.FromBranch); err != nil {
			return RepoIdentity{}, err
		}
	}
	return id, nil
}

// Key returns the workspace uniqueness key (docs/DESIGN.md "The three things":
// uniqueness): analysis (user, project, base_ref), edit (user, project,
// conversation_id), task (user, project, task_id). The parts are validated ids
// and refs, none containing '|', so the key is unambiguous.
func (r WorkspaceRequest) Key() string {
	switch r.Mode {
	case ModeEdit:
		return "edit|" + r.UserID + "|" + r.ProjectID + "|" + r.ConversationID
	case ModeTask:
		return "task|" + r.UserID + "|" + r.ProjectID + "|" + r.TaskID
	default:
		return "analysis|" + r.UserID + "|" + r.ProjectID + "|" + r.BaseRef
	}
}

// Branch returns the branch the workspace checks out: BranchName when given,
// else agent/edits-<conversation_id> (edit), agent/task-<task_id> (task), or ""
// for analysis (detached HEAD).
func (r WorkspaceRequest) Branch() string {
	if r.BranchName != "" {
		return r.BranchName
	}
	switch r.Mode {
	case ModeEdit:
		return EditBranchPrefix + r.ConversationID
	case ModeTask:
		return TaskBranchPrefix + r.TaskID
	}
	return ""
}

// Scope returns the middle part of the worktree directory name: the
// conversation id (edit), task id (task) or project id (analysis).
func (r WorkspaceRequest) Scope() string {
	switch r.Mode {
	case ModeEdit:
		return r.ConversationID
	case ModeTask:
		return r.TaskID
	}
	return r.ProjectID
}

func keyHash(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// WorkspaceIDForKey returns the stable workspace id for a uniqueness key:
// "ws-" followed by the first 24 hex digits of sha256(key).
func WorkspaceIDForKey(key string) string { return "ws-" + keyHash(key)[:24] }

// WorkflowIDPrefix prefixes every SessionWorkflow id.
const WorkflowIDPrefix = "sandbox-session/"

// SessionWorkflowID returns the SessionWorkflow id of a workspace id:
// "sandbox-session/<the 24 hex digits of the workspace id>". Returns
// ErrInvalidArgument when wsID is not of the form WorkspaceIDForKey makes.
func SessionWorkflowID(wsID string) (string, error) {
	if err := ValidateWorkspaceID(wsID); err != nil {
		return "", err
	}
	return WorkflowIDPrefix + strings.TrimPrefix(wsID, "ws-"), nil
}

// ValidateWorkspaceID checks the "ws-" + 24 lowercase hex form. Returns ErrInvalidArgument.
func ValidateWorkspaceID(wsID string) error {
	h, ok := strings.CutPrefix(wsID, "ws-")
	if !ok || len(h) != 24 || strings.Trim(h, "0123456789abcdef") != "" {
		return Errorf(ErrInvalidArgument, "workspace id %q: want ws- followed by 24 lowercase hex digits", clip(wsID))
	}
	return nil
}

// RuntimeIDFor returns the runtime id attached to a workspace: "rt-<24 hex>".
func RuntimeIDFor(wsID string) string { return "rt-" + strings.TrimPrefix(wsID, "ws-") }

// WorktreeDirName returns the worktree directory name of docs/DESIGN.md:
// "<user>_<scope>_<branch>-<hash8>", where branch has '/' replaced by '-' (or is
// the base ref, or "default", for analysis) and hash8 is the first 8 hex digits
// of sha256(key). Each part is cut to 40 bytes; the hash keeps names unique.
func (r WorkspaceRequest) WorktreeDirName() string {
	branch := r.Branch()
	if branch == "" {
		branch = r.BaseRef
		if branch == "" {
			branch = "default"
		}
	}
	part := func(s string) string {
		s = strings.Map(func(c rune) rune {
			switch {
			case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_', c == '.':
				return c
			}
			return '-'
		}, s)
		s = strings.TrimLeft(s, ".-")
		if len(s) > 40 {
			s = s[:40]
		}
		return s
	}
	return part(r.UserID) + "_" + part(r.Scope()) + "_" + part(branch) + "-" + keyHash(r.Key())[:8]
}
