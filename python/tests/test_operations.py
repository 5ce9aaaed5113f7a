"""Every session update of the operation table has a method, async and blocking."""

from __future__ import annotations

import json

from sandboxcore import OPERATIONS, SyncWorkspace, Workspace

from .conftest import REPO_ROOT

INDEX = json.loads((REPO_ROOT / "docs/schema/index.json").read_text())


def resolve(cls: type, dotted: str) -> object:
    # Sub-APIs are instance attributes: map them to their classes.
    from sandboxcore import sync, workspace

    subs = {
        Workspace: {
            "files": workspace.Files,
            "git": workspace.Git,
            "proc": workspace.Processes,
            "checkpoints": workspace.Checkpoints,
        },
        SyncWorkspace: {
            "files": sync.SyncFiles,
            "git": sync.SyncGit,
            "proc": sync.SyncProcesses,
            "checkpoints": sync.SyncCheckpoints,
        },
    }[cls]
    owner: type = cls
    *path, name = dotted.split(".")
    for p in path:
        owner = subs[p]
    return getattr(owner, name)


def test_every_update_has_a_method() -> None:
    updates = set(INDEX["updates"])
    assert set(OPERATIONS) == updates, (
        "OPERATIONS must name exactly the updates of docs/schema/index.json"
    )
    for name, dotted in OPERATIONS.items():
        for cls in (Workspace, SyncWorkspace):
            fn = resolve(cls, dotted)
            assert fn is not None, f"{cls.__name__}.{dotted} for {name}"
