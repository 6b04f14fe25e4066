"""Hostile plain-Python programs for the OS backstops of `rlgpt.macro.contain` (issue 13), as data.

Unlike `hostile_corpus` (macro source the sandbox sees), these run *without* the sandbox, as if generated
code had got past it: each is a module-level function (picklable, so it can travel to the contained child)
with the diagnostic kind `run_contained` must turn it into under `LIMITS`. Several are a single builtin
call implemented in C that keeps growing the object it iterates: no Python-level check runs inside it.
"""

from __future__ import annotations

import os
import signal
import time

from rlgpt.macro.contain import ContainLimits

LIMITS = ContainLimits(memory_mb=512, cpu_seconds=3, wall_seconds=30, max_result_mb=8)
"""Small caps, so that each program hits one within seconds."""
SLEEP_LIMITS = ContainLimits(memory_mb=512, cpu_seconds=3, wall_seconds=2)
"""For `sleeps`, which only the wall clock stops (it never ends by itself: no race with the clock)."""


def extend_enumerate_self() -> int:
    x = [0]
    x.extend(enumerate(x))  # iterates x while growing it, in C
    return len(x)


def extend_zip_self() -> int:
    x = [0]
    x.extend(zip(x, x))  # noqa: B905
    return len(x)


def iadd_enumerate_self() -> int:
    x = [0]
    x += enumerate(x)
    return len(x)


def iadd_doubling() -> int:
    x = [0]
    while True:
        x += x


def str_repeat() -> int:
    return len("a" * 10**10)


def format_width() -> int:
    return len(f"{1:{10**10}}")


def bytearray_huge() -> int:
    return len(bytearray(10**10))


def sorted_huge_range() -> int:
    return len(sorted(range(10**10)))


def sum_huge_range() -> int:
    return sum(range(10**13))  # C loop, no allocation: only the CPU cap stops it


def huge_int() -> int:
    return (1 << 10**11).bit_length()


def huge_int_text() -> int:
    return len(str(10**5000))  # CPython refuses int->str past 4300 digits (ValueError)


def deep_recursion() -> int:
    def f(n: int) -> int:
        return f(n + 1) + 1

    return f(0)


def lambda_recursion() -> int:
    f = None
    f = lambda n: f(n + 1)  # noqa: E731
    return f(0)


def sleeps() -> int:
    time.sleep(10**6)  # no CPU: only the wall clock stops it
    return 0


def exits() -> int:
    os._exit(7)


def segfaults() -> int:
    os.kill(os.getpid(), signal.SIGSEGV)
    return 0


def huge_result() -> bytes:
    return b"x" * (64 << 20)  # fits the memory cap, not the result cap


def unpicklable_result() -> object:
    return lambda: 0


class _Nasty(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no")


def nasty_exception() -> int:
    raise _Nasty(object())


def huge_int_float() -> float:
    return float(2**4000)


CORPUS: list[tuple[str, object, str]] = [
    ("extend_enumerate_self", extend_enumerate_self, "memory"),
    ("extend_zip_self", extend_zip_self, "memory"),
    ("iadd_enumerate_self", iadd_enumerate_self, "memory"),
    ("iadd_doubling", iadd_doubling, "memory"),
    ("str_repeat", str_repeat, "memory"),
    ("format_width", format_width, "memory"),
    ("bytearray_huge", bytearray_huge, "memory"),
    ("sorted_huge_range", sorted_huge_range, "memory"),
    ("sum_huge_range", sum_huge_range, "timeout"),
    ("huge_int", huge_int, "memory"),
    ("huge_int_text", huge_int_text, "exception"),
    ("deep_recursion", deep_recursion, "recursion"),
    ("lambda_recursion", lambda_recursion, "recursion"),
    ("sleeps", sleeps, "timeout"),  # with SLEEP_LIMITS
    ("exits", exits, "crashed"),
    ("segfaults", segfaults, "crashed"),
    ("huge_result", huge_result, "memory"),
    ("unpicklable_result", unpicklable_result, "exception"),
    ("nasty_exception", nasty_exception, "exception"),
    ("huge_int_float", huge_int_float, "exception"),
]
"""(id, function, the diagnostic kind it must end as)."""
