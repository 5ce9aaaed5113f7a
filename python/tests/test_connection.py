"""Tests of sandboxcore.connection: settings resolved as the Go CLI resolves them (arguments over
TEMPORAL_* variables over the TOML profile over defaults, README.md "Configuration"). Nothing
here connects to a server.
"""

from __future__ import annotations

import datetime
import logging
import os
from pathlib import Path
from typing import Any

import pytest
import temporalio.client
import temporalio.converter
import temporalio.service
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from sandboxcore import connection
from sandboxcore.codec import (
    KEY_SIZE,
    EncryptionCodec,
    Key,
    KeylessFailureConverter,
    SealingFailureConverter,
)
from sandboxcore.connection import (
    DEFAULT_ADDRESS,
    DEFAULT_TASK_QUEUE,
    ConnectionSettingsError,
    ConnectSettings,
    TemporalUnreachable,
    connect_temporal,
    resolve_settings,
)

PROFILES = """
[profile.default]
address = "file-host:7233"
namespace = "file-ns"

[profile.prod]
address = "prod.example.com:7233"
namespace = "prod-ns"
api_key = "file-api-key-SECRET"

[profile.prod.grpc_meta]
x-tenant = "acme"
"""


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """An environment whose TOML file does not exist (the user's own is never read)."""
    return {"TEMPORAL_CONFIG_FILE": str(tmp_path / "absent.toml")}


@pytest.fixture
def config(tmp_path: Path) -> str:
    path = tmp_path / "temporal.toml"
    path.write_text(PROFILES)
    return str(path)


def _pem_cert(key: ec.EllipticCurvePrivateKey, name: str, *, ca: bool) -> bytes:
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM)


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    d = tmp_path_factory.mktemp("pki")
    ca_key = ec.generate_private_key(ec.SECP256R1())
    client_key = ec.generate_private_key(ec.SECP256R1())
    other_key = ec.generate_private_key(ec.SECP256R1())
    files = {
        "ca": _pem_cert(ca_key, "test CA", ca=True),
        "cert": _pem_cert(client_key, "client", ca=False),
        "key": _pem_key(client_key),
        "other_key": _pem_key(other_key),
        "garbage": b"not a PEM file\n",
    }
    out: dict[str, Any] = {"bytes": files}
    for name, content in files.items():
        p = d / f"{name}.pem"
        p.write_bytes(content)
        out[name] = str(p)
    return out


# --- precedence and defaults ------------------------------------------------------------------


def test_defaults(env: dict[str, str]) -> None:
    s = resolve_settings(environ=env)
    assert s == ConnectSettings(
        target_host=DEFAULT_ADDRESS,
        namespace="default",
        api_key=None,
        tls=False,
        task_queue=DEFAULT_TASK_QUEUE,
        codec=None,
    )
    assert DEFAULT_ADDRESS == "127.0.0.1:7233"
    assert DEFAULT_TASK_QUEUE == "sandbox"
    # Set but empty: no setting (as Go treats an empty address or namespace).
    s = resolve_settings(environ={**env, "TEMPORAL_ADDRESS": "", "TEMPORAL_NAMESPACE": ""})
    assert (s.target_host, s.namespace) == (DEFAULT_ADDRESS, "default")


def test_argument_over_environment_over_profile(env: dict[str, str], config: str) -> None:
    env = {**env, "TEMPORAL_CONFIG_FILE": config}
    s = resolve_settings(environ=env)
    assert (s.target_host, s.namespace) == ("file-host:7233", "file-ns")

    env["TEMPORAL_ADDRESS"] = "env-host:7233"
    s = resolve_settings(environ=env)
    assert (s.target_host, s.namespace) == ("env-host:7233", "file-ns")

    env["TEMPORAL_NAMESPACE"] = "env-ns"
    s = resolve_settings(environ=env)
    assert (s.target_host, s.namespace) == ("env-host:7233", "env-ns")

    s = resolve_settings("arg-host:1", namespace="arg-ns", environ=env)
    assert (s.target_host, s.namespace) == ("arg-host:1", "arg-ns")


def test_profile_and_config_file_selection(
    env: dict[str, str], config: str, tmp_path: Path
) -> None:
    s = resolve_settings(config_file=config, environ=env)
    assert s.target_host == "file-host:7233", "config_file argument over TEMPORAL_CONFIG_FILE"

    s = resolve_settings(environ={"TEMPORAL_CONFIG_FILE": config, "TEMPORAL_PROFILE": "prod"})
    assert (s.target_host, s.namespace) == ("prod.example.com:7233", "prod-ns")
    assert s.api_key == "file-api-key-SECRET"
    assert s.tls is True, "an API key implies TLS"
    assert dict(s.rpc_metadata) == {"x-tenant": "acme"}

    s = resolve_settings(
        profile="default", environ={"TEMPORAL_CONFIG_FILE": config, "TEMPORAL_PROFILE": "prod"}
    )
    assert s.target_host == "file-host:7233", "profile argument over TEMPORAL_PROFILE"

    other = tmp_path / "other.toml"
    other.write_text('[profile.default]\naddress = "other:1"\n')
    s = resolve_settings(config_file=str(other), environ={"TEMPORAL_CONFIG_FILE": config})
    assert s.target_host == "other:1"


def test_environment_defaults_to_os_environ(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for k in list(os.environ):
        if k.startswith(("TEMPORAL_", "SANDBOX_")):
            monkeypatch.delenv(k)
    monkeypatch.setenv("TEMPORAL_CONFIG_FILE", str(tmp_path / "absent.toml"))
    monkeypatch.setenv("TEMPORAL_ADDRESS", "from-os:7233")
    monkeypatch.setenv("SANDBOX_TASK_QUEUE", "os-queue")
    s = resolve_settings()
    assert (s.target_host, s.task_queue) == ("from-os:7233", "os-queue")


def test_task_queue(env: dict[str, str]) -> None:
    assert resolve_settings(environ=env).task_queue == "sandbox"
    assert resolve_settings(environ={**env, "SANDBOX_TASK_QUEUE": ""}).task_queue == "sandbox"
    env = {**env, "SANDBOX_TASK_QUEUE": "team-a"}
    assert resolve_settings(environ=env).task_queue == "team-a"
    assert resolve_settings(task_queue="explicit", environ=env).task_queue == "explicit"


def test_grpc_metadata_from_environment(env: dict[str, str]) -> None:
    s = resolve_settings(environ={**env, "TEMPORAL_GRPC_META_X_TEAM": "blue"})
    assert dict(s.rpc_metadata) == {"x-team": "blue"}


# --- API key and TLS --------------------------------------------------------------------------


def test_api_key_implies_tls(env: dict[str, str], caplog: pytest.LogCaptureFixture) -> None:
    s = resolve_settings(environ={**env, "TEMPORAL_API_KEY": "env-key"})
    assert (s.api_key, s.tls) == ("env-key", True)
    s = resolve_settings(api_key="arg-key", environ={**env, "TEMPORAL_API_KEY": "env-key"})
    assert (s.api_key, s.tls) == ("arg-key", True)
    assert resolve_settings(environ={**env, "TEMPORAL_API_KEY": ""}).api_key is None

    with caplog.at_level(logging.WARNING, logger="sandboxcore.connection"):
        s = resolve_settings(api_key="k", environ={**env, "TEMPORAL_TLS": "false"})
    assert s.tls is False
    assert "without TLS (TEMPORAL_TLS disables it)" in caplog.text
    assert resolve_settings(api_key="k", tls=False, environ=env).tls is False


def test_tls_switches(env: dict[str, str]) -> None:
    assert resolve_settings(environ={**env, "TEMPORAL_TLS": "true"}).tls is True
    assert resolve_settings(environ={**env, "TEMPORAL_TLS": "1"}).tls is True
    assert resolve_settings(environ={**env, "TEMPORAL_TLS": "FALSE"}).tls is False
    assert resolve_settings(environ={**env, "TEMPORAL_TLS": ""}).tls is False
    assert resolve_settings(tls=True, environ={**env, "TEMPORAL_TLS": "false"}).tls is True
    assert resolve_settings(tls=False, environ={**env, "TEMPORAL_TLS": "true"}).tls is False
    s = resolve_settings(environ={**env, "TEMPORAL_TLS_SERVER_NAME": "frontend.internal"})
    assert s.tls == temporalio.service.TLSConfig(domain="frontend.internal")
    given = temporalio.service.TLSConfig(domain="given")
    s = resolve_settings(tls=given, environ={**env, "TEMPORAL_TLS_SERVER_NAME": "ignored"})
    assert s.tls is given
    with pytest.raises(ConnectionSettingsError) as info:
        resolve_settings(environ={**env, "TEMPORAL_TLS": "yes"})
    assert info.value.source == "TEMPORAL_TLS"


def test_tls_files_from_environment(env: dict[str, str], pki: dict[str, Any]) -> None:
    b = pki["bytes"]
    s = resolve_settings(
        environ={
            **env,
            "TEMPORAL_TLS_SERVER_CA_CERT_PATH": pki["ca"],
            "TEMPORAL_TLS_CLIENT_CERT_PATH": pki["cert"],
            "TEMPORAL_TLS_CLIENT_KEY_PATH": pki["key"],
            "TEMPORAL_TLS_SERVER_NAME": "frontend.internal",
        }
    )
    assert s.tls == temporalio.service.TLSConfig(
        server_root_ca_cert=b["ca"],
        domain="frontend.internal",
        client_cert=b["cert"],
        client_private_key=b["key"],
    )
    assert "PRIVATE KEY" not in repr(s)
    s = resolve_settings(
        environ={
            **env,
            "TEMPORAL_TLS_SERVER_CA_CERT_DATA": b["ca"].decode(),
            "TEMPORAL_TLS_CLIENT_CERT_DATA": b["cert"].decode(),
            "TEMPORAL_TLS_CLIENT_KEY_DATA": b["key"].decode(),
        }
    )
    assert isinstance(s.tls, temporalio.service.TLSConfig)
    assert (s.tls.server_root_ca_cert, s.tls.client_cert, s.tls.client_private_key) == (
        b["ca"],
        b["cert"],
        b["key"],
    )
    # TLS turned off: the files are not read.
    s = resolve_settings(
        environ={**env, "TEMPORAL_TLS": "false", "TEMPORAL_TLS_CLIENT_CERT_PATH": "/nonexistent"}
    )
    assert s.tls is False


def test_tls_files_from_profile(tmp_path: Path, pki: dict[str, Any]) -> None:
    path = tmp_path / "tls.toml"
    path.write_text(
        "[profile.default]\n"
        'address = "secure:7233"\n'
        "[profile.default.tls]\n"
        f'server_ca_cert_path = "{pki["ca"]}"\n'
        f'client_cert_path = "{pki["cert"]}"\n'
        f'client_key_path = "{pki["key"]}"\n'
    )
    s = resolve_settings(environ={"TEMPORAL_CONFIG_FILE": str(path)})
    assert isinstance(s.tls, temporalio.service.TLSConfig)
    assert s.tls.client_private_key == pki["bytes"]["key"]
    # The environment wins over the profile's file.
    s = resolve_settings(
        environ={"TEMPORAL_CONFIG_FILE": str(path), "TEMPORAL_TLS_SERVER_CA_CERT_PATH": pki["cert"]}
    )
    assert isinstance(s.tls, temporalio.service.TLSConfig)
    assert s.tls.server_root_ca_cert == pki["bytes"]["cert"]


def test_tls_errors_name_the_setting(
    env: dict[str, str], pki: dict[str, Any], tmp_path: Path
) -> None:
    missing = str(tmp_path / "missing.pem")
    cases: list[tuple[dict[str, str], str, str]] = [
        (
            {"TEMPORAL_TLS_SERVER_CA_CERT_PATH": missing},
            "TEMPORAL_TLS_SERVER_CA_CERT_PATH",
            f"cannot read {missing}: No such file or directory",
        ),
        (
            {"TEMPORAL_TLS_CLIENT_CERT_PATH": pki["cert"], "TEMPORAL_TLS_CLIENT_KEY_PATH": missing},
            "TEMPORAL_TLS_CLIENT_KEY_PATH",
            "cannot read",
        ),
        (
            {"TEMPORAL_TLS_CLIENT_CERT_PATH": pki["cert"]},
            f"TEMPORAL_TLS_CLIENT_CERT_PATH ({pki['cert']})",
            "a client certificate needs its key",
        ),
        (
            {"TEMPORAL_TLS_CLIENT_KEY_DATA": pki["bytes"]["key"].decode()},
            "TEMPORAL_TLS_CLIENT_KEY_DATA",
            "a client key needs its certificate",
        ),
        (
            {"TEMPORAL_TLS_SERVER_CA_CERT_PATH": pki["garbage"]},
            f"TEMPORAL_TLS_SERVER_CA_CERT_PATH ({pki['garbage']})",
            "holds no PEM certificate",
        ),
        (
            {
                "TEMPORAL_TLS_CLIENT_CERT_PATH": pki["cert"],
                "TEMPORAL_TLS_CLIENT_KEY_PATH": pki["other_key"],
            },
            f"TEMPORAL_TLS_CLIENT_CERT_PATH ({pki['cert']}) / "
            f"TEMPORAL_TLS_CLIENT_KEY_PATH ({pki['other_key']})",
            "the private key does not match the certificate",
        ),
        (
            {
                "TEMPORAL_TLS_CLIENT_CERT_PATH": pki["cert"],
                "TEMPORAL_TLS_CLIENT_CERT_DATA": pki["bytes"]["cert"].decode(),
            },
            "TEMPORAL_TLS_CLIENT_CERT_PATH",
            "Cannot specify both",
        ),
    ]
    for extra, source, reason in cases:
        with pytest.raises(ConnectionSettingsError) as info:
            resolve_settings(environ={**env, **extra})
        assert info.value.source == source, extra
        assert reason in info.value.reason, (extra, str(info.value))
        assert str(info.value).startswith(source + ": ")
        assert "BEGIN" not in str(info.value), "no key material in errors"

    path = tmp_path / "broken-tls.toml"
    path.write_text(f'[profile.default.tls]\nserver_ca_cert_path = "{missing}"\n')
    with pytest.raises(ConnectionSettingsError) as info:
        resolve_settings(environ={"TEMPORAL_CONFIG_FILE": str(path)})
    assert info.value.source == f'tls.server_ca_cert_path in profile "default" of {path}'


def test_disabling_host_verification_is_refused(env: dict[str, str], tmp_path: Path) -> None:
    with pytest.raises(ConnectionSettingsError) as info:
        resolve_settings(environ={**env, "TEMPORAL_TLS_DISABLE_HOST_VERIFICATION": "true"})
    assert info.value.source == "TEMPORAL_TLS_DISABLE_HOST_VERIFICATION"
    assert "cannot skip verifying the server's certificate" in info.value.reason
    with pytest.raises(ConnectionSettingsError, match="TEMPORAL_TLS_DISABLE_HOST_VERIFICATION"):
        resolve_settings(
            environ={**env, "TEMPORAL_API_KEY": "k", "TEMPORAL_TLS_DISABLE_HOST_VERIFICATION": "1"}
        )
    path = tmp_path / "noverify.toml"
    path.write_text("[profile.default.tls]\ndisable_host_verification = true\n")
    with pytest.raises(ConnectionSettingsError) as info:
        resolve_settings(environ={"TEMPORAL_CONFIG_FILE": str(path)})
    assert info.value.source == f'tls.disable_host_verification in profile "default" of {path}'
    # Off, or TLS off: nothing to refuse.
    s = resolve_settings(environ={**env, "TEMPORAL_TLS_DISABLE_HOST_VERIFICATION": "false"})
    assert s.tls is True
    s = resolve_settings(
        environ={
            **env,
            "TEMPORAL_TLS": "false",
            "TEMPORAL_TLS_DISABLE_HOST_VERIFICATION": "true",
        }
    )
    assert s.tls is False
    with pytest.raises(ConnectionSettingsError, match="is not one of true, false, 1, 0"):
        resolve_settings(environ={**env, "TEMPORAL_TLS_DISABLE_HOST_VERIFICATION": "please"})


# --- profile errors ---------------------------------------------------------------------------


def test_unknown_profile(config: str, tmp_path: Path) -> None:
    with pytest.raises(ConnectionSettingsError) as info:
        resolve_settings(environ={"TEMPORAL_CONFIG_FILE": config, "TEMPORAL_PROFILE": "nope"})
    assert info.value.source == 'TEMPORAL_PROFILE "nope"'
    assert info.value.reason == f"no such profile in {config}"
    with pytest.raises(ConnectionSettingsError) as info:
        resolve_settings(profile="staging", config_file=config, environ={})
    assert info.value.source == 'profile argument "staging"'
    absent = str(tmp_path / "absent.toml")
    with pytest.raises(ConnectionSettingsError) as info:
        resolve_settings(profile="prod", environ={"TEMPORAL_CONFIG_FILE": absent})
    assert info.value.reason == f"no such profile in {absent}, which does not exist"


def test_malformed_config_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text('[profile.default\napi_key = "tok-SECRET"\n')
    with pytest.raises(ConnectionSettingsError) as info:
        resolve_settings(environ={"TEMPORAL_CONFIG_FILE": str(path)})
    assert info.value.source == f"TEMPORAL_CONFIG_FILE ({path})"
    assert "TOML parse error" in info.value.reason
    assert "SECRET" not in str(info.value)


# --- payload codec ----------------------------------------------------------------------------


def _write_key(tmp_path: Path, name: str) -> tuple[str, bytes]:
    secret = os.urandom(KEY_SIZE)
    p = tmp_path / name
    p.write_bytes(secret)
    return str(p), secret


def test_codec_from_sandbox_payload_keys(env: dict[str, str], tmp_path: Path) -> None:
    a, _ = _write_key(tmp_path, "a.key")
    b, _ = _write_key(tmp_path, "b.key")
    s = resolve_settings(environ={**env, "SANDBOX_PAYLOAD_KEYS": f"new={a},old={b}"})
    assert s.codec is not None
    assert s.codec.key_ids == ("new", "old")
    assert resolve_settings(environ={**env, "SANDBOX_PAYLOAD_KEYS": " "}).codec is None


def test_codec_key_argument(env: dict[str, str], tmp_path: Path) -> None:
    a, _ = _write_key(tmp_path, "a.key")
    env = {**env, "SANDBOX_PAYLOAD_KEYS": f"from-env={a}"}
    k1, k2 = Key("k1", os.urandom(KEY_SIZE)), Key("k2", os.urandom(KEY_SIZE))
    codec = EncryptionCodec([k2])
    assert resolve_settings(codec_key=codec, environ=env).codec is codec
    single = resolve_settings(codec_key=k1, environ=env).codec
    assert single is not None and single.key_ids == ("k1",)
    several = resolve_settings(codec_key=[k2, k1], environ=env).codec
    assert several is not None and several.key_ids == ("k2", "k1")
    with pytest.raises(ConnectionSettingsError) as info:
        resolve_settings(codec_key=[k1, k1], environ=env)
    assert info.value.source == "codec_key argument"
    with pytest.raises(ConnectionSettingsError, match="no key"):
        resolve_settings(codec_key=[], environ=env)


def test_missing_key_file(env: dict[str, str], tmp_path: Path) -> None:
    missing = str(tmp_path / "nope.key")
    with pytest.raises(ConnectionSettingsError) as info:
        resolve_settings(environ={**env, "SANDBOX_PAYLOAD_KEYS": f"k1={missing}"})
    assert info.value.source == "SANDBOX_PAYLOAD_KEYS"
    assert str(info.value) == (
        f'SANDBOX_PAYLOAD_KEYS: entry "k1={missing}": key file: open {missing}: '
        "no such file or directory"
    )
    assert isinstance(info.value, ValueError)


# --- repr and connect -------------------------------------------------------------------------


def test_repr_hides_secrets(env: dict[str, str]) -> None:
    key = Key("k1", os.urandom(KEY_SIZE))
    s = resolve_settings(
        api_key="api-SECRET", codec_key=key, environ={**env, "TEMPORAL_GRPC_META_AUTH": "h-SECRET"}
    )
    text = repr(s)
    assert "SECRET" not in text
    assert key.secret.hex() not in text
    assert "api_key=<set>" in text
    assert "k1" in text


def test_address_without_port(env: dict[str, str]) -> None:
    """A bare host would be dialled on port 443 (gRPC's default): refused, naming its source."""
    for bad in ("localhost", "127.0.0.1", "host:", "[::1]", ":7233"):
        with pytest.raises(ConnectionSettingsError) as e:
            resolve_settings(environ={**env, "TEMPORAL_ADDRESS": bad})
        assert e.value.source == "TEMPORAL_ADDRESS", bad
        assert "want host:port, such as 127.0.0.1:7233" in str(e.value)
    with pytest.raises(ConnectionSettingsError) as e:
        resolve_settings("localhost", environ=env)
    assert e.value.source == "address argument"
    for good in ("localhost:7233", "[::1]:7233", "ns.acct.tmprl.cloud:7233", "dns:///fe:7233"):
        assert resolve_settings(good, environ=env).target_host == good


async def test_unreachable_names_the_address(env: dict[str, str]) -> None:
    """Nothing listens: the error names the address and TEMPORAL_ADDRESS, and stays a
    RuntimeError (what temporalio raised, kept as its cause)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(TemporalUnreachable) as e:
        await connect_temporal(resolve_settings(f"127.0.0.1:{port}", environ=env))
    assert isinstance(e.value, RuntimeError)
    assert f"cannot reach Temporal at 127.0.0.1:{port}: " in str(e.value)
    assert "set TEMPORAL_ADDRESS" in str(e.value)
    assert isinstance(e.value.__cause__, RuntimeError)


async def test_connect_temporal_uses_the_codec(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict[str, Any] = {}

    async def fake_connect(target_host: str, **kwargs: Any) -> str:
        seen.update(kwargs, target_host=target_host)
        return "client"

    monkeypatch.setattr(temporalio.client.Client, "connect", fake_connect)
    codec = EncryptionCodec([Key("k1", os.urandom(KEY_SIZE))])
    s = resolve_settings(codec_key=codec, api_key="key", environ=env)
    assert await connect_temporal(s) == "client"  # type: ignore[comparison-overlap]
    assert seen["target_host"] == DEFAULT_ADDRESS
    assert (seen["namespace"], seen["api_key"], seen["tls"]) == ("default", "key", True)
    dc: temporalio.converter.DataConverter = seen["data_converter"]
    assert dc.payload_codec is codec
    assert dc.failure_converter_class is SealingFailureConverter
    assert seen["grpc_compression"] is temporalio.service.GrpcCompression.NONE, "loopback"

    seen.clear()
    await connect_temporal(resolve_settings("temporal.example.com:7233", environ=env))
    plain = seen["data_converter"]
    assert plain.payload_codec is None
    assert plain.failure_converter_class is KeylessFailureConverter
    assert seen["grpc_compression"] is temporalio.service.GrpcCompression.GZIP
    assert connection._is_loopback("[::1]:7233")
    assert connection._is_loopback("localhost:7233")
    assert not connection._is_loopback("10.0.0.1:7233")
