"""pydantic-ai: the workspace's agent tools as a toolset (``pip install
sandboxcore[pydantic-ai]``; README "Use it from an agent").

.. code-block:: python

    from pydantic_ai import Agent
    from sandboxcore.pydantic_ai import toolset

    agent = Agent("openai:gpt-5", toolsets=[toolset(ws)])

The tools, their names, descriptions, input schemas and gating are those of ``sandboxctl mcp``
(:mod:`sandboxcore.agent_tools`); a typed error comes back to the model as the tool's text
(``"FileNotFound: ..."``), never as a failed run.
"""

from __future__ import annotations

from typing import Any

from pydantic_ai import Tool
from pydantic_ai.toolsets import FunctionToolset

from .agent_tools import AgentTools, definitions
from .workspace import Workspace

__all__ = ["toolset"]


def toolset(ws: Workspace, *, id: str | None = None) -> FunctionToolset[Any]:
    """A pydantic-ai toolset of ``ws``'s agent tools: every tool of the MCP server for the
    workspace's capabilities (read tools only on an analysis workspace, ``sandbox_pr`` only with
    a code host), each tool's JSON schema exactly the server's. ``id`` names the toolset
    (default ``sandboxcore-<workspace id>``)."""
    tools = AgentTools(ws)

    def make(d: dict[str, Any]) -> Tool[Any]:
        name = d["name"]

        async def run(**arguments: Any) -> str:
            return await tools.call(name, arguments)

        tool: Tool[Any] = Tool.from_schema(
            run, name=name, description=d["description"], json_schema=d["inputSchema"]
        )
        return tool

    return FunctionToolset([make(d) for d in definitions(ws)], id=id or f"sandboxcore-{ws.id}")
