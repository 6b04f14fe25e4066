"""The synchronous PPO baseline's two ways of stepping its games see the same games, and both train."""

import json
from collections import deque

import numpy as np
import pytest
import torch

from bench import sync_ppo
from rlgpt.config import builtin_config_path, load_config
from rlgpt.rl.sf_config import build_sf_config
from rlgpt.rl.sf_env import register_task_env


def test_batch_steps_play_the_same_games_as_gym_steps(tmp_path):
    """``--env batch`` (the compiled engine) and ``--env gym`` (task envs) start the same worlds, give the
    same observations, rewards and dones for the same actions, and report the same finished episodes."""
    cfg = load_config(builtin_config_path("main.yaml"), ["seed=3", "env.episode_length=20"])
    sf_cfg = build_sf_config(cfg, tmp_path, register_task_env(cfg.task))
    gym_steps = sync_ppo.GymSteps(register_task_env(cfg.task), sf_cfg, 4)
    batch_steps = sync_ppo.BatchSteps(register_task_env(cfg.task), sf_cfg, 4)
    obs_g, obs_b = gym_steps.reset(), batch_steps.reset()
    rng = np.random.default_rng(0)
    done_g = done_b = None
    succ_g, succ_b = deque(), deque()
    for _ in range(45):  # past two episode ends (length 20)
        for key in ("view", "vector"):
            assert torch.equal(obs_g[key].float(), obs_b[key].float()), key
        action = torch.as_tensor(rng.integers(0, gym_steps.action_space.n, size=4))
        obs_g, rew_g, done_g = gym_steps.step(action, succ_g)
        obs_b, rew_b, done_b = batch_steps.step(action, succ_b)
        assert torch.equal(rew_g.float(), rew_b.float())
        assert torch.equal(done_g, done_b)
    assert len(succ_g) == len(succ_b) == 8 and list(succ_g) == list(succ_b)


@pytest.mark.parametrize("env", ["gym", "batch"])
def test_sync_ppo_trains_and_logs(tmp_path, env, capsys):
    result = sync_ppo.main(
        ["--env", env, "--steps", "2048", "--run-dir", str(tmp_path), "--threads", "1",
         "--set", "ppo.rollout=32", "--set", "ppo.batch_size=256"]
    )  # fmt: skip
    assert result["env_steps"] >= 2048
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1]) == result
    assert (tmp_path / "metrics.csv").read_text().count("\n") >= 2
