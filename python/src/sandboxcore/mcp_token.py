"""Bearer tokens of the multi-workspace MCP endpoint, as Go's ``internal/mcpauth``.

``sandboxctl mcp --http ADDR --multi --key-file FILE`` serves every workspace at
``http://ADDR/mcp/<workspace id>``; each request must carry ``Authorization: Bearer <token>`` with
a token for that one workspace (README "Use it from an agent", docs/SECURITY.md "The MCP server").
A token is::

    v1.<workspace id>.<expiry>.<mac>

where the workspace id is ``ws-`` and 24 lowercase hex digits, ``expiry`` the end of its validity
in Unix seconds (decimal, no sign, no leading zero, at most 12 digits) and ``mac`` the unpadded
base64url encoding (43 characters) of ``HMAC-SHA256(key, b"sandboxcore-mcp v1\\0" + workspace id
+ b"\\0" + expiry)``. It is valid while ``now < expiry``. :func:`mint` makes one with the key of the
endpoint's key file (:func:`load_key`); ``Workspace.mcp_token()`` does both. The shared vectors
``internal/mcpauth/testdata/token-vectors.json`` pin the format.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import math
import os
import re
import time
from dataclasses import dataclass
from datetime import timedelta

from . import errors, identity

#: The token format's version, its first field.
VERSION = "v1"
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

_MAC_LABEL = b"sandboxcore-mcp v1\x00"
_EXPIRY = re.compile(r"[1-9][0-9]{0,11}")
_MAC = re.compile(r"[A-Za-z0-9_-]{43}")
_STD_B64 = re.compile(rb"[A-Za-z0-9+/]+={0,2}")
_URL_B64 = re.compile(rb"[A-Za-z0-9_-]+={0,2}")
_WHITE_SPACE = b" \t\n\v\f\r"


class TokenError(ValueError):
    """A token :func:`verify` refuses (the endpoint answers 401); ``reason`` is ``"malformed"``,
    ``"forged"`` or ``"expired"``."""

    reason = "malformed"


class MalformedToken(TokenError):
    """Not a v1 token, or one expiring further ahead than MAX_TTL_S + MAX_SKEW_S."""


class ForgedToken(TokenError):
    """Well formed, but its MAC is not the key's."""

    reason = "forged"


class ExpiredToken(TokenError):
    """The key's token, past its expiry."""

    reason = "expired"


@dataclass(frozen=True)
class Claims:
    """What a valid token says: its one workspace and its expiry (Unix seconds)."""

    workspace_id: str
    expiry: int


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


def _mac(key: bytes, workspace_id: str, expiry: str) -> str:
    msg = _MAC_LABEL + workspace_id.encode() + b"\x00" + expiry.encode()
    digest = hmac.new(key, msg, hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def sign(key: bytes, workspace_id: str, expiry: int) -> str:
    """The token for ``workspace_id`` expiring at ``expiry`` (Unix seconds), whatever the time.

    Raises :class:`~sandboxcore.errors.InvalidArgument`: a short key, a malformed workspace id,
    an expiry outside 1 … 999999999999.
    """
    _check_key(key)
    identity.validate_workspace_id(workspace_id)
    if type(expiry) is not int or not 1 <= expiry <= 999_999_999_999:
        raise errors.InvalidArgument(
            f"token expiry {expiry!r}: want Unix seconds from 1 to 999999999999"
        )
    exp = str(expiry)
    return f"{VERSION}.{workspace_id}.{exp}.{_mac(key, workspace_id, exp)}"


def mint(key: bytes, workspace_id: str, ttl: float | timedelta, *, now: float | None = None) -> str:
    """A token for ``workspace_id`` valid for ``ttl`` (seconds or a timedelta, 1 s to 30 days)
    from ``now`` (Unix seconds, default the clock): its expiry is ``floor(now + ttl)``.

    Raises :class:`~sandboxcore.errors.InvalidArgument`: a short key, a malformed workspace id,
    a ttl out of range.
    """
    seconds = ttl.total_seconds() if isinstance(ttl, timedelta) else float(ttl)
    if not 1 <= seconds <= MAX_TTL_S:  # NaN fails too
        raise errors.InvalidArgument(f"token lifetime {seconds!r} s: want 1 s to {MAX_TTL_S:.0f} s")
    start = time.time() if now is None else now
    return sign(key, workspace_id, math.floor(start + seconds))


def mint_with_key_file(
    workspace_id: str,
    ttl: float | timedelta = DEFAULT_TTL_S,
    key_file: str | os.PathLike[str] | None = None,
    *,
    now: float | None = None,
) -> str:
    """:func:`mint` with the key of ``key_file`` (default: the file ``SANDBOX_MCP_KEY_FILE``
    names). Raises :class:`~sandboxcore.errors.InvalidArgument`, also when neither is given."""
    path = key_file if key_file is not None else os.environ.get(KEY_FILE_ENV, "")
    if not path:
        raise errors.InvalidArgument(
            f"no MCP key file: give key_file or set {KEY_FILE_ENV} (the key file of "
            "`sandboxctl mcp --multi`)"
        )
    return mint(load_key(path), workspace_id, ttl, now=now)


def verify(key: bytes, token: str, *, now: float | None = None) -> Claims:
    """Check ``token`` at ``now`` (Unix seconds, default the clock) as the endpoint does: its
    shape, its MAC (compared in constant time) and its expiry.

    Raises :class:`MalformedToken`, :class:`ForgedToken`, :class:`ExpiredToken`, or
    :class:`~sandboxcore.errors.InvalidArgument` for a short key.
    """
    _check_key(key)
    if len(token) > MAX_TOKEN_LEN:
        raise MalformedToken(f"longer than {MAX_TOKEN_LEN} characters")
    parts = token.split(".")
    if len(parts) != 4:
        raise MalformedToken("want v1.<workspace id>.<expiry>.<mac>")
    version, workspace_id, exp, mac = parts
    if version != VERSION:
        raise MalformedToken(f"not a {VERSION} token")
    try:
        identity.validate_workspace_id(workspace_id)
    except errors.InvalidArgument:
        raise MalformedToken("the workspace id is not ws- and 24 lowercase hex digits") from None
    if not _EXPIRY.fullmatch(exp):
        raise MalformedToken("the expiry is not Unix seconds")
    if not _MAC.fullmatch(mac):
        raise MalformedToken("the MAC is not 43 base64url characters")
    if not hmac.compare_digest(mac, _mac(key, workspace_id, exp)):
        raise ForgedToken("the token's MAC does not match")
    expiry = int(exp)
    n = math.floor(time.time() if now is None else now)
    if n >= expiry:
        raise ExpiredToken(f"the token expired at {expiry}")
    if expiry - n > MAX_TTL_S + MAX_SKEW_S:
        raise MalformedToken("it expires more than 30 days and 5 minutes ahead")
    return Claims(workspace_id, expiry)
