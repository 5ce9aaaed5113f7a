"""Bearer tokens of the multi-workspace MCP endpoint, as Go's ``internal/mcpauth``.

``sandboxctl mcp --http ADDR --multi --key-file FILE`` serves every workspace at
``http://ADDR/mcp/<workspace id>``; each request must carry ``Authorization: Bearer <token>`` with
a token for that one workspace (README "Use it from an agent", docs/SECURITY.md "The MCP server").
A token is::

    v2.<workspace id>.<expiry>.<token id>.<mac>

where the workspace id is ``ws-`` and 24 lowercase hex digits, ``expiry`` the end of its validity
in Unix seconds (decimal, no sign, no leading zero, at most 12 digits), the token id 32 lowercase
hex digits (128 random bits, like a JWT's ``jti``) and ``mac`` the unpadded base64url encoding (43
characters) of ``HMAC-SHA256(key, b"sandboxcore-mcp v2\\0" + workspace id + b"\\0" + expiry +
b"\\0" + token id)``. It is valid while ``now < expiry``, unless the endpoint's revocation list
names its id (``sandboxctl mcp revoke --id ID --revoked-file FILE``: record the id and expiry of
:func:`issue` or :meth:`Workspace.issue_mcp_token` to revoke a token before it expires).

Tokens minted before token ids, ``v1.<workspace id>.<expiry>.<mac>`` with the MAC over
``b"sandboxcore-mcp v1\\0" + workspace id + b"\\0" + expiry``, are still accepted until they expire;
having no id, they cannot be revoked one by one (:attr:`Claims.token_id` is ``None``).

:func:`mint` makes a token with the key of the endpoint's key file (:func:`load_key`);
``Workspace.mcp_token()`` does both, ``Workspace.issue_mcp_token()`` returns its id and expiry too.
The shared vectors ``internal/mcpauth/testdata/token-vectors.json`` pin the format.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import math
import os
import re
import secrets
import time
from dataclasses import dataclass, field
from datetime import timedelta

from . import errors, identity

#: The version of the tokens :func:`sign` and :func:`mint` make, their first field.
VERSION = "v2"
#: The version of the tokens minted before token ids: still accepted until they expire.
VERSION_V1 = "v1"
#: Length of a token id, in lowercase hex digits (128 random bits).
TOKEN_ID_LEN = 32
#: Least number of key bytes (after base64 decoding).
MIN_KEY_SIZE = 32
#: Most bytes :func:`load_key` reads.
MAX_KEY_FILE_SIZE = 4096
#: Longest token, in characters.
MAX_TOKEN_LEN = 256
#: Default lifetime of a token, in seconds.
DEFAULT_TTL_S = 3600.0
#: Longest lifetime :func:`mint` gives, in seconds (30 days).
MAX_TTL_S = 30 * 24 * 3600.0
#: Clock difference :func:`verify` tolerates for the MAX_TTL_S check, in seconds.
MAX_SKEW_S = 300
#: The environment variable naming the key file when none is given.
KEY_FILE_ENV = "SANDBOX_MCP_KEY_FILE"

_MAC_LABEL = b"sandboxcore-mcp v2\x00"
_MAC_LABEL_V1 = b"sandboxcore-mcp v1\x00"
_EXPIRY = re.compile(r"[1-9][0-9]{0,11}")
_TOKEN_ID = re.compile(r"[0-9a-f]{32}")
_MAC = re.compile(r"[A-Za-z0-9_-]{43}")
_STD_B64 = re.compile(rb"[A-Za-z0-9+/]+={0,2}")
_URL_B64 = re.compile(rb"[A-Za-z0-9_-]+={0,2}")
_WHITE_SPACE = b" \t\n\v\f\r"


class TokenError(ValueError):
    """A token :func:`verify` refuses (the endpoint answers 401); ``reason`` is ``"malformed"``,
    ``"forged"`` or ``"expired"``."""

    reason = "malformed"


class MalformedToken(TokenError):
    """Not a v2 or v1 token, or one expiring further ahead than MAX_TTL_S + MAX_SKEW_S."""


class ForgedToken(TokenError):
    """Well formed, but its MAC is not the key's."""

    reason = "forged"


class ExpiredToken(TokenError):
    """The key's token, past its expiry."""

    reason = "expired"


@dataclass(frozen=True)
class Claims:
    """What a token says: its one workspace, its expiry (Unix seconds) and its id (``None`` for a
    v1 token, which has none and so cannot be revoked one by one)."""

    workspace_id: str
    expiry: int
    token_id: str | None = None


@dataclass(frozen=True)
class MintedToken:
    """A token :func:`issue` made and what it says: record ``token_id`` and ``expiry`` to revoke
    it before it expires (``sandboxctl mcp revoke --id TOKEN_ID``). Its ``repr`` hides the token."""

    token: str = field(repr=False)
    workspace_id: str
    token_id: str
    expiry: int


def new_token_id() -> str:
    """A new random token id: TOKEN_ID_LEN lowercase hex digits (:mod:`secrets`)."""
    return secrets.token_hex(TOKEN_ID_LEN // 2)


def key_from_file(raw: bytes) -> bytes:
    """The key of a key file's content: with ASCII white space removed, content that is wholly
    base64 (the standard alphabet or the URL one, not mixed, at most two trailing ``=``) is decoded
    and must give at least MIN_KEY_SIZE bytes; any other content is the key itself, as read, and
    must have at least MIN_KEY_SIZE bytes.

    Raises :class:`~sandboxcore.errors.InvalidArgument` (never with key material).
    """
    text = raw.translate(None, _WHITE_SPACE)
    url = False
    if text and _STD_B64.fullmatch(text):
        pass
    elif text and _URL_B64.fullmatch(text):
        url = True
    else:
        if len(raw) < MIN_KEY_SIZE:
            raise errors.InvalidArgument(
                f"holds {len(raw)} bytes: want {MIN_KEY_SIZE} or more random bytes, raw or base64 "
                "(e.g. `head -c 32 /dev/urandom | base64 > FILE`)"
            )
        return bytes(raw)
    text = text.rstrip(b"=")
    if len(text) % 4 == 1:
        raise errors.InvalidArgument("is not valid base64 (its length)")
    try:
        secret = base64.b64decode(
            text + b"=" * (-len(text) % 4), altchars=b"-_" if url else None, validate=True
        )
    except ValueError:
        raise errors.InvalidArgument("is not valid base64") from None
    if len(secret) < MIN_KEY_SIZE:
        raise errors.InvalidArgument(
            f"holds base64 of {len(secret)} bytes: want {MIN_KEY_SIZE} or more random bytes "
            "(e.g. `head -c 32 /dev/urandom | base64 > FILE`)"
        )
    return secret


def load_key(path: str | os.PathLike[str]) -> bytes:
    """Read the key file at ``path`` (at most MAX_KEY_FILE_SIZE bytes) by :func:`key_from_file`'s
    rule, as ``sandboxctl mcp --key-file`` does.

    Raises :class:`~sandboxcore.errors.InvalidArgument` naming the file (never its content).
    """
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_KEY_FILE_SIZE + 1)
    except OSError as e:
        raise errors.InvalidArgument(f"key file: {e}") from None
    if len(raw) > MAX_KEY_FILE_SIZE:
        raise errors.InvalidArgument(
            f"key file {os.fspath(path)} is larger than {MAX_KEY_FILE_SIZE} bytes: want "
            f"{MIN_KEY_SIZE} or more random bytes, raw or base64"
        )
    try:
        return key_from_file(raw)
    except errors.InvalidArgument as e:
        raise errors.InvalidArgument(f"key file {os.fspath(path)}: {e.message}") from None


def _check_key(key: bytes) -> None:
    if len(key) < MIN_KEY_SIZE:
        raise errors.InvalidArgument(
            f"an MCP token key must have at least {MIN_KEY_SIZE} bytes, not {len(key)}"
        )


def _mac(key: bytes, workspace_id: str, expiry: str, token_id: str) -> str:
    msg = _MAC_LABEL + f"{workspace_id}\0{expiry}\0{token_id}".encode()
    digest = hmac.new(key, msg, hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def _mac_v1(key: bytes, workspace_id: str, expiry: str) -> str:
    msg = _MAC_LABEL_V1 + f"{workspace_id}\0{expiry}".encode()
    digest = hmac.new(key, msg, hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def _check_token_id(token_id: str) -> None:
    if not isinstance(token_id, str) or not _TOKEN_ID.fullmatch(token_id):
        raise errors.InvalidArgument(
            f"token id {token_id!r:.80}: want {TOKEN_ID_LEN} lowercase hex digits"
        )


def sign(key: bytes, workspace_id: str, expiry: int, *, token_id: str | None = None) -> str:
    """The token for ``workspace_id`` expiring at ``expiry`` (Unix seconds), whatever the time,
    with id ``token_id`` (default: :func:`new_token_id`; a caller that gives one keeps ids unique).

    Raises :class:`~sandboxcore.errors.InvalidArgument`: a short key, a malformed workspace id or
    token id, an expiry outside 1 … 999999999999.
    """
    _check_key(key)
    identity.validate_workspace_id(workspace_id)
    tid = new_token_id() if token_id is None else token_id
    _check_token_id(tid)
    if type(expiry) is not int or not 1 <= expiry <= 999_999_999_999:
        raise errors.InvalidArgument(
            f"token expiry {expiry!r}: want Unix seconds from 1 to 999999999999"
        )
    exp = str(expiry)
    return f"{VERSION}.{workspace_id}.{exp}.{tid}.{_mac(key, workspace_id, exp, tid)}"


def issue(
    key: bytes,
    workspace_id: str,
    ttl: float | timedelta,
    *,
    now: float | None = None,
    token_id: str | None = None,
) -> MintedToken:
    """A token for ``workspace_id`` valid for ``ttl`` (seconds or a timedelta, 1 s to 30 days)
    from ``now`` (Unix seconds, default the clock), with its id and expiry: its expiry is
    ``floor(now + ttl)``, its id ``token_id`` (default: :func:`new_token_id`).

    Raises :class:`~sandboxcore.errors.InvalidArgument`: a short key, a malformed workspace id or
    token id, a ttl out of range.
    """
    seconds = ttl.total_seconds() if isinstance(ttl, timedelta) else float(ttl)
    if not 1 <= seconds <= MAX_TTL_S:  # NaN fails too
        raise errors.InvalidArgument(f"token lifetime {seconds!r} s: want 1 s to {MAX_TTL_S:.0f} s")
    start = time.time() if now is None else now
    expiry = math.floor(start + seconds)
    tid = new_token_id() if token_id is None else token_id
    token = sign(key, workspace_id, expiry, token_id=tid)
    return MintedToken(token, workspace_id, tid, expiry)


def mint(
    key: bytes,
    workspace_id: str,
    ttl: float | timedelta,
    *,
    now: float | None = None,
    token_id: str | None = None,
) -> str:
    """The token of :func:`issue`, alone (:func:`parse` reads its id and expiry back).

    Raises :class:`~sandboxcore.errors.InvalidArgument`: a short key, a malformed workspace id or
    token id, a ttl out of range.
    """
    return issue(key, workspace_id, ttl, now=now, token_id=token_id).token


def _key_file_path(key_file: str | os.PathLike[str] | None) -> str | os.PathLike[str]:
    path = key_file if key_file is not None else os.environ.get(KEY_FILE_ENV, "")
    if not path:
        raise errors.InvalidArgument(
            f"no MCP key file: give key_file or set {KEY_FILE_ENV} (the key file of "
            "`sandboxctl mcp --multi`)"
        )
    return path


def issue_with_key_file(
    workspace_id: str,
    ttl: float | timedelta = DEFAULT_TTL_S,
    key_file: str | os.PathLike[str] | None = None,
    *,
    now: float | None = None,
) -> MintedToken:
    """:func:`issue` with the key of ``key_file`` (default: the file ``SANDBOX_MCP_KEY_FILE``
    names). Raises :class:`~sandboxcore.errors.InvalidArgument`, also when neither is given."""
    return issue(load_key(_key_file_path(key_file)), workspace_id, ttl, now=now)


def mint_with_key_file(
    workspace_id: str,
    ttl: float | timedelta = DEFAULT_TTL_S,
    key_file: str | os.PathLike[str] | None = None,
    *,
    now: float | None = None,
) -> str:
    """:func:`mint` with the key of ``key_file`` (default: the file ``SANDBOX_MCP_KEY_FILE``
    names). Raises :class:`~sandboxcore.errors.InvalidArgument`, also when neither is given."""
    return issue_with_key_file(workspace_id, ttl, key_file, now=now).token


@dataclass(frozen=True)
class _Fields:
    version: str
    workspace_id: str
    exp: str
    token_id: str | None
    mac: str


def _parse(token: str) -> _Fields:
    if len(token) > MAX_TOKEN_LEN:
        raise MalformedToken(f"longer than {MAX_TOKEN_LEN} characters")
    parts = token.split(".")
    if len(parts) == 5 and parts[0] == VERSION:
        f = _Fields(parts[0], parts[1], parts[2], parts[3], parts[4])
    elif len(parts) == 4 and parts[0] == VERSION_V1:
        f = _Fields(parts[0], parts[1], parts[2], None, parts[3])
    elif parts[0] in (VERSION, VERSION_V1):
        raise MalformedToken(
            f"want {VERSION}.<workspace id>.<expiry>.<token id>.<mac> "
            f"(or {VERSION_V1}.<workspace id>.<expiry>.<mac>)"
        )
    else:
        raise MalformedToken(f"not a {VERSION} (or {VERSION_V1}) token")
    try:
        identity.validate_workspace_id(f.workspace_id)
    except errors.InvalidArgument:
        raise MalformedToken("the workspace id is not ws- and 24 lowercase hex digits") from None
    if not _EXPIRY.fullmatch(f.exp):
        raise MalformedToken("the expiry is not Unix seconds")
    if f.token_id is not None and not _TOKEN_ID.fullmatch(f.token_id):
        raise MalformedToken(f"the token id is not {TOKEN_ID_LEN} lowercase hex digits")
    if not _MAC.fullmatch(f.mac):
        raise MalformedToken("the MAC is not 43 base64url characters")
    return f


def parse(token: str) -> Claims:
    """What ``token`` says, without checking its MAC or its time: for a minter or an operator who
    holds the token and wants its id and expiry (to revoke it). Never trust it for access: that is
    :func:`verify`.

    Raises :class:`MalformedToken`.
    """
    f = _parse(token)
    return Claims(f.workspace_id, int(f.exp), f.token_id)


def verify(key: bytes, token: str, *, now: float | None = None) -> Claims:
    """Check ``token`` at ``now`` (Unix seconds, default the clock) as the endpoint does: its
    shape, its MAC (compared in constant time) and its expiry; a v1 token is accepted too (its
    ``token_id`` is ``None``). The endpoint's revocation list is not consulted.

    Raises :class:`MalformedToken`, :class:`ForgedToken`, :class:`ExpiredToken`, or
    :class:`~sandboxcore.errors.InvalidArgument` for a short key.
    """
    _check_key(key)
    f = _parse(token)
    if f.token_id is None:
        want = _mac_v1(key, f.workspace_id, f.exp)
    else:
        want = _mac(key, f.workspace_id, f.exp, f.token_id)
    if not hmac.compare_digest(f.mac, want):
        raise ForgedToken("the token's MAC does not match")
    expiry = int(f.exp)
    n = math.floor(time.time() if now is None else now)
    if n >= expiry:
        raise ExpiredToken(f"the token expired at {expiry}")
    if expiry - n > MAX_TTL_S + MAX_SKEW_S:
        raise MalformedToken("it expires more than 30 days and 5 minutes ahead")
    return Claims(f.workspace_id, expiry, f.token_id)
