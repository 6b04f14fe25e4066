"""`rlgpt.macro.quiet_loops`: a while loop with a pass that neither acts nor carries state is named, in the
``fuel`` diagnostic of the run that spun on it; loops that end some other way are not."""

from __future__ import annotations

import pytest

from rlgpt.macro.quiet_loops import explain_fuel, quiet_loops
from rlgpt.macro.sandbox import MacroLimits

SPINS = {
    "continue on a query": '''def m(game):
    while game.item("wood") < 1:
        tree = game.nearest("tree")
        if tree is None:
            continue
        ok = yield from game.walk_to("tree")
''',
    "a primitive called without yield from": '''def m(game):
    while game.item("wood") < 1:
        t = game.nearest("tree")
        if t is not None and game.is_facing(t):
            yield "do"
        elif t is not None:
            game.walk_to("tree")
        else:
            yield game.random_move()
''',
    "while True with a branch that passes": '''def m(game):
    while True:
        cow = game.nearest("cow")
        if cow is None:
            pass
        else:
            yield from game.walk_to("cow")
''',
}
NOT_NAMED = {
    # Loops that end another way, or that carry a value from one pass to the next (the last one does spin
    # after its second pass; the analysis stays conservative and does not follow values across passes).
    "a counter": '''def m(game):
    i = 0
    while game.item("wood") < 1:
        i += 1
        if i > 100:
            return
        if game.nearest("tree") is None:
            continue
        yield "do"
''',
    "every pass acts": '''def m(game):
    while game.drink < 9 and game.steps < 100:
        water = game.nearest("water")
        if water is None:
            yield game.random_move()
        elif game.is_facing(water):
            yield "do"
        else:
            action = game.step_toward(water)
            yield action if action is not None else game.random_move()
''',
    "a random exit": '''def m(game):
    while True:
        if game.random() < 0.1:
            break
    yield "noop"
''',
    "a list that grows": '''def m(game):
    seen = []
    while len(seen) < 3:
        seen.append(1)
    yield "noop"
''',
    "a value carried from the last pass": '''def m(game):
    last = None
    while game.item("wood") < 1:
        if last == "do":
            continue
        last = "do"
    yield "noop"
''',
    "a helper it does not follow": '''def helper(game, seen):
    seen.add(1)

def m(game):
    seen = set()
    while len(seen) < 2:
        helper(game, seen)
    yield "noop"
''',
}


@pytest.mark.parametrize("name", sorted(SPINS))
def test_a_pass_that_neither_acts_nor_carries_state_is_named(name):
    loops = quiet_loops(SPINS[name])
    assert len(loops) == 1 and loops[0][0] == 2, loops
    assert "the while loop at line 2 can go round without yielding" in explain_fuel(SPINS[name], 4)
    assert explain_fuel(SPINS[name], 1) == ""  # a line outside the loop


@pytest.mark.parametrize("name", sorted(NOT_NAMED))
def test_loops_that_end_another_way_or_carry_state_are_not(name):
    assert quiet_loops(NOT_NAMED[name]) == ()


def test_unparsable_code_has_no_quiet_loops():
    assert quiet_loops("def m(game):\n    while True\n") == ()


def test_the_fuel_diagnostic_of_a_run_that_spun_names_the_loop(run):
    code = '''def m(game):
    while game.item("diamond") < 1:
        diamond = game.nearest("diamond")
        if diamond is None:
            continue
        yield "do"
'''
    result, _ = run(code, limits=MacroLimits(fuel=500))
    assert result.outcome == "fuel"
    assert "the while loop at line 2 can go round without yielding (through line(s) 3, 4, 5)" in \
        result.diagnostic.message
    # A loop that ran out of fuel for another reason keeps the plain message.
    out, _ = run("def m(game):\n    for i in range(1100):\n        pass\n    yield 'noop'\n",
                 limits=MacroLimits(fuel=1000))
    assert out.outcome == "fuel" and "go round without yielding" not in out.diagnostic.message
