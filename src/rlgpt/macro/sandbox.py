"""Run-time guards the compiler wires into macro code: fuel, depth, size bounds, safe builtins.

The compiler rewrites every loop iteration, function entry, call, binary operation, slice, comprehension,
tuple display and f-string piece into a call of a `Guard` method (under ``_rt_*`` names that macro code
cannot spell, because names starting with ``_`` are rejected). A guard failure raises `MacroAbort`, a
`BaseException`, so a macro's ``except Exception`` cannot swallow it; the failure is also recorded on the
guard (``guard.failure``), so a macro that escapes the abort through ``finally: return`` still fails.
"""

from __future__ import annotations

import operator
import re
import sys
import time
import types
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, NoReturn

from rlgpt.macro.diagnostics import Diagnostic, frame_position, source_line

_MAX_FUEL_CAP = 50_000


@dataclass(frozen=True)
class MacroLimits:
    """Resource bounds for one macro invocation (from the policy choosing it to its end)."""

    fuel: int = 20_000
    """Fuel units for one invocation: 1 per loop iteration, call and function entry, plus 1 per 64
    items of every container or string built. Capped at 50,000: fuel also bounds how deeply a macro can
    nest tuples, and CPython hashes nested tuples with unguarded C recursion (a crash near 100,000)."""
    max_depth: int = 50
    """Deepest nesting of macro-defined function calls (recursion bound)."""
    max_items: int = 100_000
    """Largest container length or string length a macro may create."""
    max_int_bits: int = 4096
    """Largest integer (in bits) a multiplication, power or shift may produce."""
    max_tuple_depth: int = 100
    """Deepest tuple-in-tuple nesting a tuple display may create."""
    max_seconds: float = 1.0
    """Wall-clock seconds the macro's own code may run between two primitive actions (backstop)."""
    max_source_chars: int = 20_000
    """Longest macro source accepted by the compiler."""

    def __post_init__(self) -> None:
        if not 1 <= self.fuel <= _MAX_FUEL_CAP:
            raise ValueError(f"MacroLimits.fuel must be in [1, {_MAX_FUEL_CAP}], got {self.fuel}")
        for name in ("max_depth", "max_items", "max_int_bits", "max_tuple_depth", "max_source_chars"):
            if getattr(self, name) < 1:
                raise ValueError(f"MacroLimits.{name} must be >= 1, got {getattr(self, name)}")
        if not self.max_seconds > 0:
            raise ValueError(f"MacroLimits.max_seconds must be > 0, got {self.max_seconds}")


class MacroAbort(BaseException):
    """A guard stopped the macro; not an `Exception`, so macro code cannot catch it."""

    def __init__(self, diagnostic: Diagnostic) -> None:
        super().__init__(str(diagnostic))
        self.diagnostic = diagnostic


_SIZED = (str, bytes, list, tuple, dict, set, frozenset)
_SCALARS = (str, int, float, bool, type(None))
_BUILTIN_METHOD = types.BuiltinMethodType
# Width/precision fields of %-formatting: more than three digits, or '*', can allocate without bound.
_PERCENT_FIELD = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(\*|\d{4,}|\d*\.(?:\*|\d{4,}))")

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

ALLOWED_EXCEPTIONS: dict[str, type[Exception]] = {
    cls.__name__: cls
    for cls in (
        Exception,
        ValueError,
        KeyError,
        IndexError,
        TypeError,
        ZeroDivisionError,
        RuntimeError,
        LookupError,
        ArithmeticError,
        AssertionError,
    )
}
"""Exception classes macro code may raise and catch."""

_PLAIN_BUILTINS: dict[str, Any] = {
    "abs": abs,
    "all": all,
    "any": any,
    "bool": bool,
    "dict": dict,
    "divmod": divmod,
    "enumerate": enumerate,
    "float": float,
    "int": int,
    "isinstance": isinstance,
    "len": len,
    "list": list,
    "max": max,
    "min": min,
    "next": next,
    "reversed": reversed,
    "set": set,
    "sorted": sorted,
    "tuple": tuple,
    "zip": zip,
}
ALLOWED_BUILTIN_NAMES: frozenset[str] = frozenset(
    [*_PLAIN_BUILTINS, "range", "sum", "str", "round", "map", "filter", *ALLOWED_EXCEPTIONS]
)
"""Every builtin name macro code may use."""


class Guard:
    """Fuel, depth and size accounting for one macro invocation; its methods are the ``_rt_*`` hooks."""

    def __init__(self, limits: MacroLimits, filename: str, source: str) -> None:
        self.limits = limits
        self.filename = filename
        self.source = source
        self.fuel_used = 0
        self.depth = 0
        self.failure: Diagnostic | None = None
        self._deadline = time.perf_counter() + limits.max_seconds

    # ------------------------------------------------------------------ bookkeeping

    def arm(self) -> None:
        """Restart the wall-clock backstop; called before each resume of the macro."""
        self._deadline = time.perf_counter() + self.limits.max_seconds

    def fail(self, kind: str, message: str) -> NoReturn:
        """Record (first failure wins) and raise a `MacroAbort` located at the macro's current line."""
        if self.failure is None:
            line = col = None
            frame = sys._getframe(1)
            while frame is not None and frame.f_code.co_filename != self.filename:
                frame = frame.f_back
            if frame is not None:
                line, col = frame_position(frame)
            self.failure = Diagnostic(kind, message, line, col, source_line(self.source, line))
        raise MacroAbort(self.failure)

    def charge(self, units: int) -> None:
        """Spend fuel; fails with kind ``fuel`` when the invocation's budget is gone."""
        self.fuel_used += units
        if self.fuel_used > self.limits.fuel:
            self.fail(
                "fuel",
                f"ran out of fuel ({self.limits.fuel} units: loop iterations, calls, allocations); "
                "avoid unbounded loops and yield an action more often",
            )

    # ------------------------------------------------------------------ hooks called by macro code

    def tick(self) -> None:
        """One loop iteration / lambda call; also re-raises a recorded failure and checks the clock."""
        if self.failure is not None:
            raise MacroAbort(self.failure)
        self.fuel_used += 1
        if self.fuel_used > self.limits.fuel:
            self.charge(0)
        if not self.fuel_used & 255 and time.perf_counter() > self._deadline:
            self.fail(
                "timeout",
                f"ran longer than {self.limits.max_seconds}s without yielding an action; "
                "do less work per step",
            )

    def enter(self) -> None:
        """Entry of a macro-defined function."""
        self.tick()
        self.depth += 1
        if self.depth > self.limits.max_depth:
            self.fail(
                "recursion", f"function calls nested deeper than {self.limits.max_depth}; avoid recursion"
            )

    def exit(self) -> None:
        """Exit of a macro-defined function."""
        self.depth -= 1

    def post(self, value: Any) -> Any:
        """Bound and charge a freshly built container or string."""
        if isinstance(value, _SIZED):
            size = len(value)
            if size > self.limits.max_items:
                self.fail(
                    "memory",
                    f"built a {type(value).__name__} of {size} items (limit {self.limits.max_items})",
                )
            if size >= 64:
                self.charge(size >> 6)
        return value

    def call(self, func: Any, *args: Any, **kwargs: Any) -> Any:
        """Every call in macro code goes through here: charge, wrap key functions, bound the result."""
        self.tick()
        key = kwargs.get("key")
        if key is not None and callable(key):
            kwargs["key"] = lambda item: self.call(key, item)
        result = func(*args, **kwargs)
        if type(func) is _BUILTIN_METHOD:
            # Growing methods (append, extend, update, ...) mutate their receiver in place.
            self.post(func.__self__)
        return self.post(result)

    def binop(self, op: str, left: Any, right: Any) -> Any:
        """A binary operator, refused before it could build an oversized value."""
        base = op[1:] if op[0] == "i" else op
        if base == "Mult":
            self._check_mult(left, right)
        elif base == "Add":
            if isinstance(left, _SIZED) and isinstance(right, _SIZED):
                self._check_size(len(left) + len(right), type(left).__name__)
        elif base == "Pow":
            if type(left) in (int, bool) and type(right) in (int, bool) and right > 0 and abs(left) > 1:
                self._check_bits(right * abs(left).bit_length())
        elif base == "LShift":
            if type(left) in (int, bool) and type(right) in (int, bool) and left:
                self._check_bits(abs(left).bit_length() + right)
        elif base == "Mod" and isinstance(left, str):
            self._check_percent(left, right)
        return self.post(BINARY_OPS[op](left, right))

    def fmt(self, value: Any) -> Any:
        """An f-string field: only scalars may be formatted (a container's repr can be unbounded)."""
        if not isinstance(value, _SCALARS):
            self.fail(
                "exception",
                f"f-strings may only format str/int/float/bool/None in macros, not {type(value).__name__}",
            )
        return value

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

    # ------------------------------------------------------------------ checks

    def _check_size(self, size: int, what: str) -> None:
        if size > self.limits.max_items:
            self.fail("memory", f"would build a {what} of {size} items (limit {self.limits.max_items})")

    def _check_bits(self, bits: int) -> None:
        if bits > self.limits.max_int_bits:
            self.fail("memory", f"would build an integer of ~{bits} bits (limit {self.limits.max_int_bits})")

    def _check_mult(self, left: Any, right: Any) -> None:
        if isinstance(left, _SIZED) and type(right) in (int, bool):
            self._check_size(len(left) * max(int(right), 0), type(left).__name__)
        elif isinstance(right, _SIZED) and type(left) in (int, bool):
            self._check_size(len(right) * max(int(left), 0), type(right).__name__)
        elif type(left) in (int, bool) and type(right) in (int, bool):
            self._check_bits(abs(left).bit_length() + abs(right).bit_length())

    def _check_percent(self, fmt: str, args: Any) -> None:
        if _PERCENT_FIELD.search(fmt):
            self.fail("memory", "%-format widths/precisions above 999 or '*' are not allowed in macros")
        values = args.values() if isinstance(args, dict) else args if isinstance(args, tuple) else (args,)
        if not all(isinstance(v, _SCALARS) for v in values):
            self.fail("exception", "%-formatting may only format str/int/float/bool/None values in macros")

    # ------------------------------------------------------------------ builtins

    def _range(self, *args: int) -> range:
        try:
            result = range(*args)
            size = len(result)
        except OverflowError:
            self.fail("memory", f"range{args} is too long (limit {self.limits.max_items})")
        self._check_size(size, "range")
        return result

    def _sum(self, iterable: Iterable[Any], start: Any = 0) -> Any:
        # A list/str start would make sum() a quadratic, unbounded concatenation.
        if not isinstance(start, int | float):
            raise TypeError("sum() start must be a number in macros")
        return sum(iterable, start)

    def _str(self, value: Any = "") -> str:
        if not isinstance(value, _SCALARS):
            raise TypeError(
                f"str() accepts only str/int/float/bool/None in macros, not {type(value).__name__}"
            )
        return str(value)

    def _round(self, number: Any, ndigits: int | None = None) -> Any:
        if ndigits is not None and (type(ndigits) is not int or abs(ndigits) > 20):
            raise ValueError("round() ndigits must be an int in [-20, 20] in macros")
        return round(number, ndigits)

    def _map(self, func: Callable[..., Any], *iterables: Iterable[Any]) -> Iterator[Any]:
        for items in zip(*iterables):  # noqa: B905 - map() semantics: stop at the shortest
            yield self.call(func, *items)

    def _filter(self, func: Callable[[Any], Any] | None, iterable: Iterable[Any]) -> Iterator[Any]:
        for item in iterable:
            self.tick()
            if self.call(func, item) if func is not None else item:
                yield item

    def namespace(self) -> dict[str, Any]:
        """Fresh globals for one execution of the instrumented module: safe builtins + the hooks."""
        builtins = dict(_PLAIN_BUILTINS)
        builtins.update(ALLOWED_EXCEPTIONS)
        builtins.update(
            range=self._range,
            sum=self._sum,
            str=self._str,
            round=self._round,
            map=self._map,
            filter=self._filter,
        )
        return {
            "__builtins__": builtins,
            "__name__": "macro",
            "_rt_tick": self.tick,
            "_rt_enter": self.enter,
            "_rt_exit": self.exit,
            "_rt_call": self.call,
            "_rt_post": self.post,
            "_rt_binop": self.binop,
            "_rt_fmt": self.fmt,
            "_rt_tuple": self.tuple,
        }
