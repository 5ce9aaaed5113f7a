"""The workflows beyond sessions through the SDK: a fan-out with script tasks merged back, an
eviction run (dry run), a cleanup of a user (dry run, then for real), and pin/unpin."""

from __future__ import annotations

from datetime import timedelta

import pytest

from sandboxcore import AsyncClient, errors, identity


async def test_fanout_merges_script_tasks(client: AsyncClient, repo_url: str, unique: str) -> None:
    conv = await client.acquire(
        user_id="dave", project_id="p1", repo_url=repo_url, conversation_id=unique
    )
    fan = await client.fanout(
        unique,
        conversation=conv,
        tasks=[
            {"task_id": f"{unique}-a", "script": "echo A > a.txt"},
            {"task_id": f"{unique}-b", "script": "echo B > b.txt"},
            {"task_id": f"{unique}-c", "script": "exit 1"},
        ],
        task_timeout=timedelta(minutes=5),
    )
    report = await fan.result()
    assert report.state == "completed"
    by_id = {t.task_id: t for t in report.tasks}
    assert by_id[f"{unique}-a"].status == "succeeded" and by_id[f"{unique}-a"].merge == "merged"
    assert by_id[f"{unique}-c"].status == "failed" and by_id[f"{unique}-c"].exit_code == 1
    assert await conv.files.read("a.txt") == b"A\n"
    assert await conv.files.read("b.txt") == b"B\n"
    assert (await fan.progress()).state == "completed"
    with pytest.raises(errors.SandboxConflict):
        await client.fanout(unique, conversation=conv, tasks=[{"task_id": f"{unique}-d"}])
    with pytest.raises(errors.InvalidArgument):
        await client.fanout("bad id", conversation=conv, tasks=[])


async def test_fanout_ids_are_per_tenant(client: AsyncClient, repo_url: str, unique: str) -> None:
    """Two tenants start fan-outs with one fan-out id at once; each finds only its own, and a
    third finds nothing and learns none of their ids (docs/SECURITY.md "Tenant isolation")."""
    dave = await client.acquire(
        user_id=f"dave-{unique}", project_id="p1", repo_url=repo_url, conversation_id="c1"
    )
    erin = await client.acquire(
        user_id=f"erin-{unique}", project_id="p1", repo_url=repo_url, conversation_id="c1"
    )
    fid = "f-" + unique[-8:]
    fans = {}
    for conv in (dave, erin):
        fan = await client.fanout(fid, conversation=conv, tasks=[{"task_id": "t1"}])
        assert fan.workflow_id == identity.fanout_workflow_id(
            conv.handle.user_id, conv.handle.project_id, fid
        )
        fans[conv.id] = fan
    assert len({f.workflow_id for f in fans.values()}) == 2
    for conv in (dave, erin):
        found = client.fanout_handle(
            fid, user_id=conv.handle.user_id, project_id=conv.handle.project_id
        )
        report = await found.progress()
        assert report.fanout_id == fid
        assert report.conversation_workspace_id == conv.id
        assert found.workflow_id == fans[conv.id].workflow_id
    stranger = client.fanout_handle(fid, user_id=f"mallory-{unique}", project_id="p1")
    for call in (stranger.progress(), stranger.cancel(), stranger.result()):
        with pytest.raises(errors.WorkspaceNotFound) as info:
            await call
        for secret in (dave.id, erin.id, dave.handle.user_id, erin.handle.user_id):
            assert secret not in str(info.value)
    with pytest.raises(errors.InvalidArgument):
        await client.fanout(fid, conversation=dave.id, tasks=[{"task_id": "t2"}])
    with pytest.raises(errors.InvalidArgument):
        await client.fanout(
            fid, conversation=dave, user_id=erin.handle.user_id, tasks=[{"task_id": "t2"}]
        )
    await fans[erin.id].cancel()
    await fans[dave.id].complete_task("t1", succeeded=False, message="no")
    report = await fans[dave.id].result()
    assert report.state == "completed" and report.tasks[0].status == "failed"


async def test_fanout_legacy_id_only_for_its_tenant(
    client: AsyncClient, repo_url: str, unique: str
) -> None:
    """A fan-out a client from before tenant ids started under sandbox-fanout/<fanout_id> is
    found by its conversation's tenant, and by no other."""
    conv = await client.acquire(
        user_id=f"dave-{unique}", project_id="p1", repo_url=repo_url, conversation_id="c1"
    )
    fid = "f-" + unique[-8:]
    legacy = identity.legacy_fanout_workflow_id(fid)
    await client.temporal.start_workflow(
        "TaskFanoutWorkflow",
        {"conversation_workspace_id": conv.id, "tasks": [{"task_id": "t1"}]},
        id=legacy,
        task_queue=client.task_queue,
    )
    own = client.fanout_handle(fid, user_id=conv.handle.user_id, project_id="p1")
    assert (await own.progress()).fanout_id == fid
    assert own.workflow_id == legacy
    for user, project in ((f"erin-{unique}", "p1"), (conv.handle.user_id, "p2")):
        other = client.fanout_handle(fid, user_id=user, project_id=project)
        with pytest.raises(errors.WorkspaceNotFound) as info:
            await other.complete_task("t1", succeeded=True)
        assert conv.id not in str(info.value) and legacy not in str(info.value)
    await own.cancel()


async def test_eviction_and_cleanup(client: AsyncClient, repo_url: str, unique: str) -> None:
    user = f"u{unique[-8:]}"
    ws = await client.acquire(
        user_id=user, project_id="p1", repo_url=repo_url, conversation_id="c1"
    )
    st = await ws.pin(timedelta(hours=1))
    assert st.pinned_until is not None
    unpinned = await ws.unpin()
    assert unpinned.pinned_until is None or unpinned.pinned_until.year == 1, unpinned
    with pytest.raises(errors.InvalidArgument):
        await ws.pin(timedelta(hours=-1))

    run = await client.evict_now(dry_run=True)
    assert run.dry_run and run.summary.hosts >= 1
    assert run.workflow_id.startswith("sandbox-eviction-manual-dryrun-")

    plan = await client.cleanup(user_id=user, dry_run=True)
    assert plan.dry_run and [w.outcome for w in plan.workspaces or []] == ["would_destroy"]
    report = await client.cleanup(user_id=user, discard=True)
    assert report.summary.destroyed == 1
    assert [w.workspace_id for w in report.workspaces or []] == [ws.id]
    with pytest.raises(errors.WorkspaceNotFound):
        await ws.files.read("README.md")
