"""The blocking twins of the asynchronous API, for code without an event loop (a Celery task,
a script, a notebook cell).

:class:`Client` runs an :class:`~sandboxcore.client.AsyncClient` on a private event loop in a
daemon thread; every method has the same name, arguments and result as its asynchronous twin
and blocks until it is done. An interrupted call (``KeyboardInterrupt``) cancels what it started
on the loop — an exec's command is cancelled on the worker, as in the asynchronous API.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, overload

from . import models
from .client import AsyncClient, Fanout, SessionSummary
from .workspace import (
    CANCEL_WAIT_S,
    Checkpoints,
    ExecChunk,
    ExecStream,
    Files,
    Git,
    Process,
    Processes,
    Workspace,
)

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")


class EventLoopThread:
    """An event loop running in a daemon thread; :meth:`run` blocks on one coroutine."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self.loop.run_forever, name="sandboxcore-loop", daemon=True
        )
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the loop and return its result (or raise its exception). Raises
        RuntimeError once closed."""
        if self.loop.is_closed() or not self._thread.is_alive():
            raise RuntimeError("sandboxcore: the client is closed")
        fut = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return fut.result()
        except BaseException:
            if not fut.done():
                # Interrupted (KeyboardInterrupt): cancel the task and let it clean up
                # (an exec sends its cancel) before giving control back.
                fut.cancel()
                with _suppress_all():
                    fut.result(timeout=CANCEL_WAIT_S)
            raise

    def close(self) -> None:
        """Stop the loop and its thread (idempotent)."""
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=5)
        if not self.loop.is_running():
            self.loop.close()


class _suppress_all:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> bool:
        return True


class _Twin:
    """A blocking object over an asynchronous one (``_async``) and the loop it lives on."""

    def __init__(self, loop: EventLoopThread, target: Any):
        self._loop = loop
        self._async = target


class _blocking(Generic[P, R]):
    """A method of a :class:`_Twin` that runs the asynchronous method ``fn`` on the twin's
    loop, keeping its signature for type checkers."""

    def __init__(self, fn: Callable[Concatenate[Any, P], Awaitable[R]]):
        self._fn = fn

    @overload
    def __get__(self, obj: None, owner: type[Any]) -> _blocking[P, R]: ...
    @overload
    def __get__(self, obj: _Twin, owner: type[Any]) -> Callable[P, R]: ...
    def __get__(self, obj: _Twin | None, owner: type[Any]) -> Any:
        if obj is None:
            return self
        fn = self._fn

        @functools.wraps(fn)
        def call(*args: P.args, **kwargs: P.kwargs) -> R:
            async def run() -> R:
                return await fn(obj._async, *args, **kwargs)

            return obj._loop.run(run())

        return call


class SyncFiles(_Twin):
    """Blocking :class:`~sandboxcore.workspace.Files`."""

    read = _blocking(Files.read)
    read_file = _blocking(Files.read_file)
    write = _blocking(Files.write)
    edit = _blocking(Files.edit)
    list = _blocking(Files.list)
    search = _blocking(Files.search)


class SyncGit(_Twin):
    """Blocking :class:`~sandboxcore.workspace.Git`."""

    status = _blocking(Git.status)
    diff = _blocking(Git.diff)
    log = _blocking(Git.log)
    commit = _blocking(Git.commit)
    push = _blocking(Git.push)
    pull_request = _blocking(Git.pull_request)
    merge = _blocking(Git.merge)


class SyncProcess(_Twin):
    """Blocking :class:`~sandboxcore.workspace.Process`."""

    _async: Process

    @property
    def id(self) -> str:
        """The process id."""
        return self._async.id

    @property
    def info(self) -> models.ProcessInfo | None:
        """The newest ProcessInfo known."""
        return self._async.info

    read = _blocking(Process.read)
    write = _blocking(Process.write)
    signal = _blocking(Process.signal)
    kill = _blocking(Process.kill)
    resize = _blocking(Process.resize)
    wait = _blocking(Process.wait)

    def output(self) -> Iterator[ExecChunk]:
        """Every byte the process writes, as it comes, until it ended."""
        return _iterate(self._loop, self._async.output())


class SyncProcesses(_Twin):
    """Blocking :class:`~sandboxcore.workspace.Processes`."""

    _async: Processes

    def start(self, *args: Any, **kwargs: Any) -> SyncProcess:
        """As :meth:`Processes.start <sandboxcore.workspace.Processes.start>`."""
        return SyncProcess(self._loop, self._loop.run(self._async.start(*args, **kwargs)))

    def attach(self, process_id: str) -> SyncProcess:
        """A handle on an existing process."""
        return SyncProcess(self._loop, self._async.attach(process_id))

    read = _blocking(Processes.read)
    write = _blocking(Processes.write)
    signal = _blocking(Processes.signal)
    resize = _blocking(Processes.resize)
    list = _blocking(Processes.list)


class SyncCheckpoints(_Twin):
    """Blocking :class:`~sandboxcore.workspace.Checkpoints`."""

    create = _blocking(Checkpoints.create)
    list = _blocking(Checkpoints.list)
    rollback = _blocking(Checkpoints.rollback)


def _iterate(loop: EventLoopThread, it: AsyncIterator[T]) -> Iterator[T]:
    async def step() -> T:
        return await it.__anext__()

    while True:
        try:
            yield loop.run(step())
        except StopAsyncIteration:
            return


class SyncExecStream(_Twin):
    """Blocking :class:`~sandboxcore.workspace.ExecStream`: ``for chunk in stream``, then
    ``stream.result()``; leaving ``with`` before the end cancels the command."""

    _async: ExecStream

    def __iter__(self) -> Iterator[ExecChunk]:
        return _iterate(self._loop, self._async.__aiter__())

    def __enter__(self) -> SyncExecStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.run(self._async.__aexit__(*exc))

    result = _blocking(ExecStream.result)


class SyncWorkspace(_Twin):
    """Blocking :class:`~sandboxcore.workspace.Workspace`: the same attributes, sub-APIs and
    methods; ``with`` releases the session on exit."""

    _async: Workspace

    def __init__(self, loop: EventLoopThread, target: Workspace):
        super().__init__(loop, target)
        self.files = SyncFiles(loop, target.files)
        self.git = SyncGit(loop, target.git)
        self.proc = SyncProcesses(loop, target.proc)
        self.checkpoints = SyncCheckpoints(loop, target.checkpoints)

    def __getattr__(self, name: str) -> Any:
        # The handle's attributes (id, branch, base_commit, ...) are the async workspace's.
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._async, name)

    def __repr__(self) -> str:
        return "Sync" + repr(self._async)

    def __enter__(self) -> SyncWorkspace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    @property
    def id(self) -> str:
        """The workspace id."""
        return self._async.id

    @property
    def handle(self) -> models.Handle:
        """The handle as last returned by the worker."""
        return self._async.handle

    exec = _blocking(Workspace.exec)
    cancel = _blocking(Workspace.cancel)
    read_output = _blocking(Workspace.read_output)
    hibernate = _blocking(Workspace.hibernate)
    release = _blocking(Workspace.release)
    destroy = _blocking(Workspace.destroy)
    preview_url = _blocking(Workspace.preview_url)
    overlaps = _blocking(Workspace.overlaps)
    setup = _blocking(Workspace.setup)
    describe = _blocking(Workspace.describe)
    mcp_token = _blocking(Workspace.mcp_token)
    issue_mcp_token = _blocking(Workspace.issue_mcp_token)
    eviction = _blocking(Workspace.eviction)
    pin = _blocking(Workspace.pin)
    unpin = _blocking(Workspace.unpin)

    def exec_stream(self, *args: Any, **kwargs: Any) -> SyncExecStream:
        """As :meth:`Workspace.exec_stream <sandboxcore.workspace.Workspace.exec_stream>`."""
        return SyncExecStream(self._loop, self._async.exec_stream(*args, **kwargs))

    def fork(
        self, *, task_id: str | None = None, conversation_id: str | None = None
    ) -> SyncWorkspace:
        """As :meth:`Workspace.fork <sandboxcore.workspace.Workspace.fork>`."""
        child = self._loop.run(self._async.fork(task_id=task_id, conversation_id=conversation_id))
        return SyncWorkspace(self._loop, child)

    def refresh(self) -> SyncWorkspace:
        """As :meth:`Workspace.refresh <sandboxcore.workspace.Workspace.refresh>`."""
        self._loop.run(self._async.refresh())
        return self

    def restore(self) -> SyncWorkspace:
        """As :meth:`Workspace.restore <sandboxcore.workspace.Workspace.restore>`."""
        self._loop.run(self._async.restore())
        return self


class SyncFanout(_Twin):
    """Blocking :class:`~sandboxcore.client.Fanout`."""

    _async: Fanout

    @property
    def id(self) -> str:
        """The fan-out id."""
        return self._async.id

    @property
    def workflow_id(self) -> str:
        """The fan-out's workflow id (the legacy one once a call found the fan-out there)."""
        return self._async.workflow_id

    progress = _blocking(Fanout.progress)
    result = _blocking(Fanout.result)
    complete_task = _blocking(Fanout.complete_task)
    cancel = _blocking(Fanout.cancel)


class Client:
    """The blocking client: :meth:`connect` takes the arguments of
    :meth:`AsyncClient.connect <sandboxcore.client.AsyncClient.connect>`; ``with`` closes it."""

    def __init__(self, loop: EventLoopThread, client: AsyncClient):
        self._loop = loop
        #: The asynchronous client this one drives (on its own loop: do not await it elsewhere).
        self.async_client = client

    @classmethod
    def connect(cls, *args: Any, **kwargs: Any) -> Client:
        """Connect as :meth:`AsyncClient.connect`; raises its errors."""
        loop = EventLoopThread()
        try:
            client = loop.run(AsyncClient.connect(*args, **kwargs))
        except BaseException:
            loop.close()
            raise
        return cls(loop, client)

    @property
    def task_queue(self) -> str:
        """The task queue sessions start on."""
        return self.async_client.task_queue

    def close(self) -> None:
        """Stop the client's event loop thread."""
        self._loop.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def acquire(self, **kwargs: Any) -> SyncWorkspace:
        """As :meth:`AsyncClient.acquire <sandboxcore.client.AsyncClient.acquire>`."""
        return SyncWorkspace(self._loop, self._loop.run(self.async_client.acquire(**kwargs)))

    def workspace(self, workspace_id: str) -> SyncWorkspace:
        """As :meth:`AsyncClient.workspace <sandboxcore.client.AsyncClient.workspace>`."""
        return SyncWorkspace(self._loop, self._loop.run(self.async_client.workspace(workspace_id)))

    def list(self, **kwargs: Any) -> list[SessionSummary]:
        """As :meth:`AsyncClient.list <sandboxcore.client.AsyncClient.list>`."""
        return self._loop.run(self.async_client.list(**kwargs))

    def fanout(self, fanout_id: str, **kwargs: Any) -> SyncFanout:
        """As :meth:`AsyncClient.fanout <sandboxcore.client.AsyncClient.fanout>`."""
        return SyncFanout(self._loop, self._loop.run(self.async_client.fanout(fanout_id, **kwargs)))

    def fanout_handle(self, fanout_id: str, *, user_id: str, project_id: str) -> SyncFanout:
        """As :meth:`AsyncClient.fanout_handle <sandboxcore.client.AsyncClient.fanout_handle>`."""
        return SyncFanout(
            self._loop,
            self.async_client.fanout_handle(fanout_id, user_id=user_id, project_id=project_id),
        )

    def cleanup(self, **kwargs: Any) -> models.CleanupReport:
        """As :meth:`AsyncClient.cleanup <sandboxcore.client.AsyncClient.cleanup>`."""
        return self._loop.run(self.async_client.cleanup(**kwargs))

    def evict_now(self, **kwargs: Any) -> models.EvictionRunResult:
        """As :meth:`AsyncClient.evict_now <sandboxcore.client.AsyncClient.evict_now>`."""
        return self._loop.run(self.async_client.evict_now(**kwargs))


__all__ = [
    "Client",
    "EventLoopThread",
    "SyncCheckpoints",
    "SyncExecStream",
    "SyncFanout",
    "SyncFiles",
    "SyncGit",
    "SyncProcess",
    "SyncProcesses",
    "SyncWorkspace",
]
