"""What generated code may spend: per macro invocation (fuel, clock, depth, sizes) and over a process (the
share of time).

`InvocationBudget` is the accounting of one macro invocation (from the policy choosing it to its end) under
its `MacroLimits`: fuel (loop iterations, calls, function entries, items built), a wall-clock backstop
between two primitive actions, the depth of macro-defined calls, and the size of every container, string
and integer built. Exhausting any of them fails the invocation with a `MacroAbort` carrying a
`Diagnostic` (``fuel``, ``timeout``, ``recursion``, ``memory``). What an operation costs is decided by
`rlgpt.macro.cost`; `rlgpt.macro.sandbox.Guard` adds the hooks that macro code calls.

The sandbox bounds one call (`MacroLimits.max_seconds`), but code that always stays just under that bound
would slow training down 100x without a single failure. A `TimeBudget` keeps, per macro or reward, the
seconds its own code took and the seconds of the steps it ran in (its code plus the game's steps), in
total and for the current episode, in CPU seconds of the thread that runs them (`cpu_seconds`). Once the
code has used `grace_seconds` and its share of that time is above `max_share`, it is disabled for the rest
of the process with a ``disabled`` diagnostic, which the caller records where the critic reads failures
(``macro/<name>/fail_disabled``, the reward's diagnostics).
"""

from __future__ import annotations

import gc
import sys
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import islice
from typing import Any, NoReturn

from rlgpt.macro.diagnostics import Diagnostic, frame_position, source_line
from rlgpt.macro.quiet_loops import explain_fuel


class _GCClock(threading.local):
    """Per thread: the CPU seconds Python's cyclic garbage collector took (`gc.callbacks`)."""

    seconds = 0.0
    started: float | None = None


_GC = _GCClock()


def _time_gc(phase: str, info: dict[str, Any]) -> None:
    if phase == "start":
        _GC.started = time.thread_time()
    elif _GC.started is not None:
        _GC.seconds += time.thread_time() - _GC.started
        _GC.started = None


gc.callbacks.append(_time_gc)


def cpu_seconds() -> float:
    """The clock every `TimeBudget` is charged by: this thread's CPU seconds, less those its garbage
    collections took.

    Wall-clock time also counts the seconds other processes held the CPU, and on a loaded machine it
    charged generated code for them: the batch backend counts a game step as a fixed `BATCH_STEP_SECONDS`
    (`rlgpt.macro.batch`), so a macro's share rose with the load alone. Measured on make_stone_pickaxe with
    two runs sharing the 2 cores: the model's working make_wood_pickaxe and make_stone_pickaxe macros were
    switched off in training (every call ``fail_disabled``) and validation success fell to 0.00-0.10, while
    the same macros and seeds on a quiet box trained to 0.70-0.95.

    A collection runs in whatever code allocates when the heap's thresholds are crossed, and takes time in
    proportion to the process's heap, not to that code's work: measured, one collection inside a cheap
    macro's call in a long test process (0.4 s) switched the macro off."""
    return time.thread_time() - _GC.seconds


DEFAULT_MAX_SHARE = 0.9
"""Default `TimeBudget.max_share` (`rlgpt.config.MacroConfig.max_time_share`)."""
DEFAULT_GRACE_SECONDS = 2.0
"""Default `TimeBudget.grace_seconds` (`rlgpt.config.MacroConfig.budget_grace_seconds`)."""


@dataclass
class TimeBudget:
    """Where one macro's (or the reward's) time goes, and whether it has been switched off."""

    what: str
    """What is timed, for the diagnostic ("macro 'go_to_tree'", "the dense reward")."""
    max_share: float = DEFAULT_MAX_SHARE
    """Largest share of the time of its steps the code may take (1: never disabled)."""
    grace_seconds: float = DEFAULT_GRACE_SECONDS
    """Code seconds before the share is enforced (start-up, a short run's noise)."""
    code_seconds: float = 0.0
    """Seconds in the code itself, over the process."""
    total_seconds: float = 0.0
    """Seconds of the calls it ran in (code + game steps), over the process."""
    calls: int = 0
    """Calls timed."""
    episode_code_seconds: float = 0.0
    """`code_seconds` of the current episode (`new_episode` resets it)."""
    disabled: Diagnostic | None = field(default=None)
    """Why it was switched off, or None while it runs."""

    def __post_init__(self) -> None:
        if not 0 < self.max_share <= 1:
            raise ValueError(f"TimeBudget.max_share must be in (0, 1], got {self.max_share}")
        if self.grace_seconds < 0:
            raise ValueError(f"TimeBudget.grace_seconds must be >= 0, got {self.grace_seconds}")

    def new_episode(self) -> None:
        """Start the per-episode count."""
        self.episode_code_seconds = 0.0

    def charge(self, code_seconds: float, total_seconds: float) -> Diagnostic | None:
        """Record one call (``code_seconds`` of its ``total_seconds`` were the code's); returns the
        ``disabled`` diagnostic on the call that disables it, None otherwise."""
        self.calls += 1
        self.code_seconds += code_seconds
        self.total_seconds += total_seconds
        self.episode_code_seconds += code_seconds
        if (self.disabled is None and self.max_share < 1 and self.code_seconds > self.grace_seconds
                and self.code_seconds > self.max_share * self.total_seconds):
            share = self.code_seconds / self.total_seconds
            per_call = self.code_seconds / self.calls
            self.disabled = Diagnostic(
                "disabled", f"{self.what} took {share:.0%} of the time of its steps "
                f"({per_call * 1000:.1f} ms of code per call over {self.calls} calls; limit "
                f"{self.max_share:.0%}); it was switched off for the rest of the run: do less work per step")
            return self.disabled
        return None


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


SIZED = (str, bytes, list, tuple, dict, set, frozenset)
"""Types whose size `InvocationBudget.post` bounds."""


class InvocationBudget:
    """Fuel, clock, depth and size accounting for one macro invocation (`MacroLimits`); a failure is
    recorded (``failure``, first one wins) and raised as `MacroAbort`."""

    def __init__(self, limits: MacroLimits, filename: str, source: str) -> None:
        self.limits = limits
        self.filename = filename
        self.source = source
        self.fuel_used = 0
        self.depth = 0
        self.failure: Diagnostic | None = None
        self.returned_at: int | None = None
        """Line of the ``return`` that ended the function exited last (0: it ran off its end); for the
        macro's entry generator, where a call that returned without its goal gave up."""
        self._returns: list[int] = []  # per active function: the line of the return it is taking, or 0
        self._units = 0  # element work below one fuel unit, carried over (see `spend`)
        self._deadline = time.perf_counter() + limits.max_seconds

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
            if kind in ("fuel", "timeout"):  # name the loop that spins, where one does
                message += explain_fuel(self.source, line)
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

    def remaining_weight(self) -> int:
        """Weight (`rlgpt.macro.cost.weight`) the remaining fuel can pay for."""
        return max(self.limits.fuel - self.fuel_used, 0) << 6

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
        self._returns.append(0)
        if self.depth > self.limits.max_depth:
            self.fail(
                "recursion", f"function calls nested deeper than {self.limits.max_depth}; avoid recursion"
            )

    def exit(self) -> None:
        """Exit of a macro-defined function."""
        self.depth -= 1
        self.returned_at = self._returns.pop() if self._returns else None

    def returning(self, line: int) -> None:
        """Before a ``return`` statement at `line`: `stmt`, and remember where the function returns."""
        self.stmt()
        if self._returns:
            self._returns[-1] = line

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
                self.check_bits(value.bit_length())
        elif isinstance(value, SIZED):
            size = len(value)
            if size > self.limits.max_items:
                self.fail(
                    "memory", f"built a {kind.__name__} of {size} items (limit {self.limits.max_items})"
                )
            if size >= 64:
                self.charge(size >> 6)
        return value

    def materialize(self, value: Iterable[Any]) -> Any:
        """A sized value as is; any other iterable as a list of at most ``max_items`` items (else fail)."""
        if hasattr(type(value), "__len__"):
            return value
        try:
            items = list(islice(value, self.limits.max_items + 1))
        except MemoryError:
            self.fail("memory", "ran out of memory")
        if len(items) > self.limits.max_items:
            self.fail("memory", f"grew a container by over {self.limits.max_items} items in one call")
        self.charge(len(items) >> 6)
        return items

    def check_size(self, size: int, like: Any) -> None:
        """Fail with ``memory`` when a container or string like `like` would get `size` items."""
        limit = self.limits.max_str_chars if type(like) is str else self.limits.max_items
        if size > limit:
            self.fail("memory", f"would build a {type(like).__name__} of {size} items (limit {limit})")

    def check_bits(self, bits: int) -> None:
        """Fail with ``memory`` when an integer would get `bits` bits."""
        if bits > self.limits.max_int_bits:
            self.fail("memory", f"would build an integer of ~{bits} bits (limit {self.limits.max_int_bits})")
