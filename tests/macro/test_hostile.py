"""Hostile macro corpus: every program is rejected at compile time or contained at run time, with the right
diagnostic and no effect on the game, the API or the interpreter."""

from __future__ import annotations

import builtins
import dataclasses
import os

import pytest
from hostile_corpus import COMPILE_CORPUS, RUNTIME_CORPUS, STARVED_SECONDS, contained_as, m

from rlgpt.envs.crafter import CrafterEnv
from rlgpt.macro.api import ACTION_NAMES, API_MEMBERS, GameAPI
from rlgpt.macro.compiler import MacroSource, check_macro, compile_macro
from rlgpt.macro.diagnostics import MacroCompileError
from rlgpt.macro.sandbox import MacroLimits


@pytest.mark.parametrize(
    ("source", "kind"), [c[1:] for c in COMPILE_CORPUS], ids=[c[0] for c in COMPILE_CORPUS]
)
def test_compile_corpus_rejected(source: str, kind: str) -> None:
    problems = check_macro(MacroSource("m", source))
    assert kind in {p.kind for p in problems}, [str(p) for p in problems]
    with pytest.raises(MacroCompileError) as info:
        compile_macro(MacroSource("m", source))
    assert info.value.diagnostics == problems
    for p in problems:
        assert p.message and "\n" not in str(p)


def test_compile_diagnostic_points_at_the_line() -> None:
    source = "def m(game):\n    a = 1\n    b = game.__dict__\n    yield 'noop'\n"
    (problem,) = check_macro(MacroSource("m", source))
    assert (problem.kind, problem.line, problem.col) == ("forbidden_attribute", 3, 9)
    assert problem.source_line == "b = game.__dict__"
    assert problem.to_dict()["line"] == 3


def test_every_violation_is_reported() -> None:
    source = m("import os\nx = open('f')\ny = game._game")
    kinds = [p.kind for p in check_macro(MacroSource("m", source))]
    assert kinds.count("forbidden_node") == 1 and "forbidden_name" in kinds and "forbidden_attribute" in kinds


def test_clean_source_has_no_diagnostics() -> None:
    assert (
        check_macro(MacroSource("m", m("x = sorted(game.find('tree'), key=lambda p: game.distance(p))")))
        == ()
    )


@pytest.mark.parametrize(
    ("source", "kind", "limits"), [c[1:] for c in RUNTIME_CORPUS], ids=[c[0] for c in RUNTIME_CORPUS]
)
def test_runtime_corpus_contained(
    run, initial_state: dict, source: str, kind: str, limits: MacroLimits | None
) -> None:
    builtins_before = dict(vars(builtins))
    environ_before = dict(os.environ)
    if kind != "timeout":
        limits = dataclasses.replace(limits or MacroLimits(), max_seconds=STARVED_SECONDS)
    result, env = run(source, limits=limits)
    assert contained_as(kind, result.outcome), (result.outcome, result.diagnostic)
    diagnostic = result.diagnostic
    if kind == "success":
        assert diagnostic is None
    else:
        assert diagnostic is not None and diagnostic.kind == result.outcome
        assert len(diagnostic.message) < 400 and "\n" not in diagnostic.message
        if kind != "max_steps":
            assert diagnostic.line is not None and diagnostic.source_line
        # Contained: the game saw only the macro's own primitive steps (noops here), nothing else changed.
        assert result.steps == (16 if kind == "max_steps" else 1)
    player = env.crafter._player
    assert player.inventory == initial_state["inventory"]
    assert tuple(player.pos) == initial_state["pos"] and env.crafter._step == result.steps
    assert ACTION_NAMES[:2] == ("noop", "move_left") and len(ACTION_NAMES) == 17
    assert {n for n in dir(GameAPI) if not n.startswith("_")} == API_MEMBERS
    assert dict(vars(builtins)) == builtins_before and dict(os.environ) == environ_before


TIMEOUT_CASES = [c for c in RUNTIME_CORPUS if c[2] == "timeout"]


@pytest.mark.parametrize(
    ("source", "limits"), [(c[1], c[3]) for c in TIMEOUT_CASES], ids=[c[0] for c in TIMEOUT_CASES]
)
def test_timeout_programs_outlast_their_clock(run, source: str, limits: MacroLimits) -> None:
    """A program expected to time out is stopped by its clock with room to spare: at 5x its max_seconds the
    clock still comes first (no running out of fuel, no end of its own), so a faster machine still times
    it out at 1x. Slower (loaded) machines only make the clock come sooner."""
    result, _ = run(source, limits=dataclasses.replace(limits, max_seconds=5 * limits.max_seconds))
    assert result.outcome == "timeout", (result.outcome, result.diagnostic)


@pytest.fixture(scope="module")
def initial_state() -> dict:
    """Inventory and position of the player right after ``reset(seed=0)``."""
    env = CrafterEnv(seed=0)
    env.reset(seed=0)
    player = env.crafter._player
    return {"inventory": dict(player.inventory), "pos": tuple(player.pos)}


def test_corpus_size() -> None:
    assert len(COMPILE_CORPUS) + len(RUNTIME_CORPUS) >= 40


def test_runtime_diagnostic_location(run) -> None:
    source = "def m(game):\n    yield 'noop'\n    x = [1, 2]\n    y = x[5]\n"
    result, _ = run(source)
    d = result.diagnostic
    assert (d.kind, d.line, d.source_line) == ("exception", 4, "y = x[5]")
    assert d.message.startswith("IndexError") and result.steps == 1
