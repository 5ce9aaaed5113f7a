"""Names derived from a caller's ids, exactly as docs/API.md "Identity" says.

Every function here is the Python twin of a Go function of package ``sandboxapi``
(``WorkspaceRequest.Key``, ``WorkspaceIDForKey``, ``SessionWorkflowID``, ``RuntimeIDFor``,
``TenantSegment``, ``EditBranch``, ``TaskBranch``, ``WorkspaceRequest.Branch``,
``WorkspaceRequest.WorktreeDirName``, ``ExecProcessID``, ``FanoutWorkflowID``,
``LegacyFanoutWorkflowID``); both languages check the shared vectors of
``sandboxapi/testdata/identity-vectors.json``.

Compute a branch or directory only to predict a new workspace's: an existing workspace keeps the
names its record holds (read them from its handle).
"""

from __future__ import annotations

import hashlib
import re
from typing import Literal

from . import errors

Mode = Literal["edit", "task", "analysis"]

#: Prefix of every session workflow id.
WORKFLOW_ID_PREFIX = "sandbox-session/"
#: Prefix of every process stream workflow id (docs/API.md "Streaming exec output").
STREAM_WORKFLOW_ID_PREFIX = "sandbox-stream/"
#: Prefix of every fan-out workflow id (docs/API.md "Task fan-out").
FANOUT_WORKFLOW_ID_PREFIX = "sandbox-fanout/"
#: Length of a tenant segment in lowercase hex digits.
TENANT_SEGMENT_LEN = 16
#: Longest id (user, project, conversation, task), in bytes.
MAX_ID_LENGTH = 128

_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")
_WORKSPACE_ID = re.compile(r"ws-[0-9a-f]{24}")
_DIR_BYTE = re.compile(r"[^A-Za-z0-9._-]")


def _sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def validate_id(what: str, value: str) -> None:
    """Check an id: 1-128 characters from ``[A-Za-z0-9_-]``, starting with a letter or digit.

    ``what`` names the field in the error (``"user_id"``, ``"conversation_id"``, ...).
    Raises :class:`sandboxcore.errors.InvalidArgument` (``field`` set to ``what``).
    """
    if not value:
        raise errors.InvalidArgument(f"{what} is required", field=what)
    if len(value.encode()) > MAX_ID_LENGTH:
        raise errors.InvalidArgument(f"{what} is longer than {MAX_ID_LENGTH} bytes", field=what)
    if not _ID.fullmatch(value):
        raise errors.InvalidArgument(
            f"{what} {value[:64]!r}: only letters, digits, '_' and '-' are allowed, "
            "starting with a letter or digit",
            field=what,
        )


def validate_workspace_id(workspace_id: str) -> None:
    """Check the ``ws-`` + 24 lowercase hex digits form.

    Raises :class:`sandboxcore.errors.InvalidArgument`.
    """
    if not isinstance(workspace_id, str) or not _WORKSPACE_ID.fullmatch(workspace_id):
        raise errors.InvalidArgument(
            f"workspace id {str(workspace_id)[:64]!r}: want ws- followed by 24 lowercase hex "
            "digits",
            field="workspace_id",
        )


def workspace_key(
    mode: Mode,
    user_id: str,
    project_id: str,
    *,
    conversation_id: str = "",
    task_id: str = "",
    base_ref: str = "",
) -> str:
    """The workspace key: ``edit|<user>|<project>|<conversation_id>``,
    ``task|<user>|<project>|<task_id>`` or ``analysis|<user>|<project>|<base_ref>``."""
    if mode == "edit":
        return f"edit|{user_id}|{project_id}|{conversation_id}"
    if mode == "task":
        return f"task|{user_id}|{project_id}|{task_id}"
    return f"analysis|{user_id}|{project_id}|{base_ref}"


def workspace_id_for_key(key: str) -> str:
    """``ws-`` + the first 24 hex digits of ``sha256(key)``."""
    return "ws-" + _sha256_hex(key)[:24]


def workflow_id(workspace_id: str) -> str:
    """The session workflow id of a workspace id: ``sandbox-session/<24 hex>``.

    Raises :class:`sandboxcore.errors.InvalidArgument` for a malformed workspace id.
    """
    validate_workspace_id(workspace_id)
    return WORKFLOW_ID_PREFIX + workspace_id[3:]


def stream_workflow_id(workspace_id: str) -> str:
    """The process stream workflow id of a workspace id: ``sandbox-stream/<24 hex>``.

    Raises :class:`sandboxcore.errors.InvalidArgument` for a malformed workspace id.
    """
    validate_workspace_id(workspace_id)
    return STREAM_WORKFLOW_ID_PREFIX + workspace_id[3:]


def runtime_id(workspace_id: str) -> str:
    """The runtime id attached to a workspace: ``rt-<24 hex>``."""
    return "rt-" + workspace_id.removeprefix("ws-")


def tenant_segment(user_id: str, project_id: str) -> str:
    """The first 16 hex digits of ``sha256(user_id + "|" + project_id)``."""
    return _sha256_hex(f"{user_id}|{project_id}")[:TENANT_SEGMENT_LEN]


def fanout_workflow_id(user_id: str, project_id: str, fanout_id: str) -> str:
    """The workflow id of a tenant's fan-out: ``sandbox-fanout/<tenant segment>/<fanout_id>``.

    Raises :class:`sandboxcore.errors.InvalidArgument` for a malformed user, project or fan-out
    id.
    """
    validate_id("user_id", user_id)
    validate_id("project_id", project_id)
    validate_id("fanout_id", fanout_id)
    return f"{FANOUT_WORKFLOW_ID_PREFIX}{tenant_segment(user_id, project_id)}/{fanout_id}"


def legacy_fanout_workflow_id(fanout_id: str) -> str:
    """``sandbox-fanout/<fanout_id>``: the workflow id of a fan-out started by a client from
    before tenant ids. Look a fan-out up under it only when :func:`fanout_workflow_id` names
    none, and use that run only when its conversation is the caller's tenant's (docs/API.md
    "Task fan-out").

    Raises :class:`sandboxcore.errors.InvalidArgument` for a malformed fan-out id.
    """
    validate_id("fanout_id", fanout_id)
    return FANOUT_WORKFLOW_ID_PREFIX + fanout_id


def edit_branch(user_id: str, project_id: str, conversation_id: str) -> str:
    """The branch of a new edit workspace: ``agent/<tenant segment>/edits-<conversation_id>``."""
    return f"agent/{tenant_segment(user_id, project_id)}/edits-{conversation_id}"


def task_branch(user_id: str, project_id: str, task_id: str) -> str:
    """The branch of a new task workspace: ``agent/<tenant segment>/task-<task_id>``."""
    return f"agent/{tenant_segment(user_id, project_id)}/task-{task_id}"


def branch(
    mode: Mode,
    user_id: str,
    project_id: str,
    *,
    conversation_id: str = "",
    task_id: str = "",
    branch_name: str = "",
) -> str:
    """The branch a new workspace checks out: ``branch_name`` when given, else the mode's
    derived branch; ``""`` for analysis (detached HEAD)."""
    if branch_name:
        return branch_name
    if mode == "edit":
        return edit_branch(user_id, project_id, conversation_id)
    if mode == "task":
        return task_branch(user_id, project_id, task_id)
    return ""


def worktree_dir_name(
    mode: Mode,
    user_id: str,
    project_id: str,
    *,
    conversation_id: str = "",
    task_id: str = "",
    base_ref: str = "",
    branch_name: str = "",
) -> str:
    """The worktree directory name of a new workspace: ``<user>_<scope>_<branch>-<hash24>``.

    ``scope`` is the conversation id (edit), task id (task) or project id (analysis); ``branch``
    the branch (analysis: ``base_ref`` or ``default``) with every character outside
    ``[A-Za-z0-9._-]`` replaced by ``-`` and leading ``.``/``-`` trimmed; each part cut to 40
    bytes; ``hash24`` the workspace id's hex digits.
    """
    br = branch(
        mode,
        user_id,
        project_id,
        conversation_id=conversation_id,
        task_id=task_id,
        branch_name=branch_name,
    )
    if not br:
        br = base_ref or "default"
    scope = {"edit": conversation_id, "task": task_id}.get(mode, project_id)

    def part(text: str) -> str:
        return _DIR_BYTE.sub("-", text).lstrip(".-")[:40]

    key = workspace_key(
        mode,
        user_id,
        project_id,
        conversation_id=conversation_id,
        task_id=task_id,
        base_ref=base_ref,
    )
    return f"{part(user_id)}_{part(scope)}_{part(br)}-{_sha256_hex(key)[:24]}"


def exec_process_id(workspace_id: str, update_id: str) -> str:
    """The process an exec with ``update_id`` runs as: ``exec-`` + 24 hex digits of
    ``sha256(workspace_id + "/" + update_id)`` (docs/API.md "Streaming exec output")."""
    return "exec-" + _sha256_hex(f"{workspace_id}/{update_id}")[:24]
