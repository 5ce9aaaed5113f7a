"""Tests of sandboxcore.mcp_token against the Go vectors of internal/mcpauth/testdata (tokens with
ids, v1 tokens without, mints with fractional clocks, tokens to refuse, key files), and of
``Workspace.mcp_token`` and ``Workspace.issue_mcp_token``. No worker is needed."""

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
    for part in ("tokens", "v1_tokens", "mints", "invalid", "key_files"):
        assert data[part], part
    return data


@pytest.fixture(scope="module")
def key(vectors: dict[str, Any]) -> bytes:
    return base64.b64decode(vectors["key"])


def test_tokens(vectors: dict[str, Any], key: bytes) -> None:
    for v in vectors["tokens"]:
        tid = v["token_id"]
        signed = mcp_token.sign(key, v["workspace_id"], v["expiry"], token_id=tid)
        assert signed == v["token"], v["name"]
        want = mcp_token.Claims(v["workspace_id"], v["expiry"], tid)
        assert mcp_token.verify(key, v["token"], now=v["verify_at"]) == want, v["name"]
        assert mcp_token.parse(v["token"]) == want, v["name"]


def test_v1_tokens_still_verify(vectors: dict[str, Any], key: bytes) -> None:
    for v in vectors["v1_tokens"]:
        assert "token_id" not in v, v["name"]
        claims = mcp_token.verify(key, v["token"], now=v["verify_at"])
        assert claims == mcp_token.Claims(v["workspace_id"], v["expiry"]), v["name"]
        assert claims.token_id is None, "a v1 token has no id"
        assert mcp_token.parse(v["token"]) == claims, v["name"]


def test_mints(vectors: dict[str, Any], key: bytes) -> None:
    for v in vectors["mints"]:
        ws, tid, now = v["workspace_id"], v["token_id"], v["now"]
        tok = mcp_token.mint(key, ws, v["ttl_s"], now=now, token_id=tid)
        assert tok == v["token"], v["name"]
        assert tok.split(".")[2] == str(v["expiry"]), v["name"]
        td = mcp_token.mint(key, ws, timedelta(seconds=v["ttl_s"]), now=now, token_id=tid)
        assert td == v["token"], v["name"]
        issued = mcp_token.issue(key, ws, v["ttl_s"], now=now, token_id=tid)
        assert issued == mcp_token.MintedToken(v["token"], ws, tid, v["expiry"]), v["name"]


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
        if v["error"] == "malformed" and "too far ahead" not in v["name"]:
            with pytest.raises(mcp_token.MalformedToken):
                mcp_token.parse(v["token"])


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
    tid = "0123456789abcdef0123456789abcdef"
    for bad in ("", "nope", tid.upper(), tid[:31], tid + "0", tid[:31] + "."):
        with pytest.raises(errors.InvalidArgument):
            mcp_token.sign(key, WS, 2_000_000_000, token_id=bad)
        with pytest.raises(errors.InvalidArgument):
            mcp_token.mint(key, WS, 60, token_id=bad)


def test_round_trip_now(key: bytes) -> None:
    before = time.time()
    tok = mcp_token.mint(key, WS, timedelta(hours=2))
    claims = mcp_token.verify(key, tok)
    assert claims.workspace_id == WS
    assert abs(claims.expiry - (before + 7200)) <= 2
    assert claims.token_id is not None
    assert len(claims.token_id) == mcp_token.TOKEN_ID_LEN
    assert tok.startswith(f"v2.{WS}.{claims.expiry}.{claims.token_id}.")

    # Every token gets its own random id.
    issued = [mcp_token.issue(key, WS, 60) for _ in range(50)]
    assert len({i.token_id for i in issued}) == 50
    for i in issued:
        assert mcp_token.verify(key, i.token) == mcp_token.Claims(WS, i.expiry, i.token_id)
        assert i.token not in repr(i), "the repr hides the token"


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

    issued = await ws.issue_mcp_token(600, key_file=str(key_file))
    assert isinstance(issued, mcp_token.MintedToken)
    assert issued.workspace_id == WS
    assert mcp_token.verify(key, issued.token) == mcp_token.Claims(
        WS, issued.expiry, issued.token_id
    )
    assert issued.token_id != claims.token_id

    monkeypatch.setenv(mcp_token.KEY_FILE_ENV, str(key_file))
    claims = mcp_token.verify(key, await ws.mcp_token())
    assert abs(claims.expiry - (time.time() + 3600)) <= 2, "default ttl: an hour"
    with pytest.raises(errors.InvalidArgument):
        await ws.mcp_token(0)
    assert "mcp_token" in vars(SyncWorkspace), "the blocking twin has it too"
    assert "issue_mcp_token" in vars(SyncWorkspace), "the blocking twin has it too"
    with pytest.raises(errors.InvalidArgument):
        await ws.issue_mcp_token(0)
