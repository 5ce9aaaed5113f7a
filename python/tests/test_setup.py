"""The repository's environment and setup through the SDK (docs/RUNTIMES.md "Repository
environment", "Setup"): ``setup="wait"`` returns once the setup ran, its state in the handle
and in describe; the repository's variables reach commands."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from mcp import ClientSession
from mcp.client.stdio import stdio_client
from mcp.types import TextContent

from sandboxcore import AsyncClient, Workspace
from sandboxcore.agent_tools import AgentTools, catalog

from .conftest import Worker, git, mcp_server


def yaml_repo(root: Path, name: str, sandboxcore_yaml: str) -> str:
    """The file:// URL of a new one-commit repository under ``root`` holding only
    ``.sandboxcore.yaml``."""
    origin = root / name
    origin.mkdir(parents=True)
    git(origin, "init", "-q", "-b", "main")
    (origin / ".sandboxcore.yaml").write_text(sandboxcore_yaml)
    git(origin, "add", "-A")
    git(origin, "commit", "-q", "-m", "setup")
    return "file://" + str(origin)


async def test_setup_wait_and_environment(
    client: AsyncClient, session_root: Path, unique: str
) -> None:
    url = yaml_repo(
        session_root,
        f"setup-{unique}",
        "setup: echo ready > .ready\nenv:\n  GREETING: hello\n",
    )
    ws = await client.acquire(
        user_id="setup",
        project_id="p",
        repo_url=url,
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


async def mcp_text(worker: Worker, ws: Workspace, name: str, args: dict[str, Any]) -> str:
    """The text ``sandboxctl mcp`` answers tool ``name`` with on workspace ``ws``."""
    params = mcp_server(worker, ws.id)
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        res = await session.call_tool(name, args)
    assert not res.is_error, res.content
    first = res.content[0]
    assert isinstance(first, TextContent)
    return first.text


def test_every_tool_has_a_handler() -> None:
    for tools in catalog().values():
        for d in tools:
            name = d["name"].removeprefix("sandbox_")
            assert callable(getattr(AgentTools, "_" + name, None)), d["name"]


async def test_setup_and_overlaps_tools_read_as_the_mcp_server(
    worker: Worker, client: AsyncClient, session_root: Path, unique: str
) -> None:
    """sandbox_setup and sandbox_overlaps through the framework-neutral tools answer the text
    the MCP server does; run: true runs the setup again; sandbox_shell takes env."""
    url = yaml_repo(session_root, f"setup-tool-{unique}", "setup: echo installed; echo warn >&2\n")
    ws = await client.acquire(
        user_id="setup-tool",
        project_id="p",
        repo_url=url,
        conversation_id=unique,
        setup="wait",
    )
    tools = AgentTools(ws)
    assert "sandbox_setup" in tools.names()
    text = await tools.call("sandbox_setup", {})
    assert text.startswith("setup done (exit 0) in "), text
    assert "--- stdout (last 4096 bytes at most)\ninstalled\n" in text
    assert "--- stderr (last 4096 bytes at most)\nwarn\n" in text
    assert text == await mcp_text(worker, ws, "sandbox_setup", {})

    await ws.files.write("extra.txt", b"x")
    assert (await tools.call("sandbox_setup", {"run": True})).startswith("setup done (exit 0)")
    args = {"command": 'echo "$GREETING"', "env": {"GREETING": "hi there"}}
    assert "hi there" in await tools.call("sandbox_shell", args)
    assert "hi there" in await mcp_text(worker, ws, "sandbox_shell", args)
    overlaps = await tools.call("sandbox_overlaps", {})
    assert overlaps.startswith("1 files changed here since the base; 0 other workspaces checked")
    assert overlaps == await mcp_text(worker, ws, "sandbox_overlaps", {})


async def test_exec_beside_setup(client: AsyncClient, session_root: Path, unique: str) -> None:
    """``beside_setup=True`` runs while the setup runs; without it a command waits for it."""
    url = yaml_repo(session_root, f"beside-{unique}", "setup: sleep 15; echo ready > .ready\n")
    ws = await client.acquire(
        user_id="beside", project_id="p", repo_url=url, conversation_id=unique
    )
    probe = "test -e .ready && cat .ready || echo not-ready"
    for _ in range(100):
        d = await ws.describe()
        if d.setup is not None and d.setup.state == "running":
            break
        await asyncio.sleep(0.1)
    assert (await ws.exec(probe, beside_setup=True)).stdout == b"not-ready\n"
    assert (await ws.exec(probe)).stdout == b"ready\n"
