"""deepagents: a workspace as a deepagents sandbox backend (``pip install
sandboxcore[deepagents]``; README "Use it from an agent").

.. code-block:: python

    from deepagents import create_deep_agent
    from sandboxcore.deepagents import SandboxcoreBackend

    agent = create_deep_agent(model, backend=SandboxcoreBackend(ws))

:class:`SandboxcoreBackend` implements deepagents' ``SandboxBackendProtocol`` (deepagents 0.7)
on the workspace's own operations, not by running scripts through ``execute``:

========================  ==============================================================
protocol method           workspace operation
========================  ==============================================================
``read``                  ``read_file``; the line window (``offset``/``limit``), binary
                          detection and base64 are done here, as deepagents' sandboxes do
``write``                 ``edit_file`` ``create`` (replaces the file, keeps its mode; parents
                          made), ``write_file`` for a text holding a NUL byte
``edit``                  ``edit_file`` ``str_replace`` (atomic on the worker); see below
``ls``                    ``list_dir``
``glob``                  ``list_dir`` with depth 3, walked down, matched with deepagents' own
                          glob matcher
``grep``                  ``search`` (literal), its ``glob`` pushed down to the worker
``execute``               ``exec`` of ``["sh", "-c", command]`` in the worktree
``upload_files``          ``write_file`` (bytes)
``download_files``        ``read_file`` (bytes)
========================  ==============================================================

Paths. deepagents hands absolute paths (``/src/app.py``). They are taken relative to ``root``
(default ``"/"``: ``/src/app.py`` is the worktree's ``src/app.py``); a relative path, a ``..``
component or a path outside ``root`` is refused here (and the worker refuses escapes too).
Commands run with the worktree as their working directory, so relative paths in a command mean
the same files; on the bubblewrap and Docker runtimes the worktree is ``/workspace`` inside the
sandbox, and ``root="/workspace"`` makes the tools' absolute paths the command's too.

Errors. A typed sandboxcore error never escapes: it comes back as the result's ``error`` (a
text naming the path, for the model to read), as a ``FileOperationError`` code
(``file_not_found``, ``is_directory``, ``invalid_path``, ``permission_denied``) for uploads and
downloads, or as an ``execute`` output starting ``Error:``.

Limits of the workspace, stated rather than worked around: one file read or written is at most
1 MiB (``read`` of a larger file says so and points at ``execute``); a command's output is kept
up to 512 KiB per stream (head and tail, ``truncated``); ``grep`` skips binary files and files
over 4 MiB and returns at most 5000 matches; ``glob`` stops after 10,000 files or 20 seconds
(``truncated``). ``edit`` with ``replace_all`` and more than one occurrence (or a CRLF file
matched by its LF form) reads the file and writes it whole with ``edit_file create``: not atomic
against another writer of the same file, as the worker has no compare-and-swap. ``delete`` is not
implemented (the workspace has no delete operation; ``execute`` ``rm`` does it).

deepagents' middleware may write its own files through the backend (``/large_tool_results/``,
``/conversation_history/``): route those prefixes to a ``StateBackend`` with a
``CompositeBackend`` to keep them out of the worktree (see ``examples/deepagents_agent.py``).

Sync and async. Both sets of methods are implemented. Give an asynchronous
:class:`~sandboxcore.Workspace` to run under ``agent.ainvoke``/``astream`` (the ``a*`` methods
run on the caller's loop; a blocking method called from another thread runs on that loop), or a
blocking :class:`~sandboxcore.SyncWorkspace` for ``agent.invoke`` (the blocking methods run on its
client's loop thread, the ``a*`` methods hop there and back).
"""

from __future__ import annotations

import asyncio
import base64
import codecs
import concurrent.futures
import logging
import posixpath
import re
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar, cast

from deepagents.backends.protocol import (
    EditResult,
    ExecuteResponse,
    FileData,
    FileDownloadResponse,
    FileInfo,
    FileOperationError,
    FileUploadResponse,
    GlobResult,
    GrepMatch,
    GrepResult,
    LsResult,
    ReadResult,
    SandboxBackendProtocol,
    WriteResult,
)
from deepagents.backends.sandbox import MAX_BINARY_BYTES, MAX_OUTPUT_BYTES, TRUNCATION_MSG
from deepagents.backends.utils import (
    EMPTY_OLD_STRING_ERROR,
    InvalidGlobPatternError,
    compile_grep_include_glob,
    normalize_read_bounds,
    perform_string_replacement,
)

from . import errors
from .sync import EventLoopThread, SyncWorkspace
from .workspace import MAX_FILE_BYTES, Workspace

_file_type: Callable[[str], str] | None
try:  # private in deepagents: the extension table its own sandboxes classify reads by
    from deepagents.backends.utils import _get_backend_read_file_type as _file_type
except ImportError:  # pragma: no cover - a deepagents without it: every file is text
    _file_type = None

__all__ = [
    "GLOB_BUDGET_S",
    "MAX_BINARY_READ_BYTES",
    "MAX_EXECUTE_OUTPUT_BYTES",
    "MAX_EXECUTE_TIMEOUT_S",
    "MAX_GLOB_FILES",
    "MAX_GREP_RESULTS",
    "MAX_READ_OUTPUT_BYTES",
    "SandboxcoreBackend",
]

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: Largest binary file ``read`` returns (base64): deepagents' sandboxes' (512,000 bytes).
MAX_BINARY_READ_BYTES: int = MAX_BINARY_BYTES
#: Largest text window ``read`` returns before cutting it: deepagents' sandboxes'.
MAX_READ_OUTPUT_BYTES: int = MAX_OUTPUT_BYTES
#: Output kept per stream of an ``execute`` (the worker's largest ``max_output_bytes``).
MAX_EXECUTE_OUTPUT_BYTES = 512 * 1024
#: Longest ``execute`` timeout the worker takes, in seconds (also what ``timeout=0`` means).
MAX_EXECUTE_TIMEOUT_S = 7200
#: Most matches ``grep`` asks the worker for (sandboxapi.MaxSearchResults).
MAX_GREP_RESULTS = 5000
#: Most files ``glob`` walks before it stops (``truncated``).
MAX_GLOB_FILES = 10_000
#: Longest ``glob`` walk, in seconds, before it stops (``truncated``).
GLOB_BUDGET_S = 20.0
_GLOB_META = frozenset("*?[{\\")
_DOUBLESTAR_META = frozenset("*?[]{}\\")
_GO_QUOTE_META = frozenset("\\.+*?()|[]{}^$")


class _PathRefused(Exception):
    """A path this backend refuses before sending anything (relative, ``..``, outside root)."""


# deepagents' TypedDicts mark optional keys with typing.NotRequired, which a type checker
# targeting Python 3.10 does not know: build them as plain dicts.


def _file_data(content: str, encoding: str) -> FileData:
    return cast("FileData", {"content": content, "encoding": encoding})


def _file_info(path: str, is_dir: bool, size: int) -> FileInfo:
    return cast("FileInfo", {"path": path, "is_dir": is_dir, "size": size})


def _grep_match(path: str, line: int, text: str) -> GrepMatch:
    return cast("GrepMatch", {"path": path, "line": line, "text": text})


def _read_type(path: str) -> str:
    return _file_type(path) if _file_type is not None else "text"


def _is_directory_error(e: errors.SandboxcoreError) -> bool:
    return isinstance(e, errors.InvalidWorkspacePath) and "is a directory" in e.message


def _is_not_directory_error(e: errors.SandboxcoreError) -> bool:
    return isinstance(e, errors.InvalidWorkspacePath) and "not a directory" in e.message


def _file_error(e: BaseException) -> FileOperationError | str:
    """The ``FileOperationError`` code of an upload or download failure (or its text)."""
    if isinstance(e, _PathRefused):
        return "invalid_path"
    if isinstance(e, errors.FileNotFound):
        return "file_not_found"
    if isinstance(e, errors.SandboxcoreError) and _is_directory_error(e):
        return "is_directory"
    if isinstance(e, errors.InvalidWorkspacePath):
        return "invalid_path"
    if isinstance(e, errors.SandboxCommandRejected):
        return "permission_denied"
    return _describe(e)


def _describe(e: BaseException) -> str:
    """One line for the model: the typed error as ``"<type>: <message>"``."""
    if isinstance(e, (errors.SandboxcoreError, _PathRefused)):
        return str(e)
    logger.warning("sandboxcore deepagents backend: unexpected error", exc_info=e)
    return f"{type(e).__name__}: {e}"


def _path_error(what: str, path: str, e: BaseException) -> str:
    """The error text of a failed operation on ``path`` (a protocol path)."""
    if isinstance(e, _PathRefused):
        return f"{what} '{path}': invalid_path: {e}"
    if isinstance(e, errors.FileNotFound):
        return f"{what} '{path}' not found (file_not_found)"
    if isinstance(e, errors.SandboxcoreError) and _is_directory_error(e):
        return f"{what} '{path}' is a directory (is_directory)"
    if isinstance(e, errors.SandboxcoreError) and _is_not_directory_error(e):
        return f"{what} '{path}' is not a directory"
    if isinstance(e, errors.SandboxCommandRejected):
        return f"{what} '{path}': permission_denied: {e}"
    return f"{what} '{path}': {_describe(e)}"


def _go_quote_meta(s: str) -> str:
    """``s`` as a Go (RE2) regular expression matching it literally (regexp.QuoteMeta)."""
    return "".join("\\" + c if c in _GO_QUOTE_META else c for c in s)


def _doublestar_escape(s: str) -> str:
    """``s`` as a literal in a doublestar glob (the worker's search ``glob``)."""
    return "".join("\\" + c if c in _DOUBLESTAR_META else c for c in s)


def _check_size(text: str) -> None:
    """Refuse a text the worker would refuse (edit_file sends no larger file either)."""
    if len(text.encode("utf-8", errors="surrogatepass")) > MAX_FILE_BYTES:
        raise errors.SandboxResourceLimit(f"content is larger than {MAX_FILE_BYTES} bytes")


def _join(a: str, b: str) -> str:
    return f"{a}/{b}" if a and b else a or b


class SandboxcoreBackend(SandboxBackendProtocol):
    """A sandboxcore workspace as a deepagents ``SandboxBackendProtocol`` (module docstring:
    how each method maps onto the workspace's operations, paths, errors and limits).

    Args:
        workspace: an asynchronous :class:`~sandboxcore.Workspace` (for ``ainvoke``) or a
            blocking :class:`~sandboxcore.SyncWorkspace` (for ``invoke``); both sets of methods
            work with either, within the rules of the module docstring.
        root: the absolute path the worktree's root appears at to the agent (default ``"/"``).
        max_output_bytes: output kept per stream of an ``execute`` (at most 512 KiB).
    """

    def __init__(
        self,
        workspace: Workspace | SyncWorkspace,
        *,
        root: str = "/",
        max_output_bytes: int = MAX_EXECUTE_OUTPUT_BYTES,
    ) -> None:
        if not root.startswith("/") or ".." in root.split("/"):
            raise ValueError(f"root {root!r}: want an absolute path without '..'")
        if not 0 < max_output_bytes <= MAX_EXECUTE_OUTPUT_BYTES:
            raise ValueError(f"max_output_bytes: want 1..{MAX_EXECUTE_OUTPUT_BYTES}")
        self._root = posixpath.normpath(re.sub("/+", "/", root))
        if self._root == "//":  # pragma: no cover - normpath keeps two leading slashes
            self._root = "/"
        self._max_output_bytes = max_output_bytes
        self._thread: EventLoopThread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        if isinstance(workspace, SyncWorkspace):
            self._ws: Workspace = workspace._async
            self._thread = workspace._loop
        else:
            self._ws = workspace
            try:
                self._loop = asyncio.get_running_loop()
            except RuntimeError:
                self._loop = None

    @property
    def id(self) -> str:
        """The workspace id (``ws-`` and 24 hex digits)."""
        return self._ws.id

    @property
    def workspace(self) -> Workspace:
        """The asynchronous workspace the backend drives."""
        return self._ws

    @property
    def root(self) -> str:
        """The absolute path the worktree's root appears at."""
        return self._root

    # Paths.

    def _rel(self, path: str) -> str:
        """The workspace-relative path of protocol path ``path``. Raises _PathRefused."""
        if not isinstance(path, str) or not path.startswith("/"):
            raise _PathRefused(f"want an absolute path (starting with '/'), got {path!r}")
        if "\x00" in path:
            raise _PathRefused("a path cannot hold a NUL byte")
        if ".." in path.split("/"):
            raise _PathRefused(f"'..' is not allowed in {path!r}")
        norm = posixpath.normpath(re.sub("/+", "/", path))
        if norm == "//":  # pragma: no cover
            norm = "/"
        if self._root == "/":
            return norm.lstrip("/")
        if norm == self._root:
            return ""
        if norm.startswith(self._root + "/"):
            return norm[len(self._root) + 1 :]
        raise _PathRefused(f"{path!r} is outside the workspace, whose root is {self._root!r}")

    def _abs(self, rel: str) -> str:
        """The protocol path of workspace-relative ``rel``."""
        if not rel:
            return self._root
        return ("" if self._root == "/" else self._root) + "/" + rel

    # Running on the workspace's loop.

    async def _home(self, coro: Coroutine[Any, Any, T]) -> T:
        """Await ``coro`` on the loop the workspace lives on."""
        if self._thread is None:
            self._loop = asyncio.get_running_loop()
            return await coro
        fut = asyncio.run_coroutine_threadsafe(coro, self._thread.loop)
        return await asyncio.wrap_future(fut)

    def _block(self, coro: Coroutine[Any, Any, T], fail: Callable[[str], T]) -> T:
        """Run ``coro`` to its end from blocking code; ``fail(text)`` when it cannot be."""
        if self._thread is not None:
            try:
                return self._thread.run(coro)
            except RuntimeError as e:  # the client is closed
                return fail(f"Error: {e}")
        loop = self._loop
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if loop is None or not loop.is_running() or running is loop:
            coro.close()
            return fail(
                "Error: this backend holds an asynchronous sandboxcore Workspace, and a blocking "
                "method was called "
                + (
                    "on its own event loop"
                    if running is loop and loop is not None
                    else "with no running event loop of it to use"
                )
                + ": run the agent with ainvoke/astream, or give the backend a SyncWorkspace "
                "(sandboxcore.Client) for invoke"
            )
        fut: concurrent.futures.Future[T] = asyncio.run_coroutine_threadsafe(coro, loop)
        try:
            return fut.result()
        except BaseException:
            fut.cancel()
            raise

    # execute

    async def _execute(self, command: str, timeout: int | None) -> ExecuteResponse:
        if not command or not isinstance(command, str):
            return ExecuteResponse(output="Error: Command must be a non-empty string.", exit_code=1)
        if timeout is not None and timeout < 0:
            return ExecuteResponse(
                output=f"Error: timeout must be non-negative, got {timeout}.", exit_code=1
            )
        t: int | None = None
        if timeout is not None:
            t = MAX_EXECUTE_TIMEOUT_S if timeout == 0 else min(timeout, MAX_EXECUTE_TIMEOUT_S)
        try:
            r = await self._ws.exec(
                ["sh", "-c", command], timeout_s=t, max_output_bytes=self._max_output_bytes
            )
        except Exception as e:
            return ExecuteResponse(output=f"Error: {_describe(e)}", exit_code=None)
        output = (r.stdout or b"").decode("utf-8", errors="replace")
        err = (r.stderr or b"").decode("utf-8", errors="replace")
        extra = [f"[stderr] {line}" for line in err.rstrip("\n").split("\n")] if err else []
        if r.timed_out:
            extra.append(
                f"Error: Command timed out after {t or 600} seconds"
                + ("" if timeout is not None else "; for a longer command, pass a timeout")
                + "."
            )
        elif r.cancelled:
            extra.append("Error: Command was cancelled.")
        if extra:
            output += ("\n" if output and not output.endswith("\n") else "") + "\n".join(extra)
        return ExecuteResponse(
            output=output or "<no output>", exit_code=r.exit_code, truncated=bool(r.truncated)
        )

    def execute(self, command: str, *, timeout: int | None = None) -> ExecuteResponse:
        """Run ``command`` with ``sh -c`` in the worktree: stdout, then stderr lines prefixed
        ``[stderr]``; the exit code (124 on timeout); ``truncated`` when output was cut.
        ``timeout`` in seconds (``None``: the worker's 600 s; 0: its maximum, 7200 s)."""
        return self._block(
            self._execute(command, timeout),
            lambda text: ExecuteResponse(output=text, exit_code=None),
        )

    async def aexecute(self, command: str, *, timeout: int | None = None) -> ExecuteResponse:
        """Async version of :meth:`execute`."""
        return await self._home(self._execute(command, timeout))

    # read

    async def _read(self, file_path: str, offset: int, limit: int) -> ReadResult:
        try:
            rel = self._rel(file_path)
            data = await self._ws.files.read(rel)
        except errors.SandboxResourceLimit as e:
            return ReadResult(
                error=f"File '{file_path}': {e.message}; read_file reads files of at most "
                f"{MAX_FILE_BYTES} bytes: use execute (e.g. sed -n '1,200p' FILE or head -c) "
                "to read part of it"
            )
        except Exception as e:
            return ReadResult(error=_path_error("File", file_path, e))
        if not data:
            return ReadResult(file_data=_file_data("", "utf-8"))
        binary = _read_type(file_path) != "text"
        if not binary:
            try:
                codecs.getincrementaldecoder("utf-8")().decode(data[:8192], final=False)
            except UnicodeDecodeError:
                binary = True
        if binary:
            if len(data) > MAX_BINARY_READ_BYTES:
                return ReadResult(
                    error=f"File '{file_path}': Binary file exceeds maximum preview size of "
                    f"{MAX_BINARY_READ_BYTES} bytes"
                )
            encoded = base64.b64encode(data).decode("ascii")
            return ReadResult(file_data=_file_data(encoded, "base64"))
        offset, limit = normalize_read_bounds(offset, limit)
        if limit == 0:
            return ReadResult(file_data=_file_data("", "utf-8"), no_lines_requested=True)
        text = data.decode("utf-8", errors="replace").replace("\r\n", "\n").replace("\r", "\n")
        lines = text.split("\n")
        if text.endswith("\n"):
            lines.pop()
        total = len(lines)
        if offset >= total:
            return ReadResult(
                error=f"File '{file_path}': Line offset {offset} exceeds file length "
                f"({total} lines)"
            )
        budget = MAX_READ_OUTPUT_BYTES - len(TRUNCATION_MSG.encode("utf-8"))
        parts: list[str] = []
        used = 0
        returned = 0
        truncated = False
        for line in lines[offset : offset + limit]:
            piece = line if returned == 0 else "\n" + line
            size = len(piece.encode("utf-8"))
            if used + size > budget:
                truncated = True
                head = piece.encode("utf-8")[: budget - used].decode("utf-8", errors="ignore")
                if head:
                    parts.append(head)
                break
            parts.append(piece)
            used += size
            returned += 1
        content = "".join(parts)
        if truncated:
            content += TRUNCATION_MSG
            returned = max(returned, 1)
        end = offset + returned
        return ReadResult(
            file_data=_file_data(content, "utf-8"),
            total_lines=total,
            start_line=offset + 1,
            end_line=end,
            next_offset=end if end < total else None,
        )

    def read(self, file_path: str, offset: int = 0, limit: int = 2000) -> ReadResult:
        """Lines ``offset`` (0-based) to ``offset + limit`` of a text file, joined by ``\\n``
        (CRLF read as LF), with ``total_lines``/``start_line``/``end_line``/``next_offset``;
        a binary file (by extension or content) whole as base64, up to 500 KiB."""
        return self._block(self._read(file_path, offset, limit), lambda t: ReadResult(error=t))

    async def aread(self, file_path: str, offset: int = 0, limit: int = 2000) -> ReadResult:
        """Async version of :meth:`read`."""
        return await self._home(self._read(file_path, offset, limit))

    # write

    async def _write(self, file_path: str, content: str) -> WriteResult:
        try:
            rel = self._rel(file_path)
            _check_size(content)
            try:
                await self._ws.files.edit(rel, "create", file_text=content)
            except errors.InvalidArgument as e:
                if e.field != "file_text":
                    raise
                await self._ws.files.write(rel, content)  # a NUL byte: not text to edit_file
        except Exception as e:
            return WriteResult(error=f"Error: {_path_error('Failed to write file', file_path, e)}")
        return WriteResult(path=file_path)

    def write(self, file_path: str, content: str) -> WriteResult:
        """Create or replace a file with UTF-8 ``content`` (parents made; an existing file's
        mode kept), as deepagents' protocol says; at most 1 MiB."""
        return self._block(self._write(file_path, content), lambda t: WriteResult(error=t))

    async def awrite(self, file_path: str, content: str) -> WriteResult:
        """Async version of :meth:`write`."""
        return await self._home(self._write(file_path, content))

    # edit

    async def _edit(self, file_path: str, old: str, new: str, replace_all: bool) -> EditResult:
        if not old:
            return EditResult(error=EMPTY_OLD_STRING_ERROR)
        try:
            rel = self._rel(file_path)
            if not replace_all:
                try:
                    await self._ws.files.edit(rel, "str_replace", old_str=old, new_str=new)
                    return EditResult(path=file_path, occurrences=1)
                except errors.InvalidArgument as e:
                    if e.field != "old_str":
                        raise
            data = await self._ws.files.read(rel)
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                return EditResult(error=f"Error: File '{file_path}' is not a text file")
            # As deepagents' sandboxes: read() shows CRLF as LF, so try old as sent, then its
            # CRLF form, then its LF form, and write new in the form that matched.
            old_lf, new_lf = old.replace("\r\n", "\n"), new.replace("\r\n", "\n")
            candidates = (
                (old, new),
                (old_lf.replace("\n", "\r\n"), new_lf.replace("\n", "\r\n")),
                (old_lf, new_lf),
            )
            count, use_old, use_new = 0, old, new
            for o, n in candidates:
                c = text.count(o)
                if c:
                    count, use_old, use_new = c, o, n
                    break
            if count == 0:
                msg = perform_string_replacement(text, old, new, replace_all)
                if isinstance(msg, str):
                    return EditResult(error=msg)
                return EditResult(error=f"Error: String not found in file: '{old}'")
            if count > 1 and not replace_all:
                return EditResult(
                    error=f"Error: String '{old}' appears multiple times in file '{file_path}' "
                    f"({count} occurrences). Use replace_all=True to replace all occurrences, "
                    "or add surrounding context to make it unique."
                )
            if count == 1:
                await self._ws.files.edit(rel, "str_replace", old_str=use_old, new_str=use_new)
            else:
                replaced = text.replace(use_old, use_new)
                _check_size(replaced)
                await self._ws.files.edit(rel, "create", file_text=replaced)
            return EditResult(path=file_path, occurrences=count)
        except errors.InvalidArgument as e:
            if e.field == "path" and "binary" in e.message:
                return EditResult(error=f"Error: File '{file_path}' is not a text file")
            return EditResult(error=f"Error: {_path_error('Editing file', file_path, e)}")
        except Exception as e:
            return EditResult(error=f"Error: {_path_error('File', file_path, e)}")

    def edit(
        self,
        file_path: str,
        old_string: str,
        new_string: str,
        replace_all: bool = False,
    ) -> EditResult:
        """Replace ``old_string`` (which must occur exactly once unless ``replace_all``) with
        ``new_string``; ``occurrences`` is how many were replaced."""
        return self._block(
            self._edit(file_path, old_string, new_string, replace_all),
            lambda t: EditResult(error=t),
        )

    async def aedit(
        self,
        file_path: str,
        old_string: str,
        new_string: str,
        replace_all: bool = False,
    ) -> EditResult:
        """Async version of :meth:`edit`."""
        return await self._home(self._edit(file_path, old_string, new_string, replace_all))

    # ls

    async def _ls(self, path: str) -> LsResult:
        try:
            rel = self._rel(path)
            listing = await self._ws.files.list(rel)
        except Exception as e:
            return LsResult(error=_path_error("Path", path, e))
        entries: list[FileInfo] = []
        for entry in listing.entries or []:
            if entry.name == ".git":
                continue
            entries.append(
                _file_info(self._abs(_join(rel, entry.name)), entry.type == "dir", entry.size)
            )
        return LsResult(entries=entries)

    def ls(self, path: str) -> LsResult:
        """The entries of directory ``path`` (absolute paths, ``is_dir``, ``size``)."""
        return self._block(self._ls(path), lambda t: LsResult(error=t))

    async def als(self, path: str) -> LsResult:
        """Async version of :meth:`ls`."""
        return await self._home(self._ls(path))

    # glob

    async def _walk(self, start: str) -> tuple[list[tuple[str, int]], bool]:
        """The files under workspace directory ``start`` (relative to it, with sizes), walked
        with ``list_dir`` depth 3; and whether the walk stopped early."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + GLOB_BUDGET_S
        files: list[tuple[str, int]] = []
        truncated = False
        queue = [""]
        while queue:
            sub = queue.pop(0)
            try:
                listing = await self._ws.files.list(_join(start, sub), depth=3)
            except (errors.FileNotFound, errors.InvalidWorkspacePath):
                if not sub:
                    raise
                continue  # vanished meanwhile
            truncated = truncated or bool(listing.truncated)
            for e in listing.entries or []:
                name = _join(sub, e.name)
                if e.type == "dir" and e.name.count("/") == 2:
                    queue.append(name)  # three levels down: its entries are the next listing's
                elif e.type == "file":
                    files.append((name, e.size))
            if len(files) >= MAX_GLOB_FILES or loop.time() > deadline:
                return files[:MAX_GLOB_FILES], True
        return files, truncated

    async def _glob(self, pattern: str, path: str | None) -> GlobResult:
        try:
            match = compile_grep_include_glob(pattern)
        except InvalidGlobPatternError as e:
            return GlobResult(error=str(e))
        shown = path or self._root
        try:
            rel = self._rel(shown)
            # An anchored pattern's leading literal directories: walk only below them.
            prefix = ""
            if "/" in pattern:
                segments = pattern.lstrip("/").split("/")[:-1]
                literal: list[str] = []
                for s in segments:
                    if not s or s == "." or _GLOB_META.intersection(s):
                        break
                    literal.append(s)
                prefix = "/".join(literal)
            try:
                found, truncated = await self._walk(_join(rel, prefix))
            except (errors.FileNotFound, errors.InvalidWorkspacePath):
                if not prefix:
                    raise
                await self._ws.files.list(rel)  # the search root itself: exists?
                found, truncated = [], False
        except Exception as e:
            return GlobResult(error=_path_error("Path", shown, e))
        matches: list[FileInfo] = []
        for name, size in found:
            under_root = _join(prefix, name)
            if match(under_root):
                matches.append(_file_info(self._abs(_join(rel, under_root)), False, size))
        matches.sort(key=lambda m: m["path"])
        return GlobResult(
            matches=matches, truncated=truncated, truncation_reason="budget" if truncated else None
        )

    def glob(self, pattern: str, path: str | None = None) -> GlobResult:
        """Regular files under ``path`` (default: the root) matching ``pattern`` by deepagents'
        rules (no ``/``: the base name at any depth; with ``/``: the path under ``path``, ``**``
        across directories; dot-names only when the pattern says so); absolute paths."""
        return self._block(self._glob(pattern, path), lambda t: GlobResult(error=t))

    async def aglob(self, pattern: str, path: str | None = None) -> GlobResult:
        """Async version of :meth:`glob`."""
        return await self._home(self._glob(pattern, path))

    # grep

    async def _grep(
        self, pattern: str, path: str | None, glob: str | None, max_count: int | None
    ) -> GrepResult:
        if not pattern:
            return GrepResult(error="Error: grep needs a non-empty pattern.")
        match: Callable[[str], bool] | None = None
        if glob:
            try:
                match = compile_grep_include_glob(glob)
            except InvalidGlobPatternError as e:
                return GrepResult(error=str(e))
        shown = path or self._root
        try:
            rel = self._rel(shown)
            worker_glob: str | None = None
            if glob:
                g = glob.lstrip("/")
                worker_glob = _join(_doublestar_escape(rel), g) if "/" in glob else glob
            # The worker refuses a pattern starting with '-': send the same as a regexp.
            literal = not pattern.startswith("-")
            expr = pattern if literal else "\\-" + _go_quote_meta(pattern[1:])
            cap = (
                MAX_GREP_RESULTS if max_count is None else max(1, min(max_count, MAX_GREP_RESULTS))
            )
            r = await self._ws.files.search(
                expr, path=rel, literal=literal, max_results=cap, glob=worker_glob
            )
        except Exception as e:
            return GrepResult(error=_path_error("Path", shown, e))
        matches: list[GrepMatch] = []
        for m in r.matches or []:
            if match is not None and m.path != rel:
                under = m.path[len(rel) + 1 :] if rel else m.path
                if not match(under):
                    continue
            matches.append(_grep_match(self._abs(m.path), m.line, m.text))
        if max_count is not None and len(matches) > max_count:
            return GrepResult(matches=matches[:max_count], truncated=True)
        return GrepResult(matches=matches, truncated=bool(r.truncated))

    def grep(
        self,
        pattern: str,
        path: str | None = None,
        glob: str | None = None,
        *,
        max_count: int | None = None,
    ) -> GrepResult:
        """Lines holding the literal ``pattern`` in files under ``path`` (default: the root)
        whose path matches ``glob`` (as :meth:`glob`), at most ``max_count`` (and 5000)."""
        return self._block(
            self._grep(pattern, path, glob, max_count), lambda t: GrepResult(error=t)
        )

    async def agrep(
        self,
        pattern: str,
        path: str | None = None,
        glob: str | None = None,
        *,
        max_count: int | None = None,
    ) -> GrepResult:
        """Async version of :meth:`grep`."""
        return await self._home(self._grep(pattern, path, glob, max_count))

    # upload / download

    async def _upload(self, files: list[tuple[str, bytes]]) -> list[FileUploadResponse]:
        out: list[FileUploadResponse] = []
        for path, content in files:
            try:
                await self._ws.files.write(self._rel(path), content)
                out.append(FileUploadResponse(path=path))
            except Exception as e:
                out.append(FileUploadResponse(path=path, error=_file_error(e)))
        return out

    def upload_files(self, files: list[tuple[str, bytes]]) -> list[FileUploadResponse]:
        """Write each ``(path, bytes)`` (parents made; at most 1 MiB each); one response per
        file, in order, with ``error`` a ``FileOperationError`` code or a text."""
        return self._block(
            self._upload(files), lambda t: [FileUploadResponse(path=p, error=t) for p, _ in files]
        )

    async def aupload_files(self, files: list[tuple[str, bytes]]) -> list[FileUploadResponse]:
        """Async version of :meth:`upload_files`."""
        return await self._home(self._upload(files))

    async def _download_one(self, path: str) -> FileDownloadResponse:
        try:
            return FileDownloadResponse(
                path=path, content=await self._ws.files.read(self._rel(path))
            )
        except Exception as e:
            return FileDownloadResponse(path=path, error=_file_error(e))

    async def _download(self, paths: list[str]) -> list[FileDownloadResponse]:
        return list(await asyncio.gather(*(self._download_one(p) for p in paths)))

    def download_files(self, paths: list[str]) -> list[FileDownloadResponse]:
        """Each file's bytes (at most 1 MiB each); one response per path, in order, with
        ``error`` a ``FileOperationError`` code or a text."""
        return self._block(
            self._download(paths), lambda t: [FileDownloadResponse(path=p, error=t) for p in paths]
        )

    async def adownload_files(self, paths: list[str]) -> list[FileDownloadResponse]:
        """Async version of :meth:`download_files`."""
        return await self._home(self._download(paths))
