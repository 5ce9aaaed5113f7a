"""The asynchronous client: acquire, resume and list workspaces, and the workflows beyond
sessions (fan-out, cleanup, eviction) — docs/API.md.

.. code-block:: python

    async with await AsyncClient.connect() as client:
        ws = await client.acquire(user_id="alice", project_id="p1",
                                  repo_url="https://github.com/acme/app.git",
                                  conversation_id="c42")
        result = await ws.exec(["git", "status"])
"""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, Literal

import temporalio.client
import temporalio.common
import temporalio.exceptions
import temporalio.service
from pydantic import BaseModel, ConfigDict

from . import _rpc, errors, identity, models
from .codec import EncryptionCodec, Key
from .connection import connect_temporal, resolve_settings
from .workspace import Network, Workspace

Mode = Literal["edit", "task", "analysis"]

#: Workflow types beyond sessions (docs/API.md "Task fan-out", "Cleanup", "Eviction").
FANOUT_WORKFLOW_TYPE = "TaskFanoutWorkflow"
CLEANUP_WORKFLOW_TYPE = "CleanupWorkflow"
EVICTION_WORKFLOW_TYPE = "EvictionCronWorkflow"
#: The visibility query listing workspaces (docs/API.md "Listing workspaces").
LIST_WORKSPACES_QUERY = "WorkflowType = 'SessionWorkflow' AND ExecutionStatus = 'Running'"


class SessionSummary(BaseModel):
    """One workspace as Temporal's visibility store lists it (docs/API.md "Listing
    workspaces"): its search attributes and the handle from its memo (None before its first
    acquire succeeded)."""

    model_config = ConfigDict(frozen=True)

    workspace_id: str
    workflow_id: str
    run_id: str
    state: str
    user_id: str
    project_id: str
    mode: str
    repo: str
    host_id: str
    start_time: datetime | None
    handle: models.Handle | None = None


_WORKSPACE_ID = re.compile(r"ws-[0-9a-f]{24}")


def _quote(value: str) -> str:
    """A visibility-query string literal (the values are validated ids: no quote inside)."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _nanoseconds(value: float | timedelta | None) -> int | None:
    if value is None:
        return None
    s = value.total_seconds() if isinstance(value, timedelta) else float(value)
    return int(s * 1e9)


def _no_such_fanout(fanout_id: str) -> errors.WorkspaceNotFound:
    """The error of a fan-out id the caller's tenant has no fan-out of: the same whether no
    fan-out has that id or another tenant's has, naming only the caller's own id."""
    return errors.WorkspaceNotFound(
        f"fan-out {fanout_id}: this user and project have no fan-out with that id"
    )


class Fanout:
    """A handle on one ``TaskFanoutWorkflow`` of a tenant (docs/API.md "Task fan-out").

    :meth:`AsyncClient.fanout` returns the one it started; :meth:`AsyncClient.fanout_handle`
    one it finds on its first call: the tenant's workflow id
    (``sandbox-fanout/<tenant segment>/<fanout_id>``), else a fan-out that a client from before
    tenant ids started under the legacy id ``sandbox-fanout/<fanout_id>``, but only when that
    run's conversation is the tenant's (its conversation request's user and project, or its
    conversation session's). Another tenant's fan-out is never used: every call then raises
    :class:`~sandboxcore.errors.WorkspaceNotFound`, as for a missing one."""

    def __init__(
        self,
        client: AsyncClient,
        fanout_id: str,
        *,
        user_id: str,
        project_id: str,
        started: bool = False,
    ):
        #: The fan-out id.
        self.id = fanout_id
        #: The tenant: its user and project.
        self.user_id = user_id
        self.project_id = project_id
        #: The workflow id: the tenant's, or the legacy one once a call found the fan-out there.
        self.workflow_id = identity.fanout_workflow_id(user_id, project_id, fanout_id)
        self._temporal = client.temporal
        self._handle: temporalio.client.WorkflowHandle[Any, dict[str, Any]] | None = None
        if started:
            self._handle = self._temporal.get_workflow_handle(self.workflow_id, result_type=dict)

    async def _resolved(self) -> temporalio.client.WorkflowHandle[Any, dict[str, Any]]:
        """The handle of the tenant's fan-out (found once, then kept). Raises
        WorkspaceNotFound (no such fan-out of the tenant) and the typed errors of the service."""
        if self._handle is not None:
            return self._handle
        handle = self._temporal.get_workflow_handle(self.workflow_id, result_type=dict)
        try:
            await handle.describe()
        except temporalio.service.RPCError as e:
            if not _rpc.run_gone(e):
                raise _rpc.typed(e) from e
        else:
            self._handle = handle
            return handle
        legacy = identity.legacy_fanout_workflow_id(self.id)
        run_id = await self._legacy_run(legacy)
        if run_id is None:
            raise _no_such_fanout(self.id)
        self.workflow_id = legacy
        self._handle = self._temporal.get_workflow_handle(legacy, run_id=run_id, result_type=dict)
        return self._handle

    async def _legacy_run(self, workflow_id: str) -> str | None:
        """The run id of the fan-out under the legacy ``workflow_id`` when it is the tenant's,
        else None (no such workflow, another type, an input it cannot read, a conversation
        session that is gone, or another tenant's)."""
        try:
            desc = await self._temporal.get_workflow_handle(workflow_id).describe()
            if desc.workflow_type != FANOUT_WORKFLOW_TYPE:
                return None
            run = self._temporal.get_workflow_handle(workflow_id, run_id=desc.run_id)
            started = None
            async for event in run.fetch_history_events():
                started = event.workflow_execution_started_event_attributes
                break
            if started is None:
                return None
            try:
                values = await self._temporal.data_converter.decode(started.input.payloads, [dict])
                arg = models.FanoutInput.model_validate(values[0])
            except (ValueError, TypeError, RuntimeError, IndexError):
                return None
            if arg.conversation is not None:
                owner = (arg.conversation.user_id, arg.conversation.project_id)
            else:
                ws = arg.conversation_workspace_id or ""
                if not _WORKSPACE_ID.fullmatch(ws):
                    return None
                session = await self._temporal.get_workflow_handle(
                    identity.workflow_id(ws)
                ).describe()
                attrs = session.typed_search_attributes
                owner = (attrs.get(_rpc.USER_KEY) or "", attrs.get(_rpc.PROJECT_KEY) or "")
                if not all(owner):
                    memo = await session.memo_value("workspace", default=None)
                    if isinstance(memo, dict):
                        owner = (memo.get("user_id", ""), memo.get("project_id", ""))
        except temporalio.service.RPCError as e:
            if _rpc.run_gone(e):
                return None
            raise _rpc.typed(e) from e
        return desc.run_id if owner == (self.user_id, self.project_id) else None

    def _error(self, exc: BaseException) -> BaseException:
        """The typed error of a failed call; a run that is gone is this fan-out's not-found."""
        if _rpc.run_gone(exc):
            return _no_such_fanout(self.id)
        return _rpc.typed(exc)

    async def progress(self) -> models.FanoutReport:
        """The report so far, without patches (query ``progress``). Raises WorkspaceNotFound
        (no such fan-out of the tenant)."""
        handle = await self._resolved()
        try:
            out = await handle.query("progress", result_type=dict)
        except (temporalio.client.WorkflowQueryFailedError, temporalio.service.RPCError) as e:
            raise self._error(e) from e
        return models.FanoutReport.model_validate(out)

    async def result(self) -> models.FanoutReport:
        """Wait for the fan-out to finish; its full report. Raises the typed errors the
        fan-out failed with (it could not start any task; WorkspaceNotFound also for a
        conversation workspace of another tenant) and WorkspaceNotFound (no such fan-out)."""
        handle = await self._resolved()
        try:
            out = await handle.result()
        except (temporalio.client.WorkflowFailureError, temporalio.service.RPCError) as e:
            raise self._error(e) from e
        return models.FanoutReport.model_validate(out)

    async def complete_task(self, task_id: str, *, succeeded: bool, message: str = "") -> None:
        """Report a task without a script as done (signal ``complete_task``). Raises
        InvalidArgument (task id), WorkspaceNotFound (no such fan-out, or it closed)."""
        identity.validate_id("task_id", task_id)
        handle = await self._resolved()
        try:
            await handle.signal(
                "complete_task",
                _rpc.dump(
                    models.CompleteTaskSignal(
                        task_id=task_id, succeeded=succeeded, message=message or None
                    )
                ),
            )
        except temporalio.service.RPCError as e:
            raise self._error(e) from e

    async def cancel(self) -> None:
        """Ask Temporal to cancel the fan-out: it ends cancelled, its task sessions go on.
        Raises WorkspaceNotFound (no such fan-out, or it closed)."""
        handle = await self._resolved()
        try:
            await handle.cancel()
        except temporalio.service.RPCError as e:
            raise self._error(e) from e


class AsyncClient:
    """The asynchronous sandboxcore client: a Temporal client and the task queue sessions start
    on. Create it with :meth:`connect` (or :meth:`from_temporal`); ``async with`` closes
    nothing but marks the scope (the Temporal connection is dropped with the object)."""

    def __init__(self, temporal: temporalio.client.Client, *, task_queue: str = "sandbox"):
        #: The underlying Temporal client.
        self.temporal = temporal
        #: The task queue sessions start on (the workers' SANDBOX_TASK_QUEUE).
        self.task_queue = task_queue

    @classmethod
    async def connect(
        cls,
        address: str | None = None,
        *,
        namespace: str | None = None,
        api_key: str | None = None,
        tls: temporalio.service.TLSConfig | bool | None = None,
        codec_key: EncryptionCodec | Key | Sequence[Key] | None = None,
        task_queue: str | None = None,
    ) -> AsyncClient:
        """Connect to Temporal as the Go CLI does: what is not given comes from TEMPORAL_ADDRESS
        (default ``127.0.0.1:7233``), TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, TEMPORAL_TLS*, the
        Temporal TOML profile (TEMPORAL_CONFIG_FILE, TEMPORAL_PROFILE), SANDBOX_TASK_QUEUE
        (default ``sandbox``) and SANDBOX_PAYLOAD_KEYS (payload encryption, docs/API.md
        "Payload encryption"). Raises ConnectionSettingsError (a bad setting, named),
        TemporalUnreachable (a RuntimeError) when the server cannot be reached."""
        settings = resolve_settings(
            address,
            namespace=namespace,
            api_key=api_key,
            tls=tls,
            codec_key=codec_key,
            task_queue=task_queue,
        )
        return cls(await connect_temporal(settings), task_queue=settings.task_queue)

    @classmethod
    def from_temporal(
        cls, temporal: temporalio.client.Client, *, task_queue: str = "sandbox"
    ) -> AsyncClient:
        """Wrap a connected Temporal client (its data converter must apply the workers' payload
        codec when payloads are encrypted: :func:`sandboxcore.codec.data_converter`)."""
        return cls(temporal, task_queue=task_queue)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    async def acquire(
        self,
        *,
        user_id: str,
        project_id: str,
        repo_url: str,
        mode: Mode = "edit",
        conversation_id: str | None = None,
        task_id: str | None = None,
        base_ref: str = "",
        branch_name: str | None = None,
        from_branch: str | None = None,
        network: Network | None = None,
        network_allow: Sequence[str] | None = None,
        setup: Literal["auto", "wait", "skip"] | None = None,
    ) -> Workspace:
        """Get or create the workspace of the key (docs/API.md "Identity") and return it.

        ``conversation_id`` is required for ``edit``, ``task_id`` for ``task``; ``base_ref``
        ``""`` is the default branch. ``setup`` runs the repository's setup commands after
        the acquire (``"auto"``, the default), before it returns (``"wait"``) or not at all
        (``"skip"``); the handle's ``setup`` says how it went (docs/RUNTIMES.md "Setup").
        Raises InvalidArgument (a malformed id or field, named
        by ``field``), RepoNotFound, RepoAuthFailed, RefNotFound, SandboxConflict,
        SandboxCommandRejected (e.g. a network above the worker's maximum).
        """
        for what, value in (("user_id", user_id), ("project_id", project_id)):
            identity.validate_id(what, value)
        if mode == "edit":
            identity.validate_id("conversation_id", conversation_id or "")
        elif mode == "task":
            identity.validate_id("task_id", task_id or "")
        elif mode != "analysis":
            raise errors.InvalidArgument(
                f"mode {mode!r}: want edit, task or analysis", field="mode"
            )
        if not repo_url:
            raise errors.InvalidArgument("repo_url is required", field="repo_url")
        request = models.WorkspaceRequest(
            user_id=user_id,
            project_id=project_id,
            repo_url=repo_url,
            mode=mode,
            conversation_id=conversation_id if mode == "edit" else None,
            task_id=task_id if mode == "task" else None,
            base_ref=base_ref or None,
            branch_name=branch_name,
            from_branch=from_branch,
            network=network,
            network_allow=list(network_allow) if network_allow is not None else None,
            setup=setup,
        )
        key = identity.workspace_key(
            mode,
            user_id,
            project_id,
            conversation_id=conversation_id or "",
            task_id=task_id or "",
            base_ref=base_ref,
        )
        rpc = _rpc.SessionRPC(self.temporal, self.task_queue, identity.workspace_id_for_key(key))
        handle = models.Handle.model_validate(await rpc.acquire(_rpc.dump(request)))
        return Workspace(self, handle)

    async def workspace(self, workspace_id: str) -> Workspace:
        """Resume an existing workspace by id (a dormant or evicted one is brought back).
        Raises InvalidArgument (malformed id), WorkspaceNotFound."""
        rpc = _rpc.SessionRPC(self.temporal, self.task_queue, workspace_id)
        return Workspace(self, models.Handle.model_validate(await rpc.acquire(None)))

    async def list(
        self,
        *,
        user_id: str | None = None,
        project_id: str | None = None,
        state: str | None = None,
        limit: int | None = None,
    ) -> list[SessionSummary]:
        """Workspaces, one row each, newest first, through Temporal visibility (docs/API.md
        "Listing workspaces"): released, closed and evicted ones included, failed acquires and
        destroyed workspaces never."""
        query = LIST_WORKSPACES_QUERY
        if user_id is not None:
            identity.validate_id("user_id", user_id)
            query += f" AND SandboxUser = {_quote(user_id)}"
        if project_id is not None:
            identity.validate_id("project_id", project_id)
            query += f" AND SandboxProject = {_quote(project_id)}"
        if state is not None:
            query += f" AND SandboxState = {_quote(state)}"
        return [s async for s in self._list(query, limit)]

    async def _list(self, query: str, limit: int | None) -> AsyncIterator[SessionSummary]:
        seen: set[str] = set()
        try:
            async for e in self.temporal.list_workflows(query, page_size=100):
                if e.id in seen:
                    continue
                seen.add(e.id)
                sa = e.typed_search_attributes

                def kw(name: str, attrs: temporalio.common.TypedSearchAttributes = sa) -> str:
                    v = attrs.get(temporalio.common.SearchAttributeKey.for_keyword(name))
                    return v or ""

                handle = None
                memo = await e.memo()
                if isinstance(memo.get("workspace"), Mapping):
                    handle = models.Handle.model_validate(memo["workspace"])
                yield SessionSummary(
                    workspace_id=kw("SandboxWorkspace"),
                    workflow_id=e.id,
                    run_id=e.run_id,
                    state=kw("SandboxState"),
                    user_id=kw("SandboxUser"),
                    project_id=kw("SandboxProject"),
                    mode=kw("SandboxMode"),
                    repo=kw("SandboxRepo"),
                    host_id=kw("SandboxHost"),
                    start_time=e.start_time,
                    handle=handle,
                )
                if limit and len(seen) >= limit:
                    return
        except temporalio.service.RPCError as e:
            raise _rpc.typed(e) from e

    async def fanout(
        self,
        fanout_id: str,
        *,
        tasks: Sequence[models.TaskSpec | Mapping[str, Any]],
        conversation: Workspace | str,
        user_id: str | None = None,
        project_id: str | None = None,
        accept_task_ids: Sequence[str] | None = None,
        max_parallel: int = 0,
        task_timeout: float | timedelta | None = None,
        from_fork: bool = False,
    ) -> Fanout:
        """Start a tenant's fan-out: tasks run in parallel task workspaces of the
        conversation's repository and the accepted ones are merged back (docs/API.md "Task
        fan-out"). ``conversation`` is the edit workspace (or its id); the tenant is
        ``user_id`` and ``project_id``, by default the workspace's (required with an id). Its
        workflow id is ``sandbox-fanout/<tenant segment>/<fanout_id>``: another tenant may use
        the same fan-out id at the same time. Returns its handle (:meth:`Fanout.result` waits
        for the report). Raises InvalidArgument (ids, input, a tenant that is not the
        workspace's), SandboxConflict (the tenant has or had a fan-out with this id); a
        conversation workspace id of another tenant fails the fan-out with
        WorkspaceNotFound."""
        identity.validate_id("fanout_id", fanout_id)
        if isinstance(conversation, Workspace):
            ws_id = conversation.id
            owner = (conversation.handle.user_id, conversation.handle.project_id)
            if (user_id or owner[0], project_id or owner[1]) != owner:
                raise errors.InvalidArgument(
                    "user_id and project_id must be the conversation workspace's",
                    field="user_id",
                )
            user_id, project_id = owner
        else:
            ws_id = conversation
            if not user_id or not project_id:
                raise errors.InvalidArgument(
                    "a fan-out of a conversation workspace id needs user_id and project_id",
                    field="user_id",
                )
        identity.validate_workspace_id(ws_id)
        timeout_s = None
        if task_timeout is not None:
            timeout_s = int(
                task_timeout.total_seconds()
                if isinstance(task_timeout, timedelta)
                else task_timeout
            )
        arg = models.FanoutInput(
            conversation_workspace_id=ws_id,
            tasks=[
                t if isinstance(t, models.TaskSpec) else models.TaskSpec.model_validate(t)
                for t in tasks
            ],
            accept_task_ids=list(accept_task_ids) if accept_task_ids else None,
            max_parallel=max_parallel or None,
            task_timeout_s=timeout_s,
            from_fork=from_fork or None,
        )
        f = Fanout(self, fanout_id, user_id=user_id, project_id=project_id, started=True)
        try:
            await self.temporal.start_workflow(
                FANOUT_WORKFLOW_TYPE,
                _rpc.dump(arg),
                id=f.workflow_id,
                task_queue=self.task_queue,
                id_reuse_policy=temporalio.common.WorkflowIDReusePolicy.REJECT_DUPLICATE,
                search_attributes=temporalio.common.TypedSearchAttributes(
                    [
                        temporalio.common.SearchAttributePair(_rpc.WORKSPACE_KEY, ws_id),
                        temporalio.common.SearchAttributePair(_rpc.USER_KEY, user_id),
                        temporalio.common.SearchAttributePair(_rpc.PROJECT_KEY, project_id),
                    ]
                ),
            )
        except temporalio.exceptions.WorkflowAlreadyStartedError as e:
            raise errors.SandboxConflict(f"fan-out {fanout_id} exists already: use a new id") from e
        except temporalio.service.RPCError as e:
            raise _rpc.typed(e) from e
        return f

    def fanout_handle(self, fanout_id: str, *, user_id: str, project_id: str) -> Fanout:
        """The handle of the tenant's fan-out ``fanout_id``. No call is made here: the first
        call of the handle finds the fan-out (see :class:`Fanout`; another tenant's is never
        found). Raises InvalidArgument for malformed ids."""
        return Fanout(self, fanout_id, user_id=user_id, project_id=project_id)

    async def cleanup(
        self,
        *,
        user_id: str,
        project_id: str | None = None,
        discard: bool = False,
        dry_run: bool = False,
        max_parallel: int = 0,
        host_timeout: float | timedelta | None = None,
    ) -> models.CleanupReport:
        """Destroy every workspace of a user (or of one project) across hosts and return the
        report (docs/API.md "Cleanup"); ``dry_run`` only lists them."""
        identity.validate_id("user_id", user_id)
        wf_id = f"sandbox-cleanup/{user_id}"
        if project_id:
            identity.validate_id("project_id", project_id)
            wf_id += f"/{project_id}"
        arg = models.CleanupInput(
            user_id=user_id,
            project_id=project_id or None,
            discard=discard or None,
            dry_run=dry_run or None,
            max_parallel=max_parallel or None,
            host_timeout=_nanoseconds(host_timeout),
        )
        out = await self._run(CLEANUP_WORKFLOW_TYPE, f"{wf_id}/{time.time_ns()}", arg)
        return models.CleanupReport.model_validate(out)

    async def evict_now(
        self,
        *,
        dry_run: bool = False,
        hosts: Sequence[str] = (),
        actions: Sequence[str] = (),
        reply_timeout: float | timedelta | None = None,
        host_timeout: float | timedelta | None = None,
    ) -> models.EvictionRunResult:
        """Run eviction now (an ``EvictionCronWorkflow`` run outside the schedule) and return
        its result (docs/API.md "Eviction"); ``dry_run`` only plans."""
        arg = models.EvictionInput(
            dry_run=dry_run or None,
            hosts=list(hosts) or None,
            actions=list(actions) or None,
            reply_timeout=_nanoseconds(reply_timeout),
            host_timeout=_nanoseconds(host_timeout),
        )
        prefix = "sandbox-eviction-manual-" + ("dryrun-" if dry_run else "")
        out = await self._run(EVICTION_WORKFLOW_TYPE, f"{prefix}{time.time_ns()}", arg)
        return models.EvictionRunResult.model_validate(out)

    async def _run(self, workflow: str, workflow_id: str, arg: BaseModel) -> Any:
        try:
            return await self.temporal.execute_workflow(
                workflow,
                _rpc.dump(arg),
                id=workflow_id,
                task_queue=self.task_queue,
                execution_timeout=timedelta(hours=2),
                result_type=dict,
            )
        except (temporalio.client.WorkflowFailureError, temporalio.service.RPCError) as e:
            raise _rpc.typed(e) from e
