"""Payload encryption against a real worker that refuses plaintext: the SDK's codec encrypts
what the Go worker decrypts and the reverse, typed errors survive encrypted failures, and the
history holds none of the workspace's content."""

from __future__ import annotations

import base64
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import temporalio.client

from sandboxcore import AsyncClient, errors, load_keys

from .conftest import Worker, start_worker


@pytest.fixture(scope="module")
def key_spec(session_root: Path) -> str:
    path = session_root / "payload.key"
    path.write_text(base64.b64encode(os.urandom(32)).decode() + "\n")
    return f"k1={path}"


@pytest.fixture(scope="module")
def encrypted_worker(session_root: Path, key_spec: str) -> Iterator[Worker]:
    w = start_worker(
        session_root,
        "enc",
        {"SANDBOX_PAYLOAD_KEYS": key_spec, "SANDBOX_PAYLOAD_REQUIRE_ENCRYPTION": "1"},
    )
    yield w
    w.stop()


async def test_encrypted_session(
    encrypted_worker: Worker, key_spec: str, repo_url: str, unique: str
) -> None:
    client = await AsyncClient.connect(
        encrypted_worker.address,
        task_queue=encrypted_worker.task_queue,
        codec_key=load_keys(key_spec),
    )
    ws = await client.acquire(
        user_id="carol", project_id="p1", repo_url=repo_url, conversation_id=unique
    )
    secret = f"top-secret-{unique}"
    await ws.files.write("secret.txt", secret)
    r = await ws.exec(["cat", "secret.txt"])
    assert r.stdout == secret.encode()
    with pytest.raises(errors.FileNotFound) as e:
        await ws.files.read("missing.txt")
    assert e.value.type == "FileNotFound"

    # The history, read without the codec, holds ciphertext only.
    raw = await temporalio.client.Client.connect(encrypted_worker.address)
    history = await raw.get_workflow_handle(ws.workflow_id).fetch_history()
    blob = history.to_json()
    assert secret not in blob and base64.b64encode(secret.encode()).decode() not in blob
    assert "binary/encrypted" in blob or "YmluYXJ5L2VuY3J5cHRlZA" in blob

    # A client without the keys is refused: its plaintext argument is InvalidArgument.
    plain = await AsyncClient.connect(
        encrypted_worker.address, task_queue=encrypted_worker.task_queue
    )
    with pytest.raises(errors.InvalidArgument):
        await plain.acquire(
            user_id="carol", project_id="p1", repo_url=repo_url, conversation_id=unique
        )
    await ws.destroy(discard=True)
