"""Loops that can go round without acting while nothing they test changes: the usual cause of ``fuel``.

A macro changes the game only by yielding an action, so a pass through a ``while`` body that yields nothing
(no ``yield``, ``yield from``, ``return``, ``break`` or ``raise`` on the way) sees the same game on the next
pass. If that pass also carries no state of its own into the next (no counter, no list it appends to, nothing
random), the loop takes that path again and again until the fuel runs out. The model writes this often, e.g.::

    while game.inventory["wood"] < 1:
        tree = game.nearest("tree")
        if tree is None:
            continue                  # nothing changes: the same tree-less view forever
        ok = yield from game.walk_to("tree")

Probes may never take such a path and training does, so the runtime's ``fuel`` diagnostic names the loop and
the quiet path (`explain_fuel`) for the critic and the fast agent. The analysis is conservative: a loop body
with constructs it does not follow (nested loops, ``try``, ``with``, calls of the macro's own helpers,
mutation, anything random) is never reported.
"""

from __future__ import annotations

import ast
import functools

PURE_CALLS = frozenset({
    "abs", "all", "any", "bool", "dict", "enumerate", "float", "int", "isinstance", "len", "list", "max",
    "min", "range", "reversed", "round", "set", "sorted", "str", "sum", "tuple", "zip",
})
"""Builtins whose call neither changes a value nor depends on anything but its arguments."""

_GIVE_UP = (ast.For, ast.AsyncFor, ast.While, ast.Try, ast.With, ast.AsyncWith, ast.Match,
            ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Global, ast.Nonlocal, ast.Delete)
_STOPS = (ast.Return, ast.Break, ast.Raise)


class _Unknown(Exception):
    """The loop body holds something this analysis does not follow: report nothing."""


def _acts(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Yield | ast.YieldFrom) for n in ast.walk(node))


def _quiet(stmts: list[ast.stmt]) -> tuple[list[int] | None, list[int] | None]:
    """The quiet ways through ``stmts`` (no action, no exit): the lines of one path that falls off the end,
    and of one that reaches a ``continue``; None for a way that does not exist."""
    path: list[int] = []
    looped: list[int] | None = None
    for stmt in stmts:
        if isinstance(stmt, _GIVE_UP):
            raise _Unknown
        if isinstance(stmt, _STOPS) or not isinstance(stmt, ast.If) and _acts(stmt):
            return None, looped
        if isinstance(stmt, ast.Continue):
            return None, looped if looped is not None else [*path, stmt.lineno]
        if isinstance(stmt, ast.If):
            if _acts(stmt.test):
                return None, looped
            body_end, body_loop = _quiet(stmt.body)
            other_end, other_loop = _quiet(stmt.orelse) if stmt.orelse else ([], None)
            for branch in (body_loop, other_loop):
                if looped is None and branch is not None:
                    looped = [*path, stmt.lineno, *branch]
            end = body_end if body_end is not None else other_end
            if end is None:
                return None, looped
            path = [*path, stmt.lineno, *end]
            continue
        path.append(stmt.lineno)
    return path, looped


def _stored(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


def _read(node: ast.AST | None) -> set[str]:
    if node is None:
        return set()
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _check_calls(node: ast.AST) -> None:
    """Calls a pass may make without carrying state: ``game`` queries and `PURE_CALLS`."""
    for n in ast.walk(node):
        if isinstance(n, ast.NamedExpr):
            raise _Unknown
        if not isinstance(n, ast.Call):
            continue
        func = n.func
        if isinstance(func, ast.Name) and func.id in PURE_CALLS:
            continue
        if (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "game"
                and "random" not in func.attr):
            continue
        raise _Unknown  # a helper, a method that may mutate its object, or something random


def _carries(stmts: list[ast.stmt], assigned: set[str], defined: set[str]) -> set[str]:
    """Walk one pass in order; raise `_Unknown` where a value from an earlier pass may be read (a name the
    loop assigns read before this pass assigned it) or state may change; return the names assigned on
    every path."""
    defined = set(defined)
    for stmt in stmts:
        if isinstance(stmt, ast.If):
            _check_calls(stmt.test)
        elif not _acts(stmt):  # what an acting statement calls cannot make a quiet pass differ
            _check_calls(stmt)
        if isinstance(stmt, ast.AugAssign | ast.AnnAssign) or isinstance(stmt, ast.Assign) and any(
                not isinstance(t, ast.Name | ast.Tuple | ast.List) for t in stmt.targets):
            raise _Unknown  # counters, typed or subscript/attribute stores: state across passes
        if isinstance(stmt, ast.If):
            if (_read(stmt.test) & assigned) - defined:
                raise _Unknown
            body = _carries(stmt.body, assigned, defined)
            other = _carries(stmt.orelse, assigned, defined)
            defined |= body & other
            continue
        value = stmt.value if isinstance(stmt, ast.Assign | ast.Expr | ast.Return) else None
        if (_read(value) & assigned) - defined:
            raise _Unknown
        if isinstance(stmt, ast.Assign):
            for target in stmt.targets:
                if any(not isinstance(n, ast.Name | ast.Tuple | ast.List | ast.Store | ast.Starred)
                       for n in ast.walk(target)):
                    raise _Unknown
                defined |= _stored(target)
    return defined


def _quiet_path(loop: ast.While) -> list[int] | None:
    """The lines of a pass through ``loop`` that acts on nothing and carries nothing, or None."""
    try:
        end, looped = _quiet(loop.body)
        path = looped if looped is not None else end
        if path is None or _acts(loop.test):
            return None
        _check_calls(loop.test)
        assigned = _stored(ast.Module(body=loop.body, type_ignores=[]))
        if _read(loop.test) & assigned:
            return None
        _carries(loop.body, assigned, set())
    except _Unknown:
        return None
    return path


@functools.lru_cache(maxsize=256)
def quiet_loops(source: str) -> tuple[tuple[int, int, tuple[int, ...]], ...]:
    """Every ``while`` loop of ``source`` that can spin: (first line, last line, lines of the quiet pass)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return ()
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.While):
            path = _quiet_path(node)
            if path is not None:
                found.append((node.lineno, node.end_lineno or node.lineno, tuple(path)))
    return tuple(sorted(found))


def explain_fuel(source: str, line: int | None) -> str:
    """What to add to a ``fuel`` diagnostic at ``line``: the spinning loop around it, or ``""``."""
    if line is None:
        return ""
    around = [loop for loop in quiet_loops(source) if loop[0] <= line <= loop[1]]
    if not around:
        return ""
    first, _, path = max(around)  # the innermost
    lines = ", ".join(str(n) for n in path) if path else str(first)
    return (f"; the while loop at line {first} can go round without yielding (through line(s) {lines}) while "
            "nothing it tests changes: the game only changes when the macro yields, so that pass repeats "
            "until the fuel is gone; yield an action (or return) on that path")
