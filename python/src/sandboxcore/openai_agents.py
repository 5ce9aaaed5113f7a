"""sandboxcore workspaces as sandboxes of the OpenAI Agents SDK (``agents.sandbox``).

:class:`SandboxcoreSandboxClient` implements the SDK's ``BaseSandboxClient`` contract
(openai-agents 0.24) on top of :class:`sandboxcore.AsyncClient`: a sandbox session is one
sandboxcore workspace (a git worktree with its runtime), so the tools the SDK gives a
``SandboxAgent`` (``exec_command``, ``write_stdin``, ``apply_patch``, ``view_image``) run
against it.

.. code-block:: python

    from agents import Runner, RunConfig
    from agents.run_config import SandboxRunConfig
    from agents.sandbox import SandboxAgent
    from sandboxcore import AsyncClient
    from sandboxcore.openai_agents import (
        SandboxcoreSandboxClient, SandboxcoreSandboxClientOptions)

    client = SandboxcoreSandboxClient(await AsyncClient.connect(), user_id="alice",
                                      project_id="p1", repo_url="https://github.com/acme/app.git")
    result = await Runner.run(
        SandboxAgent(name="coder", instructions="..."), "fix the bug",
        run_config=RunConfig(sandbox=SandboxRunConfig(
            client=client, options=SandboxcoreSandboxClientOptions(conversation_id="c42"))))

How the contract maps:

- ``create`` acquires the workspace of the options' key (a new ``conversation_id`` per session
  when none is given); the manifest's root becomes the worktree's path inside the runtime
  (``/workspace`` on isolated runtimes).
- ``resume`` reattaches by the workspace id kept in the session state
  (:meth:`AsyncClient.workspace`, which also brings an evicted workspace back); a workspace
  destroyed without discard is restored (``restore``); one whose work was discarded is
  acquired again from the state's key, fresh.
- ``delete`` destroys the workspace, keeping its unsaved work restorable (``on_delete``:
  ``"destroy"``, the default), or discards it (``"discard"``), or only releases the session
  so that the workspace stays as it is (``"release"``).
- ``exec`` is :meth:`Workspace.exec`, file reads and writes are ``ws.files`` (up to 1 MiB; larger
  files go through ``exec``), PTY sessions (``pty_exec_start``/``pty_write_stdin``) are
  background processes (``ws.proc``, with a terminal when ``tty``), ``shutdown`` releases the
  session, exposed ports are preview URLs.
- The workspace is durable by itself, so ``stop`` persists no SDK snapshot (a tar of the
  worktree); ``persist_workspace``/``hydrate_workspace`` still work when called directly.

Inside a Temporal workflow the SDK's sandbox calls run as activities when the client is
registered with ``OpenAIAgentsPlugin(sandbox_clients=[SandboxClientProvider("sandboxcore",
SandboxcoreSandboxClient(...))])`` of the standalone ``temporalio-openai-agents`` package; the
served ``temporalio.contrib.openai_agents`` (temporalio 1.35) only forwards to that package, whose
releases so far require openai-agents < 0.23. The session state is plain JSON and ``resume``
reattaches by workspace id, so a session can move between activity workers.

sandboxcore's typed errors come back as the SDK's error types (``WorkspaceReadNotFoundError``,
``WorkspaceArchiveReadError``/``WorkspaceArchiveWriteError``, ``ExecTransportError``,
``ExecTimeoutError``...), whose text names the path and the sandboxcore error, so the SDK hands
a readable message to the model; ``retryable`` is sandboxcore's.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import shlex
import time
import uuid
from collections import deque
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal, TypeVar
from urllib.parse import urlsplit

from agents.sandbox.errors import (
    ExecTimeoutError,
    ExecTransportError,
    ExposedPortUnavailableError,
    SandboxError,
    WorkspaceArchiveReadError,
    WorkspaceArchiveWriteError,
    WorkspaceReadNotFoundError,
    WorkspaceStartError,
    WorkspaceStopError,
    WorkspaceWriteTypeError,
)
from agents.sandbox.manifest import Manifest
from agents.sandbox.session.base_sandbox_session import BaseSandboxSession
from agents.sandbox.session.dependencies import Dependencies
from agents.sandbox.session.manager import Instrumentation
from agents.sandbox.session.pty_output import collect_pty_output
from agents.sandbox.session.pty_types import (
    PTY_PROCESSES_MAX,
    PtyExecUpdate,
    allocate_pty_process_id,
    clamp_pty_yield_time_ms,
    process_id_to_prune_from_meta,
    resolve_pty_write_yield_time_ms,
)
from agents.sandbox.session.sandbox_client import BaseSandboxClient, BaseSandboxClientOptions
from agents.sandbox.session.sandbox_session import SandboxSession
from agents.sandbox.session.sandbox_session_state import SandboxSessionState
from agents.sandbox.session.tar_workspace import shell_tar_exclude_args
from agents.sandbox.snapshot import SnapshotBase, SnapshotSpec, resolve_snapshot
from agents.sandbox.types import ExecResult, ExposedPortEndpoint, User
from agents.sandbox.util.tar_utils import UnsafeTarMemberError, validate_tar_bytes
from agents.sandbox.workspace_paths import coerce_posix_path, posix_path_as_path

from . import _rpc, errors, models
from .client import AsyncClient, Mode
from .workspace import MAX_FILE_BYTES, MAX_READ_WAIT_S, Network, Process, Workspace

__all__ = [
    "BACKEND_ID",
    "DEFAULT_MANIFEST_ROOT",
    "OnDelete",
    "SandboxcoreSandboxClient",
    "SandboxcoreSandboxClientOptions",
    "SandboxcoreSandboxSession",
    "SandboxcoreSandboxSessionState",
    "workspace_of",
]

#: The SDK backend id (``BaseSandboxClient.backend_id``) and the ``type`` of the options and
#: the session state.
BACKEND_ID = "sandboxcore"
#: The SDK's default ``Manifest.root``: a manifest with it gets the worktree's own path.
DEFAULT_MANIFEST_ROOT: str = Manifest.model_fields["root"].default
#: What ``delete`` does: destroy keeping unsaved work restorable, destroy discarding it, or
#: only release the session (the workspace stays).
OnDelete = Literal["destroy", "discard", "release"]
#: The terminal size of a PTY session (the SDK's contract has no size).
PTY_SIZE = (24, 80)
#: Longest exec timeout the worker accepts, in seconds.
MAX_EXEC_TIMEOUT_S = 7200
#: Bytes sent per exec when uploading through stdin (the worker takes at most 512 KiB of
#: stdin: sandboxapi.MaxStdinBytes).
STDIN_CHUNK_BYTES = 384 << 10

_E = TypeVar("_E", bound=SandboxError)


class SandboxcoreSandboxClientOptions(BaseSandboxClientOptions):
    """Options of :meth:`SandboxcoreSandboxClient.create` (``SandboxRunConfig.options``).

    Every field left ``None`` takes the client's default. ``conversation_id`` (edit mode) or
    ``task_id`` (task mode) names the workspace of the key: when absent, each created session
    gets a new one (and so a new workspace)."""

    type: Literal["sandboxcore"] = "sandboxcore"
    user_id: str | None = None
    project_id: str | None = None
    repo_url: str | None = None
    mode: Mode | None = None
    conversation_id: str | None = None
    task_id: str | None = None
    base_ref: str | None = None
    branch_name: str | None = None
    network: Network | None = None
    on_delete: OnDelete | None = None
    exposed_ports: tuple[int, ...] = ()


class SandboxcoreSandboxSessionState(SandboxSessionState):
    """The serializable state of a session: the workspace id that ``resume`` reattaches to,
    and the key (``acquire`` request) that acquires it again when nothing of it was kept."""

    type: Literal["sandboxcore"] = "sandboxcore"
    workspace_id: str
    user_id: str
    project_id: str
    repo_url: str
    mode: Mode = "edit"
    conversation_id: str | None = None
    task_id: str | None = None
    base_ref: str = ""
    branch_name: str | None = None
    network: Network | None = None
    on_delete: OnDelete = "destroy"
    #: The workspace's branch when the session was created or resumed (informational).
    branch: str = ""


@dataclass(frozen=True)
class _Key:
    """The acquire request of a session's workspace (kept in its state)."""

    user_id: str
    project_id: str
    repo_url: str
    mode: Mode
    conversation_id: str | None
    task_id: str | None
    base_ref: str
    branch_name: str | None
    network: Network | None

    @classmethod
    def of(cls, state: SandboxcoreSandboxSessionState) -> _Key:
        return cls(
            user_id=state.user_id,
            project_id=state.project_id,
            repo_url=state.repo_url,
            mode=state.mode,
            conversation_id=state.conversation_id,
            task_id=state.task_id,
            base_ref=state.base_ref,
            branch_name=state.branch_name,
            network=state.network,
        )

    async def acquire(self, client: AsyncClient) -> Workspace:
        return await client.acquire(
            user_id=self.user_id,
            project_id=self.project_id,
            repo_url=self.repo_url,
            mode=self.mode,
            conversation_id=self.conversation_id,
            task_id=self.task_id,
            base_ref=self.base_ref,
            branch_name=self.branch_name,
            network=self.network,
        )


def _with_message(err: _E, message: str) -> _E:
    """``err`` with ``message`` as its text (the SDK's classes fix theirs)."""
    err.message = message
    err.args = (message,)
    return err


def _context(err: errors.SandboxcoreError) -> dict[str, object]:
    return {"backend": BACKEND_ID, "error_type": err.type, "error": err.message}


def _start_error(path: str, err: errors.SandboxcoreError, what: str) -> WorkspaceStartError:
    return WorkspaceStartError(
        path=posix_path_as_path(coerce_posix_path(path)),
        context=_context(err),
        cause=err,
        message=f"{what}: {err}",
        retryable=err.retryable,
    )


@dataclass
class _PtyEntry:
    """One PTY session: a background process of the workspace and its unread output."""

    process: Process
    tty: bool
    last_used: float = field(default_factory=time.monotonic)
    chunks: deque[bytes] = field(default_factory=deque)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    notify: asyncio.Event = field(default_factory=asyncio.Event)
    closed: bool = False
    exit_code: int | None = None


class SandboxcoreSandboxSession(BaseSandboxSession):
    """An SDK sandbox session on one sandboxcore workspace (``workspace``: the
    :class:`~sandboxcore.Workspace`, e.g. for ``workspace.git.commit``).

    Paths are the SDK's: relative to ``state.manifest.root`` (the worktree's path inside the
    runtime) or absolute under it."""

    state: SandboxcoreSandboxSessionState

    def __init__(
        self,
        *,
        state: SandboxcoreSandboxSessionState,
        workspace: Workspace,
        pty: bool = True,
    ) -> None:
        """A session on ``workspace`` (``pty``: whether its runtime has PTY processes)."""
        self.state = state
        self._ws = workspace
        self._pty = pty
        self._running = False
        self._pty_lock = asyncio.Lock()
        self._pty_entries: dict[int, _PtyEntry] = {}
        self._pty_ids: set[int] = set()

    @property
    def workspace(self) -> Workspace:
        """The sandboxcore workspace behind this session."""
        return self._ws

    # Lifecycle.

    def supports_pty(self) -> bool:
        """Whether ``pty_exec_start`` runs commands as background processes (then the SDK's
        ``exec_command`` can leave a command running and ``write_stdin`` talk to it)."""
        return self._pty

    async def _after_start(self) -> None:
        self._running = True

    async def _after_start_failed(self) -> None:
        self._running = False

    async def _persist_snapshot(self) -> None:
        # The workspace is durable by itself (sandboxcore keeps it, and saves its unsaved work
        # on eviction and destroy): no tar of it is taken at every stop.
        return

    async def _shutdown_backend(self) -> None:
        # Release the session: the runtime stops, the workspace stays (the next operation, or a
        # resume, brings it back).
        with contextlib.suppress(errors.SandboxcoreError):
            await self._ws.release()

    async def _after_shutdown(self) -> None:
        self._running = False

    async def running(self) -> bool:
        """Whether the session was started and not shut down since."""
        return self._running

    async def _resolve_exposed_port(self, port: int) -> ExposedPortEndpoint:
        try:
            preview = await self._ws.preview_url(port)
        except errors.SandboxcoreError as e:
            raise ExposedPortUnavailableError(
                port=port,
                exposed_ports=self.state.exposed_ports,
                reason="backend_unavailable",
                context=_context(e),
                cause=e,
                retryable=e.retryable,
            ) from e
        split = urlsplit(preview.url)
        tls = split.scheme == "https"
        return ExposedPortEndpoint(
            host=split.hostname or "",
            port=split.port or (443 if tls else 80),
            tls=tls,
            query=split.query,
        )

    # Commands.

    async def _env(self) -> dict[str, str]:
        return dict(await self.state.manifest.environment.resolve())

    async def _exec_internal(
        self, *command: str | Path, timeout: float | None = None
    ) -> ExecResult:
        argv = [str(c) for c in command]
        timeout_s = None if timeout is None else min(max(timeout, 0.001), MAX_EXEC_TIMEOUT_S)
        try:
            r = await self._ws.exec(argv, env=await self._env() or None, timeout_s=timeout_s)
        except errors.SandboxcoreError as e:
            raise ExecTransportError(
                command=argv,
                context=_context(e),
                cause=e,
                message=f"exec failed: {e}",
                retryable=e.retryable,
            ) from e
        if r.timed_out:
            raise ExecTimeoutError(command=argv, timeout_s=timeout)
        return ExecResult(stdout=r.stdout or b"", stderr=r.stderr or b"", exit_code=r.exit_code)

    async def _exec_output(
        self, argv: list[str], *, stdin: bytes | None = None
    ) -> tuple[int, bytes, bytes]:
        """Run ``argv`` and return its exit code and whole stdout (paged through kept output
        when longer than the exec's cap, up to 32 MiB) and stderr. Raises SandboxcoreError."""
        r = await self._ws.exec(argv, stdin=stdin, keep_output=True)
        out = r.stdout or b""
        if r.output_id and r.stdout_bytes > len(out):
            page = bytearray()
            while True:
                chunk = await self._ws.read_output(r.output_id, offset=len(page), limit=1 << 20)
                page += chunk.data or b""
                if chunk.eof or not chunk.data:
                    break
            out = bytes(page)
        return r.exit_code, out, r.stderr or b""

    async def _upload(self, data: bytes) -> str:
        """Copy ``data`` into a new temporary file of the runtime (in stdin pieces) and
        return its path. Raises SandboxcoreError, WorkspaceArchiveWriteError."""
        code, out, err = await self._exec_output(["mktemp"])
        tmp = out.decode().strip()
        if code != 0 or not tmp:
            raise WorkspaceArchiveWriteError(
                path=Path("/tmp"),
                context={"backend": BACKEND_ID, "stderr": err.decode(errors="replace")},
                message=f"cannot make a temporary file: {err.decode(errors='replace').strip()}",
            )
        step = STDIN_CHUNK_BYTES
        for at in range(0, max(len(data), 1), step):
            code, _, err = await self._exec_output(
                ["sh", "-c", 'cat >> "$1"', "sh", tmp], stdin=data[at : at + step]
            )
            if code != 0:
                raise WorkspaceArchiveWriteError(
                    path=Path(tmp),
                    context={"backend": BACKEND_ID, "stderr": err.decode(errors="replace")},
                )
        return tmp

    # PTY sessions: background processes of the workspace.

    async def pty_exec_start(
        self,
        *command: str | Path,
        timeout: float | None = None,
        shell: bool | list[str] = True,
        user: str | User | None = None,
        tty: bool = False,
        yield_time_s: float | None = None,
        max_output_tokens: int | None = None,
    ) -> PtyExecUpdate:
        """Start ``command`` as a background process of the workspace (with a terminal when
        ``tty``), return its output until it ends or ``yield_time_s`` passes; a process still
        running keeps an id for :meth:`pty_write_stdin`. ``timeout`` is not applied (as for the
        SDK's local sandbox): the process runs until it ends or the session stops."""
        _ = timeout
        argv = self._prepare_exec_command(*command, shell=shell, user=user)
        pruned: _PtyEntry | None = None
        async with self._pty_lock:
            if len(self._pty_entries) >= PTY_PROCESSES_MAX:
                pruned = self._prune_pty_entry()
        if pruned is not None:
            await self._terminate(pruned)
        try:
            proc = await self._ws.proc.start(
                argv, env=await self._env() or None, pty=PTY_SIZE if tty else None
            )
        except errors.SandboxcoreError as e:
            # Nothing ran: the SDK may run the command again as a one-shot exec.
            raise ExecTransportError(
                command=argv,
                context={**_context(e), "retry_safe": True},
                cause=e,
                message=f"cannot start the process: {e}",
                retryable=e.retryable,
            ) from e
        entry = _PtyEntry(process=proc, tty=tty)
        async with self._pty_lock:
            session_id = allocate_pty_process_id(self._pty_ids)
            self._pty_ids.add(session_id)
            self._pty_entries[session_id] = entry
        yield_ms = 10_000 if yield_time_s is None else int(yield_time_s * 1000)
        return await self._collect(
            session_id, entry, clamp_pty_yield_time_ms(yield_ms), max_output_tokens
        )

    async def pty_write_stdin(
        self,
        *,
        session_id: int,
        chars: str,
        yield_time_s: float | None = None,
        max_output_tokens: int | None = None,
    ) -> PtyExecUpdate:
        """Write ``chars`` to the terminal of PTY session ``session_id`` (empty: only poll) and
        return its new output. Raises PtySessionNotFoundError, RuntimeError (no terminal)."""
        async with self._pty_lock:
            entry = self._resolve_pty_session_entry(
                pty_processes=self._pty_entries, session_id=session_id
            )
        if chars:
            if not entry.tty:
                raise RuntimeError("stdin is not available for this process")
            # A process that ended meanwhile refuses the write; the read below reports its end.
            with contextlib.suppress(errors.SandboxCommandRejected, errors.SandboxNotFound):
                await entry.process.write(chars)
        yield_ms = 250 if yield_time_s is None else int(yield_time_s * 1000)
        entry.last_used = time.monotonic()
        return await self._collect(
            session_id,
            entry,
            resolve_pty_write_yield_time_ms(yield_time_ms=yield_ms, input_empty=chars == ""),
            max_output_tokens,
        )

    async def pty_terminate_all(self) -> None:
        """Kill every PTY session's process and forget them."""
        async with self._pty_lock:
            entries = list(self._pty_entries.values())
            self._pty_entries.clear()
            self._pty_ids.clear()
        for entry in entries:
            await self._terminate(entry)

    def _prune_pty_entry(self) -> _PtyEntry | None:
        meta = [(sid, e.last_used, e.closed) for sid, e in self._pty_entries.items()]
        sid = process_id_to_prune_from_meta(meta)
        if sid is None:
            return None
        self._pty_ids.discard(sid)
        return self._pty_entries.pop(sid, None)

    async def _terminate(self, entry: _PtyEntry) -> None:
        if not entry.closed:
            with contextlib.suppress(errors.SandboxcoreError):
                await entry.process.kill()
        entry.closed = True

    async def _collect(
        self, session_id: int, entry: _PtyEntry, yield_ms: int, max_output_tokens: int | None
    ) -> PtyExecUpdate:
        async def poll(deadline: float) -> None:
            if entry.closed:
                return
            wait = max(0.0, min(deadline - time.monotonic(), MAX_READ_WAIT_S))
            try:
                r = await entry.process.read(wait=wait)
            except errors.SandboxNotFound:
                entry.closed = True  # gone with its runtime (destroyed): nothing more to read
                return
            data = (r.data or b"") + ((r.stderr.data or b"") if r.stderr is not None else b"")
            if data:
                async with entry.lock:
                    entry.chunks.append(data)
                entry.notify.set()
            if r.eof or (r.exited and not data):
                entry.closed = True
                entry.exit_code = r.exit_code

        async def waited(_remaining: float) -> None:
            return  # poll waits on the worker (process_read's wait_ms)

        try:
            output, original_token_count, closed = await collect_pty_output(
                output_chunks=entry.chunks,
                output_lock=entry.lock,
                output_notify=entry.notify,
                is_done=lambda: entry.closed,
                yield_time_ms=yield_ms,
                max_output_tokens=max_output_tokens,
                poll_output=poll,
                wait_for_output=waited,
            )
        except errors.SandboxcoreError as e:
            raise ExecTransportError(
                command=("process_read", entry.process.id),
                context=_context(e),
                cause=e,
                message=f"cannot read the process's output: {e}",
                retryable=e.retryable,
            ) from e
        live_id: int | None = session_id
        if closed:
            async with self._pty_lock:
                self._pty_entries.pop(session_id, None)
                self._pty_ids.discard(session_id)
            live_id = None
        return PtyExecUpdate(
            process_id=live_id,
            output=output,
            exit_code=entry.exit_code if closed else None,
            original_token_count=original_token_count,
        )

    # Files.

    def _relative(self, path: Path | str) -> str | None:
        """``path`` relative to the workspace root (``None`` when outside it)."""
        try:
            rel = coerce_posix_path(path).relative_to(coerce_posix_path(self.state.manifest.root))
        except ValueError:
            return None
        return rel.as_posix() if rel.parts else None

    async def read(self, path: Path | str, *, user: str | User | None = None) -> io.IOBase:
        """A file's bytes (``ws.files.read``; through ``exec`` beyond 1 MiB or outside the
        worktree). Raises WorkspaceReadNotFoundError, WorkspaceArchiveReadError,
        InvalidManifestPathError (the path escapes the workspace)."""
        error_path = posix_path_as_path(coerce_posix_path(path))
        if user is not None:
            target = await self._check_read_with_exec(path, user=user)
        else:
            target = await self._validate_path_access(path)
        rel = self._relative(target)
        try:
            if rel is not None:
                try:
                    return io.BytesIO(await self._ws.files.read(rel))
                except errors.SandboxResourceLimit:
                    pass  # larger than 1 MiB: read it through exec
            code, out, err = await self._exec_output(["cat", "--", target.as_posix()])
        except errors.FileNotFound as e:
            raise WorkspaceReadNotFoundError(path=error_path, context=_context(e), cause=e) from e
        except errors.SandboxcoreError as e:
            raise _with_message(
                WorkspaceArchiveReadError(
                    path=error_path, context=_context(e), cause=e, retryable=e.retryable
                ),
                f"cannot read {error_path}: {e}",
            ) from e
        if code != 0:
            text = err.decode(errors="replace").strip()
            if "No such file" in text:
                raise WorkspaceReadNotFoundError(path=error_path, context={"stderr": text})
            raise _with_message(
                WorkspaceArchiveReadError(path=error_path, context={"stderr": text}),
                f"cannot read {error_path}: {text}",
            )
        return io.BytesIO(out)

    async def write(
        self, path: Path | str, data: io.IOBase, *, user: str | User | None = None
    ) -> None:
        """Create or replace a file (``ws.files.write``, which keeps an existing file's mode;
        through ``exec`` beyond 1 MiB or outside the worktree). Raises
        WorkspaceArchiveWriteError, WorkspaceWriteTypeError, InvalidManifestPathError."""
        error_path = posix_path_as_path(coerce_posix_path(path))
        if user is not None:
            await self._check_write_with_exec(path, user=user)
        payload = data.read()
        if isinstance(payload, str):
            payload = payload.encode("utf-8")
        if not isinstance(payload, bytes | bytearray):
            raise WorkspaceWriteTypeError(path=error_path, actual_type=type(payload).__name__)
        content = bytes(payload)
        target = await self._validate_path_access(path, for_write=True)
        rel = self._relative(target)
        try:
            if rel is not None and len(content) <= MAX_FILE_BYTES:
                await self._ws.files.write(rel, content)
                return
            await self._write_via_exec(target, content)
        except errors.SandboxcoreError as e:
            raise WorkspaceArchiveWriteError(
                path=error_path,
                context=_context(e),
                cause=e,
                retryable=e.retryable,
                message=f"cannot write {error_path}: {e}",
            ) from e

    async def _write_via_exec(self, target: Path, content: bytes) -> None:
        tmp = await self._upload(content)
        dest = target.as_posix()
        code, _, err = await self._exec_output(
            ["sh", "-c", 'mkdir -p -- "$(dirname -- "$2")" && mv -f -- "$1" "$2"', "sh", tmp, dest]
        )
        if code != 0:
            text = err.decode(errors="replace").strip()
            raise WorkspaceArchiveWriteError(
                path=target, context={"stderr": text}, message=f"cannot write {dest}: {text}"
            )

    # Workspace archives (the SDK's snapshots; not taken at stop, see _persist_snapshot).

    async def persist_workspace(self) -> io.IOBase:
        """A tar of the worktree (without ``.git``), workspace-relative (up to 32 MiB)."""
        root = self.state.manifest.root
        excludes = " ".join(
            ["--exclude=./.git", *shell_tar_exclude_args(self._persist_workspace_skip_relpaths())]
        )
        cmd = f"tar {excludes} -C {shlex.quote(root)} -cf - ."
        try:
            code, out, err = await self._exec_output(["sh", "-c", cmd])
        except errors.SandboxcoreError as e:
            raise WorkspaceArchiveReadError(
                path=Path(root), context=_context(e), cause=e, retryable=e.retryable
            ) from e
        if code != 0:
            raise WorkspaceArchiveReadError(
                path=Path(root),
                context={"reason": "tar_failed", "stderr": err.decode(errors="replace")},
            )
        return io.BytesIO(out)

    async def hydrate_workspace(self, data: io.IOBase) -> None:
        """Extract a tar made by :meth:`persist_workspace` into the worktree."""
        root = self.state.manifest.root
        payload = data.read()
        if isinstance(payload, str):
            payload = payload.encode("utf-8")
        if not isinstance(payload, bytes | bytearray):
            raise WorkspaceWriteTypeError(path=Path(root), actual_type=type(payload).__name__)
        try:
            validate_tar_bytes(bytes(payload), allow_external_symlink_targets=False)
        except UnsafeTarMemberError as e:
            raise WorkspaceArchiveWriteError(
                path=Path(root), context={"reason": e.reason, "member": e.member}, cause=e
            ) from e
        try:
            tmp = await self._upload(bytes(payload))
            code, _, err = await self._exec_output(
                ["sh", "-c", 'tar -C "$1" -xf "$2"; s=$?; rm -f -- "$2"; exit $s', "sh", root, tmp]
            )
        except errors.SandboxcoreError as e:
            raise WorkspaceArchiveWriteError(
                path=Path(root), context=_context(e), cause=e, retryable=e.retryable
            ) from e
        if code != 0:
            raise WorkspaceArchiveWriteError(
                path=Path(root),
                context={"reason": "tar_extract_failed", "stderr": err.decode(errors="replace")},
            )


def workspace_of(session: BaseSandboxSession) -> Workspace:
    """The sandboxcore workspace of an SDK session made by :class:`SandboxcoreSandboxClient`
    (the SDK's wrapper or the inner session), e.g. to commit what an agent did. Raises
    TypeError for another backend's session."""
    inner = session._inner if isinstance(session, SandboxSession) else session
    if not isinstance(inner, SandboxcoreSandboxSession):
        raise TypeError(f"not a sandboxcore session: {type(inner).__name__}")
    return inner.workspace


async def _runtime_root(ws: Workspace) -> str:
    """The worktree's path as the runtime's commands see it (their working directory)."""
    r = await ws.exec(["sh", "-c", "pwd -P"])
    root = (r.stdout or b"").decode().strip()
    if r.exit_code != 0 or not root.startswith("/"):
        raise errors.SandboxUnavailable(
            f"cannot find the worktree in the runtime: exit {r.exit_code}, "
            f"{(r.stderr or b'').decode(errors='replace').strip()}"
        )
    return root


async def _supports_pty(ws: Workspace) -> bool:
    try:
        return (await ws.proc.list()).support.pty
    except errors.SandboxCommandRejected:
        return False  # a runtime without processes


class SandboxcoreSandboxClient(BaseSandboxClient[SandboxcoreSandboxClientOptions | None]):
    """The Agents SDK sandbox client of sandboxcore: sessions are workspaces of ``client``.

    ``user_id``, ``project_id``, ``repo_url``, ``mode``, ``base_ref`` and ``network`` are the
    defaults of :class:`SandboxcoreSandboxClientOptions` (``create`` needs the first three from
    one or the other). ``on_delete`` is what ``delete`` does: for a created session the
    options' else this else ``"destroy"``; a resumed session takes this when given, else keeps
    its state's. ``instrumentation`` and ``dependencies`` are the SDK's, as for its other
    clients."""

    backend_id = BACKEND_ID
    supports_default_options = True

    def __init__(
        self,
        client: AsyncClient,
        *,
        user_id: str | None = None,
        project_id: str | None = None,
        repo_url: str | None = None,
        mode: Mode = "edit",
        base_ref: str = "",
        network: Network | None = None,
        on_delete: OnDelete | None = None,
        instrumentation: Instrumentation | None = None,
        dependencies: Dependencies | None = None,
    ) -> None:
        """A client creating and resuming workspaces through ``client``."""
        self.client = client
        self.user_id = user_id
        self.project_id = project_id
        self.repo_url = repo_url
        self.mode: Mode = mode
        self.base_ref = base_ref
        self.network = network
        self.on_delete = on_delete
        self._instrumentation = instrumentation or Instrumentation()
        self._dependencies = dependencies

    async def create(
        self,
        *,
        snapshot: SnapshotSpec | SnapshotBase | None = None,
        manifest: Manifest | None = None,
        options: SandboxcoreSandboxClientOptions | None = None,
    ) -> SandboxSession:
        """Acquire the workspace of the options' key and return a session on it (not started:
        ``async with`` it, or let the Runner start it). The manifest's root must be the SDK's
        default (it becomes the worktree's path in the runtime) or that path. Raises
        ValueError (a missing user_id, project_id or repo_url, another root),
        WorkspaceStartError (the acquire failed: its ``cause`` is the sandboxcore error)."""
        o = options or SandboxcoreSandboxClientOptions()
        user_id = o.user_id or self.user_id
        project_id = o.project_id or self.project_id
        repo_url = o.repo_url or self.repo_url
        if not (user_id and project_id and repo_url):
            raise ValueError(
                "SandboxcoreSandboxClient.create needs user_id, project_id and repo_url "
                "(from the client or SandboxcoreSandboxClientOptions)"
            )
        mode: Mode = o.mode or self.mode
        session_id = uuid.uuid4()
        conversation_id = o.conversation_id
        task_id = o.task_id
        if mode == "edit" and not conversation_id:
            conversation_id = f"oa-{session_id.hex}"
        if mode == "task" and not task_id:
            task_id = f"oa-{session_id.hex}"
        key = _Key(
            user_id=user_id,
            project_id=project_id,
            repo_url=repo_url,
            mode=mode,
            conversation_id=conversation_id if mode == "edit" else None,
            task_id=task_id if mode == "task" else None,
            base_ref=o.base_ref if o.base_ref is not None else self.base_ref,
            branch_name=o.branch_name,
            network=o.network or self.network,
        )
        try:
            ws = await key.acquire(self.client)
        except errors.SandboxcoreError as e:
            raise _start_error(DEFAULT_MANIFEST_ROOT, e, "cannot acquire the workspace") from e
        try:
            try:
                root, pty = await asyncio.gather(_runtime_root(ws), _supports_pty(ws))
            except errors.SandboxcoreError as e:
                raise _start_error(DEFAULT_MANIFEST_ROOT, e, "cannot start the workspace") from e
            manifest = self._manifest_for(manifest or Manifest(), root)
            self._validate_manifest_for_create(manifest)
            state = SandboxcoreSandboxSessionState(
                session_id=session_id,
                manifest=manifest,
                snapshot=resolve_snapshot(snapshot, str(session_id)),
                exposed_ports=o.exposed_ports,
                workspace_id=ws.id,
                branch=ws.branch,
                on_delete=o.on_delete or self.on_delete or "destroy",
                **asdict(key),
            )
        except BaseException:
            # No session owns the workspace: drop one made for it, release one that existed.
            with contextlib.suppress(Exception):
                await asyncio.shield(
                    ws.destroy(discard=True) if ws.handle.created else ws.release()
                )
            raise
        inner = SandboxcoreSandboxSession(state=state, workspace=ws, pty=pty)
        return self._wrap_session(inner, instrumentation=self._instrumentation)

    @staticmethod
    def _manifest_for(manifest: Manifest, root: str) -> Manifest:
        if manifest.root == root:
            return manifest
        if manifest.root != DEFAULT_MANIFEST_ROOT:
            raise ValueError(
                f"manifest root {manifest.root!r}: a sandboxcore workspace lives at {root!r} "
                "(leave the root at its default)"
            )
        return manifest.model_copy(update={"root": root}, deep=True)

    async def _restore(self, workspace_id: str) -> Workspace:
        rpc = _rpc.SessionRPC(self.client.temporal, self.client.task_queue, workspace_id)
        handle = models.Handle.model_validate(await rpc.update_with_start("restore", {}))
        return Workspace(self.client, handle)

    async def _reattach(self, state: SandboxcoreSandboxSessionState) -> tuple[Workspace, bool]:
        """The state's workspace and whether its files were kept: reattached (an evicted one
        is brought back by the acquire), restored (destroyed without discard), or acquired
        fresh from the key (nothing was kept)."""
        try:
            ws = await self.client.workspace(state.workspace_id)
        except errors.WorkspaceNotFound:
            try:
                return await self._restore(state.workspace_id), True
            except errors.WorkspaceNotFound:
                return await _Key.of(state).acquire(self.client), False
        if ws.handle.restorable:
            # The key was destroyed and acquired again since: bring the saved work into it
            # (refused when the new workspace has changes of its own; then it stays as it is).
            with contextlib.suppress(errors.WorkspaceDirty):
                await ws.restore()
        return ws, True

    async def resume(self, state: SandboxSessionState) -> SandboxSession:
        """A session on the state's workspace: reattached when it exists (an evicted one is
        restored by that acquire), restored when it was destroyed without discard, acquired
        anew from the state's key when nothing of it was kept (then the manifest is applied
        again at start). Raises TypeError (another backend's state), WorkspaceStartError."""
        if not isinstance(state, SandboxcoreSandboxSessionState):
            raise TypeError(
                "SandboxcoreSandboxClient.resume expects a SandboxcoreSandboxSessionState"
            )
        state.assert_path_grants_rebound()
        try:
            ws, kept = await self._reattach(state)
            root, pty = await asyncio.gather(_runtime_root(ws), _supports_pty(ws))
        except errors.SandboxcoreError as e:
            raise _start_error(state.manifest.root, e, "cannot resume the workspace") from e
        if state.manifest.root != root:
            # Another runtime kind serves the workspace now: its paths follow.
            state.manifest = state.manifest.model_copy(update={"root": root}, deep=True)
        state.workspace_id = ws.id
        state.branch = ws.branch
        if self.on_delete is not None:
            state.on_delete = self.on_delete
        if not kept:
            state.workspace_root_ready = False
        inner = SandboxcoreSandboxSession(state=state, workspace=ws, pty=pty)
        inner._set_start_state_preserved(kept, system=kept)
        return self._wrap_session(inner, instrumentation=self._instrumentation)

    async def delete(self, session: SandboxSession) -> SandboxSession:
        """End the session's workspace as its state's ``on_delete`` says: ``"destroy"`` (its
        unsaved work stays restorable: a later ``resume`` brings it back; when an earlier
        destroy's backup of the same key was never restored, the workspace is only released,
        so nothing is lost), ``"discard"`` or ``"release"``. Raises TypeError (another
        backend's session), WorkspaceStopError."""
        inner = session._inner
        if not isinstance(inner, SandboxcoreSandboxSession):
            raise TypeError("SandboxcoreSandboxClient.delete expects a SandboxcoreSandboxSession")
        ws = inner.workspace
        await inner.pty_terminate_all()
        try:
            if inner.state.on_delete == "release":
                await ws.release()
            else:
                try:
                    await ws.destroy(discard=inner.state.on_delete == "discard")
                except errors.SandboxConflict:
                    await ws.release()
        except errors.SandboxcoreError as e:
            raise WorkspaceStopError(
                path=Path(inner.state.manifest.root),
                context=_context(e),
                cause=e,
                retryable=e.retryable,
            ) from e
        inner._running = False
        return session

    def deserialize_session_state(self, payload: dict[str, object]) -> SandboxSessionState:
        """The session state serialized by ``serialize_session_state``."""
        return self._deserialize_session_state_payload(payload, SandboxcoreSandboxSessionState)
