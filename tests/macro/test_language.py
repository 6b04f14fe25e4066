"""Ordinary Python that LLM-written macros use still works after instrumentation."""

from __future__ import annotations

from rlgpt.macro.compiler import MacroSource, check_macro
from rlgpt.macro.sandbox import MacroLimits

IDIOMATIC = """
LIMIT = 3

def pick(game, kinds):
    found = {k: game.find(k) for k in kinds}
    best = [p for k in kinds for p in found[k] if game.distance(p) <= 20]
    return min(best, key=lambda p: (game.distance(p), p)) if best else None

def steps(n):
    for i in range(n):
        yield "noop"

def m(game):
    counts = {"a": 1}
    counts["a"] += 2
    total = 0
    total += sum(x * 2 for x in range(4))
    label = f"{counts['a']}-{total:>3}-{1.5:.1f}"
    try:
        missing = counts["b"]
    except KeyError:
        missing = -1
    view = game.view()
    assert len(view) == 7 and len(view[0]) == 9
    target = pick(game, ["tree", "grass", "water"])
    if (n := len(game.actions)) == 17 and label == "3- 12-1.5" and missing == -1 and target is not None:
        yield from steps(LIMIT)
    path = "%s/%d" % ("x", 5)
    if path != "x/5" or sorted([3, 1, 2], reverse=True) != [3, 2, 1] or n != 17:
        raise ValueError(path)  # a failed outcome with the values that went wrong
"""


def test_idiomatic_macro_runs(run) -> None:
    result, _ = run(IDIOMATIC)
    assert result.outcome == "success", result.diagnostic
    assert result.steps == 3


def test_fuel_counts_loop_iterations(run) -> None:
    loop = "def m(game):\n    for i in range({n}):\n        pass\n    yield 'noop'\n"
    ok, _ = run(loop.format(n=900), limits=MacroLimits(fuel=1000))
    out, _ = run(loop.format(n=1100), limits=MacroLimits(fuel=1000))
    assert ok.outcome == "success" and out.outcome == "fuel"
    # The loop that burnt the fuel is named.
    assert (out.diagnostic.line, out.diagnostic.source_line) == (2, "for i in range(1100):")


def test_api_reference_lists_every_member() -> None:
    from rlgpt.agents.api_doc import api_reference
    from rlgpt.macro.api import API_MEMBERS

    text = api_reference()
    for name in API_MEMBERS - {"actions", "materials", "object_kinds"}:
        assert f"game.{name}" in text
    assert "game.step_toward(pos) -> str | None:" in text and "game.nearby(kind, distance=1) -> bool:" in text


def test_an_action_called_as_a_game_method_says_to_yield_it() -> None:
    source = "def m(game):\n    game.place_table()\n    yield 'noop'\n"
    (problem,) = check_macro(MacroSource("m", source))
    assert problem.kind == "forbidden_attribute" and problem.line == 2
    assert "yield 'place_table'" in problem.message
