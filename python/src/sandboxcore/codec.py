"""Payload encryption, byte-compatible with the Go package ``payloadcodec``.

Every payload is replaced by one whose metadata is

====================  ==================================
``encoding``          ``binary/encrypted``
``encryption-cipher`` ``AES-256-GCM-HKDF-SHA256``
``encryption-key-id`` the id of the key that encrypted it
====================  ==================================

and whose data is ``0x01 | salt (16 bytes) | nonce (12 bytes) | AES-256-GCM ciphertext and
16-byte tag``. The AES key is HKDF-SHA256(the 32-byte key, salt, info ``sandboxcore payload v1``,
32 bytes), the additional authenticated data is ``sandboxcore payload v1``, a zero byte and the
key id, and the plaintext is the original ``temporal.api.common.v1.Payload`` in protobuf binary
form (docs/API.md "Payload encryption"). The first key encrypts, every key decrypts (rotation,
docs/SECURITY.md "Payload encryption"). Keys come from ``SANDBOX_PAYLOAD_KEYS`` (``ID=FILE[,…]``,
README.md "Configuration").
"""

from __future__ import annotations

import base64
import binascii
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import temporalio.api.common.v1
import temporalio.api.failure.v1
import temporalio.converter
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from google.protobuf.message import DecodeError

__all__ = [
    "CIPHER",
    "ENCODING",
    "ENV_KEYS",
    "KEY_SIZE",
    "METADATA_CIPHER",
    "METADATA_ENCODING",
    "METADATA_KEY_ID",
    "CorruptPayloadError",
    "EncryptionCodec",
    "Key",
    "PayloadCodecError",
    "PayloadKeyError",
    "PlaintextPayloadError",
    "SealingFailureConverter",
    "UnknownKeyError",
    "codec_from_env",
    "data_converter",
    "is_encrypted",
    "load_keys",
]

METADATA_ENCODING = "encoding"
"""Metadata key of a payload's encoding (docs/API.md "Payload encryption")."""
METADATA_CIPHER = "encryption-cipher"
"""Metadata key naming the scheme of an encrypted payload."""
METADATA_KEY_ID = "encryption-key-id"
"""Metadata key holding the id of the key that encrypted a payload."""
ENCODING = "binary/encrypted"
"""The ``encoding`` of every encrypted payload."""
CIPHER = "AES-256-GCM-HKDF-SHA256"
"""The value of ``encryption-cipher``: this scheme."""
KEY_SIZE = 32
"""Size of every key in bytes (AES-256)."""
ENV_KEYS = "SANDBOX_PAYLOAD_KEYS"
"""Environment variable listing the keys: ``ID=FILE[,ID=FILE…]``, the first one encrypting."""

_FORMAT_VERSION = 0x01
_SALT_SIZE = 16
_NONCE_SIZE = 12
_TAG_SIZE = 16
_LABEL = b"sandboxcore payload v1"
_MAX_KEY_FILE = 4096
_ENCODED_MESSAGE = "Encoded failure"

_KEY_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_STD_BASE64 = re.compile(rb"[A-Za-z0-9+/]*")
_URL_BASE64 = re.compile(rb"[A-Za-z0-9_-]*")

_UNKNOWN_KEY = "payloadcodec: payload encrypted with a key this codec does not hold"
_CORRUPT = "payloadcodec: encrypted payload is corrupt or was not encrypted with this key"
_PLAINTEXT = (
    "payloadcodec: plaintext payload refused: this worker requires encrypted payloads "
    "(SANDBOX_PAYLOAD_REQUIRE_ENCRYPTION)"
)


class PayloadKeyError(ValueError):
    """A key, a set of keys or a ``SANDBOX_PAYLOAD_KEYS`` entry that cannot be used.

    Raised by :class:`Key` (a malformed id, a secret that is not 32 bytes or is all zero),
    :class:`EncryptionCodec` (no key, an id twice) and :func:`load_keys` (an entry or key file:
    the message then reads ``SANDBOX_PAYLOAD_KEYS: entry "ID=FILE": reason``, like Go's
    ``payloadcodec.KeysError``). ``entry`` is the ``ID=FILE`` entry at fault (``""`` for the
    whole value, ``None`` outside :func:`load_keys`); the error never holds key material.
    """

    def __init__(self, message: str, *, entry: str | None = None) -> None:
        """Make the error; ``message`` is its full text."""
        super().__init__(message)
        self.entry = entry


class PayloadCodecError(Exception):
    """A payload :meth:`EncryptionCodec.decode` cannot decode (docs/SECURITY.md "Payload
    encryption"); the subclasses say why. ``key_id`` is the key id the payload names, when it
    names one.
    """

    def __init__(self, message: str, *, key_id: str | None = None) -> None:
        """Make the error; ``message`` is its full text, as Go's ``payloadcodec`` words it."""
        super().__init__(message)
        self.key_id = key_id


class UnknownKeyError(PayloadCodecError):
    """A payload encrypted with a key id the codec does not hold (Go's ``ErrUnknownKey``): add
    that key to ``SANDBOX_PAYLOAD_KEYS``, after the one that encrypts.
    """


class CorruptPayloadError(PayloadCodecError):
    """An encrypted payload that does not authenticate under its key (altered, truncated, or
    another key under the same id) or that names another scheme (Go's ``ErrCorrupt``).
    """


class PlaintextPayloadError(PayloadCodecError):
    """A payload without encryption metadata refused by a codec made with
    ``require_encryption=True`` (Go's ``ErrPlaintext``).
    """


@dataclass(frozen=True, repr=False)
class Key:
    """One AES-256 key and its id (Go's ``payloadcodec.Key``).

    ``id`` matches ``[A-Za-z0-9][A-Za-z0-9._-]{0,63}`` and travels in every payload the key
    encrypts; ``secret`` is exactly :data:`KEY_SIZE` (32) bytes, not all zero. ``repr`` and
    ``str`` show the id only, never the secret.

    Raises:
        PayloadKeyError: a malformed id, a secret of another size, or an all-zero secret.
    """

    id: str
    secret: bytes

    def __post_init__(self) -> None:
        """Validate as Go's ``payloadcodec.NewKey`` and keep a private copy of the secret."""
        if not isinstance(self.id, str) or not _KEY_ID_PATTERN.fullmatch(self.id):
            shown = self.id if isinstance(self.id, str) else repr(self.id)
            raise PayloadKeyError(
                f"payloadcodec: key id {_go_quote(shown)}: want 1 to 64 characters from "
                "A-Z a-z 0-9 . _ - (starting with a letter or digit)"
            )
        secret = bytes(self.secret)
        if len(secret) != KEY_SIZE:
            raise PayloadKeyError(
                f"payloadcodec: key {_go_quote(self.id)}: {len(secret)} bytes, want {KEY_SIZE}"
            )
        if not any(secret):
            raise PayloadKeyError(
                f"payloadcodec: key {_go_quote(self.id)} is all zero bytes: generate one with "
                "`head -c 32 /dev/urandom | base64`"
            )
        object.__setattr__(self, "secret", secret)

    def __repr__(self) -> str:
        """``Key(id='…')``: the secret is never shown."""
        return f"Key(id={self.id!r})"

    __str__ = __repr__


def is_encrypted(payload: temporalio.api.common.v1.Payload) -> bool:
    """Whether ``payload`` carries this scheme's encryption metadata (``encoding`` is
    ``binary/encrypted`` and ``encryption-cipher`` is ``AES-256-GCM-HKDF-SHA256``).
    """
    md = payload.metadata
    return (
        md.get(METADATA_ENCODING) == ENCODING.encode()
        and md.get(METADATA_CIPHER) == CIPHER.encode()
    )


class EncryptionCodec(temporalio.converter.PayloadCodec):
    """The payload codec of docs/API.md "Payload encryption" (Go's ``payloadcodec.Codec``).

    ``keys[0]`` encrypts, every key decrypts. With ``require_encryption`` the codec refuses
    every payload that carries no encryption metadata (Go's ``Options.RequireEncryption``,
    ``SANDBOX_PAYLOAD_REQUIRE_ENCRYPTION``); otherwise such payloads are read as they are
    (history written before keys were configured). ``repr`` shows the key ids only. Safe to
    share between tasks and threads: it holds no mutable state.

    Raises:
        PayloadKeyError: no key, or two keys with one id.
        TypeError: an element of ``keys`` is not a :class:`Key`.
    """

    def __init__(self, keys: Sequence[Key], *, require_encryption: bool = False) -> None:
        """Make a codec that encrypts with ``keys[0]`` and decrypts with any of ``keys``."""
        keys = list(keys)
        if not keys:
            raise PayloadKeyError("payloadcodec: no key")
        by_id: dict[str, Key] = {}
        for k in keys:
            if not isinstance(k, Key):
                raise TypeError(f"payloadcodec: want a Key, got {type(k).__name__}")
            if k.id in by_id:
                raise PayloadKeyError(f"payloadcodec: key id {_go_quote(k.id)} appears twice")
            by_id[k.id] = k
        self._primary = keys[0]
        self._keys = by_id
        self._ids = tuple(by_id)
        self._require_encryption = require_encryption

    @property
    def encryption_key_id(self) -> str:
        """The id of the key new payloads are encrypted with."""
        return self._primary.id

    @property
    def key_ids(self) -> tuple[str, ...]:
        """The ids of every key, the encrypting one first."""
        return self._ids

    @property
    def require_encryption(self) -> bool:
        """Whether :meth:`decode` refuses payloads without encryption metadata."""
        return self._require_encryption

    def __repr__(self) -> str:
        """``EncryptionCodec(key_ids=[…])``: secrets are never shown."""
        extra = ", require_encryption=True" if self._require_encryption else ""
        return f"EncryptionCodec(key_ids={list(self._ids)!r}{extra})"

    async def encode(
        self, payloads: Sequence[temporalio.api.common.v1.Payload]
    ) -> list[temporalio.api.common.v1.Payload]:
        """Encrypt every payload with the first key; one already encrypted by this scheme is
        kept as it is. Returns as many payloads as given; the inputs are not modified.
        """
        return [p if is_encrypted(p) else self._encrypt(p) for p in payloads]

    async def decode(
        self, payloads: Sequence[temporalio.api.common.v1.Payload]
    ) -> list[temporalio.api.common.v1.Payload]:
        """Decrypt every ``binary/encrypted`` payload; return any other as it is (unless the
        codec requires encryption). Returns as many payloads as given; the inputs are not
        modified.

        Raises:
            UnknownKeyError: a key id the codec does not hold (named, with the ids it holds).
            CorruptPayloadError: a payload that does not authenticate or names another cipher.
            PlaintextPayloadError: with ``require_encryption``, a payload without encryption
                metadata (its position and encoding are named).
        """
        out: list[temporalio.api.common.v1.Payload] = []
        for i, p in enumerate(payloads):
            raw_encoding = p.metadata.get(METADATA_ENCODING, b"")
            if raw_encoding != ENCODING.encode():
                if self._require_encryption:
                    enc = raw_encoding.decode("utf-8", "replace") or "none"
                    raise PlaintextPayloadError(
                        f"{_PLAINTEXT} (payload {i + 1} of {len(payloads)}, "
                        f"encoding {_go_quote(_clip_encoding(enc))})"
                    )
                out.append(p)
                continue
            out.append(self._decrypt(p))
        return out

    def _encrypt(
        self, payload: temporalio.api.common.v1.Payload
    ) -> temporalio.api.common.v1.Payload:
        plain = payload.SerializeToString()
        salt = os.urandom(_SALT_SIZE)
        nonce = os.urandom(_NONCE_SIZE)
        sealed = _aead(self._primary, salt).encrypt(
            nonce, plain, _additional_data(self._primary.id)
        )
        return temporalio.api.common.v1.Payload(
            metadata={
                METADATA_ENCODING: ENCODING.encode(),
                METADATA_CIPHER: CIPHER.encode(),
                METADATA_KEY_ID: self._primary.id.encode(),
            },
            data=bytes([_FORMAT_VERSION]) + salt + nonce + sealed,
        )

    def _decrypt(
        self, payload: temporalio.api.common.v1.Payload
    ) -> temporalio.api.common.v1.Payload:
        md = payload.metadata
        cipher = md.get(METADATA_CIPHER, b"").decode("utf-8", "replace")
        if cipher != CIPHER:
            raise CorruptPayloadError(
                f"{_CORRUPT}: {METADATA_CIPHER} {_go_quote(_clip_encoding(cipher))}, "
                f"want {_go_quote(CIPHER)}"
            )
        key_id = md.get(METADATA_KEY_ID, b"").decode("utf-8", "replace")
        key = self._keys.get(key_id)
        if key is None:
            raise UnknownKeyError(
                f"{_UNKNOWN_KEY}: key id {_go_quote(key_id)} "
                f"(this codec holds [{' '.join(self._ids)}])",
                key_id=key_id,
            )
        data = payload.data
        header = 1 + _SALT_SIZE + _NONCE_SIZE
        if len(data) < header + _TAG_SIZE or data[0] != _FORMAT_VERSION:
            raise CorruptPayloadError(
                f"{_CORRUPT}: key id {_go_quote(key_id)}: malformed data", key_id=key_id
            )
        salt, nonce, sealed = data[1 : 1 + _SALT_SIZE], data[1 + _SALT_SIZE : header], data[header:]
        try:
            plain = _aead(key, salt).decrypt(nonce, sealed, _additional_data(key_id))
        except InvalidTag:
            raise CorruptPayloadError(
                f"{_CORRUPT}: key id {_go_quote(key_id)}", key_id=key_id
            ) from None
        out = temporalio.api.common.v1.Payload()
        try:
            out.ParseFromString(plain)
        except DecodeError as e:
            raise CorruptPayloadError(
                f"{_CORRUPT}: key id {_go_quote(key_id)}: {e}", key_id=key_id
            ) from None
        return out


def _aead(key: Key, salt: bytes) -> AESGCM:
    derived = HKDF(algorithm=hashes.SHA256(), length=KEY_SIZE, salt=salt, info=_LABEL).derive(
        key.secret
    )
    return AESGCM(derived)


def _additional_data(key_id: str) -> bytes:
    return _LABEL + b"\x00" + key_id.encode()


def load_keys(spec: str) -> list[Key]:
    """Read the keys a ``SANDBOX_PAYLOAD_KEYS`` value names, as Go's ``payloadcodec.LoadKeys``.

    ``spec`` is comma-separated ``ID=FILE`` entries (spaces around entries ignored); each FILE
    holds exactly 32 bytes, raw or base64 (standard or URL alphabet, padded or not, surrounding
    white space ignored), and at most 4096 bytes are read. The first key encrypts
    (README.md "Configuration", docs/SECURITY.md "Payload encryption").

    Raises:
        PayloadKeyError: ``SANDBOX_PAYLOAD_KEYS: entry "ID=FILE": reason`` — an empty value, an
            entry that is not ``ID=FILE``, a bad or repeated id, an unreadable file, a wrong
            size, an all-zero key. The message never holds key material.
    """
    if not spec.strip():
        raise _keys_error("", "empty: want ID=FILE[,ID=FILE…]")
    keys: list[Key] = []
    seen: set[str] = set()
    for raw_entry in spec.split(","):
        entry = raw_entry.strip()
        key_id, sep, path = entry.partition("=")
        if not sep or not key_id or not path:
            raise _keys_error(entry, "want ID=FILE")
        if not _KEY_ID_PATTERN.fullmatch(key_id):
            raise _keys_error(
                entry,
                "the id must be 1 to 64 characters from A-Z a-z 0-9 . _ - "
                "(starting with a letter or digit)",
            )
        if key_id in seen:
            raise _keys_error(entry, "the id appears twice")
        seen.add(key_id)
        secret = _read_key_file(entry, path)
        try:
            keys.append(Key(key_id, bytes(secret)))
        except PayloadKeyError as e:
            raise _keys_error(entry, str(e).removeprefix("payloadcodec: ")) from None
        finally:
            secret[:] = bytes(len(secret))
    return keys


def _keys_error(entry: str, reason: str) -> PayloadKeyError:
    if entry == "":
        return PayloadKeyError(f"{ENV_KEYS}: {reason}", entry=entry)
    return PayloadKeyError(f"{ENV_KEYS}: entry {_go_quote(entry)}: {reason}", entry=entry)


def _read_key_file(entry: str, path: str) -> bytearray:
    try:
        with open(path, "rb") as f:
            raw = bytearray(f.read(_MAX_KEY_FILE + 1))
    except OSError as e:
        op = "read" if isinstance(e, IsADirectoryError) else "open"
        reason = e.strerror or type(e).__name__
        reason = reason[:1].lower() + reason[1:]
        raise _keys_error(entry, f"key file: {op} {path}: {reason}") from None
    try:
        if len(raw) > _MAX_KEY_FILE:
            raise _keys_error(
                entry,
                f"key file is larger than {_MAX_KEY_FILE} bytes: "
                "want 32 random bytes, raw or base64",
            )
        if len(raw) == KEY_SIZE:
            return bytearray(raw)
        decoded = _decode_base64(bytes(raw).strip())
        if decoded is None or len(decoded) != KEY_SIZE:
            raise _keys_error(
                entry,
                f"key file holds {len(raw)} bytes: want exactly 32 random bytes, raw or base64 "
                "(e.g. `head -c 32 /dev/urandom | base64 > FILE`)",
            )
        return decoded
    finally:
        raw[:] = bytes(len(raw))


def _decode_base64(text: bytes) -> bytearray | None:
    """Decode ``text`` as Go's standard, raw standard, URL or raw URL base64 (line ends inside
    are ignored, as Go's decoder does); ``None`` when no variant yields 32 bytes.
    """
    text = text.replace(b"\r", b"").replace(b"\n", b"")
    body = text.rstrip(b"=")
    padding = len(text) - len(body)
    for alphabet, altchars in ((_STD_BASE64, None), (_URL_BASE64, b"-_")):
        if not alphabet.fullmatch(body):
            continue
        if padding:
            # Padded: the whole text is a multiple of 4 long with at most two "=".
            if padding > 2 or len(text) % 4 != 0:
                continue
            candidate = text
        else:
            # Unpadded (raw), or padded input that needs no padding: pad it here.
            if len(body) % 4 == 1:
                continue
            candidate = body + b"=" * (-len(body) % 4)
        try:
            decoded = base64.b64decode(candidate, altchars=altchars, validate=True)
        except (binascii.Error, ValueError):
            continue
        if len(decoded) == KEY_SIZE:
            return bytearray(decoded)
    return None


def codec_from_env(environ: Mapping[str, str] | None = None) -> EncryptionCodec | None:
    """Build the codec ``SANDBOX_PAYLOAD_KEYS`` describes in ``environ`` (default
    ``os.environ``), as Go's ``payloadcodec.FromEnv``: ``None`` when it is unset or blank
    (payloads then stay plaintext). The codec does not require encryption (that is a worker
    setting).

    Raises:
        PayloadKeyError: a malformed value or key file (see :func:`load_keys`).
    """
    env = os.environ if environ is None else environ
    spec = env.get(ENV_KEYS)
    if spec is None or not spec.strip():
        return None
    return EncryptionCodec(load_keys(spec))


class SealingFailureConverter(temporalio.converter.DefaultFailureConverterWithEncodedAttributes):
    """The SDK's failure converter with encoded common attributes (a failure's message and
    stack trace travel as a JSON payload in ``encoded_attributes``, which the payload codec
    encrypts; the message reads ``Encoded failure``; the type stays readable), plus the guard
    of Go's ``Codec.FailureConverter()``: every failure of the chain is sealed, including
    causes copied from a failure that was decoded from plaintext (docs/API.md "Payload
    encryption").
    """

    def to_failure(
        self,
        exception: BaseException,
        payload_converter: temporalio.converter.PayloadConverter,
        failure: temporalio.api.failure.v1.Failure,
    ) -> None:
        """Convert ``exception`` into ``failure`` (see the base class), then seal every
        failure of its cause chain that still holds a message or stack trace in clear.
        """
        super().to_failure(exception, payload_converter, failure)
        current: temporalio.api.failure.v1.Failure | None = failure
        while current is not None:
            if current.HasField("encoded_attributes"):
                current.message, current.stack_trace = _ENCODED_MESSAGE, ""
            elif current.message or current.stack_trace:
                current.encoded_attributes.CopyFrom(
                    payload_converter.to_payloads(
                        [{"message": current.message, "stack_trace": current.stack_trace}]
                    )[0]
                )
                current.message, current.stack_trace = _ENCODED_MESSAGE, ""
            current = current.cause if current.HasField("cause") else None


class KeylessFailureConverter(temporalio.converter.DefaultFailureConverter):
    """The SDK's default failure converter for a client without keys: a failure of an encrypted
    deployment (details and message encrypted, ``binary/encrypted``) cannot be decoded, so its
    undecodable details are dropped and its message says why, keeping its type readable — the
    client still gets the typed error (docs/API.md "Payload encryption": a client holding none
    of the worker's keys reads only the type).
    """

    def from_failure(
        self,
        failure: temporalio.api.failure.v1.Failure,
        payload_converter: temporalio.converter.PayloadConverter,
    ) -> BaseException:
        """Convert ``failure`` (see the base class); on a payload of an unknown encoding,
        convert it again without its details."""
        try:
            return super().from_failure(failure, payload_converter)
        except (KeyError, RuntimeError):
            stripped = temporalio.api.failure.v1.Failure()
            stripped.CopyFrom(failure)
            current: temporalio.api.failure.v1.Failure | None = stripped
            while current is not None:
                for info in ("application_failure_info", "canceled_failure_info"):
                    if current.HasField(info):
                        getattr(current, info).ClearField("details")
                if current.HasField("encoded_attributes"):
                    current.ClearField("encoded_attributes")
                    current.message = (
                        f"{_ENCODED_MESSAGE} (the payloads are encrypted: set {ENV_KEYS} to the "
                        'workers\' keys, docs/SECURITY.md "Payload encryption")'
                    )
                current = current.cause if current.HasField("cause") else None
            return super().from_failure(stripped, payload_converter)


def data_converter(codec: EncryptionCodec | None) -> temporalio.converter.DataConverter:
    """The data converter of a client or worker of an encrypted deployment: the SDK's default
    payload converter, ``codec`` applied to every payload (arguments, results, heartbeat
    details, memo, failure payloads) and :class:`SealingFailureConverter`, so that failures'
    messages and stack traces are encrypted too, as Go's ``Codec.DataConverter()`` and
    ``Codec.FailureConverter()`` do (docs/API.md "Payload encryption"). With ``None``, the SDK's
    default data converter with :class:`KeylessFailureConverter`.
    """
    if codec is None:
        return temporalio.converter.DataConverter(failure_converter_class=KeylessFailureConverter)
    return temporalio.converter.DataConverter(
        payload_codec=codec, failure_converter_class=SealingFailureConverter
    )


def _clip_encoding(s: str) -> str:
    """Bound a sender's encoding named in an error (40 characters, control characters as ?)."""
    if len(s) > 40:
        s = s[:40] + "…"
    return "".join("?" if ord(c) < 0x20 or ord(c) == 0x7F else c for c in s)


_GO_ESCAPES = {
    "\a": "\\a",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\v": "\\v",
    "\\": "\\\\",
    '"': '\\"',
}


def _go_quote(s: str) -> str:
    """Quote ``s`` as Go's ``%q`` does (so messages match the Go package's)."""
    parts = ['"']
    for c in s:
        if c in _GO_ESCAPES:
            parts.append(_GO_ESCAPES[c])
        elif c.isprintable():
            parts.append(c)
        elif ord(c) < 0x80:
            parts.append(f"\\x{ord(c):02x}")
        elif ord(c) <= 0xFFFF:
            parts.append(f"\\u{ord(c):04x}")
        else:
            parts.append(f"\\U{ord(c):08x}")
    parts.append('"')
    return "".join(parts)
