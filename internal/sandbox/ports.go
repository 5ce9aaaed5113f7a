package sandbox

import (
	"context"
	"time"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// AuthScope names whose credentials a git call needs: resolved inside
// activities only, never carried in workflow payloads (DESIGN.md "Payload discipline").
type AuthScope struct {
	UserID string
	Repo   sandboxapi.RepoIdentity
}

// Credential is a secret for one git remote, sent per call as an HTTP basic
// Authorization header (never in argv, a URL or a config file). Username is
// "x-access-token" for GitHub tokens.
type Credential struct {
	Username string
	Secret   string
}

// String never prints the secret.
func (c *Credential) String() string {
	if c == nil {
		return "<no credential>"
	}
	return c.Username + ":<redacted>"
}

// GoString never prints the secret.
func (c *Credential) GoString() string { return c.String() }

// CredentialProvider resolves the credential for an auth scope. It returns
// (nil, nil) when it has none (public repositories work without).
type CredentialProvider interface {
	Credential(ctx context.Context, scope AuthScope) (*Credential, error)
}

// RepoLocker takes the per-repository lock (a flock under the data root) that
// serializes clone, fetch and worktree creation across processes
// (docs/DESIGN.md "Rules"). unlock is idempotent.
type RepoLocker interface {
	LockRepo(ctx context.Context, repo sandboxapi.RepoIdentity) (unlock func(), err error)
}

// RepoCacheProvider owns the durable bare mirrors (docs/DESIGN.md "Ports").
type RepoCacheProvider interface {
	RepoLocker
	// Ensure returns a ready cache for repo: cloned once (staged, then renamed
	// into place), or fetched when its last fetch is older than the freshness
	// window (or always when forceFetch). cred may be nil. Errors wrap
	// ErrRepoAuthFailed, ErrRepoCacheUnavailable, ErrInsufficientDisk, ErrRepoLocked.
	Ensure(ctx context.Context, repo sandboxapi.RepoIdentity, cred *Credential, forceFetch bool) (RepoCache, error)
	// Remove deletes a cache's files. A missing cache is success.
	Remove(ctx context.Context, repo sandboxapi.RepoIdentity) error
}

// WorkspaceProvider owns the durable worktrees (docs/DESIGN.md "The three things").
// Every path argument is workspace-relative and confined with os.Root; escapes
// return ErrInvalidWorkspacePath. Mutating calls on a workspace whose
// Capabilities.Writable is false return ErrCommandRejected.
type WorkspaceProvider interface {
	// Ensure creates the worktree for req on cache, or returns the existing one
	// (same key → same path and branch), repairing a registration whose directory
	// vanished. stored is the workspace's recorded row when it has one (nil
	// for a new workspace): its branch and worktree directory are kept as
	// recorded, never derived again from req (docs/API.md "Identity": the
	// derivation changed, existing workspaces keep their names). The base
	// commit is resolved from req.BaseRef (or the cache's default branch) and
	// recorded. Errors: ErrRefNotFound, ErrRepoLocked, ErrInsufficientDisk,
	// ErrConflict (branch checked out elsewhere), ErrInvalidArgument (a new
	// branch that is the repository's default branch).
	Ensure(ctx context.Context, cache RepoCache, req sandboxapi.WorkspaceRequest, stored *sandboxapi.Workspace) (sandboxapi.Workspace, error)
	// Exists reports whether the worktree directory is present and registered.
	Exists(ctx context.Context, ws sandboxapi.Workspace) (bool, error)
	Status(ctx context.Context, ws sandboxapi.Workspace) (sandboxapi.WorkspaceStatus, error)
	Diff(ctx context.Context, ws sandboxapi.Workspace) (sandboxapi.Diff, error)
	Commit(ctx context.Context, ws sandboxapi.Workspace, req sandboxapi.CommitRequest) (sandboxapi.CommitResult, error)
	// Remove deletes the worktree and its registration, keeping the branch. Missing = success.
	Remove(ctx context.Context, ws sandboxapi.Workspace) error
	// ReadFile returns at most MaxFileBytes; a larger file is ErrResourceLimit.
	ReadFile(ctx context.Context, ws sandboxapi.Workspace, path string) ([]byte, error)
	// WriteFile creates or replaces a file (parents created), mode 0 = 0644.
	WriteFile(ctx context.Context, ws sandboxapi.Workspace, path string, data []byte, mode uint32) error
	// EditFile applies one edit_file command to a text file in one step
	// (str_replace, insert, create; sandboxapi.EditFileInput); a retry with
	// the same editID is not applied twice.
	EditFile(ctx context.Context, ws sandboxapi.Workspace, in sandboxapi.EditFileInput, editID string) (sandboxapi.EditFileResult, error)
	ListDir(ctx context.Context, ws sandboxapi.Workspace, path string) ([]sandboxapi.FileEntry, error)
	// ListTree is list_dir with a depth and the hidden/ignored filters.
	ListTree(ctx context.Context, ws sandboxapi.Workspace, in sandboxapi.ListDirInput) (sandboxapi.ListDirResult, error)
	// Log lists the newest commits reachable from HEAD.
	Log(ctx context.Context, ws sandboxapi.Workspace, req sandboxapi.LogRequest) (sandboxapi.LogResult, error)
	Search(ctx context.Context, ws sandboxapi.Workspace, req sandboxapi.SearchRequest) (sandboxapi.SearchResult, error)
	// SizeBytes returns the bytes used by the worktree's files.
	SizeBytes(ctx context.Context, ws sandboxapi.Workspace) (int64, error)
}

// Runtime is one compute attachment (docs/DESIGN.md "Ports" protocol).
type Runtime interface {
	ID() string
	State(ctx context.Context) (RuntimeState, error)
	Start(ctx context.Context) error
	// Stop hibernates: the runtime's compute stops, the workspace stays.
	Stop(ctx context.Context) error
	// Exec runs one command; a non-zero exit or timeout is a result. Errors wrap
	// ErrRuntimeUnavailable or ErrInvalidArgument.
	Exec(ctx context.Context, req sandboxapi.ExecRequest) (sandboxapi.ExecResult, error)
	// ExecStream is Exec that also hands output to onChunk as it arrives
	// (calls are serialized). The returned result is the same as Exec's.
	ExecStream(ctx context.Context, req sandboxapi.ExecRequest, onChunk func(sandboxapi.ExecChunk)) (sandboxapi.ExecResult, error)
}

// RuntimeSummary is one runtime as listed by a provider.
type RuntimeSummary struct {
	ID     string            `json:"id"`
	State  RuntimeState      `json:"state"`
	Labels map[string]string `json:"labels,omitempty"`
}

// RuntimeProvider creates and finds runtimes of one backend (docs/DESIGN.md
// "Ports"). Its optional capabilities are interfaces its consumers declare
// and assert on it (activities.PortPreviewer, activities.ReplicaReporter,
// activities.OrphanCollector; ProcessRuntime on a Runtime), each reported
// truthfully by Capabilities where a consumer reads a flag (runtimetest
// checks that the two agree).
type RuntimeProvider interface {
	// Kind is "local", "bwrap", "docker", "daytona" or "e2b".
	Kind() string
	Capabilities() RuntimeCapabilities
	// Create returns the runtime with spec.ID, creating it when missing (idempotent).
	Create(ctx context.Context, spec RuntimeSpec) (Runtime, error)
	// Get returns an existing runtime or ErrNotFound.
	Get(ctx context.Context, id string) (Runtime, error)
	List(ctx context.Context, labels map[string]string) ([]RuntimeSummary, error)
	// Destroy removes the runtime; a missing one is success. Never touches the workspace.
	Destroy(ctx context.Context, id string) error
}

// WorkspaceFilter selects workspaces; zero fields match everything.
type WorkspaceFilter struct {
	UserID      string
	ProjectID   string
	RepoCacheID string
	HostID      string
	Mode        sandboxapi.WorkspaceMode
	State       sandboxapi.WorkspaceState
	// LastUsedBefore keeps workspaces last used strictly before it.
	LastUsedBefore time.Time
	Limit          int
}

// Store persists repo caches, workspaces and runtimes (docs/DESIGN.md "Storage model").
// Misses return ErrWorkspaceNotFound (workspaces) or ErrNotFound (caches,
// runtimes); uniqueness violations return ErrConflict.
type Store interface {
	UpsertRepoCache(ctx context.Context, c RepoCache) error
	GetRepoCache(ctx context.Context, id string) (RepoCache, error)
	ListRepoCaches(ctx context.Context) ([]RepoCache, error)
	DeleteRepoCache(ctx context.Context, id string) error

	// CreateWorkspace inserts; ErrConflict when the id or the mode's uniqueness key exists.
	CreateWorkspace(ctx context.Context, ws sandboxapi.Workspace) error
	// UpdateWorkspace replaces every column of an existing row.
	UpdateWorkspace(ctx context.Context, ws sandboxapi.Workspace) error
	GetWorkspace(ctx context.Context, id string) (sandboxapi.Workspace, error)
	ListWorkspaces(ctx context.Context, f WorkspaceFilter) ([]sandboxapi.Workspace, error)
	// TouchWorkspace sets last_used_at (and updated_at).
	TouchWorkspace(ctx context.Context, id string, at time.Time) error
	DeleteWorkspace(ctx context.Context, id string) error

	UpsertRuntime(ctx context.Context, r RuntimeRecord) error
	GetRuntime(ctx context.Context, id string) (RuntimeRecord, error)
	ListRuntimes(ctx context.Context, workspaceID string) ([]RuntimeRecord, error)
	DeleteRuntime(ctx context.Context, id string) error

	Close() error
}

// RemoteGit is the network side of git on a worker host: access checks,
// remote branch tips and pushes. The repository URL is always passed
// to git explicitly, never through a configured remote an agent could have
// rewritten, and cred (nil = anonymous) goes per call through the
// environment (gitx): never argv, a URL, a config file, a log line or an
// error. No call ever prompts. Implemented by gitx.Remote.
type RemoteGit interface {
	// CheckAccess verifies that cred can read repo (git ls-remote). Errors:
	// ErrRepoAuthFailed (refused or missing credentials), ErrRepoCacheUnavailable
	// (unreachable or missing repository), ErrTimeout.
	CheckAccess(ctx context.Context, repo sandboxapi.RepoIdentity, cred *Credential) error
	// BranchTip returns the commit of refs/heads/<branch> on the remote, ""
	// when the branch does not exist there. Errors as CheckAccess.
	BranchTip(ctx context.Context, repo sandboxapi.RepoIdentity, cred *Credential, branch string) (string, error)
	// LocalRef returns the commit a ref of the repository gitDir points at,
	// "" when the ref does not exist.
	LocalRef(ctx context.Context, gitDir, ref string) (string, error)
	// Push pushes one branch (PushSpec). Errors: ErrRepoAuthFailed, ErrConflict
	// (non-fast-forward without a lease, or a stale lease), ErrCommandRejected
	// (the remote declined the update, or the repository's config could
	// redirect the push), ErrRefNotFound (no local branch),
	// ErrRepoCacheUnavailable, ErrTimeout.
	Push(ctx context.Context, spec PushSpec, cred *Credential) (sandboxapi.PushResult, error)
}

// AccessVerifier decides whether the user of scope may be served a
// repository's cached content (a token that cannot read a
// repository already in the cache gets ErrRepoAuthFailed). Implemented by
// credentials.Access (git ls-remote with the user's credential, successes
// remembered briefly per user, repository and credential).
type AccessVerifier interface {
	VerifyAccess(ctx context.Context, scope AuthScope, cred *Credential) error
}

// CodeHost is the platform side of a repository: pull requests
// (docs/DESIGN.md "Ports"). cred is the calling user's
// credential (its Secret is the API token), resolved inside the activity.
// Implemented by codehost.GitHub (go-github).
type CodeHost interface {
	// Serves reports whether repo's host is one this code host serves.
	Serves(repo sandboxapi.RepoIdentity) bool
	// DefaultBranch returns the repository's default branch.
	DefaultBranch(ctx context.Context, repo sandboxapi.RepoIdentity, cred *Credential) (string, error)
	// CreatePullRequest opens a pull request from req.Head into req.Base (both
	// required here), then requests the reviewers and adds the labels (their
	// failures become PullRequest.Warnings). Errors: ErrCommandRejected (host
	// not served), ErrRepoAuthFailed (401, or 403 without a rate limit),
	// ErrNotFound (404), ErrConflict (422: a pull request for the head exists),
	// ErrInvalidArgument (other 422), ErrRateLimited (retryable; RetryAfter
	// holds the time left until the reset), ErrRuntimeUnavailable (network, 5xx).
	CreatePullRequest(ctx context.Context, repo sandboxapi.RepoIdentity, cred *Credential, req PullRequestRequest) (sandboxapi.PullRequest, error)
}
