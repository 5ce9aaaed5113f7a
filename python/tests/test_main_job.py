"""The main job through the Python SDK against a real worker: acquire, exec, write, edit, diff,
commit, fork, checkpoint and rollback, release, resume (docs/API.md)."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import pytest

from sandboxcore import AsyncClient, ExecChunk, errors, identity

from .conftest import git


async def test_main_job(client: AsyncClient, repo_url: str, unique: str) -> None:
    ws = await client.acquire(
        user_id="alice", project_id="p1", repo_url=repo_url, conversation_id=unique
    )
    assert ws.id == identity.workspace_id_for_key(f"edit|alice|p1|{unique}")
    assert ws.workflow_id == identity.workflow_id(ws.id)
    assert ws.branch == identity.edit_branch("alice", "p1", unique)
    assert ws.mode == "edit" and ws.capabilities.writable
    assert ws.handle.created
    head = await asyncio.to_thread(git, Path(repo_url.removeprefix("file://")), "rev-parse", "HEAD")
    assert ws.base_commit == head

    # exec: bytes out, a non-zero exit is a result.
    r = await ws.exec(["sh", "-c", "cat README.md; echo err >&2; exit 3"])
    assert (r.exit_code, r.stdout, r.stderr, r.timed_out) == (3, b"# demo\n", b"err\n", False)
    r = await ws.exec("printf '%s' \"$X\"", env={"X": "from env"}, stdin=b"ignored")
    assert r.stdout == b"from env"
    r = await ws.exec(["cat"], stdin=b"\x00\xffbinary")
    assert r.stdout == b"\x00\xffbinary"
    r = await ws.exec(["sleep", "5"], timeout_s=1)
    assert r.timed_out and r.exit_code == 124

    # files
    await ws.files.write("src/new.py", "x = 1\n")
    assert await ws.files.read("src/new.py") == b"x = 1\n"
    await ws.files.write("bin.dat", b"\x00\x01\x02")
    assert (await ws.files.read_file("bin.dat")).content == b"\x00\x01\x02"
    e = await ws.files.edit("src/app.py", old_str="'hello'", new_str="'hi'")
    assert "'hi'" in e.snippet
    assert b"'hi'" in await ws.files.read("src/app.py")
    listing = await ws.files.list("src")
    assert sorted(x.name for x in listing.entries) == ["app.py", "new.py"]
    found = await ws.files.search("greet", literal=True)
    assert [(m.path, m.line) for m in found.matches] == [("src/app.py", 1)]

    # git
    st = await ws.git.status()
    assert st.dirty and {f.path for f in st.files or []} >= {"src/app.py", "src/new.py", "bin.dat"}
    d = await ws.git.diff()
    assert "+    return 'hi'" in d.patch and d.base_commit == head
    c = await ws.git.commit("agent: change greeting", author_name="Agent", author_email="a@x.io")
    assert not c.nothing_to_commit and c.branch == ws.branch
    log = await ws.git.log(limit=3)
    assert log.commits[0].subject == "agent: change greeting"
    assert log.commits[0].commit == c.commit
    assert (await ws.git.commit("again")).nothing_to_commit

    # checkpoint / rollback
    await ws.files.write("src/app.py", "broken\n")
    cp = await ws.checkpoints.create("before cleanup")
    assert cp.label == "before cleanup" and cp.files_changed == 1
    await ws.files.write("src/app.py", "worse\n")
    rb = await ws.checkpoints.rollback(cp)
    assert rb.checkpoint.id == cp.id and rb.undo.id > cp.id
    assert await ws.files.read("src/app.py") == b"broken\n"
    assert [x.id for x in await ws.checkpoints.list()] == [cp.id, rb.undo.id]

    # fork: the child holds exactly the current files, uncommitted.
    child = await ws.fork(task_id=f"{unique}-t")
    assert child.mode == "task" and child.handle.forked_from == ws.id
    assert child.fork_checkpoint is not None
    assert await child.files.read("src/app.py") == b"broken\n"
    assert child.base_commit == c.commit
    await child.destroy(discard=True)

    # release, then resume by id.
    rel = await ws.release()
    assert rel.workspace_id == ws.id
    again = await client.workspace(ws.id)
    assert again.branch == ws.branch and not again.handle.created
    assert await again.files.read("src/app.py") == b"broken\n"
    desc = await again.describe()
    assert desc.workspace_id == ws.id and desc.state == "active"

    # listed through visibility
    rows = await client.list(user_id="alice", project_id="p1")
    assert ws.id in {row.workspace_id for row in rows}

    done = await again.destroy(discard=True)
    assert done.existed and done.discarded
    # A call after destroy does not resume the session: it says so, and no run is started.
    with pytest.raises(errors.WorkspaceNotFound, match="was destroyed"):
        await again.files.read("src/app.py")
    assert (await again.describe()).state == "destroyed"


async def test_exec_stream_and_cancel(client: AsyncClient, repo_url: str, unique: str) -> None:
    ws = await client.acquire(
        user_id="alice", project_id="p1", repo_url=repo_url, conversation_id=unique
    )
    # Streaming: every byte of both streams, in order.
    stream = ws.exec_stream(
        ["sh", "-c", "for i in 1 2 3; do echo out$i; echo err$i >&2; sleep 0.3; done"]
    )
    chunks: list[ExecChunk] = [c async for c in stream]
    res = await stream.result()
    assert res.exit_code == 0
    out = b"".join(c.data for c in chunks if c.stream == "stdout")
    err = b"".join(c.data for c in chunks if c.stream == "stderr")
    assert (out, err) == (b"out1\nout2\nout3\n", b"err1\nerr2\nerr3\n")

    # Cancelling the awaiting task cancels the command on the worker.
    uid = f"exec-{unique}"
    task = asyncio.ensure_future(ws.exec(["sh", "-c", "echo started; sleep 60"], update_id=uid))
    proc = ws.proc.attach(identity.exec_process_id(ws.id, uid))
    seen = b""
    while b"started" not in seen:
        with contextlib.suppress(errors.SandboxNotFound):  # not started yet
            seen += (await proc.read(wait=5)).data
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    desc = await ws.describe()
    assert uid not in (desc.running_execs or [])
    info = await proc.wait()
    assert info.exit_reason == "cancelled"
    # The session is free again: a command runs at once.
    r = await asyncio.wait_for(ws.exec(["true"]), timeout=20)
    assert r.exit_code == 0
    await ws.destroy(discard=True)


async def test_analysis_workspace_is_read_only(client: AsyncClient, repo_url: str) -> None:
    ws = await client.acquire(user_id="alice", project_id="p1", repo_url=repo_url, mode="analysis")
    assert ws.branch == "" and not ws.capabilities.writable
    with pytest.raises(errors.SandboxCommandRejected):
        await ws.files.write("x.txt", "no")
    assert await ws.files.read("README.md") == b"# demo\n"
