"""Chain-prefix starts (`rlgpt.macro.prefix.PrefixStart`) and the game-state snapshots under them, on real
Crafter: a start state is exact (the same world, creatures, inventory and RNG as playing the prefix, and
the same future for the same actions), the prefix's steps are reported, pooled starts cost none, and a
prefix that misses its goal is retried on new worlds, then given up on."""

from __future__ import annotations

import random

import numpy as np
import pytest

from rlgpt.envs.crafter import CrafterEnv
from rlgpt.envs.tasks import make_task_env
from rlgpt.macro.api import GameAPI
from rlgpt.macro.compiler import MacroSource, compile_macro
from rlgpt.macro.prefix import PrefixLink, PrefixStart
from rlgpt.macro.runtime import run_macro

WOOD = compile_macro(MacroSource("wood", 'def wood(game):\n    yield from game.collect("wood", 3)\n'))
TABLE = compile_macro(MacroSource("table", 'def table(game):\n    yield from game.place("table")\n'))
LINKS = (PrefixLink(WOOD, "collect_wood"), PrefixLink(TABLE, "place_table"))


def game_of(env: CrafterEnv) -> dict:
    world, player = env.crafter._world, env.crafter._player
    objs = [(type(o).__name__, tuple(int(v) for v in o.pos), getattr(o, "health", None))
            for o in world.objects]
    return {"materials": world._mat_map.copy(), "objects": objs, "pos": tuple(int(v) for v in player.pos),
            "inventory": dict(player.inventory), "achievements": dict(player.achievements),
            "rng": world.random.get_state()[1].copy(), "step": env.crafter._step}


def assert_same_game(a: dict, b: dict) -> None:
    assert np.array_equal(a["materials"], b["materials"]) and np.array_equal(a["rng"], b["rng"])
    assert {k: v for k, v in a.items() if k not in ("materials", "rng")} == \
        {k: v for k, v in b.items() if k not in ("materials", "rng")}


def play(env, actions):
    out = []
    for action in actions:
        obs, reward, terminated, truncated, info = env.step(action)
        out.append((obs["view"].tobytes(), obs["vector"].tobytes(), reward, terminated, truncated))
        if terminated or truncated:
            break
    return out


@pytest.mark.parametrize("seed", [0, 7, 21])
def test_a_prefix_start_is_the_state_playing_the_prefix_reaches(seed) -> None:
    env = PrefixStart(make_task_env("make_wood_pickaxe"), LINKS, pool_size=2)
    _, info = env.reset(seed=seed)
    assert info["prefix_ok"] and info["prefix_steps"] > 0
    started = game_of(env.unwrapped)

    # The same prefix played by hand on a fresh game of the same world: PrefixStart draws the macros'
    # RNG seed as its first draw from random.Random(seed).
    by_hand = CrafterEnv(length=None)
    by_hand.reset(seed=seed)
    game = GameAPI(by_hand.crafter, random.Random(random.Random(seed).randrange(2**31)))
    steps = sum(run_macro(by_hand, link.macro, game, gamma=1.0, max_steps=300).steps for link in LINKS)
    assert steps == info["prefix_steps"]
    assert started["achievements"]["place_table"] == 1
    assert_same_game(started, game_of(by_hand))

    actions = [random.Random(seed).randrange(17) for _ in range(300)]
    assert play(env.unwrapped, actions) == play(by_hand, actions)  # the game, under the task's reward


def test_pooled_starts_cost_no_steps_and_replay_a_saved_state_exactly() -> None:
    env = PrefixStart(make_task_env("make_wood_pickaxe"), LINKS, pool_size=2)
    fresh = []
    for seed in (3, 4):
        _, info = env.reset(seed=seed)
        assert info["prefix_steps"] > 0
        fresh.append(game_of(env.unwrapped))
    assert len(env.pool) == 2
    for _ in range(4):
        _, info = env.reset()
        assert info["prefix_steps"] == 0 and info["prefix_ok"]
        assert env.env._steps == 0  # the task's step limit counts from the start state
        restored = game_of(env.unwrapped)
        match = [i for i, f in enumerate(fresh) if np.array_equal(f["materials"], restored["materials"])]
        assert len(match) == 1
        assert_same_game(restored, fresh[match[0]])
        play(env, [5, 1, 5, 3, 5])  # change the live game; the pooled state must not change with it


def test_a_prefix_that_misses_its_goal_is_retried_then_given_up() -> None:
    never = compile_macro(MacroSource("never", "def never(game):\n    yield 'noop'\n"))
    env = PrefixStart(make_task_env("collect_stone"), (PrefixLink(never, "collect_diamond"),),
                      pool_size=4, attempts=3)
    _, info = env.reset(seed=1)
    assert not info["prefix_ok"] and info["prefix_steps"] == 3  # one step per attempt, all counted
    assert env.pool == []
    obs, reward, terminated, truncated, _ = env.step(0)
    assert not terminated


def test_snapshots_reject_a_world_of_another_size() -> None:
    small, large = CrafterEnv(area=(32, 32), length=None), CrafterEnv(length=None)
    small.reset(seed=0)
    large.reset(seed=0)
    with pytest.raises(ValueError):
        large.restore(small.snapshot())
