"""The agent tool surface of one workspace, framework-neutral (README "Use it from an agent").

The tools are those of ``sandboxctl mcp``: ``sandbox_text_editor``, ``sandbox_shell``,
``sandbox_output``, ``sandbox_exec``, ``sandbox_write_stdin``, ``sandbox_overlaps``,
``sandbox_setup``, ``sandbox_search``, ``sandbox_git``, ``sandbox_pr``. Their names,
descriptions, input schemas and annotations are not restated here: they are the Go server's
own, exported by ``make schema`` into ``docs/schema/tools.json`` and shipped in this package
(:func:`catalog`). Which tools a workspace gets follows the same gating: an analysis
(read-only) workspace gets the read tools only, the pull request tool needs a code host.

:meth:`AgentTools.call` runs one tool and returns the text the model reads; a typed error is
returned as text too (``"<type>: <message>"``, as the MCP server's ``isError`` result), so a
framework hands it to the model instead of failing the run.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

from . import errors, models
from .workspace import Workspace

#: Tool names (the Go package internal/tools).
TEXT_EDITOR = "sandbox_text_editor"
SHELL = "sandbox_shell"
OUTPUT = "sandbox_output"
SEARCH = "sandbox_search"
GIT = "sandbox_git"
PR = "sandbox_pr"
EXEC = "sandbox_exec"
WRITE_STDIN = "sandbox_write_stdin"
OVERLAPS = "sandbox_overlaps"
SETUP = "sandbox_setup"

DEFAULT_SHELL_TIMEOUT_S = 120
DEFAULT_SHELL_OUTPUT_BYTES = 16_384
DEFAULT_OUTPUT_PAGE_BYTES = 80_000
DEFAULT_SEARCH_HITS = 200
DEFAULT_LOG_COMMITS = 20
MAX_VIEW_LINES = 2000
MIN_YIELD_MS, MAX_YIELD_MS = 250, 30_000
DEFAULT_EXEC_YIELD_MS, DEFAULT_WRITE_YIELD_MS = 10_000, 250
DEFAULT_INTERACTIVE_OUT, MAX_INTERACTIVE_OUT = 16_384, 262_144
_WRITE_GIT = ("commit", "push", "checkpoint", "rollback")


@cache
def catalog() -> Mapping[str, list[dict[str, Any]]]:
    """The tool definitions by capability set (``read_only``, ``writable``,
    ``writable_code_host``), each a list of ``{"name", "description", "inputSchema",
    "annotations"}`` in the order the MCP server lists them (docs/schema/tools.json)."""
    text = resources.files("sandboxcore").joinpath("tools.json").read_text(encoding="utf-8")
    data: dict[str, list[dict[str, Any]]] = json.loads(text)
    return data


def definitions(ws: Workspace) -> list[dict[str, Any]]:
    """The tool definitions the workspace gets: read tools only without write access, the
    pull request tool only with a code host."""
    if not ws.capabilities.writable:
        return catalog()["read_only"]
    return catalog()["writable_code_host" if ws.code_host else "writable"]


def _invalid(field_name: str, message: str) -> errors.InvalidArgument:
    return errors.InvalidArgument(message, field=field_name)


def _command_arg(command: str | None, cmd: str | None) -> str:
    """The shell command of sandbox_shell or sandbox_exec: ``command``, or ``cmd``, the name
    sandbox_exec's had first (still accepted by both tools)."""
    if command and cmd and command != cmd:
        raise _invalid("cmd", "give the command once, as command (cmd is its old name)")
    command = command or cmd or ""
    if not command.strip():
        raise _invalid("command", "command is empty")
    return command


def _text(data: bytes | None) -> str:
    return (data or b"").decode("utf-8", "replace")


def _short(commit: str | None) -> str:
    return (commit or "")[:12] or "none"


def _is_text(data: bytes) -> bool:
    if b"\x00" in data:
        return False
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _has_upper_literal(pattern: str) -> bool:
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            i += 1
            if pattern[i] in "pPx" and i + 1 < len(pattern) and pattern[i + 1] == "{":
                j = pattern.find("}", i)
                if j > 0:
                    i = j
            i += 1
            continue
        if c.isupper():
            return True
        i += 1
    return False


@dataclass
class _Seen:
    offsets: list[int] = field(default_factory=lambda: [0, 0])
    both: bool = True


class AgentTools:
    """The tools of one workspace. One instance per agent (it remembers what
    ``sandbox_exec``/``sandbox_write_stdin`` returned of each running command)."""

    def __init__(self, ws: Workspace):
        self.ws = ws
        self._seen: dict[str, _Seen] = {}

    def names(self) -> list[str]:
        """The names of the tools this workspace gets."""
        return [d["name"] for d in definitions(self.ws)]

    async def call(self, name: str, arguments: Mapping[str, Any]) -> str:
        """Run tool ``name`` with ``arguments`` (as the model sent them) and return its text; a
        typed error comes back as ``"<type>: <message>"``, an unknown field or tool as
        ``InvalidArgument``."""
        try:
            if name not in self.names():
                raise _invalid("name", f"no tool {name!r} on this workspace: {self.names()}")
            props = next(d for d in definitions(self.ws) if d["name"] == name)["inputSchema"]
            unknown = sorted(set(arguments) - set(props.get("properties", {})))
            if unknown:
                raise _invalid(unknown[0], f"{name}: unknown field {unknown[0]!r}")
            for req in props.get("required", []):
                if req not in arguments:
                    raise _invalid(req, f"{name}: {req} is required")
            handler = getattr(self, "_" + name.removeprefix("sandbox_"))
            text: str = await handler(**arguments)
            return text
        except errors.SandboxcoreError as e:
            return f"{e.type}: {e.message}"

    # --- sandbox_text_editor ------------------------------------------------------------

    async def _text_editor(
        self,
        command: str,
        path: str,
        view_range: list[int] | None = None,
        file_text: str | None = None,
        old_str: str | None = None,
        new_str: str | None = None,
        insert_line: int | None = None,
        if_match: str | None = None,
    ) -> str:
        allowed = ["view"] + (
            ["create", "str_replace", "insert"] if self.ws.capabilities.writable else []
        )
        if command not in allowed:
            raise _invalid("command", f"command {command[:40]!r}: want {allowed}")
        if command == "view":
            if old_str or new_str or file_text or insert_line is not None or if_match:
                raise _invalid("command", "view takes path and view_range only")
            return await self._view(path or ".", view_range)
        if view_range is not None:
            raise _invalid("view_range", "view_range is for view only")
        if command == "insert" and insert_line is None:
            raise _invalid("insert_line", "insert needs insert_line (0 = before the first line)")
        if command != "insert" and insert_line is not None:
            raise _invalid("insert_line", "insert_line is for insert only")
        res = await self.ws.files.edit(
            path,
            command,  # type: ignore[arg-type]
            old_str=old_str,
            new_str=new_str,
            insert_line=insert_line,
            file_text=file_text,
            if_match=if_match,
        )
        verb = {"create": "Wrote", "str_replace": "Edited", "insert": "Inserted into"}[command]
        return f"{verb} {res.path} ({res.bytes} bytes). The lines around the change:\n{res.snippet}"

    async def _view(self, path: str, view_range: list[int] | None) -> str:
        if path != ".":
            try:
                data = await self.ws.files.read(path)
            except errors.FileNotFound:
                raise
            except errors.InvalidWorkspacePath as e:
                try:
                    return await self._view_dir(path, view_range)
                except errors.SandboxcoreError:
                    raise e from None
            return self._view_file(path, data, view_range)
        return await self._view_dir(path, view_range)

    def _view_file(self, path: str, data: bytes, view_range: list[int] | None) -> str:
        if not _is_text(data):
            if view_range is not None:
                raise _invalid(
                    "view_range", f"{path} is a binary file ({len(data)} bytes): it has no lines"
                )
            return f"({path} is a binary file of {len(data)} bytes; it is not shown)\n"
        lines = data.decode().split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        start, end, truncated = 1, len(lines), False
        if view_range is not None:
            if len(view_range) != 2:
                raise _invalid("view_range", "view_range is [start, end]")
            start, end = view_range
            if end == -1:
                end = len(lines)
            if start < 1 or start > max(len(lines), 1) or end < start or end > len(lines) > 0:
                raise _invalid(
                    "view_range",
                    f"view_range {view_range} is outside the file's {len(lines)} lines "
                    "(1-based; end -1 = the last line)",
                )
        elif end > MAX_VIEW_LINES:
            end, truncated = MAX_VIEW_LINES, True
        body = "".join(f"{n:6d}\t{lines[n - 1]}\n" for n in range(start, min(end, len(lines)) + 1))
        if not lines:
            return f"{path} is empty.\n"
        if truncated:
            head = (
                f"{path}, the first {MAX_VIEW_LINES} of {len(lines)} lines "
                "(use view_range for the rest):\n"
            )
        else:
            head = f"{path}, lines {start}-{min(end, len(lines))} of {len(lines)}:\n"
        return head + body

    async def _view_dir(self, path: str, view_range: list[int] | None) -> str:
        res = await self.ws.files.list(
            "" if path == "." else path, depth=2, skip_hidden=True, skip_ignored=True
        )
        if view_range is not None:
            raise _invalid("view_range", f"view_range is for files, {path} is a directory")
        entries = res.entries or []
        names = "".join(e.name + ("/" if e.type == "dir" else "") + "\n" for e in entries)
        if res.truncated:
            head = f"The first {len(entries)} entries of {path}, two levels deep"
        else:
            head = f"Files and directories in {path}, two levels deep"
        return head + " (hidden and git-ignored ones left out):\n" + names

    # --- sandbox_shell, sandbox_output ----------------------------------------------------

    async def _shell(
        self,
        command: str | None = None,
        cmd: str | None = None,
        timeout_s: int | None = None,
        max_output_bytes: int | None = None,
        network: str | None = None,
        env: dict[str, str] | None = None,
    ) -> str:
        command = _command_arg(command, cmd)
        timeout_s = timeout_s or DEFAULT_SHELL_TIMEOUT_S
        cap = max_output_bytes or DEFAULT_SHELL_OUTPUT_BYTES
        if not 1 <= timeout_s <= 7200:
            raise _invalid("timeout_s", "timeout_s must be between 1 and 7200")
        if not 1 <= cap <= 512 * 1024:
            raise _invalid("max_output_bytes", "max_output_bytes must be between 1 and 524288")
        res = await self.ws.exec(
            ["/bin/sh", "-c", command],
            timeout_s=timeout_s,
            max_output_bytes=cap,
            keep_output=True,
            network=network,  # type: ignore[arg-type]
            env=env,
        )
        out = f"exit code {res.exit_code}"
        if res.timed_out:
            out += f" (timed out after {timeout_s} s: the command was killed)"
        out += f", {res.duration_ms} ms\n"
        for name, data, total in (
            ("stdout", res.stdout, res.stdout_bytes),
            ("stderr", res.stderr, res.stderr_bytes),
        ):
            if not total:
                continue
            out += f"--- {name}"
            if total > cap:
                out += f" ({total} bytes, {total - cap} cut from the middle)"
            text = _text(data)
            out += " ---\n" + text + ("" if text.endswith("\n") else "\n")
        if res.output_id:
            out += (
                "The whole output is kept: read it with sandbox_output "
                f'{{"output_id": "{res.output_id}"}} (stream stdout or stderr, offset, limit).\n'
            )
        elif res.truncated:
            out += "The output was cut and could not be kept whole.\n"
        return out

    async def _output(
        self, output_id: str, offset: int = 0, limit: int | None = None, stream: str | None = None
    ) -> str:
        res = await self.ws.read_output(
            output_id,
            stream=stream or "stdout",  # type: ignore[arg-type]
            offset=offset,
            limit=limit or DEFAULT_OUTPUT_PAGE_BYTES,
        )
        data = res.data or b""
        end = res.offset + len(data)
        head = f"{res.stream} of {res.output_id}, bytes {res.offset}-{end} of {res.total}"
        if res.eof and res.kept < res.total:
            head += f" (the end of what was kept: the first {res.kept} bytes)"
        elif res.eof:
            head += " (the end)"
        else:
            head += f" (more: offset {end})"
        return head + ":\n" + _text(data)

    # --- sandbox_search --------------------------------------------------------------------

    async def _search(
        self,
        pattern: str,
        glob: str | None = None,
        path: str | None = None,
        case: str | None = None,
        literal: bool = False,
        max_hits: int | None = None,
    ) -> str:
        hits = max_hits or DEFAULT_SEARCH_HITS
        if not 1 <= hits <= 5000:
            raise _invalid("max_hits", "max_hits must be between 1 and 5000")
        if case == "insensitive":
            ignore = True
        elif case == "sensitive":
            ignore = False
        elif case in (None, "", "smart"):
            if not literal:
                try:
                    re.compile(pattern)
                except re.error as e:
                    raise _invalid("pattern", f"search pattern: {e}") from None
            ignore = not (
                any(c.isupper() for c in pattern) if literal else _has_upper_literal(pattern)
            )
        else:
            raise _invalid("case", f"case {case[:40]!r}: want smart, sensitive or insensitive")
        res = await self.ws.files.search(
            pattern,
            path=path or "",
            literal=literal,
            ignore_case=ignore,
            max_results=hits,
            glob=glob,
        )
        matches = res.matches or []
        out = "" if matches else "No matches.\n"
        out += "".join(f"{m.path}:{m.line}:{m.text}\n" for m in matches)
        if res.truncated:
            out += (
                f"(more matches exist: the first {len(matches)} are shown; "
                "narrow the pattern, path or glob)\n"
            )
        return out

    # --- sandbox_git, sandbox_pr -----------------------------------------------------------

    async def _git(
        self,
        command: str,
        paths: list[str] | None = None,
        limit: int | None = None,
        message: str | None = None,
        force_with_lease: bool = False,
        label: str | None = None,
        checkpoint: int | None = None,
    ) -> str:
        for name, cmd, given in (
            ("limit", "log", bool(limit)),
            ("message", "commit", bool(message)),
            ("force_with_lease", "push", force_with_lease),
            ("label", "checkpoint", bool(label)),
            ("checkpoint", "rollback", bool(checkpoint)),
        ):
            if given and command != cmd:
                raise _invalid(name, f"{name} is for {cmd} only")
        if paths is not None and command not in ("diff", "commit"):
            raise _invalid("paths", "paths is for diff and commit only")
        if command in _WRITE_GIT and not self.ws.capabilities.writable:
            raise _invalid(
                "command", f"command {command!r}: this workspace is read-only (status, diff, log)"
            )
        git = self.ws.git
        if command == "status":
            return _status_text(await git.status())
        if command == "diff":
            return _diff_text(await git.diff(), paths)
        if command == "log":
            lg = await git.log(limit or DEFAULT_LOG_COMMITS)
            out = "".join(
                f"{_short(c.commit)} {c.date} {c.author_name}: {c.subject}\n"
                for c in lg.commits or []
            )
            return (out or "No commits.\n") + ("(older commits exist)\n" if lg.truncated else "")
        if command == "commit":
            if not message:
                raise _invalid("message", "commit needs a message")
            c = await git.commit(message, paths=paths)
            if c.nothing_to_commit:
                return "Nothing to commit: the working tree is clean.\n"
            return f"Committed {c.commit} on {c.branch}.\n"
        if command == "push":
            p = await git.push(force_with_lease=force_with_lease)
            return (
                f"Push of {p.branch}: {p.status} (remote at {_short(p.commit)}, "
                f"was {_short(p.previous_remote_commit)}).\n"
            )
        if command == "checkpoint":
            cp = await self.ws.checkpoints.create(label or "")
            return (
                f"Checkpoint {cp.id} taken ({cp.label or 'no label'}, {cp.files_changed} files "
                f"changed against HEAD {_short(cp.head)}); undo later edits with rollback "
                f"checkpoint={cp.id}.\n"
            )
        if command == "checkpoints":
            cps = await self.ws.checkpoints.list()
            return (
                "".join(
                    f"{c.id} {c.created_at.isoformat()} {c.label or 'none'} "
                    f"({c.files_changed} files changed, HEAD {_short(c.head)})\n"
                    for c in cps
                )
                or "No checkpoints.\n"
            )
        if command == "rollback":
            if not checkpoint:
                raise _invalid("checkpoint", "rollback needs checkpoint (an id from checkpoints)")
            r = await self.ws.checkpoints.rollback(checkpoint)
            return (
                f"Rolled back to checkpoint {r.checkpoint.id} (HEAD {_short(r.head)} on "
                f"{r.branch or 'a detached HEAD'}); the state left is checkpoint {r.undo.id}: "
                f"rollback checkpoint={r.undo.id} undoes this.\n"
            )
        raise _invalid("command", f"command {command[:40]!r}: want status, diff, log, commit, push")

    async def _pr(
        self,
        title: str,
        body: str | None = None,
        base_branch: str | None = None,
        draft: bool = False,
        reviewers: list[str] | None = None,
        labels: list[str] | None = None,
    ) -> str:
        r = await self.ws.git.pull_request(
            title,
            body=body or "",
            base=base_branch or "",
            draft=draft,
            reviewers=reviewers or (),
            labels=labels or (),
        )
        verb = "Opened" if r.created else "Found the open"
        out = f"{verb} pull request #{r.number}: {r.url} ({r.head} into {r.base}, {r.state}).\n"
        return out + "".join(f"warning: {w}\n" for w in r.warnings or [])

    # --- sandbox_exec, sandbox_write_stdin -------------------------------------------------

    async def _exec(
        self,
        command: str | None = None,
        cmd: str | None = None,
        workdir: str | None = None,
        yield_time_ms: int | None = None,
        tty: bool = False,
        max_output_bytes: int | None = None,
    ) -> str:
        cmd = _command_arg(command, cmd)
        wait, cap = _limits(yield_time_ms, DEFAULT_EXEC_YIELD_MS, max_output_bytes)
        start = time.monotonic()
        p = await self.ws.proc.start(
            ["sh", "-c", cmd], cwd=workdir, tag=EXEC, stdin=not tty, pty=(24, 120) if tty else None
        )
        self._seen[p.id] = _Seen(both=not tty)
        return await self._collect(p.id, start, wait, cap)

    async def _write_stdin(
        self,
        session_id: str,
        chars: str | None = None,
        yield_time_ms: int | None = None,
        kill: bool = False,
        max_output_bytes: int | None = None,
    ) -> str:
        if not session_id:
            raise _invalid("session_id", "session_id is empty")
        wait, cap = _limits(yield_time_ms, DEFAULT_WRITE_YIELD_MS, max_output_bytes)
        start = time.monotonic()
        if kill:
            await self.ws.proc.signal(session_id, "KILL")
        elif chars:
            await self.ws.proc.write(session_id, chars)
        if session_id not in self._seen:
            probe = await self.ws.proc.read(session_id, max_bytes=1)
            pty = bool(probe.process and probe.process.pty)
            self._seen[session_id] = _Seen(both=not pty)
        return await self._collect(session_id, start, wait, cap)

    # --- sandbox_overlaps, sandbox_setup ---------------------------------------------------

    async def _overlaps(self) -> str:
        return overlaps_text(await self.ws.overlaps())

    async def _setup(self, run: bool = False) -> str:
        if run:
            return setup_text(await self.ws.setup())
        return setup_text((await self.ws.describe()).setup)

    async def _collect(self, pid: str, start: float, wait: float, cap: int) -> str:
        seen = self._seen[pid]
        chunks: list[bytes] = []
        dropped = 0
        while True:
            left = max(0.0, start + wait - time.monotonic())
            r = await self.ws.proc.read(
                pid,
                offset=seen.offsets[0],
                stderr_offset=seen.offsets[1] if seen.both else None,
                wait=left,
                max_bytes=1 << 20,
            )
            dropped += r.dropped_bytes or 0
            chunks.append(r.data or b"")
            seen.offsets[0] = r.next_offset
            if r.stderr is not None:
                dropped += r.stderr.dropped_bytes or 0
                chunks.append(r.stderr.data or b"")
                seen.offsets[1] = r.stderr.next_offset
            if r.eof or left <= 0:
                break
            await asyncio.sleep(0)
        data = b"".join(chunks)
        truncated = len(data) > cap
        if truncated:
            data = data[: cap // 2] + b"\n...[cut]...\n" + data[-(cap - cap // 2) :]
        elapsed = int((time.monotonic() - start) * 1000)
        if r.eof:
            self._seen.pop(pid, None)
            head = (
                f"exited with code {r.exit_code} ({r.exit_reason or 'exited'}) after {elapsed} ms"
            )
        else:
            head = (
                f"still running after {elapsed} ms: session_id {pid} "
                "(sandbox_write_stdin to send input, poll or kill)"
            )
        if dropped:
            head += f"; {dropped} bytes of output were lost before this call"
        if truncated:
            head += "; the output is cut in the middle"
        return head + "\n" + _text(data)


def _limits(yield_ms: int | None, default: int, max_out: int | None) -> tuple[float, int]:
    ms = yield_ms or default
    if not MIN_YIELD_MS <= ms <= MAX_YIELD_MS:
        raise _invalid(
            "yield_time_ms", f"yield_time_ms must be between {MIN_YIELD_MS} and {MAX_YIELD_MS}"
        )
    cap = max_out or DEFAULT_INTERACTIVE_OUT
    if not 1 <= cap <= MAX_INTERACTIVE_OUT:
        raise _invalid(
            "max_output_bytes", f"max_output_bytes must be between 1 and {MAX_INTERACTIVE_OUT}"
        )
    return ms / 1000, cap


def _status_text(st: models.WorkspaceStatus) -> str:
    out = (
        f"On {st.branch or 'a detached HEAD'} at {_short(st.head)}; base {_short(st.base_commit)}; "
        f"{st.commits_since_base} commit(s) since base, {st.unpushed_commits} unpushed.\n"
    )
    files = st.files or []
    if not files:
        out += "Working tree clean.\n"
    out += "".join(f"{f.status} {f.path}\n" for f in files)
    return out + "".join(f"warning: git config {w}\n" for w in st.config_warnings or [])


def _diff_text(d: models.Diff, paths: list[str] | None) -> str:
    patch, files = d.patch, list(d.files or [])
    if paths:
        want = [p.strip("/") for p in paths]

        def keep(f: str) -> bool:
            return any(w in (".", "") or f == w or f.startswith(w + "/") for w in want)

        files = [f for f in files if keep(f)]
        kept, on = [], False
        for line in patch.splitlines(keepends=True):
            if line.startswith("diff --git "):
                on = any(f" b/{f}" in line for f in files)
            if on:
                kept.append(line)
        patch = "".join(kept)
    if not patch:
        return f"No changes against the base commit {_short(d.base_commit)}.\n"
    out = f"Changes against the base commit {_short(d.base_commit)} ({len(files)} files):\n{patch}"
    if d.truncated:
        out += f"\n(the diff is cut: {d.total_bytes} bytes in all; name paths to see less)\n"
    return out


def overlaps_text(res: models.OverlapsResult) -> str:
    """sandbox_overlaps's text, as the MCP server words it: one line per overlapping
    workspace, one per shared file, then the workspaces not checked."""
    overlaps = res.overlaps or []
    out = [
        f"{res.changed} files changed here since the base; {res.checked} other workspaces checked"
    ]
    out.append(
        ": no overlap.\n" if not overlaps else f", {len(overlaps)} changed the same files:\n"
    )
    for o in overlaps:
        who: str = o.mode
        if o.task_id:
            who += " task " + o.task_id
        elif o.conversation_id:
            who += " conversation " + o.conversation_id
        files = o.files or []
        out.append(
            f"- {o.risk} risk: {o.workspace_id} ({who}, branch {o.branch or ''}): "
            f"{len(files)} shared files, {o.intersecting} intersecting\n"
        )
        for f in files:
            what = "different lines"
            if f.ranges_intersect and f.comparable:
                what = "the same or adjacent lines"
            elif f.ranges_intersect:
                what = f"whole file ({f.this_change} here, {f.other_change} there)"
            out.append(f"  {f.path}: {what}\n")
    for u in res.not_checked or []:
        out.append(f"- not checked: {u.workspace_id} ({u.reason}, host {u.host_id})\n")
    return "".join(out)


def setup_text(st: models.SetupState | None) -> str:
    """sandbox_setup's text, as the MCP server words it: the outcome, the prepared tree, the
    output tails."""
    if st is None:
        return (
            "This repository names no setup command "
            "(.devcontainer/devcontainer.json, .sandboxcore.yaml).\n"
        )
    line = f"setup {st.state}"
    if st.state in ("done", "failed"):
        line += f" (exit {st.exit_code}) in {(st.duration_ms or 0) / 1000:.1f} s"
    if st.commands:
        line += f"; {st.commands} command(s)"
    if st.error:
        line += f": {st.error}"
    out = [line + "\n"]
    p = st.prepared
    if p is not None:
        if p.action == "restored":
            out.append(
                "prepared tree restored instead of running the commands "
                f"({p.mode}, {p.files or 0} files)\n"
            )
        elif p.action == "saved":
            out.append(f"prepared tree saved for the next workspace ({p.files or 0} files)\n")
        else:
            out.append(f"no prepared tree: {p.note or ''}\n")
    for name, text in (("stdout", st.stdout_tail), ("stderr", st.stderr_tail)):
        if text:
            out.append(f"--- {name} (last {SETUP_TAIL_BYTES} bytes at most)\n{text}")
            if not text.endswith("\n"):
                out.append("\n")
    if st.output_id:
        out.append(f"whole output: sandbox_output output_id={st.output_id}\n")
    return "".join(out)


#: The bytes of each setup output tail (sandboxapi.SetupOutputTailBytes).
SETUP_TAIL_BYTES = 4096
