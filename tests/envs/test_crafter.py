"""CrafterEnv: spaces, symbolic view vs crafter's semantic map, dynamics equal to crafter.Env, seeding."""

from __future__ import annotations

import crafter
import numpy as np
import pytest
from crafter import constants
from crafter_helpers import PinnedCrafter, semantic_window
from gymnasium.utils.env_checker import check_env

from rlgpt.envs.crafter import ACTION_NAMES, ID_NAMES, N_IDS, VECTOR_FIELDS, CrafterEnv

# Night (daylight < 0.5) runs from about step 148 to 272; 300 steps cover day, dusk, night and dawn.
N_STEPS = 300


def _world_state(game: crafter.Env) -> tuple:
    """Everything that evolves in a crafter game, as a comparable value."""
    world, player = game._world, game._player
    objs = sorted((type(o).__name__, tuple(int(v) for v in o.pos), o.health) for o in world.objects)
    return (
        world._mat_map.tobytes(),
        tuple(objs),
        world.random.get_state()[1].tobytes(),
        tuple(player.inventory.items()),
        tuple(player.achievements.items()),
        tuple(int(v) for v in player.pos),
        tuple(player.facing),
        player.sleeping,
    )


def _actions(seed: int, n: int = N_STEPS) -> list[int]:
    return np.random.default_rng(seed).integers(len(ACTION_NAMES), size=n).tolist()


def test_constants_match_crafter() -> None:
    assert ACTION_NAMES == tuple(constants.actions) and len(ACTION_NAMES) == 17
    sem = crafter.Env(seed=0)._sem_view
    expected = {i: name for name, i in sem._mat_ids.items() if name is not None}
    expected.update({i: cls.__name__.lower() for cls, i in sem._obj_ids.items()})
    assert ID_NAMES[0] == "outside"
    assert {i: ID_NAMES[i] for i in range(1, N_IDS)} == expected
    assert VECTOR_FIELDS[: len(constants.items)] == tuple(constants.items)
    assert len(VECTOR_FIELDS) == len(constants.items) + 6


def test_bad_obs_mode_and_bad_calls() -> None:
    with pytest.raises(ValueError, match="obs_mode must be one of"):
        CrafterEnv(obs_mode="rgb")
    env = CrafterEnv(seed=0)
    with pytest.raises(RuntimeError, match="before reset"):
        env.step(0)
    env.reset()
    with pytest.raises(ValueError, match="action must be in"):
        env.step(17)


@pytest.mark.parametrize("obs_mode", ["symbolic", "pixels"])
def test_dynamics_equal_crafter_env(obs_mode: str) -> None:
    """Same seed and actions: same world, creatures, RNG, inventory, achievements, position, reward, done.

    Steps go on past the player's death (crafter keeps simulating) so that the night, where crafter's
    renderer draws from the world RNG, is covered.
    """
    for seed in (0, 3):
        ref = PinnedCrafter(seed=seed)
        ref_obs = ref.reset()
        env = CrafterEnv(obs_mode, seed=seed)
        obs, info = env.reset()
        assert _world_state(ref) == _world_state(env.crafter)
        if obs_mode == "pixels":
            assert np.array_equal(obs, ref_obs)
        night_steps = 0
        for t, action in enumerate(_actions(seed)):
            ref_obs, ref_reward, ref_done, ref_info = ref.step(action)
            obs, reward, terminated, truncated, info = env.step(action)
            assert _world_state(ref) == _world_state(env.crafter), f"seed {seed}: worlds differ at step {t}"
            assert reward == ref_reward
            assert terminated or truncated or not ref_done
            assert terminated == (ref_info["discount"] == 0.0)
            assert info["inventory"] == ref_info["inventory"]
            assert info["achievements"] == ref_info["achievements"]
            assert np.array_equal(info["player_pos"], ref_info["player_pos"])
            assert info["discount"] == ref_info["discount"]
            night_steps += env.crafter._world.daylight < 0.5
            if obs_mode == "pixels":
                assert np.array_equal(obs, ref_obs)
            else:
                expected = semantic_window(ref_info["semantic"], ref_info["player_pos"])
                assert np.array_equal(obs["view"], expected), f"seed {seed}: view differs at step {t}"
            if t % 25 == 0:
                assert np.array_equal(env.render(), ref_obs)
        assert night_steps > 50


def test_symbolic_observation_contents() -> None:
    env = CrafterEnv(seed=5)
    obs, _ = env.reset()
    assert env.observation_space.contains(obs)
    assert obs["view"].shape == (7, 9) and obs["view"][3, 4] == ID_NAMES.index("player")
    for action in _actions(5, 200):
        obs, _, terminated, truncated, info = env.step(action)
        assert env.observation_space.contains(obs)
        player = env.crafter._player
        vector = dict(zip(VECTOR_FIELDS, obs["vector"].tolist(), strict=True))
        assert {k: vector[k] for k in constants.items} == info["inventory"]
        facing = [vector[f"facing_{d}"] for d in ("left", "right", "up", "down")]
        assert sum(facing) == 1.0
        assert ((-1, 0), (1, 0), (0, -1), (0, 1))[facing.index(1.0)] == tuple(player.facing)
        assert vector["daylight"] == pytest.approx(env.crafter._world.daylight)
        assert vector["sleeping"] == float(player.sleeping)
        if terminated or truncated:
            break


def test_view_at_world_edges_is_padded_with_outside() -> None:
    env = CrafterEnv(seed=2)
    env.reset()
    world, player = env.crafter._world, env.crafter._player
    checked = 0
    for corner in [(0, 0), (63, 63), (0, 63), (63, 0), (2, 1), (61, 40)]:
        if world._obj_map[corner] != 0:
            continue
        world.move(player, corner)
        view = env.local_view()
        assert np.array_equal(view, semantic_window(env.crafter._sem_view(), player.pos))
        assert (view == 0).any()
        checked += 1
    assert checked >= 4


def test_pixel_space_and_render_any_mode() -> None:
    env = CrafterEnv("pixels", size=(48, 32), seed=1)
    obs, _ = env.reset()
    assert obs.shape == (32, 48, 3) and env.observation_space.contains(obs)
    sym = CrafterEnv(seed=1)
    sym.reset()
    assert np.array_equal(sym.render(), CrafterEnv("pixels", seed=1).reset()[0])


def test_render_on_demand_does_not_change_the_game() -> None:
    quiet, filmed = CrafterEnv(seed=4), CrafterEnv(seed=4)
    quiet.reset()
    filmed.reset()
    for action in _actions(4, 220):
        quiet.step(action)
        filmed.step(action)
        filmed.render()
    assert _world_state(quiet.crafter) == _world_state(filmed.crafter)


def test_seeding_is_reproducible() -> None:
    a, b = CrafterEnv(seed=11), CrafterEnv(seed=99)
    a.reset()
    initial = a.crafter._world._mat_map.copy()
    b.reset()
    b.step(1)
    b.reset(seed=11)  # an explicit seed replays env a's first episode
    assert np.array_equal(initial, b.crafter._world._mat_map)
    for action in _actions(11, 150):
        ra, rb = a.step(action), b.step(action)
        assert ra[1:4] == rb[1:4] and np.array_equal(ra[0]["view"], rb[0]["view"])
    assert _world_state(a.crafter) == _world_state(b.crafter)
    # Without a seed the episode counter goes on: a new world each episode.
    a.reset()
    assert not np.array_equal(initial, a.crafter._world._mat_map)
    a.reset(seed=11)
    assert np.array_equal(initial, a.crafter._world._mat_map)
    c = CrafterEnv(seed=12)
    c.reset()
    assert not np.array_equal(initial, c.crafter._world._mat_map)


def test_info_contents_and_truncation() -> None:
    env = CrafterEnv(seed=8, length=20)
    _, info = env.reset()
    assert set(info) == {"inventory", "achievements", "player_pos", "discount"}
    assert set(info["achievements"]) == set(constants.achievements) and len(info["achievements"]) == 22
    assert list(info["inventory"]) == list(constants.items)
    for t in range(20):
        _, _, terminated, truncated, info = env.step(ACTION_NAMES.index("noop"))
        assert not terminated
        assert truncated == (t == 19)
    assert info["discount"] == 1.0
    with pytest.raises(ValueError, match="length must be"):
        CrafterEnv(length=0)


@pytest.mark.parametrize("obs_mode", ["symbolic", "pixels"])
def test_gymnasium_env_checker(obs_mode: str) -> None:
    check_env(CrafterEnv(obs_mode, seed=0), skip_render_check=False)
