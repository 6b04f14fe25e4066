"""Run-time guards the compiler wires into macro code: the hooks of one macro invocation.

The compiler rewrites every statement, loop iteration, function entry, call, comparison, binary operation,
slice, subscript key, comprehension, tuple display and f-string into a call of a `Guard` method (under
``_rt_*`` names that macro code cannot spell, because names starting with ``_`` are rejected). A guard
failure raises `MacroAbort`, a `BaseException`, so a macro's ``except Exception`` cannot swallow it; the
failure is also recorded on the guard (``guard.failure``), so a macro that escapes the abort through
``finally: return`` still fails.

Time is bounded in two layers. Every hook checks the wall clock, so between two checks the macro runs at
most one C-level operation. The cost of those operations is bounded too: sizes are capped (`MacroLimits`),
and an operation whose cost is not linear in the size of its operands (a comparison or hash of containers
that share sub-containers, a sort, a membership test on a list) is charged, before it runs, by the
*weight* of what it will visit, so it fails with ``fuel`` instead of running for minutes.

The guard is three parts, each in its own module: the accounting of fuel, clock, depth and sizes
(`rlgpt.macro.budget.InvocationBudget`, which `Guard` extends), the cost model that prices each operation
(`rlgpt.macro.cost`), and the builtins macro code may use (`rlgpt.macro.safe_builtins`). This module wires
them into the hooks.
"""

from __future__ import annotations

import operator
import time
import types
from collections.abc import Callable
from typing import Any

from rlgpt.macro.api import GameAPI
from rlgpt.macro.budget import InvocationBudget, MacroAbort, MacroLimits
from rlgpt.macro.cost import (
    ATOMS,
    COSTLY_BUILTINS,
    GROWING,
    WALKED,
    charge_method,
    check_binop,
    compare_cost,
    fstring_size,
    length,
    sized,
    weight,
)
from rlgpt.macro.safe_builtins import ALLOWED_BUILTIN_NAMES, ALLOWED_EXCEPTIONS, guarded_builtins

__all__ = ["ALLOWED_BUILTIN_NAMES", "ALLOWED_EXCEPTIONS", "BINARY_OPS", "COMPARE_OPS", "Guard", "MacroAbort",
           "MacroLimits"]

BINARY_OPS: dict[str, Callable[[Any, Any], Any]] = {
    "Add": operator.add,
    "Sub": operator.sub,
    "Mult": operator.mul,
    "Div": operator.truediv,
    "FloorDiv": operator.floordiv,
    "Mod": operator.mod,
    "Pow": operator.pow,
    "LShift": operator.lshift,
    "RShift": operator.rshift,
    "BitOr": operator.or_,
    "BitXor": operator.xor,
    "BitAnd": operator.and_,
}
"""AST operator class name -> function; the in-place forms are keyed ``"i" + name``."""
BINARY_OPS.update(
    {
        "iAdd": operator.iadd,
        "iSub": operator.isub,
        "iMult": operator.imul,
        "iDiv": operator.itruediv,
        "iFloorDiv": operator.ifloordiv,
        "iMod": operator.imod,
        "iPow": operator.ipow,
        "iLShift": operator.ilshift,
        "iRShift": operator.irshift,
        "iBitOr": operator.ior,
        "iBitXor": operator.ixor,
        "iBitAnd": operator.iand,
    }
)

COMPARE_OPS: dict[str, Callable[[Any, Any], Any]] = {
    "Eq": operator.eq,
    "NotEq": operator.ne,
    "Lt": operator.lt,
    "LtE": operator.le,
    "Gt": operator.gt,
    "GtE": operator.ge,
    "Is": operator.is_,
    "IsNot": operator.is_not,
    "In": lambda a, b: a in b,
    "NotIn": lambda a, b: a not in b,
}
"""AST comparison operator class name -> function of (left, right)."""


class Guard(InvocationBudget):
    """The ``_rt_*`` hooks of one macro invocation: its accounting (`InvocationBudget`) applied to every
    operation, priced by the cost model (`rlgpt.macro.cost`)."""

    def call(self, func: Any, *args: Any, **kwargs: Any) -> Any:
        """Every call in macro code goes through here: charge, wrap key functions, bound the result."""
        self.tick()
        kind = type(func)
        receiver: Any = None
        if kind is types.BuiltinMethodType and type(func.__self__) is not types.ModuleType:
            receiver, rest = func.__self__, args  # a bound method: a.extend(b)
        elif kind is types.MethodDescriptorType and args:
            receiver, rest = args[0], args[1:]  # an unbound method: list.extend(a, b)
        method = func.__name__ if receiver is not None else None
        if receiver is not None:
            if method in GROWING and not all(map(sized, rest)):
                # a.extend(enumerate(a)) iterates its own receiver as it grows it, in C, for ever: take the
                # argument's items first (at most max_items + 1), then grow by a known size.
                rest = tuple(map(self.materialize, rest))
                args = rest if kind is types.BuiltinMethodType else (receiver, *rest)
            charge_method(self, method, receiver, rest, kwargs.get("key") is not None)
        elif id(func) in COSTLY_BUILTINS and args:
            if len(args) == 1 and type(args[0]) not in WALKED:
                # Materialize a generator/zip/... first, so that its elements can be weighed.
                args = (self.post(list(args[0])),)
            items = args[0] if len(args) == 1 else args
            sorting = func is sorted
            factor = max(length(items), 1).bit_length() if sorting else 1
            if kwargs.get("key") is None:  # with a key, only the keys are compared (see _sort_key)
                self.spend(weight(self, items, self.remaining_weight()) * factor)
        key = kwargs.get("key")
        if key is not None and callable(key):
            if (func is sorted and args) or method == "sort":
                factor = max(length(receiver if method else args[0]), 1).bit_length()
            else:
                factor = 1
            kwargs["key"] = lambda item: self._sort_key(key, item, factor)
        # The game API's searches cost what they look at (up to every tile in view, each with its
        # neighbours): charged after the call by the work it reports, so a loop of searches pays per tile.
        game = func.__self__ if kind is types.MethodType and type(func.__self__) is GameAPI else None
        work = game._work if game is not None else 0
        try:
            result = func(*args, **kwargs)
        except MemoryError:
            self.fail("memory", "ran out of memory")
        if game is not None:
            self.spend(game._work - work)
        if receiver is not None:
            # Growing methods (append, extend, update, ...) mutate their receiver in place.
            self.post(receiver)
        return self.post(result)

    def _sort_key(self, key: Callable[[Any], Any], item: Any, factor: int) -> Any:
        value = self.call(key, item)
        if type(value) not in ATOMS:
            # All keys exist before the first comparison: charge each by its weight times the comparisons
            # it takes part in (~log2(n) in a sort, 1 in min/max), before the sort can run.
            self.spend(weight(self, value, self.remaining_weight()) * factor)
        return value

    def key(self, value: Any) -> Any:
        """A subscript key or a dict/set display element: hashing a tuple visits all of it."""
        if type(value) is tuple:
            self.spend(weight(self, value, self.remaining_weight()))
        return value

    def compare(self, left: Any, op: str, right: Any) -> Any:
        """A two-operand comparison, charged by what it will visit before it runs."""
        if self.failure is not None:
            raise MacroAbort(self.failure)
        if time.perf_counter() > self._deadline:
            self._timeout()
        if type(left) not in ATOMS or type(right) not in ATOMS:
            self.spend(compare_cost(self, left, op, right))
        return COMPARE_OPS[op](left, right)

    def operand(self, value: Any) -> Any:
        """An operand of a chained comparison (``a < b < c``): charged by its whole weight."""
        if self.failure is not None:
            raise MacroAbort(self.failure)
        if type(value) not in ATOMS:
            self.spend(weight(self, value, self.remaining_weight()))
        elif time.perf_counter() > self._deadline:
            self._timeout()
        return value

    def binop(self, op: str, left: Any, right: Any) -> Any:
        """A binary operator, refused before it could build an oversized value (`check_binop`)."""
        right = check_binop(self, op, left, right)
        try:
            result = BINARY_OPS[op](left, right)
        except MemoryError:
            self.fail("memory", "ran out of memory")
        return self.post(result)

    def fstring(self, parts: tuple[Any, ...], *values: Any) -> str:
        """An f-string: ``parts`` holds literal strs and (conversion, spec) per field, in order.

        Only scalars may be formatted (a container's repr can be unbounded), and the result's size is
        bounded before any piece is built.
        """
        self.tick()
        estimate = fstring_size(self, parts, values)
        if estimate > self.limits.max_items:
            self.fail(
                "memory", f"would build a str of ~{estimate} characters (limit {self.limits.max_str_chars})"
            )
        pieces = []
        fields = iter(values)
        for part in parts:
            if type(part) is str:
                pieces.append(part)
                continue
            value = next(fields)
            conversion, spec = part
            if conversion == "r":
                value = repr(value)
            elif conversion == "a":
                value = ascii(value)
            elif conversion == "s":
                value = str(value)
            pieces.append(format(value, spec))
        return self.post("".join(pieces))

    def tuple(self, value: tuple[Any, ...]) -> tuple[Any, ...]:
        """A tuple display: bound tuple-in-tuple nesting (CPython hashes nested tuples recursively)."""
        limit = self.limits.max_tuple_depth
        depths: dict[int, int] = {}
        stack: list[tuple[tuple[Any, ...], bool]] = [(value, False)]
        visited = 0
        while stack:
            node, expanded = stack.pop()
            if id(node) in depths:
                continue
            children = [c for c in node if type(c) is tuple]
            if expanded or not children:
                depth = 1 + max((depths[id(c)] for c in children), default=0)
                if depth > limit:
                    self.fail("memory", f"tuples nested deeper than {limit}")
                depths[id(node)] = depth
                continue
            visited += len(node)
            stack.append((node, True))
            stack.extend((c, False) for c in children if id(c) not in depths)
        self.charge(visited >> 6)
        return value

    def slice_store(self, target: Any) -> None:
        """After ``x[a:b] = value``: the store may have grown ``x``."""
        self.post(target)

    def namespace(self) -> dict[str, Any]:
        """Fresh globals for one execution of the instrumented module: safe builtins + the hooks."""
        return {
            "__builtins__": guarded_builtins(self),
            "__name__": "macro",
            "_rt_stmt": self.stmt,
            "_rt_tick": self.tick,
            "_rt_enter": self.enter,
            "_rt_exit": self.exit,
            "_rt_return": self.returning,
            "_rt_call": self.call,
            "_rt_post": self.post,
            "_rt_binop": self.binop,
            "_rt_compare": self.compare,
            "_rt_operand": self.operand,
            "_rt_key": self.key,
            "_rt_fstring": self.fstring,
            "_rt_tuple": self.tuple,
            "_rt_slice_store": self.slice_store,
        }
