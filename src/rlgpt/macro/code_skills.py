"""Code skills: macros that reached their goal, stored with their measured success, callable from later
macros as ``yield from skills.<name>(game)``.

A later subtask builds on code that already works instead of rewriting it (Voyager's skill library, for
macro code). The macros are stored with the skill they belong to (`rlgpt.run.skills.Skill.macros`, each
with its goal and probe goal rate); `code_skills` picks the callable ones.

A skill library (`rlgpt.run.skills.SkillLibrary`) keeps code skills across runs and seeds, each with what
it needs at its start and its measured success; `retrieve` picks the ones relevant to a sub-action (same
goal, a goal among its prerequisites, shared words) for the fast agent's prompt.

Calling a stored skill is linking, not importing: `link_skills` rewrites each ``skills.<name>`` of a macro
to a top-level function of the same module and prepends the skill's own source (renamed so that nothing
clashes). The result is ordinary macro source: compiled, instrumented and sandboxed like any other, shipped
to env workers as text, with the skill's steps and fuel charged to the macro that called it.
"""

from __future__ import annotations

import ast
import hashlib
import re
from collections.abc import Collection, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from rlgpt.macro.diagnostics import Diagnostic, MacroCompileError
from rlgpt.macro.goal import Goal

SKILLS_NAME = "skills"
"""The name macro code calls stored skills through (``skills.<name>(game)``)."""
LINK_PREFIX = "skill_"
"""Prefix of a linked skill's functions in the macro module (``skills.get_wood`` -> ``skill_get_wood``)."""
_NAME = re.compile(r"[a-z][a-z0-9_]{0,47}\Z")
RETRIEVE_LIMIT = 6
"""Most stored skills one fast-agent prompt lists (the best by `retrieve`'s ranking)."""


@dataclass
class CodeSkill:
    """One stored macro."""

    name: str
    """Function name, also how later macros call it (``skills.<name>(game)``)."""
    description: str
    """What it does (the sub-action's description)."""
    goal: str
    """Achievement or inventory item whose count it raises ("" = none)."""
    code: str
    """Its source, self-contained (skills it called are already linked in)."""
    goal_rate: float
    """Fraction of probe calls that reached the goal."""
    requires: dict[str, Any] = field(default_factory=dict)
    """What its probes started with: ``achievements`` (unlocked) and ``inventory`` (item -> count) of its
    start states, ``after`` (macros its probes ran first, in a run's chain of sub-actions); empty for a
    fresh world. Only model-written code is stored (never the trusted goal macros: expert code)."""
    train_success: float | None = None
    """Validation success of the training it was kept in (None: verified by probes only)."""
    version: int = 0
    """Times its library entry was written (1 = first; 0 = not read from a library)."""
    provenance: dict[str, Any] = field(default_factory=dict)
    """Where it came from: run directory or curriculum, model id, creation time."""

    @property
    def hash(self) -> str:
        """Content hash of its code (the first 16 hex digits of its SHA-256)."""
        return code_hash(self.code)

    def line(self) -> str:
        """How the fast agent's prompt lists it."""
        goal = f"; raises {self.goal!r} in {self.goal_rate:.0%} of probes" if self.goal else ""
        needs = describe_requires(self.requires)
        return f"  skills.{self.name}(game): {self.description}{goal}{'; needs ' + needs if needs else ''}"

    def to_record(self) -> dict[str, Any]:
        """JSON-ready form, with its hash (what a library stores)."""
        return {**asdict(self), "hash": self.hash}

    @classmethod
    def from_record(cls, data: Mapping[str, Any]) -> CodeSkill:
        """A stored record back (ValueError when it is not a valid one: a reader skips it)."""
        try:
            skill = cls(**{k: v for k, v in data.items() if k != "hash"})
            rate = float(skill.goal_rate)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"not a code skill record: {exc}") from None
        if not _NAME.match(str(skill.name)) or not isinstance(skill.code, str) \
                or not isinstance(skill.requires, dict):
            raise ValueError(f"not a code skill record: name, code or requires invalid ({skill.name!r})")
        if data.get("hash", skill.hash) != skill.hash:
            raise ValueError(f"code skill {skill.name!r}: its code does not match its hash")
        skill.goal_rate = rate
        return skill


def code_hash(code: str) -> str:
    """The content hash entries and libraries are versioned by."""
    return hashlib.sha256(code.encode()).hexdigest()[:16]


def describe_requires(requires: Mapping[str, Any]) -> str:
    """``requires`` in words ("" for a fresh world)."""
    parts = []
    if requires.get("after"):
        parts.append("run after " + ", ".join(requires["after"]))
    if requires.get("achievements"):
        parts.append("unlocked " + ", ".join(requires["achievements"]))
    if requires.get("inventory"):
        parts.append("holding " + ", ".join(f"{n} {k}" for k, n in sorted(requires["inventory"].items())))
    return "; ".join(parts)


_FAMILIES = ("collect_", "make_")
"""Achievement families whose achievement adds the item it names (``place_stone`` spends a stone: a skill
that collects stone does not place one, measured: `rlgpt skills learn` took collect_stone's skill for
place_stone's and never attempted it)."""


def goal_key(goal: str) -> str:
    """An achievement that provides an item, as that item (``collect_wood`` -> ``wood``,
    ``make_wood_pickaxe`` -> ``wood_pickaxe``); other goals unchanged. Macros state goals either way."""
    for prefix in _FAMILIES:
        if goal.startswith(prefix):
            return goal[len(prefix):]
    return goal


_COMMON_WORDS = frozenset({"the", "and", "for", "game", "unlock", "unlocks", "achievement", "collect", "make",
                           "place", "defeat", "eat", "get"})
"""Words that say nothing about which skill fits: every achievement family shares them. Measured: with
"collect" counted, the 1.5B was shown ``skills.collect_sapling`` for collect_wood and called it there."""


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z]+", text.lower()) if len(w) > 2} - _COMMON_WORDS


def retrieve(skills: Mapping[str, CodeSkill], goal: str, description: str,
             prerequisites: Collection[str] = (), limit: int = RETRIEVE_LIMIT) -> dict[str, CodeSkill]:
    """The stored skills relevant to a sub-action with `goal` and `description`, best first, at most
    `limit`: those with the same goal, then those whose goal is among `prerequisites` (achievements or
    items the goal needs first, from the recipe graph), then those sharing words with the description;
    ties by probe goal rate, then name. A skill matching none of these is left out."""
    wanted = goal_key(goal) if goal else ""
    needed = {goal_key(p) for p in prerequisites}
    words = _words(f"{description} {goal}")

    def score(skill: CodeSkill) -> tuple[int, int, float, str]:
        key = goal_key(skill.goal) if skill.goal else ""
        graph = 2 if key and key == wanted else 1 if key and key in needed else 0
        shared = len(words & _words(f"{skill.name} {skill.description} {skill.goal}"))
        return -graph, -shared, -skill.goal_rate, skill.name

    ranked = [s for s in sorted(skills.values(), key=score) if score(s)[:2] != (0, 0)]
    return {s.name: s for s in ranked[:limit]}


def code_skills(macros: list[dict], min_goal_rate: float = 0.5) -> dict[str, CodeSkill]:
    """The callable skills among stored macro records (``name``, ``code``, ``description``, ``goal``,
    ``goal_rate``, as a skill's ``macros`` list holds them): those whose probes reached their goal at least
    `min_goal_rate` of the time; a later record of the same name replaces an earlier one."""
    found: dict[str, CodeSkill] = {}
    for m in macros:
        rate = m.get("goal_rate")
        if isinstance(rate, int | float) and rate >= min_goal_rate and _NAME.match(str(m.get("name", ""))):
            found[m["name"]] = CodeSkill(m["name"], str(m.get("description", "")), str(m.get("goal", "")),
                                         str(m["code"]), float(rate))
    return found


def called_skills(code: str) -> list[str]:
    """Names of ``skills.<name>`` references in `code`, first use first ([] when it does not parse, or when
    the code binds a variable of its own called ``skills``)."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    names: list[str] = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Name) and node.id == SKILLS_NAME and not isinstance(node.ctx, ast.Load)) \
                or (isinstance(node, ast.arg) and node.arg == SKILLS_NAME):
            return []
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id == SKILLS_NAME and node.attr not in names):
            names.append(node.attr)
    return names


def link_skills(name: str, code: str, skills: Mapping[str, CodeSkill]) -> str:
    """`code` (macro `name`) with every ``skills.<x>`` it calls linked in (see the module docstring).

    Code that calls no skill comes back unchanged. Raises `MacroCompileError` naming the stored skills when
    it calls one that `skills` lacks, so the repair loop can send that back like a compile error.
    """
    wanted = called_skills(code)
    if not wanted:
        return code
    unknown = [w for w in wanted if w not in skills]
    if unknown:
        stored = ", ".join(sorted(skills)) or "none"
        raise MacroCompileError(name, tuple(
            Diagnostic("unknown_skill", f"there is no stored skill skills.{w}; stored skills: {stored}")
            for w in unknown))
    # A stored skill's code is self-contained: its top-level functions move into its own namespace.
    parts = [_linked(skills[w], w, f"{LINK_PREFIX}{w}") for w in wanted]
    tree = _SkillRefs().visit(ast.parse(code))
    return "\n\n".join([*parts, ast.unparse(tree)]) + "\n"


class _SkillRefs(ast.NodeTransformer):
    """``skills.<x>`` -> ``skill_<x>`` (the linked function's name)."""

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        if isinstance(node.value, ast.Name) and node.value.id == SKILLS_NAME:
            return ast.copy_location(ast.Name(f"{LINK_PREFIX}{node.attr}", ast.Load()), node)
        return self.generic_visit(node)


def _linked(skill: CodeSkill, entry: str, prefix: str) -> str:
    """`skill`'s code (entry function `entry`) in namespace `prefix`, the entry ending at the skill's goal as
    a call of it as a macro does (`rlgpt.macro.compiler.MacroSource.goal`): it was verified with its calls
    ended there, and code that reaches its goal and plays on would never hand control back to the macro
    that called it. The linked entry returns whether its goal went up. A skill without a (valid) goal is
    linked as it is."""
    try:
        goal = Goal.parse(skill.goal) if skill.goal else None
    except ValueError:
        goal = None
    if goal is None:
        return _renamed(skill.code, prefix, entry=entry)
    body = f"{prefix}_{entry}"  # no helper renames to this: helpers' names differ from the entry's
    count = f"game.item({goal.name!r})" if goal.kind == "item" else f"game.achievements.get({goal.name!r}, 0)"
    wrapper = (f"def {prefix}(game):\n    start = {count}\n    for action in {body}(game):\n"
               f"        yield action\n        if {count} > start:\n            return True\n"
               f"    return {count} > start")
    return _renamed(skill.code, prefix, entry=entry, entry_name=body) + "\n\n" + wrapper


def _renamed(code: str, prefix: str, entry: str, entry_name: str | None = None) -> str:
    """`code` with its entry function renamed `entry_name` (default `prefix`) and every other top-level
    function `prefix_<f>`."""
    tree = ast.parse(code)
    names = {stmt.name for stmt in tree.body if isinstance(stmt, ast.FunctionDef)}
    mapping = {n: (entry_name or prefix) if n == entry else f"{prefix}_{n}" for n in names}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name in mapping:
            node.name = mapping[node.name]
        elif isinstance(node, ast.Name) and node.id in mapping:
            node.id = mapping[node.id]
    return ast.unparse(tree)
