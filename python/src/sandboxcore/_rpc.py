"""The one call path to a workspace's SessionWorkflow (docs/API.md "Getting a session",
"Session states").

A call whose session run is ending (``SessionReleased``) is sent again after a short pause, and a
call whose run is gone (the service's NOT_FOUND: a session completed before dormant runs
existed) resumes the workspace by update-with-start ``acquire`` with no request, then is sent
again, as the Go client does.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import temporalio.client
import temporalio.common
import temporalio.service
from pydantic import BaseModel

from . import errors, identity

#: The session's state search attribute (docs/API.md "Operators").
STATE_KEY = temporalio.common.SearchAttributeKey.for_keyword("SandboxState")

ModelT = TypeVar("ModelT", bound=BaseModel)

#: Workflow type of a session (docs/API.md "Identity").
SESSION_WORKFLOW_TYPE = "SessionWorkflow"
#: Workflow type of a workspace's process stream (docs/API.md "Streaming exec output").
STREAM_WORKFLOW_TYPE = "ProcessStreamWorkflow"

_SEARCH_WORKSPACE = temporalio.common.SearchAttributeKey.for_keyword("SandboxWorkspace")
_SEARCH_STATE = temporalio.common.SearchAttributeKey.for_keyword("SandboxState")
_SEARCH_USER = temporalio.common.SearchAttributeKey.for_keyword("SandboxUser")
_SEARCH_PROJECT = temporalio.common.SearchAttributeKey.for_keyword("SandboxProject")
_SEARCH_MODE = temporalio.common.SearchAttributeKey.for_keyword("SandboxMode")
#: A session's (or fan-out's) workspace, user and project search attributes (docs/API.md
#: "Operators", "Task fan-out").
WORKSPACE_KEY = _SEARCH_WORKSPACE
USER_KEY = _SEARCH_USER
PROJECT_KEY = _SEARCH_PROJECT


@dataclass(frozen=True)
class Policy:
    """How a call reacts to a run that is ending or gone: ``retries`` more sends, ``backoff``
    seconds apart while the run is ending."""

    retries: int
    backoff: float


#: Acquire and ordinary updates: up to 4 more sends, 0.1 s apart.
CLIENT_POLICY = Policy(retries=4, backoff=0.1)
#: Updates sent by update-with-start (destroy, restore): up to 8 more sends, 0.15 s apart.
START_POLICY = Policy(retries=8, backoff=0.15)


def new_update_id(prefix: str = "exec") -> str:
    """A random update id: ``<prefix>-`` and 24 hex digits."""
    return f"{prefix}-{secrets.token_hex(12)}"


def dump(arg: BaseModel | None) -> dict[str, Any]:
    """The JSON object an argument model is sent as: fields left at ``None`` are omitted; no
    argument is ``{}`` (a worker refusing plaintext needs a payload to decrypt)."""
    if arg is None:
        return {}
    return arg.model_dump(mode="json", exclude_none=True)


def run_gone(exc: BaseException) -> bool:
    """Whether ``exc`` is the service's NOT_FOUND: the workflow has no running execution."""
    return (
        isinstance(exc, temporalio.service.RPCError)
        and exc.status == temporalio.service.RPCStatusCode.NOT_FOUND
    )


def typed(exc: BaseException) -> BaseException:
    """The typed sandboxcore error ``exc`` carries (docs/API.md "Errors"), or ``exc`` itself.

    A service NOT_FOUND becomes :class:`sandboxcore.errors.WorkspaceNotFound`.
    """
    err = errors.from_failure(exc)
    if err is not None:
        return err
    if run_gone(exc):
        return errors.WorkspaceNotFound(f"no running session: {exc}")
    return exc


class SessionRPC:
    """Addresses one workspace's SessionWorkflow on a task queue."""

    def __init__(self, client: temporalio.client.Client, task_queue: str, workspace_id: str):
        self.client = client
        self.task_queue = task_queue
        self.workspace_id = workspace_id
        self.workflow_id = identity.workflow_id(workspace_id)
        self.handle = client.get_workflow_handle(self.workflow_id)

    def start_operation(
        self, request: Mapping[str, Any] | None
    ) -> temporalio.client.WithStartWorkflowOperation[Any, Any]:
        """The start of a run by update-with-start: workflow id, conflict policy USE_EXISTING,
        reuse policy ALLOW_DUPLICATE, the start search attributes (docs/API.md "Operators")."""
        attrs: list[temporalio.common.SearchAttributePair[Any]] = [
            temporalio.common.SearchAttributePair(_SEARCH_WORKSPACE, self.workspace_id),
            temporalio.common.SearchAttributePair(_SEARCH_STATE, "acquiring"),
        ]
        session_input: dict[str, Any] = {"workspace_id": self.workspace_id}
        if request is not None:
            session_input["request"] = dict(request)
            attrs += [
                temporalio.common.SearchAttributePair(_SEARCH_USER, request["user_id"]),
                temporalio.common.SearchAttributePair(_SEARCH_PROJECT, request["project_id"]),
                temporalio.common.SearchAttributePair(_SEARCH_MODE, request["mode"]),
            ]
        return temporalio.client.WithStartWorkflowOperation(
            SESSION_WORKFLOW_TYPE,
            session_input,
            id=self.workflow_id,
            task_queue=self.task_queue,
            id_conflict_policy=temporalio.common.WorkflowIDConflictPolicy.USE_EXISTING,
            id_reuse_policy=temporalio.common.WorkflowIDReusePolicy.ALLOW_DUPLICATE,
            search_attributes=temporalio.common.TypedSearchAttributes(attrs),
        )

    async def acquire(self, request: Mapping[str, Any] | None) -> dict[str, Any]:
        """Send ``acquire`` by update-with-start; ``request`` None resumes by id. Returns the
        handle as JSON. Raises the typed errors."""
        return await self.update_with_start(
            "acquire", {"request": dict(request)} if request else {}, request, CLIENT_POLICY
        )

    async def update_with_start(
        self,
        name: str,
        arg: Mapping[str, Any],
        request: Mapping[str, Any] | None = None,
        policy: Policy = START_POLICY,
        update_id: str | None = None,
    ) -> dict[str, Any]:
        """Send update ``name`` by update-with-start, so it also reaches a workspace whose session
        is not running. Raises the typed errors."""
        for attempt in range(policy.retries + 1):
            try:
                result: dict[str, Any] = await self.client.execute_update_with_start_workflow(
                    name,
                    dict(arg),
                    start_workflow_operation=self.start_operation(request),
                    id=update_id,
                    result_type=dict,
                )
                return result
            except (temporalio.client.WorkflowUpdateFailedError, temporalio.service.RPCError) as e:
                err = typed(e)
                if isinstance(err, errors.SessionReleased) and attempt < policy.retries:
                    await asyncio.sleep(policy.backoff)
                    continue
                raise err from e
        raise AssertionError("unreachable")

    async def update(
        self,
        name: str,
        arg: Mapping[str, Any],
        *,
        update_id: str | None = None,
        policy: Policy = CLIENT_POLICY,
    ) -> Any:
        """Send update ``name`` with ``arg`` to the current run and return its JSON result; an
        ending run is waited out and a gone one resumed (``policy``). Raises the typed errors."""
        for attempt in range(policy.retries + 1):
            try:
                return await self.handle.execute_update(
                    name, dict(arg), id=update_id, result_type=dict
                )
            except (temporalio.client.WorkflowUpdateFailedError, temporalio.service.RPCError) as e:
                if not await self._again(attempt, e, policy):
                    raise typed(e) from e
        raise AssertionError("unreachable")

    async def send(
        self, name: str, arg: Mapping[str, Any], update_id: str
    ) -> temporalio.client.WorkflowUpdateHandle[Any]:
        """Send update ``name`` and wait until the session accepted it; returns its handle.
        Raises the typed rejection."""
        for attempt in range(CLIENT_POLICY.retries + 1):
            try:
                return await self.handle.start_update(
                    name,
                    dict(arg),
                    id=update_id,
                    wait_for_stage=temporalio.client.WorkflowUpdateStage.ACCEPTED,
                    result_type=dict,
                )
            except (temporalio.client.WorkflowUpdateFailedError, temporalio.service.RPCError) as e:
                if not await self._again(attempt, e, CLIENT_POLICY):
                    raise typed(e) from e
        raise AssertionError("unreachable")

    async def outcome(self, update_id: str) -> Any:
        """Wait for the outcome of update ``update_id`` sent earlier to the current run.
        Raises the update's typed failure, or WorkspaceNotFound when the run has no such
        update."""
        try:
            return await self.handle.get_update_handle(update_id, result_type=dict).result()
        except (temporalio.client.WorkflowUpdateFailedError, temporalio.service.RPCError) as e:
            raise typed(e) from e

    async def _again(self, attempt: int, exc: BaseException, policy: Policy) -> bool:
        if attempt >= policy.retries:
            return False
        if run_gone(exc):
            # A session whose latest run ended destroyed is not resumed: that would
            # start a run that fails (docs/API.md "Session states").
            await self._refuse_destroyed()
            try:
                await self.acquire(None)
            except errors.SandboxcoreError:
                return False
            return True
        if isinstance(errors.from_failure(exc), errors.SessionReleased):
            await asyncio.sleep(policy.backoff)
            return True
        return False

    async def _refuse_destroyed(self) -> None:
        """Raise WorkspaceNotFound when the session's latest run ended with the workspace
        destroyed (search attribute SandboxState ``destroyed``); return otherwise, also when
        the run cannot be described."""
        try:
            desc = await self.handle.describe()
        except temporalio.service.RPCError:
            return
        if desc.status == temporalio.client.WorkflowExecutionStatus.RUNNING:
            return
        state = desc.typed_search_attributes.get(STATE_KEY)
        if state == "destroyed":
            raise errors.WorkspaceNotFound(
                f"workspace {self.workspace_id} was destroyed; restore brings back what its destroy"
                " saved, an acquire with a full request starts its key fresh"
            )

    async def query(self, name: str) -> Any:
        """Send query ``name`` to the current run (a completed run answers from its final
        state). Raises WorkspaceNotFound when no run exists, else the typed errors."""
        try:
            return await self.handle.query(name, result_type=dict)
        except (temporalio.client.WorkflowQueryFailedError, temporalio.service.RPCError) as e:
            raise typed(e) from e

    async def signal_with_start(self, name: str, arg: Mapping[str, Any]) -> None:
        """Send signal ``name`` by signal-with-start (docs/API.md "Eviction"): a session with no
        running execution starts, handles it and completes."""
        try:
            await self.client.start_workflow(
                SESSION_WORKFLOW_TYPE,
                {"workspace_id": self.workspace_id},
                id=self.workflow_id,
                task_queue=self.task_queue,
                id_reuse_policy=temporalio.common.WorkflowIDReusePolicy.ALLOW_DUPLICATE,
                search_attributes=temporalio.common.TypedSearchAttributes(
                    [
                        temporalio.common.SearchAttributePair(_SEARCH_WORKSPACE, self.workspace_id),
                        temporalio.common.SearchAttributePair(_SEARCH_STATE, "acquiring"),
                    ]
                ),
                start_signal=name,
                start_signal_args=[dict(arg)],
            )
        except temporalio.service.RPCError as e:
            raise typed(e) from e
