"""The identity derivation against the vectors Go checks too (sandboxapi/testdata)."""

from __future__ import annotations

import json

import pytest

from sandboxcore import errors, identity

from .conftest import REPO_ROOT

VECTORS = json.loads((REPO_ROOT / "sandboxapi/testdata/identity-vectors.json").read_text())


@pytest.mark.parametrize("v", VECTORS, ids=lambda v: v["key"])
def test_identity_vectors(v: dict[str, object]) -> None:
    req = v["request"]
    assert isinstance(req, dict)
    kw = {
        "conversation_id": req.get("conversation_id", ""),
        "task_id": req.get("task_id", ""),
    }
    key = identity.workspace_key(
        req["mode"], req["user_id"], req["project_id"], base_ref=req.get("base_ref", ""), **kw
    )
    assert key == v["key"]
    ws = identity.workspace_id_for_key(key)
    assert ws == v["workspace_id"]
    assert identity.workflow_id(ws) == v["workflow_id"]
    assert identity.runtime_id(ws) == v["runtime_id"]
    assert identity.tenant_segment(req["user_id"], req["project_id"]) == v["tenant_segment"]
    assert (
        identity.fanout_workflow_id(req["user_id"], req["project_id"], v["fanout_id"])
        == v["fanout_workflow_id"]
    )
    assert (
        identity.branch(
            req["mode"],
            req["user_id"],
            req["project_id"],
            branch_name=req.get("branch_name", ""),
            **kw,
        )
        == v["branch"]
    )
    assert (
        identity.worktree_dir_name(
            req["mode"],
            req["user_id"],
            req["project_id"],
            base_ref=req.get("base_ref", ""),
            branch_name=req.get("branch_name", ""),
            **kw,
        )
        == v["worktree_dir_name"]
    )


def test_ids_are_validated() -> None:
    for bad in ["", "-x", "a b", "a|b", "x" * 129, "é"]:
        with pytest.raises(errors.InvalidArgument):
            identity.validate_id("user_id", bad)
    identity.validate_id("user_id", "a" * 128)
    with pytest.raises(errors.InvalidArgument):
        identity.workflow_id("ws-ABC")


def test_fanout_workflow_ids() -> None:
    seg = identity.tenant_segment("alice", "p1")
    assert identity.fanout_workflow_id("alice", "p1", "f-1") == f"sandbox-fanout/{seg}/f-1"
    assert identity.fanout_workflow_id("bob", "p1", "f-1") != identity.fanout_workflow_id(
        "alice", "p1", "f-1"
    )
    assert identity.legacy_fanout_workflow_id("f-1") == "sandbox-fanout/f-1"
    for user, project, fanout in [("", "p1", "f"), ("alice", "", "f"), ("alice", "p1", "a/b")]:
        with pytest.raises(errors.InvalidArgument):
            identity.fanout_workflow_id(user, project, fanout)
    with pytest.raises(errors.InvalidArgument):
        identity.legacy_fanout_workflow_id("a/b")


def test_exec_process_id() -> None:
    # sandboxapi.ExecProcessID("ws-0123…", "u1"): sha256("ws-…/u1")[:24]
    import hashlib

    ws = "ws-" + "ab" * 12
    assert (
        identity.exec_process_id(ws, "u1")
        == "exec-" + hashlib.sha256(f"{ws}/u1".encode()).hexdigest()[:24]
    )
