"""Optimistic concurrency through the SDK (docs/API.md "Optimistic concurrency"): two clients
that read, modify and write one file; the second's stale ``if_match`` raises SandboxConflict
and the first one's update is kept."""

from __future__ import annotations

import pytest

from sandboxcore import AsyncClient, content_hash, errors


async def test_stale_if_match_is_a_conflict(
    client: AsyncClient, repo_url: str, unique: str
) -> None:
    a = await client.acquire(
        user_id="ifm", project_id="p", repo_url=repo_url, conversation_id=unique
    )
    b = await client.workspace(a.id)
    ra = await a.files.read_file("README.md")
    rb = await b.files.read_file("README.md")
    assert ra.content_hash == rb.content_hash == content_hash(ra.content or b"")

    wa = await a.files.write(
        "README.md", (ra.content or b"") + b"from a\n", if_match=ra.content_hash
    )
    assert wa.content_hash == content_hash((ra.content or b"") + b"from a\n")
    with pytest.raises(errors.SandboxConflict, match="changed since it was read"):
        await b.files.write(
            "README.md", (rb.content or b"") + b"from b\n", if_match=rb.content_hash
        )
    assert (await a.files.read("README.md")).endswith(b"from a\n")

    with pytest.raises(errors.SandboxConflict):
        await b.files.edit(
            "README.md", old_str="from a", new_str="from b", if_match=rb.content_hash
        )
    ed = await b.files.edit(
        "README.md", old_str="from a", new_str="from b", if_match=wa.content_hash
    )
    assert ed.content_hash == content_hash(await a.files.read("README.md"))
    with pytest.raises(errors.InvalidArgument):
        await a.files.write("README.md", b"x", if_match="md5:nope")
