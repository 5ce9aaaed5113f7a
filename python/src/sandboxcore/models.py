"""Pydantic models of the sandboxcore wire contract 1.0.0 (urn:sandboxcore:contract:v1).

GENERATED from docs/schema/sandboxcore.schema.json by
``python scripts/generate_models.py``
(run in python/, with datamodel-code-generator 0.89.0 and ruff).
DO NOT EDIT BY HAND: change the Go types in sandboxapi, run ``make schema``, then the command
above. With ``--check`` it (and tests/test_models.py) fails when this file is stale.

One model per ``$defs`` entry, named as the definition (docs/API.md "Schema";
docs/schema/index.json names each update's argument and result). Enums are ``Literal`` strings;
unknown fields are ignored (docs/API.md "Versioning"); byte fields are ``bytes`` (base64 on the
wire) and durations ``datetime.timedelta`` (integer nanoseconds on the wire), both typed in
:mod:`sandboxcore._wire`; date-times are timezone-aware ``datetime`` (Go sends RFC 3339 with
nanoseconds, kept to microseconds, and 0001-01-01T00:00:00Z for an unset time).
Validate results with ``Model.model_validate(value)``; send arguments as
``model.model_dump(mode="json", exclude_none=True)``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict

from sandboxcore._wire import Base64Bytes, Nanoseconds


class AcquireInput(BaseModel):
    """
    AcquireInput is the acquire update's argument. Request may be nil to attach
    to the session's existing workspace; when set, it must have the session's key.
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    request: WorkspaceRequest | None = None


class BranchMerge(BaseModel):
    """
    BranchMerge is the outcome of one branch of a MergeRequest.
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    branch: str
    workspace_id: str | None = None
    """
    WorkspaceID is the workspace whose branch this is, when the source
    was given as a workspace (MergeRequest.Workspaces).
    """
    tip: str | None = None
    """
    Tip is the branch's commit that was merged or tried ("" when missing).
    """
    status: Literal["clean", "conflict", "failed", "merged", "missing"]
    """
    Status is MergeMerged, MergeConflict, MergeMissing or MergeFailed;
    in a dry run MergeClean instead of MergeMerged for a branch that
    would add a merge commit (MergeMerged: already contained in HEAD).
    """
    conflict_files: list[str] | None = None
    """
    ConflictFiles are the workspace-relative paths git could not merge
    (MergeConflict only), sorted, at most MaxConflictFiles.
    """
    conflict_truncated: bool | None = None
    message: str | None = None
    """
    Message is git's first error line (MergeFailed only).
    """


class CancelInput(BaseModel):
    """
    CancelInput is cancel's argument: the update id of an exec to cancel.
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    update_id: str


class CancelResult(BaseModel):
    """
    CancelResult is cancel's result: the state the exec was in.
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    update_id: str
    cancelled: bool
    """
    Cancelled: the exec returned cancelled (state running or queued).
    """
    state: Literal["finished", "queued", "running", "unknown"]


class Capabilities(BaseModel):
    """
    Capabilities are derived from the mode once (CapabilitiesFromMode) and
    stored on the workspace; every mutating operation checks Writable.
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    writable: bool
    """
    Writable: files may be changed and commits made.
    """
    isolated: bool
    """
    Isolated: commands run in an isolated runtime (set by the runtime, not the mode).
    """
    persistent: bool
    """
    Persistent: the workspace survives runtime destruction (always true for local worktrees).
    """


class Checkpoint(BaseModel):
    """
    Checkpoint is one recorded state of a workspace.
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    id: int
    """
    ID is the checkpoint's number (1, 2, …, in the order taken); rollback
    names it.
    """
    label: str | None = None
    """
    Label is the label it was taken with ("" when none).
    """
    created_at: AwareDatetime
    """
    CreatedAt is when it was taken.
    """
    files_changed: int
    """
    FilesChanged counts the paths whose content or git mode differ from
    Head's tree (uncommitted changes, untracked files, deletions).
    """
    commit: str
    """
    Commit is the checkpoint commit (its tree is the recorded content);
    Ref the ref holding it (CheckpointRef).
    """
    ref: str
    head: str
    """
    Head is the commit HEAD was at; Branch the branch HEAD was on ("" when detached).
    """
    branch: str


class CheckpointInput(BaseModel):
    """
    CheckpointInput is the checkpoint update's argument.
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    label: str | None = None
    """
    Label is free text shown by checkpoints (at most
    MaxCheckpointLabelBytes bytes of UTF-8, one line, no control characters).
    """


class CheckpointList(BaseModel):
    """
    CheckpointList is the checkpoints update's result, oldest first.
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    checkpoints: list[Checkpoint] | None


class CleanupHost(BaseModel):
    """
    CleanupHost is one host a cleanup listed workspaces on.
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    host_id: str
    unreachable: bool | None = None
    """
    Unreachable: its worker did not pick up the listing within HostTimeout;
    its workspaces that have sessions are still destroyed through them.
    """
    error: str | None = None
    workspaces: int
    """
    Workspaces counts the rows of the user it listed.
    """


class CleanupInput(BaseModel):
    """
    CleanupInput is CleanupWorkflow's argument.
    """

    model_config = ConfigDict(
        extra="ignore",
        arbitrary_types_allowed=True,
    )
    user_id: str
    """
    UserID is required; ProjectID, when set, narrows the cleanup to one project.
    """
    project_id: str | None = None
    discard: bool | None = None
    """
    Discard destroys with discard (DestroyInput.Discard) and also purges
    what earlier destroys of the user's workspaces kept.
    """
    dry_run: bool | None = None
    """
    DryRun lists what would be destroyed and destroys nothing.
    """
    max_parallel: int | None = None
    """
    MaxParallel bounds the destroys in flight; 0 = DefaultCleanupParallel.
    """
    host_timeout: Nanoseconds | None = None
    """
    HostTimeout (nanoseconds) bounds how long each host may take to pick up
    the listing of its workspaces; 0 = DefaultCleanupHostTimeout.
    """


class CleanupOutcome(BaseModel):
    """
    CleanupOutcome is what a cleanup did to one workspace.
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    workspace_id: str
    host_id: str | None = None
    mode: str | None = None
    project_id: str | None = None
    state: str | None = None
    """
    State is the session state (or the store row's state) when it was found.
    """
    outcome: Literal["destroyed", "failed", "gone", "would_destroy"]
    """
    Outcome is one of CleanupOutcomes.
    """
    result: DestroyResult | None = None
    """
    Result is the destroy's result (nil for a dry run or a failure).
    """
    message: str | None = None
    """
    Message: the failure, or what was done.
    """


class CleanupReport(BaseModel):
    """
    CleanupReport is CleanupWorkflow's result (and its progress query's answer).
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    workflow_id: str
    user_id: str
    project_id: str | None = None
    dry_run: bool
    discard: bool
    done: bool
    started_at: AwareDatetime
    finished_at: AwareDatetime
    hosts: list[CleanupHost] | None
    workspaces: list[CleanupOutcome] | None
    summary: CleanupSummary


class CleanupSummary(BaseModel):
    """
    CleanupSummary counts a cleanup's outcomes.
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    found: int
    destroyed: int
    gone: int
    failed: int
    backups: int
    """
    Backups counts the destroys that kept a restorable backup.
    """


class CommitRequest(BaseModel):
    """
    CommitRequest commits the workspace's changes. Empty Paths means every
    change including untracked files (git add -A).
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    message: str
    paths: list[str] | None = None
    author_name: str | None = None
    author_email: str | None = None
    allow_empty: bool | None = None


class CommitResult(BaseModel):
    """
    CommitResult is the outcome of a commit.
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    commit: str
    branch: str
    nothing_to_commit: bool


class CompleteTaskSignal(BaseModel):
    """
    CompleteTaskSignal is complete_task's payload. Only the first signal for a
    task that waits for one (no script) counts; others are ignored.
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    task_id: str
    succeeded: bool
    """
    Succeeded: the task's work is done and may be merged (its uncommitted
    changes are committed); false: the task failed and is not merged.
    """
    message: str | None = None
    """
    Message is kept in the task's result (clipped to 1 KiB).
    """


class DestroyInput(BaseModel):
    """
    DestroyInput is the destroy update's argument.
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    discard: bool | None = None
    """
    Discard drops the workspace's unsaved work, its checkpoints and any
    saved backup instead of keeping them restorable.
    """


class DestroyResult(BaseModel):
    """
    DestroyResult says what a destroy did.
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    workspace_id: str
    existed: bool
    """
    Existed is false when there was no such workspace (nothing was done).
    """
    discarded: bool
    """
    Discarded: the destroy dropped the unsaved work, checkpoints and backups.
    """
    backup_ref: str | None = None
    """
    BackupRef and PatchPath name the saved work (DestroyedRef and the
    binary patch on the workspace's host) when there was some to save;
    restore brings it back.
    """
    patch_path: str | None = None
    checkpoints_kept: int
    """
    CheckpointsKept counts the checkpoints kept (0 when discarded).
    """
    branch_deleted: str | None = None
    """
    BranchDeleted is the branch deleted from the repo cache ("" when none).
    """
    host_id: str | None = None
    """
    HostID is the host the workspace lived on.
    """
    message: str
    """
    Message says in words what happened.
    """


class Diff(BaseModel):
    """
    Diff is everything the agent changed against the recorded base commit:
    commits, staged, unstaged and untracked (not ignored) files, as a binary-safe patch.
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    base_commit: str
    patch: str
    files: list[str] | None
    truncated: bool
    total_bytes: int


class EditFileInput(BaseModel):
    """
    EditFileInput is edit_file's argument (docs/API.md "Updates"): one edit
    of one text file, applied by the worker in one step under the session's
    exclusive lock, so two agents' edits never lose each other (there is no
    client-side read-then-write). Path is workspace-relative.

      - str_replace: OldStr (not empty) must occur exactly once in the file;
        it is replaced with NewStr (which may be empty). Zero or several
        occurrences are ErrInvalidArgument saying how many.
      - insert: NewStr is inserted as whole lines after line InsertLine
        (1-based; 0 = before the first line; at most the file's line count).
      - create: FileText becomes the file's content; missing parents are made;
        an existing file is replaced (its permission bits kept).
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    path: str
    command: Literal["create", "insert", "str_replace"]
    old_str: str | None = None
    new_str: str | None = None
    insert_line: int | None = None
    file_text: str | None = None
    if_match: str | None = None
    """
    IfMatch, when set, is the ContentHash the file must still have (as
    WriteFileInput.IfMatch): ErrConflict, and nothing changes, otherwise.
    """


class EditFileResult(BaseModel):
    """
    EditFileResult says what edit_file wrote: the file's size afterwards in
    bytes and Snippet, a few numbered lines around the change ("%6d\\t<line>"
    per line, as a text editor's view prints them).
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    path: str
    bytes: int
    snippet: str
    content_hash: str
    """
    ContentHash is the file's ContentHash after the edit.
    """


class ErrorDetails(BaseModel):
    """
    ErrorDetails is the one detail value of every application error a
    sandboxcore update, query or workflow fails with (docs/API.md "Errors"):
    the error's family, its kind (a row of the table), the sub-kind when the
    type is one, and whether sending the same call again may succeed.
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    family: Literal["sandbox", "workspace"]
    """
    Family is "sandbox" or "workspace".
    """
    kind: Literal[
        "InsufficientDisk",
        "InvalidArgument",
        "InvalidWorkspacePath",
        "RefNotFound",
        "RepoAuthFailed",
        "RepoCacheUnavailable",
        "RepoLocked",
        "RepoNotFound",
        "SandboxCommandRejected",
        "SandboxConflict",
        "SandboxError",
        "SandboxNotFound",
        "SandboxRateLimited",
        "SandboxResourceLimit",
        "SandboxTimeout",
        "SandboxUnauthorized",
        "SandboxUnavailable",
        "WorkspaceDirty",
        "WorkspaceError",
        "WorkspaceLocked",
        "WorkspaceNotFound",
        "WorkspaceUnavailable",
    ]
    """
    Kind is the error's kind, e.g. "InvalidWorkspacePath".
    """
    sub_kind: Literal["FileNotFound", "SessionReleased"] | None = None
    """
    SubKind is set when the error type is a sub-kind, e.g. "FileNotFound"
    within "InvalidWorkspacePath", "SessionReleased" within "WorkspaceUnavailable".
    """
    retryable: bool
    """
    Retryable: the same call, sent again unchanged, may succeed.
    """
    field: str | None = None
    """
    Field is the JSON path of the offending field of an InvalidArgument
    raised while decoding a payload (e.g. "request.mode"), when known.
    """


class EvictRequest(BaseModel):
    """
    EvictRequest is the evict signal's payload.
    """

    model_config = ConfigDict(
        extra="ignore",
        arbitrary_types_allowed=True,
    )
    request_id: str
    """
    RequestID identifies the reply.
    """
    reply_to: str | None = None
    """
    ReplyTo is the workflow id to signal the EvictResult to ("" = none).
    """
    action: Literal[
        "delete_orphan_runtime",
        "destroy_runtime",
        "evict_workspace",
        "remove_dependency_cache",
        "remove_repo_cache",
        "stop_runtime",
    ]
    """
    Action is EvictionStopRuntime, EvictionDestroyRuntime or EvictionEvictWorkspace.
    """
    tier: (
        Literal[
            "clean-analysis-ttl",
            "clean-edit-ttl",
            "clean-task-ttl",
            "dependency-cache-lru",
            "dirty-edit-severe",
            "dirty-task-pressure",
            "repo-cache-lru",
            "runtime-idle",
            "runtime-orphan",
            "runtime-stopped",
        ]
        | None
    ) = None
    """
    Tier says why (EvictionTier), for the record.
    """
    allow_unsaved: bool | None = None
    """
    AllowUnsaved: the workspace may be evicted although it has unsaved work
    (which is then saved and verified first). Without it such a workspace
    is skipped.
    """
    min_idle: Nanoseconds | None = None
    """
    MinIdle is re-checked when the request runs: the workspace (or runtime)
    must have been unused at least this long, else it is skipped.
    """


class EvictResult(BaseModel):
    """
    EvictResult is the outcome of one action (the eviction_reply signal's
    payload, and an element of HostEvictionResult.Results).
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    request_id: str | None = None
    action: Literal[
        "delete_orphan_runtime",
        "destroy_runtime",
        "evict_workspace",
        "remove_dependency_cache",
        "remove_repo_cache",
        "stop_runtime",
    ]
    tier: (
        Literal[
            "clean-analysis-ttl",
            "clean-edit-ttl",
            "clean-task-ttl",
            "dependency-cache-lru",
            "dirty-edit-severe",
            "dirty-task-pressure",
            "repo-cache-lru",
            "runtime-idle",
            "runtime-orphan",
            "runtime-stopped",
        ]
        | None
    ) = None
    id: str
    workspace_id: str | None = None
    outcome: Literal["blocked", "done", "failed", "pending", "skipped"]
    reason: str | None = None
    freed_bytes: int | None = None
    """
    FreedBytes is what the action freed on disk.
    """
    backup_ref: str | None = None
    """
    BackupRef (EvictedRef) and PatchPath name the saved work of an
    evicted workspace that had any (WorkspaceBackup); empty for a
    clean one.
    """
    patch_path: str | None = None
    at: AwareDatetime


class EvictionAction(BaseModel):
    """
    EvictionAction is one step of a host's plan.
    """

    model_config = ConfigDict(
        extra="ignore",
        arbitrary_types_allowed=True,
    )
    kind: Literal[
        "delete_orphan_runtime",
        "destroy_runtime",
        "evict_workspace",
        "remove_dependency_cache",
        "remove_repo_cache",
        "stop_runtime",
    ]
    tier: Literal[
        "clean-analysis-ttl",
        "clean-edit-ttl",
        "clean-task-ttl",
        "dependency-cache-lru",
        "dirty-edit-severe",
        "dirty-task-pressure",
        "repo-cache-lru",
        "runtime-idle",
        "runtime-orphan",
        "runtime-stopped",
    ]
    id: str
    """
    ID is the runtime id, workspace id, repo cache id or dependency
    cache id ("<scope>/<key>").
    """
    workspace_id: str | None = None
    """
    WorkspaceID is the workspace whose session carries the action out;
    empty for repo and dependency caches.
    """
    mode: Literal["analysis", "edit", "task"] | None = None
    save_work: bool | None = None
    """
    SaveWork: the workspace has unsaved work, saved and verified first.
    """
    min_idle: Nanoseconds
    """
    MinIdle (nanoseconds) is re-checked when the action runs.
    """
    last_used_at: AwareDatetime
    """
    LastUsedAt is the target's last use as the plan saw it.
    """
    bytes: int
    """
    Bytes is what the action is expected to free.
    """
    projected_used_bytes: int
    """
    ProjectedUsedBytes is the usage expected after this and every earlier action.
    """


class EvictionHeld(BaseModel):
    """
    EvictionHeld is a workspace or repo cache the plan deliberately keeps
    although an age or pressure rule would have picked it.
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    id: str
    kind: Literal["repo_cache", "workspace"]
    """
    Kind is "workspace" or "repo_cache".
    """
    reason: str


class EvictionInput(BaseModel):
    """
    EvictionInput starts an EvictionCronWorkflow run. The schedule passes the
    zero value.
    """

    model_config = ConfigDict(
        extra="ignore",
        arbitrary_types_allowed=True,
    )
    dry_run: bool | None = None
    """
    DryRun: plan only; nothing is stopped, destroyed or evicted.
    """
    hosts: list[str] | None = None
    """
    Hosts limits the run to these host ids (empty: every live host).
    """
    reply_timeout: Nanoseconds | None = None
    """
    ReplyTimeout overrides DefaultEvictionReplyTimeout.
    """
    host_timeout: Nanoseconds | None = None
    """
    HostTimeout overrides DefaultEvictionHostTimeout.
    """
    actions: (
        list[
            Literal[
                "delete_orphan_runtime",
                "destroy_runtime",
                "evict_workspace",
                "remove_dependency_cache",
                "remove_repo_cache",
                "stop_runtime",
            ]
        ]
        | None
    ) = None
    """
    Actions limits the run to these action kinds (EvictionActionKinds;
    empty: all), e.g. [delete_orphan_runtime] for `sandboxctl runtimes
    gc`. An unknown kind fails every host's plan with InvalidArgument.
    """


class EvictionPlan(BaseModel):
    """
    EvictionPlan is one host's ordered plan.
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    host_id: str
    now: AwareDatetime
    usage: EvictionUsage
    pressure: Literal["high", "none", "severe"]
    """
    Pressure is "none", "high" or "severe".
    """
    high_bytes: int
    """
    HighBytes, LowBytes and SevereBytes are the water marks in bytes (0 without a budget).
    """
    low_bytes: int
    severe_bytes: int
    actions: list[EvictionAction] | None
    projected_used_bytes: int
    """
    ProjectedUsedBytes is the usage expected after every action.
    """
    held: list[EvictionHeld] | None = None


class EvictionPolicy(BaseModel):
    """
    EvictionPolicy holds the thresholds a host planned with. Durations are in
    nanoseconds on the wire; water marks are fractions of the budget in (0, 1].
    """

    model_config = ConfigDict(
        extra="ignore",
        arbitrary_types_allowed=True,
    )
    runtime_idle_stop: Nanoseconds
    runtime_stopped_destroy: Nanoseconds
    analysis_ttl: Nanoseconds
    task_ttl: Nanoseconds
    edit_ttl: Nanoseconds
    pressure_min_idle: Nanoseconds
    high_water: float
    low_water: float
    severe_water: float


class EvictionRunResult(BaseModel):
    """
    EvictionRunResult is an EvictionCronWorkflow run's result.
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    workflow_id: str
    dry_run: bool
    started_at: AwareDatetime
    finished_at: AwareDatetime
    hosts: list[HostEvictionResult] | None
    summary: EvictionSummary


class EvictionState(BaseModel):
    """
    EvictionState is the eviction query's result.
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    workspace_id: str
    pinned_until: AwareDatetime | None = None
    last_pin_request: str | None = None
    """
    LastPinRequest and PinError describe the last pin or unpin handled.
    """
    pin_error: str | None = None
    pin_error_type: str | None = None
    """
    PinErrorType is PinError's stable error type (docs/API.md "Errors").
    """
    evicted: bool
    """
    Evicted: this run evicted the workspace.
    """
    last_evict: EvictResult | None = None


class EvictionSummary(BaseModel):
    """
    EvictionSummary counts a run's outcomes (the run's memo field MemoEviction).
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    hosts: int
    unreachable: int
    planned: int
    stopped: int
    destroyed: int
    evicted: int
    caches_removed: int
    orphans_deleted: int
    """
    OrphansDeleted counts remote runtimes deleted because their workspace
    no longer exists.
    """
    dependency_caches_removed: int | None = None
    """
    DependencyCachesRemoved counts dependency caches removed
    (remove_dependency_cache).
    """
    skipped: int
    blocked: int
    failed: int
    pending: int
    freed_bytes: int


class EvictionUsage(BaseModel):
    """
    EvictionUsage is a host's disk usage against its budget, in bytes (a zero
    budget: never any pressure).
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    used_bytes: int
    budget_bytes: int
    repo_cache_bytes: int | None = None
    """
    RepoCacheBytes and WorkspaceBytes are the bytes of the host's repo
    caches and of its workspaces' worktrees (part of UsedBytes), as the
    planner measured them; absent from plans made before they were reported.
    """
    workspace_bytes: int | None = None
    dependency_cache_bytes: int | None = None
    """
    DependencyCacheBytes are the bytes of the host's dependency caches
    (part of UsedBytes); absent when it keeps none.
    """


class ExecRequest(BaseModel):
    """
    ExecRequest is the exec update's argument: one command (docs/API.md "Updates"). Cmd is an argv: no shell is
    implied (use ["sh","-c","..."] for one). Cwd is relative to the workspace root.
    """

    model_config = ConfigDict(
        extra="ignore",
        arbitrary_types_allowed=True,
    )
    cmd: list[str] | None
    cwd: str | None = None
    env: dict[str, str] | None = None
    timeout_s: int | None = None
    """
    seconds; 0 = DefaultExecTimeout
    """
    stdin: Base64Bytes | None = None
    """
    nil = /dev/null
    """
    max_output_bytes: int | None = None
    """
    per stream; 0 = default
    """
    stream: bool | None = None
    """
    Stream: a client reads the command's output while it runs (process_read
    on ExecProcessID, docs/API.md "Streaming exec output"); the command
    then waits while its unread output fills the process buffer, so the
    stream loses nothing.
    """
    keep_output: bool | None = None
    """
    KeepOutput: when a stream is longer than the cap, the worker keeps the
    whole output of both streams (bounded: MaxKeptStreamBytes per stream,
    MaxKeptOutputBytes per workspace, oldest dropped first) and the result's
    OutputID names it for read_output (docs/API.md "Kept output").
    """
    network: Literal["default", "limited", "none"] | None = None
    """
    Network is the network this command runs with (none, limited or
    default; docs/SECURITY.md "Network modes"): "" is the workspace's
    policy; a mode above it is SandboxCommandRejected naming the policy.
    """
    beside_setup: bool | None = None
    """
    BesideSetup: while the workspace's setup runs, this command runs at
    once beside it instead of waiting for it to end (docs/RUNTIMES.md
    "Setup"); on a remote runtime, and when no setup runs, it is an
    ordinary command.
    """


class ExecResult(BaseModel):
    """
    ExecResult is a finished command. A non-zero exit is a result, not an error.
    Exit codes: 127 command not found, 124 timeout (TimedOut true), 130 cancelled
    (Cancelled true: the cancel update, or hibernate/release during the command),
    128+n killed by signal n.
    When a stream exceeds the cap its head and tail are kept, joined by a marker line,
    Truncated is true, and StdoutBytes/StderrBytes hold the full byte counts.
    """

    model_config = ConfigDict(
        extra="ignore",
        arbitrary_types_allowed=True,
    )
    exit_code: int
    stdout: Base64Bytes | None
    stderr: Base64Bytes | None
    timed_out: bool
    cancelled: bool
    truncated: bool
    stdout_bytes: int
    stderr_bytes: int
    duration_ms: int
    output_id: str | None = None
    """
    OutputID names the kept whole output (read_output) when the request
    asked for KeepOutput and the output was truncated; "" otherwise.
    """


class FanoutInput(BaseModel):
    """
    FanoutInput starts a TaskFanoutWorkflow. The conversation is given by
    ConversationWorkspaceID (an existing edit workspace, resumed by id) or by
    Conversation (its edit-mode acquire request; the workspace is created when
    missing); when both are set they must name the same workspace.
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    conversation_workspace_id: str | None = None
    conversation: WorkspaceRequest | None = None
    tasks: list[TaskSpec] | None
    """
    Tasks run in this order (started in order, at most MaxParallel at once)
    and are merged in this order; 1 to MaxFanoutTasks, unique task ids.
    """
    accept_task_ids: list[str] | None = None
    """
    AcceptTaskIDs lists the tasks to merge when they succeed; empty means
    every task that succeeded. Each must be one of Tasks.
    """
    max_parallel: int | None = None
    """
    MaxParallel bounds the tasks in progress at once; 0 = DefaultFanoutParallel.
    """
    task_timeout_s: int | None = None
    """
    TaskTimeoutS bounds each task, in seconds, from when its workspace is
    ready: the script's run (exit 124, timed out) or the wait for
    complete_task; 0 = DefaultTaskTimeout, at most MaxTaskTimeout.
    """
    from_fork: bool | None = None
    """
    FromFork starts each task as a fork of the conversation (its session's
    fork update: the task workspace holds the conversation's uncommitted
    and untracked files as uncommitted changes) instead of committing the
    conversation first and branching the tasks at that commit (false, the
    default). StartCommit is then the conversation's HEAD; each task is
    forked when it starts (docs/API.md "Task fan-out").
    """


class FanoutReport(BaseModel):
    """
    FanoutReport is the progress query's result (without patches) and the
    workflow's result.
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    fanout_id: str
    state: Literal["completed", "failed", "merging", "preparing", "running"]
    conversation_workspace_id: str
    branch: str | None = None
    """
    Branch is the conversation's branch; StartCommit the commit every task
    branch starts from (the branch tip after the checkpoint commit).
    """
    start_commit: str | None = None
    checkpointed: bool | None = None
    """
    Checkpointed: the fan-out committed the conversation's uncommitted changes first.
    """
    from_fork: bool | None = None
    """
    FromFork: the tasks are forks of the conversation (FanoutInput.FromFork).
    """
    head: str | None = None
    """
    Head is the conversation's HEAD after the merge phase.
    """
    max_parallel: int
    running: int
    tasks: list[TaskResult] | None
    merge_order: list[str] | None = None
    """
    MergeOrder is the task ids in the order they were merged: the order
    the merge preview found to conflict least (empty without a preview).
    """
    error: str | None = None


class FileEntry(BaseModel):
    """
    FileEntry is one directory entry (list_dir).
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    name: str
    type: Literal["dir", "file", "other", "symlink"]
    """
    Type is "file", "dir", "symlink" or "other".
    """
    size: int
    """
    bytes
    """
    mode: int
    """
    permission bits
    """
    lfs_pointer: bool | None = None
    """
    LFSPointer is set on a regular file whose content is a Git LFS
    pointer (ParseLFSPointer): its real content was not fetched.
    """


class FileStatus(BaseModel):
    """
    FileStatus is one changed path (git status --porcelain=v1 XY codes).
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    path: str
    status: Literal[
        " A",
        " C",
        " D",
        " M",
        " R",
        " T",
        "!!",
        "??",
        "A ",
        "AA",
        "AD",
        "AM",
        "AT",
        "AU",
        "C ",
        "CD",
        "CM",
        "CT",
        "D ",
        "DD",
        "DU",
        "M ",
        "MD",
        "MM",
        "MT",
        "R ",
        "RD",
        "RM",
        "RT",
        "T ",
        "TD",
        "TM",
        "TT",
        "UA",
        "UD",
        "UU",
    ]
    """
    two characters, e.g. " M", "??", "A "
    """


class ForkInput(BaseModel):
    """
    ForkInput is the fork update's argument: exactly one of TaskID (the fork
    is the task workspace task|<user>|<project>|<task_id>) or ConversationID
    (the edit workspace edit|<user>|<project>|<conversation_id>), same user,
    project and repository as the source.
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    task_id: str | None = None
    conversation_id: str | None = None


class ForkResult(BaseModel):
    """
    ForkResult is the fork update's result.
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    handle: Handle
    """
    Handle is the new workspace's (acquire it again, or send it updates,
    by its workspace id like any other).
    """
    checkpoint: Checkpoint
    """
    Checkpoint is the checkpoint of the source the fork was made from.
    """


class Handle(BaseModel):
    """
    Handle is what acquire returns: enough for an agent to work with the workspace.
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    workspace_id: str
    workflow_id: str
    local_path: str
    """
    LocalPath is the worktree's absolute path on its host.
    """
    branch: str
    base_ref: str
    base_commit: str
    mode: Literal["analysis", "edit", "task"]
    capabilities: Capabilities
    repo: RepoIdentity
    host_id: str
    runtime_kind: Literal["bwrap", "daytona", "docker", "e2b", "local"]
    """
    RuntimeKind is the host's runtime provider (RuntimeKinds).
    """
    user_id: str
    project_id: str
    created: bool
    """
    Created is true when this acquire made the worktree (false on reuse).
    """
    restored_from: str | None = None
    """
    RestoredFrom is set when this acquire restored an evicted workspace's
    saved work: the backup ref (refs/sandbox/evicted/<workspace id>) it
    was written from.
    """
    restorable: str | None = None
    """
    Restorable is set when this workspace's key was destroyed with its work
    saved and the work was not brought back (this acquire started fresh):
    the backup ref (refs/sandbox/destroyed/<workspace id>) the restore
    update brings back (docs/API.md "Destroy").
    """
    forked_from: str | None = None
    """
    ForkedFrom is set when this acquire created the workspace as a fork:
    the source workspace's id (docs/API.md "Fork").
    """
    runtime_replica: RuntimeReplica | None = None
    """
    RuntimeReplica is the remote runtime's replica state (optional: set
    by remote runtimes such as Daytona once the workspace has a runtime;
    docs/API.md "Remote runtimes").
    """
    contract_version: str
    """
    ContractVersion is the worker's ContractVersion.
    """
    network: Literal["default", "limited", "none"] | None = None
    """
    Network is the workspace's network policy (Workspace.Network).
    """
    network_allow: list[str] | None = None
    """
    NetworkAllow is the workspace's own allow-list entries
    (Workspace.NetworkAllow).
    """
    code_host: bool | None = None
    """
    CodeHost: the worker has a code host for the repository's host, so
    create_pull_request can be served (docs/API.md "Updates"); false when
    none is configured (that update is then SandboxCommandRejected).
    """
    base_fetched_at: AwareDatetime | None = None
    """
    BaseFetchedAt is when the repo cache had last fetched from the remote
    when BaseCommit was resolved (Workspace.BaseFetchedAt): the base is
    the remote's state as of then, up to SANDBOX_FETCH_FRESHNESS old for a
    new workspace of the default branch. Omitted when unknown.
    """
    uninitialized_submodules: list[str] | None = None
    """
    UninitializedSubmodules lists the submodule paths whose recorded
    commit is not checked out as of this acquire (submodules off, or not
    fetched; docs/API.md "Submodules"). Omitted when none.
    """
    environment: RepoEnvironment | None = None
    """
    Environment is the repository's environment read at BaseCommit
    (Workspace.Environment, docs/RUNTIMES.md "Repository environment");
    omitted when the repository has none.
    """
    setup: SetupState | None = None
    """
    Setup is the state of the workspace's setup run as of this acquire
    (docs/RUNTIMES.md "Setup"); omitted when the repository names no
    setup command.
    """


class HibernateResult(BaseModel):
    """
    HibernateResult says what hibernate did.
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    runtime_id: str
    stopped: bool


class HostEvictionResult(BaseModel):
    """
    HostEvictionResult is one host's part of a run.
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    host_id: str
    unreachable: bool | None = None
    """
    Unreachable: no worker of the host picked the planning activity up in time.
    """
    error: str | None = None
    plan: PlanEvictionResult | None = None
    results: list[EvictResult] | None = None


class LineRange(BaseModel):
    """
    LineRange is one changed range of a file, in the lines of the file as the
    workspace's base commit holds it (1-based): Count lines from Start were
    replaced or deleted; Count 0 is an insertion before line Start (Start is
    one past the last line for an insertion at the end).
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    start: int
    count: int


class ListDirInput(BaseModel):
    """
    ListDirInput is list_dir's argument ("" = the workspace root). Depth 0
    or 1 lists the directory itself; 2 or 3 also lists the subdirectories
    that many levels down (entries are then named by their path relative to
    Path, "sub/file.go"). SkipHidden leaves out entries whose name starts
    with "."; SkipIgnored leaves out what git ignores (.gitignore and the
    repository's exclude rules; tracked files are never ignored). ".git" is
    never descended into.
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    path: str | None = None
    depth: int | None = None
    skip_hidden: bool | None = None
    skip_ignored: bool | None = None


class ListDirResult(BaseModel):
    """
    ListDirResult lists one directory (and, with a depth, its
    subdirectories), sorted by path; Truncated is set when more than the
    entry cap (1000 per directory, 5000 in all) existed.
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    path: str
    entries: list[FileEntry] | None
    truncated: bool | None = None


class LogCommit(BaseModel):
    """
    LogCommit is one commit of log. Date is the author date (RFC 3339).
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    commit: str
    author_name: str
    author_email: str
    date: str
    subject: str


class LogRequest(BaseModel):
    """
    LogRequest is log's argument: at most Limit commits (0 = DefaultLogCommits,
    at most MaxLogCommits) reachable from HEAD, newest first.
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    limit: int | None = None


class LogResult(BaseModel):
    """
    LogResult lists commits reachable from HEAD, newest first; Truncated is
    set when more commits exist than were returned.
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    commits: list[LogCommit] | None
    truncated: bool


class MergeRequest(BaseModel):
    """
    MergeRequest brings local branches into a workspace's branch, one after the
    other in the given order (docs/API.md "Task fan-out": merge the accepted tasks back into
    the conversation edit workspace if accepted). Each branch is merged with
    `git merge --no-ff` (a merge commit even when a fast-forward is possible);
    a branch that conflicts is left out and the workspace is restored to the
    commit it had before that branch, so it is never left half-merged.

    With DryRun nothing is merged: the same merges are computed as three-way
    merges outside the worktree (`git merge-tree`), the worktree, its index
    and its branch are never touched, and each source's outcome is what the
    merge would then do (docs/API.md "Merge preview").
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    branches: list[str] | None
    """
    Branches are local branch names (refs/heads/<name>), merged in this order;
    no duplicates, each valid per ValidateRef. Branches and Workspaces
    together: 1 to MaxMergeBranches sources.
    """
    workspaces: list[str] | None = None
    """
    Workspaces are ids of other workspaces of the same repository, user
    and project, merged after Branches by their branch (its committed
    state); a workspace of anyone else, or of another repository, is
    reported MergeMissing.
    """
    checkpoint_message: str | None = None
    """
    CheckpointMessage, when set, commits a dirty workspace (every change,
    untracked files included) with this message before merging; when empty,
    a dirty workspace is refused with ErrWorkspaceDirty. At most
    MaxMergeMessageBytes, no NUL. A dry run previews against the work
    tree as it is (MergeResult.Dirty) and commits nothing.
    """
    dry_run: bool | None = None
    """
    DryRun previews the merge and changes nothing.
    """
    order: Literal["", "given", "least_conflicts"] | None = None
    """
    Order is MergeOrderGiven ("" too) or MergeOrderLeastConflicts.
    """


class MergeResult(BaseModel):
    """
    MergeResult is the outcome of a MergeRequest: one BranchMerge per requested
    source, in the order they were merged (request order, or the one
    MergeOrderLeastConflicts chose).
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    dry_run: bool | None = None
    """
    DryRun: a preview; nothing was merged and Head is HEAD as it was.
    """
    dirty: bool | None = None
    """
    Dirty (dry run only): the work tree has uncommitted changes; the
    preview merged them as they are, as the merge does after committing
    them with a checkpoint message (without one the merge refuses).
    """
    branch: str
    """
    Branch is the workspace's branch that received the merges.
    """
    head: str
    """
    Head is the workspace's HEAD afterwards (the workspace is clean).
    """
    branches: list[BranchMerge] | None
    checkpoint_commit: str | None = None
    """
    CheckpointCommit is the commit made by this call from a dirty workspace
    (MergeRequest.CheckpointMessage), "" when none was needed.
    """


class Overlap(BaseModel):
    """
    Overlap is another live workspace of the same repository, user and
    project that changed at least one file this workspace changed.
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    workspace_id: str
    mode: Literal["analysis", "edit", "task"]
    branch: str | None = None
    conversation_id: str | None = None
    task_id: str | None = None
    risk: Literal["high", "medium"]
    """
    Risk is RiskHigh or RiskMedium.
    """
    intersecting: int
    """
    Intersecting counts the files whose ranges intersect.
    """
    files: list[OverlapFile] | None
    """
    Files are the files both changed, intersecting ones first, then by
    path; at most MaxOverlapFiles.
    """
    files_truncated: bool | None = None
    checked_at: AwareDatetime
    """
    CheckedAt is when the other workspace's changes were read: a change
    made by an operation on it shows at once; one made by a background
    process of it alone shows within OverlapsStaleAfter.
    """


class OverlapFile(BaseModel):
    """
    OverlapFile is one file both workspaces changed since their bases.
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    path: str
    """
    Path is the file's path in the base (the path both changes started
    from), or its new path when both workspaces added it.
    """
    this_path: str | None = None
    """
    ThisPath and OtherPath are the file's path in this and in the other
    workspace when it differs from Path (a rename, followed).
    """
    other_path: str | None = None
    this_change: Literal["added", "deleted", "modified", "renamed", "type_changed"]
    """
    ThisChange and OtherChange are what each side did: "added",
    "modified", "deleted", "renamed" or "type_changed".
    """
    other_change: Literal["added", "deleted", "modified", "renamed", "type_changed"]
    ranges_intersect: bool
    """
    RangesIntersect: the changed line ranges overlap or touch (git would
    see a conflict in this file), or they cannot be compared (see
    RiskHigh); false when every range is disjoint.
    """
    comparable: bool
    """
    Comparable is false when the ranges could not be compared line by
    line (binary, added on both sides, deleted on one side, different
    base versions, too many ranges): RangesIntersect is then true.
    """
    this_ranges: list[LineRange] | None = None
    """
    ThisRanges and OtherRanges are the changed ranges of each side (only
    when Comparable), at most MaxOverlapRanges each.
    """
    other_ranges: list[LineRange] | None = None


class OverlapsResult(BaseModel):
    """
    OverlapsResult is the result of the overlaps update (docs/API.md
    "Overlaps"): which other live workspaces of this workspace's repository,
    user and project changed the same files since their bases (committed and
    uncommitted changes, untracked files included, renames followed), ordered
    by risk (RiskHigh first, then by intersecting and shared files, then by
    id). Another user's or project's workspace is never considered.
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    workspace_id: str
    base_commit: str
    changed: int
    """
    Changed counts the files this workspace changed since its base.
    """
    checked: int
    """
    Checked counts the other workspaces compared (with or without overlap).
    """
    overlaps: list[Overlap] | None
    not_checked: list[UncheckedWorkspace] | None = None
    truncated: bool | None = None
    """
    Truncated: more than MaxOverlapWorkspaces overlaps or unchecked
    workspaces; the lowest-risk ones were left out.
    """


class PinRequest(BaseModel):
    """
    PinRequest is the pin and unpin signals' payload.
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    request_id: str
    """
    RequestID lets the sender see it applied (EvictionState.LastPinRequest).
    """
    until: AwareDatetime | None = None
    """
    Until is the end of the pin (pin only; must be in the future).
    """


class PlanEvictionResult(BaseModel):
    """
    PlanEvictionResult is one host's plan.
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    plan: EvictionPlan
    policy: EvictionPolicy
    budget: str
    """
    Budget says how the budget was set: "bytes" (SANDBOX_DISK_BUDGET_BYTES,
    usage = bytes under the data root) or "fraction" (of the filesystem,
    usage = the filesystem's used bytes).
    """
    truncated: int | None = None
    """
    Truncated counts actions left to the next run (MaxEvictionActionsPerHost).
    """
    notes: list[str] | None = None
    """
    Notes lists workspaces or caches that could not be inspected (treated as holding work).
    """


class PreparedTree(BaseModel):
    """
    PreparedTree is what a setup run did with a prepared tree
    (SetupState.Prepared; docs/RUNTIMES.md "Prepared trees").
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    action: str
    """
    Action is restored, saved or none.
    """
    key: str | None = None
    """
    Key names the tree: a hash of the cache scope, the lockfiles'
    content, the setup commands, the prepared paths and the runtime.
    """
    mode: str | None = None
    """
    Mode is how a restored tree's files reached the worktree: reflink
    (copy-on-write clones), link (hard links to files no command can
    change) or copy.
    """
    files: int | None = None
    """
    Files and Bytes count the regular files and their bytes.
    """
    bytes: int | None = None
    duration_ms: int | None = None
    """
    DurationMS is how long the restore or save took.
    """
    note: str | None = None
    """
    Note says why nothing was restored or saved, or what failed.
    """
    lockfiles_hash: str | None = None
    """
    LockfilesHash is the lockfiles' hash the tree is keyed by: as the
    worktree held them before the setup commands ran.
    """


class PreviewURL(BaseModel):
    """
    PreviewURL is how to reach a port of the workspace's runtime from outside
    (the preview_url update's result; docs/API.md "Preview URLs").
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    url: str
    """
    URL reaches the port (http or https).
    """
    token: str | None = None
    """
    Token, when set, must accompany each request the way the runtime's
    backend says (Daytona: the x-daytona-preview-token header); empty when
    the URL carries its own authorization (a signed URL) or needs none.
    """
    expires_at: AwareDatetime | None = None
    """
    ExpiresAt is when the URL stops working; nil: while the runtime runs.
    """


class PreviewURLInput(BaseModel):
    """
    PreviewURLInput is the preview_url update's argument (docs/API.md
    "Updates", "Preview URLs").
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    port: int
    """
    Port is the TCP port (1–65535) a server listens on inside the runtime.
    """


class ProcessChunk(BaseModel):
    """
    ProcessChunk is what a read returned of one stream: Data covers
    [Offset, NextOffset); DroppedBytes were lost before Offset (the buffer
    wrapped past the requested offset); EOF: nothing more will come.
    """

    model_config = ConfigDict(
        extra="ignore",
        arbitrary_types_allowed=True,
    )
    data: Base64Bytes | None
    offset: int
    next_offset: int
    dropped_bytes: int
    eof: bool


class ProcessInfo(BaseModel):
    """
    ProcessInfo describes one background process.
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    process_id: str
    tag: str | None = None
    cmd: list[str] | None
    pty: bool | None = None
    started_at: AwareDatetime
    exited: bool
    """
    Exited is set once the process (its leader) has ended; ExitCode is
    then its shell-style code (128+n for signal n, 137 when the runtime
    was stopped) and ExitReason says why (ExitReason* constants).
    """
    exit_code: int
    exit_reason: (
        Literal[
            "cancelled", "exited", "lost", "runtime_stopped", "signaled", "start_failed", "timeout"
        ]
        | None
    ) = None
    ended_at: AwareDatetime | None = None
    lingering: bool | None = None
    """
    Lingering: processes it started still run after it exited (they end
    with the runtime's hibernation, or with process_signal KILL).
    """
    stdout_bytes: int
    """
    StdoutBytes and StderrBytes count every byte written so far.
    """
    stderr_bytes: int


class ProcessListResult(BaseModel):
    """
    ProcessListResult is process_list's result: the runtime's background
    processes, live and recently ended (at most MaxProcesses of each),
    oldest first, and what its processes can do.
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    processes: list[ProcessInfo] | None
    support: ProcessSupport


class ProcessReadInput(BaseModel):
    """
    ProcessReadInput is process_read's argument.
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    process_id: str
    stream: Literal["", "pty", "stderr", "stdout"] | None = None
    """
    Stream is StreamStdout ("" too), StreamStderr or StreamPTY.
    """
    offset: int
    """
    Offset is the absolute byte offset to read from: the next_offset of
    the previous read, 0 at first.
    """
    stderr_offset: int | None = None
    """
    StderrOffset, when set (Stream stdout), also reads stderr from that
    offset in the same call (ProcessReadResult.Stderr).
    """
    max_bytes: int | None = None
    """
    MaxBytes bounds the data returned (0: DefaultProcessReadBytes, at
    most MaxProcessReadBytes): with StderrOffset both streams' together,
    stdout first, so that one read fits one Temporal payload.
    """
    wait_ms: int | None = None
    """
    WaitMS is how long to wait, in milliseconds, when there is nothing
    new (at most 30,000): the read returns as soon as there are new bytes
    or the process has ended. A process that does not exist yet (an
    exec's, before its command starts) is waited for too.
    """


class ProcessReadResult(BaseModel):
    """
    ProcessReadResult is process_read's result: the requested stream's
    chunk (Data from Offset to NextOffset), the stderr chunk when
    StderrOffset was given, and the process as it is now. EOF: the process
    and everything it started have ended and every byte of the stream (both
    streams with StderrOffset) has been read.
    """

    model_config = ConfigDict(
        extra="ignore",
        arbitrary_types_allowed=True,
    )
    process_id: str
    stream: Literal["pty", "stderr", "stdout"]
    data: Base64Bytes | None
    offset: int
    next_offset: int
    dropped_bytes: int
    stderr: ProcessChunk | None = None
    eof: bool
    exited: bool
    exit_code: int
    exit_reason: (
        Literal[
            "cancelled", "exited", "lost", "runtime_stopped", "signaled", "start_failed", "timeout"
        ]
        | None
    ) = None
    process: ProcessInfo


class ProcessResizeInput(BaseModel):
    """
    ProcessResizeInput is process_resize's argument: the new terminal size
    of a PTY process.
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    process_id: str
    rows: int
    cols: int


class ProcessResult(BaseModel):
    """
    ProcessResult is the result of process_signal and process_resize.
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    process_id: str


class ProcessSignalInput(BaseModel):
    """
    ProcessSignalInput is process_signal's argument: Signal is one of
    ProcessSignals (default TERM), sent to the process's group while its
    leader runs and to every process it left afterwards; KILL kills the
    whole tree at once.
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    process_id: str
    signal: str | None = None


class ProcessStartInput(BaseModel):
    """
    ProcessStartInput is process_start's argument: one background process.
    Cmd, Cwd and Env follow ExecRequest's rules (an argv, workspace-relative
    cwd, environment layered on the runtime's fixed one).
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    cmd: list[str] | None
    cwd: str | None = None
    env: dict[str, str] | None = None
    tag: str | None = None
    """
    Tag is a free label (at most MaxProcessTagBytes of text) shown by process_list.
    """
    pty: TerminalSize | None = None
    """
    PTY, when set, runs the process on a pseudo-terminal of that size as
    its controlling terminal: one output stream (StreamPTY), input
    through process_write.
    """
    stdin: bool | None = None
    """
    Stdin keeps standard input open for process_write; otherwise it is
    /dev/null.
    """
    network: Literal["default", "limited", "none"] | None = None
    """
    Network is the process's network, as ExecRequest.Network: "" is the
    workspace's policy; a mode above it is ErrCommandRejected
    (docs/SECURITY.md "Network modes").
    """


class ProcessStartResult(BaseModel):
    """
    ProcessStartResult is process_start's result, returned as soon as the
    process exists (a command that cannot start is an exited process with
    exit code 127 or 126 and the reason on its stderr).
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    process_id: str
    process: ProcessInfo


class ProcessSupport(BaseModel):
    """
    ProcessSupport describes a runtime's background processes (process_list).
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    durable: bool
    """
    Durable: processes and their buffered output survive a restart of the
    worker (kill -9).
    """
    pty: bool
    """
    PTY: processes can run on a pseudo-terminal.
    """
    max_processes: int
    """
    MaxProcesses bounds live background processes per runtime.
    """
    buffer_bytes: int
    """
    BufferBytes is each stream's buffer: the newest BufferBytes bytes are
    kept, older ones are dropped.
    """


class ProcessUsedSignal(BaseModel):
    """
    ProcessUsedSignal is the payload of SignalProcessUsed: processes read
    through the stream workflow since its last signal.
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    process_ids: list[str] | None


class ProcessWriteInput(BaseModel):
    """
    ProcessWriteInput is process_write's argument: Data goes to the
    process's standard input (the terminal of a PTY process); CloseStdin
    closes it afterwards (for a PTY process: sends end-of-file, ^D).
    """

    model_config = ConfigDict(
        extra="ignore",
        arbitrary_types_allowed=True,
    )
    process_id: str
    data: Base64Bytes | None = None
    close_stdin: bool | None = None


class ProcessWriteResult(BaseModel):
    """
    ProcessWriteResult is process_write's result.
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    process_id: str
    written: int


class PullRequest(BaseModel):
    """
    PullRequest is a pull request as the code host reports it.
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    number: int
    """
    Number is the pull request's number in its repository.
    """
    url: str
    """
    URL is its web page (GitHub's html_url).
    """
    state: str
    """
    State is "open" or "closed".
    """
    draft: bool
    """
    Draft reports a draft pull request.
    """
    base: str
    """
    Base is the branch it merges into.
    """
    head: str
    """
    Head is the branch with the changes (the workspace branch).
    """
    head_commit: str | None = None
    """
    HeadCommit is the head commit the code host recorded.
    """
    created: bool
    """
    Created is false when an open pull request was reused (PullRequestRequest.ReuseOpen).
    """
    warnings: list[str] | None = None
    """
    Warnings report follow-up steps that failed without failing the call
    (requesting reviewers, adding labels); the pull request exists.
    """


class PullRequestInput(BaseModel):
    """
    PullRequestInput is create_pull_request's argument. The head is always the
    workspace branch.
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    title: str
    """
    Title is required: one line, at most MaxPRTitleRunes characters.
    """
    body: str | None = None
    """
    Body is the description (Markdown).
    """
    base: str | None = None
    """
    Base is the branch to merge into; "" means the repository's default branch.
    """
    draft: bool | None = None
    """
    Draft opens it as a draft.
    """
    reviewers: list[str] | None = None
    """
    Reviewers are user logins, or "org/team-slug" for a team.
    """
    labels: list[str] | None = None
    """
    Labels are added to it.
    """


class PushRequest(BaseModel):
    """
    PushRequest is the push update's argument (docs/API.md "push").
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    force_with_lease: bool | None = None
    """
    ForceWithLease replaces a remote branch that is not an ancestor of the
    local tip, but only while the remote branch is still at the commit this
    workspace pushed last (PushedRef), or absent when it never pushed:
    git push --force-with-lease=refs/heads/<branch>:<last pushed commit>.
    Without it a diverged remote branch is ErrConflict.
    """


class PushResult(BaseModel):
    """
    PushResult is the outcome of a push.
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    branch: str
    """
    Branch is the workspace branch pushed to the branch of the same name.
    """
    commit: str
    """
    Commit is the pushed commit (the local branch tip), now also recorded in PushedRef.
    """
    previous_remote_commit: str | None = None
    """
    PreviousRemoteCommit is the remote branch's commit before the push ("" when it was created).
    """
    status: Literal["created", "fast_forward", "forced", "up_to_date"]
    """
    Status is PushCreated, PushFastForward, PushForced or PushUpToDate.
    """


class ReadFileInput(BaseModel):
    """
    ReadFileInput is read_file's argument (Path workspace-relative).
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    path: str


class ReadFileResult(BaseModel):
    """
    ReadFileResult carries the bytes (base64 in JSON).
    """

    model_config = ConfigDict(
        extra="ignore",
        arbitrary_types_allowed=True,
    )
    path: str
    content: Base64Bytes | None
    size: int
    lfs_pointer: bool | None = None
    """
    LFSPointer is set when Content is a Git LFS pointer
    (ParseLFSPointer): the file's real content was not fetched.
    """
    content_hash: str
    """
    ContentHash is ContentHash(Content): give it as if_match to a later
    write_file or edit_file to make it fail, rather than overwrite, when
    the file changed meanwhile (docs/API.md "Optimistic concurrency").
    """


class ReadOutputInput(BaseModel):
    """
    ReadOutputInput is read_output's argument: a page of the whole output of
    an exec that kept it (ExecRequest.KeepOutput, ExecResult.OutputID). Stream
    is "stdout" (default, "") or "stderr"; Offset a byte offset into that
    stream; Limit the page size in bytes (0 = DefaultReadOutputBytes, at most
    MaxReadOutputBytes).
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    output_id: str
    stream: Literal["stderr", "stdout"] | None = None
    offset: int | None = None
    limit: int | None = None


class ReadOutputResult(BaseModel):
    """
    ReadOutputResult is one page of kept output: Data covers [Offset,
    Offset+len(Data)) of the stream; Total is the stream's full byte count as
    the command wrote it, Kept how many of those bytes are kept (Total unless
    the stream was larger than MaxKeptStreamBytes); EOF is set when the page
    reaches the end of the kept bytes.
    """

    model_config = ConfigDict(
        extra="ignore",
        arbitrary_types_allowed=True,
    )
    output_id: str
    stream: Literal["stderr", "stdout"]
    offset: int
    data: Base64Bytes | None
    total: int
    kept: int
    eof: bool


class ReleaseInput(BaseModel):
    """
    ReleaseInput releases the session: the runtime is hibernated (or
    destroyed when DestroyRuntime); the workspace always stays.
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    destroy_runtime: bool | None = None


class ReleaseResult(BaseModel):
    """
    ReleaseResult confirms a release.
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    workspace_id: str
    runtime: Literal["destroyed", "not running", "stopped"]
    """
    Runtime is "stopped", "destroyed" or "not running".
    """


class ReplicaConflict(BaseModel):
    """
    ReplicaConflict is one sync conflict of a remote runtime's replica
    (RuntimeReplica.Conflicts; docs/API.md "Remote runtimes"): Path changed
    in the workspace and in the sandbox since they last agreed, and was
    never settled silently.
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    path: str
    """
    Path is the file, relative to the workspace root; the workspace's
    version (its content, or its deletion) stays there.
    """
    sandbox_copy: str | None = None
    """
    SandboxCopy is where the sandbox's version was kept: Path +
    ".remote-conflict" (or "-2", "-3", … when taken); "" when the
    sandbox deleted the file.
    """
    at: AwareDatetime
    """
    At is when the worker found it.
    """


class RepoEnvironment(BaseModel):
    """
    RepoEnvironment is a repository's environment as read from
    .sandboxcore.yaml and .devcontainer/devcontainer.json at the workspace's
    base commit (docs/RUNTIMES.md "Repository environment"). Nothing in it
    is trusted: what fails validation is left out and named in Problems.
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    sources: list[str] | None
    """
    Sources are the files read, in order of precedence (later wins).
    """
    image: str | None = None
    """
    Image is the image the repository names (devcontainer "image",
    .sandboxcore.yaml "image"); never pulled.
    """
    image_used: bool | None = None
    """
    ImageUsed: the workspace's runtimes run Image (the Docker runtime,
    when the worker's SANDBOX_REPO_IMAGES allows it and its daemon has
    it); otherwise Problems says why not and the worker's image runs.
    """
    env: dict[str, str] | None = None
    """
    Env are the variables every command of the workspace gets
    (devcontainer "containerEnv" and "remoteEnv", .sandboxcore.yaml
    "env"); the worker's own variables and a command's env win over them.
    """
    setup: list[list[str]] | None = None
    """
    Setup are the setup commands, each an argv, in order (devcontainer
    onCreateCommand, updateContentCommand, postCreateCommand;
    .sandboxcore.yaml "setup").
    """
    lockfiles: list[str] | None = None
    """
    Lockfiles are the files whose content decides whether the setup runs
    again (.sandboxcore.yaml "lockfiles").
    """
    lockfiles_hash: str | None = None
    """
    LockfilesHash is a hash of the lockfiles' content in the worktree as
    of this acquire ("" when the environment names none): the setup runs
    again when it changes.
    """
    prepared: list[str] | None = None
    """
    Prepared are the directories of the worktree the setup produces
    (.sandboxcore.yaml "prepared": node_modules, .venv, vendor): after a
    setup succeeds they are kept as a prepared tree keyed by the
    lockfiles, and a new workspace whose lockfiles hash the same gets
    them instead of running the setup (docs/RUNTIMES.md "Prepared
    trees").
    """
    forward_ports: list[int] | None = None
    """
    ForwardPorts are the ports the repository's services listen on
    (devcontainer "forwardPorts"), for preview URLs.
    """
    ignored: list[str] | None = None
    """
    Ignored names the devcontainer.json properties this service does not
    use (features, build, mounts, …).
    """
    problems: list[str] | None = None
    """
    Problems says what was refused and why (unknown or malformed fields,
    hostile values, files too large), one line each.
    """


class RepoIdentity(BaseModel):
    """
    RepoIdentity is a normalized repository identity derived from its URL
    (ParseRepoURL): host lowercased, owner and name as written, ".git" stripped.
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    host: str
    """
    Host is the lowercased host[:port], or FileHost ("_file") for file URLs.
    """
    owner: str
    """
    Owner is the path before the last segment ("org" or "group/subgroup").
    """
    name: str
    """
    Name is the last path segment without ".git".
    """
    url: str
    """
    URL is the clone URL as validated (credentials never included).
    """


class RollbackInput(BaseModel):
    """
    RollbackInput is the rollback update's argument.
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    checkpoint: int
    """
    Checkpoint is the ID of the checkpoint to go back to (≥ 1).
    """


class RollbackResult(BaseModel):
    """
    RollbackResult says what a rollback did.
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    checkpoint: Checkpoint
    """
    Checkpoint is the checkpoint the workspace is now at.
    """
    undo: Checkpoint
    """
    Undo is the checkpoint taken of the state just left: rolling back to
    it undoes this rollback.
    """
    head: str
    """
    Head and Branch are HEAD afterwards (Checkpoint.Head, Checkpoint.Branch).
    """
    branch: str


class RuntimeReplica(BaseModel):
    """
    RuntimeReplica is the state of a remote runtime's replica of the
    workspace (Handle.RuntimeReplica, SessionDescription.RuntimeReplica;
    docs/API.md "Remote runtimes"): the workspace's host worktree is the
    source of truth, and a remote sandbox that vanished (deleted, expired,
    archived beyond recovery) is created again and re-synced from it on its
    next use, with nothing lost. Absent for local runtimes.
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    recreated: int
    """
    Recreated counts the sandboxes that vanished and were created again
    since the runtime was last destroyed on purpose.
    """
    last_recreated_at: AwareDatetime | None = None
    """
    LastRecreatedAt is when that last happened (nil: never).
    """
    synced: bool
    """
    Synced: the replica has been synced since its sandbox was (re)created.
    """
    files: int
    """
    Files is the number of files the host and the replica last agreed on.
    """
    not_synced: list[str] | None = None
    """
    NotSynced lists paths the last sync could not bring back to the
    workspace (nested git repositories made in the sandbox, at most 20):
    they exist only in the sandbox and are lost if it is recreated.
    """
    conflicts: list[ReplicaConflict] | None = None
    """
    Conflicts lists the open sync conflicts (oldest first, at most 50):
    files changed both in the workspace and in the sandbox since they
    last agreed. The workspace's version stays at Path; the sandbox's is
    kept beside it at SandboxCopy (a new file of the workspace, listed by
    status) until that file is removed; "" when the sandbox's version
    was a deletion (then listed for a day).
    """


class SearchMatch(BaseModel):
    """
    SearchMatch is one matching line.
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    path: str
    line: int
    """
    1-based
    """
    text: str


class SearchRequest(BaseModel):
    """
    SearchRequest asks for lines matching Pattern (Go RE2 syntax, or a literal
    string when Literal) in files under Path (workspace-relative, "" = root).
    Symlinks are never followed; .git is skipped; binary files are skipped.
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    pattern: str
    path: str | None = None
    literal: bool | None = None
    ignore_case: bool | None = None
    max_results: int | None = None
    """
    MaxResults caps the matches returned; 0 means DefaultSearchResults.
    """
    glob: str | None = None
    """
    Glob, when set, keeps only files whose path matches it: a glob without
    "/" is matched against the file's name ("*.go"), one with "/" against
    its workspace-relative path, where "**" matches any number of
    directories ("src/**/*.ts"). Syntax as Go's path.Match otherwise.
    """


class SearchResult(BaseModel):
    """
    SearchResult is the outcome of a search (docs/API.md "Updates", `search`).
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    matches: list[SearchMatch] | None
    """
    Matches are the matching lines, in path order.
    """
    truncated: bool
    """
    Truncated: the search stopped early; TruncatedBy says why.
    """
    truncated_by: str | None = None
    """
    TruncatedBy is SearchCapResults, SearchCapFiles or SearchCapBytes
    when Truncated ("" otherwise): only SearchCapResults means that more
    matches exist; the others mean that files were left unsearched.
    """
    skipped_too_large: list[str] | None = None
    """
    SkippedTooLarge lists the files not searched because they are over
    the per-file size limit (the first MaxSearchSkippedPaths of them;
    SkippedTooLargeCount counts them all).
    """
    skipped_too_large_count: int | None = None
    """
    SkippedTooLargeCount is how many files were not searched for their size.
    """
    skipped_binary: int | None = None
    """
    SkippedBinary is how many binary files (a NUL in the first 8 KiB) were not searched.
    """


class SessionDescription(BaseModel):
    """
    SessionDescription is the describe query's result.
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    workspace_id: str
    state: Literal[
        "acquiring", "active", "closed", "destroyed", "evicted", "failed", "idle", "released"
    ]
    """
    State is one of SessionStates.
    """
    workspace: Workspace | None = None
    """
    Workspace is the workspace's stored record (nil before the first acquire).
    """
    runtime_kind: Literal["bwrap", "daytona", "docker", "e2b", "local"]
    runtime_running: bool
    in_flight: int
    """
    InFlight counts the operations running or waiting for the lock.
    """
    ops: int
    """
    Ops counts the operations this run handled.
    """
    last_activity: AwareDatetime
    idle_stop_at: AwareDatetime | None = None
    """
    IdleStopAt is when the runtime is hibernated if nothing happens; set
    only while it runs. A live background process defers it (docs/API.md
    "Idle rules for processes").
    """
    live_processes: int | None = None
    """
    LiveProcesses counts the background processes the session started
    that may still run (as far as it learnt from process operations).
    """
    running_execs: list[str] | None = None
    """
    RunningExecs lists the update ids of the execs running or queued.
    """
    idle_close_at: AwareDatetime
    """
    IdleCloseAt is when the session closes if nothing happens; the zero
    time once it is released, closed or evicted.
    """
    last_error: str | None = None
    runtime_replica: RuntimeReplica | None = None
    """
    RuntimeReplica is the remote runtime's replica state as of the last
    acquire or exec (optional, as Handle.RuntimeReplica).
    """
    contract_version: str
    """
    ContractVersion is the worker's ContractVersion.
    """
    setup: SetupState | None = None
    """
    Setup is the state of the workspace's setup run (docs/RUNTIMES.md
    "Setup"); omitted when the repository names no setup command.
    """


class SessionInput(BaseModel):
    """
    SessionInput is SessionWorkflow's argument (docs/API.md "Getting a
    session"): Request for the first acquire of a key, or WorkspaceID alone
    to resume an existing workspace (or to deliver a signal with
    signal-with-start).
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    workspace_id: str
    """
    WorkspaceID is WorkspaceIDForKey of the request's key.
    """
    request: WorkspaceRequest | None = None
    """
    Request, when set, must have the key of WorkspaceID.
    """


class SetupState(BaseModel):
    """
    SetupState is the state of a workspace's setup run (docs/RUNTIMES.md
    "Setup"): the handle's and describe's "setup", nil when the repository
    names no setup command.
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    state: str
    """
    State is one of pending, running, done, failed, skipped.
    """
    exit_code: int
    """
    ExitCode is the setup script's exit code once it ended (done: 0).
    """
    started_at: AwareDatetime | None = None
    """
    StartedAt and FinishedAt bound the run; DurationMS is their
    difference in milliseconds.
    """
    finished_at: AwareDatetime | None = None
    duration_ms: int | None = None
    commands: int | None = None
    """
    Commands is how many setup commands the run had.
    """
    stdout_tail: str | None = None
    """
    StdoutTail and StderrTail are the last SetupOutputTailBytes of each
    stream (invalid UTF-8 replaced).
    """
    stderr_tail: str | None = None
    output_id: str | None = None
    """
    OutputID names the whole output for read_output when a stream was
    longer than the tail (docs/API.md "Kept output").
    """
    lockfiles_hash: str | None = None
    """
    LockfilesHash is RepoEnvironment.LockfilesHash as of this run: a
    later acquire that sees another hash runs the setup again.
    """
    prepared: PreparedTree | None = None
    """
    Prepared says how the run used a prepared tree (docs/RUNTIMES.md
    "Prepared trees"): restored in place of the commands, or saved after
    them; nil when the environment names no prepared directory.
    """
    error: str | None = None
    """
    Error says why a failed setup could not run (no exit code of its own),
    or that it timed out.
    """


class StreamInput(BaseModel):
    """
    StreamInput is the stream workflow's argument.
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    workspace_id: str


class TaskDiff(BaseModel):
    """
    TaskDiff is a task's change against the commit it started from, bounded.
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    patch: str
    """
    Patch is cut at TaskDiffBytes (Truncated set).
    """
    files: list[str] | None
    """
    Files are the changed paths (capped by the workspace's diff limits).
    """
    truncated: bool
    total_bytes: int
    """
    full patch size
    """


class TaskResult(BaseModel):
    """
    TaskResult is one task's progress and outcome.
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    task_id: str
    kind: Literal["agent", "script"]
    """
    Kind is TaskKindScript or TaskKindAgent.
    """
    status: Literal[
        "acquiring",
        "error",
        "failed",
        "finishing",
        "pending",
        "running",
        "succeeded",
        "timed_out",
        "waiting",
    ]
    workspace_id: str | None = None
    workflow_id: str | None = None
    branch: str | None = None
    exit_code: int | None = None
    """
    ExitCode, TimedOut and the tails are set for scripts.
    """
    timed_out: bool | None = None
    stdout_tail: str | None = None
    stderr_tail: str | None = None
    commit: str | None = None
    """
    Commit is the task branch's tip once finished.
    """
    diff: TaskDiff | None = None
    """
    Diff is omitted from the progress query.
    """
    message: str | None = None
    """
    Message: the agent's complete_task message, or what went wrong.
    """
    merge: (
        Literal["conflict", "failed", "merged", "no_changes", "not_accepted", "skipped"] | None
    ) = None
    """
    Merge is one of the TaskMerge* outcomes, "" until the merge phase.
    """
    conflict_files: list[str] | None = None
    merge_preview: Literal["clean", "conflict", "failed", "merged", "missing"] | None = None
    """
    MergePreview is this task's outcome in the preview taken before any
    task was merged (MergeClean, MergeConflict, … of merge_branches with
    dry_run, in the order that conflicts least: docs/API.md "Merge
    preview"); PreviewConflictFiles the files it said would conflict.
    Empty when no preview was taken.
    """
    preview_conflict_files: list[str] | None = None
    started_at: AwareDatetime | None = None
    finished_at: AwareDatetime | None = None


class TaskSpec(BaseModel):
    """
    TaskSpec is one task of a fan-out.
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    task_id: str
    """
    TaskID names the task's workspace (key task|user|project|task_id) and
    branch agent/<tenant>/task-<task_id> (TaskBranch); ValidateID. Reusing a task id reuses
    its workspace: a task id whose workspace started from another commit
    fails the task with SandboxConflict.
    """
    script: str | None = None
    """
    Script, when set, runs as ["sh","-c",Script] in the task's own runtime
    (exit 0 → the task succeeded and its changes are committed). Empty: the
    task waits for an external agent to drive its session and send
    complete_task. At most MaxTaskScriptBytes.
    """
    instructions: str | None = None
    """
    Instructions are metadata for whoever does the task: kept in the input
    (visible in Temporal) and in the body of the task's commit. At most
    MaxTaskInstructionsBytes.
    """


class TerminalSize(BaseModel):
    """
    TerminalSize is a terminal's size in character cells.
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    rows: int
    cols: int


class UncheckedWorkspace(BaseModel):
    """
    UncheckedWorkspace is a workspace of the same repository, user and
    project that overlaps could not compare.
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    workspace_id: str
    mode: Literal["analysis", "edit", "task"]
    branch: str | None = None
    host_id: str
    """
    HostID is the worker host the workspace lives on.
    """
    reason: Literal["evicted", "other_host", "unreadable"]
    """
    Reason is UncheckedOtherHost, UncheckedEvicted or UncheckedUnreadable.
    """
    message: str | None = None


class Workspace(BaseModel):
    """
    Workspace is one durable worktree: the stored record (docs/DESIGN.md "The three things").
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    workspace_id: str
    key: str
    """
    WorkspaceKey of the request
    """
    repo_cache_id: str
    repo: RepoIdentity
    project_id: str
    user_id: str
    mode: Literal["analysis", "edit", "task"]
    conversation_id: str | None = None
    task_id: str | None = None
    base_ref: str
    """
    as requested, or the default branch
    """
    base_commit: str
    """
    resolved at creation; diffs are taken against it
    """
    branch: str
    """
    empty for analysis (detached)
    """
    local_path: str
    host_id: str
    state: Literal["creating", "evicted", "ready", "removed"]
    dirty: bool
    pinned_until: AwareDatetime | None = None
    capabilities: Capabilities
    network: Literal["default", "limited", "none"] | None = None
    """
    Network is the workspace's network policy (WorkspaceRequest.Network as
    resolved at acquire); "" for a workspace recorded before policies
    existed (the worker's SANDBOX_RUNTIME_NETWORK applies).
    """
    network_allow: list[str] | None = None
    """
    NetworkAllow is the workspace's own allow-list entries, canonical
    (NetworkRule.String), added to the worker's for its limited network.
    """
    last_used_at: AwareDatetime
    size_bytes: int
    created_at: AwareDatetime
    updated_at: AwareDatetime
    base_fetched_at: AwareDatetime | None = None
    """
    BaseFetchedAt is when the repo cache the base commit was resolved in
    had last fetched from the remote (RepoCache.LastFetchedAt then): the
    base is the remote's state as of that time. nil when unknown (rows
    older than the column).
    """
    uninitialized_submodules: list[str] | None = None
    """
    UninitializedSubmodules lists the submodule paths whose recorded
    commit is not checked out (docs/API.md "Submodules"). Not stored: the
    acquire activity fills it from the worktree.
    """
    environment: RepoEnvironment | None = None
    """
    Environment is what the repository's own files say its commands
    need, read at BaseCommit (docs/RUNTIMES.md "Repository
    environment"); nil when the repository has none of those files. Not
    stored: the acquire activity fills it.
    """


class WorkspaceRequest(BaseModel):
    """
    WorkspaceRequest asks for a workspace (docs/API.md "Getting a session").
    RepoURL is required; RepoName, when set, must agree with the identity parsed
    from RepoURL. BaseRef empty means the remote's default branch.
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    user_id: str
    project_id: str
    repo_name: str | None = None
    repo_url: str
    base_ref: str | None = None
    mode: Literal["analysis", "edit", "task"]
    conversation_id: str | None = None
    task_id: str | None = None
    branch_name: str | None = None
    """
    BranchName overrides the mode's branch (edit/task only); it must pass ValidateBranchName.
    """
    from_branch: str | None = None
    """
    FromBranch, for task workspaces, starts the task branch from this local
    branch (e.g. a conversation's agent/<tenant>/edits-<id>) instead of BaseRef.
    """
    network: Literal["default", "limited", "none"] | None = None
    """
    Network is the workspace's network policy: the widest network any of
    its commands may use (docs/SECURITY.md "Network modes"). "" keeps the
    stored policy of an existing workspace and gives a new one the
    worker's default (SANDBOX_RUNTIME_NETWORK); a mode above the worker's
    SANDBOX_NETWORK_MAX is SandboxCommandRejected. An acquire that sets it
    (or NetworkAllow) replaces the stored policy.
    """
    network_allow: list[str] | None = None
    """
    NetworkAllow adds allow-list entries (NetworkRule forms, at most
    MaxNetworkAllowEntries) to the worker's SANDBOX_NETWORK_ALLOW for this
    workspace's limited network, e.g. a private registry.
    """
    refresh: bool | None = None
    """
    Refresh makes the acquire fetch the repository from its remote now,
    whatever the repo cache's freshness window (SANDBOX_FETCH_FRESHNESS),
    so a new workspace starts from the remote's current tip (docs/API.md
    "Getting a session", Freshness). It is no part of the workspace's key.
    """
    setup: str | None = None
    """
    Setup says whether the repository's setup commands run for this
    acquire (SetupAuto, the default; SetupWait; SetupSkip; docs/RUNTIMES.md
    "Setup"). It is no part of the workspace's key.
    """


class WorkspaceStatus(BaseModel):
    """
    WorkspaceStatus is a workspace's git state. Dirty counts untracked files.
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    branch: str
    """
    "" when detached
    """
    head: str
    base_commit: str
    dirty: bool
    files: list[FileStatus] | None
    commits_since_base: int
    """
    CommitsSinceBase counts commits on HEAD not in BaseCommit.
    """
    unpushed_commits: int
    """
    UnpushedCommits counts commits on HEAD that no remote-tracking branch of
    origin, no tag and no push of any workspace (PushedRefPrefix) contains:
    0 right after a successful push.
    """
    config_warnings: list[str] | None = None
    """
    ConfigWarnings lists the repository configuration variables that could
    run a program or redirect git (docs/SECURITY.md "Git hardening"), each as
    `"<key>" (<scope>): <what it would do>; <neutralized|refused|reported>`;
    host-side git never obeys them. Values are never included. Empty when
    the configuration is clean.
    """
    lfs_pointers: list[str] | None = None
    """
    LFSPointers lists the Git LFS files (attribute filter=lfs) that are
    still pointers: their content could not be fetched, or fetching is
    off (SANDBOX_LFS). Omitted when none.
    """
    uninitialized_submodules: list[str] | None = None
    """
    UninitializedSubmodules lists the submodule paths whose recorded
    commit is not checked out (submodules off, SANDBOX_SUBMODULES, or it
    could not be fetched). Omitted when none.
    """


class WriteFileInput(BaseModel):
    """
    WriteFileInput is write_file's argument; Mode 0 means 0644.
    """

    model_config = ConfigDict(
        extra="ignore",
        arbitrary_types_allowed=True,
    )
    path: str
    content: Base64Bytes | None
    mode: int | None = None
    if_match: str | None = None
    """
    IfMatch, when set, is the ContentHash the file must still have: the
    write fails with ErrConflict (SandboxConflict) and changes nothing
    when the file's content differs or the file is gone.
    """


class WriteFileResult(BaseModel):
    """
    WriteFileResult confirms a write.
    """

    model_config = ConfigDict(
        extra="ignore",
    )
    path: str
    bytes: int
    content_hash: str
    """
    ContentHash is the written content's ContentHash.
    """
