#!/usr/bin/env python3
"""Generate ``python/src/sandboxcore/models.py`` from the wire contract's JSON Schema.

The schema is ``docs/schema/sandboxcore.schema.json`` (docs/API.md "Schema"; ``make schema``
regenerates it from Go). Every ``$defs`` entry becomes one pydantic v2 model of the same name,
with datamodel-code-generator 0.89.0 and pinned options, then ruff 0.17.5 (isolated settings:
line length 100, import sorting) formats it, so the output depends only on the schema and on
those two pinned tools. Before generation a copy of the schema is rewritten in memory:

* a string with ``"contentEncoding": "base64"`` becomes :data:`sandboxcore._wire.Base64Bytes`
  (``bytes`` in Python, base64 on the wire);
* an integer with ``"x-duration": "nanoseconds"`` becomes :data:`sandboxcore._wire.Nanoseconds`
  (``datetime.timedelta`` in Python, integer nanoseconds on the wire);
* the root's title and description are dropped, so no root model is generated.

Enums become ``Literal[...]``, models ignore unknown fields (docs/API.md "Versioning": clients
ignore result fields they do not know) and ``date-time`` strings become timezone-aware
``datetime``.

Usage, from ``python/``::

    .venv/bin/python scripts/generate_models.py            # rewrite src/sandboxcore/models.py
    .venv/bin/python scripts/generate_models.py --check    # exit 1 with a diff when it is stale

Exit status: 0 on success (or when ``--check`` finds the file current), 1 when ``--check`` finds
a difference, 2 on a usage or schema error.
"""

from __future__ import annotations

import argparse
import copy
import difflib
import importlib.metadata
import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

PYTHON_DIR = Path(__file__).resolve().parent.parent
REPO_ROOT = PYTHON_DIR.parent
SCHEMA_PATH = REPO_ROOT / "docs" / "schema" / "sandboxcore.schema.json"
MODELS_PATH = PYTHON_DIR / "src" / "sandboxcore" / "models.py"

#: The command the module docstring names, relative to ``python/``.
COMMAND = "python scripts/generate_models.py"

BASE64_TYPE = "sandboxcore._wire.Base64Bytes"
NANOSECONDS_TYPE = "sandboxcore._wire.Nanoseconds"

#: The datamodel-code-generator and ruff versions the committed models.py was generated with
#: (pyproject.toml's ``test`` extra pins both).
GENERATOR_VERSION = "0.89.0"
RUFF_VERSION = "0.17.5"

_HEADER = '''\
"""Pydantic models of the {title} ({schema_id}).

GENERATED from {schema} by
``{command}``
(run in python/, with datamodel-code-generator {generator_version} and ruff).
DO NOT EDIT BY HAND: change the Go types in sandboxapi, run ``make schema``, then the command
above. With ``--check`` it (and tests/test_models.py) fails when this file is stale.

One model per ``$defs`` entry, named as the definition (docs/API.md "Schema";
docs/schema/index.json names each update's argument and result). Enums are ``Literal`` strings;
unknown fields are ignored (docs/API.md "Versioning"); byte fields are ``bytes`` (base64 on the
wire) and durations ``datetime.timedelta`` (integer nanoseconds on the wire), both typed in
:mod:`sandboxcore._wire`; date-times are timezone-aware ``datetime`` (Go sends RFC 3339 with
nanoseconds, kept to microseconds, and 0001-01-01T00:00:00Z for an unset time).
Validate results with ``Model.model_validate(value)``; send arguments as
``model.model_dump(mode="json", exclude_none=True)``.
"""'''


class SchemaError(Exception):
    """The schema holds an annotation this generator does not know how to map."""


def _rewrite(node: Any, where: str) -> Any:
    """Return a copy of schema ``node`` with byte and duration leaves replaced by custom types.

    ``where`` is the JSON pointer of ``node``, for error messages. Raises SchemaError on an
    unknown ``contentEncoding`` or ``x-duration`` value, or one on a node of an unexpected type.
    """
    if isinstance(node, list):
        return [_rewrite(item, f"{where}/{i}") for i, item in enumerate(node)]
    if not isinstance(node, dict):
        return node
    out = {key: _rewrite(value, f"{where}/{key}") for key, value in node.items()}
    encoding = out.pop("contentEncoding", None)
    duration = out.pop("x-duration", None)
    if encoding is not None:
        if encoding != "base64" or out.get("type") != "string":
            raise SchemaError(f"{where}: unsupported contentEncoding {encoding!r}")
        del out["type"]
        out["customTypePath"] = BASE64_TYPE
    if duration is not None:
        if duration != "nanoseconds" or out.get("type") != "integer":
            raise SchemaError(f"{where}: unsupported x-duration {duration!r}")
        del out["type"]
        out["customTypePath"] = NANOSECONDS_TYPE
    return out


def prepare_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema handed to datamodel-code-generator: a rewritten copy of ``schema`` (see the
    module docstring); ``schema`` itself is left unchanged."""
    prepared = copy.deepcopy(schema)
    prepared.pop("title", None)
    prepared.pop("description", None)
    prepared["$defs"] = _rewrite(prepared["$defs"], "#/$defs")
    return prepared


def _ruff(args: Sequence[str], source: str) -> str:
    """Run ``ruff <args>`` (this interpreter's, isolated from any configuration) on ``source``
    given on stdin and return its stdout. Raises subprocess.CalledProcessError on failure."""
    done = subprocess.run(
        [sys.executable, "-m", "ruff", *args, "--isolated", "--stdin-filename", "models.py", "-"],
        input=source,
        capture_output=True,
        text=True,
        check=True,
        cwd=PYTHON_DIR,
    )
    return done.stdout


def render(schema_path: Path = SCHEMA_PATH) -> str:
    """Generate the text of models.py from the schema at ``schema_path``.

    Raises SchemaError on a schema annotation it cannot map, RuntimeError when the installed
    datamodel-code-generator or ruff is not the pinned version, subprocess.CalledProcessError
    when ruff fails.
    """
    import datamodel_code_generator as dcg
    from datamodel_code_generator.enums import DataModelType

    for package, pinned in (
        ("datamodel-code-generator", GENERATOR_VERSION),
        ("ruff", RUFF_VERSION),
    ):
        installed = importlib.metadata.version(package)
        if installed != pinned:
            raise RuntimeError(
                f"{package} {installed} is installed; the models are generated with {pinned} "
                f"(pip install {package}=={pinned})"
            )
    schema = json.loads(schema_path.read_text(encoding="utf-8"))
    try:
        schema_name = schema_path.resolve().relative_to(REPO_ROOT).as_posix()
    except ValueError:
        schema_name = schema_path.name
    header = _HEADER.format(
        title=schema.get("title", ""),
        schema_id=schema.get("$id", ""),
        schema=schema_name,
        command=COMMAND,
        generator_version=GENERATOR_VERSION,
    )
    generated = dcg.generate(
        prepare_schema(schema),
        input_file_type=dcg.InputFileType.JsonSchema,
        output_model_type=DataModelType.PydanticV2BaseModel,
        target_python_version=dcg.PythonVersion.PY_310,
        target_pydantic_version=dcg.TargetPydanticVersion.V2,
        schema_version="2020-12",
        custom_file_header=header,
        disable_timestamp=True,
        enum_field_as_literal=dcg.LiteralType.All,
        extra_fields="ignore",
        output_datetime_class=dcg.DatetimeClassType.Awaredatetime,
        use_schema_description=True,
        use_field_description=True,
        use_standard_collections=True,
        use_union_operator=True,
        use_double_quotes=True,
        keep_model_order=True,
        skip_root_model=True,
        strict_refs=True,
        allow_remote_refs=False,
        formatters=[],
    )
    if not isinstance(generated, str):
        raise RuntimeError(f"datamodel-code-generator returned {type(generated).__name__}")
    isort = [
        "check",
        "--select",
        "I,F401",
        "--fix",
        "--exit-zero",
        "--quiet",
        "--target-version",
        "py310",
        "--line-length",
        "100",
        "--config",
        'lint.isort.known-first-party = ["sandboxcore"]',
    ]
    formatted = _ruff(isort, generated)
    return _ruff(["format", "--target-version", "py310", "--line-length", "100"], formatted)


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: write models.py, or with ``--check`` compare it with a fresh generation
    and print a unified diff when they differ. Returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--check",
        action="store_true",
        help="do not write; exit 1 and print a unified diff when the output file is stale",
    )
    parser.add_argument("--schema", type=Path, default=SCHEMA_PATH, help="the JSON Schema")
    parser.add_argument("--output", type=Path, default=MODELS_PATH, help="the models.py to write")
    args = parser.parse_args(argv)
    try:
        fresh = render(args.schema)
    except (SchemaError, RuntimeError, OSError, json.JSONDecodeError) as exc:
        print(f"generate_models: {exc}", file=sys.stderr)
        return 2
    except subprocess.CalledProcessError as exc:
        print(f"generate_models: ruff failed: {exc.stderr}", file=sys.stderr)
        return 2
    output: Path = args.output
    if args.check:
        current = output.read_text(encoding="utf-8") if output.exists() else ""
        if current == fresh:
            return 0
        diff = difflib.unified_diff(
            current.splitlines(keepends=True),
            fresh.splitlines(keepends=True),
            fromfile=f"{output} (committed)",
            tofile=f"{output} (generated)",
        )
        sys.stdout.writelines(diff)
        print(f"{output} is stale: run {COMMAND}", file=sys.stderr)
        return 1
    if not output.exists() or output.read_text(encoding="utf-8") != fresh:
        output.write_text(fresh, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
