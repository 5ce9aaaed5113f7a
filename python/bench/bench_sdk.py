"""The Python SDK's cost over the Go SDK, in one run (docs/BENCHMARKS.md "Python SDK").

Starts a worker (bin/, embedded Temporal, the isolated runtime), acquires one workspace, then
measures exec of ``true`` and read_file of one file, N calls each after a warm-up, first through
the Go SDK (tests/sdkbench, ``go run``) and then through the Python SDK, on the same workspace.
Prints both p50/p90 and the difference. Run: ``make bench-python`` (N: ``SANDBOX_BENCH_N``).
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sandboxcore import AsyncClient
from tests.conftest import REPO_ROOT, make_repo, start_worker


async def measure(n: int, op: Callable[[], Awaitable[object]]) -> dict[str, float]:
    for _ in range(5):
        await op()
    ms = []
    for _ in range(n):
        t = time.perf_counter()
        await op()
        ms.append((time.perf_counter() - t) * 1000)
    ms.sort()
    return {"p50_ms": statistics.median(ms), "p90_ms": ms[len(ms) * 9 // 10]}


async def main() -> None:
    n = int(os.environ.get("SANDBOX_BENCH_N", "200"))
    root = Path(tempfile.mkdtemp(prefix="sandboxcore-bench-"))
    worker = start_worker(root, "bench")
    try:
        client = await AsyncClient.connect(worker.address, task_queue=worker.task_queue)
        ws = await client.acquire(
            user_id="bench",
            project_id="p1",
            repo_url=make_repo(root / "origin"),
            conversation_id="c1",
        )
        go = await asyncio.to_thread(
            subprocess.run,
            [
                "go",
                "run",
                "./tests/sdkbench",
                "-address",
                worker.address,
                "-task-queue",
                worker.task_queue,
                "-workspace",
                ws.id,
                "-n",
                str(n),
            ],
            cwd=REPO_ROOT,
            check=True,
            capture_output=True,
            text=True,
        )
        go_res = json.loads(go.stdout.strip().splitlines()[-1])
        py_res = {
            "exec_true": await measure(n, lambda: ws.exec(["true"])),
            "read_file": await measure(n, lambda: ws.files.read("README.md")),
        }
        print(f"Python SDK against Go SDK, {n} calls each, one worker, one workspace")
        print(
            f"{'operation':<10} {'Go p50':>9} {'Py p50':>9} {'Go p90':>9} {'Py p90':>9} "
            f"{'Py-Go p50':>10}"
        )
        for op in ("exec_true", "read_file"):
            g, p = go_res[op], py_res[op]
            print(
                f"{op:<10} {g['p50_ms']:>7.2f}ms {p['p50_ms']:>7.2f}ms {g['p90_ms']:>7.2f}ms "
                f"{p['p90_ms']:>7.2f}ms {p['p50_ms'] - g['p50_ms']:>+8.2f}ms"
            )
        await ws.destroy(discard=True)
    finally:
        worker.stop()


asyncio.run(main())
