"""The macro API's reference text for the prompts (``$macro_api``), at an API level.

Generated here, on the prompt side, from `GameAPI`'s own docstrings and the compiler's allow-lists, so the
prompt cannot drift from the code and the macro package does not import its own compiler for a prompt.
"""

from __future__ import annotations

import inspect
from typing import Any

from crafter import constants

from rlgpt.envs.crafter import MATERIALS
from rlgpt.macro import control
from rlgpt.macro.api import API_LEVELS, LEVEL_MEMBERS, OBJECT_KINDS, SLOT_DOCS, GameAPI, api_level
from rlgpt.macro.safe_builtins import ALLOWED_BUILTIN_NAMES
from rlgpt.macro.validate import SAFE_METHODS

__all__ = ["API_LEVELS", "api_reference"]

_TABLE_WOOD = constants.place["table"]["uses"]["wood"]
"""Wood a table uses (crafter's data), for the primitives level's example."""


def _doc(member: Any) -> str:
    """The first paragraph of a member's docstring, on one line."""
    doc = (getattr(member, "__doc__", None) or "").strip().split("\n\n")[0]
    return " ".join(line.strip() for line in doc.splitlines())


def _call_signature(member: Any) -> str:
    """``(name, n=1, max_steps=100)``: parameters with defaults, no annotations (shorter for the prompt)."""
    params = list(inspect.signature(member).parameters.values())[1:]
    return "(" + ", ".join(p.name if p.default is p.empty else f"{p.name}={p.default!r}"
                           for p in params) + ")"


def _signature(member: Any) -> str:
    """``(pos) -> str | None``: `_call_signature` and the return type, unquoted (parameter meanings are in the
    docs: positions are (x, y), kinds and names are strings); fewer prompt tokens than full annotations."""
    returns = inspect.signature(member).return_annotation
    return _call_signature(member) + ("" if returns is inspect.Signature.empty
                                      else f" -> {str(returns).strip(chr(39))}")


def api_reference(level: str = "expert") -> str:
    """Plain-text reference of what macro code may use, for the fast agent's prompt (``$macro_api``).

    Built from `GameAPI`'s own docstrings, so the prompt cannot drift from the code. `level` is one of
    `rlgpt.macro.api.API_LEVELS` (the compiler enforces the same `LEVEL_MEMBERS`).
    """
    level = api_level(level)
    members = LEVEL_MEMBERS[level]
    lines = [
        "Write `def <name>(game):` as a generator; `yield` one primitive action name per step;"
        " `return` when done.",
        "Positions are (x, y) world tiles; x grows right, y grows down ('move_up' is (0, -1));"
        " only the local view (9x7 tiles around the player) is visible.",
        "Actions: the primitive actions above, as strings (`yield \"move_left\"`).",
        f"Materials: {', '.join(MATERIALS)}. Object kinds: {', '.join(OBJECT_KINDS)}.",
        "game members:",
    ]
    for name in sorted(members - {"actions", "materials", "object_kinds", *control.GENERATORS}):
        member = getattr(GameAPI, name)
        doc = SLOT_DOCS.get(name) or (getattr(member, "__doc__", None) or "").strip().split("\n")[0]
        if callable(member) and not isinstance(member, property):
            signature = _signature(member)
            lines.append(f"  game.{name}{signature}: {doc}")
        else:
            lines.append(f"  game.{name}: {doc}")
    generators = [name for name in control.GENERATORS if name in members]
    if generators:
        lines.append("Control primitives: generators of actions; use `ok = yield from game.<name>(...)`; "
                     "each stops within max_steps and returns True when it reached its goal:")
        lines += [f"  game.{name}{_call_signature(getattr(GameAPI, name))}: "
                  f"{_doc(getattr(GameAPI, name)).removeprefix('Use `yield from`: ')}"
                  for name in generators]
    if level == "primitives":
        lines += ["  Each does one thing: when a prerequisite is missing (the tool, the items, a station) it"
                  " returns False at once and game.last_failure says why; get the prerequisite first, e.g.:",
                  "    def make_table(game):",
                  f"        if game.item(\"wood\") < {_TABLE_WOOD}:",
                  f"            ok = yield from game.gather(\"wood\", n={_TABLE_WOOD} - game.item(\"wood\"))",
                  "        ok = yield from game.place_item(\"table\")"]
    elif level == "expert":
        lines += ["  collect, place and craft collect missing ingredients, tools and stations first. One"
                  " call can be a whole sub-action, e.g.:",
                  "    def get_stone(game):",
                  "        ok = yield from game.collect(\"stone\", n=2)"]
    lines += [
        f"Builtins: {', '.join(sorted(ALLOWED_BUILTIN_NAMES))}.",
        f"Methods on lists/dicts/sets/strings: {', '.join(sorted(SAFE_METHODS))}.",
        "Not allowed: imports, names/attributes starting with '_' (a bare `_` loop variable is fine),"
        " classes, global/nonlocal, with, bare except, lambdas except as call arguments (key=...),"
        " * and ** unpacking.",
        "Loops, calls, comparisons and allocations cost fuel; a macro that runs out of fuel, time or"
        " steps fails.",
    ]
    return "\n".join(lines)
