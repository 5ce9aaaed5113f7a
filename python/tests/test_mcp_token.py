"""Tests of sandboxcore.mcp_token against the Go vectors of internal/mcpauth/testdata (tokens,
mints with fractional clocks, tokens to refuse, key files), and of ``Workspace.mcp_token``.
No worker is needed."""

from __future__ import annotations

import base64
import json
import time
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from sandboxcore import SyncWorkspace, Workspace, errors, mcp_token

VECTORS_FILE = (
    Path(__file__).resolve().parents[2] / "internal" / "mcpauth" / "testdata" / "token-vectors.json"
)
WS = "ws-0123456789abcdef01234567"


@pytest.fixture(scope="module")
def vectors() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(VECTORS_FILE.read_text())
    for part in ("tokens", "mints", "invalid", "key_files"):
        assert data[part], part
    return data


@pytest.fixture(scope="module")
def key(vectors: dict[str, Any]) -> bytes:
    return base64.b64decode(vectors["key"])


def test_tokens(vectors: dict[str, Any], key: bytes) -> None:
    for v in vectors["tokens"]:
        assert mcp_token.sign(key, v["workspace_id"], v["expiry"]) == v["token"], v["name"]
        claims = mcp_token.verify(key, v["token"], now=v["verify_at"])
        assert claims == mcp_token.Claims(v["workspace_id"], v["expiry"]), v["name"]


def test_mints(vectors: dict[str, Any], key: bytes) -> None:
    for v in vectors["mints"]:
        tok = mcp_token.mint(key, v["workspace_id"], v["ttl_s"], now=v["now"])
        assert tok == v["token"], v["name"]
        assert tok.split(".")[2] == str(v["expiry"]), v["name"]
        td = mcp_token.mint(key, v["workspace_id"], timedelta(seconds=v["ttl_s"]), now=v["now"])
        assert td == v["token"], v["name"]


def test_invalid(vectors: dict[str, Any], key: bytes) -> None:
    kinds = {
        "malformed": mcp_token.MalformedToken,
        "forged": mcp_token.ForgedToken,
        "expired": mcp_token.ExpiredToken,
    }
    for v in vectors["invalid"]:
        with pytest.raises(kinds[v["error"]]) as exc:
            mcp_token.verify(key, v["token"], now=v["now"])
        assert exc.value.reason == v["error"], v["name"]
        assert isinstance(exc.value, mcp_token.TokenError)


def test_key_files(vectors: dict[str, Any], tmp_path: Path) -> None:
    for i, v in enumerate(vectors["key_files"]):
        content = base64.b64decode(v["content"] or "")
        path = tmp_path / f"key{i}"
        path.write_bytes(content)
        if v.get("key") is None:
            with pytest.raises(errors.InvalidArgument):
                mcp_token.key_from_file(content)
            with pytest.raises(errors.InvalidArgument) as exc:
                mcp_token.load_key(path)
            assert str(path) in str(exc.value), v["name"]
            continue
        want = base64.b64decode(v["key"])
        assert mcp_token.key_from_file(content) == want, v["name"]
        assert mcp_token.load_key(path) == want, v["name"]


def test_load_key_errors(tmp_path: Path) -> None:
    with pytest.raises(errors.InvalidArgument):
        mcp_token.load_key(tmp_path / "none")
    big = tmp_path / "big"
    big.write_bytes(b"A" * (mcp_token.MAX_KEY_FILE_SIZE + 1))
    with pytest.raises(errors.InvalidArgument, match="larger than"):
        mcp_token.load_key(big)
    secret = tmp_path / "secret"
    secret.write_bytes(b"c2hv\n")
    with pytest.raises(errors.InvalidArgument) as exc:
        mcp_token.load_key(secret)
    assert "c2hv" not in str(exc.value)


def test_mint_refuses(key: bytes) -> None:
    for ttl in (0, -1, 0.5, float("nan"), mcp_token.MAX_TTL_S + 1, timedelta(days=31)):
        with pytest.raises(errors.InvalidArgument):
            mcp_token.mint(key, WS, ttl)
    for ws in ("", "ws-nope", WS.upper(), WS + "."):
        with pytest.raises(errors.InvalidArgument):
            mcp_token.mint(key, ws, 60)
    with pytest.raises(errors.InvalidArgument):
        mcp_token.mint(b"short", WS, 60)
    for exp in (0, 10**12, True):
        with pytest.raises(errors.InvalidArgument):
            mcp_token.sign(key, WS, exp)


def test_round_trip_now(key: bytes) -> None:
    before = time.time()
    tok = mcp_token.mint(key, WS, timedelta(hours=2))
    claims = mcp_token.verify(key, tok)
    assert claims.workspace_id == WS
    assert abs(claims.expiry - (before + 7200)) <= 2


def _workspace(ws_id: str) -> Workspace:
    ws = object.__new__(Workspace)
    ws.handle = SimpleNamespace(workspace_id=ws_id)  # type: ignore[assignment]
    return ws


async def test_workspace_mcp_token(
    key: bytes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key_file = tmp_path / "mcp.key"
    key_file.write_text(base64.b64encode(key).decode() + "\n")
    ws = _workspace(WS)
    monkeypatch.delenv(mcp_token.KEY_FILE_ENV, raising=False)
    with pytest.raises(errors.InvalidArgument, match=mcp_token.KEY_FILE_ENV):
        await ws.mcp_token()

    tok = await ws.mcp_token(timedelta(minutes=10), key_file=str(key_file))
    claims = mcp_token.verify(key, tok)
    assert claims.workspace_id == WS
    assert abs(claims.expiry - (time.time() + 600)) <= 2

    monkeypatch.setenv(mcp_token.KEY_FILE_ENV, str(key_file))
    claims = mcp_token.verify(key, await ws.mcp_token())
    assert abs(claims.expiry - (time.time() + 3600)) <= 2, "default ttl: an hour"
    with pytest.raises(errors.InvalidArgument):
        await ws.mcp_token(0)
    assert "mcp_token" in vars(SyncWorkspace), "the blocking twin has it too"
