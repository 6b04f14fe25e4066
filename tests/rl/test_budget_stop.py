"""A training ends at most one batch past its step budget (`rlgpt.rl.learner.SMDPLearner` drops the batches
Sample Factory's rollout workers still deliver once the budget is passed), and a session resumed past its
budget ends at once instead of waiting for a batch that would count."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from rlgpt.config import builtin_config_path, load_config
from rlgpt.rl.checkpoint import latest_checkpoint

pytestmark = pytest.mark.slow
BATCH = 256
"""smoke.yaml's batch (primitives only: one batch is 256 primitive steps)."""


def train_command(run_dir, steps: int) -> list[str]:
    return [sys.executable, "-m", "rlgpt.cli", "train", "--config", str(builtin_config_path("smoke.yaml")),
            "--run-dir", str(run_dir), "--steps", str(steps), "--set", "eval_episodes=0"]


def saved_steps(run_dir) -> int:
    return int(torch.load(latest_checkpoint(run_dir), weights_only=False)["env_steps"])


def test_training_stops_within_one_batch_and_a_resume_past_the_budget_ends(tmp_path):
    run_dir = tmp_path / "run"
    assert load_config(builtin_config_path("smoke.yaml")).ppo.batch_size == BATCH
    budget = 3 * BATCH + 10  # not a multiple of the batch: the batch that crosses it ends the training
    first = subprocess.run(train_command(run_dir, budget), capture_output=True, text=True, timeout=900)
    assert first.returncode == 0, first.stderr[-3000:]
    trained = saved_steps(run_dir)
    assert budget < trained <= budget + BATCH
    # The same directory with a smaller budget: the checkpoint is past it, nothing more is trained.
    again = subprocess.run(train_command(run_dir, 2 * BATCH), capture_output=True, text=True, timeout=900)
    assert again.returncode == 0, again.stderr[-3000:]
    assert saved_steps(run_dir) == trained
