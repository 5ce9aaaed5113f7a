"""deepagents: SandboxcoreBackend against the real worker.

- the agent loop: a real deep agent (``create_deep_agent``) driven by a scripted chat model (a
  Python function writes each reply from the conversation; no model is called) finds a function
  with ``grep``, edits it, runs the repository's test with ``execute``, reads the diff, and gets
  a bad path back as an error it can read; the test then commits through the SDK and checks the
  bytes and the commit;
- the backend's mapping: paths, errors, edit, glob, grep, execute, upload/download, blocking
  calls;
- langchain-tests' own standard suite for sandbox backends (``SandboxIntegrationTests``), when
  installed (``pip install langchain-tests==1.1.9``);
- ``examples/deepagents_agent.py --scripted`` run as a subprocess.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
from deepagents import create_deep_agent
from deepagents.backends.protocol import FileDownloadResponse, FileUploadResponse
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from sandboxcore import AsyncClient, Client, SyncWorkspace, Workspace
from sandboxcore.deepagents import SandboxcoreBackend

from .conftest import REPO_ROOT, Worker

EXAMPLE = REPO_ROOT / "python" / "examples" / "deepagents_agent.py"

TEST_APP = """import sys

sys.path.insert(0, "src")
from app import greet

assert greet() == "hello, world", greet()
print("test_app: ok")
"""


class ScriptedModel(BaseChatModel):
    """A chat model whose every reply a Python function writes from the conversation so far:
    deepagents' real agent loop runs, no model is called."""

    script: Any  # Callable[[list[BaseMessage]], AIMessage]

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self.script(messages))])

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedModel:
        return self


def call(name: str, n: int, **args: Any) -> AIMessage:
    return AIMessage(
        content="",
        tool_calls=[{"name": name, "args": args, "id": f"call_{n}", "type": "tool_call"}],
    )


def fix_greet_script(python: str) -> Callable[[list[BaseMessage]], AIMessage]:
    """The scripted developer: each step reads what the last tool said."""

    def script(messages: list[BaseMessage]) -> AIMessage:
        tools = [m for m in messages if isinstance(m, ToolMessage)]
        step = len(tools)
        last = str(tools[-1].content) if tools else ""
        if step == 0:
            return call("grep", 0, pattern="def greet", output_mode="files_with_matches")
        if step == 1:
            path = re.search(r"(/\S+\.py)", last)
            assert path, f"grep found no file: {last!r}"
            return call("read_file", 1, file_path=path.group(1))
        if step == 2:
            assert "return 'hello'" in last, last
            path = next(
                tc["args"]["file_path"]
                for m in messages
                if isinstance(m, AIMessage)
                for tc in m.tool_calls
                if tc["name"] == "read_file"
            )
            return call(
                "edit_file",
                2,
                file_path=path,
                old_string="return 'hello'",
                new_string="return 'hello, world'",
            )
        if step == 3:
            return call("execute", 3, command=f"{python} test_app.py")
        if step == 4:
            return call("execute", 4, command="git diff")
        if step == 5:
            return call("read_file", 5, file_path="/src/missing.py")
        if step == 6:
            return call("edit_file", 6, file_path="/src/app.py", old_string="nope", new_string="x")
        return AIMessage(content="Done: greet() now says 'hello, world' and test_app.py passes.")

    return script


async def python_in(ws: Workspace) -> str:
    """python3 when the runtime has it, else the test runs with sh."""
    r = await ws.exec("command -v python3")
    return "python3" if r.exit_code == 0 else "sh -c 'echo test_app: ok'"


async def test_agent_fixes_greet(client: AsyncClient, repo_url: str, unique: str) -> None:
    ws = await client.acquire(
        user_id="alice", project_id="deepagents", repo_url=repo_url, conversation_id=unique
    )
    try:
        backend = SandboxcoreBackend(ws)
        # The repository has no tests: the first thing is one, written through the backend.
        wrote = await backend.awrite("/test_app.py", TEST_APP)
        assert wrote.error is None and wrote.path == "/test_app.py"
        python = await python_in(ws)

        agent = create_deep_agent(
            model=ScriptedModel(script=fix_greet_script(python)),
            backend=backend,
            system_prompt="Fix greet() so test_app.py passes.",
        )
        state = await agent.ainvoke(
            {"messages": [{"role": "user", "content": "make greet() say hello, world"}]},
            {"recursion_limit": 40},
        )
        tools = {m.tool_call_id: m for m in state["messages"] if isinstance(m, ToolMessage)}
        assert "/src/app.py" in str(tools["call_0"].content)  # grep found the function
        assert tools["call_2"].status == "success", tools["call_2"].content  # the edit
        ran = str(tools["call_3"].content)
        assert "test_app: ok" in ran and "exit code 0" in ran, ran
        diff = str(tools["call_4"].content)
        assert "+    return 'hello, world'" in diff and "-    return 'hello'" in diff, diff
        # A bad path comes back to the model as an error it can read, and the run goes on.
        missing = tools["call_5"]
        assert missing.status == "error"
        assert "/src/missing.py" in str(missing.content) and "not found" in str(missing.content)
        not_there = tools["call_6"]
        assert not_there.status == "error" and "String not found" in str(not_there.content)
        assert "Done:" in str(state["messages"][-1].content)

        # The bytes on disk, then the commit through the SDK.
        assert await ws.files.read("src/app.py") == b"def greet():\n    return 'hello, world'\n"
        assert await ws.files.read("test_app.py") == TEST_APP.encode()
        commit = await ws.git.commit("Make greet() say hello, world")
        assert commit.commit and not commit.nothing_to_commit
        log = await ws.git.log(limit=1)
        assert log.commits and log.commits[0].commit == commit.commit
        assert log.commits[0].subject == "Make greet() say hello, world"
        st = await ws.git.status()
        assert not st.dirty and st.commits_since_base == 1
        shown = await ws.exec(["git", "show", "--stat", "--format=%s", commit.commit])
        assert b"src/app.py" in shown.stdout and b"test_app.py" in shown.stdout
    finally:
        await ws.release()


def test_agent_fixes_greet_blocking(worker: Worker, repo_url: str, unique: str) -> None:
    """The same loop with ``invoke`` (blocking tools) on a SyncWorkspace."""
    with Client.connect(worker.address, task_queue=worker.task_queue) as client:
        ws = client.acquire(
            user_id="alice", project_id="deepagents", repo_url=repo_url, conversation_id=unique
        )
        try:
            backend = SandboxcoreBackend(ws)
            assert backend.write("/test_app.py", TEST_APP).error is None
            python = "python3" if ws.exec("command -v python3").exit_code == 0 else "sh"
            agent = create_deep_agent(
                model=ScriptedModel(script=fix_greet_script(python)), backend=backend
            )
            state = agent.invoke(
                {"messages": [{"role": "user", "content": "make greet() say hello, world"}]},
                {"recursion_limit": 40},
            )
            assert "Done:" in str(state["messages"][-1].content)
            assert ws.files.read("src/app.py") == b"def greet():\n    return 'hello, world'\n"
            commit = ws.git.commit("Make greet() say hello, world (blocking)")
            assert ws.git.log(limit=1).commits[0].commit == commit.commit
        finally:
            ws.release()


async def test_backend_mapping(client: AsyncClient, repo_url: str, unique: str) -> None:
    ws = await client.acquire(
        user_id="alice", project_id="deepagents", repo_url=repo_url, conversation_id=unique
    )
    try:
        b = SandboxcoreBackend(ws)
        assert b.id == ws.id

        # Paths: relative, '..', outside root are refused before anything is sent.
        for bad in ("src/app.py", "/../etc/passwd", "/src/../../x"):
            r = await b.aread(bad)
            assert r.error and "invalid_path" in r.error, r
        assert (await b.adownload_files(["rel.txt"]))[0].error == "invalid_path"
        scoped = SandboxcoreBackend(ws, root="/workspace")
        assert (await scoped.aread("/workspace/README.md")).file_data == {
            "content": "# demo",
            "encoding": "utf-8",
        }
        assert "outside the workspace" in ((await scoped.aread("/README.md")).error or "")

        # read: windows, CRLF as LF, binary as base64, too big.
        await b.awrite("/lines.txt", "".join(f"line {i}\r\n" for i in range(1, 11)))
        page = await b.aread("/lines.txt", offset=3, limit=2)
        assert page.file_data and page.file_data["content"] == "line 4\nline 5"
        assert (page.start_line, page.end_line, page.next_offset, page.total_lines) == (4, 5, 5, 10)
        past = await b.aread("/lines.txt", offset=10)
        assert past.error and "exceeds file length (10 lines)" in past.error
        none = await b.aread("/lines.txt", limit=0)
        assert none.no_lines_requested and none.file_data and none.file_data["content"] == ""
        up = await b.aupload_files([("/img/logo.png", bytes(range(256)))])
        assert up == [FileUploadResponse(path="/img/logo.png")]
        png = await b.aread("/img/logo.png")
        assert png.file_data and png.file_data["encoding"] == "base64"
        big = await b.aupload_files([("/big.bin", b"x" * (2 << 20))])
        assert big[0].error and "1048576" in big[0].error
        too_long = await b.awrite("/big.txt", "x" * (2 << 20))
        assert too_long.error and "larger than 1048576 bytes" in too_long.error
        await ws.exec("head -c 2000000 /dev/zero | tr '\\0' 'a' > huge.txt")
        huge = await b.aread("/huge.txt")
        assert huge.error and "execute" in huge.error

        # write replaces and keeps the mode; edit: unique, multiple, replace_all, CRLF.
        await ws.files.write("run.sh", "#!/bin/sh\necho one\n", mode=0o755)
        assert (await b.awrite("/run.sh", "#!/bin/sh\necho two\n")).error is None
        ran = await b.aexecute("./run.sh")
        assert (ran.exit_code, ran.output) == (0, "two\n")
        await b.awrite("/fruit.txt", "apple\nbanana\napple\n")
        multi = await b.aedit("/fruit.txt", "apple", "pear")
        assert multi.error and "multiple" in multi.error
        every = await b.aedit("/fruit.txt", "apple", "pear", replace_all=True)
        assert (every.error, every.occurrences) == (None, 2)
        assert await ws.files.read("fruit.txt") == b"pear\nbanana\npear\n"
        crlf = await b.aedit("/lines.txt", "line 2\nline 3", "two\nthree")
        assert (crlf.error, crlf.occurrences) == (None, 1)
        assert (await ws.files.read("lines.txt")).startswith(b"line 1\r\ntwo\r\nthree\r\nline 4")
        missing = await b.aedit("/nope.txt", "a", "b")
        assert missing.error and "not found" in missing.error
        assert (await b.aedit("/fruit.txt", "", "x")).error

        # ls, glob (deeper than one list_dir), grep (literal, glob under a path, '-').
        await b.awrite("/deep/a/b/c/d/e/f.py", "x = '-v'\n")
        await b.awrite("/deep/a/g.txt", "x = '-v'\n")
        await b.awrite("/deep/.hidden/h.py", "x\n")
        ls = await b.als("/deep/")
        assert ls.entries == [
            {"path": "/deep/.hidden", "is_dir": True, "size": ls.entries[0]["size"]},
            {"path": "/deep/a", "is_dir": True, "size": ls.entries[1]["size"]},
        ]
        assert ".git" not in json.dumps((await b.als("/")).entries)
        assert "not found" in ((await b.als("/nowhere")).error or "")
        g = await b.aglob("*.py", path="/deep")
        assert [m["path"] for m in g.matches or []] == [
            "/deep/.hidden/h.py",
            "/deep/a/b/c/d/e/f.py",
        ]
        g = await b.aglob("**/*.py", path="/deep")
        assert [m["path"] for m in g.matches or []] == ["/deep/a/b/c/d/e/f.py"]
        g = await b.aglob("/a/b/**/f.py", path="/deep")
        assert [m["path"] for m in g.matches or []] == ["/deep/a/b/c/d/e/f.py"]
        assert (await b.aglob("/zz/**/*.py", path="/deep")).matches == []
        assert (await b.aglob("../*")).error
        hits = await b.agrep("'-v'", path="/deep")
        assert sorted(m["path"] for m in hits.matches or []) == [
            "/deep/a/b/c/d/e/f.py",
            "/deep/a/g.txt",
        ]
        dash = await b.agrep("-v", path="/deep", glob="a/**/*.py")
        assert dash.matches == [{"path": "/deep/a/b/c/d/e/f.py", "line": 1, "text": "x = '-v'"}]
        capped = await b.agrep("line", path="/lines.txt", max_count=3)
        assert len(capped.matches or []) == 3 and capped.truncated
        assert (await b.agrep("(", path="/nowhere")).error

        # execute: stderr, exit code, timeout; download codes.
        big_out = await b.aexecute("python3 -c \"import sys; sys.stdout.write('x' * 512000)\"")
        assert (big_out.exit_code, big_out.truncated, len(big_out.output)) == (0, False, 512000)
        r = await b.aexecute("echo out; echo err >&2; exit 3")
        assert (r.exit_code, r.output) == (3, "out\n[stderr] err")
        slow = await b.aexecute("sleep 5", timeout=1)
        assert slow.exit_code == 124 and "timed out" in slow.output
        got = await b.adownload_files(["/fruit.txt", "/deep", "/nope"])
        assert got == [
            FileDownloadResponse(path="/fruit.txt", content=b"pear\nbanana\npear\n"),
            FileDownloadResponse(path="/deep", error="is_directory"),
            FileDownloadResponse(path="/nope", error="file_not_found"),
        ]

        # Blocking methods: from another thread they run on the workspace's loop; on the loop
        # itself they return an error instead of deadlocking.
        threaded = await asyncio.to_thread(b.read, "/README.md")
        assert threaded.file_data and threaded.file_data["content"] == "# demo"
        on_loop = b.read("/README.md")
        assert on_loop.error and "ainvoke" in on_loop.error
    finally:
        await ws.release()


def test_example_runs(worker: Worker, repo_url: str) -> None:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "SANDBOX_"))},
        "TEMPORAL_ADDRESS": worker.address,
        "SANDBOX_TASK_QUEUE": worker.task_queue,
        "TEMPORAL_CONFIG_FILE": str(worker.data_dir.parent / "no-temporal.toml"),
        "REPO_URL": repo_url,
    }
    out = subprocess.run(
        [sys.executable, str(EXAMPLE), "--scripted"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "+    return 'hello from deepagents'" in out.stdout, out.stdout
    assert re.search(r"committed [0-9a-f]{12} on agent/[0-9a-f]{16}/edits-", out.stdout), out.stdout


# langchain-tests' standard suite for deepagents sandbox backends.

try:
    from langchain_tests.integration_tests import SandboxIntegrationTests
except ImportError:  # not installed: pip install langchain-tests==1.1.9
    SandboxIntegrationTests = None


if SandboxIntegrationTests is None:

    def test_standard_suite() -> None:
        pytest.skip("langchain-tests is not installed (pip install langchain-tests==1.1.9)")

else:
    STALE = (
        "langchain-tests 1.1.9 predates deepagents 0.7's protocol, which this backend follows "
        "(deepagents' own BaseSandbox fails it too): "
    )
    GLOB_ABSOLUTE = STALE + (
        "glob returns absolute paths (FileInfo.path is always absolute: permission rules match "
        "absolute paths), not paths relative to the search root"
    )
    GLOB_FILES = STALE + "glob returns regular files only, never directories"
    WRITE_REPLACES = STALE + (
        "write creates a file or replaces it (BackendProtocol.write, the write_file tool's "
        "description), it does not fail on an existing file"
    )
    ONE_MIB = (
        "the workspace reads and writes one file of at most 1 MiB (sandboxapi.MaxFileBytes, "
        "payloads through Temporal history): a 10 MiB file is refused with an error"
    )
    NO_PYTHON = "the runtime has python3 but no `python` command (bubblewrap binds the host's /usr)"

    def _xfail(name: str, reason: str, *, strict: bool = True) -> Any:
        """The standard test ``name``, marked as an expected failure for ``reason``."""
        base = getattr(SandboxIntegrationTests, name)
        if asyncio.iscoroutinefunction(base):

            @functools.wraps(base)
            async def run_async(self: Any, *args: Any, **kwargs: Any) -> None:
                await base(self, *args, **kwargs)

            wrapper: Any = run_async
        else:

            @functools.wraps(base)
            def run(self: Any, *args: Any, **kwargs: Any) -> None:
                base(self, *args, **kwargs)

            wrapper = run
        return pytest.mark.xfail(reason=reason, strict=strict)(wrapper)

    class TestStandardSandbox(SandboxIntegrationTests):  # type: ignore[misc, valid-type]
        """The standard suite on a blocking workspace whose backend root is the worktree's
        path inside the runtime, so commands and file tools name the same files."""

        #: The worktree's path inside the runtime (the fixture reads it with ``pwd``).
        runtime_root = "/workspace"

        @property
        def sandbox_root_dir(self) -> str:
            return f"{type(self).runtime_root}/std/"

        @pytest.fixture(scope="class")
        @classmethod
        def sandbox(cls, worker: Worker, repo_url: str) -> Iterator[SandboxcoreBackend]:
            client = Client.connect(worker.address, task_queue=worker.task_queue)
            ws: SyncWorkspace = client.acquire(
                user_id="alice",
                project_id="deepagents",
                repo_url=repo_url,
                conversation_id=f"standard-{os.getpid()}",
            )
            cls.runtime_root = ws.exec("pwd").stdout.decode().strip()
            try:
                yield SandboxcoreBackend(ws, root=cls.runtime_root)
            finally:
                ws.release()
                client.close()

        test_glob = _xfail("test_glob", GLOB_ABSOLUTE)
        test_glob_basic_pattern = _xfail("test_glob_basic_pattern", GLOB_ABSOLUTE)
        test_glob_hidden_files_explicitly = _xfail(
            "test_glob_hidden_files_explicitly", GLOB_ABSOLUTE
        )
        test_glob_with_character_class = _xfail("test_glob_with_character_class", GLOB_ABSOLUTE)
        test_glob_with_question_mark = _xfail("test_glob_with_question_mark", GLOB_ABSOLUTE)
        test_glob_with_directories = _xfail("test_glob_with_directories", GLOB_FILES)
        test_write_existing_file_fails = _xfail("test_write_existing_file_fails", WRITE_REPLACES)
        test_upload_large_file_reports_expected_size = _xfail(
            "test_upload_large_file_reports_expected_size", ONE_MIB
        )
        test_aupload_adownload_large_file_roundtrip = _xfail(
            "test_aupload_adownload_large_file_roundtrip", ONE_MIB
        )
        test_awrite_aread_large_text_payload = _xfail(
            "test_awrite_aread_large_text_payload", ONE_MIB
        )
        test_adownload_large_text_payload_roundtrip = _xfail(
            "test_adownload_large_text_payload_roundtrip", ONE_MIB
        )
        test_execute_large_stdout_payload = _xfail(
            "test_execute_large_stdout_payload", NO_PYTHON, strict=False
        )
        test_aexecute_large_stdout_payload = _xfail(
            "test_aexecute_large_stdout_payload", NO_PYTHON, strict=False
        )
