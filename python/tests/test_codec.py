"""Tests of sandboxcore.codec: the shared vectors of payloadcodec/testdata (written by Go and by
Python, decrypted here; the Go test decrypts the same file), round trips, rotation, errors,
key loading and encrypted failures (docs/API.md "Payload encryption").
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import temporalio.api.common.v1
import temporalio.api.failure.v1
import temporalio.converter
import temporalio.exceptions

from sandboxcore.codec import (
    CIPHER,
    ENCODING,
    ENV_KEYS,
    KEY_SIZE,
    METADATA_CIPHER,
    METADATA_ENCODING,
    METADATA_KEY_ID,
    CorruptPayloadError,
    EncryptionCodec,
    Key,
    KeylessFailureConverter,
    PayloadCodecError,
    PayloadKeyError,
    PlaintextPayloadError,
    UnknownKeyError,
    codec_from_env,
    data_converter,
    is_encrypted,
    load_keys,
)

Payload = temporalio.api.common.v1.Payload

VECTORS_FILE = (
    Path(__file__).resolve().parents[2] / "payloadcodec" / "testdata" / "codec-vectors.json"
)

MARKER = "zebra-quartz-7d1f file content that must never reach history"


def _payload(d: dict[str, Any]) -> Payload:
    return Payload(
        metadata={k: base64.b64decode(v) for k, v in d["metadata"].items()},
        data=base64.b64decode(d["data"]),
    )


@pytest.fixture(scope="module")
def vectors() -> dict[str, Any]:
    with open(VECTORS_FILE, encoding="utf-8") as f:
        doc: dict[str, Any] = json.load(f)
    return doc


@pytest.fixture(scope="module")
def vector_keys(vectors: dict[str, Any]) -> dict[str, Key]:
    return {k["id"]: Key(k["id"], base64.b64decode(k["secret"])) for k in vectors["keys"]}


def _cases(vectors: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any], Payload]]:
    for vec in vectors["vectors"]:
        for writer in ("go_encrypted", "python_encrypted"):
            yield f"{vec['name']}/{writer}", vec, _payload(vec[writer])


def _other(keys: dict[str, Key], key_id: str) -> Key:
    return next(k for kid, k in keys.items() if kid != key_id)


def random_key(key_id: str) -> Key:
    return Key(key_id, os.urandom(KEY_SIZE))


# --- shared vectors ---------------------------------------------------------------------------


async def test_vectors_decrypt_in_python(
    vectors: dict[str, Any], vector_keys: dict[str, Key]
) -> None:
    assert len(vector_keys) == 2
    rotated = 0
    seen = 0
    for name, vec, enc in _cases(vectors):
        seen += 1
        key = vector_keys[vec["key_id"]]
        other = _other(vector_keys, vec["key_id"])
        if vec["key_id"] != vectors["keys"][0]["id"]:
            rotated += 1
        assert is_encrypted(enc), name
        assert enc.metadata[METADATA_ENCODING] == ENCODING.encode(), name
        assert enc.metadata[METADATA_CIPHER] == CIPHER.encode(), name
        assert enc.metadata[METADATA_KEY_ID] == vec["key_id"].encode(), name
        want = _payload(vec["plaintext"])
        # The key alone, and after rotation: another key encrypts, this one still decrypts.
        for codec in (EncryptionCodec([key]), EncryptionCodec([other, key])):
            [got] = await codec.decode([enc])
            assert got == want, name
        with pytest.raises(UnknownKeyError) as info:
            await EncryptionCodec([other]).decode([enc])
        assert info.value.key_id == vec["key_id"]
        assert str(info.value) == (
            "payloadcodec: payload encrypted with a key this codec does not hold: "
            f'key id "{vec["key_id"]}" (this codec holds [{other.id}])'
        )
    assert seen == 2 * len(vectors["vectors"]) >= 6
    assert rotated > 0, "some vector is encrypted with the second key"


async def test_vectors_detect_tampering(
    vectors: dict[str, Any], vector_keys: dict[str, Key]
) -> None:
    both = EncryptionCodec(list(vector_keys.values()))
    for name, vec, enc in _cases(vectors):
        n = len(enc.data)
        # Every part: version, salt, nonce, ciphertext, tag.
        for i in (0, 1, 16, 17, 28, 29, n - 17, n - 1):
            bad = Payload()
            bad.CopyFrom(enc)
            data = bytearray(bad.data)
            data[i] ^= 0x01
            bad.data = bytes(data)
            with pytest.raises(CorruptPayloadError, match="corrupt"):
                await both.decode([bad])
        truncated = Payload()
        truncated.CopyFrom(enc)
        truncated.data = enc.data[:-1]
        with pytest.raises(CorruptPayloadError):
            await both.decode([truncated])
        relabelled = Payload()
        relabelled.CopyFrom(enc)
        relabelled.metadata[METADATA_KEY_ID] = _other(vector_keys, vec["key_id"]).id.encode()
        with pytest.raises(CorruptPayloadError) as info:
            await both.decode([relabelled])
        assert info.value.key_id != vec["key_id"], name
        other_cipher = Payload()
        other_cipher.CopyFrom(enc)
        other_cipher.metadata[METADATA_CIPHER] = b"AES-128-CBC"
        with pytest.raises(CorruptPayloadError) as info:
            await both.decode([other_cipher])
        assert str(info.value).endswith(
            ': encryption-cipher "AES-128-CBC", want "AES-256-GCM-HKDF-SHA256"'
        )


async def test_python_encryption_matches_the_vectors_format(
    vectors: dict[str, Any], vector_keys: dict[str, Key]
) -> None:
    """What Python writes now has the same shape as the committed vectors (which Go reads)."""
    for vec in vectors["vectors"]:
        codec = EncryptionCodec([vector_keys[vec["key_id"]]])
        plain = _payload(vec["plaintext"])
        [enc] = await codec.encode([plain])
        committed = _payload(vec["python_encrypted"])
        assert dict(enc.metadata) == dict(committed.metadata)
        assert len(enc.data) == len(committed.data)
        assert enc.data != committed.data, "a fresh salt and nonce per payload"
        assert enc.data[0] == 0x01
        [back] = await codec.decode([enc])
        assert back == plain


# --- round trip, rotation, errors -------------------------------------------------------------


async def test_round_trip_hides_everything() -> None:
    codec = EncryptionCodec([random_key("k1")])
    conv = temporalio.converter.DataConverter.default.payload_converter
    values: list[Any] = [MARKER, {"path": "notes/" + MARKER, "content": MARKER}, None, [0, 1]]
    plain = conv.to_payloads(values)
    originals = [Payload() for _ in plain]
    for o, p in zip(originals, plain, strict=True):
        o.CopyFrom(p)
    enc = await codec.encode(plain)
    assert len(enc) == len(plain)
    assert plain == originals, "inputs are not modified"
    for e in enc:
        assert is_encrypted(e)
        assert dict(e.metadata) == {
            "encoding": b"binary/encrypted",
            "encryption-cipher": b"AES-256-GCM-HKDF-SHA256",
            "encryption-key-id": b"k1",
        }
        assert MARKER.encode() not in e.data
        assert len(e.data) > 1 + 16 + 12 + 16
    # Already encrypted payloads are kept as they are.
    again = await codec.encode(enc)
    assert all(a is b for a, b in zip(again, enc, strict=True))
    dec = await codec.decode(enc)
    assert dec == plain
    assert conv.from_payloads(dec) == values

    dc = data_converter(codec)
    encoded = await dc.encode(values)
    assert all(is_encrypted(p) for p in encoded)
    assert await dc.decode(encoded) == values


async def test_plaintext_payloads_pass_through_decode() -> None:
    codec = EncryptionCodec([random_key("k1")])
    plain = temporalio.converter.DataConverter.default.payload_converter.to_payloads(["x", None])
    plain.append(Payload(data=b"no metadata"))
    out = await codec.decode(plain)
    assert all(a is b for a, b in zip(out, plain, strict=True))


async def test_rotation() -> None:
    old, new = random_key("old"), random_key("new")
    before = EncryptionCodec([old])
    after = EncryptionCodec([new, old])
    assert after.encryption_key_id == "new"
    assert after.key_ids == ("new", "old")
    [by_old] = await before.encode([Payload(metadata={"encoding": b"json/plain"}, data=b"1")])
    [by_new] = await after.encode([Payload(metadata={"encoding": b"json/plain"}, data=b"2")])
    assert by_new.metadata[METADATA_KEY_ID] == b"new"
    assert [p.data for p in await after.decode([by_old, by_new])] == [b"1", b"2"]
    with pytest.raises(UnknownKeyError) as info:
        await before.decode([by_new])
    assert info.value.key_id == "new"
    assert 'key id "new" (this codec holds [old])' in str(info.value)
    assert isinstance(info.value, PayloadCodecError)


async def test_corrupt_payloads() -> None:
    key = random_key("k1")
    codec = EncryptionCodec([key])
    [enc] = await codec.encode([Payload(metadata={"encoding": b"json/plain"}, data=b'"x"')])
    short = Payload()
    short.CopyFrom(enc)
    short.data = enc.data[: 1 + 16 + 12 + 15]
    with pytest.raises(CorruptPayloadError) as info:
        await codec.decode([short])
    assert str(info.value) == (
        "payloadcodec: encrypted payload is corrupt or was not encrypted with this key: "
        'key id "k1": malformed data'
    )
    version = Payload()
    version.CopyFrom(enc)
    version.data = b"\x02" + enc.data[1:]
    with pytest.raises(CorruptPayloadError, match="malformed data"):
        await codec.decode([version])
    # Same id, another secret: does not authenticate.
    with pytest.raises(CorruptPayloadError) as info:
        await EncryptionCodec([random_key("k1")]).decode([enc])
    assert str(info.value) == (
        'payloadcodec: encrypted payload is corrupt or was not encrypted with this key: key id "k1"'
    )
    assert isinstance(info.value, PayloadCodecError)


async def test_require_encryption_refuses_plaintext() -> None:
    key = random_key("k1")
    strict = EncryptionCodec([key], require_encryption=True)
    assert strict.require_encryption
    assert not EncryptionCodec([key]).require_encryption
    [enc] = await strict.encode([Payload(metadata={"encoding": b"binary/null"})])
    assert [p.metadata["encoding"] for p in await strict.decode([enc])] == [b"binary/null"]
    json_plain = Payload(metadata={"encoding": b"json/plain"}, data=b"{}")
    with pytest.raises(PlaintextPayloadError) as info:
        await strict.decode([enc, json_plain])
    assert str(info.value) == (
        "payloadcodec: plaintext payload refused: this worker requires encrypted payloads "
        '(SANDBOX_PAYLOAD_REQUIRE_ENCRYPTION) (payload 2 of 2, encoding "json/plain")'
    )
    with pytest.raises(PlaintextPayloadError, match=r'\(payload 1 of 1, encoding "none"\)'):
        await strict.decode([Payload(data=b"raw")])
    long_encoding = Payload(metadata={"encoding": b"x\n" + b"y" * 60})
    with pytest.raises(PlaintextPayloadError) as info:
        await strict.decode([long_encoding])
    assert 'encoding "x?' + "y" * 38 + '…")' in str(info.value)


# --- keys -------------------------------------------------------------------------------------


def test_key_validation_and_repr() -> None:
    secret = os.urandom(KEY_SIZE)
    key = Key("k1.prod_2024-a", secret)
    assert key.id == "k1.prod_2024-a"
    assert key.secret == secret
    assert repr(key) == str(key) == "Key(id='k1.prod_2024-a')"
    assert secret.hex() not in repr(key)
    assert Key("k1.prod_2024-a", bytearray(secret)) == key  # type: ignore[arg-type]
    with pytest.raises(AttributeError):
        key.id = "other"  # type: ignore[misc]
    for bad_id in ("", "-k", ".k", "k/1", "k 1", "é", "k" * 65, "k1\n"):
        with pytest.raises(PayloadKeyError, match="want 1 to 64 characters"):
            Key(bad_id, secret)
    assert Key("k" * 64, secret).id == "k" * 64
    with pytest.raises(PayloadKeyError) as info:
        Key("k1", secret[:16])
    assert str(info.value) == 'payloadcodec: key "k1": 16 bytes, want 32'
    with pytest.raises(PayloadKeyError, match="is all zero bytes"):
        Key("k1", bytes(KEY_SIZE))
    assert issubclass(PayloadKeyError, ValueError)


def test_codec_construction() -> None:
    with pytest.raises(PayloadKeyError, match="no key"):
        EncryptionCodec([])
    a = random_key("a")
    with pytest.raises(PayloadKeyError, match='key id "a" appears twice'):
        EncryptionCodec([a, random_key("b"), random_key("a")])
    with pytest.raises(TypeError):
        EncryptionCodec([a, b"x" * 32])  # type: ignore[list-item]
    codec = EncryptionCodec([a, random_key("b")], require_encryption=True)
    assert repr(codec) == "EncryptionCodec(key_ids=['a', 'b'], require_encryption=True)"
    assert a.secret.hex() not in repr(codec)


@pytest.fixture
def key_files(tmp_path: Path) -> dict[str, Any]:
    raw = bytearray(os.urandom(KEY_SIZE))
    raw[-1] = ord("\n")  # a raw key that happens to end in a line feed stays raw
    b64 = os.urandom(KEY_SIZE)
    url = bytes([0xFB, 0xFF]) * (KEY_SIZE // 2)  # "+/" in standard, "-_" in URL base64

    def write(name: str, content: bytes) -> str:
        p = tmp_path / name
        p.write_bytes(content)
        return str(p)

    return {
        "dir": tmp_path,
        "raw": bytes(raw),
        "b64": b64,
        "url": url,
        "raw_file": write("raw", bytes(raw)),
        "b64_file": write("b64", base64.standard_b64encode(b64) + b"\n"),
        "url_raw_file": write(
            "url-raw", b"  " + base64.urlsafe_b64encode(url).rstrip(b"=") + b"\r\n"
        ),
        "url_padded_file": write("url-padded", base64.urlsafe_b64encode(url)),
        "std_raw_file": write("std-raw", base64.standard_b64encode(url).rstrip(b"=")),
        "wrapped_file": write(
            "wrapped",
            base64.standard_b64encode(b64)[:20] + b"\n" + base64.standard_b64encode(b64)[20:],
        ),
        "short_file": write("short", base64.standard_b64encode(bytes(raw[:16]))),
        "zero_file": write("zero", bytes(KEY_SIZE)),
        "big_file": write("big", b"A" * 10000),
        "mixed_file": write(
            "mixed", base64.standard_b64encode(url)[:10] + base64.urlsafe_b64encode(url)[10:]
        ),
    }


def test_load_keys(key_files: dict[str, Any]) -> None:
    f = key_files
    keys = load_keys(f"new={f['b64_file']}, old={f['raw_file']},older={f['url_raw_file']}")
    assert [k.id for k in keys] == ["new", "old", "older"]
    assert [k.secret for k in keys] == [f["b64"], f["raw"], f["url"]]
    for name in ("url_padded_file", "std_raw_file"):
        [k] = load_keys(f"k={f[name]}")
        assert k.secret == f["url"], name
    [k] = load_keys(f"k={f['wrapped_file']}")
    assert k.secret == f["b64"], "line ends inside base64 are ignored, as Go does"


def test_load_keys_errors(key_files: dict[str, Any]) -> None:
    f = key_files
    raw, b64 = f["raw_file"], f["b64_file"]
    missing = str(f["dir"] / "none")
    cases = {
        "": "SANDBOX_PAYLOAD_KEYS: empty: want ID=FILE[,ID=FILE…]",
        "   ": "empty",
        "k1": 'SANDBOX_PAYLOAD_KEYS: entry "k1": want ID=FILE',
        "=" + raw: "want ID=FILE",
        "k1=": "want ID=FILE",
        f"k1={raw},k1={b64}": "the id appears twice",
        f"bad id={raw}": "the id must be 1 to 64 characters",
        f"-k={raw}": "the id must be",
        f"k1={missing}": f"key file: open {missing}: no such file or directory",
        f"k1={f['dir']}": "key file: read",
        f"k1={f['short_file']}": "key file holds 24 bytes: want exactly 32 random bytes",
        f"k1={f['zero_file']}": "is all zero bytes",
        f"k1={f['big_file']}": "key file is larger than 4096 bytes",
        f"k1={f['mixed_file']}": "want exactly 32 random bytes",
        f"k1={raw},,k2={b64}": "SANDBOX_PAYLOAD_KEYS: want ID=FILE",  # Go: an empty entry
    }
    secret_texts = [base64.standard_b64encode(f["raw"][:16]).decode(), f["raw"].hex()]
    for spec, want in cases.items():
        with pytest.raises(PayloadKeyError) as info:
            load_keys(spec)
        msg = str(info.value)
        assert msg.startswith(ENV_KEYS + ": "), msg
        assert want in msg, (spec, msg)
        for s in secret_texts:
            assert s not in msg
    with pytest.raises(PayloadKeyError) as info:
        load_keys(f"k1={missing}")
    assert info.value.entry == f"k1={missing}"
    assert str(info.value) == (
        f'SANDBOX_PAYLOAD_KEYS: entry "k1={missing}": key file: open {missing}: '
        "no such file or directory"
    )


def test_codec_from_env(key_files: dict[str, Any]) -> None:
    f = key_files
    assert codec_from_env({}) is None, "unset: no codec, payloads stay plaintext"
    assert codec_from_env({ENV_KEYS: "  "}) is None
    codec = codec_from_env({ENV_KEYS: f"a={f['b64_file']},b={f['raw_file']}"})
    assert codec is not None
    assert codec.key_ids == ("a", "b")
    assert not codec.require_encryption
    with pytest.raises(PayloadKeyError, match="SANDBOX_PAYLOAD_KEYS"):
        codec_from_env({ENV_KEYS: "a=" + str(f["dir"] / "none")})


# --- failures ---------------------------------------------------------------------------------


async def test_failure_round_trips_encrypted() -> None:
    codec = EncryptionCodec([random_key("k1")])
    dc = data_converter(codec)
    plain = data_converter(None)
    assert plain.payload_codec is None
    assert isinstance(plain.failure_converter, KeylessFailureConverter)
    try:
        try:
            raise ValueError("inner " + MARKER)
        except ValueError as cause:
            raise temporalio.exceptions.ApplicationError(
                MARKER, {"path": MARKER}, type="FileNotFound", non_retryable=True
            ) from cause
    except temporalio.exceptions.ApplicationError as e:
        err = e
    failure = temporalio.api.failure.v1.Failure()
    await dc.encode_failure(err, failure)

    assert failure.message == "Encoded failure"
    assert failure.stack_trace == ""
    assert is_encrypted(failure.encoded_attributes)
    assert failure.application_failure_info.type == "FileNotFound", "the type stays readable"
    assert all(is_encrypted(p) for p in failure.application_failure_info.details.payloads)
    assert failure.cause.message == "Encoded failure"
    assert is_encrypted(failure.cause.encoded_attributes)
    wire = failure.SerializeToString()
    assert MARKER.encode() not in wire
    assert b"inner" not in wire

    # A copy of what went over the wire decodes back.
    received = temporalio.api.failure.v1.Failure()
    received.ParseFromString(wire)
    back = await dc.decode_failure(received)
    assert isinstance(back, temporalio.exceptions.ApplicationError)
    assert back.message == MARKER
    assert back.type == "FileNotFound"
    assert back.non_retryable
    assert back.details == ({"path": MARKER},)
    assert isinstance(back.__cause__, temporalio.exceptions.ApplicationError)
    assert back.__cause__.message == "inner " + MARKER
    assert back.__cause__.type == "ValueError"

    # A client without the key reads the type, never the message.
    blind = temporalio.api.failure.v1.Failure()
    blind.ParseFromString(wire)
    with pytest.raises(UnknownKeyError):
        await data_converter(EncryptionCodec([random_key("k2")])).decode_failure(blind)


async def test_failures_decoded_from_plaintext_are_sealed_again() -> None:
    """A failure read from plaintext (history from before keys) and sent on is sealed, cause
    included, as Go's Codec.FailureConverter() does.
    """
    dc = data_converter(EncryptionCodec([random_key("k1")]))
    plain = temporalio.api.failure.v1.Failure(
        message="outer " + MARKER,
        stack_trace="at somewhere",
        application_failure_info=temporalio.api.failure.v1.ApplicationFailureInfo(type="Outer"),
        cause=temporalio.api.failure.v1.Failure(
            message="cause " + MARKER,
            application_failure_info=temporalio.api.failure.v1.ApplicationFailureInfo(type="Inner"),
        ),
    )
    err = await dc.decode_failure(plain)
    assert isinstance(err, temporalio.exceptions.ApplicationError)
    assert err.message == "outer " + MARKER
    resent = temporalio.api.failure.v1.Failure()
    await dc.encode_failure(err, resent)
    assert MARKER.encode() not in resent.SerializeToString()
    assert resent.message == resent.cause.message == "Encoded failure"
    assert resent.cause.application_failure_info.type == "Inner"
    back = await dc.decode_failure(resent)
    assert isinstance(back, temporalio.exceptions.ApplicationError)
    assert back.message == "outer " + MARKER
    assert isinstance(back.__cause__, temporalio.exceptions.ApplicationError)
    assert back.__cause__.message == "cause " + MARKER
