"""Crafter tasks: names, success / death / truncation, sparse + dense reward, contained hook failures."""

from __future__ import annotations

import numpy as np
import pytest
import yaml
from crafter import constants
from crafter_helpers import stand_facing
from gymnasium.utils.env_checker import check_env

from rlgpt.envs.crafter import ACTION_NAMES, CrafterEnv
from rlgpt.envs.tasks import ACHIEVEMENTS, TaskEnv, TaskSpec, make_task_env
from rlgpt.macro.reward import DenseRewardWrapper

DO, NOOP, PLACE_TABLE = (ACTION_NAMES.index(a) for a in ("do", "noop", "place_table"))


def _collect_wood(env: TaskEnv) -> tuple[float, bool, dict]:
    """Stand at a tree and chop it once; returns the step's reward, terminated and info."""
    stand_facing(env.unwrapped, "tree")
    _, reward, terminated, _, info = env.step(DO)
    assert info["inventory"]["wood"] >= 1
    return reward, terminated, info


def test_achievements_come_from_crafter_data() -> None:
    data = yaml.safe_load((constants.root / "data.yaml").read_text())
    assert ACHIEVEMENTS == tuple(data["achievements"]) and len(ACHIEVEMENTS) == 22


def test_every_achievement_is_a_task() -> None:
    for name in ACHIEVEMENTS:
        spec = TaskSpec.from_name(name, episode_length=123)
        assert spec.name == name and spec.targets == (name,) and spec.episode_length == 123
    multi = TaskSpec.from_name("collect_wood + place_table")
    assert multi.name == "collect_wood+place_table"
    assert multi.targets == ("collect_wood", "place_table")


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("colect_wood", "Did you mean collect_wood"),
        ("collect_wood+make_wod_pickaxe", "Did you mean make_wood_pickaxe"),
        ("fly_to_the_moon", "Valid names: collect_coal"),
        ("", "non-empty"),
        ("collect_wood+collect_wood", "twice"),
    ],
)
def test_bad_task_names(name: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        TaskSpec.from_name(name)


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="episode_length"):
        TaskSpec.from_name("collect_wood", episode_length=0)
    with pytest.raises(ValueError, match="obs_mode"):
        make_task_env("collect_wood", obs_mode="voxels")
    with pytest.raises(TypeError, match="task must be"):
        make_task_env(42)  # type: ignore[arg-type]


def test_success_gives_sparse_reward_and_terminates() -> None:
    env = make_task_env("collect_wood", seed=0)
    _, info = env.reset()
    assert info["success"] is False and info["task"] == "collect_wood"
    assert info["achievements"] == dict.fromkeys(ACHIEVEMENTS, 0)
    _, reward, terminated, truncated, info = env.step(NOOP)
    assert reward == 0.0 and not terminated and not truncated
    reward, terminated, info = _collect_wood(env)
    assert reward == 1.0 and terminated and info["success"] is True
    assert info["achievements"]["collect_wood"] == 1
    assert sum(info["achievements"].values()) == 1 and set(info["achievements"]) == set(ACHIEVEMENTS)


def test_multi_target_needs_all_and_drops_crafter_reward() -> None:
    env = make_task_env("collect_wood+place_table", seed=1)
    env.reset()
    # Unlocking collect_wood alone earns crafter's +1, but the task pays nothing until both are done.
    reward, terminated, info = _collect_wood(env)
    assert reward == 0.0 and not terminated and not info["success"]
    while info["inventory"]["wood"] < constants.place["table"]["uses"]["wood"]:
        reward, terminated, info = _collect_wood(env)
        assert reward == 0.0 and not terminated
    stand_facing(env.unwrapped, "grass")
    _, reward, terminated, _, info = env.step(PLACE_TABLE)
    assert reward == 1.0 and terminated and info["success"]
    assert info["achievements"]["collect_wood"] == info["achievements"]["place_table"] == 1


def test_truncation_at_episode_length() -> None:
    env = make_task_env(TaskSpec.from_name("collect_diamond", episode_length=50), seed=2, episode_length=7)
    assert env.task.episode_length == 7
    for _ in range(2):  # the step counter restarts on reset
        env.reset()
        for t in range(7):
            _, reward, terminated, truncated, info = env.step(NOOP)
            assert reward == 0.0 and not terminated
            assert truncated == (t == 6)
        assert info["success"] is False


def test_death_terminates_without_success() -> None:
    env = make_task_env("collect_diamond", seed=3)
    env.reset()
    player = env.unwrapped.crafter._player
    lava = stand_facing(env.unwrapped, "lava")
    direction = (lava[0] - int(player.pos[0]), lava[1] - int(player.pos[1]))
    move = {(-1, 0): "move_left", (1, 0): "move_right", (0, -1): "move_up", (0, 1): "move_down"}[direction]
    _, reward, terminated, truncated, info = env.step(ACTION_NAMES.index(move))
    assert terminated and not truncated and not info["success"]
    assert info["discount"] == 0.0 and reward == 0.0


def test_sparse_and_dense_add_at_success() -> None:
    shaped = "def reward(game, prev):\n    return 0.25\n"
    env = DenseRewardWrapper(make_task_env("collect_wood", seed=5), shaped)
    env.reset()
    reward, terminated, _ = _collect_wood(env)
    assert terminated and reward == pytest.approx(1.25)


def test_pixel_task_and_wrapping_checks() -> None:
    env = make_task_env("eat_cow", obs_mode="pixels", seed=7)
    obs, _ = env.reset()
    assert obs.shape == (64, 64, 3) and obs.dtype == np.uint8
    assert env.render().shape == (64, 64, 3)
    with pytest.raises(TypeError, match="wraps a CrafterEnv"):
        TaskEnv(env, TaskSpec.from_name("eat_cow"))  # type: ignore[arg-type]
    assert isinstance(env.unwrapped, CrafterEnv)


def test_gymnasium_env_checker() -> None:
    check_env(make_task_env("collect_wood", seed=0), skip_render_check=False)
