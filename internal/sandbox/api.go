package sandbox

import "github.com/sandboxcore/sandboxcore/sandboxapi"

// Aliases of the public contract's names (package sandboxapi, docs/API.md):
// internal code keeps writing sandbox.X for the wire types, error kinds and
// validation rules that clients share.

type (
	BranchMerge      = sandboxapi.BranchMerge
	Capabilities     = sandboxapi.Capabilities
	CommitRequest    = sandboxapi.CommitRequest
	CommitResult     = sandboxapi.CommitResult
	Diff             = sandboxapi.Diff
	ExecChunk        = sandboxapi.ExecChunk
	ExecRequest      = sandboxapi.ExecRequest
	ExecResult       = sandboxapi.ExecResult
	FileEntry        = sandboxapi.FileEntry
	FileStatus       = sandboxapi.FileStatus
	Kind             = sandboxapi.Kind
	MergeRequest     = sandboxapi.MergeRequest
	MergeResult      = sandboxapi.MergeResult
	Network          = sandboxapi.Network
	PreviewURL       = sandboxapi.PreviewURL
	PullRequest      = sandboxapi.PullRequest
	PushRequest      = sandboxapi.PushRequest
	PushResult       = sandboxapi.PushResult
	RepoIdentity     = sandboxapi.RepoIdentity
	RuntimeReplica   = sandboxapi.RuntimeReplica
	SearchMatch      = sandboxapi.SearchMatch
	SearchRequest    = sandboxapi.SearchRequest
	SearchResult     = sandboxapi.SearchResult
	URLPolicy        = sandboxapi.URLPolicy
	Workspace        = sandboxapi.Workspace
	WorkspaceMode    = sandboxapi.WorkspaceMode
	WorkspaceRequest = sandboxapi.WorkspaceRequest
	WorkspaceState   = sandboxapi.WorkspaceState
	WorkspaceStatus  = sandboxapi.WorkspaceStatus
)

const (
	AgentBranchPrefix        = sandboxapi.AgentBranchPrefix
	DefaultExecTimeout       = sandboxapi.DefaultExecTimeout
	DefaultMaxOutputBytes    = sandboxapi.DefaultMaxOutputBytes
	DefaultSearchResults     = sandboxapi.DefaultSearchResults
	EditBranchPrefix         = sandboxapi.EditBranchPrefix
	FileHost                 = sandboxapi.FileHost
	MaxConflictFiles         = sandboxapi.MaxConflictFiles
	MaxDiffBytes             = sandboxapi.MaxDiffBytes
	MaxExecTimeout           = sandboxapi.MaxExecTimeout
	MaxFileBytes             = sandboxapi.MaxFileBytes
	MaxIDLength              = sandboxapi.MaxIDLength
	MaxMergeBranches         = sandboxapi.MaxMergeBranches
	MaxMergeMessageBytes     = sandboxapi.MaxMergeMessageBytes
	MaxOutputBytesLimit      = sandboxapi.MaxOutputBytesLimit
	MaxPRBodyRunes           = sandboxapi.MaxPRBodyRunes
	MaxPRLabelRunes          = sandboxapi.MaxPRLabelRunes
	MaxPRLabels              = sandboxapi.MaxPRLabels
	MaxPRReviewers           = sandboxapi.MaxPRReviewers
	MaxPRTitleRunes          = sandboxapi.MaxPRTitleRunes
	MaxPathLength            = sandboxapi.MaxPathLength
	MaxRefLength             = sandboxapi.MaxRefLength
	MaxSearchLineBytes       = sandboxapi.MaxSearchLineBytes
	MaxSearchPatternBytes    = sandboxapi.MaxSearchPatternBytes
	MaxSearchResults         = sandboxapi.MaxSearchResults
	MaxStdinBytes            = sandboxapi.MaxStdinBytes
	MaxURLLength             = sandboxapi.MaxURLLength
	MergeClean               = sandboxapi.MergeClean
	MergeConflict            = sandboxapi.MergeConflict
	MergeFailed              = sandboxapi.MergeFailed
	MergeMerged              = sandboxapi.MergeMerged
	MergeMissing             = sandboxapi.MergeMissing
	MergeOrderGiven          = sandboxapi.MergeOrderGiven
	MergeOrderLeastConflicts = sandboxapi.MergeOrderLeastConflicts
	ModeAnalysis             = sandboxapi.ModeAnalysis
	ModeEdit                 = sandboxapi.ModeEdit
	ModeTask                 = sandboxapi.ModeTask
	NetworkDefault           = sandboxapi.NetworkDefault
	NetworkLimited           = sandboxapi.NetworkLimited
	NetworkNone              = sandboxapi.NetworkNone
	PushCreated              = sandboxapi.PushCreated
	PushFastForward          = sandboxapi.PushFastForward
	PushForced               = sandboxapi.PushForced
	PushUpToDate             = sandboxapi.PushUpToDate
	TaskBranchPrefix         = sandboxapi.TaskBranchPrefix
	WorkflowIDPrefix         = sandboxapi.WorkflowIDPrefix
	WorkspaceCreating        = sandboxapi.WorkspaceCreating
	WorkspaceEvicted         = sandboxapi.WorkspaceEvicted
	WorkspaceReady           = sandboxapi.WorkspaceReady
	WorkspaceRemoved         = sandboxapi.WorkspaceRemoved
	WorktreesSegment         = sandboxapi.WorktreesSegment
)

var (
	ErrSessionReleased      = sandboxapi.ErrSessionReleased
	FieldError              = sandboxapi.FieldError
	ErrCommandRejected      = sandboxapi.ErrCommandRejected
	ErrConflict             = sandboxapi.ErrConflict
	ErrFileNotFound         = sandboxapi.ErrFileNotFound
	ErrInsufficientDisk     = sandboxapi.ErrInsufficientDisk
	ErrInvalidArgument      = sandboxapi.ErrInvalidArgument
	ErrInvalidWorkspacePath = sandboxapi.ErrInvalidWorkspacePath
	ErrNotFound             = sandboxapi.ErrNotFound
	ErrRateLimited          = sandboxapi.ErrRateLimited
	ErrRefNotFound          = sandboxapi.ErrRefNotFound
	ErrRepoAuthFailed       = sandboxapi.ErrRepoAuthFailed
	ErrRepoCacheUnavailable = sandboxapi.ErrRepoCacheUnavailable
	ErrRepoLocked           = sandboxapi.ErrRepoLocked
	ErrRepoNotFound         = sandboxapi.ErrRepoNotFound
	ErrResourceLimit        = sandboxapi.ErrResourceLimit
	ErrRuntimeUnavailable   = sandboxapi.ErrRuntimeUnavailable
	ErrSandbox              = sandboxapi.ErrSandbox
	ErrTimeout              = sandboxapi.ErrTimeout
	ErrUnauthorized         = sandboxapi.ErrUnauthorized
	ErrWorkspace            = sandboxapi.ErrWorkspace
	ErrWorkspaceDirty       = sandboxapi.ErrWorkspaceDirty
	ErrWorkspaceLocked      = sandboxapi.ErrWorkspaceLocked
	ErrWorkspaceNotFound    = sandboxapi.ErrWorkspaceNotFound
	ErrWorkspaceUnavailable = sandboxapi.ErrWorkspaceUnavailable
	CapabilitiesFromMode    = sandboxapi.CapabilitiesFromMode
	CleanRelPath            = sandboxapi.CleanRelPath
	Clip                    = sandboxapi.Clip
	Errorf                  = sandboxapi.Errorf
	IsGitMetadataPath       = sandboxapi.IsGitMetadataPath
	KindByType              = sandboxapi.KindByType
	KindOf                  = sandboxapi.KindOf
	Kinds                   = sandboxapi.Kinds
	Message                 = sandboxapi.Message
	NetworkModes            = sandboxapi.NetworkModes
	ParseRepoURL            = sandboxapi.ParseRepoURL
	RuntimeIDFor            = sandboxapi.RuntimeIDFor
	SessionWorkflowID       = sandboxapi.SessionWorkflowID
	StreamWorkflowID        = sandboxapi.StreamWorkflowID
	TenantSegment           = sandboxapi.TenantSegment
	ValidateID              = sandboxapi.ValidateID
	ValidateRef             = sandboxapi.ValidateRef
	ValidateSearchPattern   = sandboxapi.ValidateSearchPattern
	ValidateWorkspaceID     = sandboxapi.ValidateWorkspaceID
	WorkspaceIDForKey       = sandboxapi.WorkspaceIDForKey
	Wrap                    = sandboxapi.Wrap
)
