"""Typed errors of sandboxcore: one exception class per wire error type (docs/API.md "Errors").

An update, query or workflow of sandboxcore fails with a Temporal application error whose
**type** is a stable string (``"FileNotFound"``, ``"WorkspaceLocked"``...) and whose one detail is
an :class:`sandboxcore.models.ErrorDetails` (``family``, ``kind``, ``sub_kind``, ``retryable``,
``field``). Here every type is a class of the same name, arranged as the Go kinds of
``sandboxapi/errors.go`` are:

* :class:`SandboxcoreError` is the base of all of them;
* :class:`WorkspaceError` (repo caches and workspaces) and :class:`SandboxError` (runtimes and
  backends, and anything else) are the two families; their wire types are ``"WorkspaceError"``
  and ``"SandboxError"``;
* each kind subclasses its family, and a sub-kind subclasses its kind (:class:`FileNotFound` is
  an :class:`InvalidWorkspacePath`, :class:`SessionReleased` a :class:`WorkspaceUnavailable`),
  so ``except InvalidWorkspacePath`` also catches ``FileNotFound``, as ``errors.Is`` does in Go.

:func:`from_failure` turns what temporalio raises into one of these; :data:`ERROR_TYPES` maps
each wire type to its class. Branch on the class (or on ``.type``), and send a call again only
when ``.retryable`` says it may succeed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

import pydantic
import temporalio.exceptions

from .models import ErrorDetails

__all__ = [
    "ERROR_TYPES",
    "FileNotFound",
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
    "SandboxcoreError",
    "SessionReleased",
    "WorkspaceDirty",
    "WorkspaceError",
    "WorkspaceLocked",
    "WorkspaceNotFound",
    "WorkspaceUnavailable",
    "from_failure",
]


class SandboxcoreError(Exception):
    """Base of every typed sandboxcore error (docs/API.md "Errors").

    Attributes:
        type: the wire error type (the Temporal application error's type), e.g.
            ``"FileNotFound"``; the class default unless an unknown type was received.
        retryable: whether the same call, sent again unchanged (after a pause), may succeed:
            ``details.retryable`` when details came with the error, else the class default
            (the Go table).
        family: ``"workspace"`` or ``"sandbox"``, from the class.
        message: the human text, without the ``"<type>: "`` prefix.
        details: the error's :class:`~sandboxcore.models.ErrorDetails`, or None when it
            carried none (or none that could be read).
        field: the JSON path of the offending argument field of an :class:`InvalidArgument`
            (e.g. ``"request.mode"``), when known: the ``field`` argument, else
            ``details.field``.

    ``str(err)`` is ``"<type>: <message>"``, as the Go errors print.
    """

    type: str = "SandboxError"
    retryable: bool = False
    family: str = "sandbox"

    def __init__(
        self,
        message: str = "",
        *,
        details: ErrorDetails | None = None,
        field: str | None = None,
        type: str | None = None,
        retryable: bool | None = None,
    ) -> None:
        """Make an error with ``message``; ``details``, ``field``, ``type`` and ``retryable``
        override what the class and the details say (see the class attributes)."""
        super().__init__(message)
        self.message = message
        self.details = details
        if type:
            self.type = type
        if retryable is not None:
            self.retryable = retryable
        elif details is not None:
            self.retryable = details.retryable
        self.field = field if field is not None else (details.field if details else None)

    def __str__(self) -> str:
        return f"{self.type}: {self.message}" if self.message else self.type

    def __repr__(self) -> str:
        extra = f", field={self.field!r}" if self.field else ""
        return (
            f"{self.__class__.__name__}({self.message!r}, type={self.type!r}, "
            f"retryable={self.retryable!r}{extra})"
        )


# The two families (Go: ErrWorkspace, ErrSandbox).


class WorkspaceError(SandboxcoreError):
    """Family of repo-cache and workspace errors (``details.family == "workspace"``); also an
    error of that family whose type this client does not know."""

    type = "WorkspaceError"
    retryable = False
    family = "workspace"


class SandboxError(SandboxcoreError):
    """Family of runtime and backend errors (``details.family == "sandbox"``), and the type of
    an error that fits no other kind ("anything else"), including an unknown type."""

    type = "SandboxError"
    retryable = False
    family = "sandbox"


# The workspace family.


class InvalidArgument(WorkspaceError):
    """A malformed, unknown or hostile URL, ref, id, pattern, option or payload field; ``field``
    names the offending field when known (docs/API.md "Strict decoding"). Not retryable."""

    type = "InvalidArgument"
    retryable = False


class InvalidWorkspacePath(WorkspaceError):
    """A file path escapes the worktree or is malformed. Not retryable."""

    type = "InvalidWorkspacePath"
    retryable = False


class FileNotFound(InvalidWorkspacePath):
    """Sub-kind of :class:`InvalidWorkspacePath`: the workspace path names no file.
    Not retryable."""

    type = "FileNotFound"
    retryable = False


class WorkspaceNotFound(WorkspaceError):
    """No such workspace (e.g. a resume of an unknown id, or no running session). Not
    retryable."""

    type = "WorkspaceNotFound"
    retryable = False


class WorkspaceUnavailable(WorkspaceError):
    """The workspace exists but its host is down, or did not pick the operation up in time.
    Not retryable as such (its sub-kind :class:`SessionReleased` is)."""

    type = "WorkspaceUnavailable"
    retryable = False


class SessionReleased(WorkspaceUnavailable):
    """Sub-kind of :class:`WorkspaceUnavailable`: the session's run is ending (released or
    closed); the same call sent again resumes the workspace. Retryable."""

    type = "SessionReleased"
    retryable = True


class WorkspaceLocked(WorkspaceError):
    """The workspace is busy with another mutating call. Retryable."""

    type = "WorkspaceLocked"
    retryable = True


class WorkspaceDirty(WorkspaceError):
    """The call needs a clean workspace (or a dirty one cannot be dropped; for
    ``create_pull_request``, a pushed branch). Not retryable."""

    type = "WorkspaceDirty"
    retryable = False


class RepoAuthFailed(WorkspaceError):
    """The remote refused the credentials (or none were configured). Not retryable."""

    type = "RepoAuthFailed"
    retryable = False


class RepoNotFound(WorkspaceError):
    """The remote says the repository does not exist (HTTP 404, "repository not found", not a
    git repository). Not retryable, unlike :class:`RepoCacheUnavailable`."""

    type = "RepoNotFound"
    retryable = False


class RepoCacheUnavailable(WorkspaceError):
    """Cloning or fetching failed for a reason other than auth (unreachable). Retryable."""

    type = "RepoCacheUnavailable"
    retryable = True


class RepoLocked(WorkspaceError):
    """A git lock file (index.lock, config.lock...) is held; the message names its path.
    Retryable."""

    type = "RepoLocked"
    retryable = True


class RefNotFound(WorkspaceError):
    """The requested branch, tag or commit does not exist in the repository. Not retryable."""

    type = "RefNotFound"
    retryable = False


class InsufficientDisk(WorkspaceError):
    """The disk filled up during a clone, fetch or write. Not retryable."""

    type = "InsufficientDisk"
    retryable = False


# The sandbox (runtime/backend) family.


class SandboxNotFound(SandboxError):
    """A runtime, snapshot or other backend object does not exist (or the code host answered
    404). Not retryable."""

    type = "SandboxNotFound"
    retryable = False


class SandboxUnauthorized(SandboxError):
    """The runtime backend refused our credentials. Not retryable."""

    type = "SandboxUnauthorized"
    retryable = False


class SandboxTimeout(SandboxError):
    """A backend call (not a command: a command's timeout is a result) timed out, or was
    cancelled. Retryable."""

    type = "SandboxTimeout"
    retryable = True


class SandboxConflict(SandboxError):
    """The object exists in a state that forbids the call: the key belongs to another
    repository, or a uniqueness conflict (a ``branch_name`` another workspace holds, a session
    under a workflow id its workspace does not derive, an exec kept from starting until its
    deadline by another). Not retryable."""

    type = "SandboxConflict"
    retryable = False


class SandboxUnavailable(SandboxError):
    """The runtime backend, the store or the service cannot be reached or is not installed, or
    the worker died mid-command. Retryable."""

    type = "SandboxUnavailable"
    retryable = True


class SandboxResourceLimit(SandboxError):
    """A size, quota or disk limit was hit (e.g. a file over 1 MiB). Not retryable."""

    type = "SandboxResourceLimit"
    retryable = False


class SandboxCommandRejected(SandboxError):
    """The command or call is not allowed for this workspace (e.g. a write to an analysis
    workspace). Not retryable."""

    type = "SandboxCommandRejected"
    retryable = False


class SandboxRateLimited(SandboxError):
    """The code host's rate limit is exhausted; the message names when it resets. Retryable
    (after the reset)."""

    type = "SandboxRateLimited"
    retryable = True


def _registry(*classes: type[SandboxcoreError]) -> Mapping[str, type[SandboxcoreError]]:
    table: dict[str, type[SandboxcoreError]] = {}
    for cls in classes:
        if cls.type in table or cls.type != cls.__name__:
            raise AssertionError(f"error class {cls.__name__} has type {cls.type!r}")
        table[cls.type] = cls
    return MappingProxyType(table)


ERROR_TYPES: Mapping[str, type[SandboxcoreError]] = _registry(
    WorkspaceError,
    SandboxError,
    InvalidArgument,
    InvalidWorkspacePath,
    FileNotFound,
    WorkspaceNotFound,
    WorkspaceUnavailable,
    SessionReleased,
    WorkspaceLocked,
    WorkspaceDirty,
    RepoAuthFailed,
    RepoNotFound,
    RepoCacheUnavailable,
    RepoLocked,
    RefNotFound,
    InsufficientDisk,
    SandboxNotFound,
    SandboxUnauthorized,
    SandboxTimeout,
    SandboxConflict,
    SandboxUnavailable,
    SandboxResourceLimit,
    SandboxCommandRejected,
    SandboxRateLimited,
)
"""Every wire error type (docs/API.md "Errors") to its class; read-only."""

_OPTIONAL_DETAILS = frozenset(
    name for name, info in ErrorDetails.model_fields.items() if not info.is_required()
)


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and its causes (``__cause__``, or a ``cause`` attribute), outermost first."""
    out: list[BaseException] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        out.append(current)
        following = current.__cause__
        if following is None:
            try:
                candidate = getattr(current, "cause", None)
            except Exception:  # a property that asserts, as temporalio's do
                candidate = None
            following = candidate if isinstance(candidate, BaseException) else None
        current = following
    return out


def _application_error(exc: BaseException) -> temporalio.exceptions.ApplicationError | None:
    """The application error of ``exc``'s chain whose type is a known wire type, else the
    first application error of the chain, else None."""
    found = [e for e in _chain(exc) if isinstance(e, temporalio.exceptions.ApplicationError)]
    for app in found:
        if app.type in ERROR_TYPES:
            return app
    return found[0] if found else None


def _raw_details(values: Sequence[Any]) -> Mapping[str, Any] | None:
    """The first detail as a mapping: temporalio hands it over already converted (a dict from
    JSON); a JSON string or bytes is parsed; anything else is None."""
    if not values:
        return None
    raw = values[0]
    if isinstance(raw, ErrorDetails):
        return raw.model_dump()
    if isinstance(raw, (str, bytes, bytearray)):
        try:
            raw = json.loads(raw)
        except ValueError:
            return None
    return raw if isinstance(raw, Mapping) else None


def _parse_details(raw: Mapping[str, Any] | None) -> ErrorDetails | None:
    """``raw`` validated into ErrorDetails; an optional field that does not validate (e.g. a
    ``sub_kind`` newer than this client) is dropped; None when a required one fails."""
    if raw is None:
        return None
    data = {str(key): value for key, value in raw.items()}
    for _ in range(2):
        try:
            return ErrorDetails.model_validate(data)
        except pydantic.ValidationError as exc:
            bad = {str(err["loc"][0]) for err in exc.errors() if err["loc"]}
            if not bad or not bad <= _OPTIONAL_DETAILS:
                return None
            for key in bad:
                data.pop(key, None)
    return None


def _class_for(type_: str, raw: Mapping[str, Any] | None) -> type[SandboxcoreError]:
    """The class of wire type ``type_``; for an unknown type, the class of ``details.kind``
    (docs/API.md "Versioning": new types are sub-kinds of a known kind), else the family root
    ``details.family`` names, else :class:`SandboxError` (as Go's ``FromTemporal``)."""
    known = ERROR_TYPES.get(type_)
    if known is not None:
        return known
    if raw is not None:
        kind = raw.get("kind")
        if isinstance(kind, str) and kind in ERROR_TYPES:
            return ERROR_TYPES[kind]
        if raw.get("family") == WorkspaceError.family:
            return WorkspaceError
    return SandboxError


def from_failure(exc: BaseException) -> SandboxcoreError | None:
    """The typed sandboxcore error that a temporalio exception carries, or None.

    ``exc`` is what a temporalio client call raised: a
    ``temporalio.client.WorkflowUpdateFailedError`` or ``WorkflowFailureError`` whose ``cause``
    is a ``temporalio.exceptions.ApplicationError``, such an ``ApplicationError`` itself, or any
    chain of causes leading to one. The application error whose type is a known wire type is
    used (else the first one found): its type selects the class (:data:`ERROR_TYPES`), its
    message becomes ``.message``, and its first detail (already converted to a dict by the
    client's data converter) is validated into ``.details`` (None when missing or unreadable).

    An unknown type keeps the received string in ``.type`` and gets the class of
    ``details.kind`` when that kind is known, else :class:`WorkspaceError` when
    ``details.family`` is ``"workspace"``, else :class:`SandboxError`.

    Returns None when the chain holds no ``ApplicationError`` (e.g. an ``RPCError`` or a query
    failure). The result's ``__cause__`` is ``exc``; raise it with ``raise err from exc``.
    """
    app = _application_error(exc)
    if app is None:
        return None
    type_ = app.type or ""
    raw = _raw_details(app.details)
    cls = _class_for(type_, raw)
    err = cls(app.message, details=_parse_details(raw), type=type_ or None)
    err.__cause__ = exc
    return err
