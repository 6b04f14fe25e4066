"""Run generated code in a child process under OS backstops, so that nothing it does ends the caller.

The sandbox (`rlgpt.macro.sandbox`) bounds what macro and reward code can do from inside; this module is
the layer outside it, for every place that runs generated code off Sample Factory's env workers (probes,
reward dry runs, code mode, evaluation of macro policies). `run_contained` runs a function in a forked
child of the caller (multiprocessing ``fork``: nothing is pickled on the way in, the caller's imports and
warm state come for free, ~10 ms a call), with

- a memory cap: ``RLIMIT_AS`` at the child's size when it starts plus `ContainLimits.memory_mb`, so an
  allocation past it raises ``MemoryError`` (or, in C code that cannot raise, kills the child);
- a CPU-time cap: ``RLIMIT_CPU`` (``SIGXCPU``, then ``SIGKILL`` a second later);
- a wall-clock timeout from the parent, which kills the child when it expires;
- a bound on the size of the result sent back, so that the parent's memory does not grow with it.

A fork copies only the calling thread: a lock another thread of the caller held at that moment (llama.cpp,
torch) stays held in the child. The contained code does not touch those libraries, and were the child to
hang on one, the wall clock still ends it as a ``timeout`` diagnostic; the caller never waits longer.
(``forkserver`` would avoid that, but re-imports the caller's ``__main__`` in every child.)

Whatever happens in the child, the caller gets a `Contained` with either the value or a `Diagnostic`
(``memory``, ``timeout``, ``crashed``, ``recursion`` or ``exception``); `run_contained` itself raises only
for bugs of the caller (an unpicklable function).
"""

from __future__ import annotations

import faulthandler
import multiprocessing
import os
import pickle
import resource
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any

from rlgpt.macro.diagnostics import Diagnostic, describe_exception
from rlgpt.procs import limit_memory, lower_limit


@dataclass(frozen=True)
class ContainLimits:
    """OS-level bounds of one contained call (`run_contained`)."""

    memory_mb: int = 1024
    """Address space the child may add beyond its size at start (``RLIMIT_AS``), in MiB; 0 disables it."""
    cpu_seconds: float = 300.0
    """CPU seconds the child may use (``RLIMIT_CPU``); 0 disables it."""
    wall_seconds: float = 600.0
    """Wall-clock seconds before the parent kills the child (also what a hung child costs at most)."""
    max_result_mb: int = 64
    """Largest pickled result the child may send back, in MiB (larger: a ``memory`` diagnostic)."""

    @classmethod
    def from_config(cls, macros: Any) -> ContainLimits:
        """The limits a run's `rlgpt.config.MacroConfig` sets (``memory_limit_mb``, ``contain_*``)."""
        return cls(memory_mb=macros.memory_limit_mb, cpu_seconds=macros.contain_cpu_seconds,
                   wall_seconds=macros.contain_wall_seconds)

    def __post_init__(self) -> None:
        if self.memory_mb < 0 or self.cpu_seconds < 0 or self.max_result_mb < 1:
            raise ValueError(f"ContainLimits: memory_mb, cpu_seconds >= 0 and max_result_mb >= 1: {self}")
        if not self.wall_seconds > 0:
            raise ValueError(f"ContainLimits.wall_seconds must be > 0, got {self.wall_seconds}")


@dataclass(frozen=True)
class Contained:
    """What a contained call gave: its value, or why it has none."""

    value: Any = None
    """The function's return value (None when it failed)."""
    diagnostic: Diagnostic | None = None
    """Why the call failed, or None when it returned."""
    seconds: float = 0.0
    """Wall-clock seconds from start to result, fork included."""

    @property
    def ok(self) -> bool:
        """Whether the function returned."""
        return self.diagnostic is None


def _set_limits(limits: ContainLimits) -> None:
    """Apply the backstops to this (child) process; each only lowers a limit."""
    if limits.memory_mb:
        limit_memory(resource.RLIMIT_AS, limits.memory_mb)
    if limits.cpu_seconds:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        used = usage.ru_utime + usage.ru_stime
        lower_limit(resource.RLIMIT_CPU, int(used + limits.cpu_seconds) + 1, extra=1)


def _failure(exc: BaseException) -> Diagnostic:
    """The diagnostic of an exception other than MemoryError (see `_OUT_OF_MEMORY`)."""
    if isinstance(exc, RecursionError):
        return Diagnostic("recursion", "recursed too deeply")
    try:
        return Diagnostic("exception", describe_exception(exc))
    except BaseException:  # noqa: BLE001 - describing a hostile exception must not fail the report
        return Diagnostic("exception", type(exc).__name__)


_OUT_OF_MEMORY = Diagnostic("memory", "ran out of memory (the contained process's memory cap)")
"""Built before any call: reporting a MemoryError must not need memory."""


def _child(conn: Connection, limits: ContainLimits, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
    """The child's body: limits, call, send ``("ok", pickled value)`` or ``("failed", Diagnostic)``."""
    message: tuple[str, Any]
    try:
        try:
            faulthandler.disable()  # a crash is reported as a diagnostic, not a stack dump on stderr
            _set_limits(limits)
            data = pickle.dumps(fn(*args), protocol=pickle.HIGHEST_PROTOCOL)
        except MemoryError:
            # Leaving this block drops the traceback, and with it the frames holding what filled memory.
            message = ("failed", _OUT_OF_MEMORY)
        except BaseException as exc:  # noqa: BLE001 - every failure of generated code becomes a diagnostic
            message = ("failed", _failure(exc))
        else:
            if len(data) > limits.max_result_mb * 2**20:
                message = ("failed", Diagnostic(
                    "memory", f"returned {len(data) >> 20} MiB (limit {limits.max_result_mb} MiB)"))
            else:
                message = ("ok", data)
        conn.send(message)
        conn.close()
    except BaseException:  # noqa: BLE001 - even reporting failed: the parent reads the exit status
        os._exit(3)
    os._exit(0)  # skip the interpreter's clean-up of what the code left behind (and any atexit of it)


def _death(exitcode: int | None, limits: ContainLimits) -> Diagnostic:
    """What a child that exited without a result died of."""
    if exitcode is not None and exitcode < 0:
        sig = -exitcode
        if sig == signal.SIGXCPU:
            return Diagnostic("timeout", f"used more than {limits.cpu_seconds:g} s of CPU time")
        name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
        return Diagnostic("crashed", f"the process running the code died of {name}")
    return Diagnostic("crashed", f"the process running the code exited with status {exitcode}")


def run_contained(fn: Callable[..., Any], *args: Any, limits: ContainLimits | None = None) -> Contained:
    """Call ``fn(*args)`` in a fresh child process under `limits`; never raises for what ``fn`` does.

    ``fn`` and ``args`` reach the child through fork (any callable, nothing pickled); the result comes back
    pickled; a child that dies, runs out of time or memory, or raises, gives a
    `Contained` with a diagnostic. The child is always gone when this returns.
    """
    limits = limits or ContainLimits()
    context = multiprocessing.get_context("fork")
    start = time.perf_counter()
    receive, send = context.Pipe(duplex=False)
    child = context.Process(target=_child, args=(send, limits, fn, args), daemon=True)
    child.start()
    send.close()
    deadline = start + limits.wall_seconds
    message: tuple[str, Any] | None = None
    timed_out = False
    try:
        while message is None:
            left = deadline - time.perf_counter()
            if left <= 0:
                timed_out = True
                break
            ready = wait([receive, child.sentinel], timeout=left)
            if receive in ready or (ready and receive.poll(0)):
                try:
                    message = receive.recv()
                except (EOFError, OSError):  # died mid-send
                    break
            elif ready:  # died without a result
                break
    finally:
        if message is None and child.is_alive():
            child.kill()
        child.join()
        receive.close()
    exitcode = child.exitcode
    child.close()
    seconds = time.perf_counter() - start
    if message is None:
        if timed_out:
            diagnostic = Diagnostic("timeout", f"ran longer than {limits.wall_seconds:g} s; it was stopped")
        else:
            diagnostic = _death(exitcode, limits)
        return Contained(diagnostic=diagnostic, seconds=seconds)
    status, payload = message
    if status == "ok":
        return Contained(value=pickle.loads(payload), seconds=seconds)
    return Contained(diagnostic=payload, seconds=seconds)
