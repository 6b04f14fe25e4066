"""Code skills: macros that reached their goal, stored with their measured success, callable from later
macros as ``yield from skills.<name>(game)``.

A later subtask builds on code that already works instead of rewriting it (Voyager's skill library, for
macro code). The macros are stored with the skill they belong to (`rlgpt.run.skills.Skill.macros`, each
with its goal and probe goal rate); `code_skills` picks the callable ones.

Calling a stored skill is linking, not importing: `link_skills` rewrites each ``skills.<name>`` of a macro
to a top-level function of the same module and prepends the skill's own source (renamed so that nothing
clashes). The result is ordinary macro source: compiled, instrumented and sandboxed like any other, shipped
to env workers as text, with the skill's steps and fuel charged to the macro that called it.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from dataclasses import dataclass

from rlgpt.macro.diagnostics import Diagnostic, MacroCompileError

SKILLS_NAME = "skills"
"""The name macro code calls stored skills through (``skills.<name>(game)``)."""
LINK_PREFIX = "skill_"
"""Prefix of a linked skill's functions in the macro module (``skills.get_wood`` -> ``skill_get_wood``)."""
_NAME = re.compile(r"[a-z][a-z0-9_]{0,47}\Z")


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

    def line(self) -> str:
        """How the fast agent's prompt lists it."""
        goal = f"; raises {self.goal!r} in {self.goal_rate:.0%} of probes" if self.goal else ""
        return f"  skills.{self.name}(game): {self.description}{goal}"


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
    parts = [_renamed(skills[w].code, f"{LINK_PREFIX}{w}", entry=w) for w in wanted]
    tree = _SkillRefs().visit(ast.parse(code))
    return "\n\n".join([*parts, ast.unparse(tree)]) + "\n"


class _SkillRefs(ast.NodeTransformer):
    """``skills.<x>`` -> ``skill_<x>`` (the linked function's name)."""

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        if isinstance(node.value, ast.Name) and node.value.id == SKILLS_NAME:
            return ast.copy_location(ast.Name(f"{LINK_PREFIX}{node.attr}", ast.Load()), node)
        return self.generic_visit(node)


def _renamed(code: str, prefix: str, entry: str) -> str:
    """`code` with its entry function renamed `prefix` and every other top-level function `prefix_<f>`."""
    tree = ast.parse(code)
    names = {stmt.name for stmt in tree.body if isinstance(stmt, ast.FunctionDef)}
    mapping = {n: prefix if n == entry else f"{prefix}_{n}" for n in names}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name in mapping:
            node.name = mapping[node.name]
        elif isinstance(node, ast.Name) and node.id in mapping:
            node.id = mapping[node.id]
    return ast.unparse(tree)
