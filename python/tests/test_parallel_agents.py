"""Parallel agents on one repository through the SDK: ``overlaps`` between three workspaces of
one user and project (another user's never listed), and a merge preview that the merge then
matches (docs/API.md "Overlaps", "Merge preview")."""

from __future__ import annotations

from sandboxcore import AsyncClient, Client


def lines(**repl: str) -> bytes:
    """Twenty lines ``line 1`` ... ``line 20``, with ``l<n>=text`` replacing line n."""
    out = []
    for i in range(1, 21):
        out.append(repl.get(f"l{i}", f"line {i}"))
    return ("\n".join(out) + "\n").encode()


async def test_overlaps_rank_by_risk(client: AsyncClient, repo_url: str, unique: str) -> None:
    user, other = f"u{unique[-10:]}", f"v{unique[-10:]}"
    conv = await client.acquire(
        user_id=user, project_id="p", repo_url=repo_url, conversation_id="conv"
    )
    await conv.files.write("big.txt", lines())
    await conv.git.commit("big file")
    # Three tasks start from the conversation's commit: it is no overlap of theirs.
    a, b, c = [await conv.fork(task_id=f"{unique}-{n}") for n in "abc"]
    d = await client.acquire(user_id=other, project_id="p", repo_url=repo_url, conversation_id="d")
    await a.files.write("big.txt", lines(l2="a2", l3="a3"))
    await b.files.write("big.txt", lines(l15="b15"))
    await c.files.write("big.txt", lines(l4="c4"))
    await d.files.write("big.txt", lines(l3="d3"))

    res = await a.overlaps()
    assert res.workspace_id == a.id and res.changed == 1
    assert res.checked == 3  # the conversation, b and c; never the other user's
    assert [o.workspace_id for o in res.overlaps] == [c.id, b.id]
    high, medium = res.overlaps
    assert high.risk == "high" and high.intersecting == 1 and high.task_id == f"{unique}-c"
    (f,) = high.files
    assert f.path == "big.txt" and f.ranges_intersect and f.comparable
    assert [(r.start, r.count) for r in f.this_ranges or []] == [(2, 2)]
    assert [(r.start, r.count) for r in f.other_ranges or []] == [(4, 1)]
    assert medium.risk == "medium" and not medium.files[0].ranges_intersect
    assert d.id not in {u.workspace_id for u in res.not_checked or []}


async def test_merge_preview_matches_the_merge(
    client: AsyncClient, repo_url: str, unique: str
) -> None:
    user = f"m{unique[-10:]}"
    conv = await client.acquire(
        user_id=user, project_id="p", repo_url=repo_url, conversation_id="conv"
    )
    await conv.files.write("big.txt", lines())
    await conv.git.commit("big file")
    tasks = {}
    for name, content in {
        "x": lines(l2="x2", l3="x3", l17="x17"),
        "y": lines(l3="y3"),
        "z": lines(l17="z17"),
    }.items():
        t = await conv.fork(task_id=f"{unique}-{name}")
        await t.files.write("big.txt", content)
        await t.git.commit(name)
        tasks[name] = t
    ids = [tasks[n].id for n in "xyz"]
    head = (await conv.git.status()).head

    preview = await conv.git.merge(workspaces=ids, dry_run=True, order="least_conflicts")
    assert preview.dry_run and preview.head == head
    assert [(b.workspace_id, b.status) for b in preview.branches] == [
        (tasks["y"].id, "clean"),
        (tasks["z"].id, "clean"),
        (tasks["x"].id, "conflict"),
    ]
    assert preview.branches[2].conflict_files == ["big.txt"]
    assert (await conv.git.status()).head == head

    merged = await conv.git.merge(workspaces=ids, order="least_conflicts")
    assert [(b.workspace_id, b.status) for b in merged.branches] == [
        (tasks["y"].id, "merged"),
        (tasks["z"].id, "merged"),
        (tasks["x"].id, "conflict"),
    ]
    assert await conv.files.read("big.txt") == lines(l3="y3", l17="z17")


def test_blocking_twins(worker: object, repo_url: str, unique: str) -> None:
    with Client.connect(worker.address, task_queue=worker.task_queue) as client:  # type: ignore[attr-defined]
        with client.acquire(
            user_id=f"s{unique[-10:]}", project_id="p", repo_url=repo_url, conversation_id="c"
        ) as ws:
            ws.files.write("README.md", b"changed\n")
            assert ws.overlaps().changed == 1
            assert ws.git.merge(["main"], dry_run=True).dry_run
