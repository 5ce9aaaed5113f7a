"""A deepagents agent working in a sandboxcore workspace: it finds greet(), changes it, runs the
test, reads the diff; then the workspace commits.

    pip install './python[deepagents]'      # from the repository's root
    REPO_URL=file://$PWD python python/examples/deepagents_agent.py                # a real model
    REPO_URL=file://$PWD python python/examples/deepagents_agent.py --scripted     # no model at all

TEMPORAL_ADDRESS (default 127.0.0.1:7233), SANDBOX_TASK_QUEUE and the other variables of
AsyncClient.connect() say where the worker is. With a real model, DEEPAGENTS_MODEL names it
(e.g. "anthropic:claude-sonnet-4-6"); with --scripted (or SANDBOX_SCRIPTED_MODEL=1) a Python
function plays the model, so the example runs without a model or network.
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
from typing import Any

from deepagents import create_deep_agent
from deepagents.backends import CompositeBackend, StateBackend
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from sandboxcore import AsyncClient
from sandboxcore.deepagents import SandboxcoreBackend

TASK = (
    "Make greet() return 'hello from deepagents'. Add test_app.py asserting it, run it with "
    "python3, then show the diff."
)


class ScriptedModel(BaseChatModel):
    """Plays the model: each reply is the next step, written from what the tools said."""

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedModel:
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        done = [m for m in messages if isinstance(m, ToolMessage)]
        found = re.search(r"(/\S+\.py)", str(done[0].content)) if done else None
        steps: list[tuple[str, dict[str, Any]]] = [
            ("grep", {"pattern": "def greet"}),
            (
                "edit_file",
                {
                    "file_path": found.group(1) if found else "/src/app.py",
                    "old_string": "return 'hello'",
                    "new_string": "return 'hello from deepagents'",
                },
            ),
            (
                "write_file",
                {
                    "file_path": "/test_app.py",
                    "content": "import sys\nsys.path.insert(0, 'src')\nfrom app import greet\n"
                    "assert greet() == 'hello from deepagents'\nprint('test passed')\n",
                },
            ),
            ("execute", {"command": "python3 test_app.py"}),
            ("execute", {"command": "git diff"}),
        ]
        if len(done) < len(steps):
            name, args = steps[len(done)]
            reply = AIMessage(
                content="",
                tool_calls=[
                    {"name": name, "args": args, "id": f"c{len(done)}", "type": "tool_call"}
                ],
            )
        else:
            reply = AIMessage(content="greet() now says 'hello from deepagents'; the test passes.")
        return ChatResult(generations=[ChatGeneration(message=reply)])


async def main() -> None:
    scripted = "--scripted" in sys.argv[1:] or os.environ.get("SANDBOX_SCRIPTED_MODEL") == "1"
    client = await AsyncClient.connect()  # TEMPORAL_*, SANDBOX_TASK_QUEUE, SANDBOX_PAYLOAD_KEYS
    ws = await client.acquire(
        user_id="alice",
        project_id="demo",
        repo_url=os.environ["REPO_URL"],
        conversation_id="deepagents-demo",
    )
    print("workspace", ws.id, "on branch", ws.branch)
    try:
        # The worktree is the agent's filesystem ("/src/app.py"); what deepagents' middleware
        # stores for itself stays in the agent's state, out of the repository.
        backend = CompositeBackend(
            default=SandboxcoreBackend(ws),
            routes={
                "/large_tool_results/": StateBackend(),
                "/conversation_history/": StateBackend(),
            },
        )
        model: Any = ScriptedModel() if scripted else os.environ.get("DEEPAGENTS_MODEL")
        agent = create_deep_agent(model=model, backend=backend)
        state = await agent.ainvoke(
            {"messages": [{"role": "user", "content": TASK}]}, {"recursion_limit": 60}
        )
        for m in state["messages"]:
            if isinstance(m, ToolMessage):
                print(f"--- {m.name} ({m.status})\n{m.content}")
        print("agent:", state["messages"][-1].content)

        commit = await ws.git.commit("greet: say hello from deepagents")
        print("committed", commit.commit[:12], "on", commit.branch)
    finally:
        await ws.release()  # the runtime stops; the workspace stays for the next acquire


if __name__ == "__main__":
    asyncio.run(main())
