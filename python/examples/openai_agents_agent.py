"""An OpenAI Agents SDK agent working in a sandboxcore workspace: it writes a function and its
test, runs the test and looks at the tree; then its work is shown and committed.

Run it against `make run` (TEMPORAL_ADDRESS defaults to 127.0.0.1:7233) with REPO_URL set to a
repository the worker may clone, e.g. file://$PWD. It calls the model named by OPENAI_MODEL (the
SDK's default when unset; OPENAI_API_KEY needed), or, with SCRIPTED_MODEL=1 or --scripted, the
SDK's own ScriptedModel, which makes the same tool calls without calling any model.
"""

import asyncio
import os
import sys
import uuid

from agents import RunConfig, Runner
from agents.run_config import SandboxRunConfig
from agents.sandbox import SandboxAgent
from agents.testing import ScriptedModel, assistant_message, function_call
from openai.types.responses import ResponseCustomToolCall

from sandboxcore import AsyncClient
from sandboxcore.openai_agents import (
    SandboxcoreSandboxClient,
    SandboxcoreSandboxClientOptions,
    workspace_of,
)

TASK = (
    "Add hello.py with a function greet() returning 'hello, world', and test_hello.py testing "
    "it with unittest. Run the test, then show `git status --short`."
)
PATCH = """*** Begin Patch
*** Add File: hello.py
+def greet():
+    return 'hello, world'
*** Add File: test_hello.py
+import unittest
+
+from hello import greet
+
+
+class GreetTest(unittest.TestCase):
+    def test_greet(self):
+        self.assertEqual(greet(), "hello, world")
*** End Patch
"""


def scripted_model() -> ScriptedModel:
    """The tool calls a model would make for TASK, one step per model turn."""
    return ScriptedModel(
        [
            [function_call("exec_command", {"cmd": "ls"}, call_id="c1")],
            [
                ResponseCustomToolCall(
                    type="custom_tool_call", name="apply_patch", input=PATCH, call_id="c2"
                )
            ],
            [
                function_call(
                    "exec_command",
                    {"cmd": "PYTHONDONTWRITEBYTECODE=1 python3 -m unittest -v test_hello"},
                    call_id="c3",
                )
            ],
            [function_call("exec_command", {"cmd": "git status --short"}, call_id="c4")],
            [assistant_message("Added greet() and its test; the test passes.")],
        ]
    )


async def main() -> None:
    scripted = "--scripted" in sys.argv or os.environ.get("SCRIPTED_MODEL") == "1"
    client = await AsyncClient.connect()  # TEMPORAL_*, SANDBOX_TASK_QUEUE, SANDBOX_PAYLOAD_KEYS
    sandboxes = SandboxcoreSandboxClient(
        client, user_id="alice", project_id="demo", repo_url=os.environ["REPO_URL"]
    )
    session = await sandboxes.create(
        options=SandboxcoreSandboxClientOptions(conversation_id=f"oa-{uuid.uuid4().hex[:12]}")
    )
    agent = SandboxAgent(
        name="coder",
        instructions="You are a careful engineer. Work in the repository with your tools.",
        model=scripted_model() if scripted else os.environ.get("OPENAI_MODEL"),
    )
    async with session:  # starts it; on exit the session is released (the workspace stays)
        result = await Runner.run(
            agent,
            TASK,
            run_config=RunConfig(
                sandbox=SandboxRunConfig(session=session), tracing_disabled=scripted
            ),
        )
        print("agent:", result.final_output)
        ws = workspace_of(session)  # the sandboxcore Workspace behind the session
        print((await ws.git.diff()).patch)
        commit = await ws.git.commit("Add greet()")
        print("committed", commit.commit[:12], "on", commit.branch)
    # The contract's delete: destroy the workspace, its unpushed commit kept restorable.
    await sandboxes.delete(session)
    print("destroyed", ws.id, "(sandboxctl restore brings it back)")


asyncio.run(main())
