"""sandboxcore for Python: durable workspaces for AI coding agents, driven through Temporal.

A workspace is a git worktree of a cached bare repository, with a runtime that runs commands
against it; its session is a Temporal workflow. This package speaks the wire contract of
docs/API.md with typed models (:mod:`sandboxcore.models`, generated from the JSON Schema), one
exception class per error type (:mod:`sandboxcore.errors`), the identity derivation
(:mod:`sandboxcore.identity`) and the payload codec (:mod:`sandboxcore.codec`).

- :class:`AsyncClient` / :class:`Workspace`: the asynchronous API;
- :class:`Client` / :class:`SyncWorkspace`: their blocking twins.
"""

from . import errors, identity, models
from .client import AsyncClient, Fanout, SessionSummary
from .codec import EncryptionCodec, Key, load_keys
from .errors import SandboxcoreError, SandboxError, WorkspaceError
from .models import ExecResult
from .sync import Client, SyncWorkspace
from .workspace import OPERATIONS, ExecChunk, ExecStream, Process, Workspace, content_hash

__version__ = "1.0.0"

__all__ = [
    "OPERATIONS",
    "AsyncClient",
    "Client",
    "EncryptionCodec",
    "ExecChunk",
    "ExecResult",
    "ExecStream",
    "Fanout",
    "Key",
    "Process",
    "SandboxError",
    "SandboxcoreError",
    "SessionSummary",
    "SyncWorkspace",
    "Workspace",
    "WorkspaceError",
    "content_hash",
    "errors",
    "identity",
    "load_keys",
    "models",
]
