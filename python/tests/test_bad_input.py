"""Bad input gets a typed error (docs/API.md "Errors") and changes nothing."""

from __future__ import annotations

import pytest

from sandboxcore import AsyncClient, Workspace, errors


@pytest.fixture
async def ws(client: AsyncClient, repo_url: str, unique: str) -> Workspace:
    return await client.acquire(
        user_id="alice", project_id="p1", repo_url=repo_url, conversation_id=unique
    )


async def test_bad_acquires(client: AsyncClient, repo_url: str) -> None:
    with pytest.raises(errors.InvalidArgument) as e:
        await client.acquire(
            user_id="al ice", project_id="p1", repo_url=repo_url, conversation_id="c"
        )
    assert e.value.field == "user_id" and not e.value.retryable
    with pytest.raises(errors.InvalidArgument):
        await client.acquire(user_id="alice", project_id="p1", repo_url=repo_url)  # no conversation
    with pytest.raises(errors.InvalidArgument):  # refused by the worker's validator
        await client.acquire(
            user_id="alice",
            project_id="p1",
            repo_url="ftp://example.com/x.git",
            conversation_id="c",
        )
    with pytest.raises(errors.RepoNotFound):
        await client.acquire(
            user_id="alice", project_id="p1", repo_url=repo_url + "-missing", conversation_id="c"
        )
    with pytest.raises(errors.RefNotFound):
        await client.acquire(
            user_id="alice",
            project_id="p1",
            repo_url=repo_url,
            mode="analysis",
            base_ref="no-such-ref",
        )
    with pytest.raises(errors.InvalidArgument):
        await client.acquire(
            user_id="alice",
            project_id="p1",
            repo_url=repo_url,
            conversation_id="c",
            branch_name="main",
        )
    with pytest.raises(errors.InvalidArgument):
        await client.workspace("ws-nothex")
    with pytest.raises(errors.WorkspaceNotFound):
        await client.workspace("ws-" + "0" * 24)


async def test_bad_operations(ws: Workspace) -> None:
    with pytest.raises(errors.FileNotFound) as e:
        await ws.files.read("no/such/file")
    assert isinstance(e.value, errors.InvalidWorkspacePath)
    assert isinstance(e.value, errors.WorkspaceError)
    assert e.value.type == "FileNotFound"
    with pytest.raises(errors.InvalidWorkspacePath):
        await ws.files.read("../../etc/passwd")
    with pytest.raises(errors.InvalidWorkspacePath):
        await ws.files.write("/etc/evil", "x")
    with pytest.raises(errors.InvalidWorkspacePath):
        await ws.files.write(".git/config", "x")
    with pytest.raises(errors.SandboxResourceLimit):
        await ws.files.write("big.bin", b"x" * ((1 << 20) + 1))
    with pytest.raises(errors.InvalidArgument) as e:
        await ws.files.edit("README.md", old_str="not there", new_str="y")
    assert e.value.field == "old_str"
    with pytest.raises(errors.InvalidArgument):
        await ws.exec([])
    with pytest.raises(errors.InvalidWorkspacePath):
        await ws.exec(["true"], cwd="\udcff")  # not valid UTF-8: refused before sending
    with pytest.raises(errors.SandboxNotFound):
        await ws.checkpoints.rollback(999)
    with pytest.raises(errors.SandboxNotFound):
        await ws.proc.signal("no-such-process")
    with pytest.raises(errors.InvalidArgument):
        await ws.preview_url(70000)
    with pytest.raises(errors.InvalidArgument):
        await ws.fork()
    # Nothing changed.
    st = await ws.git.status()
    assert not st.dirty
