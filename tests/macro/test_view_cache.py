"""`GameAPI` caches the local view per game step; a new episode (seeded or not) must never see the old one."""

from __future__ import annotations

import random

import pytest

from rlgpt.envs.crafter import ACTION_NAMES, CrafterEnv
from rlgpt.macro.api import GameAPI
from rlgpt.macro.compiler import MacroSource
from rlgpt.macro.runtime import MacroActionWrapper, find_crafter


def fresh_view(env: CrafterEnv) -> tuple:
    """The view as a GameAPI without any cache sees it."""
    return GameAPI(find_crafter(env), random.Random(0)).view()


def test_first_query_of_each_seeded_episode_sees_its_own_world() -> None:
    env = CrafterEnv(seed=0, length=50)
    game = GameAPI(find_crafter(env), random.Random(0))
    views = []
    for seed in (0, 1, 2, 3):
        env.reset(seed=seed)  # every seeded reset restarts crafter's step and episode counters
        views.append(game.view())
        assert views[-1] == fresh_view(env), f"seed {seed}: stale view from the previous episode"
    assert len(set(views)) == len(views), "the seeds should give different worlds"


@pytest.mark.parametrize("seed", [0, 5])
def test_consecutive_episodes_never_share_a_cached_view(seed: int) -> None:
    """Query at the first step of each episode only: the cache then holds step 0 of the episode before."""
    env = CrafterEnv(seed=seed, length=12)
    game = GameAPI(find_crafter(env), random.Random(seed))
    env.reset(seed=seed)
    for episode in range(4):
        assert game.view() == fresh_view(env), f"episode {episode}: stale view from the previous episode"
        assert game.find("tree") == GameAPI(find_crafter(env), random.Random(0)).find("tree")
        for step in range(12):
            _, _, terminated, truncated, _ = env.step(ACTION_NAMES.index("move_left") + step % 4)
            if terminated or truncated:
                break
        env.reset()  # unseeded: crafter's episode counter goes on, its step counter restarts at 0


def test_macro_wrapper_over_several_seeds_and_following_episodes() -> None:
    """The wrapper keeps one GameAPI for its lifetime; its first query in every episode must be fresh."""
    collect = (
        "def collect(game):\n"
        "    start = game.item('wood')\n"
        "    while game.item('wood') <= start:\n"
        "        tree = game.nearest('tree')\n"
        "        if tree is None:\n"
        "            yield game.random_move()\n"
        "        elif game.is_facing(tree):\n"
        "            yield 'do'\n"
        "        else:\n"
        "            step = game.step_toward(tree)\n"
        "            yield step if step is not None else game.random_move()\n"
    )
    env = MacroActionWrapper(
        CrafterEnv(seed=0, length=400), [MacroSource("collect", collect)], max_macro_steps=200, seed=0
    )  # seeded random moves: an unseeded walk sometimes found no tree within the bound
    for seed in (0, 1, 2):
        env.reset(seed=seed)
        for episode in range(2):
            if episode:
                env.reset()
            assert env.game.view() == fresh_view(env.unwrapped), (seed, episode)
            _, _, _, _, info = env.step(len(ACTION_NAMES))
            assert info["macro"]["outcome"] == "success" and info["inventory"]["wood"] == 1, (seed, episode)
