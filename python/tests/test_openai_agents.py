"""sandboxcore.openai_agents: the OpenAI Agents SDK's sandbox client contract on real workspaces
of the test worker (create, exec, files, PTY, serialize, resume by reattaching, after eviction
and after a destroy without discard, delete), and a real agent loop (the SDK's Runner, its
sandbox tools, its own ScriptedModel: no model is called) that searches, edits, runs a test,
reads the diff and hits bad paths, after which the work is resumed and committed."""

from __future__ import annotations

import asyncio
import contextlib
import io
import itertools
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from agents import RunConfig, Runner
from agents.items import TResponseOutputItem
from agents.run_config import SandboxRunConfig
from agents.sandbox import Manifest, SandboxAgent
from agents.sandbox.errors import (
    ExecTimeoutError,
    InvalidManifestPathError,
    PtySessionNotFoundError,
    WorkspaceArchiveReadError,
    WorkspaceReadNotFoundError,
)
from agents.testing import ModelCall, ModelStep, ScriptedModel, assistant_message, function_call
from openai.types.responses import ResponseCustomToolCall

from sandboxcore import AsyncClient, Workspace, _rpc
from sandboxcore.openai_agents import (
    SandboxcoreSandboxClient,
    SandboxcoreSandboxClientOptions,
    SandboxcoreSandboxSessionState,
    workspace_of,
)

from .conftest import REPO_ROOT, Worker

EXAMPLE = REPO_ROOT / "python" / "examples" / "openai_agents_agent.py"
APP = b"def greet():\n    return 'hello'\n"
EDITED = b"def greet():\n    return 'hello, world'\n"


def sandbox_client(client: AsyncClient, repo_url: str, **kw: Any) -> SandboxcoreSandboxClient:
    return SandboxcoreSandboxClient(
        client, user_id="oa-user", project_id="oa-proj", repo_url=repo_url, **kw
    )


async def evict(client: AsyncClient, ws: Workspace) -> None:
    """Evict ``ws`` now, unsaved work and all (the signal eviction sends it), and wait."""
    rpc = _rpc.SessionRPC(client.temporal, client.task_queue, ws.id)
    await rpc.signal_with_start(
        "evict",
        {"request_id": f"r-{ws.id}", "action": "evict_workspace", "allow_unsaved": True},
    )
    for _ in range(150):
        if (await ws.eviction()).evicted:
            return
        await asyncio.sleep(0.2)
    raise AssertionError(f"{ws.id} was not evicted")


async def test_create_exec_files_pty_and_resume(client: AsyncClient, repo_url: str, unique: str):
    sc = sandbox_client(client, repo_url)
    session = await sc.create(options=SandboxcoreSandboxClientOptions(conversation_id=unique))
    ws = workspace_of(session)
    try:
        async with session:
            root = session.state.manifest.root
            assert root.startswith("/")
            assert session.state.workspace_id == ws.id

            r = await session.exec("cat README.md && pwd -P")
            assert (r.exit_code, r.stdout) == (0, f"# demo\n{root}\n".encode())
            r = await session.exec("echo oops >&2; exit 3")
            assert (r.exit_code, r.stderr) == (3, b"oops\n")
            with pytest.raises(ExecTimeoutError):
                await session.exec("sleep 20", timeout=1)

            await session.write(Path("notes/a.txt"), io.BytesIO(b"alpha\n"))
            assert (await session.read(Path(f"{root}/notes/a.txt"))).read() == b"alpha\n"
            assert (await ws.files.read("notes/a.txt")) == b"alpha\n"
            big = os.urandom(3 << 19)  # 1.5 MiB: past ws.files' limit, through exec both ways
            await session.write(Path("big.bin"), io.BytesIO(big))
            assert (await session.read(Path("big.bin"))).read() == big
            with pytest.raises(WorkspaceReadNotFoundError):
                await session.read(Path("no/such/file"))
            with pytest.raises(InvalidManifestPathError):
                await session.read(Path("../outside"))
            with pytest.raises(WorkspaceArchiveReadError, match="InvalidWorkspacePath"):
                await session.read(Path("src"))  # a directory: the worker's typed error, named

            # PTY: a command with a terminal that waits for input, then ends.
            assert session.supports_pty()
            up = await session.pty_exec_start(
                "read x; echo got $x; exit 7", tty=True, yield_time_s=0.5
            )
            assert up.process_id is not None and up.exit_code is None
            out = b""
            for _ in range(20):
                up = await session.pty_write_stdin(
                    session_id=up.process_id, chars="hi\n" if not out else "", yield_time_s=1
                )
                out += up.output
                if up.process_id is None:
                    break
            assert b"got hi" in out and up.exit_code == 7
            # Without a terminal: output of both streams, no stdin.
            up = await session.pty_exec_start("echo out; echo err >&2", yield_time_s=5)
            assert up.process_id is None and up.exit_code == 0
            assert b"out" in up.output and b"err" in up.output
            with pytest.raises(PtySessionNotFoundError):
                await session.pty_write_stdin(session_id=1, chars="")

            tar = (await session.persist_workspace()).read()
            await session.write(Path("README.md"), io.BytesIO(b"changed\n"))
            await session.hydrate_workspace(io.BytesIO(tar))
            assert (await session.read(Path("README.md"))).read() == b"# demo\n"
            await session.exec("rm big.bin")

        # The serialized state is plain JSON; a new client object reattaches to the workspace.
        payload = json.loads(json.dumps(sc.serialize_session_state(session.state)))
        assert payload["type"] == "sandboxcore" and payload["workspace_id"] == ws.id
        sc2 = SandboxcoreSandboxClient(client)
        state = sc2.deserialize_session_state(payload)
        assert isinstance(state, SandboxcoreSandboxSessionState)
        resumed = await sc2.resume(state)
        async with resumed:
            assert workspace_of(resumed).id == ws.id
            assert workspace_of(resumed).handle.created is False
            assert (await resumed.read(Path("notes/a.txt"))).read() == b"alpha\n"

        # Evicted (its saved work only on the host): resume's acquire restores it.
        await evict(client, ws)
        resumed = await SandboxcoreSandboxClient(client).resume(
            sc2.deserialize_session_state(payload)
        )
        async with resumed:
            w = workspace_of(resumed)
            assert (w.handle.restored_from or "").startswith("refs/sandbox/evicted/")
            assert (await resumed.read(Path("notes/a.txt"))).read() == b"alpha\n"

        # Destroyed without discard: resume restores the saved work.
        await ws.destroy()
        resumed = await SandboxcoreSandboxClient(client).resume(
            sc2.deserialize_session_state(payload)
        )
        async with resumed:
            w = workspace_of(resumed)
            assert w.id == ws.id and w.handle.restored_from
            assert (await resumed.read(Path("notes/a.txt"))).read() == b"alpha\n"
            assert (await resumed.read(Path("src/app.py"))).read() == APP

        # delete with on_delete="discard": nothing is kept, so a resume starts the key afresh.
        discard = SandboxcoreSandboxClient(client, on_delete="discard")
        doomed = await discard.resume(discard.deserialize_session_state(payload))
        await discard.delete(doomed)
        fresh = await discard.resume(discard.deserialize_session_state(payload))
        async with fresh:
            assert workspace_of(fresh).handle.created is True
            with pytest.raises(WorkspaceReadNotFoundError):
                await fresh.read(Path("notes/a.txt"))
            assert (await fresh.read(Path("src/app.py"))).read() == APP
        await discard.delete(fresh)
    finally:
        with contextlib.suppress(Exception):
            await ws.destroy(discard=True)


async def test_create_needs_a_key_and_the_default_root(client: AsyncClient, repo_url: str):
    with pytest.raises(ValueError, match="user_id, project_id and repo_url"):
        await SandboxcoreSandboxClient(client).create()
    with pytest.raises(ValueError, match="manifest root"):
        await sandbox_client(client, repo_url).create(manifest=Manifest(root="/elsewhere"))


# The agent loop.

PATCH = """*** Begin Patch
*** Update File: src/app.py
@@ def greet():
-    return 'hello'
+    return 'hello, world'
*** Add File: tests/test_app.py
+import sys
+import unittest
+
+sys.path.insert(0, "src")
+
+import app
+
+
+class GreetTest(unittest.TestCase):
+    def test_greet(self):
+        self.assertEqual(app.greet(), "hello, world")
*** End Patch
"""
MISSING = """*** Begin Patch
*** Update File: src/missing.py
@@
-x
+y
*** End Patch
"""
DIRECTORY = """*** Begin Patch
*** Update File: src
@@
-x
+y
*** End Patch
"""
TEST_APP = (
    b'import sys\nimport unittest\n\nsys.path.insert(0, "src")\n\nimport app\n\n\n'
    b"class GreetTest(unittest.TestCase):\n    def test_greet(self):\n"
    b'        self.assertEqual(app.greet(), "hello, world")'  # Add File ends with no newline
)


def apply_patch(patch: str, *, call_id: str) -> TResponseOutputItem:
    return ResponseCustomToolCall(
        type="custom_tool_call", name="apply_patch", input=patch, call_id=call_id, id=call_id
    )


def shell(cmd: str, *, call_id: str) -> TResponseOutputItem:
    return function_call("exec_command", {"cmd": cmd}, call_id=call_id)


def tool_output(call: ModelCall, call_id: str) -> str:
    """What the model was given back for its tool call ``call_id``."""
    for item in call.input if isinstance(call.input, list) else []:
        if (
            isinstance(item, dict)
            and item.get("call_id") == call_id
            and str(item.get("type", "")).endswith("_output")
        ):
            out = item.get("output")
            return out if isinstance(out, str) else json.dumps(out)
    raise AssertionError(f"the model got no output for {call_id}")


def scripted_coder(seen: dict[str, str]) -> ScriptedModel:
    """A model that searches, edits, tests, hits two bad paths, reads the diff and stops,
    recording each tool output it was given."""
    script: list[tuple[str, TResponseOutputItem]] = [
        ("search", shell("grep -rn 'def greet' .", call_id="search")),
        ("edit", apply_patch(PATCH, call_id="edit")),
        (
            "test",
            shell(
                "PYTHONDONTWRITEBYTECODE=1 python3 -m unittest discover -s tests -v", call_id="test"
            ),
        ),
        ("missing", apply_patch(MISSING, call_id="missing")),
        ("directory", apply_patch(DIRECTORY, call_id="directory")),
        ("diff", shell("git diff", call_id="diff")),
    ]
    steps: list[Any] = [[script[0][1]]]

    def after(call_id: str, then: TResponseOutputItem) -> ModelStep:
        def respond(call: ModelCall) -> list[TResponseOutputItem]:
            seen[call_id] = tool_output(call, call_id)
            return [then]

        return ModelStep.respond(respond)

    for (prev, _), (_, item) in itertools.pairwise(script):
        steps.append(after(prev, item))
    steps.append(after("diff", assistant_message("greet() now says hello, world; tests pass.")))
    return ScriptedModel(steps)


async def test_agent_loop_edits_tests_and_commits(client: AsyncClient, repo_url: str, unique: str):
    seen: dict[str, str] = {}
    model = scripted_coder(seen)
    agent = SandboxAgent(name="coder", instructions="Fix greet().", model=model)
    sc = sandbox_client(client, repo_url)
    result = await Runner.run(
        agent,
        "Make greet() say hello, world and test it.",
        run_config=RunConfig(
            tracing_disabled=True,
            sandbox=SandboxRunConfig(
                client=sc, options=SandboxcoreSandboxClientOptions(conversation_id=unique)
            ),
        ),
    )
    model.assert_complete()
    assert result.final_output == "greet() now says hello, world; tests pass."
    tools = {t.name for t in (model.first_call.tools if model.first_call else [])}
    assert {"exec_command", "write_stdin", "apply_patch"} <= tools

    assert "src/app.py:1:def greet():" in seen["search"]
    assert "Process exited with code 0" in seen["test"], seen["test"]
    assert re.search(r"test_greet .* ok", seen["test"]), seen["test"]
    # Bad paths come back to the model as text it can read; the run goes on.
    assert "apply_patch missing file: src/missing.py" in seen["missing"]
    assert "cannot read" in seen["directory"] and "InvalidWorkspacePath" in seen["directory"]
    assert "-    return 'hello'" in seen["diff"] and "+    return 'hello, world'" in seen["diff"]

    # The Runner deleted its session at the end (destroy, work saved); its state resumes it.
    payload = result.to_state().to_json()["sandbox"]["session_state"]
    session = await sc.resume(sc.deserialize_session_state(payload))
    ws = workspace_of(session)
    try:
        await check_and_commit(ws)
    finally:
        await ws.destroy(discard=True)


async def check_and_commit(ws: Workspace) -> None:
    """The agent's work on disk, then committed through the SDK."""
    assert ws.handle.restored_from
    disk = Path(ws.local_path)
    assert (disk / "src" / "app.py").read_bytes() == EDITED
    assert (disk / "tests" / "test_app.py").read_bytes() == TEST_APP
    assert not (disk / "src" / "missing.py").exists()
    commit = await ws.git.commit("Say hello, world", author_name="agent", author_email="a@x.y")
    assert not commit.nothing_to_commit and commit.branch == ws.branch
    log = await ws.git.log(2)
    assert [c.subject for c in log.commits] == ["Say hello, world", "second"]
    status = await ws.git.status()
    assert not status.dirty and status.commits_since_base == 1
    shown = await ws.exec(["git", "show", "--stat", "--format=%s", "HEAD"])
    assert b"src/app.py" in shown.stdout and b"tests/test_app.py" in shown.stdout


def test_example_runs(worker: Worker, repo_url: str) -> None:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "SANDBOX_"))},
        "TEMPORAL_ADDRESS": worker.address,
        "SANDBOX_TASK_QUEUE": worker.task_queue,
        "TEMPORAL_CONFIG_FILE": str(worker.data_dir.parent / "no-temporal.toml"),
        "REPO_URL": repo_url,
        "SCRIPTED_MODEL": "1",
    }
    out = subprocess.run(
        [sys.executable, str(EXAMPLE)], env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr
    assert "+    return 'hello, world'" in out.stdout
    assert re.search(r"committed [0-9a-f]{12} on agent/[0-9a-f]{16}/edits-", out.stdout)
