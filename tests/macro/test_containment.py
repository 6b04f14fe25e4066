"""Containment by design (issue 7): every corpus program in its own child process, safe value formatting,
compile-time robustness for any input, and the bare name ``_``."""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
import random
import resource
import signal

import numpy as np
import pytest
from hostile_corpus import COMPILE_CORPUS, RUNTIME_CORPUS, STARVED_SECONDS, contained_as, m

from rlgpt.envs.crafter import CrafterEnv
from rlgpt.envs.engine import CompiledBatch
from rlgpt.envs.tasks import TaskSpec
from rlgpt.macro.api import GameAPI
from rlgpt.macro.budget import InvocationBudget
from rlgpt.macro.compiler import MacroSource, compile_macro
from rlgpt.macro.cost import check_binop
from rlgpt.macro.diagnostics import MacroCompileError, describe_exception, describe_value
from rlgpt.macro.runtime import (
    MacroActionWrapper,
    _exception_diagnostic,
    _Session,
    find_crafter,
    run_macro,
)
from rlgpt.macro.sandbox import Guard, MacroAbort, MacroLimits
from rlgpt.rl.sf_batch import BatchTaskEnv

CHILD_SECONDS = 60.0
"""Wall-clock limit per child; a contained program needs ~1 s at most (its limits' max_seconds)."""
MAX_GROWTH = 512 << 20
"""Most resident memory one corpus program may add (the largest legal values take ~50 MiB)."""


def _batch_outcome(source: str, limits: MacroLimits | None) -> str:
    """The outcome of one call of ``source`` on the batch backend (`BatchTaskEnv`: the compiled engine, two
    games, the other one taking a primitive step), read from the macro's statistics."""
    env = BatchTaskEnv(CompiledBatch(2), TaskSpec.from_name("collect_wood"), 0,
                       macros=[MacroSource("m", source)], max_macro_steps=16, limits=limits)
    env.reset(seed=0)
    env.step(np.array([env.macros.n_primitive, 0]))
    stats = env.macros.stats["m"]
    assert stats.calls == 1
    if stats.successes or stats.interrupted:
        return "success" if stats.successes else "episode_end"
    return next(kind for kind, n in stats.failures.items() if n)


def _child(conn, env: CrafterEnv, source: str, limits: MacroLimits | None) -> None:
    """Compile ``source`` and, when it compiles, run it with `run_macro`, `MacroActionWrapper.step` and on
    the batch backend."""
    # Backstop against a regression that allocates without bound: fail this child, not the machine.
    with open("/proc/self/statm") as f:
        mapped, resident = (int(n) * os.sysconf("SC_PAGE_SIZE") for n in f.read().split()[:2])
    resource.setrlimit(resource.RLIMIT_AS, (mapped + (2 << 30), resource.RLIM_INFINITY))
    try:
        macro = compile_macro(MacroSource("m", source), limits)
    except MacroCompileError as exc:
        conn.send(("compile", sorted({d.kind for d in exc.diagnostics}), None, 0))
        return
    env.reset(seed=0)
    result = run_macro(env, macro, GameAPI(find_crafter(env), random.Random(0)), gamma=0.99, max_steps=16)
    wrapper = MacroActionWrapper(env, [MacroSource("m", source)], max_macro_steps=16, limits=limits, seed=0)
    wrapper.reset(seed=0)
    _, _, _, _, info = wrapper.step(wrapper.n_primitive)
    batched = _batch_outcome(source, limits)
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - resident
    conn.send(("run", result.outcome, (info["macro"]["outcome"], batched), grown))


def _in_child(env: CrafterEnv, source: str, limits: MacroLimits | None) -> tuple:
    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)
    child = context.Process(target=_child, args=(send, env, source, limits), daemon=True)
    child.start()
    send.close()
    ready = receive.poll(CHILD_SECONDS)
    if not ready:
        os.kill(child.pid, signal.SIGKILL)
    child.join(CHILD_SECONDS)
    assert ready, f"child still running after {CHILD_SECONDS}s"
    assert child.exitcode == 0, f"child died with exit code {child.exitcode}"
    return receive.recv()


@pytest.fixture(scope="module")
def forking_env() -> CrafterEnv:
    """A Crafter env built and reset once in the parent; every child inherits it warm through fork (and the
    compiled engine's kernels and noise tables, loaded here once)."""
    env = CrafterEnv(seed=0)
    env.reset(seed=0)
    CompiledBatch(2).reset([0, 1])
    return env


def test_every_corpus_program_in_its_own_child(forking_env: CrafterEnv) -> None:
    """Each program in a fresh child: compile, then a real Crafter run through `run_macro`, through
    `MacroActionWrapper.step` and through the batch backend's `BatchTaskEnv.step` (the compiled engine); the
    child exits normally, in time, with the expected outcome on each."""
    mismatches = []
    for name, source, kind in COMPILE_CORPUS:
        phase, kinds, _, _ = _in_child(forking_env, source, None)
        if phase != "compile" or kind not in kinds:
            mismatches.append((name, phase, kinds))
    for name, source, kind, limits in RUNTIME_CORPUS:
        if kind != "timeout":
            limits = dataclasses.replace(limits or MacroLimits(), max_seconds=STARVED_SECONDS)
        phase, outcome, wrapped, grown = _in_child(forking_env, source, limits)
        # Size limits hold before allocation: no program gets anywhere near the 2 GiB backstop.
        contained = phase == "run" and all(contained_as(kind, o) for o in (outcome, *wrapped))
        if not contained or grown > MAX_GROWTH:
            mismatches.append((name, phase, outcome, wrapped, grown >> 20))
    assert not mismatches
    assert len(COMPILE_CORPUS) + len(RUNTIME_CORPUS) >= 150  # the parent survived all of them


# ---------------------------------------------------------------- describe_value: never unbounded


def _nested(depth: int) -> list:
    value: list = []
    for _ in range(depth):
        value = [value]
    return value


class _Hostile:
    def __repr__(self) -> str:
        raise RecursionError("repr must not be called")

    __str__ = __repr__


def test_describe_value_is_bounded_for_any_value() -> None:
    cyclic: list = [1]
    cyclic.append(cyclic)
    cases = [_nested(100_000), cyclic, 10**5000, list(range(100_000)), "x" * 10**6, {"k": _nested(5000)}]
    for value in cases:
        text = describe_value(value)
        assert len(text) <= 163 and "\n" not in text
    assert describe_value(10**5000) == f"<int of {(10**5000).bit_length()} bits>"
    assert describe_value(_Hostile()) == "<_Hostile>"
    assert describe_value([_Hostile(), (1,), set(), {2: None}]) == "[<_Hostile>, (1,), set(), {2: None}]"
    assert describe_value((1, "a", 2.5, True)) == "(1, 'a', 2.5, True)"


def test_describe_exception_never_formats_unplain_values() -> None:
    assert describe_exception(ValueError(_nested(10_000))).startswith("ValueError: [[[[")
    assert describe_exception(TypeError(_Hostile(), 10**5000)).endswith("(<_Hostile>, <int of 16610 bits>)")
    assert describe_exception(KeyError("a\nb")) == "KeyError: a b"


class _Unprintable(Exception):
    """An exception whose every attribute access raises (only test code can build such a thing)."""

    def __getattribute__(self, name: str):
        if name in ("__class__", "__traceback__", "__cause__", "__context__"):
            return object.__getattribute__(self, name)
        raise RecursionError(name)


def test_exception_diagnostic_never_raises() -> None:
    macro = compile_macro(MacroSource("m", m("pass")))
    diagnostic = _exception_diagnostic(_Unprintable(), macro)
    assert diagnostic.kind == "exception" and "_Unprintable" in diagnostic.message
    assert _exception_diagnostic(MemoryError(), macro).kind == "memory"


def test_memory_error_in_macro_code_is_a_memory_failure() -> None:
    guard = Guard(MacroLimits(), "<macro:m>", "")

    def exhausted() -> None:
        raise MemoryError

    with pytest.raises(MacroAbort) as info:
        guard.call(exhausted)
    assert info.value.diagnostic.kind == "memory" and guard.failure is not None


# ---------------------------------------------------------------- compile: any input, MacroCompileError


@pytest.mark.parametrize(
    "code",
    [
        5,
        None,
        b"def m(game):\n    yield 'noop'\n",
        ["def m(game):"],
        "(" * 9000,
        "-" * 19000 + "1",
        "x = " + "1+" * 8000 + "1",
        "def m(game):\n    x = " + "[" * 199 + "]" * 199 + "\n    yield 'noop'\n",
        "\0",
        "\ud800",
        "#" * 10**6,
        "",
    ],
    ids=[
        "int",
        "none",
        "bytes",
        "list",
        "parens",
        "unary",
        "binop",
        "lists",
        "null",
        "surrogate",
        "huge",
        "empty",
    ],
)
def test_compile_any_input_gives_compile_error(code: object) -> None:
    with pytest.raises(MacroCompileError) as info:
        compile_macro(code)  # type: ignore[arg-type]
    assert info.value.diagnostics and all("\n" not in str(d) for d in info.value.diagnostics)
    with pytest.raises(MacroCompileError):
        compile_macro(MacroSource("m", code))  # type: ignore[arg-type]


def test_source_near_the_length_limit_compiles() -> None:
    body = "x = 1\n" * 1900
    source = m(body) + "#" * (20_000 - len(m(body)))
    assert len(source) == 20_000
    assert compile_macro(MacroSource("m", source)).name == "m"


def test_macro_name_must_be_a_str() -> None:
    with pytest.raises(ValueError, match="identifier"):
        MacroSource(5, "")  # type: ignore[arg-type]


# ---------------------------------------------------------------- the bare name _


def test_bare_underscore_is_a_local_variable(run) -> None:
    result, _ = run("def m(game):\n    for _ in range(3):\n        yield 'noop'\n    x = [_ for _ in 'ab']\n")
    assert result.outcome == "success" and result.steps == 3
    assert "_" not in Guard(MacroLimits(), "f", "").namespace()
    assert "_" not in Guard(MacroLimits(), "f", "").namespace()["__builtins__"]


IDIOMS = """
def m(game):
    visited = set()
    seen = []
    for _ in range(40):
        pos = game.pos
        if "wood" in game.inventory.keys() and "sapling" in game.inventory and pos not in visited:
            visited.add(pos)
        if pos not in seen and game.nearest("tree") != pos and 0 <= pos[0] < 64:
            seen.append(pos)
        best = sorted(game.find("grass"), key=lambda p: (game.distance(p), p))
        label = f"{pos[0]}-{pos[1]}" + "%d" % len(best)
        grid = {p: game.material_at(p) for p in best}
        if label and grid.get(pos) == "grass" and [pos] == [pos]:
            pass
    yield "noop"
"""


def test_everyday_idioms_stay_cheap(forking_env: CrafterEnv) -> None:
    """Comparisons, membership tests, keys and f-strings of small values add little fuel to what the loops
    and calls cost anyway (12,446 units for these 40 rounds before comparisons were charged)."""
    macro = compile_macro(MacroSource("m", IDIOMS), MacroLimits(fuel=50_000))
    forking_env.reset(seed=0)
    session = _Session(macro, GameAPI(find_crafter(forking_env), random.Random(0)))
    assert session.next_action() == 0 and session.failure is None
    assert session.guard.fuel_used < 14_000


def test_set_operators_are_charged_for_hashing_their_right_side(run) -> None:
    """``s - t``, ``s | t``, ``s & t``, ``s ^ t`` (and in place) hash every element of ``t``, and each is
    charged that alike. Set minus used to fall into the size check of ``+``/``-`` first: never charged, and
    a difference of two large sets (never larger than the left one) was refused as too big."""
    big = frozenset(range(60_000))
    fuel = {}
    for op in ("Sub", "iSub", "BitOr", "BitAnd", "BitXor", "iBitOr"):
        meter = InvocationBudget(MacroLimits(), "m", "")
        check_binop(meter, op, set(big), big)
        fuel[op] = meter.fuel_used
    assert len(set(fuel.values())) == 1 and fuel["Sub"] >= len(big) >> 6, fuel
    result, _ = run("def m(game):\n    s = set(range(60000))\n    s = s - s\n    yield 'noop'\n")
    assert result.outcome == "success", result.diagnostic
