"""The builtins macro code may use: the allow-list the validator checks names against, and the guarded
versions of the builtins whose plain form could run without bound (``range``, ``sum``, ``str``, ``round``,
``map``, ``filter``).

`guarded_builtins` builds one invocation's ``__builtins__`` over its `rlgpt.macro.sandbox.Guard`; the
wrappers use only its ``call``, ``tick``, ``fail`` and ``limits`` (`Hooks`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any, NoReturn, Protocol

from rlgpt.macro.budget import MacroLimits
from rlgpt.macro.cost import SCALAR_TYPES
from rlgpt.macro.diagnostics import describe_value

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

PLAIN_BUILTINS: dict[str, Any] = {
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
"""Builtins macro code gets as they are (their calls still go through `Guard.call`, which charges them)."""

GUARDED_NAMES = ("range", "sum", "str", "round", "map", "filter")
"""Builtins macro code gets in a guarded form (`guarded_builtins`)."""

ALLOWED_BUILTIN_NAMES: frozenset[str] = frozenset([*PLAIN_BUILTINS, *GUARDED_NAMES, *ALLOWED_EXCEPTIONS])
"""Every builtin name macro code may use."""


class Hooks(Protocol):
    """What the guarded builtins use of their invocation's guard (`rlgpt.macro.sandbox.Guard`)."""

    limits: MacroLimits

    def call(self, func: Any, *args: Any, **kwargs: Any) -> Any:
        """Call `func` as macro code calls it (charged, its result bounded)."""

    def tick(self) -> None:
        """Charge one loop iteration."""

    def fail(self, kind: str, message: str) -> NoReturn:
        """Fail the invocation."""


def guarded_builtins(guard: Hooks) -> dict[str, Any]:
    """One invocation's ``__builtins__``: the plain builtins, the allowed exceptions and the guarded
    builtins bound to `guard`."""
    limits = guard.limits

    def guarded_range(*args: int) -> range:
        try:
            result = range(*args)
            size = len(result)
        except OverflowError:
            guard.fail("memory", f"range{describe_value(args, 60)} is too long (limit {limits.max_items})")
        if size > limits.max_items:
            guard.fail("memory", f"would build a range of {size} items (limit {limits.max_items})")
        return result

    def guarded_sum(iterable: Iterable[Any], start: Any = 0) -> Any:
        # A list/str start would make sum() a quadratic, unbounded concatenation.
        if not isinstance(start, int | float):
            raise TypeError("sum() start must be a number in macros")
        return sum(iterable, start)

    def guarded_str(value: Any = "") -> str:
        if type(value) not in SCALAR_TYPES:
            raise TypeError(
                f"str() accepts only str/int/float/bool/None in macros, not {type(value).__name__}"
            )
        return str(value)

    def guarded_round(number: Any, ndigits: int | None = None) -> Any:
        if ndigits is not None and (type(ndigits) is not int or abs(ndigits) > 20):
            raise ValueError("round() ndigits must be an int in [-20, 20] in macros")
        return round(number, ndigits)

    def guarded_map(func: Callable[..., Any], *iterables: Iterable[Any]) -> Iterator[Any]:
        for items in zip(*iterables):  # noqa: B905 - map() semantics: stop at the shortest
            yield guard.call(func, *items)

    def guarded_filter(func: Callable[[Any], Any] | None, iterable: Iterable[Any]) -> Iterator[Any]:
        for item in iterable:
            guard.tick()
            if guard.call(func, item) if func is not None else item:
                yield item

    guarded = dict(range=guarded_range, sum=guarded_sum, str=guarded_str, round=guarded_round,
                   map=guarded_map, filter=guarded_filter)
    assert tuple(guarded) == GUARDED_NAMES  # the allow-list and the wrappers agree
    return {**PLAIN_BUILTINS, **ALLOWED_EXCEPTIONS, **guarded}
