"""pydantic-ai drives a real agent loop against a real worker with a scripted FunctionModel (no
model calls): search, edit, run the tests, see the diff, commit; a bad path comes back to the
model as text it can read. The toolset's schemas are exactly those of ``sandboxctl mcp``."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from mcp import ClientSession
from mcp.client.stdio import stdio_client
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from sandboxcore import AsyncClient, Workspace, errors
from sandboxcore.agent_tools import _command_arg, catalog
from sandboxcore.pydantic_ai import toolset

from .conftest import REPO_ROOT, Worker, mcp_server

TEST_FILE = (
    "import sys\nsys.path.insert(0, 'src')\nimport app\n"
    "assert app.greet() == 'hello, world', app.greet()\nprint('tests pass')\n"
)

SCRIPT: list[tuple[str, dict[str, Any]]] = [
    ("sandbox_search", {"pattern": "def greet", "literal": True}),
    ("sandbox_text_editor", {"command": "create", "path": "test_app.py", "file_text": TEST_FILE}),
    ("sandbox_shell", {"command": "python3 test_app.py"}),
    (
        "sandbox_text_editor",
        {
            "command": "str_replace",
            "path": "src/app.py",
            "old_str": "'hello'",
            "new_str": "'hello, world'",
        },
    ),
    ("sandbox_shell", {"command": "python3 test_app.py"}),
    ("sandbox_text_editor", {"command": "view", "path": "../../etc/passwd"}),
    ("sandbox_git", {"command": "diff"}),
    ("sandbox_git", {"command": "commit", "message": "greet the world"}),
]


def scripted(seen: dict[str, Any]) -> FunctionModel:
    """A model that calls SCRIPT's tools one at a time and records what came back."""

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen["tools"] = {t.name: t.parameters_json_schema for t in info.function_tools}
        returns = [
            p
            for m in messages
            if isinstance(m, ModelRequest)
            for p in m.parts
            if isinstance(p, ToolReturnPart)
        ]
        seen["returns"] = [str(r.content) for r in returns]
        step = len(returns)
        if step < len(SCRIPT):
            name, args = SCRIPT[step]
            return ModelResponse(
                parts=[ToolCallPart(name, json.dumps(args), tool_call_id=f"c{step}")]
            )
        return ModelResponse(parts=[TextPart("done")])

    return FunctionModel(model)


async def test_agent_loop(client: AsyncClient, repo_url: str, unique: str) -> None:
    ws = await client.acquire(
        user_id="erin", project_id="p1", repo_url=repo_url, conversation_id=unique
    )
    seen: dict[str, Any] = {}
    agent = Agent(scripted(seen), toolsets=[toolset(ws)])
    result = await agent.run("Make greet() greet the world, run the tests, commit.")
    assert result.output == "done"
    r = seen["returns"]
    assert "src/app.py:1:def greet():" in r[0]
    assert r[2].startswith("exit code 1") and "AssertionError" in r[2]
    assert "Edited src/app.py" in r[3]
    assert r[4].startswith("exit code 0") and "tests pass" in r[4]
    assert r[5].startswith("InvalidWorkspacePath: "), r[5]  # the model reads the error
    assert "+    return 'hello, world'" in r[6] and "test_app.py" in r[6]
    assert r[7].startswith("Committed ")
    # The bytes on disk and the commit.
    assert await ws.files.read("src/app.py") == b"def greet():\n    return 'hello, world'\n"
    log = await ws.git.log(limit=1)
    assert log.commits[0].subject == "greet the world"
    assert r[7] == f"Committed {log.commits[0].commit} on {ws.branch}.\n"
    st = await ws.git.status()
    assert not st.dirty


async def test_read_only_gating(client: AsyncClient, repo_url: str) -> None:
    ws = await client.acquire(user_id="erin", project_id="p1", repo_url=repo_url, mode="analysis")
    seen: dict[str, Any] = {}

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen["tools"] = sorted(t.name for t in info.function_tools)
        return ModelResponse(parts=[TextPart("ok")])

    await Agent(FunctionModel(model), toolsets=[toolset(ws)]).run("look")
    assert seen["tools"] == ["sandbox_git", "sandbox_search", "sandbox_text_editor"]


def test_catalog_is_the_committed_schema() -> None:
    shipped = json.loads((REPO_ROOT / "python/src/sandboxcore/tools.json").read_text())
    assert shipped == json.loads((REPO_ROOT / "docs/schema/tools.json").read_text())
    assert catalog() == shipped


async def mcp_tools(worker: Worker, ws: Workspace) -> dict[str, Any]:
    params = mcp_server(worker, ws.id)
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        listed = await session.list_tools()
    return {t.name: t for t in listed.tools}


@pytest.mark.parametrize("mode", ["edit", "analysis"])
async def test_schemas_equal_sandboxctl_mcp(
    worker: Worker, client: AsyncClient, repo_url: str, unique: str, mode: str
) -> None:
    ws = await client.acquire(
        user_id="erin", project_id="p1", repo_url=repo_url, mode=mode, conversation_id=unique
    )
    served = await mcp_tools(worker, ws)
    seen: dict[str, Any] = {}

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.update({t.name: t for t in info.function_tools})
        return ModelResponse(parts=[TextPart("ok")])

    await Agent(FunctionModel(model), toolsets=[toolset(ws)]).run("list")
    assert sorted(seen) == sorted(served)
    for name, tool in served.items():
        assert seen[name].parameters_json_schema == tool.input_schema, name
        assert seen[name].description == tool.description, name


def test_example_runs(worker: Worker, repo_url: str) -> None:
    import subprocess
    import sys

    env = {
        **{
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("TEMPORAL_", "SANDBOX_", "MODEL"))
        },
        "TEMPORAL_ADDRESS": worker.address,
        "SANDBOX_TASK_QUEUE": worker.task_queue,
        "TEMPORAL_CONFIG_FILE": str(worker.data_dir.parent / "no-temporal.toml"),
        "REPO_URL": repo_url,
    }
    example = REPO_ROOT / "python/examples/pydantic_ai_agent.py"
    out = subprocess.run(
        [sys.executable, str(example)], env=env, capture_output=True, text=True, timeout=180
    )
    assert out.returncode == 0, out.stderr
    assert "last commit: Add notes" in out.stdout


def test_shell_and_exec_take_command_and_the_old_cmd() -> None:
    for tool in catalog()["writable"]:
        if tool["name"] not in ("sandbox_shell", "sandbox_exec"):
            continue
        props = tool["inputSchema"]["properties"]
        assert "command" in props and not props["command"].get("deprecated")
        assert props["cmd"]["deprecated"] is True
        assert "command" not in tool["inputSchema"].get("required", [])
    assert _command_arg("a", None) == "a"
    assert _command_arg(None, "b") == "b"
    assert _command_arg("c", "c") == "c"
    for command, cmd, field in (("a", "b", "cmd"), (None, None, "command"), (" ", None, "command")):
        try:
            _command_arg(command, cmd)
        except errors.InvalidArgument as e:
            assert e.field == field
        else:
            raise AssertionError((command, cmd))
