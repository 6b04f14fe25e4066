"""Macro files: a YAML/JSON list of ``{name, code, description}`` entries, checked before training starts.

Checking here, in the trainer's process, turns a bad program into one clear error (with its diagnostic)
instead of a crash in every Sample Factory worker that would compile it.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from rlgpt.errors import RlgptError
from rlgpt.macro.compiler import MacroSource, compile_macro


class MacroFileError(RlgptError, ValueError):
    """A macro file is missing, malformed, or holds a macro the compiler rejects."""


def load_macro_file(path: str | Path) -> list[MacroSource]:
    """Read and compile-check every macro in ``path``; raise MacroFileError on the first problem."""
    path = Path(path)
    if not path.is_file():
        raise MacroFileError(f"macro file {str(path)!r} does not exist")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise MacroFileError(f"macro file {str(path)!r} is not valid YAML/JSON: {e}") from None
    if not isinstance(data, list) or not data:
        raise MacroFileError(f"macro file {str(path)!r} must hold a non-empty list of {{name, code}} entries")
    sources = []
    for i, entry in enumerate(data):
        if (
            not isinstance(entry, dict)
            or not isinstance(entry.get("name"), str)
            or not isinstance(entry.get("code"), str)
        ):
            raise MacroFileError(f"macro file {str(path)!r}: entry {i} needs string fields 'name' and 'code'")
        try:
            source = MacroSource.from_dict(entry)
            compile_macro(source)
        except ValueError as e:  # MacroCompileError is a ValueError and carries the diagnostic
            raise MacroFileError(f"macro file {str(path)!r}: {e}") from None
        sources.append(source)
    names = [s.name for s in sources]
    if len(set(names)) != len(names):
        raise MacroFileError(f"macro file {str(path)!r}: macro names must be unique, got {names}")
    return sources


def sources_to_json(sources: list[MacroSource]) -> str:
    """Serialize sources for shipping to worker processes (they are compiled again there)."""
    return json.dumps([s.to_dict() for s in sources])


def sources_from_json(text: str) -> list[MacroSource]:
    """Inverse of :func:`sources_to_json`."""
    return [MacroSource.from_dict(d) for d in json.loads(text)]
