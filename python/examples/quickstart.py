"""Acquire a workspace, run a command, edit a file, commit: the main job from Python.

Run it against `make run` (TEMPORAL_ADDRESS defaults to 127.0.0.1:7233) with
REPO_URL set to a repository the worker may clone, e.g. file://$PWD.
"""

import asyncio
import os

from sandboxcore import AsyncClient, errors


async def main() -> None:
    client = await AsyncClient.connect()  # TEMPORAL_*, SANDBOX_TASK_QUEUE, SANDBOX_PAYLOAD_KEYS
    ws = await client.acquire(
        user_id="alice",
        project_id="demo",
        repo_url=os.environ["REPO_URL"],
        conversation_id="c42",
    )
    print("workspace", ws.id, "on branch", ws.branch, "at", ws.base_commit[:12])

    result = await ws.exec(["git", "log", "--oneline", "-3"])
    print(result.exit_code, result.stdout.decode())

    await ws.files.write("hello.txt", "hello from Python\n")
    await ws.files.edit("hello.txt", old_str="Python", new_str="the Python SDK")
    print((await ws.git.diff()).patch)
    commit = await ws.git.commit("Add hello.txt")
    print("committed", commit.commit[:12], "on", commit.branch)

    try:
        await ws.files.read("no/such/file")
    except errors.FileNotFound as e:  # typed errors: also an InvalidWorkspacePath
        print("typed error:", e.type, e.retryable)

    await ws.release()  # the runtime stops; the workspace stays for the next acquire


asyncio.run(main())
