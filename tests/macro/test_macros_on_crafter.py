"""Hand-written macros, written only against the public `GameAPI` (as an LLM would), on real Crafter."""

from __future__ import annotations

import random

import gymnasium
import pytest
from crafter_helpers import chop_source

from rlgpt.envs.crafter import ACTION_NAMES, CrafterEnv
from rlgpt.macro.api import GameAPI
from rlgpt.macro.compiler import MacroSource, compile_macro
from rlgpt.macro.diagnostics import RUNTIME_FAILURE_KINDS, MacroCompileError
from rlgpt.macro.runtime import MacroActionWrapper

COLLECT_WOOD = chop_source("collect_wood")  # walks to the nearest visible tree, hits it until one more wood

PLACE_TABLE = '''
def gather(game, amount):
    while game.item("wood") < amount:
        tree = game.nearest("tree")
        if tree is None:
            yield game.random_move()
        elif game.is_facing(tree):
            yield "do"
        else:
            step = game.step_toward(tree)
            yield step if step is not None else game.random_move()

def place_table(game):
    """Collect enough wood, then place a table on a free tile next to the player."""
    yield from gather(game, 2)
    for attempt in range(20):
        if game.target_material in ("grass", "sand", "path") and game.target_object is None:
            yield "place_table"
            return
        # Turning toward a blocked tile only changes facing; a free tile is walked onto.
        yield game.random_move()
'''


def make_env(macros: list, seed: int = 0, length: int = 10000, **kwargs) -> MacroActionWrapper:
    return MacroActionWrapper(CrafterEnv(seed=seed, length=length), macros, seed=seed, **kwargs)


def test_collect_wood_reaches_a_tree_and_collects() -> None:
    env = make_env([MacroSource("collect_wood", COLLECT_WOOD)], max_macro_steps=64)
    env.reset(seed=0)
    _, reward, terminated, truncated, info = env.step(len(ACTION_NAMES))
    assert info["macro"]["outcome"] == "success"
    assert info["inventory"]["wood"] == 1 and info["achievements"]["collect_wood"] == 1
    assert 1 < info["macro_steps"] < 64 and reward > 0.5 and not (terminated or truncated)


def test_place_table_when_wood_suffices() -> None:
    env = make_env([MacroSource("place_table", PLACE_TABLE)], max_macro_steps=128)
    env.reset(seed=0)
    _, _, _, _, info = env.step(len(ACTION_NAMES))
    assert info["macro"]["outcome"] == "success", info["macro"]
    assert info["achievements"]["place_table"] == 1
    world, player = env.unwrapped.crafter._world, env.unwrapped.crafter._player
    facing = (int(player.pos[0] + player.facing[0]), int(player.pos[1] + player.facing[1]))
    assert world[facing][0] == "table"


def test_wrapper_action_space_and_primitives() -> None:
    env = make_env([COLLECT_WOOD])
    assert env.action_space == gymnasium.spaces.Discrete(len(ACTION_NAMES) + 1)
    assert env.action_names[-1] == "collect_wood"
    env.reset(seed=1)
    _, _, _, _, info = env.step(0)
    assert info["macro_steps"] == 1 and "macro" not in info
    with pytest.raises(ValueError, match="action must be in"):
        env.step(len(ACTION_NAMES) + 1)


class _RewardLog(gymnasium.Wrapper):
    """Records every primitive reward (to check the wrapper's discounting)."""

    def __init__(self, env: gymnasium.Env) -> None:
        super().__init__(env)
        self.rewards: list[float] = []

    def step(self, action):
        out = self.env.step(action)
        self.rewards.append(out[1])
        return out


def test_macro_reward_is_discounted_sum() -> None:
    log = _RewardLog(CrafterEnv(seed=0))
    env = MacroActionWrapper(log, [COLLECT_WOOD], gamma=0.9, max_macro_steps=64, seed=0)
    env.reset(seed=0)
    _, reward, _, _, info = env.step(len(ACTION_NAMES))
    assert len(log.rewards) == info["macro_steps"]
    assert reward == pytest.approx(sum(0.9**k * r for k, r in enumerate(log.rewards)))
    assert log.rewards[-1] > 0.5 and reward < sum(log.rewards)


def test_episode_extra_stats_at_episode_end() -> None:
    bad = "def spin(game):\n    while True:\n        pass\n    yield 'noop'\n"
    env = make_env([COLLECT_WOOD, bad], length=40, max_macro_steps=8)
    env.reset(seed=0)
    action_wood, action_bad = len(ACTION_NAMES), len(ACTION_NAMES) + 1
    done, info, calls = False, {}, 0
    while not done:
        _, _, terminated, truncated, info = env.step(action_bad if calls % 2 else action_wood)
        calls += 1
        done = terminated or truncated
    stats = info["episode_extra_stats"]
    assert stats["macro/spin/calls"] == stats["macro/spin/fail_fuel"] == calls // 2
    assert stats["macro/spin/successes"] == 0 and stats["macro/spin/mean_length"] == 1.0
    assert stats["macro/collect_wood/calls"] == calls - calls // 2
    for kind in RUNTIME_FAILURE_KINDS:
        assert f"macro/collect_wood/fail_{kind}" in stats
    assert env.diagnostics and env.diagnostics[-1][1].kind == "fuel"
    env.reset(seed=0)
    assert env.episode_stats["spin"].calls == 0 and env.stats["spin"].calls == calls // 2


def test_macro_is_cut_at_the_episode_limit() -> None:
    env = make_env(["def walk(game):\n    while True:\n        yield 'noop'\n"], length=5, max_macro_steps=64)
    env.reset(seed=0)
    _, _, terminated, truncated, info = env.step(len(ACTION_NAMES))
    assert truncated and not terminated and info["macro_steps"] == 5
    assert (
        info["macro"]["outcome"] == "episode_end"
        and info["episode_extra_stats"]["macro/walk/interrupted"] == 1
    )


def test_invalid_source_fails_in_constructor_with_diagnostics() -> None:
    with pytest.raises(MacroCompileError, match="forbidden_name"):
        make_env([MacroSource("evil", "def evil(game):\n    open('x')\n    yield 'noop'\n")])
    with pytest.raises(ValueError, match="unique"):
        make_env([COLLECT_WOOD, COLLECT_WOOD])
    with pytest.raises(ValueError, match="gamma"):
        make_env([COLLECT_WOOD], gamma=0.0)


COLLECT_SAPLING = '''
def collect_sapling(game):
    """Hit the nearest grass until a sapling drops (crafter: 10% per hit on grass)."""
    for attempt in range(200):
        if game.item("sapling") > 0:
            return
        grass = game.nearest("grass")
        if grass is None:
            yield game.random_move()
        elif game.is_facing(grass):
            yield "do"
        else:
            step = game.step_toward(grass)
            yield step if step is not None else game.random_move()
'''


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_nearest_material_is_never_the_players_own_tile(seed: int) -> None:
    # The player stands on grass at the start; "the nearest grass" must be one it can face and hit.
    env = MacroActionWrapper(CrafterEnv(seed=seed), [COLLECT_SAPLING], max_macro_steps=200, seed=seed)
    env.reset(seed=seed)
    game = env.game
    assert game.pos not in game.find("grass")
    assert game.distance(game.nearest("grass")) >= 1
    assert game.nearby("grass", 0), "nearby() keeps crafter's rule, which counts the player's own tile"
    _, _, _, _, info = env.step(env.n_primitive)
    assert info["macro"]["outcome"] == "success", info["macro"]


# How the embedded model writes it (seen in make_stone_pickaxe runs): kind names where the API documents a
# tile, and a tuple of kinds for "any free ground".
BY_NAME = '''
def get_wood(game):
    while game.item("wood") < 2:
        if game.is_facing("tree"):
            yield "do"
        else:
            action = game.step_toward("tree")
            yield action if action is not None else game.random_move()

def place_table(game):
    yield from get_wood(game)
    for _ in range(30):
        if game.is_facing(("grass", "sand", "path")):
            yield "place_table"
            return
        if game.is_adjacent(("grass", "sand", "path")):
            yield game.face(("grass", "sand", "path"))
        else:
            yield game.random_move()
'''


@pytest.mark.parametrize("seed", [0, 1])
def test_tile_queries_take_kind_names(seed: int) -> None:
    env = MacroActionWrapper(CrafterEnv(seed=seed), [MacroSource("place_table", BY_NAME)],
                             max_macro_steps=300, seed=seed)
    env.reset(seed=seed)
    game = env.game
    # A name asks about the tiles holding it: the faced one, the four neighbours, the nearest visible one.
    assert game.is_facing(game.target_material) and not game.is_facing("diamond")
    assert game.is_facing((game.target_material, "lava")) == game.is_facing(game.target)
    tree = game.nearest("tree")
    assert tree is not None and game.step_toward("tree") == game.step_toward(tree)
    assert game.is_adjacent("tree") == any(game.is_adjacent(t) and game.material_at(t) == "tree"
                                           for t in game.find("tree"))
    with pytest.raises(ValueError, match="no diamond next to the player"):
        game.face("diamond")
    with pytest.raises(ValueError, match="unknown kind 'wood'.*'tree' is the tile that gives it"):
        game.is_facing("wood")  # an item, not a tile kind: the diagnostic names the mistake
    assert game.step_toward("diamond") is None  # none in view: the documented "no path" answer
    # A hostile list of one name costs one search (the sandbox charges the searches' work to the macro).
    before = game._work
    game.step_toward("diamond")
    one = game._work - before
    game.step_toward(["diamond"] * 100_000)
    assert game._work - before - one == one
    _, _, _, _, info = env.step(env.n_primitive)
    assert info["macro"]["outcome"] == "success", info["macro"]
    assert info["achievements"]["place_table"] == 1


WANDER = '''
def wander(game):
    for _ in range(200):
        yield game.random_move()
'''


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_move_never_steps_onto_lava(seed: int) -> None:
    # Crafter kills a player that walks onto lava; an exploring macro's random walk must not. Lava on every
    # side but one: 200 random moves keep the player alive and only ever take the one safe way.
    env = make_env([MacroSource("wander", WANDER)], seed=seed, max_macro_steps=200)
    env.reset(seed=seed)
    world, player = env.unwrapped.crafter._world, env.unwrapped.crafter._player
    for obj in list(world.objects):
        if obj is not player:
            world.remove(obj)
    px, py = (int(v) for v in player.pos)
    for x in range(px - 3, px + 4):
        for y in range(py - 3, py + 4):
            world[(x, y)] = "lava"
    world[(px, py)] = world[(px + 1, py)] = "grass"
    world[(px + 2, py)] = "stone"  # a dead end: from (px + 1, py) the only safe move is back
    game = env.game
    assert {game.random_move() for _ in range(40)} == {"move_right"}
    _, _, terminated, _, info = env.step(len(ACTION_NAMES))
    assert info["macro_steps"] == 200 and not terminated and player.health > 0
    assert (int(player.pos[0]), int(player.pos[1])) in {(px, py), (px + 1, py)}
    x, y = (int(v) for v in player.pos)
    for dx, dy in ((-1, 0), (1, 0), (0, -1), (0, 1)):
        world[(x + dx, y + dy)] = "lava"  # nowhere safe to go: stand still
    assert GameAPI(env.unwrapped.crafter, random.Random(seed)).random_move() == "noop"


def test_item_counts_refuse_what_is_no_item_and_say_what_to_count(run) -> None:
    # The 1.5B's get_wood looped on `game.item("tree") < 1` (always 0) until the step bound, every call: now
    # the compiler refuses the line with what the tree gives, for the repair prompt; a name only known at
    # run time fails the call at that line with the same words.
    written = 'def m(game):\n    while game.item("tree") < 1:\n        yield "do"\n'
    with pytest.raises(MacroCompileError) as refused:
        compile_macro(MacroSource("m", written))
    (problem,) = refused.value.diagnostics
    assert problem.kind == "bad_arguments" and problem.line == 2
    assert "collecting tree gives wood, counted by game.item('wood')" in problem.message
    result, _ = run(written.replace('game.item("tree")', 'game.item("tre" + "e")'), max_steps=50)
    assert result.outcome == "exception" and result.diagnostic.line == 2
    assert "collecting tree gives wood, counted by game.item('wood')" in str(result.diagnostic)
    env = MacroActionWrapper(CrafterEnv(seed=0), [COLLECT_WOOD], seed=0)
    env.reset(seed=0)
    game = env.game
    assert game.item("wood") == 0 and game.item("health") == 9
    with pytest.raises(ValueError, match="placed in the world, never held"):
        game.item("table")
    with pytest.raises(ValueError, match=r"achievement, not an item: game.achievements\['collect_wood'\]"):
        game.item("collect_wood")
    with pytest.raises(ValueError, match="no inventory item; items: health"):
        game.item("gold")
