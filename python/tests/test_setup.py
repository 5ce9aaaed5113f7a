"""The repository's environment and setup through the SDK (docs/RUNTIMES.md "Repository
environment", "Setup"): ``setup="wait"`` returns once the setup ran, its state in the handle
and in describe; the repository's variables reach commands."""

from __future__ import annotations

from pathlib import Path

from sandboxcore import AsyncClient

from .conftest import git


async def test_setup_wait_and_environment(
    client: AsyncClient, session_root: Path, unique: str
) -> None:
    origin = session_root / f"setup-{unique}"
    origin.mkdir(parents=True)
    git(origin, "init", "-q", "-b", "main")
    (origin / ".sandboxcore.yaml").write_text(
        "setup: echo ready > .ready\nenv:\n  GREETING: hello\n"
    )
    git(origin, "add", "-A")
    git(origin, "commit", "-q", "-m", "env")
    ws = await client.acquire(
        user_id="setup",
        project_id="p",
        repo_url="file://" + str(origin),
        conversation_id=unique,
        setup="wait",
    )
    assert ws.handle.setup is not None
    assert ws.handle.setup.state == "done"
    assert ws.handle.setup.exit_code == 0
    assert ws.handle.environment is not None
    assert ws.handle.environment.env == {"GREETING": "hello"}
    assert await ws.files.read(".ready") == b"ready\n"
    res = await ws.exec(["sh", "-c", 'echo "$GREETING"'])
    assert res.stdout == b"hello\n"
    desc = await ws.describe()
    assert desc.setup is not None and desc.setup.state == "done"
    await ws.files.write(".ready", b"")
    again = await ws.setup()
    assert again.state == "done"
    assert await ws.files.read(".ready") == b"ready\n"
