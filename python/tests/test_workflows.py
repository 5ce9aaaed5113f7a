"""The workflows beyond sessions through the SDK: a fan-out with script tasks merged back, an
eviction run (dry run), a cleanup of a user (dry run, then for real), and pin/unpin."""

from __future__ import annotations

from datetime import timedelta

import pytest

from sandboxcore import AsyncClient, errors


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
