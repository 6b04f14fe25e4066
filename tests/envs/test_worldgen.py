"""The compiled world generator builds exactly crafter's worlds and leaves the RNG where crafter does."""

from __future__ import annotations

import crafter
import numpy as np
import pytest
from crafter import objects
from crafter import worldgen as reference
from numba import njit

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


# ---------------------------------------------------------------- noise tables, and the engine's resets


@pytest.mark.parametrize("seed", [0, 1, 2**31 - 2, 123_456_789])
def test_noise_tables_give_opensimplex_doubles_at_every_input(seed: int) -> None:
    """Every noise value crafter's generator can read in a 48x40 world, from the tables and point by point
    in compiled code, equals opensimplex's own ``_noise3`` at that input bit for bit (not merely close)."""
    from opensimplex import OpenSimplex
    from opensimplex.internals import _noise3

    simplex = OpenSimplex(seed=seed)
    perm, grad = simplex._perm, simplex._perm_grad_index3
    width, height = 48, 40
    tab = worldgen.table_args(worldgen.noise_tables(width, height), perm, grad)
    for o in range(worldgen._N_OCTAVES):
        inputs = worldgen._octave_input.py_func
        expected = np.array(
            [[_noise3(*inputs(o, x, y), perm, grad) for y in range(height)] for x in range(width)]
        )
        for tables, simplex in ((tab, None), (NO_TABLES, (perm, grad))):
            got = np.array(
                [[noise_at(o, x, y, height, tables, simplex) for y in range(height)] for x in range(width)]
            )
            assert np.array_equal(got.view(np.int64), expected.view(np.int64)), f"octave {o}"


NO_TABLES = worldgen.NO_TABLES
"""What `CompiledBatch(noise="direct")` passes for tables (it reads the noise point by point)."""


@pytest.mark.parametrize("area", [(64, 64), (40, 72)], ids=["64x64", "40x72"])
def test_approximated_octaves_stay_within_their_bound(area: tuple[int, int]) -> None:
    """The approximations a table reset computes first (water, mountain, horizontal tunnels, trees) are
    within the traced bound of opensimplex's doubles at every tile of 12 worlds, and so water and
    mountain within the margins `_tiles` allows them; the bounds are small enough to decide nearly every
    comparison (the exact octaves are then read at a handful of tiles a world)."""
    from opensimplex import OpenSimplex

    width, height = area
    tables = worldgen.noise_tables(width, height)
    assert 0 < tables.bound[list(worldgen._APPROXIMATED)].max() < 2e-4
    worst = np.zeros(worldgen._N_OCTAVES)
    for seed in range(12):
        simplex = OpenSimplex(seed=1000 + seed)
        tab = worldgen.table_args(tables, simplex._perm, simplex._perm_grad_index3)
        out = np.empty((worldgen._N_PLANES, width, height))
        worldgen._smooth_noise(tab, None, out)
        exact = {}
        for o, plane in zip(worldgen._APPROXIMATED, worldgen._PLANES, strict=True):
            exact[o] = np.array(
                [[noise_at(o, x, y, height, tab, None) for y in range(height)] for x in range(width)]
            )
            worst[o] = max(worst[o], np.abs(out[plane] - exact[o]).max())
        s = np.random.default_rng(seed).uniform(0, 1, size=(width, height))  # any start field will do
        w, m = worldgen._water_mountain(s, *(out[o] for o in range(1, 5)))
        exact_w, exact_m = worldgen._water_mountain(s, *(exact[o] for o in range(1, 5)))
        assert np.abs(w - exact_w).max() <= tables.margin[0] and np.abs(m - exact_m).max() <= tables.margin[1]
    for o in worldgen._APPROXIMATED:
        assert 0 < worst[o] <= tables.bound[o], f"octave {o}: {worst[o]} against a bound of {tables.bound[o]}"


def test_exact_octaves_where_the_bound_cannot_decide(monkeypatch) -> None:
    """With bounds too wide to decide anything, every water, mountain, tunnel and tree comparison goes to
    the exact octaves (the path the few undecided tiles of a world take): still crafter's worlds."""
    import dataclasses

    traced = worldgen.noise_tables

    def tables_with_wide_bounds(width: int, height: int) -> worldgen.NoiseTables:
        tables = traced(width, height)
        return dataclasses.replace(tables, bound=tables.bound + 10.0, margin=tables.margin + 10.0)

    monkeypatch.setattr(worldgen, "noise_tables", tables_with_wide_bounds)
    for seed in range(4):
        expected_world, expected_player = fresh_world(seed, (64, 64))
        reference.generate_world(expected_world, expected_player)
        world, player = fresh_world(seed, (64, 64))
        worldgen.generate_world(world, player)
        for got, expected in zip(snapshot(world), snapshot(expected_world), strict=True):
            assert np.array_equal(got, expected) if isinstance(got, np.ndarray) else got == expected


@njit
def noise_at(o, x, y, height, tab, simplex):
    """`worldgen._noise_at` (inlined where the kernels use it) called on its own."""
    return worldgen._noise_at(o, x, y, height, tab, simplex)


def crafter_reset(seed: int, episodes: int, area: tuple[int, int]) -> list[dict]:
    """Each of the first ``episodes`` worlds of a real ``crafter.Env(seed=seed)``: materials, objects in
    crafter's order (kind, x, y) with the player first, the player's position, and the world RNG's state
    (MT19937 key and position) right after the reset."""
    env = crafter.Env(area=area, seed=seed)
    worlds = []
    for _ in range(episodes):
        env.reset()
        world = env._world
        rng = world.random.get_state()
        worlds.append({
            "materials": world._mat_map.copy(),
            "objects": [(type(o).__name__.lower(), *map(int, o.pos)) for o in world._objects if o],
            "player": (int(env._player.pos[0]), int(env._player.pos[1])),
            "rng": (rng[1].copy(), int(rng[2])),
        })  # fmt: skip
    return worlds


def engine_world(engine, row: int) -> dict:
    state = engine.row_state(row)
    player = [(x, y) for kind, x, y, *_ in state["objects"] if kind == "player"]
    return {
        "materials": state["materials"],
        "objects": [(kind, x, y) for kind, x, y, *_ in state["objects"]],
        "player": player[0],
        "rng": state["rng"],
    }


def assert_same_world(got: dict, expected: dict, where: str) -> None:
    """Every tile, every object (kind, position, order), the player's position and the RNG state."""
    diff = np.argwhere(got["materials"] != expected["materials"])
    assert got["materials"].shape == expected["materials"].shape, where
    assert len(diff) == 0, f"{where}: {len(diff)} tiles differ, first at {diff[0].tolist()}"
    assert got["objects"] == expected["objects"], where
    assert got["player"] == expected["player"], where
    (key, pos), (expected_key, expected_pos) = got["rng"], expected["rng"]
    assert pos == expected_pos and np.array_equal(key, expected_key), f"{where}: the world RNG differs"


def test_a_single_different_tile_fails_the_comparison() -> None:
    world = crafter_reset(0, 1, (64, 64))[0]
    changed = {**world, "materials": world["materials"].copy()}
    changed["materials"][17, 41] = (changed["materials"][17, 41] % 5) + 1  # any other material id
    with pytest.raises(AssertionError, match="1 tiles differ, first at \\[17, 41\\]"):
        assert_same_world(changed, world, "one tile")
    advanced = {**world, "rng": (world["rng"][0], world["rng"][1] + 2)}  # one uniform() more
    with pytest.raises(AssertionError, match="the world RNG differs"):
        assert_same_world(advanced, world, "one draw")


@pytest.mark.parametrize("noise", ["tables", "direct"])
@pytest.mark.parametrize(
    ("area", "seeds", "episodes"),
    [((64, 64), 48, 2), ((48, 32), 8, 2), ((40, 72), 6, 3)],
    ids=["64x64", "48x32", "40x72"],
)
def test_engine_resets_build_crafter_envs_worlds(noise: str, area, seeds: int, episodes: int) -> None:
    """``CompiledBatch`` resets (first reset, then ``reset_done``) against real ``crafter.Env`` resets of
    the same seeds and episodes, RNG state included: {48 seeds x 2 episodes} default worlds plus two
    non-square sizes."""
    from rlgpt.envs.engine import CompiledBatch

    engine = CompiledBatch(seeds, area=area, noise=noise)
    obs = engine.reset(list(range(seeds)))
    expected = [crafter_reset(seed, episodes, area) for seed in range(seeds)]
    for episode in range(episodes):
        if episode:
            engine.reset_done(np.ones(seeds, bool), obs)
        for seed in range(seeds):
            assert_same_world(
                engine_world(engine, seed), expected[seed][episode], f"seed {seed} ep {episode + 1}"
            )


def test_noise_tables_saved_for_the_next_process_load_the_same(tmp_path, monkeypatch) -> None:
    """Traced tables go to disk (beside numba's cache) and a later process loads exactly them."""
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    worldgen.noise_tables.cache_clear()
    try:
        traced = worldgen.noise_tables(16, 12)
        saved = list(tmp_path.glob("worldgen_noise_16x12_*.npz"))
        assert len(saved) == 1 and not list(tmp_path.glob("*.*.npz")), "one complete file, no partial left"
        worldgen.noise_tables.cache_clear()  # as a new process
        loaded = worldgen.noise_tables(16, 12)
        assert loaded is not traced
        for name in worldgen._ARRAYS:
            a, b = getattr(traced, name), getattr(loaded, name)
            assert a.dtype == b.dtype and np.array_equal(a, b), name
    finally:
        worldgen.noise_tables.cache_clear()


def test_games_on_crafters_own_worlds_continue_identically(monkeypatch) -> None:
    """A world is right only if the game goes on the same: `ReferenceBatch` playing worlds from crafter's
    own generator (``crafter.worldgen.generate_world`` on real opensimplex, patched into `CrafterEnv`) and
    `CompiledBatch` agree on every observation, reward and death over 300 random steps, the players that
    die starting their next episodes, and on the whole hidden state, world RNG included, every 50 steps."""
    from crafter_play import assert_same_state, crafter_row_state

    from rlgpt.envs import crafter as crafter_env
    from rlgpt.envs.batch import ReferenceBatch
    from rlgpt.envs.crafter import ACTION_NAMES
    from rlgpt.envs.engine import CompiledBatch

    monkeypatch.setattr(crafter_env, "generate_world", reference.generate_world)
    seeds = list(range(100, 108))
    engine, crafters = CompiledBatch(len(seeds)), ReferenceBatch(len(seeds))
    obs, expected = engine.reset(seeds), crafters.reset(seeds)
    np.testing.assert_array_equal(obs.view, expected.view)
    np.testing.assert_array_equal(obs.vector, expected.vector)
    rng = np.random.default_rng(3)
    deaths = 0
    for t in range(300):
        actions = rng.integers(len(ACTION_NAMES), size=len(seeds))
        out, want = engine.step(actions), crafters.step(actions)
        for name in ("view", "vector", "reward", "dead", "achievements"):
            got, wanted = getattr(out, name), getattr(want, name)
            np.testing.assert_array_equal(got, wanted, err_msg=f"step {t}: {name}")
        if t % 50 == 49:
            for i, env in enumerate(crafters.envs):
                assert_same_state(engine.row_state(i), crafter_row_state(env), f"step {t} row {i}")
        deaths += int(want.dead.sum())
        engine.reset_done(want.dead, out)
        crafters.reset_done(want.dead, want)
        np.testing.assert_array_equal(out.view, want.view, err_msg=f"reset after step {t}")
    assert deaths > 0, "no player died: no second episode was compared"
