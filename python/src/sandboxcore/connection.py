"""Temporal connection settings resolved as the Go CLI (``sandboxctl``, ``sandboxclient.Dial``)
resolves them (README.md "Configuration").

Precedence, highest first: the arguments of :func:`resolve_settings`; the ``TEMPORAL_*``
environment variables; the Temporal CLI's TOML profile (``TEMPORAL_CONFIG_FILE``, default
``~/.config/temporalio/temporal.toml``, a missing file being no error; ``TEMPORAL_PROFILE``,
default ``default``); the defaults (address ``127.0.0.1:7233``, namespace ``default``, task queue
``SANDBOX_TASK_QUEUE`` else ``sandbox``). The TOML file and the variables are read by the SDK's
:mod:`temporalio.envconfig`, as Go's ``envconfig`` reads them for the Go CLI; this module adds
what the Go CLI adds: errors naming the variable, argument or profile key at fault, TLS
certificate files checked up front, and the payload codec of ``SANDBOX_PAYLOAD_KEYS``
(docs/SECURITY.md "Payload encryption", "Connecting to Temporal").
"""

from __future__ import annotations

import atexit
import importlib
import ipaddress
import logging
import os
import re
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import temporalio.client
import temporalio.service
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from temporalio.envconfig import ClientConfigProfile, ClientConfigTLS, DataSource

from . import codec as _codec
from .codec import EncryptionCodec, Key, PayloadKeyError

__all__ = [
    "DEFAULT_ADDRESS",
    "DEFAULT_NAMESPACE",
    "DEFAULT_TASK_QUEUE",
    "ConnectSettings",
    "ConnectionSettingsError",
    "TemporalUnreachable",
    "connect_temporal",
    "resolve_settings",
]

DEFAULT_ADDRESS = "127.0.0.1:7233"
"""The frontend used when nothing names one: the embedded server of ``make run``."""
DEFAULT_NAMESPACE = "default"
"""The namespace used when nothing names one."""
DEFAULT_TASK_QUEUE = "sandbox"
"""The task queue sessions start on when ``SANDBOX_TASK_QUEUE`` is unset (Go's
``sandboxapi.DefaultTaskQueue``)."""

_ENV_TASK_QUEUE = "SANDBOX_TASK_QUEUE"
_BOOL_VARIABLES = ("TEMPORAL_TLS", "TEMPORAL_TLS_DISABLE_HOST_VERIFICATION")
_BOOL_VALUES = ("1", "0", "true", "false")

_log = logging.getLogger(__name__)


class ConnectionSettingsError(ValueError):
    """A connection setting that cannot be used, rendered ``SOURCE: reason`` like Go's
    ``temporalconn.LoadError``.

    ``source`` names where the value came from: an argument of :func:`resolve_settings`
    (``"tls argument"``), an environment variable (``"TEMPORAL_TLS_CLIENT_CERT_PATH"``,
    ``"SANDBOX_PAYLOAD_KEYS"``) or a key of a TOML profile (``'tls.client_cert_path in profile
    "prod" of /home/me/.config/temporalio/temporal.toml'``). It never holds a secret.
    """

    def __init__(self, source: str, reason: str) -> None:
        """Make the error from where the setting came from and what is wrong with it."""
        super().__init__(f"{source}: {reason}")
        self.source = source
        self.reason = reason


class TemporalUnreachable(RuntimeError):
    """The Temporal frontend could not be reached or refused the connection. The message
    names the address and says where to set another (``TEMPORAL_ADDRESS``), as ``sandboxctl``
    does; ``__cause__`` is temporalio's own ``RuntimeError``. A ``RuntimeError``, so code that
    caught temporalio's error keeps catching it."""

    def __init__(self, target_host: str, cause: BaseException) -> None:
        """Make the error from the address dialled and temporalio's error."""
        super().__init__(
            f"cannot reach Temporal at {target_host}: {cause} (is the worker running? see "
            "`make run`; if it listens elsewhere, set TEMPORAL_ADDRESS, or pass the address, "
            "to the address it printed)"
        )
        self.target_host = target_host


@dataclass(frozen=True, repr=False)
class ConnectSettings:
    """Everything :func:`connect_temporal` needs, as :func:`resolve_settings` resolved it.

    ``target_host`` is the frontend's ``host:port``; ``api_key`` is sent as a bearer token
    (``None``: none); ``tls`` is ``False`` (plaintext), ``True`` (TLS with the system's CAs) or a
    :class:`temporalio.service.TLSConfig` (a CA, a client certificate, a server name);
    ``task_queue`` is where sessions start (the workers' ``SANDBOX_TASK_QUEUE``); ``codec``
    encrypts payloads (``None``: plaintext); ``rpc_metadata`` are the gRPC headers of
    ``TEMPORAL_GRPC_META_*`` and the profile's ``grpc_meta``. ``repr`` never shows the API key,
    the client key or header values.
    """

    target_host: str
    namespace: str
    api_key: str | None
    tls: temporalio.service.TLSConfig | bool
    task_queue: str
    codec: EncryptionCodec | None
    rpc_metadata: Mapping[str, str] = field(default_factory=dict)

    def __repr__(self) -> str:
        """The settings with secrets left out."""
        if isinstance(self.tls, temporalio.service.TLSConfig):
            t = self.tls
            tls = (
                f"TLSConfig(domain={t.domain!r}, "
                f"server_root_ca_cert={'<set>' if t.server_root_ca_cert else None}, "
                f"client_cert={'<set>' if t.client_cert else None}, "
                f"client_private_key={'<set>' if t.client_private_key else None})"
            )
        else:
            tls = repr(self.tls)
        return (
            f"ConnectSettings(target_host={self.target_host!r}, namespace={self.namespace!r}, "
            f"api_key={'<set>' if self.api_key else None}, tls={tls}, "
            f"task_queue={self.task_queue!r}, codec={self.codec!r}, "
            f"rpc_metadata_keys={sorted(self.rpc_metadata)!r})"
        )


@dataclass(frozen=True)
class _Origin:
    """Where the settings came from, to name them in errors (Go's ``Settings.source``)."""

    env: Mapping[str, str]
    profile: str
    profile_source: str
    file: str
    file_source: str

    def source(self, env_var: str, toml_key: str) -> str:
        if env_var in self.env:
            return env_var
        return f'{toml_key} in profile "{self.profile}" of {self.file}'


def resolve_settings(
    address: str | None = None,
    *,
    namespace: str | None = None,
    api_key: str | None = None,
    tls: temporalio.service.TLSConfig | bool | None = None,
    codec_key: EncryptionCodec | Key | Sequence[Key] | None = None,
    task_queue: str | None = None,
    profile: str | None = None,
    config_file: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> ConnectSettings:
    """Resolve the connection settings as the Go CLI does (README.md "Configuration").

    Each value comes from its argument when given (not ``None``, not empty), else the
    environment (``environ``, default ``os.environ``): ``TEMPORAL_ADDRESS``,
    ``TEMPORAL_NAMESPACE``, ``TEMPORAL_API_KEY``, ``TEMPORAL_TLS``,
    ``TEMPORAL_TLS_SERVER_CA_CERT_PATH``/``_DATA``, ``TEMPORAL_TLS_CLIENT_CERT_PATH``/``_DATA``,
    ``TEMPORAL_TLS_CLIENT_KEY_PATH``/``_DATA``, ``TEMPORAL_TLS_SERVER_NAME``,
    ``TEMPORAL_TLS_DISABLE_HOST_VERIFICATION``, ``TEMPORAL_GRPC_META_*``; else the TOML profile
    (``profile`` else ``TEMPORAL_PROFILE`` else ``default``, from ``config_file`` else
    ``TEMPORAL_CONFIG_FILE`` else the Temporal CLI's file; a missing file is no error); else
    the defaults (:data:`DEFAULT_ADDRESS`, namespace ``default``, no TLS).

    TLS is on when ``tls`` says so, when ``TEMPORAL_TLS`` or the profile turns it on, when any
    ``TEMPORAL_TLS_*`` setting or ``[tls]`` section is present (unless disabled), or when an API
    key is set (implied, as in every Temporal SDK); ``tls=False`` or ``TEMPORAL_TLS=false``
    turns it off (an API key is then sent in clear: a warning is logged). A ``TLSConfig``
    argument replaces every TLS setting of the environment and the profile. Certificate, key
    and CA files are read now, and must hold PEM that parses (a certificate and its key
    together, matching). ``codec_key``: an :class:`EncryptionCodec`, a :class:`Key` or a
    sequence of keys (the first encrypts), or ``None`` to read ``SANDBOX_PAYLOAD_KEYS``
    (unset: no codec). ``task_queue`` else ``SANDBOX_TASK_QUEUE`` else :data:`DEFAULT_TASK_QUEUE`.

    Raises:
        ConnectionSettingsError: naming the argument, variable or profile key at fault: an
            unknown profile, a TOML file that does not parse, ``TEMPORAL_TLS`` or
            ``TEMPORAL_TLS_DISABLE_HOST_VERIFICATION`` not one of true/false/1/0, both a path
            and data for one file, a certificate without its key (or the reverse), a TLS file
            that cannot be read or does not hold PEM, host verification disabled (the Python
            SDK cannot skip verifying the server's certificate), a bad ``SANDBOX_PAYLOAD_KEYS``
            or key file, a bad ``codec_key``.
    """
    env: Mapping[str, str] = os.environ if environ is None else environ
    temporal_env = {k: v for k, v in env.items() if k.startswith("TEMPORAL_")}
    for name in _BOOL_VARIABLES:
        value = temporal_env.get(name)
        if value == "":
            # As Go's envconfig: an empty boolean is no setting at all.
            del temporal_env[name]
        elif value is not None and value.lower() not in _BOOL_VALUES:
            raise ConnectionSettingsError(name, f"{value!r} is not one of true, false, 1, 0")

    origin = _origin(profile, config_file, temporal_env)
    config_source: DataSource | None = Path(origin.file) if origin.file_source else None
    profile_name = profile or temporal_env.get("TEMPORAL_PROFILE") or None
    try:
        loaded = ClientConfigProfile.load(
            profile_name, config_source=config_source, override_env_vars=temporal_env
        )
    except RuntimeError as e:
        raise _load_error(e, origin) from None

    target_host = address or loaded.address or DEFAULT_ADDRESS
    if not _has_port(target_host):
        # gRPC would dial a bare host on port 443, far from any worker's frontend.
        raise ConnectionSettingsError(
            "address argument" if address else origin.source("TEMPORAL_ADDRESS", "address"),
            f"address {target_host!r}: want host:port, such as {DEFAULT_ADDRESS}",
        )
    resolved_namespace = namespace or loaded.namespace or DEFAULT_NAMESPACE
    resolved_api_key = api_key or loaded.api_key or None

    resolved_tls: temporalio.service.TLSConfig | bool
    if isinstance(tls, temporalio.service.TLSConfig):
        resolved_tls = tls
    elif tls is False:
        resolved_tls = False
    else:
        base = loaded.tls
        if tls is True:
            enabled = True
        elif base is not None:
            enabled = base.disabled is not True
        else:
            enabled = resolved_api_key is not None
        if enabled:
            if _host_verification_disabled(profile_name, config_source, temporal_env):
                raise ConnectionSettingsError(
                    origin.source(
                        "TEMPORAL_TLS_DISABLE_HOST_VERIFICATION", "tls.disable_host_verification"
                    ),
                    "the Python SDK (temporalio) cannot skip verifying the server's "
                    "certificate: unset it, and set TEMPORAL_TLS_SERVER_CA_CERT_PATH to the CA "
                    "that signed the server's certificate (TEMPORAL_TLS_SERVER_NAME for the name "
                    "it holds)",
                )
            resolved_tls = _tls_config(base, origin)
        else:
            resolved_tls = False
    if resolved_api_key is not None and resolved_tls is False:
        _log.warning(
            "a Temporal API key is sent without TLS (%s disables it): anyone on the network "
            "path can read it",
            "the tls argument" if tls is False else origin.source("TEMPORAL_TLS", "tls.disabled"),
        )

    return ConnectSettings(
        target_host=target_host,
        namespace=resolved_namespace,
        api_key=resolved_api_key,
        tls=resolved_tls,
        task_queue=task_queue or env.get(_ENV_TASK_QUEUE) or DEFAULT_TASK_QUEUE,
        codec=_resolve_codec(codec_key, env),
        rpc_metadata=dict(loaded.grpc_meta),
    )


async def connect_temporal(settings: ConnectSettings) -> temporalio.client.Client:
    """Connect to Temporal with ``settings``: its address, namespace, API key, TLS and gRPC
    headers, and the data converter of :func:`sandboxcore.codec.data_converter` for its codec
    (payloads and failure messages encrypted when it has one). As the Go CLI, a loopback
    address (the embedded dev server) is dialled without gzip compression.

    Raises:
        TemporalUnreachable: (a ``RuntimeError``) when the server cannot be reached or refuses
            the connection (TLS, credentials), naming the address.
    """
    _drain_at_exit()
    try:
        return await _connect(settings)
    except RuntimeError as e:
        raise TemporalUnreachable(settings.target_host, e) from e


async def _connect(settings: ConnectSettings) -> temporalio.client.Client:
    return await temporalio.client.Client.connect(
        settings.target_host,
        namespace=settings.namespace,
        api_key=settings.api_key,
        tls=settings.tls,
        rpc_metadata=dict(settings.rpc_metadata),
        data_converter=_codec.data_converter(settings.codec),
        grpc_compression=(
            temporalio.service.GrpcCompression.NONE
            if _is_loopback(settings.target_host)
            else temporalio.service.GrpcCompression.GZIP
        ),
    )


#: How long the interpreter waits at exit, once a client was connected, in seconds.
EXIT_DRAIN_S = 0.3
_drain_registered = False


def _drain_at_exit() -> None:
    """Let temporalio's Rust threads finish their callbacks before the interpreter finalizes.

    A short-lived process that exits right after its last Temporal call can otherwise abort
    with "PyGILState_Release: thread state ... must be current when releasing" (a callback of
    the SDK's bridge runs while CPython is finalizing:
    https://github.com/temporalio/sdk-python/issues/300, open). Seen here in 3 of 12 runs of
    examples/quickstart.py; a pause at exit (atexit runs before finalization) lets those
    callbacks end first.
    """
    global _drain_registered
    if not _drain_registered:
        _drain_registered = True
        atexit.register(time.sleep, EXIT_DRAIN_S)


def _origin(profile: str | None, config_file: str | None, env: Mapping[str, str]) -> _Origin:
    if config_file:
        file, file_source = config_file, "config_file argument"
    elif env.get("TEMPORAL_CONFIG_FILE"):
        file, file_source = env["TEMPORAL_CONFIG_FILE"], "TEMPORAL_CONFIG_FILE"
    else:
        file, file_source = _default_config_file(), ""
    if profile:
        name, profile_source = profile, "profile argument"
    elif env.get("TEMPORAL_PROFILE"):
        name, profile_source = env["TEMPORAL_PROFILE"], "TEMPORAL_PROFILE"
    else:
        name, profile_source = "default", ""
    return _Origin(
        env=env, profile=name, profile_source=profile_source, file=file, file_source=file_source
    )


def _default_config_file() -> str:
    """The Temporal CLI's file, as Go's ``os.UserConfigDir`` locates it (for messages only:
    temporalio finds the file itself).
    """
    if sys.platform == "darwin":
        base = Path.home() / "Library" / "Application Support"
    elif sys.platform == "win32":
        base = Path(os.environ.get("APPDATA", Path.home()))
    else:
        xdg = os.environ.get("XDG_CONFIG_HOME")
        base = Path(xdg) if xdg else Path.home() / ".config"
    return str(base / "temporalio" / "temporal.toml")


_ENV_NAME = re.compile(r"TEMPORAL_[A-Z_]+")
_SNIPPET = re.compile(r"^\s*(\d+\s*)?\|")


def _has_port(target: str) -> bool:
    """Whether ``target`` is ``host:port`` (a ``scheme://`` target is gRPC's to judge)."""
    if "://" in target:
        return True
    host, sep, port = target.rpartition(":")
    if not sep or not port.isdigit() or not host:
        return False
    return not (host.startswith("[") ^ host.endswith("]"))


def _load_error(e: RuntimeError, origin: _Origin) -> ConnectionSettingsError:
    """Name the setting a temporalio.envconfig error is about."""
    # Drop the quoted lines of a TOML parse error: they may hold a secret (an api_key line).
    lines = [ln for ln in str(e).strip().splitlines() if not _SNIPPET.match(ln)]
    msg = ": ".join(ln.strip() for ln in lines if ln.strip())
    file_desc = origin.file if origin.file_source == "" else f"{origin.file_source} ({origin.file})"
    if "Profile '" in msg and "not found" in msg:
        exists = os.path.exists(origin.file)
        where = origin.file if exists else f"{origin.file}, which does not exist"
        return ConnectionSettingsError(
            f'{origin.profile_source or "profile"} "{origin.profile}"',
            f"no such profile in {where}",
        )
    if m := _ENV_NAME.search(msg):
        return ConnectionSettingsError(m.group(0), msg)
    if "client_" in msg or "server_ca" in msg:
        return ConnectionSettingsError(f'tls in profile "{origin.profile}" of {origin.file}', msg)
    return ConnectionSettingsError(file_desc or "Temporal client settings", msg)


def _host_verification_disabled(
    profile: str | None, config_source: DataSource | None, env: Mapping[str, str]
) -> bool:
    """Whether the profile or ``TEMPORAL_TLS_DISABLE_HOST_VERIFICATION`` turn host verification
    off. temporalio.envconfig reads the setting but drops it (its ``TLSConfig`` cannot skip
    verification), so it is read here from the same loader temporalio uses, falling back to the
    variable alone when that loader is not there.
    """
    try:
        bridge: Any = importlib.import_module("temporalio.bridge.temporal_sdk_bridge")
        raw = bridge.envconfig.load_client_connect_config(
            profile=profile,
            path=str(config_source) if config_source is not None else None,
            data=None,
            disable_file=False,
            disable_env=False,
            config_file_strict=False,
            env_vars=dict(env),
        )
    except (ImportError, AttributeError, TypeError):
        return env.get("TEMPORAL_TLS_DISABLE_HOST_VERIFICATION", "").lower() in ("1", "true")
    tls = raw.get("tls") if isinstance(raw, Mapping) else None
    return bool(isinstance(tls, Mapping) and tls.get("disable_host_verification"))


def _tls_config(
    base: ClientConfigTLS | None, origin: _Origin
) -> temporalio.service.TLSConfig | bool:
    """The TLS configuration of the profile with the environment applied, files read and
    checked; ``True`` when nothing beyond "use TLS" is configured.
    """
    if base is None:
        return True
    ca = _read(
        base.server_root_ca_cert,
        origin,
        ("TEMPORAL_TLS_SERVER_CA_CERT_PATH", "tls.server_ca_cert_path"),
        ("TEMPORAL_TLS_SERVER_CA_CERT_DATA", "tls.server_ca_cert_data"),
    )
    cert = _read(
        base.client_cert,
        origin,
        ("TEMPORAL_TLS_CLIENT_CERT_PATH", "tls.client_cert_path"),
        ("TEMPORAL_TLS_CLIENT_CERT_DATA", "tls.client_cert_data"),
    )
    key = _read(
        base.client_private_key,
        origin,
        ("TEMPORAL_TLS_CLIENT_KEY_PATH", "tls.client_key_path"),
        ("TEMPORAL_TLS_CLIENT_KEY_DATA", "tls.client_key_data"),
    )
    if ca is not None:
        try:
            x509.load_pem_x509_certificates(ca[0])
        except ValueError:
            raise ConnectionSettingsError(ca[1], "holds no PEM certificate") from None
    if cert is not None and key is None:
        raise ConnectionSettingsError(
            cert[1],
            "a client certificate needs its key: set TEMPORAL_TLS_CLIENT_KEY_PATH "
            "(or TEMPORAL_TLS_CLIENT_KEY_DATA)",
        )
    if key is not None and cert is None:
        raise ConnectionSettingsError(
            key[1],
            "a client key needs its certificate: set TEMPORAL_TLS_CLIENT_CERT_PATH "
            "(or TEMPORAL_TLS_CLIENT_CERT_DATA)",
        )
    if cert is not None and key is not None:
        _check_key_pair(cert, key)
    server_name = base.server_name or None
    if ca is None and cert is None and server_name is None:
        return True
    return temporalio.service.TLSConfig(
        server_root_ca_cert=ca[0] if ca else None,
        domain=server_name,
        client_cert=cert[0] if cert else None,
        client_private_key=key[0] if key else None,
    )


def _read(
    source: DataSource | None,
    origin: _Origin,
    path_names: tuple[str, str],
    data_names: tuple[str, str],
) -> tuple[bytes, str] | None:
    """The bytes of a TLS file setting and the name of where they came from; ``None`` when it
    is unset or empty (an empty value is no setting, as in Go).
    """
    if source is None:
        return None
    if isinstance(source, Path):
        # temporalio turns an empty path into Path(""), that is ".".
        if str(source) in ("", "."):
            return None
        name = origin.source(*path_names)
        try:
            data = source.read_bytes()
        except OSError as e:
            reason = e.strerror or type(e).__name__
            raise ConnectionSettingsError(name, f"cannot read {source}: {reason}") from None
        return data, f"{name} ({source})"
    data = source.encode() if isinstance(source, str) else bytes(source)
    if not data:
        return None
    return data, origin.source(*data_names)


def _check_key_pair(cert: tuple[bytes, str], key: tuple[bytes, str]) -> None:
    """Refuse a client certificate and key that are not PEM or do not belong together."""
    where = f"{cert[1]} / {key[1]}"
    try:
        leaf = x509.load_pem_x509_certificates(cert[0])[0]
    except ValueError:
        raise ConnectionSettingsError(cert[1], "holds no PEM certificate") from None
    try:
        private = serialization.load_pem_private_key(key[0], password=None)
    except (ValueError, TypeError) as e:
        reason = "an encrypted key" if isinstance(e, TypeError) else "no PEM private key"
        raise ConnectionSettingsError(key[1], f"holds {reason}") from None
    spki = serialization.PublicFormat.SubjectPublicKeyInfo
    der = serialization.Encoding.DER
    if leaf.public_key().public_bytes(der, spki) != private.public_key().public_bytes(der, spki):
        raise ConnectionSettingsError(where, "the private key does not match the certificate")


def _resolve_codec(
    codec_key: EncryptionCodec | Key | Sequence[Key] | None, env: Mapping[str, str]
) -> EncryptionCodec | None:
    if isinstance(codec_key, EncryptionCodec):
        return codec_key
    if codec_key is None:
        try:
            return _codec.codec_from_env(env)
        except PayloadKeyError as e:
            reason = str(e).removeprefix(_codec.ENV_KEYS + ": ")
            raise ConnectionSettingsError(_codec.ENV_KEYS, reason) from None
    keys = [codec_key] if isinstance(codec_key, Key) else list(codec_key)
    try:
        return EncryptionCodec(keys)
    except (PayloadKeyError, TypeError) as e:
        raise ConnectionSettingsError("codec_key argument", str(e)) from None


def _is_loopback(target_host: str) -> bool:
    """Whether ``host:port`` names this machine (localhost or a loopback IP)."""
    host = target_host.rsplit(":", 1)[0] if ":" in target_host else target_host
    host = host.strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
