"""The blocking twin against the same worker."""

from __future__ import annotations

import pytest

from sandboxcore import Client, SyncWorkspace, errors

from .conftest import Worker


def test_sync_client(worker: Worker, repo_url: str, unique: str) -> None:
    with Client.connect(worker.address, task_queue=worker.task_queue) as client:
        ws = client.acquire(
            user_id="bob", project_id="p1", repo_url=repo_url, conversation_id=unique
        )
        assert isinstance(ws, SyncWorkspace)
        assert ws.branch.endswith(f"/edits-{unique}")
        r = ws.exec(["sh", "-c", "echo hi; exit 2"])
        assert (r.exit_code, r.stdout) == (2, b"hi\n")
        ws.files.write("a.txt", "A\n")
        assert ws.files.read("a.txt") == b"A\n"
        assert ws.git.commit("add a").branch == ws.branch
        with pytest.raises(errors.FileNotFound):
            ws.files.read("missing")
        p = ws.proc.start(["sh", "-c", "echo bg; sleep 0.2"])
        info = p.wait()
        assert info.exited and info.exit_code == 0
        assert b"".join(c.data for c in p.output()) == b"bg\n"
        with ws.exec_stream("echo streamed") as s:
            assert b"".join(c.data for c in s) == b"streamed\n"
            assert s.result().exit_code == 0
        assert any(row.workspace_id == ws.id for row in client.list(user_id="bob"))
        assert ws.destroy(discard=True).existed
