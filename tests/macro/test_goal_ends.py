"""A sub-action's goal is its macro's termination condition, on real Crafter: a call ends at the step its
goal's counter goes up, in the per-env wrapper as in probes, whatever the code would do next; probes and
chain prefixes call an earlier goal-ended link again where a later link's recipe needs more of its item."""

from __future__ import annotations

import json
import random

import pytest
from crafter_helpers import chop_source

from rlgpt.agents.replies import FastReply
from rlgpt.envs.crafter import ACTION_NAMES, CrafterEnv
from rlgpt.envs.tasks import make_task_env
from rlgpt.macro.api import GameAPI
from rlgpt.macro.compiler import MacroSource, compile_macro
from rlgpt.macro.control import link_gap
from rlgpt.macro.files import sources_from_json, sources_to_json
from rlgpt.macro.goal import Goal
from rlgpt.macro.links import TOP_UP_CALLS, TopUp
from rlgpt.macro.prefix import PrefixLink, PrefixStart
from rlgpt.macro.probe import probe_macro, probe_step_bound
from rlgpt.macro.runtime import MacroActionWrapper, run_macro

# Chops for 300 actions, whatever it holds: without a goal it plays on past its first wood (what the 1.5B's
# collecting macros did: `do` at a spent tile until the player died, or a loop on a count that never rises).
GREEDY = chop_source("greedy", steps=300)
PLACE = 'def place(game):\n    yield "place_table"\n'


@pytest.fixture(scope="module")
def env() -> CrafterEnv:
    return CrafterEnv(length=None)


def call(env: CrafterEnv, source: MacroSource, seed: int = 0, max_steps: int = 400):
    env.reset(seed=seed)
    game = GameAPI(env.crafter, random.Random(seed))
    return run_macro(env, compile_macro(source), game, gamma=1.0, max_steps=max_steps), game


@pytest.mark.parametrize("goal", ["wood", "collect_wood"])
def test_a_call_ends_at_the_step_its_goal_goes_up(env, goal) -> None:
    free, game = call(env, MacroSource("greedy", GREEDY))
    assert game.item("wood") >= 2 and not free.at_goal  # the code alone collects on
    ended, game = call(env, MacroSource("greedy", GREEDY, goal=goal))
    assert ended.outcome == "success" and ended.at_goal and ended.returned_at is None
    assert game.item("wood") == 1 and ended.steps < free.steps
    assert ended.info["achievements"]["collect_wood"] == 1  # the last step was the one that collected


def test_code_that_returns_before_its_goal_is_not_ended_by_it(env) -> None:
    result, game = call(env, MacroSource("moves", 'def moves(game):\n    yield "noop"\n', goal="wood"))
    assert result.outcome == "success" and not result.at_goal and result.returned_at == 0
    assert game.item("wood") == 0


def test_the_training_wrapper_ends_calls_at_the_goal_and_counts_them() -> None:
    env = MacroActionWrapper(CrafterEnv(seed=0, length=10_000), [MacroSource("greedy", GREEDY, goal="wood")],
                             max_macro_steps=400, seed=0)
    env.reset(seed=0)
    for n in (1, 2):
        _, _, _, _, info = env.step(len(ACTION_NAMES))
        assert info["macro"]["outcome"] == "success" and info["inventory"]["wood"] == n
    stats = env.stats["greedy"]
    assert stats.goal_ends == stats.successes == 2
    assert env.episode_stats["greedy"].flat("greedy")["macro/greedy/goal_ends"] == 2.0


def test_a_goal_travels_with_the_source_and_bad_goals_are_refused() -> None:
    source = MacroSource("greedy", GREEDY, "chops", goal="wood")
    assert sources_from_json(sources_to_json([source])) == [source]
    reply = FastReply((source,), "", ("view",), 100)
    assert FastReply.from_dict(json.loads(json.dumps(reply.to_dict()))).macros == (source,)
    # Written before macros had goals: reads as none.
    assert MacroSource.from_dict({"name": "m", "code": PLACE}).goal == ""
    assert compile_macro(source).goal == Goal("item", "wood")
    with pytest.raises(ValueError, match="gold"):
        MacroSource("m", PLACE, goal="gold")
    with pytest.raises(ValueError, match="must be a str"):
        MacroSource("m", PLACE, goal=3)  # type: ignore[arg-type]


def test_a_probe_calls_an_earlier_link_again_for_what_a_recipe_lacks(env) -> None:
    # One goal-ended call of the chop gives one wood; a table takes two: the setup chops once more.
    chop = compile_macro(MacroSource("greedy", GREEDY, goal="wood"))
    report = probe_macro(PLACE, seeds=(0, 1), goal="place_table", env=env, setup=(chop,), max_steps=300)
    assert report.goal_rate == 1.0
    assert all(c.before.inventory["wood"] == 2 for c in report.calls)
    bound = probe_step_bound(2, 1, 0, 300, setup=1)
    assert report.env_steps <= bound and bound == 2 * ((1 + TOP_UP_CALLS) * 300 + 300)
    # A goal that no recipe makes (collecting) gets no top-up; nor does a link without a goal.
    alone = probe_macro(GREEDY, seeds=(0,), goal="sapling", env=env, setup=(chop,), max_steps=20)
    assert alone.calls[0].before.inventory["wood"] == 1
    free = compile_macro(MacroSource("chop", chop_source("chop")))
    assert probe_macro(PLACE, seeds=(0,), goal="place_table", env=env, setup=(free,)).goal_rate == 0.0


def test_a_link_whose_material_needs_a_tool_gets_the_earlier_tool_link_called_again(env) -> None:
    # The stone link of a chain, probed after a pickaxe link that missed (here: nothing crafted yet, wood
    # and a table at hand): the pickaxe link is called again, so the stone link is judged where it can mine.
    pick = compile_macro(MacroSource("pick", 'def pick(game):\n    yield "make_wood_pickaxe"\n',
                                     goal="make_wood_pickaxe"))
    chop = compile_macro(MacroSource("greedy", GREEDY, goal="wood"))
    for goal, crafted in (("collect_stone", 1), ("coal", 1), ("collect_wood", 0), ("eat_cow", 0)):
        env.reset(seed=0)
        player, world = env.crafter._player, env.crafter._world
        player.inventory["wood"] = 1
        world[(int(player.pos[0] + player.facing[0]), int(player.pos[1] + player.facing[1]))] = "table"
        top_up = TopUp()
        assert top_up.before(env, GameAPI(env.crafter, random.Random(0)), (chop, pick), goal, 20) is None
        assert player.inventory["wood_pickaxe"] == crafted, goal
        assert top_up.calls_left == TOP_UP_CALLS - crafted and top_up.steps == crafted
    assert link_gap("collect_iron", {"wood_pickaxe": 1}) == {"stone_pickaxe": 1}
    assert link_gap("stone", {"wood_pickaxe": 1}) == {} and link_gap("place_plant", {}) == {"sapling": 1}


def test_a_top_up_stops_at_a_link_that_adds_nothing(env) -> None:
    # A "wood" link that never collects: called once more, it added nothing, so it is not called again.
    idle = compile_macro(MacroSource("idle", 'def idle(game):\n    yield "noop"\n', goal="wood"))
    report = probe_macro(PLACE, seeds=(0,), goal="place_table", env=env, setup=(idle,), max_steps=8)
    assert report.goal_rate == 0.0 and report.env_steps == 1 + 1 + 1  # setup, one top-up, the call


def test_a_chain_prefix_tops_up_before_each_link() -> None:
    chop = compile_macro(MacroSource("greedy", GREEDY, goal="collect_wood"))
    table = compile_macro(MacroSource("place", PLACE))
    env = PrefixStart(make_task_env("make_wood_pickaxe"),
                      (PrefixLink(chop, "collect_wood"), PrefixLink(table, "place_table")), pool_size=0)
    _, info = env.reset(seed=3)
    assert info["prefix_ok"], info
    player = env.unwrapped.crafter._player
    assert player.achievements["place_table"] == 1 and player.inventory["wood"] == 0


def test_the_runtimes_goal_reader_counts_what_the_goal_counts(env) -> None:
    result, game = call(env, MacroSource("greedy", GREEDY, goal="wood"))
    assert result.at_goal
    for text in ("wood", "collect_wood", "sapling", "place_table"):
        goal = Goal.parse(text)
        assert goal.counter(game)() == goal.count(game) == (1 if "wood" in text else 0), text
