"""The compiled world generator builds exactly crafter's worlds and leaves the RNG where crafter does."""

from __future__ import annotations

import crafter
import numpy as np
import pytest
from crafter import objects
from crafter import worldgen as reference

from rlgpt.envs import worldgen


def fresh_world(seed: int, area: tuple[int, int], player_pos: tuple[int, int] | None = None):
    """A reset world with its player added, as crafter.Env.reset has it right before generating."""
    world = crafter.Env(area=area)._world
    world.reset(seed=seed)
    pos = player_pos or (area[0] // 2, area[1] // 2)
    player = objects.Player(world, pos)
    world.add(player)
    return world, player


def snapshot(world) -> tuple:
    placed = [(type(o).__name__, int(o.pos[0]), int(o.pos[1])) for o in world._objects if o is not None]
    state = world.random.get_state()
    return world._mat_map.copy(), world._obj_map.copy(), placed, state[1].copy(), state[2]


@pytest.mark.parametrize(
    ("area", "player_pos"),
    [((64, 64), None), ((48, 32), None), ((40, 56), (5, 50))],
    ids=["default", "wide", "tall-offcentre"],
)
@pytest.mark.parametrize("seed", range(8))
def test_same_world_and_rng_state_as_crafter(seed: int, area: tuple[int, int], player_pos) -> None:
    expected_world, expected_player = fresh_world(seed, area, player_pos)
    reference.generate_world(expected_world, expected_player)
    world, player = fresh_world(seed, area, player_pos)
    worldgen.generate_world(world, player)

    mat, obj, placed, key, pos = snapshot(world)
    e_mat, e_obj, e_placed, e_key, e_pos = snapshot(expected_world)
    np.testing.assert_array_equal(mat, e_mat)
    np.testing.assert_array_equal(obj, e_obj)
    assert placed == e_placed
    assert pos == e_pos and np.array_equal(key, e_key), "the world RNG advanced differently"
    # The worlds are not degenerate: several materials and some creatures.
    assert len(np.unique(mat)) >= 4 and len(placed) > 1
