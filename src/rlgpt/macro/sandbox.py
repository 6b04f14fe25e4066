"""Run-time guards the compiler wires into macro code: fuel, clock, depth, size bounds, safe builtins.

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
*weight* of what it will visit (`Guard.weight`), so it fails with ``fuel`` instead of running for minutes.
"""

from __future__ import annotations

import math
import operator
import re
import sys
import time
import types
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import chain, compress, islice
from typing import Any, NoReturn

from rlgpt.macro.diagnostics import Diagnostic, describe_value, frame_position, source_line

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
    """Largest container length a macro may create."""
    max_str_chars: int = 10_000
    """Longest string a macro may create. Smaller than `max_items`: string comparisons and searches run in
    C without a clock check, and this bounds the longest of them (100,000 comparisons of 10,000-character
    strings take ~0.1 s)."""
    max_int_bits: int = 4096
    """Largest integer (in bits) arithmetic, ``int()`` or a call may produce."""
    max_tuple_depth: int = 100
    """Deepest tuple-in-tuple nesting a tuple display may create."""
    max_seconds: float = 1.0
    """Wall-clock seconds the macro's own code may run between two primitive actions (backstop)."""
    max_source_chars: int = 20_000
    """Longest macro source accepted by the compiler."""

    def __post_init__(self) -> None:
        if not 1 <= self.fuel <= _MAX_FUEL_CAP:
            raise ValueError(f"MacroLimits.fuel must be in [1, {_MAX_FUEL_CAP}], got {self.fuel}")
        for name in (
            "max_depth",
            "max_items",
            "max_str_chars",
            "max_int_bits",
            "max_tuple_depth",
            "max_source_chars",
        ):
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
_ATOMS = frozenset({int, float, bool, type(None)})
"""Types whose comparison and hash cost does not depend on anything they contain."""
_MAPPINGS = frozenset({dict, types.MappingProxyType})
_WALKED = frozenset(
    {list, tuple, set, frozenset, *_MAPPINGS, type({}.keys()), type({}.values()), type({}.items())}
)
"""Container types a deep comparison or hash descends into (what `Guard.weight` walks)."""
_HASHED = frozenset({*_MAPPINGS, set, frozenset, range, type({}.keys()), type({}.items())})
"""Containers whose ``in`` is a hash lookup (range: arithmetic)."""
_SEQUENCES = frozenset({list, tuple, type({}.values())})
"""Containers whose ``in`` compares against every element."""
_METHODS = (types.BuiltinMethodType, types.MethodDescriptorType)
"""Bound (``a.extend``) and unbound (``list.extend``) methods of builtin types."""
_GROWING = frozenset({"extend", "update", "union"})
"""Methods that grow their receiver (or build a new container) by the size of their arguments."""
_HASHING_ARG = frozenset({"get", "setdefault", "pop", "add", "discard", "remove", "index", "count"})
"""Methods that hash or compare their first argument against the receiver's elements."""
_WALKING_ARGS = frozenset(
    {"update", "union", "intersection", "difference", "issubset", "issuperset", "isdisjoint"}
)
"""Methods that hash every element of their arguments."""
# Fields of %-formatting: flags, width, precision (''/digits/'*').
_PERCENT_FIELD = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(\*|\d*)(?:\.(\*|\d*))?")
_NUMBER_TEXT = 400
"""Upper bound on the text of one formatted float (``'%f' % 1e308`` has 316 characters)."""

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

ALLOWED_BUILTIN_NAMES: frozenset[str] = frozenset(
    [*_PLAIN_BUILTINS, "range", "sum", "str", "round", "map", "filter", *ALLOWED_EXCEPTIONS]
)
"""Every builtin name macro code may use."""


class Guard:
    """Fuel, clock, depth and size accounting for one macro invocation; its methods are the ``_rt_*``
    hooks."""

    def __init__(self, limits: MacroLimits, filename: str, source: str) -> None:
        self.limits = limits
        self.filename = filename
        self.source = source
        self.fuel_used = 0
        self.depth = 0
        self.failure: Diagnostic | None = None
        self._units = 0  # element work below one fuel unit, carried over (see `spend`)
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
        """Spend fuel and check the clock; fails with ``fuel`` when the invocation's budget is gone."""
        self.fuel_used += units
        if self.fuel_used > self.limits.fuel:
            self.fail(
                "fuel",
                f"ran out of fuel ({self.limits.fuel} units: loop iterations, calls, allocations, "
                "comparisons); avoid unbounded loops and yield an action more often",
            )
        if time.perf_counter() > self._deadline:
            self._timeout()

    def spend(self, units: int) -> None:
        """Charge ``units`` of element work (comparisons, hashes): 1 fuel per 64, remainders carried over."""
        units += self._units
        self._units = units & 63
        if units >= 64:
            self.charge(units >> 6)

    def _timeout(self) -> NoReturn:
        self.fail(
            "timeout",
            f"ran longer than {self.limits.max_seconds}s without yielding an action; do less work per step",
        )

    def _budget(self) -> int:
        """Weight (see `weight`) the remaining fuel can pay for."""
        return max(self.limits.fuel - self.fuel_used, 0) << 6

    # ------------------------------------------------------------------ hooks called by macro code

    def stmt(self) -> None:
        """Before every statement: re-raise a recorded failure and check the clock (no fuel)."""
        if self.failure is not None:
            raise MacroAbort(self.failure)
        if time.perf_counter() > self._deadline:
            self._timeout()

    def tick(self) -> None:
        """One loop iteration / lambda call: 1 fuel; also re-raises a recorded failure, checks the clock."""
        if self.failure is not None:
            raise MacroAbort(self.failure)
        self.fuel_used += 1
        if self.fuel_used > self.limits.fuel or time.perf_counter() > self._deadline:
            self.charge(0)

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
        kind = type(value)
        if kind is str:
            size = len(value)
            if size > self.limits.max_str_chars:
                self.fail("memory", f"built a str of {size} characters (limit {self.limits.max_str_chars})")
            if size >= 64:
                self.charge(size >> 6)
        elif kind is int:
            if value.bit_length() > self.limits.max_int_bits:  # int() of a long digit string
                self._check_bits(value.bit_length())
        elif isinstance(value, _SIZED):
            size = len(value)
            if size > self.limits.max_items:
                self.fail(
                    "memory", f"built a {kind.__name__} of {size} items (limit {self.limits.max_items})"
                )
            if size >= 64:
                self.charge(size >> 6)
        return value

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
            if method in _GROWING and not all(map(_sized, rest)):
                # a.extend(enumerate(a)) iterates its own receiver as it grows it, in C, for ever: take the
                # argument's items first (at most max_items + 1), then grow by a known size.
                rest = tuple(map(self._materialize, rest))
                args = rest if kind is types.BuiltinMethodType else (receiver, *rest)
            self._charge_method(method, receiver, rest, kwargs.get("key") is not None)
        elif id(func) in _COSTLY_BUILTINS and args:
            if len(args) == 1 and type(args[0]) not in _WALKED:
                # Materialize a generator/zip/... first, so that its elements can be weighed.
                args = (self.post(list(args[0])),)
            items = args[0] if len(args) == 1 else args
            sorting = func is sorted
            factor = max(_length(items), 1).bit_length() if sorting else 1
            if kwargs.get("key") is None:  # with a key, only the keys are compared (see _sort_key)
                self.spend(self.weight(items, self._budget()) * factor)
        key = kwargs.get("key")
        if key is not None and callable(key):
            if (func is sorted and args) or method == "sort":
                factor = max(_length(receiver if method else args[0]), 1).bit_length()
            else:
                factor = 1
            kwargs["key"] = lambda item: self._sort_key(key, item, factor)
        try:
            result = func(*args, **kwargs)
        except MemoryError:
            self.fail("memory", "ran out of memory")
        if receiver is not None:
            # Growing methods (append, extend, update, ...) mutate their receiver in place.
            self.post(receiver)
        return self.post(result)

    def _materialize(self, value: Any) -> Any:
        """A sized value as is; any other iterable as a list of at most ``max_items`` items (else fail)."""
        if _sized(value):
            return value
        try:
            items = list(islice(value, self.limits.max_items + 1))
        except MemoryError:
            self.fail("memory", "ran out of memory")
        if len(items) > self.limits.max_items:
            self.fail("memory", f"grew a container by over {self.limits.max_items} items in one call")
        self.charge(len(items) >> 6)
        return items

    def _sort_key(self, key: Callable[[Any], Any], item: Any, factor: int) -> Any:
        value = self.call(key, item)
        if type(value) not in _ATOMS:
            # All keys exist before the first comparison: charge each by its weight times the comparisons
            # it takes part in (~log2(n) in a sort, 1 in min/max), before the sort can run.
            self.spend(self.weight(value, self._budget()) * factor)
        return value

    def _charge_method(self, name: str, receiver: Any, args: tuple[Any, ...], keyed: bool) -> None:
        """Refuse or charge a method call that grows its receiver or compares/hashes its arguments."""
        if name in _GROWING:
            # One call may add at most max_items before the receiver is checked: bound what it adds.
            added = sum(len(a) if hasattr(type(a), "__len__") else self.limits.max_items for a in args)
            if added + _length(receiver) > 2 * self.limits.max_items:
                self.fail("memory", f"{name}() would build a container over {self.limits.max_items} items")
        if name in _HASHING_ARG and args:
            cost = self.weight(args[0], self._budget())
            if type(receiver) in (list, tuple) and name in ("index", "count", "remove"):
                cost *= max(len(receiver), 1)
            self.spend(cost)
        elif name in _WALKING_ARGS:
            budget = self._budget()
            self.spend(sum(self.weight(a, budget) for a in args))
        elif name == "sort" and not keyed:
            self.spend(self.weight(receiver, self._budget()) * max(_length(receiver), 1).bit_length())

    def key(self, value: Any) -> Any:
        """A subscript key or a dict/set display element: hashing a tuple visits all of it."""
        if type(value) is tuple:
            self.spend(self.weight(value, self._budget()))
        return value

    def compare(self, left: Any, op: str, right: Any) -> Any:
        """A two-operand comparison, charged by what it will visit before it runs."""
        if self.failure is not None:
            raise MacroAbort(self.failure)
        if time.perf_counter() > self._deadline:
            self._timeout()
        if type(left) not in _ATOMS or type(right) not in _ATOMS:
            self.spend(self._compare_cost(left, op, right))
        return COMPARE_OPS[op](left, right)

    def operand(self, value: Any) -> Any:
        """An operand of a chained comparison (``a < b < c``): charged by its whole weight."""
        if self.failure is not None:
            raise MacroAbort(self.failure)
        if type(value) not in _ATOMS:
            self.spend(self.weight(value, self._budget()))
        elif time.perf_counter() > self._deadline:
            self._timeout()
        return value

    def _compare_cost(self, left: Any, op: str, right: Any) -> int:
        """Upper bound on the elements/64-character chunks a comparison visits."""
        budget = self._budget()
        if op in ("Is", "IsNot"):
            return 0
        if op in ("In", "NotIn"):
            kind = type(right)
            if kind in _HASHED:
                return self.weight(left, budget)  # a hash and a comparison or two
            if kind is str:
                return _length(left) + len(right)
            if kind in _SEQUENCES:
                per_item = self.weight(left, budget)
                if per_item * len(right) <= budget:
                    return per_item * len(right)
                return self.weight(right, budget)  # each element comparison stops at the element's size
            if type(left) in _ATOMS:
                return 0  # comparing a number with anything is O(1); generators tick per item
            # Any other iterable (zip, enumerate, ...) yields at most max_items items.
            return self.weight(left, budget) * self.limits.max_items
        if type(left) is str and type(right) is str:
            return min(len(left), len(right))
        if op in ("Eq", "NotEq") and type(left) in (list, tuple) and type(right) in (list, tuple):
            if type(left) is not type(right) or len(left) != len(right):
                return 0  # decided without looking at an element
        # Equality and ordering stop at the smaller operand.
        cost = self.weight(left, budget)
        return cost if cost <= budget else self.weight(right, budget)

    def weight(self, value: Any, budget: int) -> int:
        """What a deep comparison or hash of ``value`` may visit: 1 per element, +1 per 64 string characters.

        A container reached several times (``[row] * 1000``) counts each time, since comparing or hashing
        visits it each time; a cycle counts as unbounded. The walk itself is bounded: it charges 1 fuel per
        distinct container it expands after the first four (plus 1 per 64 children) and stops as soon as the
        weight is known to exceed ``budget`` (returning ``budget + 64``).
        """
        kind = type(value)
        if kind is str:
            return 1 + (len(value) >> 6)
        if kind not in _WALKED:
            return 1
        if kind is tuple and len(value) < 64 and _ATOMS.issuperset(map(type, value)):
            return 1 + len(value)  # the common case, a position or a small record: no walk
        over = budget + 64  # charging it exceeds the fuel left by at least one unit
        memo: dict[int, int] = {}  # id -> weight of a finished container
        path: set[int] = set()  # ids of the containers being expanded (a child among them is a cycle)
        alive: list[Any] = []  # keeps walked objects alive, so ids stay unique during the walk
        work = 0
        # Frames: [container, its elements, {id: child container}, Counter of child ids, extra weight]. The
        # per-element work is C-level iteration (map/compress/Counter/chain); Python loops only over distinct
        # child containers, and not even those when all of them are small tuples of numbers (positions).
        stack: list[list[Any]] = [[value, None, None, None, 0]]
        while stack:
            frame = stack[-1]
            node, items, kids, counts, extra = frame
            if items is None:
                if id(node) in memo:
                    stack.pop()
                    continue
                items = _elements(node)
                alive.append(items)
                if len(alive) > 4:
                    self.charge(1)  # a longer walk costs about a loop iteration per container
                work += len(items)
                if work > budget:
                    return over
                kids, counts = {}, Counter()
                kinds = set(map(type, items))
                if kinds == {tuple} and max(map(len, items)) < 8:
                    # Only small tuples (a list or set of positions): no per-child work unless they nest.
                    elements = set(map(type, chain.from_iterable(items)))
                    if _ATOMS.issuperset(elements):
                        extra = sum(map(len, items))
                        kinds = set()
                if not _WALKED.isdisjoint(kinds):
                    children = list(compress(items, map(_WALKED.__contains__, map(type, items))))
                    kids = dict(zip(map(id, children), children, strict=True))
                    counts = Counter(map(id, children))
                    self.charge(len(kids) >> 6)
                frame[1:] = items, kids, counts, extra
                path.add(id(node))
                for n, (ident, kid) in enumerate(kids.items()):
                    if ident in path:
                        return over
                    if not n & 4095:
                        self.charge(0)  # a clock check now and then
                    if ident not in memo:
                        stack.append([kid, None, None, None, 0])
                continue
            total = 1 + len(items) + extra
            if str in set(map(type, items)):
                total += sum(len(i) for i in items if type(i) is str) >> 6
            for ident, count in counts.items():
                total += count * (memo[ident] - 1)
            if total > budget:
                return over
            memo[id(node)] = total
            path.discard(id(node))
            stack.pop()
        return memo[id(value)]

    def binop(self, op: str, left: Any, right: Any) -> Any:
        """A binary operator, refused before it could build an oversized value."""
        base = op[1:] if op[0] == "i" else op
        if base == "Mult":
            self._check_mult(left, right)
        elif base in ("Add", "Sub"):
            if op == "iAdd" and type(left) is list and not _sized(right):
                right = self._materialize(right)  # a += enumerate(a): as a.extend, see `call`
            if isinstance(left, _SIZED) and isinstance(right, _SIZED):
                self._check_size(len(left) + len(right), left)
            elif type(left) in (int, bool) and type(right) in (int, bool):
                # x + x doubles: bounding every int keeps each arithmetic step (and sum()) cheap.
                self._check_bits(max(left.bit_length(), right.bit_length()) + 1)
        elif base == "Pow":
            if type(left) in (int, bool) and type(right) in (int, bool) and right > 0 and abs(left) > 1:
                self._check_bits(int(right * math.log2(abs(left))) + 1)
        elif base == "LShift":
            if type(left) in (int, bool) and type(right) in (int, bool) and left:
                self._check_bits(abs(left).bit_length() + right)
        elif base == "Mod" and type(left) is str:
            self._check_percent(left, right)
        elif base in ("Sub", "BitOr", "BitAnd", "BitXor") and type(left) in (set, frozenset, dict):
            self.spend(self.weight(right, self._budget()))  # hashes every element of the right side
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
        estimate = 0
        for part, value in zip(_fields(parts), values, strict=True):
            conversion, spec = part
            if type(value) not in _SCALAR_TYPES:
                self.fail(
                    "exception",
                    "f-strings may only format str/int/float/bool/None in macros, "
                    f"not {type(value).__name__}",
                )
            estimate += _text_size(value, conversion) + _spec_size(spec)
        estimate += sum(len(p) for p in parts if type(p) is str)
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

    # ------------------------------------------------------------------ checks

    def _check_size(self, size: int, like: Any) -> None:
        limit = self.limits.max_str_chars if type(like) is str else self.limits.max_items
        if size > limit:
            self.fail("memory", f"would build a {type(like).__name__} of {size} items (limit {limit})")

    def _check_bits(self, bits: int) -> None:
        if bits > self.limits.max_int_bits:
            self.fail("memory", f"would build an integer of ~{bits} bits (limit {self.limits.max_int_bits})")

    def _check_mult(self, left: Any, right: Any) -> None:
        if isinstance(left, _SIZED) and type(right) in (int, bool):
            self._check_size(len(left) * max(int(right), 0), left)
        elif isinstance(right, _SIZED) and type(left) in (int, bool):
            self._check_size(len(right) * max(int(left), 0), right)
        elif type(left) in (int, bool) and type(right) in (int, bool):
            self._check_bits(abs(left).bit_length() + abs(right).bit_length())

    def _check_percent(self, fmt: str, args: Any) -> None:
        """Bound the *result* of ``fmt % args``: every field by its value, width and precision."""
        values = list(args.values()) if type(args) is dict else args if type(args) is tuple else (args,)
        if not all(type(v) in _SCALAR_TYPES for v in values):
            self.fail("exception", "%-formatting may only format str/int/float/bool/None values in macros")
        largest = max((_text_size(v, "r") for v in values), default=0)
        estimate = len(fmt)
        for match in _PERCENT_FIELD.finditer(fmt):
            width, precision = match.group(1), match.group(2)
            if width == "*" or precision == "*" or len(width) > 3 or len(precision or "") > 3:
                self.fail("memory", "%-format widths/precisions above 999 or '*' are not allowed in macros")
            estimate += largest + int(width or 0) + int(precision or 0)
        if estimate > self.limits.max_items:
            self.fail(
                "memory", f"would build a str of ~{estimate} characters (limit {self.limits.max_str_chars})"
            )

    # ------------------------------------------------------------------ builtins

    def _range(self, *args: int) -> range:
        try:
            result = range(*args)
            size = len(result)
        except OverflowError:
            self.fail(
                "memory", f"range{describe_value(args, 60)} is too long (limit {self.limits.max_items})"
            )
        if size > self.limits.max_items:
            self.fail("memory", f"would build a range of {size} items (limit {self.limits.max_items})")
        return result

    def _sum(self, iterable: Iterable[Any], start: Any = 0) -> Any:
        # A list/str start would make sum() a quadratic, unbounded concatenation.
        if not isinstance(start, int | float):
            raise TypeError("sum() start must be a number in macros")
        return sum(iterable, start)

    def _str(self, value: Any = "") -> str:
        if type(value) not in _SCALAR_TYPES:
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
            "_rt_stmt": self.stmt,
            "_rt_tick": self.tick,
            "_rt_enter": self.enter,
            "_rt_exit": self.exit,
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


_SCALAR_TYPES = frozenset(_SCALARS)
_COSTLY_BUILTINS = frozenset(map(id, (sorted, min, max, set, dict)))
"""Ids of the builtins that compare (sorted/min/max: ~log2(n) times per element) or hash (set/dict) every
element they are given; by id, since a macro may call an unhashable value."""


def _sized(value: Any) -> bool:
    """Whether iterating ``value`` visits a fixed number of items known up front (not an iterator)."""
    return hasattr(type(value), "__len__")


def _length(value: Any) -> int:
    """``len(value)`` for sized values, 0 otherwise."""
    return len(value) if hasattr(type(value), "__len__") else 0


def _elements(node: Any) -> list[Any]:
    """The direct children of a container `Guard.weight` walks (keys and values for mappings)."""
    if type(node) in _MAPPINGS:
        return [*node.keys(), *node.values()]
    return list(node)


def _fields(parts: tuple[Any, ...]) -> list[tuple[str, str]]:
    return [p for p in parts if type(p) is not str]


def _text_size(value: Any, conversion: str) -> int:
    """Upper bound on the characters of a formatted scalar (repr/ascii of a str escapes up to 10x)."""
    kind = type(value)
    if kind is str:
        return len(value) * (10 if conversion in ("r", "a") else 1) + 2
    if kind is int:
        return value.bit_length() // 3 + 2
    return _NUMBER_TEXT


def _spec_size(spec: str) -> int:
    """Width + precision of a constant format spec (each at most 999: the compiler checks)."""
    digits = "".join(c if c.isdigit() else " " for c in spec).split()
    return sum(int(d) for d in digits)
