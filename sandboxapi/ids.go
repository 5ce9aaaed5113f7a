package sandboxapi

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// Branch name prefixes (docs/DESIGN.md "The three things", docs/API.md "Identity").
const (
	// AgentBranchPrefix starts every branch a workspace may check out.
	AgentBranchPrefix = "agent/"
	// EditBranchPrefix starts the branch of an edit workspace created before
	// tenant segments (agent/edits-<conversation_id>): such a workspace keeps
	// the branch its row records; a new one gets EditBranch.
	EditBranchPrefix = "agent/edits-"
	// TaskBranchPrefix starts the branch of a task workspace created before
	// tenant segments (agent/task-<task_id>); a new one gets TaskBranch.
	TaskBranchPrefix = "agent/task-"
	// TenantSegmentLen is the length of TenantSegment: lowercase hex digits.
	TenantSegmentLen = 16
)

// TenantSegment returns the tenant's segment of every name derived from its
// ids (docs/API.md "Identity"): the first TenantSegmentLen lowercase hex
// digits of sha256(user_id + "|" + project_id). Ids never contain '|', so
// two tenants (user and project) share a segment only by a 64-bit hash
// collision.
func TenantSegment(userID, projectID string) string {
	sum := sha256.Sum256([]byte(userID + "|" + projectID))
	return hex.EncodeToString(sum[:])[:TenantSegmentLen]
}

// Tenant is a caller's user and project: every name derived from a
// caller's ids is unique per tenant (docs/API.md "Identity"). It is no wire
// type: clients name the caller's tenant with it where a name holds no
// workspace key (FanoutWorkflowID).
type Tenant struct {
	// UserID is the backend's user id (ValidateID).
	UserID string
	// ProjectID is the user's project id (ValidateID).
	ProjectID string
}

// Validate checks both ids (ValidateID). Errors: ErrInvalidArgument naming
// user_id or project_id.
func (t Tenant) Validate() error {
	if err := ValidateID("user_id", t.UserID); err != nil {
		return err
	}
	return ValidateID("project_id", t.ProjectID)
}

// Segment returns the tenant's segment: TenantSegment(t.UserID, t.ProjectID).
func (t Tenant) Segment() string { return TenantSegment(t.UserID, t.ProjectID) }

// EditBranch returns the branch of a new edit workspace:
// "agent/<TenantSegment>/edits-<conversation_id>".
func EditBranch(userID, projectID, conversationID string) string {
	return AgentBranchPrefix + TenantSegment(userID, projectID) + "/edits-" + conversationID
}

// TaskBranch returns the branch of a new task workspace:
// "agent/<TenantSegment>/task-<task_id>".
func TaskBranch(userID, projectID, taskID string) string {
	return AgentBranchPrefix + TenantSegment(userID, projectID) + "/task-" + taskID
}

// isTenantSegment reports whether s has the form of a TenantSegment.
func isTenantSegment(s string) bool {
	return len(s) == TenantSegmentLen && strings.Trim(s, "0123456789abcdef") == ""
}

// checkBranchNamespace refuses a branch_name inside a tenant namespace that
// is not the caller's (agent/<16 hex>/…), or naming a tenant namespace
// itself (agent/<16 hex>: git could then hold no branch below it). Those
// names are derived for other tenants' workspaces (EditBranch, TaskBranch):
// a caller-named branch must never take, or block, one of them.
func (r WorkspaceRequest) checkBranchNamespace() error {
	rest := strings.TrimPrefix(r.BranchName, AgentBranchPrefix)
	seg, below, nested := strings.Cut(rest, "/")
	if !isTenantSegment(seg) {
		return nil
	}
	if !nested || below == "" {
		return FieldError("branch_name", "branch_name %q: agent/<%d hex digits> is a tenant's namespace, not a branch", clip(r.BranchName), TenantSegmentLen)
	}
	if seg != TenantSegment(r.UserID, r.ProjectID) {
		return FieldError("branch_name", "branch_name %q: agent/%s/ is another tenant's namespace; use a name under agent/%s/ or outside agent/<%d hex digits>/",
			clip(r.BranchName), seg, TenantSegment(r.UserID, r.ProjectID), TenantSegmentLen)
	}
	return nil
}

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
	if err := ValidateSetupMode(r.Setup); err != nil {
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
		if err := r.checkBranchNamespace(); err != nil {
			return RepoIdentity{}, err
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

// Branch returns the branch a new workspace of the request checks out:
// BranchName when given, else EditBranch (edit:
// agent/<tenant>/edits-<conversation_id>), TaskBranch (task:
// agent/<tenant>/task-<task_id>), or "" for analysis (detached HEAD). An
// existing workspace keeps the branch its row records (workspaces created
// before tenant segments are on agent/edits-<conversation_id> and
// agent/task-<task_id>): never recompute it for one.
func (r WorkspaceRequest) Branch() string {
	if r.BranchName != "" {
		return r.BranchName
	}
	switch r.Mode {
	case ModeEdit:
		return EditBranch(r.UserID, r.ProjectID, r.ConversationID)
	case ModeTask:
		return TaskBranch(r.UserID, r.ProjectID, r.TaskID)
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

// WorktreeDirName returns the worktree directory name of a new workspace
// (docs/DESIGN.md, docs/API.md "Identity"): "<user>_<scope>_<branch>-<hash24>",
// where branch is Branch() with every byte outside [A-Za-z0-9._-] replaced by
// '-' (or is the base ref, or "default", for analysis), leading '.' and '-'
// trimmed, and hash24 is the first 24 hex digits of sha256(key) (the
// workspace id's). Each part is cut to 40 bytes; the hash keeps names unique
// per key, hence per tenant. An existing workspace keeps the path its row
// records (those created before were "…-<hash8>"): never recompute it for one.
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
	return part(r.UserID) + "_" + part(r.Scope()) + "_" + part(branch) + "-" + keyHash(r.Key())[:24]
}
