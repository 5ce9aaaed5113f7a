"""Wire encodings of the contract's byte and duration fields (docs/API.md "Schema").

The JSON Schema marks byte fields with ``"contentEncoding": "base64"`` (Go's ``[]byte``, sent as a
standard, padded base64 string) and durations with ``"x-duration": "nanoseconds"`` (Go's
``time.Duration``, sent as an integer of nanoseconds). :mod:`sandboxcore.models` types those fields
with the two annotated types below, so Python code deals in ``bytes`` and
:class:`datetime.timedelta` while ``model_dump(mode="json")`` and ``model_validate_json`` speak
the wire encoding. ``model_dump()`` (Python mode) keeps ``bytes`` and ``timedelta``.
"""

from __future__ import annotations

import base64
import binascii
from datetime import timedelta
from typing import Annotated

from pydantic import BeforeValidator, PlainSerializer, WithJsonSchema

__all__ = [
    "Base64Bytes",
    "Nanoseconds",
    "decode_base64",
    "duration_from_wire",
    "duration_to_wire",
    "encode_base64",
]

_MICROSECOND = timedelta(microseconds=1)


def decode_base64(value: object) -> object:
    """Validate a byte field's input into ``bytes``.

    A ``str`` is the wire form: standard base64 with padding (Go's ``encoding/json``), decoded
    here. ``bytes``, ``bytearray`` and ``memoryview`` are raw bytes from Python code and are
    taken as they are (never base64-decoded). Anything else is returned unchanged for pydantic's
    ``bytes`` validation to reject.

    Raises:
        ValueError: ``value`` is a string that is not valid base64.
    """
    if isinstance(value, str):
        try:
            return base64.b64decode(value.encode("ascii"), validate=True)
        except (UnicodeEncodeError, binascii.Error) as exc:
            raise ValueError(f"not a standard base64 string: {exc}") from None
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    return value


def encode_base64(value: bytes) -> str:
    """The wire form of a byte field: standard, padded base64, no line breaks."""
    return base64.b64encode(value).decode("ascii")


def duration_from_wire(value: object) -> object:
    """Validate a duration field's input into a :class:`datetime.timedelta`.

    An ``int`` (from JSON, or from a decoded wire payload in Python) counts nanoseconds; it is
    truncated (floor) to whole microseconds, the resolution of ``timedelta``. A ``timedelta`` is
    taken as it is.

    Raises:
        ValueError: any other value (a ``bool``, a ``float``, a ``str``...): the unit would be
            ambiguous, so pass a ``timedelta``.
    """
    if isinstance(value, timedelta):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return timedelta(microseconds=value // 1000)
    raise ValueError(
        "a duration is a datetime.timedelta, or an int of nanoseconds on the wire; "
        f"got {type(value).__name__}"
    )


def duration_to_wire(value: timedelta) -> int:
    """The wire form of a duration field: whole nanoseconds (exact for any ``timedelta``)."""
    return (value // _MICROSECOND) * 1000


Base64Bytes = Annotated[
    bytes,
    BeforeValidator(decode_base64),
    PlainSerializer(encode_base64, return_type=str, when_used="json"),
    WithJsonSchema({"type": "string", "contentEncoding": "base64"}),
]
"""``bytes`` in Python; a standard base64 string on the wire (``contentEncoding: base64``).

Accepts a base64 ``str`` (wire) or raw ``bytes``/``bytearray``/``memoryview`` (Python code,
not decoded); serializes to a base64 ``str`` in JSON mode and stays ``bytes`` in Python mode.
"""

Nanoseconds = Annotated[
    timedelta,
    BeforeValidator(duration_from_wire),
    PlainSerializer(duration_to_wire, return_type=int, when_used="json"),
    WithJsonSchema({"type": "integer", "x-duration": "nanoseconds"}),
]
""":class:`datetime.timedelta` in Python; an integer of nanoseconds on the wire
(``x-duration: nanoseconds``, Go's ``time.Duration``).

Accepts an ``int`` of nanoseconds (floored to microseconds) or a ``timedelta``; rejects floats
and strings. Serializes to ``int`` nanoseconds in JSON mode and stays ``timedelta`` in Python mode.
"""
