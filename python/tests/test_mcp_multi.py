"""pydantic-ai's MCP client drives ``sandboxctl mcp --http ADDR --multi --key-file FILE`` with a
token from ``ws.mcp_token()``; another workspace's token is refused (403), a forged one 401."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic_ai import Agent
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from sandboxcore import AsyncClient

from .conftest import BIN_DIR, Worker, free_port


@pytest.fixture(scope="module")
def endpoint(worker: Worker, session_root: Path) -> Iterator[tuple[str, str]]:
    key = session_root / "mcp.key"
    key.write_text(base64.b64encode(os.urandom(32)).decode())
    addr = f"127.0.0.1:{free_port()}"
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "SANDBOX_"))},
        "TEMPORAL_ADDRESS": worker.address,
        "SANDBOX_TASK_QUEUE": worker.task_queue,
        "TEMPORAL_CONFIG_FILE": str(session_root / "no-temporal.toml"),
    }
    log = (session_root / "mcp-multi.log").open("wb")
    proc = subprocess.Popen(
        [str(BIN_DIR / "sandboxctl"), "mcp", "--http", addr, "--multi", "--key-file", str(key)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    host, port = addr.split(":")
    for _ in range(100):
        with socket.socket() as s:
            if s.connect_ex((host, int(port))) == 0:
                break
        time.sleep(0.1)
    yield f"http://{addr}", str(key)
    proc.terminate()
    proc.wait(timeout=10)


async def test_pydantic_ai_drives_the_multi_endpoint(
    endpoint: tuple[str, str], client: AsyncClient, repo_url: str, unique: str
) -> None:
    base, key_file = endpoint
    a = await client.acquire(
        user_id="fay", project_id="p1", repo_url=repo_url, conversation_id=f"{unique}-a"
    )
    b = await client.acquire(
        user_id="fay", project_id="p1", repo_url=repo_url, conversation_id=f"{unique}-b"
    )
    await a.files.write("who.txt", "workspace a\n")
    token = await a.mcp_token(ttl=600, key_file=key_file)

    seen: dict[str, Any] = {}

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returns = [
            p
            for m in messages
            if isinstance(m, ModelRequest)
            for p in m.parts
            if isinstance(p, ToolReturnPart)
        ]
        if not returns:
            seen["tools"] = sorted(t.name for t in info.function_tools)
            args = json.dumps({"command": "cat who.txt"})
            return ModelResponse(parts=[ToolCallPart("sandbox_shell", args)])
        seen["result"] = str(returns[0].content)
        return ModelResponse(parts=[TextPart("done")])

    toolset = MCPToolset(f"{base}/mcp/{a.id}", headers={"Authorization": f"Bearer {token}"})
    async with toolset:
        await Agent(FunctionModel(model), toolsets=[toolset]).run("who are you?")
    assert "sandbox_shell" in seen["tools"]
    assert "workspace a" in seen["result"]

    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    hdr = {"Accept": "application/json, text/event-stream"}
    async with httpx.AsyncClient(timeout=30) as http:
        other = await http.post(
            f"{base}/mcp/{b.id}", json=init, headers={**hdr, "Authorization": f"Bearer {token}"}
        )
        assert other.status_code == 403
        forged = token[:-2] + ("AA" if not token.endswith("AA") else "BB")
        bad = await http.post(
            f"{base}/mcp/{a.id}", json=init, headers={**hdr, "Authorization": f"Bearer {forged}"}
        )
        assert bad.status_code == 401
        none = await http.post(f"{base}/mcp/{a.id}", json=init, headers=hdr)
        assert none.status_code == 401
    await asyncio.gather(a.destroy(discard=True), b.destroy(discard=True))
