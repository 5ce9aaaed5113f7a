"""Tests of sandboxcore.errors against the Go kinds of sandboxapi/errors.go (docs/API.md "Errors").

The Go source is the truth: every ``newKind("Type", parent, retryable)`` there must have a class
of the same name here, with the same parent and the same retryable flag, so this test fails when
Go adds a kind.
"""

from __future__ import annotations

import pickle
import re
from pathlib import Path
from typing import Any

import pytest
import temporalio.api.failure.v1
import temporalio.client
import temporalio.converter
import temporalio.exceptions
import temporalio.service

from sandboxcore import errors
from sandboxcore.models import ErrorDetails

GO_ERRORS = Path(__file__).resolve().parents[2] / "sandboxapi" / "errors.go"
_NEW_KIND = re.compile(r'(\w+)\s*=\s*newKind\(\s*"(\w+)"\s*,\s*(\w+)\s*,\s*(true|false)\s*\)')


def _go_kinds() -> dict[str, tuple[str | None, bool]]:
    """Wire type -> (parent wire type or None for a family root, retryable), from the Go
    source."""
    source = GO_ERRORS.read_text(encoding="utf-8")
    found = _NEW_KIND.findall(source)
    assert len(found) == source.count('newKind("'), "a newKind call the regex does not read"
    by_var = {var: typ for var, typ, _, _ in found}
    kinds = {
        typ: (None if parent == "nil" else by_var[parent], flag == "true")
        for _, typ, parent, flag in found
    }
    assert len(kinds) == len(found) > 20
    return kinds


GO_KINDS = _go_kinds()


def _family(typ: str) -> str:
    parent = GO_KINDS[typ][0]
    while parent is not None:
        typ, parent = parent, GO_KINDS[parent][0]
    return "workspace" if typ == "WorkspaceError" else "sandbox"


def _file_not_found_details() -> dict[str, Any]:
    return {
        "family": "workspace",
        "kind": "InvalidWorkspacePath",
        "sub_kind": "FileNotFound",
        "retryable": False,
    }


def test_every_go_kind_has_a_class() -> None:
    assert set(errors.ERROR_TYPES) == set(GO_KINDS)
    for typ, (parent, retryable) in GO_KINDS.items():
        cls = errors.ERROR_TYPES[typ]
        assert cls.__name__ == typ
        assert cls.type == typ
        assert getattr(errors, typ) is cls
        assert typ in errors.__all__
        assert cls.retryable is retryable, typ
        assert cls.family == _family(typ), typ
        assert cls.__doc__, typ
        (base,) = cls.__bases__
        if parent is None:
            assert base is errors.SandboxcoreError, typ
        else:
            assert base is errors.ERROR_TYPES[parent], typ


def test_family_roots() -> None:
    assert errors.WorkspaceError.type == "WorkspaceError"
    assert errors.SandboxError.type == "SandboxError"
    assert GO_KINDS["WorkspaceError"] == (None, False)
    assert GO_KINDS["SandboxError"] == (None, False)


def test_isinstance_relations() -> None:
    err = errors.FileNotFound("gone")
    assert isinstance(err, errors.InvalidWorkspacePath)
    assert isinstance(err, errors.WorkspaceError)
    assert isinstance(err, errors.SandboxcoreError)
    assert isinstance(err, Exception)
    assert not isinstance(err, errors.SandboxError)
    assert isinstance(errors.SessionReleased(), errors.WorkspaceUnavailable)
    assert isinstance(errors.SandboxRateLimited(), errors.SandboxError)
    assert not issubclass(errors.InvalidArgument, errors.InvalidWorkspacePath)


def test_constructed_error() -> None:
    err = errors.InvalidArgument("user_id is required", field="user_id")
    assert (err.type, err.message, err.field, err.details) == (
        "InvalidArgument",
        "user_id is required",
        "user_id",
        None,
    )
    assert err.retryable is False and err.family == "workspace"
    assert str(err) == "InvalidArgument: user_id is required"
    assert err.args == ("user_id is required",)
    assert str(errors.WorkspaceLocked()) == "WorkspaceLocked"
    assert errors.WorkspaceLocked().retryable is True
    assert errors.SandboxError("x", type="Weird", retryable=True).retryable is True
    assert "field='user_id'" in repr(err)


def test_pickle_keeps_attributes() -> None:
    details = ErrorDetails.model_validate({**_file_not_found_details(), "field": "path"})
    err = errors.FileNotFound("gone", details=details)
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is errors.FileNotFound
    assert (back.message, back.details, back.field, back.retryable) == (
        "gone",
        details,
        "path",
        False,
    )


def test_from_update_failure() -> None:
    app = temporalio.exceptions.ApplicationError(
        "no such file", _file_not_found_details(), type="FileNotFound", non_retryable=True
    )
    exc = temporalio.client.WorkflowUpdateFailedError(app)
    err = errors.from_failure(exc)
    assert isinstance(err, errors.FileNotFound)
    assert err.type == "FileNotFound"
    assert err.message == "no such file"
    assert str(err) == "FileNotFound: no such file"
    assert err.details == ErrorDetails(
        family="workspace", kind="InvalidWorkspacePath", sub_kind="FileNotFound", retryable=False
    )
    assert err.retryable is False and err.field is None
    assert err.__cause__ is exc


def test_from_failure_through_the_temporal_failure_converter() -> None:
    """Details come back from a real Failure proto as the client converts them (a dict)."""
    converter = temporalio.converter.DataConverter.default
    sent = temporalio.exceptions.ApplicationError(
        "exec: unknown field",
        {"family": "workspace", "kind": "InvalidArgument", "retryable": False, "field": "timeoutS"},
        type="InvalidArgument",
        non_retryable=True,
    )
    failure = temporalio.api.failure.v1.Failure()
    converter.failure_converter.to_failure(sent, converter.payload_converter, failure)
    received = converter.failure_converter.from_failure(failure, converter.payload_converter)
    err = errors.from_failure(temporalio.client.WorkflowUpdateFailedError(received))
    assert isinstance(err, errors.InvalidArgument)
    assert err.field == "timeoutS"
    assert err.details is not None and err.details.kind == "InvalidArgument"


def test_from_workflow_failure_and_direct_application_error() -> None:
    app = temporalio.exceptions.ApplicationError(
        "slow down",
        {"family": "sandbox", "kind": "SandboxRateLimited", "retryable": True},
        type="SandboxRateLimited",
    )
    err = errors.from_failure(temporalio.client.WorkflowFailureError(cause=app))
    assert isinstance(err, errors.SandboxRateLimited) and err.retryable is True
    direct = errors.from_failure(app)
    assert isinstance(direct, errors.SandboxRateLimited)
    assert direct.__cause__ is app


def test_from_failure_walks_cause_chains() -> None:
    inner = temporalio.exceptions.ApplicationError(
        "busy",
        {"family": "workspace", "kind": "WorkspaceLocked", "retryable": True},
        type="WorkspaceLocked",
    )
    middle = temporalio.exceptions.ApplicationError("wrapper", type="SomethingElse")
    middle.__cause__ = inner
    outer = temporalio.client.WorkflowFailureError(cause=middle)
    err = errors.from_failure(outer)
    assert isinstance(err, errors.WorkspaceLocked)  # the known type wins
    assert err.message == "busy"

    plain = RuntimeError("outer")
    plain.__cause__ = inner
    assert isinstance(errors.from_failure(plain), errors.WorkspaceLocked)


def test_session_released_is_retryable() -> None:
    app = temporalio.exceptions.ApplicationError(
        "the session was released",
        {
            "family": "workspace",
            "kind": "WorkspaceUnavailable",
            "sub_kind": "SessionReleased",
            "retryable": True,
        },
        type="SessionReleased",
    )
    err = errors.from_failure(temporalio.client.WorkflowUpdateFailedError(app))
    assert isinstance(err, errors.SessionReleased)
    assert isinstance(err, errors.WorkspaceUnavailable)
    assert err.retryable is True


def test_unknown_types() -> None:
    def convert(typ: str | None, *details: Any) -> errors.SandboxcoreError:
        app = temporalio.exceptions.ApplicationError("boom", *details, type=typ)
        err = errors.from_failure(temporalio.client.WorkflowUpdateFailedError(app))
        assert err is not None
        return err

    # a newer sub-kind of a known kind: the kind's class, the received type
    newer = convert(
        "FileTooOld",
        {
            "family": "workspace",
            "kind": "InvalidWorkspacePath",
            "sub_kind": "FileTooOld",
            "retryable": False,
        },
    )
    assert type(newer) is errors.InvalidWorkspacePath
    assert newer.type == "FileTooOld" and str(newer) == "FileTooOld: boom"
    assert newer.details is not None and newer.details.sub_kind is None  # unknown sub-kind dropped
    assert newer.details.kind == "InvalidWorkspacePath"

    workspace = convert("Mystery", {"family": "workspace", "kind": "Mystery", "retryable": True})
    assert type(workspace) is errors.WorkspaceError
    assert workspace.type == "Mystery"
    assert workspace.details is None  # kind outside the contract: unreadable details
    assert workspace.retryable is False

    sandbox = convert("Mystery", {"family": "sandbox", "kind": "SandboxError", "retryable": True})
    assert type(sandbox) is errors.SandboxError
    assert sandbox.type == "Mystery" and sandbox.retryable is True

    # a Go error Temporal itself raised (e.g. an unknown update name): no details
    go_error = convert("*errors.errorString")
    assert type(go_error) is errors.SandboxError and go_error.type == "*errors.errorString"

    untyped = convert(None)
    assert type(untyped) is errors.SandboxError and untyped.type == "SandboxError"


@pytest.mark.parametrize(
    "details",
    [
        (),
        (None,),
        ("not json",),
        ([1, 2],),
        (42,),
        ({"unexpected": "shape"},),
        ({"family": "workspace", "kind": "WorkspaceLocked"},),  # retryable missing
    ],
)
def test_missing_or_odd_details(details: tuple[Any, ...]) -> None:
    app = temporalio.exceptions.ApplicationError("busy", *details, type="WorkspaceLocked")
    err = errors.from_failure(app)
    assert isinstance(err, errors.WorkspaceLocked)
    assert err.details is None
    assert err.retryable is True  # the Go table's default
    assert err.field is None
    assert err.message == "busy"


def test_details_as_json_text_or_model() -> None:
    text = (
        '{"family":"workspace","kind":"InvalidArgument","retryable":false,"field":"request.mode"}'
    )
    err = errors.from_failure(
        temporalio.exceptions.ApplicationError("bad mode", text, type="InvalidArgument")
    )
    assert isinstance(err, errors.InvalidArgument) and err.field == "request.mode"
    model = ErrorDetails.model_validate(_file_not_found_details())
    again = errors.from_failure(
        temporalio.exceptions.ApplicationError("gone", model, type="FileNotFound")
    )
    assert again is not None and again.details == model


def test_no_application_error() -> None:
    assert errors.from_failure(RuntimeError("x")) is None
    assert errors.from_failure(temporalio.client.WorkflowQueryFailedError("query failed")) is None
    rpc = temporalio.service.RPCError("not found", temporalio.service.RPCStatusCode.NOT_FOUND, b"")
    assert errors.from_failure(rpc) is None
    cancelled = temporalio.exceptions.CancelledError("cancelled")
    assert errors.from_failure(temporalio.client.WorkflowFailureError(cause=cancelled)) is None


def test_cause_cycles_terminate() -> None:
    a = RuntimeError("a")
    b = RuntimeError("b")
    a.__cause__, b.__cause__ = b, a
    assert errors.from_failure(a) is None
