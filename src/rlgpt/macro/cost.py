"""The cost model of the macro sandbox: what each operation of macro code may cost, before it runs.

Most operations cost a fixed amount (the `rlgpt.macro.budget.InvocationBudget` hooks charge them). What
this module prices are the operations whose cost is not linear in the size of their operands, because
CPython runs them in C without a clock check: a deep comparison or hash of containers that share
sub-containers, a sort, a membership test on a list, a method that grows its receiver, ``%``-formatting,
a repetition. Each is charged by the *weight* of what it will visit (`weight`), or refused by the size of
what it would build, before it runs, so it fails with ``fuel`` or ``memory`` instead of running for
minutes. Every function takes the invocation's budget (`InvocationBudget`: its limits, ``charge``,
``spend``, ``fail``, ``remaining_weight``) as the one thing it may act on.
"""

from __future__ import annotations

import math
import re
import types
from collections import Counter
from itertools import chain, compress
from typing import Any

from rlgpt.macro.budget import SIZED, InvocationBudget

SCALAR_TYPES = frozenset((str, int, float, bool, type(None)))
"""Types macro code may format (f-strings, ``%``, ``str()``): their text has a known bound."""
ATOMS = frozenset({int, float, bool, type(None)})
"""Types whose comparison and hash cost does not depend on anything they contain."""
MAPPINGS = frozenset({dict, types.MappingProxyType})
"""Mapping types (`weight` walks their keys and values)."""
WALKED = frozenset(
    {list, tuple, set, frozenset, *MAPPINGS, type({}.keys()), type({}.values()), type({}.items())}
)
"""Container types a deep comparison or hash descends into (what `weight` walks)."""
HASHED = frozenset({*MAPPINGS, set, frozenset, range, type({}.keys()), type({}.items())})
"""Containers whose ``in`` is a hash lookup (range: arithmetic)."""
SEQUENCES = frozenset({list, tuple, type({}.values())})
"""Containers whose ``in`` compares against every element."""
GROWING = frozenset({"extend", "update", "union"})
"""Methods that grow their receiver (or build a new container) by the size of their arguments."""
HASHING_ARG = frozenset({"get", "setdefault", "pop", "add", "discard", "remove", "index", "count"})
"""Methods that hash or compare their first argument against the receiver's elements."""
WALKING_ARGS = frozenset(
    {"update", "union", "intersection", "difference", "issubset", "issuperset", "isdisjoint"}
)
"""Methods that hash every element of their arguments."""
COSTLY_BUILTINS = frozenset(map(id, (sorted, min, max, set, dict)))
"""Ids of the builtins that compare (sorted/min/max: ~log2(n) times per element) or hash (set/dict) every
element they are given; by id, since a macro may call an unhashable value."""
# Fields of %-formatting: flags, width, precision (''/digits/'*').
PERCENT_FIELD = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(\*|\d*)(?:\.(\*|\d*))?")
NUMBER_TEXT = 400
"""Upper bound on the text of one formatted float (``'%f' % 1e308`` has 316 characters)."""


def weight(meter: InvocationBudget, value: Any, budget: int) -> int:
    """What a deep comparison or hash of ``value`` may visit: 1 per element, +1 per 64 string characters.

    A container reached several times (``[row] * 1000``) counts each time, since comparing or hashing
    visits it each time; a cycle counts as unbounded. The walk itself is bounded: it charges 1 fuel per
    distinct container it expands after the first four (plus 1 per 64 children) and stops as soon as the
    weight is known to exceed ``budget`` (returning ``budget + 64``).
    """
    kind = type(value)
    if kind is str:
        return 1 + (len(value) >> 6)
    if kind not in WALKED:
        return 1
    if kind is tuple and len(value) < 64 and ATOMS.issuperset(map(type, value)):
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
            items = elements(node)
            alive.append(items)
            if len(alive) > 4:
                meter.charge(1)  # a longer walk costs about a loop iteration per container
            work += len(items)
            if work > budget:
                return over
            kids, counts = {}, Counter()
            kinds = set(map(type, items))
            if kinds == {tuple} and max(map(len, items)) < 8:
                # Only small tuples (a list or set of positions): no per-child work unless they nest.
                inner = set(map(type, chain.from_iterable(items)))
                if ATOMS.issuperset(inner):
                    extra = sum(map(len, items))
                    kinds = set()
            if not WALKED.isdisjoint(kinds):
                children = list(compress(items, map(WALKED.__contains__, map(type, items))))
                kids = dict(zip(map(id, children), children, strict=True))
                counts = Counter(map(id, children))
                meter.charge(len(kids) >> 6)
            frame[1:] = items, kids, counts, extra
            path.add(id(node))
            for n, (ident, kid) in enumerate(kids.items()):
                if ident in path:
                    return over
                if not n & 4095:
                    meter.charge(0)  # a clock check now and then
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

def compare_cost(meter: InvocationBudget, left: Any, op: str, right: Any) -> int:
    """Upper bound on the elements/64-character chunks a comparison visits."""
    budget = meter.remaining_weight()
    if op in ("Is", "IsNot"):
        return 0
    if op in ("In", "NotIn"):
        kind = type(right)
        if kind in HASHED:
            return weight(meter, left, budget)  # a hash and a comparison or two
        if kind is str:
            return length(left) + len(right)
        if kind in SEQUENCES:
            per_item = weight(meter, left, budget)
            if per_item * len(right) <= budget:
                return per_item * len(right)
            return weight(meter, right, budget)  # each element comparison stops at the element's size
        if type(left) in ATOMS:
            return 0  # comparing a number with anything is O(1); generators tick per item
        # Any other iterable (zip, enumerate, ...) yields at most max_items items.
        return weight(meter, left, budget) * meter.limits.max_items
    if type(left) is str and type(right) is str:
        return min(len(left), len(right))
    if op in ("Eq", "NotEq") and type(left) in (list, tuple) and type(right) in (list, tuple):
        if type(left) is not type(right) or len(left) != len(right):
            return 0  # decided without looking at an element
    # Equality and ordering stop at the smaller operand.
    cost = weight(meter, left, budget)
    return cost if cost <= budget else weight(meter, right, budget)

def charge_method(meter: InvocationBudget, name: str, receiver: Any, args: tuple[Any, ...],
                  keyed: bool) -> None:
    """Refuse or charge a method call that grows its receiver or compares/hashes its arguments."""
    if name in GROWING:
        # One call may add at most max_items before the receiver is checked: bound what it adds.
        added = sum(len(a) if hasattr(type(a), "__len__") else meter.limits.max_items for a in args)
        if added + length(receiver) > 2 * meter.limits.max_items:
            meter.fail("memory", f"{name}() would build a container over {meter.limits.max_items} items")
    if name in HASHING_ARG and args:
        cost = weight(meter, args[0], meter.remaining_weight())
        if type(receiver) in (list, tuple) and name in ("index", "count", "remove"):
            cost *= max(len(receiver), 1)
        meter.spend(cost)
    elif name in WALKING_ARGS:
        budget = meter.remaining_weight()
        meter.spend(sum(weight(meter, a, budget) for a in args))
    elif name == "sort" and not keyed:
        meter.spend(weight(meter, receiver, meter.remaining_weight())
                    * max(length(receiver), 1).bit_length())

def check_binop(meter: InvocationBudget, op: str, left: Any, right: Any) -> Any:
    """Refuse or charge a binary operator (``op``: an AST operator name, ``i`` + name in place) before it
    could build an oversized value or hash without bound; returns the right operand to use (an iterator
    added in place to a list, ``a += enumerate(a)``, is taken as a bounded list first, as ``a.extend``)."""
    base = op[1:] if op[0] == "i" else op
    if base == "Mult":
        check_mult(meter, left, right)
    elif base in ("Sub", "BitOr", "BitAnd", "BitXor") and type(left) in (set, frozenset, dict):
        meter.spend(weight(meter, right, meter.remaining_weight()))  # hashes every element of the right side
    elif base in ("Add", "Sub"):
        if op == "iAdd" and type(left) is list and not sized(right):
            right = meter.materialize(right)
        if isinstance(left, SIZED) and isinstance(right, SIZED):
            meter.check_size(len(left) + len(right), left)
        elif type(left) in (int, bool) and type(right) in (int, bool):
            # x + x doubles: bounding every int keeps each arithmetic step (and sum()) cheap.
            meter.check_bits(max(left.bit_length(), right.bit_length()) + 1)
    elif base == "Pow":
        if type(left) in (int, bool) and type(right) in (int, bool) and right > 0 and abs(left) > 1:
            meter.check_bits(int(right * math.log2(abs(left))) + 1)
    elif base == "LShift":
        if type(left) in (int, bool) and type(right) in (int, bool) and left:
            meter.check_bits(abs(left).bit_length() + right)
    elif base == "Mod" and type(left) is str:
        check_percent(meter, left, right)
    return right

def check_mult(meter: InvocationBudget, left: Any, right: Any) -> None:
    """Refuse a product (repetition or integer) that would exceed its size bound."""
    if isinstance(left, SIZED) and type(right) in (int, bool):
        meter.check_size(len(left) * max(int(right), 0), left)
    elif isinstance(right, SIZED) and type(left) in (int, bool):
        meter.check_size(len(right) * max(int(left), 0), right)
    elif type(left) in (int, bool) and type(right) in (int, bool):
        meter.check_bits(abs(left).bit_length() + abs(right).bit_length())

def check_percent(meter: InvocationBudget, fmt: str, args: Any) -> None:
    """Bound the *result* of ``fmt % args``: every field by its value, width and precision."""
    values = list(args.values()) if type(args) is dict else args if type(args) is tuple else (args,)
    if not all(type(v) in SCALAR_TYPES for v in values):
        meter.fail("exception", "%-formatting may only format str/int/float/bool/None values in macros")
    largest = max((text_size(v, "r") for v in values), default=0)
    estimate = len(fmt)
    for match in PERCENT_FIELD.finditer(fmt):
        width, precision = match.group(1), match.group(2)
        if width == "*" or precision == "*" or len(width) > 3 or len(precision or "") > 3:
            meter.fail("memory", "%-format widths/precisions above 999 or '*' are not allowed in macros")
        estimate += largest + int(width or 0) + int(precision or 0)
    if estimate > meter.limits.max_items:
        meter.fail(
            "memory", f"would build a str of ~{estimate} characters (limit {meter.limits.max_str_chars})"
        )

def fstring_size(meter: InvocationBudget, parts: tuple[Any, ...], values: tuple[Any, ...]) -> int:
    """Upper bound on the characters of an f-string (``parts``: literal strs and (conversion, spec) per
    field); a container field is refused (its repr can be unbounded)."""
    estimate = 0
    for part, value in zip(fields(parts), values, strict=True):
        conversion, spec = part
        if type(value) not in SCALAR_TYPES:
            meter.fail(
                "exception",
                "f-strings may only format str/int/float/bool/None in macros, "
                f"not {type(value).__name__}",
            )
        estimate += text_size(value, conversion) + spec_size(spec)
    return estimate + sum(len(p) for p in parts if type(p) is str)

def sized(value: Any) -> bool:
    """Whether iterating ``value`` visits a fixed number of items known up front (not an iterator)."""
    return hasattr(type(value), "__len__")


def length(value: Any) -> int:
    """``len(value)`` for sized values, 0 otherwise."""
    return len(value) if hasattr(type(value), "__len__") else 0


def elements(node: Any) -> list[Any]:
    """The direct children of a container `weight` walks (keys and values for mappings)."""
    if type(node) in MAPPINGS:
        return [*node.keys(), *node.values()]
    return list(node)


def fields(parts: tuple[Any, ...]) -> list[tuple[str, str]]:
    """The (conversion, spec) fields of an f-string's parts (`rlgpt.macro.sandbox.Guard.fstring`)."""
    return [p for p in parts if type(p) is not str]


def text_size(value: Any, conversion: str) -> int:
    """Upper bound on the characters of a formatted scalar (repr/ascii of a str escapes up to 10x)."""
    kind = type(value)
    if kind is str:
        return len(value) * (10 if conversion in ("r", "a") else 1) + 2
    if kind is int:
        return value.bit_length() // 3 + 2
    return NUMBER_TEXT


def spec_size(spec: str) -> int:
    """Width + precision of a constant format spec (each at most 999: the compiler checks)."""
    digits = "".join(c if c.isdigit() else " " for c in spec).split()
    return sum(int(d) for d in digits)
