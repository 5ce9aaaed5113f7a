"""The workspace handle: every session update of docs/API.md "Updates" as a method.

A :class:`Workspace` is one durable worktree and its session. Operations are grouped as the
field names them: ``ws.files`` (read, write, edit, list, search), ``ws.git`` (status, diff, log,
commit, push, pull_request, merge), ``ws.proc`` (background processes), ``ws.checkpoints``;
the rest (exec, fork, hibernate, release, destroy, restore, preview_url, describe) are methods
of the workspace itself. :data:`OPERATIONS` maps each update of the operation table to its
method (a test fails when an update has none).

Results are the models of :mod:`sandboxcore.models` (bytes are ``bytes``, durations
``timedelta``); failures are the exceptions of :mod:`sandboxcore.errors`. A non-zero exit code
is a result, never an exception.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import math
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any, Literal

import temporalio.client
import temporalio.service

from . import _rpc, errors, identity, mcp_token, models
from .mcp_token import MintedToken

if TYPE_CHECKING:
    from .client import AsyncClient

Network = Literal["none", "limited", "default"]
Signal = Literal["INT", "TERM", "KILL", "HUP", "QUIT", "USR1", "USR2", "STOP", "CONT", "WINCH"]

#: Largest stdin of an exec, and largest command plus environment, in bytes (the worker's
#: sandboxapi.MaxStdinBytes): refused here before anything is sent.
MAX_STDIN_BYTES = 512 << 10
#: Largest file ``files.write`` sends, in bytes (sandboxapi.MaxFileBytes).
MAX_FILE_BYTES = 1 << 20
#: Longest wait of one process read, in seconds (docs/API.md "Processes").
MAX_READ_WAIT_S = 30.0
#: How long a cancelled exec waits for its cancel and for its result, in seconds.
CANCEL_WAIT_S = 15.0

#: Each session update of the operation table and the method that sends it (dotted from the
#: workspace, e.g. ``"files.read"``).
OPERATIONS: Mapping[str, str] = {
    "acquire": "refresh",
    "exec": "exec",
    "cancel": "cancel",
    "read_output": "read_output",
    "read_file": "files.read",
    "write_file": "files.write",
    "edit_file": "files.edit",
    "list_dir": "files.list",
    "search": "files.search",
    "status": "git.status",
    "diff": "git.diff",
    "log": "git.log",
    "commit": "git.commit",
    "push": "git.push",
    "create_pull_request": "git.pull_request",
    "merge_branches": "git.merge",
    "process_start": "proc.start",
    "process_read": "proc.read",
    "process_write": "proc.write",
    "process_signal": "proc.signal",
    "process_resize": "proc.resize",
    "process_list": "proc.list",
    "checkpoint": "checkpoints.create",
    "checkpoints": "checkpoints.list",
    "rollback": "checkpoints.rollback",
    "fork": "fork",
    "hibernate": "hibernate",
    "release": "release",
    "destroy": "destroy",
    "restore": "restore",
    "preview_url": "preview_url",
    "overlaps": "overlaps",
    "setup": "setup",
}


def _require_text(kind: type[errors.SandboxcoreError], what: str, *values: str) -> None:
    """Refuse a string JSON cannot carry as it is (a lone surrogate, e.g. from
    ``os.fsdecode``): the worker would see U+FFFD and act on another name."""
    for v in values:
        try:
            v.encode("utf-8")
        except UnicodeEncodeError:
            raise kind(f"{what} {v[:64]!r} is not valid UTF-8 text", field=what) from None


def _seconds(value: float | timedelta | None) -> int | None:
    """Whole seconds (rounded up) of a duration given as seconds or a timedelta."""
    if value is None:
        return None
    s = value.total_seconds() if isinstance(value, timedelta) else float(value)
    if s <= 0:
        raise errors.InvalidArgument(f"timeout {s} s: must be positive", field="timeout_s")
    return math.ceil(s)


def _argv(cmd: str | Sequence[str]) -> list[str]:
    """An argv: a string runs through ``sh -c``."""
    if isinstance(cmd, str):
        return ["sh", "-c", cmd]
    argv = list(cmd)
    if not argv or not all(isinstance(a, str) for a in argv):
        raise errors.InvalidArgument("cmd: want a non-empty list of strings", field="cmd")
    return argv


def _exec_request(
    cmd: str | Sequence[str],
    cwd: str | None,
    env: Mapping[str, str] | None,
    timeout_s: float | timedelta | None,
    stdin: bytes | str | None,
    network: Network | None,
    max_output_bytes: int | None,
    keep_output: bool,
    stream: bool,
    beside_setup: bool = False,
) -> models.ExecRequest:
    argv = _argv(cmd)
    data = stdin.encode() if isinstance(stdin, str) else stdin
    if data is not None and len(data) > MAX_STDIN_BYTES:
        raise errors.InvalidArgument(f"stdin is larger than {MAX_STDIN_BYTES} bytes", field="stdin")
    env = dict(env or {})
    size = sum(
        len(k.encode("utf-8", "replace")) + len(v.encode("utf-8", "replace"))
        for k, v in env.items()
    )
    size += sum(len(a.encode("utf-8", "replace")) for a in argv)
    if size > MAX_STDIN_BYTES:
        raise errors.InvalidArgument(
            f"command and environment are larger than {MAX_STDIN_BYTES} bytes", field="cmd"
        )
    _require_text(errors.InvalidArgument, "cmd", *argv)
    for k, v in env.items():
        _require_text(errors.InvalidArgument, "env", k, v)
    if cwd:
        _require_text(errors.InvalidWorkspacePath, "cwd", cwd)
    return models.ExecRequest(
        cmd=argv,
        cwd=cwd or None,
        env=env or None,
        timeout_s=_seconds(timeout_s),
        stdin=data,
        network=network,
        max_output_bytes=max_output_bytes,
        keep_output=keep_output or None,
        stream=stream or None,
        beside_setup=beside_setup or None,
    )


@dataclass(frozen=True)
class ExecChunk:
    """Bytes a running command wrote: ``stream`` is ``"stdout"`` or ``"stderr"``."""

    stream: Literal["stdout", "stderr"]
    data: bytes


class ExecStream:
    """A running command's output as it comes (``async for chunk in stream``), every byte of
    each stream exactly once and in order (docs/API.md "Streaming exec output"); ``await
    stream.result()`` is the exec's result. Leaving ``async with`` (or cancelling the iterating
    task) before the end cancels the command."""

    def __init__(self, ws: Workspace, request: models.ExecRequest, update_id: str):
        self._ws = ws
        self._request = request
        self.update_id = update_id
        self._task: asyncio.Task[models.ExecResult] | None = None
        self._done = False

    async def _start(self) -> None:
        handle = await self._ws._rpc.send("exec", _rpc.dump(self._request), self.update_id)

        async def wait() -> models.ExecResult:
            try:
                return models.ExecResult.model_validate(await handle.result())
            except temporalio.client.WorkflowUpdateFailedError as e:
                raise _rpc.typed(e) from e

        self._task = asyncio.ensure_future(wait())

    async def __aenter__(self) -> ExecStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        if not self._done:
            await self._ws._abandon(self.update_id)

    def __aiter__(self) -> AsyncIterator[ExecChunk]:
        return self._chunks()

    async def _chunks(self) -> AsyncIterator[ExecChunk]:
        try:
            if self._task is None:
                await self._start()
            async for c in self._read():
                yield c
            self._done = True
        except asyncio.CancelledError:
            await asyncio.shield(self._ws._abandon(self.update_id))
            raise

    async def _read(self) -> AsyncIterator[ExecChunk]:
        assert self._task is not None
        pid = identity.exec_process_id(self._ws.id, self.update_id)
        out_at = err_at = 0
        started = False
        while True:
            try:
                r = await self._ws._stream_read(
                    models.ProcessReadInput(
                        process_id=pid,
                        offset=out_at,
                        stderr_offset=err_at,
                        max_bytes=1 << 20,
                        wait_ms=5000,
                    )
                )
            except (errors.SandboxCommandRejected, errors.SandboxNotFound) as e:
                if isinstance(e, errors.SandboxNotFound) and not self._task.done():
                    await asyncio.sleep(0.1)  # not started yet: queued behind another command
                    continue
                # No process to read (a runtime without processes, or it never ran as one):
                # what the result holds is all there is.
                res = await self._task
                if not started and not res.truncated:
                    if res.stdout:
                        yield ExecChunk("stdout", res.stdout)
                    if res.stderr:
                        yield ExecChunk("stderr", res.stderr)
                return
            started = True
            for name, chunk in (("stdout", r), ("stderr", r.stderr)):
                if chunk is None:
                    continue
                if chunk.dropped_bytes:
                    note = f"\n...[{chunk.dropped_bytes} bytes not streamed]...\n".encode()
                    yield ExecChunk(name, note)  # type: ignore[arg-type]
                if chunk.data:
                    yield ExecChunk(name, chunk.data)  # type: ignore[arg-type]
                if name == "stdout":
                    out_at = chunk.next_offset
                else:
                    err_at = chunk.next_offset
            if r.eof:
                return

    async def result(self) -> models.ExecResult:
        """The exec's result (reads the rest of the output first when not iterated)."""
        if self._task is None:
            await self._start()
        assert self._task is not None
        try:
            res = await asyncio.shield(self._task)
        except (asyncio.CancelledError, temporalio.client.WorkflowUpdateRPCTimeoutOrCancelledError):
            await asyncio.shield(self._ws._abandon(self.update_id))
            raise asyncio.CancelledError() from None
        self._done = True
        return res


class Files:
    """File operations of a workspace (docs/API.md "Updates"): paths are workspace-relative."""

    def __init__(self, ws: Workspace):
        self._ws = ws

    async def read(self, path: str) -> bytes:
        """A file's bytes. Raises FileNotFound, InvalidWorkspacePath (escapes the worktree)."""
        return (await self.read_file(path)).content or b""

    async def read_file(self, path: str) -> models.ReadFileResult:
        """The whole ``read_file`` result (content, size, ``lfs_pointer``)."""
        _require_text(errors.InvalidWorkspacePath, "path", path)
        return await self._ws._call(
            "read_file", models.ReadFileInput(path=path), models.ReadFileResult
        )

    async def write(
        self, path: str, content: bytes | str, *, mode: int = 0, if_match: str | None = None
    ) -> models.WriteFileResult:
        """Create or replace a file (``str`` is written as UTF-8; ``mode`` 0 = 0o644). With
        ``if_match`` (the ``content_hash`` of a :meth:`read_file`, or :func:`content_hash` of the
        bytes read) the write happens only while the file still has that content, else it
        raises SandboxConflict and changes nothing (docs/API.md "Optimistic concurrency").
        Raises SandboxResourceLimit (over 1 MiB), InvalidWorkspacePath,
        SandboxCommandRejected (analysis workspace)."""
        data = content.encode() if isinstance(content, str) else bytes(content)
        if len(data) > MAX_FILE_BYTES:
            raise errors.SandboxResourceLimit(f"content is larger than {MAX_FILE_BYTES} bytes")
        _require_text(errors.InvalidWorkspacePath, "path", path)
        return await self._ws._call(
            "write_file",
            models.WriteFileInput(path=path, content=data, mode=mode or None, if_match=if_match),
            models.WriteFileResult,
        )

    async def edit(
        self,
        path: str,
        command: Literal["str_replace", "insert", "create"] = "str_replace",
        *,
        old_str: str | None = None,
        new_str: str | None = None,
        insert_line: int | None = None,
        file_text: str | None = None,
        if_match: str | None = None,
    ) -> models.EditFileResult:
        """Edit one text file in one step on the worker: ``str_replace`` (``old_str`` must occur
        exactly once), ``insert`` (``new_str`` after line ``insert_line``, 0 = first) or
        ``create`` (``file_text``); ``if_match`` as in :meth:`write`. Raises InvalidArgument
        (``field`` says which), FileNotFound, SandboxResourceLimit, SandboxConflict."""
        _require_text(errors.InvalidWorkspacePath, "path", path)
        for what, v in (("old_str", old_str), ("new_str", new_str), ("file_text", file_text)):
            if v is not None:
                _require_text(errors.InvalidArgument, what, v)
        return await self._ws._call(
            "edit_file",
            models.EditFileInput(
                path=path,
                command=command,
                old_str=old_str,
                new_str=new_str,
                insert_line=insert_line,
                file_text=file_text,
                if_match=if_match,
            ),
            models.EditFileResult,
        )

    async def list(
        self,
        path: str = "",
        *,
        depth: int = 0,
        skip_hidden: bool = False,
        skip_ignored: bool = False,
    ) -> models.ListDirResult:
        """List a directory (``""`` = the root); ``depth`` 2 or 3 lists that many levels."""
        _require_text(errors.InvalidWorkspacePath, "path", path)
        return await self._ws._call(
            "list_dir",
            models.ListDirInput(
                path=path or None,
                depth=depth or None,
                skip_hidden=skip_hidden or None,
                skip_ignored=skip_ignored or None,
            ),
            models.ListDirResult,
        )

    async def search(
        self,
        pattern: str,
        *,
        path: str = "",
        literal: bool = False,
        ignore_case: bool = False,
        max_results: int | None = None,
        glob: str | None = None,
    ) -> models.SearchResult:
        """Lines matching ``pattern`` (a regular expression unless ``literal``) under ``path``,
        in files matching ``glob``."""
        _require_text(errors.InvalidArgument, "pattern", pattern)
        _require_text(errors.InvalidWorkspacePath, "path", path)
        return await self._ws._call(
            "search",
            models.SearchRequest(
                pattern=pattern,
                path=path or None,
                literal=literal or None,
                ignore_case=ignore_case or None,
                max_results=max_results,
                glob=glob,
            ),
            models.SearchResult,
        )


class Git:
    """The workspace's git operations, run by host-side git (docs/API.md "Updates")."""

    def __init__(self, ws: Workspace):
        self._ws = ws

    async def status(self) -> models.WorkspaceStatus:
        """Branch, HEAD, dirty files, commits since the base and unpushed."""
        return await self._ws._call("status", None, models.WorkspaceStatus)

    async def diff(self) -> models.Diff:
        """Everything changed against the base commit, as a binary-safe patch."""
        return await self._ws._call("diff", None, models.Diff)

    async def log(self, limit: int = 20) -> models.LogResult:
        """The newest ``limit`` commits reachable from HEAD (at most 500)."""
        return await self._ws._call("log", models.LogRequest(limit=limit), models.LogResult)

    async def commit(
        self,
        message: str,
        *,
        paths: Sequence[str] | None = None,
        author_name: str | None = None,
        author_email: str | None = None,
        allow_empty: bool = False,
    ) -> models.CommitResult:
        """Commit every change (or ``paths``) onto the workspace's branch; a clean tree is
        ``nothing_to_commit``, not an error."""
        _require_text(errors.InvalidWorkspacePath, "paths", *(paths or ()))
        _require_text(
            errors.InvalidArgument, "message", message, author_name or "", author_email or ""
        )
        return await self._ws._call(
            "commit",
            models.CommitRequest(
                message=message,
                paths=list(paths) if paths else None,
                author_name=author_name,
                author_email=author_email,
                allow_empty=allow_empty or None,
            ),
            models.CommitResult,
        )

    async def push(self, *, force_with_lease: bool = False) -> models.PushResult:
        """Push the workspace's branch to the branch of the same name on the repository.
        Raises SandboxConflict (the remote has commits the workspace lacks), RepoAuthFailed."""
        return await self._ws._call(
            "push", models.PushRequest(force_with_lease=force_with_lease or None), models.PushResult
        )

    async def pull_request(
        self,
        title: str,
        *,
        body: str = "",
        base: str = "",
        draft: bool = False,
        reviewers: Sequence[str] = (),
        labels: Sequence[str] = (),
    ) -> models.PullRequest:
        """Open (or reuse) a pull request from the pushed branch into ``base`` (default: the
        repository's default branch). Raises WorkspaceDirty (push first),
        SandboxCommandRejected (no code host)."""
        return await self._ws._call(
            "create_pull_request",
            models.PullRequestInput(
                title=title,
                body=body or None,
                base=base or None,
                draft=draft or None,
                reviewers=list(reviewers) or None,
                labels=list(labels) or None,
            ),
            models.PullRequest,
        )

    async def merge(
        self,
        branches: Sequence[str] = (),
        *,
        workspaces: Sequence[str] = (),
        checkpoint_message: str = "",
        dry_run: bool = False,
        order: Literal["given", "least_conflicts"] = "given",
    ) -> models.MergeResult:
        """Merge local ``branches``, then other ``workspaces`` of the same repository, user and
        project (by id: their branch), into the workspace's branch, in order; a conflicting
        source is rolled back and reported, never left half-merged. ``dry_run`` only previews:
        each source's outcome (``clean``, ``conflict`` with the files, ...) and nothing changes
        (docs/API.md "Merge preview"). ``order="least_conflicts"`` merges in the order a preview
        found to conflict least. Raises WorkspaceDirty (uncommitted changes and no
        ``checkpoint_message``; a dry run previews them instead), InvalidArgument."""
        return await self._ws._call(
            "merge_branches",
            models.MergeRequest(
                branches=list(branches),
                workspaces=list(workspaces) or None,
                checkpoint_message=checkpoint_message or None,
                dry_run=dry_run or None,
                order=None if order == "given" else order,
            ),
            models.MergeResult,
        )


def content_hash(data: bytes | str) -> str:
    """A file content's hash as ``read_file`` reports it and ``if_match`` takes it: ``sha256:``
    and the SHA-256 of the bytes in lowercase hex (``str`` is hashed as UTF-8)."""
    raw = data.encode() if isinstance(data, str) else bytes(data)
    return "sha256:" + hashlib.sha256(raw).hexdigest()


class Process:
    """An attachable handle on one background process (docs/API.md "Processes")."""

    def __init__(self, proc: Processes, process_id: str, info: models.ProcessInfo | None = None):
        self._proc = proc
        self.id = process_id
        #: The newest ProcessInfo known (from start, read or list).
        self.info = info
        self.stdout_offset = 0
        self.stderr_offset = 0

    async def read(
        self, *, wait: float = 0.0, max_bytes: int | None = None
    ) -> models.ProcessReadResult:
        """Output from where this handle read last (both streams), waiting up to ``wait``
        seconds for new bytes; advances the handle's offsets."""
        r = await self._proc.read(
            self.id,
            offset=self.stdout_offset,
            stderr_offset=self.stderr_offset,
            wait=wait,
            max_bytes=max_bytes,
        )
        self.stdout_offset = r.next_offset
        if r.stderr is not None:
            self.stderr_offset = r.stderr.next_offset
        if r.process is not None:
            self.info = r.process
        return r

    async def output(self) -> AsyncIterator[ExecChunk]:
        """Every byte the process writes, as it comes, until it and what it started ended."""
        while True:
            r = await self.read(wait=MAX_READ_WAIT_S)
            if r.data:
                yield ExecChunk("stdout", r.data)
            if r.stderr is not None and r.stderr.data:
                yield ExecChunk("stderr", r.stderr.data)
            if r.eof:
                return

    async def write(self, data: bytes | str, *, close_stdin: bool = False) -> int:
        """Write to its stdin (or terminal); returns the bytes written."""
        return (await self._proc.write(self.id, data, close_stdin=close_stdin)).written

    async def signal(self, signal: Signal = "TERM") -> None:
        """Send ``signal`` to its process group."""
        await self._proc.signal(self.id, signal)

    async def kill(self) -> None:
        """Kill its whole tree."""
        await self._proc.signal(self.id, "KILL")

    async def resize(self, rows: int, cols: int) -> None:
        """Set its terminal's size."""
        await self._proc.resize(self.id, rows, cols)

    async def wait(self) -> models.ProcessInfo:
        """Wait until it exited; returns its final info (exit code, reason)."""
        while True:
            r = await self._proc.read(self.id, offset=0, wait=MAX_READ_WAIT_S, max_bytes=1)
            if r.exited and r.process is not None:
                self.info = r.process
                return r.process


class Processes:
    """Background processes of the workspace's runtime (``ws.proc``)."""

    def __init__(self, ws: Workspace):
        self._ws = ws

    async def start(
        self,
        cmd: str | Sequence[str],
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        tag: str | None = None,
        pty: tuple[int, int] | None = None,
        stdin: bool = False,
        network: Network | None = None,
    ) -> Process:
        """Start a process (a string runs through ``sh -c``); ``pty`` is ``(rows, cols)`` for a
        terminal. Raises SandboxResourceLimit (64 live), SandboxCommandRejected (no
        processes on this runtime)."""
        argv = _argv(cmd)
        _require_text(errors.InvalidArgument, "cmd", *argv)
        r = await self._ws._call(
            "process_start",
            models.ProcessStartInput(
                cmd=argv,
                cwd=cwd,
                env=dict(env) if env else None,
                tag=tag,
                pty=models.TerminalSize(rows=pty[0], cols=pty[1]) if pty else None,
                stdin=stdin or None,
                network=network,
            ),
            models.ProcessStartResult,
        )
        return Process(self, r.process_id, r.process)

    def attach(self, process_id: str) -> Process:
        """A handle on an existing process (e.g. an exec's, :func:`identity.exec_process_id`),
        reading from offset 0."""
        return Process(self, process_id)

    async def read(
        self,
        process_id: str,
        *,
        offset: int = 0,
        stderr_offset: int | None = None,
        wait: float = 0.0,
        max_bytes: int | None = None,
    ) -> models.ProcessReadResult:
        """Output from byte ``offset`` (and stderr from ``stderr_offset``), waiting up to
        ``wait`` seconds (at most 30) for new bytes."""
        return await self._ws._call(
            "process_read",
            models.ProcessReadInput(
                process_id=process_id,
                offset=offset,
                stderr_offset=stderr_offset,
                max_bytes=max_bytes,
                wait_ms=int(min(wait, MAX_READ_WAIT_S) * 1000) or None,
            ),
            models.ProcessReadResult,
        )

    async def write(
        self, process_id: str, data: bytes | str, *, close_stdin: bool = False
    ) -> models.ProcessWriteResult:
        """Write ``data`` to the process's stdin or terminal; ``close_stdin`` closes it after."""
        raw = data.encode() if isinstance(data, str) else bytes(data)
        return await self._ws._call(
            "process_write",
            models.ProcessWriteInput(
                process_id=process_id, data=raw, close_stdin=close_stdin or None
            ),
            models.ProcessWriteResult,
        )

    async def signal(self, process_id: str, signal: Signal = "TERM") -> models.ProcessResult:
        """Send ``signal`` to the process's group (``KILL`` kills the whole tree)."""
        return await self._ws._call(
            "process_signal",
            models.ProcessSignalInput(process_id=process_id, signal=signal),
            models.ProcessResult,
        )

    async def resize(self, process_id: str, rows: int, cols: int) -> models.ProcessResult:
        """Set a PTY process's terminal size (1-1000 rows and columns)."""
        return await self._ws._call(
            "process_resize",
            models.ProcessResizeInput(process_id=process_id, rows=rows, cols=cols),
            models.ProcessResult,
        )

    async def list(self) -> models.ProcessListResult:
        """The runtime's processes and what it supports."""
        return await self._ws._call("process_list", None, models.ProcessListResult)


class Checkpoints:
    """Checkpoints of a workspace (docs/API.md "Checkpoints")."""

    def __init__(self, ws: Workspace):
        self._ws = ws

    async def create(self, label: str = "") -> models.Checkpoint:
        """Record the exact state (files, modes, HEAD); the branch and index are untouched."""
        return await self._ws._call(
            "checkpoint", models.CheckpointInput(label=label or None), models.Checkpoint
        )

    async def list(self) -> list[models.Checkpoint]:
        """The checkpoints, oldest first."""
        r = await self._ws._call("checkpoints", None, models.CheckpointList)
        return list(r.checkpoints or [])

    async def rollback(self, checkpoint: int | models.Checkpoint) -> models.RollbackResult:
        """Bring files and HEAD back to a checkpoint; ``undo`` in the result undoes it."""
        n = checkpoint.id if isinstance(checkpoint, models.Checkpoint) else checkpoint
        return await self._ws._call(
            "rollback", models.RollbackInput(checkpoint=n), models.RollbackResult
        )


class Workspace:
    """One workspace and its session. Get one from :meth:`AsyncClient.acquire` or
    :meth:`AsyncClient.workspace`; ``async with`` releases the session on exit (the workspace
    stays)."""

    def __init__(self, client: AsyncClient, handle: models.Handle):
        self._client = client
        self._rpc = _rpc.SessionRPC(client.temporal, client.task_queue, handle.workspace_id)
        self.handle = handle
        #: The checkpoint of the source recording a fork (set on a workspace made by fork).
        self.fork_checkpoint: models.Checkpoint | None = None
        self.files = Files(self)
        self.git = Git(self)
        self.proc = Processes(self)
        self.checkpoints = Checkpoints(self)

    # The handle's fields (docs/API.md "Getting a session").
    @property
    def id(self) -> str:
        """The workspace id, ``ws-`` and 24 hex digits."""
        return self.handle.workspace_id

    @property
    def workflow_id(self) -> str:
        """The session's workflow id."""
        return self.handle.workflow_id

    @property
    def branch(self) -> str:
        """The workspace's branch (``""`` for analysis: detached)."""
        return self.handle.branch

    @property
    def base_ref(self) -> str:
        """The base ref as requested (``""`` = the default branch)."""
        return self.handle.base_ref

    @property
    def base_commit(self) -> str:
        """The commit the workspace started from; diffs are against it."""
        return self.handle.base_commit

    @property
    def mode(self) -> str:
        """``edit``, ``task`` or ``analysis``."""
        return self.handle.mode

    @property
    def local_path(self) -> str:
        """The worktree's path on its worker host."""
        return self.handle.local_path

    @property
    def runtime_kind(self) -> str:
        """The host's runtime: ``bwrap``, ``docker``, ``local``, ``daytona`` or ``e2b``."""
        return self.handle.runtime_kind

    @property
    def capabilities(self) -> models.Capabilities:
        """``writable``, ``isolated``, ``persistent``."""
        return self.handle.capabilities

    @property
    def repo(self) -> models.RepoIdentity:
        """The repository (host, owner, name, url)."""
        return self.handle.repo

    @property
    def host_id(self) -> str:
        """The worker host holding the worktree."""
        return self.handle.host_id

    @property
    def user_id(self) -> str:
        """The workspace's user."""
        return self.handle.user_id

    @property
    def project_id(self) -> str:
        """The workspace's project."""
        return self.handle.project_id

    @property
    def network(self) -> str | None:
        """The workspace's network policy."""
        return self.handle.network

    @property
    def code_host(self) -> bool:
        """Whether pull requests can be opened (a code host is configured)."""
        return bool(self.handle.code_host)

    def __repr__(self) -> str:
        return f"Workspace(id={self.id!r}, branch={self.branch!r}, mode={self.mode!r})"

    async def __aenter__(self) -> Workspace:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.release()

    async def _call(self, name: str, arg: Any, result: type[_rpc.ModelT]) -> _rpc.ModelT:
        out = await self._rpc.update(name, _rpc.dump(arg))
        return result.model_validate(out)

    async def refresh(self) -> Workspace:
        """Re-attach (``acquire`` with no request: resumes a dormant or evicted workspace) and
        refresh the handle. Raises WorkspaceNotFound."""
        self.handle = models.Handle.model_validate(await self._rpc.acquire(None))
        return self

    async def exec(
        self,
        cmd: str | Sequence[str],
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout_s: float | timedelta | None = None,
        stdin: bytes | str | None = None,
        network: Network | None = None,
        max_output_bytes: int | None = None,
        keep_output: bool = False,
        beside_setup: bool = False,
        update_id: str | None = None,
    ) -> models.ExecResult:
        """Run a command (an argv; a string runs through ``sh -c``) and return its result: exit
        code, ``stdout``/``stderr`` bytes (head and tail kept when ``truncated``), ``timed_out``.
        Cancelling the awaiting task cancels the command (its whole process tree is killed).
        ``timeout_s``: seconds or a timedelta (default 600 s, at most 7200 s). ``beside_setup``:
        while the workspace's setup runs, run now beside it instead of waiting for it
        (docs/RUNTIMES.md "Setup"). Raises InvalidArgument, InvalidWorkspacePath (cwd),
        SandboxCommandRejected (network above the workspace's policy)."""
        req = _exec_request(
            cmd,
            cwd,
            env,
            timeout_s,
            stdin,
            network,
            max_output_bytes,
            keep_output,
            False,
            beside_setup,
        )
        uid = update_id or _rpc.new_update_id()
        try:
            handle = await self._rpc.send("exec", _rpc.dump(req), uid)
            return models.ExecResult.model_validate(await handle.result())
        except asyncio.CancelledError:
            await asyncio.shield(self._abandon(uid))
            raise
        except temporalio.client.WorkflowUpdateRPCTimeoutOrCancelledError as e:
            if isinstance(e.__cause__, asyncio.CancelledError):
                # temporalio turns the task's cancellation into this error.
                await asyncio.shield(self._abandon(uid))
                raise asyncio.CancelledError() from e
            raise errors.SandboxTimeout(f"exec {uid}: {e}") from e
        except temporalio.client.WorkflowUpdateFailedError as e:
            raise _rpc.typed(e) from e

    def exec_stream(
        self,
        cmd: str | Sequence[str],
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout_s: float | timedelta | None = None,
        stdin: bytes | str | None = None,
        network: Network | None = None,
        max_output_bytes: int | None = None,
        update_id: str | None = None,
    ) -> ExecStream:
        """Run a command like :meth:`exec` and stream its output: ``async for chunk in
        ws.exec_stream(...)`` yields :class:`ExecChunk`, then ``await stream.result()``."""
        req = _exec_request(cmd, cwd, env, timeout_s, stdin, network, max_output_bytes, False, True)
        return ExecStream(self, req, update_id or _rpc.new_update_id())

    async def _abandon(self, update_id: str) -> None:
        """Cancel the exec ``update_id`` (which may not have reached the session yet) and wait
        for it to return, at most CANCEL_WAIT_S."""

        async def cancel_and_wait() -> None:
            for _ in range(3):
                r = await self.cancel(update_id)
                if r.state != "unknown":
                    break
                await asyncio.sleep(0.2)
            await self._rpc.outcome(update_id)

        with contextlib.suppress(Exception):
            await asyncio.wait_for(cancel_and_wait(), CANCEL_WAIT_S)

    async def cancel(self, update_id: str) -> models.CancelResult:
        """Cancel a running or queued exec by its update id (its whole tree is killed)."""
        return await self._call(
            "cancel", models.CancelInput(update_id=update_id), models.CancelResult
        )

    async def read_output(
        self,
        output_id: str,
        *,
        stream: Literal["stdout", "stderr"] = "stdout",
        offset: int = 0,
        limit: int | None = None,
    ) -> models.ReadOutputResult:
        """Page through an exec's kept output (``keep_output``; docs/API.md "Kept output")."""
        return await self._call(
            "read_output",
            models.ReadOutputInput(
                output_id=output_id, stream=stream, offset=offset or None, limit=limit
            ),
            models.ReadOutputResult,
        )

    async def _stream_read(self, req: models.ProcessReadInput) -> models.ProcessReadResult:
        """``process_read`` through the workspace's stream workflow (update-with-start)."""
        sid = identity.stream_workflow_id(self.id)
        for attempt in range(3):
            try:
                out = await self._client.temporal.execute_update_with_start_workflow(
                    "process_read",
                    _rpc.dump(req),
                    start_workflow_operation=temporalio.client.WithStartWorkflowOperation(
                        _rpc.STREAM_WORKFLOW_TYPE,
                        {"workspace_id": self.id},
                        id=sid,
                        task_queue=self._client.task_queue,
                        id_conflict_policy=temporalio.common.WorkflowIDConflictPolicy.USE_EXISTING,
                    ),
                    result_type=dict,
                )
                return models.ProcessReadResult.model_validate(out)
            except (temporalio.client.WorkflowUpdateFailedError, temporalio.service.RPCError) as e:
                err = _rpc.typed(e)
                if isinstance(err, errors.SandboxcoreError) or attempt == 2:
                    raise err from e
                await asyncio.sleep(0.1)  # the run ended between reads: read again
        raise AssertionError("unreachable")

    async def fork(
        self, *, task_id: str | None = None, conversation_id: str | None = None
    ) -> Workspace:
        """A new task (or edit) workspace holding exactly this workspace's current files as
        uncommitted changes; this one is unchanged (the fork is recorded as its checkpoint:
        ``fork_checkpoint`` of the result). Raises SandboxConflict (that workspace exists)."""
        if (task_id is None) == (conversation_id is None):
            raise errors.InvalidArgument("fork: give exactly one of task_id and conversation_id")
        if task_id is not None:
            identity.validate_id("task_id", task_id)
        if conversation_id is not None:
            identity.validate_id("conversation_id", conversation_id)
        r = await self._call(
            "fork",
            models.ForkInput(task_id=task_id, conversation_id=conversation_id),
            models.ForkResult,
        )
        child = Workspace(self._client, r.handle)
        child.fork_checkpoint = r.checkpoint
        return child

    async def hibernate(self) -> models.HibernateResult:
        """Stop the runtime (a running command is cancelled); the workspace stays."""
        return await self._call("hibernate", None, models.HibernateResult)

    async def release(self, destroy_runtime: bool = False) -> models.ReleaseResult:
        """Release the session: the runtime stops (or is destroyed); the workspace stays and the
        next operation resumes it."""
        try:
            out = await self._rpc.update(
                "release",
                _rpc.dump(models.ReleaseInput(destroy_runtime=destroy_runtime or None)),
                policy=_rpc.Policy(retries=0, backoff=0),
            )
        except errors.WorkspaceNotFound:
            return models.ReleaseResult(workspace_id=self.id, runtime="not running")
        return models.ReleaseResult.model_validate(out)

    async def destroy(self, discard: bool = False) -> models.DestroyResult:
        """End the workspace for good; unless ``discard`` its unsaved work is kept restorable
        (docs/API.md "Destroy")."""
        out = await self._rpc.update_with_start(
            "destroy", _rpc.dump(models.DestroyInput(discard=discard or None))
        )
        return models.DestroyResult.model_validate(out)

    async def restore(self) -> Workspace:
        """Bring back saved work (destroyed or evicted); refreshes the handle, whose
        ``restored_from`` names the backup (``""`` when none was pending)."""
        self.handle = models.Handle.model_validate(await self._rpc.update_with_start("restore", {}))
        return self

    async def preview_url(self, port: int) -> models.PreviewURL:
        """A URL reaching ``port`` of the running runtime (docs/API.md "Preview URLs")."""
        return await self._call("preview_url", models.PreviewURLInput(port=port), models.PreviewURL)

    async def overlaps(self) -> models.OverlapsResult:
        """Which other live workspaces of this repository, user and project changed files this
        one changed since its base, and whether the changed line ranges intersect, highest risk
        first (docs/API.md "Overlaps"). Read-only."""
        return await self._call("overlaps", None, models.OverlapsResult)

    async def setup(self) -> models.SetupState:
        """Run the repository's setup commands again now (a running setup is waited for) and
        return their outcome: ``state`` ``"done"`` or ``"failed"``, ``exit_code``, output tails
        (docs/RUNTIMES.md "Setup"). Raises InvalidArgument when the repository names none."""
        return await self._call("setup", None, models.SetupState)

    async def mcp_token(self, ttl: float | timedelta = 3600, *, key_file: str | None = None) -> str:
        """A bearer token opening this workspace, and no other, on the endpoint of ``sandboxctl
        mcp --http ADDR --multi --key-file FILE`` (``http://ADDR/mcp/<id>``) for ``ttl`` (seconds
        or a timedelta, 1 s to 30 days), made here with the endpoint's key file: ``key_file``, else
        the file ``SANDBOX_MCP_KEY_FILE`` names (:mod:`sandboxcore.mcp_token`). Nothing is sent.
        Raises InvalidArgument (no or a bad key file, a ttl out of range). Its id and expiry:
        :meth:`issue_mcp_token`, or ``mcp_token.parse(token)``."""
        return mcp_token.mint_with_key_file(self.id, ttl, key_file)

    async def issue_mcp_token(
        self, ttl: float | timedelta = 3600, *, key_file: str | None = None
    ) -> MintedToken:
        """As :meth:`mcp_token`, with what the token says: ``token``, ``workspace_id``,
        ``token_id`` (32 random hex digits) and ``expiry`` (Unix seconds). Record the id and expiry
        to revoke the token before it expires: ``sandboxctl mcp revoke --id TOKEN_ID --expires-at
        T --revoked-file FILE`` on the endpoint's revocation list (docs/SECURITY.md "The MCP
        server"). Nothing is sent. Raises InvalidArgument as :meth:`mcp_token`."""
        return mcp_token.issue_with_key_file(self.id, ttl, key_file)

    async def describe(self) -> models.SessionDescription:
        """The session's state (query ``describe``)."""
        return models.SessionDescription.model_validate(await self._rpc.query("describe"))

    async def eviction(self) -> models.EvictionState:
        """The eviction state: pin and last eviction (query ``eviction``)."""
        return models.EvictionState.model_validate(await self._rpc.query("eviction"))

    async def pin(self, until: datetime | timedelta) -> models.EvictionState:
        """Keep the workspace from eviction until ``until`` (a time, or from now); waits until
        the session applied it. Raises InvalidArgument (not in the future)."""
        when = datetime.now(timezone.utc) + until if isinstance(until, timedelta) else until
        if when.tzinfo is None:
            raise errors.InvalidArgument("pin until: want an aware datetime", field="until")
        if when <= datetime.now(timezone.utc):
            raise errors.InvalidArgument(
                f"pin until {when.isoformat()}: must be in the future", field="until"
            )
        return await self._pin_signal("pin", when)

    async def unpin(self) -> models.EvictionState:
        """Drop the pin; waits until the session applied it."""
        return await self._pin_signal("unpin", None)

    async def _pin_signal(self, name: str, until: datetime | None) -> models.EvictionState:
        request_id = _rpc.new_update_id(name)
        arg: dict[str, Any] = {"request_id": request_id}
        if until is not None:
            arg["until"] = until.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")
        await self._rpc.signal_with_start(name, arg)
        while True:
            with contextlib.suppress(errors.WorkspaceNotFound):
                st = await self.eviction()
                if st.last_pin_request == request_id:
                    if st.pin_error:
                        cls = errors.ERROR_TYPES.get(st.pin_error_type or "", errors.SandboxError)
                        raise cls(st.pin_error)
                    return st
            await asyncio.sleep(0.1)
