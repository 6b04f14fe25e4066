"""API levels (`rlgpt.macro.api.API_LEVELS`): the ``primitives`` level's calls fail at once with a reason
(`GameAPI.last_failure`, in the probe's call record) when a prerequisite is missing, and reach their goal
when it holds, on real seeded Crafter states through the real compiler and runtime; the compiler enforces
the level; ``skills`` still loads as ``expert``."""

from __future__ import annotations

import random

import pytest

from rlgpt.agents.api_doc import api_reference
from rlgpt.config import AgentConfig
from rlgpt.envs.crafter import ACTION_NAMES, CrafterEnv
from rlgpt.errors import ConfigError
from rlgpt.macro.api import GameAPI
from rlgpt.macro.compiler import MacroSource, check_macro, compile_macro
from rlgpt.macro.diagnostics import MacroCompileError
from rlgpt.macro.probe import probe_macro
from rlgpt.macro.runtime import run_macro


@pytest.fixture(scope="module")
def env() -> CrafterEnv:
    return CrafterEnv(length=None)


def _call(env: CrafterEnv, seed: int, call: tuple[str, tuple], inventory: dict[str, int] | None = None,
          table: bool = False, max_steps: int = 120) -> tuple[bool, GameAPI, int]:
    """Play ``game.<name>(*args)`` (`call` is the name and the args: the primitive's own generator,
    stepping the env with each action it yields) from seed `seed`'s world with `inventory` added and, with
    `table`, a table on the tile left of the player; (what it returned, the game, the steps it took)."""
    env.reset(seed=seed)
    player = env.crafter._player
    for item, n in (inventory or {}).items():
        player.inventory[item] = n
    if table:
        px, py = (int(v) for v in player.pos)
        env.crafter._world[(px - 1, py)] = "table"
    game = GameAPI(env.crafter, random.Random(seed))
    name, args = call
    actions = getattr(game, name)(*args, max_steps=max_steps)
    steps = 0
    try:
        while True:
            env.step(ACTION_NAMES.index(next(actions)))
            steps += 1
    except StopIteration as stop:
        return stop.value, game, steps


@pytest.mark.parametrize("call, inventory, table, reason", [
    (("gather", ("stone",)), {}, False, "needs 1 wood_pickaxe"),
    (("gather", ("iron",)), {"wood_pickaxe": 1}, False, "needs 1 stone_pickaxe"),
    (("place_item", ("table",)), {"wood": 1}, False, "lacks 1 wood"),
    (("place_item", ("furnace",)), {"stone": 1}, True, "lacks"),
    (("craft_item", ("wood_pickaxe",)), {}, True, "lacks 1 wood"),
    (("craft_item", ("wood_pickaxe",)), {"wood": 1}, False, "needs a table nearby"),
])
@pytest.mark.parametrize("seed", [0, 1])
def test_a_primitive_fails_at_once_with_a_reason_when_a_prerequisite_is_missing(
        call, inventory, table, reason, seed, env) -> None:
    ok, game, steps = _call(env, seed, call, inventory, table)
    assert not ok and steps == 0
    assert reason in game.last_failure, game.last_failure
    assert not any(game.achievements.values())  # nothing was made, placed or collected on the way


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_each_primitive_reaches_its_goal_when_its_prerequisites_hold(seed, env) -> None:
    ok, game, _ = _call(env, seed, ("gather", ("wood", 2)))
    assert ok and game.item("wood") == 2 and game.last_failure == ""
    ok, game, _ = _call(env, seed, ("place_item", ("table",)), {"wood": 2})
    assert ok and game.achievements["place_table"] == 1
    ok, game, _ = _call(env, seed, ("craft_item", ("wood_pickaxe",)), {"wood": 1}, table=True)
    assert ok and game.item("wood_pickaxe") == 1
    ok, game, _ = _call(env, seed, ("gather", ("sapling",)), max_steps=200)
    assert ok and game.item("sapling") == 1


def test_craft_item_walks_back_to_a_table_it_saw_and_never_builds_one(env) -> None:
    # The macro places a table, walks off to gather wood (the table leaves the view), then crafts: the
    # primitive goes back to the table it saw; no second table is placed.
    code = ('def m(game):\n'
            '    ok = yield from game.place_item("table")\n'
            '    for i in range(12):\n'
            '        yield "move_left" if game.is_walkable((game.pos[0] - 1, game.pos[1])) else "move_up"\n'
            '    ok = yield from game.gather("wood", n=1, max_steps=150)\n'
            '    ok = yield from game.craft_item("wood_pickaxe", max_steps=150)\n'
            '    yield "noop" if ok else "sleep"\n')
    macro = compile_macro(MacroSource("m", code), api="primitives")
    made = 0
    for seed in range(4):
        env.reset(seed=seed)
        env.crafter._player.inventory["wood"] = 2
        game = GameAPI(env.crafter, random.Random(seed))
        run_macro(env, macro, game, gamma=1.0, max_steps=400)
        assert game.achievements["place_table"] == 1  # never builds another
        made += game.achievements["make_wood_pickaxe"]
    assert made >= 3


def test_the_probe_records_why_the_last_primitive_failed(env) -> None:
    code = 'def m(game):\n    ok = yield from game.gather("stone")\n    yield "noop"\n'
    report = probe_macro(compile_macro(MacroSource("m", code), api="primitives"), seeds=(0,), goal="stone",
                         env=env)
    call = report.calls[0]
    assert "wood_pickaxe" in call.failure and "last primitive failed" in call.line()


@pytest.mark.parametrize("call", ['game.collect("stone")', 'game.place("table")',
                                  'game.craft("wood_pickaxe")'])
def test_an_expert_call_in_a_primitives_macro_is_a_compile_diagnostic(call) -> None:
    code = f"def m(game):\n    ok = yield from {call}\n"
    with pytest.raises(MacroCompileError) as caught:
        compile_macro(MacroSource("m", code), api="primitives")
    diagnostic = caught.value.diagnostics[0]
    assert diagnostic.kind == "api_level" and "'primitives' API level" in diagnostic.message
    assert "game.gather" in diagnostic.message or "_item" in diagnostic.message
    compile_macro(MacroSource("m", code), api="expert")  # the same code is fine one level up


def test_a_primitive_in_a_basic_macro_is_a_compile_diagnostic() -> None:
    code = 'def m(game):\n    ok = yield from game.gather("wood")\n    yield game.last_failure\n'
    with pytest.raises(MacroCompileError) as caught:
        compile_macro(MacroSource("m", code), api="basic")
    assert {d.kind for d in caught.value.diagnostics} == {"api_level"}
    compile_macro(MacroSource("m", code), api="primitives")


def test_each_level_documents_what_it_compiles() -> None:
    basic, primitives, expert = (api_reference(level) for level in ("basic", "primitives", "expert"))
    assert "game.gather" not in basic and "game.step_toward" in basic
    assert "game.gather(name, n=1, max_steps=100)" in primitives and "game.last_failure" in primitives
    assert "game.collect(" not in primitives and "game.craft(" not in primitives
    assert "game.collect(name, n=1, max_steps=100)" in expert and "game.gather(" in expert
    with pytest.raises(ValueError):
        api_reference("everything")


def test_skills_is_a_deprecated_name_of_expert() -> None:
    with pytest.warns(FutureWarning, match="means 'expert'"):
        config = AgentConfig(api="skills")
    assert config.api == "expert"
    assert api_reference("skills") == api_reference("expert")
    with pytest.raises(ConfigError, match="basic, primitives, expert"):
        AgentConfig(api="everything")


def test_a_crafting_goals_macro_must_name_the_item_it_makes() -> None:
    from rlgpt.macro.validate import unnamed_goal

    shifted = 'def m(game):\n    ok = yield from game.gather("stone")\n    yield "make_wood_pickaxe"\n'
    for goal in ("make_stone_pickaxe", "stone_pickaxe"):
        found = unnamed_goal(shifted, goal, "primitives")
        assert found is not None and found.kind == "goal_unnamed" and found.line == 3, goal
        assert "It crafts 'make_wood_pickaxe' instead" in found.message
    # At `basic` there is no craft primitive: the action is what it names.
    assert "`yield 'make_stone_pickaxe'`" in unnamed_goal(shifted, "make_stone_pickaxe", "basic").message
    # Named in a craft or as the action, a stored skill, a goal that is no craft, unparsable code: no word.
    assert unnamed_goal(shifted.replace("make_wood", "make_stone"), "make_stone_pickaxe") is None
    assert unnamed_goal(shifted.replace('"make_wood_pickaxe"', "from skills.pick(game)"),
                        "make_stone_pickaxe") is None
    for goal in ("collect_stone", "stone", "place_table", "make_wood_pickaxe", "wood_pickaxe", "eat_cow", ""):
        assert unnamed_goal(shifted, goal) is None, goal
    assert unnamed_goal("def m(game:\n", "make_stone_pickaxe") is None


@pytest.mark.parametrize("call, says", [
    ('game.craft_item("stone_pickaxe", nearby=t)', "game.craft_item(item, max_steps=100): got an unexpected "
                                                   "keyword argument 'nearby'"),
    ("game.gather()", "game.gather(name, n=1, max_steps=100): missing a required argument: 'name'"),
    ('game.place_item("table", 5, 6)', "game.place_item(item, max_steps=25): too many positional arguments"),
])
def test_a_game_method_called_with_arguments_it_does_not_take_is_rejected(call: str, says: str) -> None:
    code = f"def m(game):\n    t = None\n    ok = yield from {call}\n"
    problems = check_macro(MacroSource("m", code), api="primitives")
    assert [(d.kind, d.line, d.message) for d in problems] == [("bad_arguments", 3, says)]
    # The same calls with arguments the methods take compile.
    fixed = {"nearby=t": "max_steps=40", "gather()": 'gather("wood", n=2)', "5, 6": "5"}
    for wrong, right in fixed.items():
        code = code.replace(wrong, right)
    assert check_macro(MacroSource("m", code), api="primitives") == ()


@pytest.mark.parametrize("call, says", [
    ('game.item("collect_stone")', "'collect_stone' is an achievement, not an item"),
    ('game.item("table")', "'table' is placed in the world, never held"),
    ('game.nearest("wood")', "unknown kind 'wood'; use one of game.materials or game.object_kinds: wood is "
                             "an inventory item, counted by game.item('wood'); 'tree' is the tile that gives "
                             "it"),
    ('game.is_facing("drink")', "'water' is the tile that gives it"),
    ('game.nearby("pig", 2)', "unknown kind 'pig'"),
])
def test_a_name_a_game_query_refuses_at_run_time_is_refused_at_compile_time(call: str, says: str) -> None:
    code = f"def m(game):\n    x = {call}\n    yield 'noop'\n"
    (problem,) = check_macro(MacroSource("m", code), api="primitives")
    assert problem.kind == "bad_arguments" and problem.line == 2 and says in problem.message
    # The names the queries take compile (an item counted, tiles and creatures looked for).
    for good in ('game.item("wood")', 'game.nearest("tree")', 'game.is_facing("water")',
                 'game.nearby("cow", 2)', 'game.nearest("table")', 'game.step_toward("stone")'):
        assert check_macro(MacroSource("m", code.replace(call, good)), api="primitives") == (), good
