"""The executor and the RL side of the fast agent's setup: the LLM's reward and observation reach the
Sample Factory env (shipped as text in the config), and a failing job is a result, not a crashed loop."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from rlgpt.config import builtin_config_path, load_config
from rlgpt.rl.sf_config import build_sf_config
from rlgpt.rl.sf_env import make_crafter_env, register_task_env
from rlgpt.run.executor import LocalExecutor, TrainJob
from rlgpt.run.layout import RESULT_JSON

REWARD = "def reward(game, prev):\n    return 0.5 + game.inventory['wood'] - prev.inventory['wood']\n"


def smoke_train(run_dir: Path):
    return load_config(builtin_config_path("smoke.yaml"), [f"run_dir={run_dir}", "steps=1024"])


def test_reward_and_observation_are_applied_in_the_sf_env(tmp_path: Path) -> None:
    cfg = smoke_train(tmp_path / "run")
    job = TrainJob(cfg, reward_code=REWARD, observation=("view",))
    sf_cfg = build_sf_config(cfg, tmp_path / "run", register_task_env(cfg.task), setup=job.env_setup())
    env = make_crafter_env(sf_cfg.env, sf_cfg)
    obs, _ = env.reset(seed=0)
    assert not np.any(obs["vector"]) and np.any(obs["view"])  # the vector part was left out
    _, reward, _, _, info = env.step(0)
    assert info["dense_reward"] == 0.5 and reward == 0.5
    # Without the flags the env is the plain task env.
    plain = build_sf_config(cfg, tmp_path / "run", register_task_env(cfg.task))
    obs, _ = make_crafter_env(plain.env, plain).reset(seed=0)
    assert np.any(obs["vector"])


def test_a_failing_job_is_a_result(tmp_path: Path) -> None:
    cfg = smoke_train(tmp_path / "run")
    bad = "def reward(game, prev):\n    import os\n    return 0\n"
    result = LocalExecutor().run(TrainJob(cfg, reward_code=bad, eval_episodes=1))
    assert not result.ok and "import" in result.error and result.eval is None
    assert json.loads((tmp_path / "run" / RESULT_JSON).read_text())["ok"] is False


def test_a_job_that_dies_is_a_result(tmp_path: Path) -> None:
    cfg = smoke_train(tmp_path / "run")
    result = LocalExecutor(python="/bin/false").run(TrainJob(cfg))
    assert not result.ok and "status 1" in result.error
