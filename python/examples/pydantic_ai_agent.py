"""A pydantic-ai agent working in a sandboxcore workspace (README "Use it from an agent").

    REPO_URL=file://$PWD MODEL=openai:gpt-5 python python/examples/pydantic_ai_agent.py

MODEL is any pydantic-ai model name; without it a scripted FunctionModel plays the model (no
model call), which is how the test suite runs this file.
"""

import asyncio
import json
import os

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from sandboxcore import AsyncClient
from sandboxcore.pydantic_ai import toolset

STEPS = [  # what the scripted model does, one tool call per turn
    ("sandbox_search", {"pattern": "def ", "glob": "*.py"}),
    ("sandbox_text_editor", {"command": "create", "path": "NOTES.md", "file_text": "# Notes\n"}),
    ("sandbox_git", {"command": "commit", "message": "Add notes"}),
]


def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    turn = sum(isinstance(m, ModelResponse) for m in messages)
    if turn < len(STEPS):
        name, args = STEPS[turn]
        return ModelResponse(parts=[ToolCallPart(name, json.dumps(args))])
    return ModelResponse(parts=[TextPart("Added NOTES.md and committed it.")])


async def main() -> None:
    client = await AsyncClient.connect()
    ws = await client.acquire(
        user_id="alice", project_id="demo", repo_url=os.environ["REPO_URL"], conversation_id="pyai"
    )
    model = os.environ.get("MODEL") or FunctionModel(scripted)
    agent = Agent(
        model, toolsets=[toolset(ws)], instructions="You work in a git repository; commit."
    )
    result = await agent.run("Add a NOTES.md file and commit it.")
    print(result.output)
    print("last commit:", (await ws.git.log(limit=1)).commits[0].subject)
    await ws.release()


asyncio.run(main())
