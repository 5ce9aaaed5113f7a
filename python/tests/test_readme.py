"""README "Use it from Python": its example is python/examples/quickstart.py, verbatim, and it
runs against a real worker."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from .conftest import REPO_ROOT, Worker

EXAMPLE = REPO_ROOT / "python" / "examples" / "quickstart.py"


def test_readme_shows_the_example() -> None:
    readme = (REPO_ROOT / "README.md").read_text()
    section = readme[readme.index("## Use it from Python") :]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert blocks, "README: no python block in 'Use it from Python'"
    assert blocks[0] == EXAMPLE.read_text()


def test_readme_shows_every_example() -> None:
    readme = (REPO_ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", readme, re.S)
    for example in sorted((REPO_ROOT / "python" / "examples").glob("*.py")):
        assert example.read_text() in blocks, f"README does not show {example.name} verbatim"


def test_example_runs(worker: Worker, repo_url: str) -> None:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "SANDBOX_"))},
        "TEMPORAL_ADDRESS": worker.address,
        "SANDBOX_TASK_QUEUE": worker.task_queue,
        "TEMPORAL_CONFIG_FILE": str(worker.data_dir.parent / "no-temporal.toml"),
        "REPO_URL": repo_url,
    }
    out = subprocess.run(
        [sys.executable, str(EXAMPLE)], env=env, capture_output=True, text=True, timeout=180
    )
    assert out.returncode == 0, out.stderr
    assert "+hello from the Python SDK" in out.stdout
    assert re.search(r"committed [0-9a-f]{12} on agent/[0-9a-f]{16}/edits-c42", out.stdout)
    assert "typed error: FileNotFound False" in out.stdout
