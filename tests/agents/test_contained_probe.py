"""Probes and reward dry runs run in a contained child process (issue 13): on real Crafter, no model
needed. What the generated code does there (run out of the memory cap, grow a list in C) is a failed probe
or a diagnostic for the repair loop; the loop's process goes on."""

from __future__ import annotations

import pytest

from rlgpt.agents.fast import FastAgent
from rlgpt.config import AgentConfig
from rlgpt.macro.compiler import MacroSource, compile_macro
from rlgpt.macro.contain import ContainLimits
from rlgpt.macro.diagnostics import MacroCompileError
from rlgpt.macro.probe import probe_macro
from rlgpt.macro.sandbox import MacroLimits

CONFIG = AgentConfig(probe_seeds=(0, 1), probe_max_steps=40, reward_dry_run_steps=10)

HOARD = """
def hoard(game):
    keep = []
    while True:
        keep.append(list(range(100000)))
        yield "noop"
"""
"""Legal code that keeps ~3.6 MB more alive at every step: ~115 MB by the end of its fuel."""


def agent(contain: ContainLimits | None = None, limits: MacroLimits | None = None) -> FastAgent:
    return FastAgent(None, CONFIG, limits=limits, contain=contain)  # type: ignore[arg-type]


def test_contained_probe_reports_what_an_in_process_probe_does() -> None:
    code = ('def walk(game):\n    for _ in range(5):\n        yield "move_left"\n'
            '    ok = yield from game.collect("wood")\n')
    fast = agent()
    compiled = compile_macro(MacroSource("walk", code))
    contained = fast.probe(compiled, "wood")
    direct = probe_macro(compiled, seeds=CONFIG.probe_seeds, max_steps=CONFIG.probe_max_steps, goal="wood")
    assert contained == direct and len(contained.calls) == 2


def test_memory_cap_reaches_the_probe() -> None:
    """The same legal macro: within a generous cap it runs until its fuel is gone; under a 48 MiB cap its
    allocation fails in the child and the probe reports ``memory``."""
    # A generous per-step clock: on a starved CPU (load 10) the 1 s default came before fuel or memory.
    limits = MacroLimits(fuel=50_000, max_seconds=15.0)
    compiled = compile_macro(MacroSource("hoard", HOARD), limits)
    roomy = agent(ContainLimits(memory_mb=1024), limits).probe(compiled, "")
    assert set(roomy.outcomes) == {"fuel"}
    tight = agent(ContainLimits(memory_mb=48), limits).probe(compiled, "")
    assert "memory" in tight.outcomes and all(c.outcome in ("memory", "fuel") for c in tight.calls)


@pytest.mark.parametrize("body", ["a = [0]\n    while True:\n        a.extend(enumerate(a))",
                                  "a = [0]\n    while True:\n        a += zip(a, a)"])
def test_c_level_self_growth_in_a_probe_is_a_failed_call(body: str) -> None:
    compiled = compile_macro(MacroSource("grow", f"def grow(game):\n    {body}\n    yield 'noop'\n"))
    report = agent(ContainLimits(memory_mb=512, wall_seconds=120)).probe(compiled, "wood")
    assert report.outcomes == {"memory": 2} and report.goal_rate == 0.0


@pytest.mark.parametrize(("body", "kind", "words"), [
    ("a = [0]\n    while True:\n        a.extend(enumerate(a))\n    return 0.0", "memory", "limit"),
    ("return 2 ** 4000", "exception", "bits"),
    ("return float('nan')", "exception", "finite"),
])
def test_hostile_reward_dry_run_is_a_diagnostic_for_repair(body: str, kind: str, words: str) -> None:
    with pytest.raises(MacroCompileError) as err:
        agent(ContainLimits(memory_mb=512)).check_reward(f"def reward(game, prev):\n    {body}\n")
    (diagnostic,) = err.value.diagnostics
    assert diagnostic.kind == kind and words in diagnostic.message
