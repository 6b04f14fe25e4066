"""Chain-prefix starts (`rlgpt.macro.prefix.PrefixStart`) and the game-state snapshots under them, on real
Crafter: a start state is exact (the same world, creatures, inventory and RNG as playing the prefix, and
the same future for the same actions), the prefix's steps are reported, pooled starts cost none, and a
prefix that misses its goal is retried on new worlds, then given up on."""

from __future__ import annotations

import random

import numpy as np
import pytest
from crafter_helpers import played_starts

from rlgpt.envs.crafter import CrafterEnv
from rlgpt.envs.tasks import make_task_env
from rlgpt.macro.api import GameAPI
from rlgpt.macro.compiler import MacroSource, compile_macro
from rlgpt.macro.prefix import PrefixLink, PrefixStart, StartSummary
from rlgpt.macro.probe import probe_macro
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


def test_a_pool_saved_to_a_file_restores_the_same_games(tmp_path) -> None:
    from rlgpt.macro.prefix import load_pool, save_pool

    builder = PrefixStart(make_task_env("make_wood_pickaxe", episode_length=50), LINKS, pool_size=2)
    for seed in range(2):
        builder.reset(seed=seed)
    assert len(builder.pool) == 2
    save_pool(tmp_path / "pool.pkl", builder.pool)
    states = load_pool(tmp_path / "pool.pkl")
    pooled = PrefixStart(make_task_env("make_wood_pickaxe", episode_length=50), pool=states)
    expected = []
    for state in builder.pool:
        env = CrafterEnv(length=None)
        env.reset(seed=0)
        env.restore(state)
        expected.append(game_of(env))
    seen = []
    for seed in range(8):
        _, info = pooled.reset(seed=seed)
        assert info["prefix_steps"] == 0 and info["prefix_ok"]
        assert info["achievements"]["place_table"] == 1  # the state's achievements count as unlocked
        seen.append(game_of(pooled.env.env))
    for game in seen:
        assert any(_same(game, e) for e in expected)


def _same(a: dict, b: dict) -> bool:
    try:
        assert_same_game(a, b)
    except AssertionError:
        return False
    return True


@pytest.mark.parametrize("content", [b"", b"not a pickle", None])
def test_a_bad_pool_file_is_a_value_error_naming_it(tmp_path, content) -> None:
    import pickle

    from rlgpt.macro.prefix import load_pool

    path = tmp_path / "pool.pkl"
    path.write_bytes(content if content is not None else pickle.dumps({"format": 1, "states": []}))
    with pytest.raises(ValueError, match="pool"):
        load_pool(path)
    with pytest.raises(ValueError, match="links to play or a pool"):
        PrefixStart(make_task_env("collect_wood"))


def test_a_start_summary_is_what_every_start_state_has() -> None:
    states = played_starts(LINKS)
    # One state holds an extra pickaxe and more wood: only what both hold, at the smaller count, counts.
    states[1].player.inventory["wood_pickaxe"] = 1
    states[1].player.inventory["wood"] += 4
    states[1].player.achievements["make_wood_pickaxe"] = 1
    summary = StartSummary.of(states)
    assert summary.unlocked == ("collect_wood", "place_table")
    wood = min(s.player.inventory["wood"] for s in states)
    # Vitals (health, food, drink, energy) are not items.
    assert summary.inventory == ((("wood", wood),) if wood else ())
    assert "collect_wood, place_table" in summary.describe()
    assert StartSummary.from_dict(summary.to_dict()) == summary
    with pytest.raises(ValueError):
        StartSummary.of([])


def test_a_probe_from_start_states_starts_in_them() -> None:
    states = played_starts(LINKS)
    look = compile_macro(MacroSource("look", "def look(game):\n    yield 'noop'\n"))
    fresh = probe_macro(look, seeds=(0, 1, 2), goal="place_table")
    started = probe_macro(look, seeds=(0, 1, 2), goal="place_table", starts=states)
    assert all(c.before.achievements.get("place_table", 0) == 0 for c in fresh.calls)
    # Episode j restores state j modulo their number: the table placed, its position and inventory kept.
    for j, call in enumerate(started.calls):
        state = states[j % len(states)]
        assert call.before.achievements["place_table"] == 1
        assert call.before.pos == tuple(int(v) for v in state.player.pos)
        assert call.before.inventory == {k: v for k, v in state.player.inventory.items() if v}
