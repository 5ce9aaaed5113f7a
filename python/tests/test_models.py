"""Tests of the generated models (sandboxcore.models) and their wire types (sandboxcore._wire).

The generator (scripts/generate_models.py) must reproduce the committed models.py exactly, every
``$defs`` entry of docs/schema/sandboxcore.schema.json must have its class, and the byte,
duration and date-time fields must read and write the wire encodings (docs/API.md "Schema").
"""

from __future__ import annotations

import base64
import importlib.util
import json
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path
from types import ModuleType
from typing import Any

import pydantic
import pytest

from sandboxcore import models

PYTHON_DIR = Path(__file__).resolve().parent.parent
REPO_ROOT = PYTHON_DIR.parent
SCHEMA_DIR = REPO_ROOT / "docs" / "schema"
GENERATOR = PYTHON_DIR / "scripts" / "generate_models.py"
MODELS_FILE = PYTHON_DIR / "src" / "sandboxcore" / "models.py"


def _load_json(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((SCHEMA_DIR / name).read_text(encoding="utf-8"))
    return data


SCHEMA = _load_json("sandboxcore.schema.json")
INDEX = _load_json("index.json")


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("generate_models", GENERATOR)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _model(ref: str) -> type[pydantic.BaseModel]:
    prefix = "#/$defs/"
    assert ref.startswith(prefix), ref
    cls = getattr(models, ref[len(prefix) :], None)
    assert isinstance(cls, type) and issubclass(cls, pydantic.BaseModel), ref
    return cls


def test_committed_models_match_a_fresh_generation(tmp_path: Path) -> None:
    fresh = tmp_path / "models.py"
    subprocess.run(
        [sys.executable, str(GENERATOR), "--output", str(fresh)], check=True, cwd=PYTHON_DIR
    )
    committed = MODELS_FILE.read_text(encoding="utf-8")
    assert fresh.read_text(encoding="utf-8") == committed, (
        "src/sandboxcore/models.py is stale: run `python scripts/generate_models.py` in python/"
    )


def test_check_mode_passes_and_reports_a_stale_file(tmp_path: Path) -> None:
    ok = subprocess.run(
        [sys.executable, str(GENERATOR), "--check"],
        capture_output=True,
        text=True,
        cwd=PYTHON_DIR,
    )
    assert ok.returncode == 0, ok.stdout + ok.stderr
    stale = tmp_path / "models.py"
    stale.write_text(MODELS_FILE.read_text(encoding="utf-8").replace("class Handle(", "class H("))
    bad = subprocess.run(
        [sys.executable, str(GENERATOR), "--check", "--output", str(stale)],
        capture_output=True,
        text=True,
        cwd=PYTHON_DIR,
    )
    assert bad.returncode == 1
    assert "-class H(BaseModel):" in bad.stdout
    assert "+class Handle(BaseModel):" in bad.stdout
    assert stale.read_text(encoding="utf-8").count("class H(") == 1, "--check must not write"


def test_generation_is_deterministic() -> None:
    generator = _generator()
    assert generator.render() == generator.render()


def test_module_docstring_says_generated() -> None:
    doc = models.__doc__ or ""
    assert "GENERATED from docs/schema/sandboxcore.schema.json" in doc
    assert "scripts/generate_models.py" in doc
    assert "DO NOT EDIT BY HAND" in doc
    assert SCHEMA["$id"] in doc


def test_every_definition_has_a_class() -> None:
    names = sorted(SCHEMA["$defs"])
    assert len(names) > 50
    for name in names:
        cls = _model(f"#/$defs/{name}")
        assert cls.__name__ == name
        assert cls.__doc__, name
        assert cls.model_config.get("extra") == "ignore", name
        assert set(cls.model_fields) == set(SCHEMA["$defs"][name].get("properties", {})), name
        cls.model_json_schema()  # every model builds completely


def test_every_index_entry_names_existing_classes() -> None:
    assert "exec" in INDEX["updates"] and "acquire" in INDEX["updates"]
    for section in ("updates", "messages"):
        for name, entry in INDEX[section].items():
            for role in ("argument", "result"):
                if role in entry:
                    assert _model(entry[role]), f"{section}/{name}/{role}"
    assert _model(INDEX["errors"]) is models.ErrorDetails
    assert _model(INDEX["updates"]["exec"]["argument"]) is models.ExecRequest
    assert _model(INDEX["updates"]["exec"]["result"]) is models.ExecResult


def test_generator_rewrites_every_byte_and_duration_field() -> None:
    text = json.dumps(_generator().prepare_schema(SCHEMA))
    assert "contentEncoding" not in text and "x-duration" not in text
    assert "SandboxcoreWireContract" not in MODELS_FILE.read_text(encoding="utf-8")


HANDLE_JSON = {
    "workspace_id": "ws-0123456789abcdef01234567",
    "workflow_id": "sandbox-session/0123456789abcdef01234567",
    "local_path": "/data/worktrees/ws-0123456789abcdef01234567",
    "branch": "sandbox/alice/c42",
    "base_ref": "main",
    "base_commit": "3f2a9c0d1e2b3c4d5e6f708192a3b4c5d6e7f809",
    "mode": "edit",
    "capabilities": {"writable": True, "isolated": True, "persistent": True},
    "repo": {
        "host": "github.com",
        "owner": "acme",
        "name": "app",
        "url": "https://github.com/acme/app.git",
    },
    "host_id": "host-1",
    "runtime_kind": "bwrap",
    "user_id": "alice",
    "project_id": "p1",
    "created": True,
    "contract_version": "1.0.0",
    "network": "limited",
    "network_allow": ["pypi.org"],
    "base_fetched_at": "2026-03-01T12:00:00.123456789Z",
    "runtime_replica": {
        "recreated": 1,
        "last_recreated_at": "0001-01-01T00:00:00Z",
        "synced": True,
        "files": 3,
    },
}


def test_handle_round_trip() -> None:
    handle = models.Handle.model_validate_json(json.dumps(HANDLE_JSON))
    assert handle.mode == "edit"
    assert handle.capabilities.writable is True
    assert handle.repo.owner == "acme"
    assert handle.base_fetched_at == datetime(2026, 3, 1, 12, 0, 0, 123456, tzinfo=timezone.utc)
    assert handle.runtime_replica is not None
    assert handle.runtime_replica.last_recreated_at == datetime(1, 1, 1, tzinfo=timezone.utc)
    assert handle.restored_from is None

    wire = handle.model_dump(mode="json", exclude_none=True)
    expected = dict(HANDLE_JSON)
    expected["base_fetched_at"] = "2026-03-01T12:00:00.123456Z"  # microseconds kept
    assert wire == expected
    assert models.Handle.model_validate(wire) == handle
    # a dict from temporalio's JSON converter validates the same way
    assert models.Handle.model_validate(HANDLE_JSON) == handle


def test_enums_are_literals() -> None:
    request = models.WorkspaceRequest(user_id="u", project_id="p", repo_url="r", mode="edit")
    assert request.mode == "edit"
    with pytest.raises(pydantic.ValidationError):
        models.WorkspaceRequest.model_validate(
            {"user_id": "u", "project_id": "p", "repo_url": "r", "mode": "bogus"}
        )
    assert (
        models.FileEntry.model_validate({"name": "a", "type": "dir", "size": 0, "mode": 0o755}).type
        == "dir"
    )


EXEC_RESULT_JSON = {
    "exit_code": 1,
    "stdout": base64.b64encode(b"hello\n\x00\xff").decode(),
    "stderr": None,
    "timed_out": False,
    "cancelled": False,
    "truncated": False,
    "stdout_bytes": 8,
    "stderr_bytes": 0,
    "duration_ms": 12,
    "a_field_from_a_newer_worker": {"x": [1, 2]},
}


def test_exec_result_round_trip_ignores_unknown_fields() -> None:
    result = models.ExecResult.model_validate_json(json.dumps(EXEC_RESULT_JSON))
    assert result.stdout == b"hello\n\x00\xff"
    assert result.stderr is None
    assert result.exit_code == 1
    assert not hasattr(result, "a_field_from_a_newer_worker")
    assert result.model_extra is None

    wire = result.model_dump(mode="json", exclude_none=True)
    expected = {k: v for k, v in EXEC_RESULT_JSON.items() if v is not None}
    del expected["a_field_from_a_newer_worker"]
    assert wire == expected
    assert result.model_dump()["stdout"] == b"hello\n\x00\xff"  # Python mode keeps bytes
    assert models.ExecResult.model_validate(EXEC_RESULT_JSON) == result


def test_bytes_from_python_are_not_base64_decoded() -> None:
    raw = b"aGVsbG8="  # valid base64 of b"hello": must stay these 8 bytes
    request = models.ExecRequest(cmd=["cat"], stdin=raw)
    assert request.stdin == raw
    assert request.model_dump(mode="json", exclude_none=True) == {
        "cmd": ["cat"],
        "stdin": base64.b64encode(raw).decode(),
    }
    assert models.WriteFileInput(path="f", content=bytearray(b"\x01")).content == b"\x01"
    assert models.WriteFileInput(path="f", content=None).content is None
    empty = models.ExecResult.model_validate({**EXEC_RESULT_JSON, "stdout": ""})
    assert empty.stdout == b""


def test_bad_base64_is_refused() -> None:
    with pytest.raises(pydantic.ValidationError, match="base64"):
        models.ExecResult.model_validate({**EXEC_RESULT_JSON, "stdout": "not base64!"})
    with pytest.raises(pydantic.ValidationError):
        models.ExecRequest.model_validate({"cmd": ["x"], "stdin": 42})


POLICY_JSON = {
    "runtime_idle_stop": 1_800_000_000_000,
    "runtime_stopped_destroy": 0,
    "analysis_ttl": 1_500,  # 1.5 µs: truncated to whole microseconds
    "task_ttl": 86_400_000_000_000,
    "edit_ttl": 604_800_000_000_000,
    "pressure_min_idle": 300_000_000_000,
    "high_water": 0.9,
    "low_water": 0.8,
    "severe_water": 0.95,
}


def test_durations_are_timedeltas_on_nanoseconds() -> None:
    policy = models.EvictionPolicy.model_validate_json(json.dumps(POLICY_JSON))
    assert policy.runtime_idle_stop == timedelta(minutes=30)
    assert policy.runtime_stopped_destroy == timedelta(0)
    assert policy.analysis_ttl == timedelta(microseconds=1)
    assert policy.edit_ttl == timedelta(days=7)
    assert models.EvictionPolicy.model_validate(POLICY_JSON) == policy

    wire = policy.model_dump(mode="json")
    assert wire == {**POLICY_JSON, "analysis_ttl": 1_000}
    assert isinstance(wire["task_ttl"], int)
    assert policy.model_dump()["task_ttl"] == timedelta(days=1)

    request = models.EvictRequest.model_validate(
        {"request_id": "r1", "action": "stop_runtime", "min_idle": timedelta(seconds=90)}
    )
    assert request.min_idle == timedelta(seconds=90)
    assert request.model_dump(mode="json", exclude_none=True)["min_idle"] == 90_000_000_000


def test_durations_refuse_ambiguous_units() -> None:
    for value in (1.5, "PT1S", True):
        with pytest.raises(pydantic.ValidationError, match="nanoseconds"):
            models.EvictionPolicy.model_validate({**POLICY_JSON, "task_ttl": value})


def test_go_times_parse() -> None:
    checkpoint = {
        "id": 1,
        "created_at": "2026-03-01T12:00:00.123456789+02:00",
        "files_changed": 0,
        "commit": "c",
        "ref": "r",
        "head": "h",
        "branch": "b",
    }
    parsed = models.Checkpoint.model_validate_json(json.dumps(checkpoint))
    tz = timezone(timedelta(hours=2))
    assert parsed.created_at == datetime(2026, 3, 1, 12, 0, 0, 123456, tzinfo=tz)
    zero = models.Checkpoint.model_validate({**checkpoint, "created_at": "0001-01-01T00:00:00Z"})
    assert zero.created_at == datetime(1, 1, 1, tzinfo=timezone.utc)
    assert zero.model_dump(mode="json")["created_at"] == "0001-01-01T00:00:00Z"
    with pytest.raises(pydantic.ValidationError):  # Go needs a zone
        models.Checkpoint.model_validate({**checkpoint, "created_at": "2026-03-01T12:00:00"})


def test_error_details() -> None:
    wire = {
        "family": "workspace",
        "kind": "InvalidWorkspacePath",
        "sub_kind": "FileNotFound",
        "retryable": False,
        "from_a_newer_worker": 1,
    }
    details = models.ErrorDetails.model_validate(wire)
    assert details.sub_kind == "FileNotFound"
    assert details.field is None
