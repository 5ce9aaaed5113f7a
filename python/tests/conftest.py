"""The test session's worker: the real ``sandbox-worker`` with its embedded Temporal server,
started once per session on free ports with a data directory of its own, and a real git
repository it serves by ``file://`` URL.

The worker binary comes from ``SANDBOX_BIN_DIR`` (default: the repository's ``bin/``, which
``make build`` fills; built here with ``go build`` when missing).
"""

from __future__ import annotations

import base64
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from mcp import StdioServerParameters

from sandboxcore import AsyncClient

REPO_ROOT = Path(__file__).resolve().parents[2]
BIN_DIR = Path(os.environ.get("SANDBOX_BIN_DIR", REPO_ROOT / "bin"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def git(cwd: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
        "GIT_CONFIG_GLOBAL": "/dev/null",
    }
    return subprocess.run(
        ["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True
    ).stdout.strip()


def make_repo(path: Path) -> str:
    """A repository with two commits on ``main``; returns its ``file://`` URL."""
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    (path / "README.md").write_text("# demo\n")
    (path / "src").mkdir()
    (path / "src" / "app.py").write_text("def greet():\n    return 'hello'\n")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "first")
    (path / "NOTES.txt").write_text("notes\n")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "second")
    return "file://" + str(path)


def ensure_binaries() -> None:
    if (BIN_DIR / "sandbox-worker").exists() and (BIN_DIR / "sandbox-supervisor").exists():
        return
    BIN_DIR.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["go", "build", "-o", str(BIN_DIR / "sandbox-worker"), "./worker"],
        cwd=REPO_ROOT,
        check=True,
    )
    subprocess.run(
        ["go", "build", "-o", str(BIN_DIR / "sandbox-supervisor"), "./supervisor"],
        cwd=REPO_ROOT,
        check=True,
        env={**os.environ, "CGO_ENABLED": "0"},
    )


@dataclass
class Worker:
    """A running worker: its Temporal address, task queue, data dir and log."""

    address: str
    task_queue: str
    data_dir: Path
    log: Path
    process: subprocess.Popen[bytes]
    env: dict[str, str]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def start_worker(root: Path, name: str, extra: dict[str, str] | None = None) -> Worker:
    """Start ``sandbox-worker`` embedding Temporal; waits until it printed its address."""
    ensure_binaries()
    data = root / f"data-{name}"
    log = root / f"worker-{name}.log"
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "SANDBOX_PAYLOAD"))
    }
    env.update(
        {
            "SANDBOX_DATA_DIR": str(data),
            "SANDBOX_HOST_ID": f"py-{name}",
            "SANDBOX_TASK_QUEUE": f"py-{name}",
            "SANDBOX_ALLOW_FILE_URLS": "1",
            "SANDBOX_EVICTION_INTERVAL": "0",
            "SANDBOX_TEMPORAL_PORT": str(free_port()),
            "SANDBOX_UI_PORT": "0",
            "SANDBOX_CODEC_PORT": "0",
            "TEMPORAL_CONFIG_FILE": str(root / "no-temporal.toml"),
        }
    )
    env.update(extra or {})
    out = log.open("wb")
    proc = subprocess.Popen(
        [str(BIN_DIR / "sandbox-worker")], env=env, stdout=out, stderr=subprocess.STDOUT
    )
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace")
        m = re.search(r"export TEMPORAL_ADDRESS=(\S+)", text)
        if m:
            return Worker(m.group(1), env["SANDBOX_TASK_QUEUE"], data, log, proc, env)
        if proc.poll() is not None:
            raise RuntimeError(f"sandbox-worker exited {proc.returncode}:\n{text[-4000:]}")
        time.sleep(0.2)
    proc.kill()
    raise RuntimeError(f"sandbox-worker did not start:\n{log.read_text(errors='replace')[-4000:]}")


@pytest.fixture(scope="session")
def session_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("sandboxcore")


@pytest.fixture(scope="session")
def worker(session_root: Path) -> Iterator[Worker]:
    w = start_worker(session_root, "main")
    yield w
    w.stop()
    if os.environ.get("SANDBOX_KEEP_LOGS"):
        sys.stderr.write(w.log.read_text(errors="replace")[-20000:])


@pytest.fixture(scope="session")
def repo_url(session_root: Path) -> str:
    return make_repo(session_root / "origin")


@pytest.fixture(scope="session")
async def client(worker: Worker) -> AsyncIterator[AsyncClient]:
    c = await AsyncClient.connect(worker.address, task_queue=worker.task_queue)
    yield c


@pytest.fixture
def unique(request: pytest.FixtureRequest) -> str:
    """An id unique to the test (for conversation and task ids)."""
    name = re.sub(r"[^A-Za-z0-9_-]", "-", request.node.name)[:60].strip("-_")
    return f"{name}-{base64.b32encode(os.urandom(5)).decode().lower()}"


def mcp_server(worker: Worker, workspace_id: str) -> StdioServerParameters:
    """``sandboxctl mcp --workspace ID`` on ``worker``, as an MCP client starts it (no Temporal
    or sandbox settings of the test process leak in)."""
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "SANDBOX_"))},
        "TEMPORAL_ADDRESS": worker.address,
        "SANDBOX_TASK_QUEUE": worker.task_queue,
        "TEMPORAL_CONFIG_FILE": str(worker.data_dir.parent / "no-temporal.toml"),
    }
    return StdioServerParameters(
        command=str(BIN_DIR / "sandboxctl"), args=["mcp", "--workspace", workspace_id], env=env
    )
