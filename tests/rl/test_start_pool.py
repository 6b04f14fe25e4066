"""A real (short) Sample Factory training whose episodes start from a saved start-state pool (a chain's later
subtask): every training and evaluation episode begins where the chain prefix left the player."""

from __future__ import annotations

import pytest

from rlgpt.config import builtin_config_path, load_config
from rlgpt.envs.tasks import make_task_env
from rlgpt.macro.compiler import MacroSource, compile_macro
from rlgpt.macro.control import goal_macro_code
from rlgpt.macro.prefix import PrefixLink, PrefixStart, save_pool
from rlgpt.rl.evaluate import evaluate
from rlgpt.rl.sf_config import env_backend
from rlgpt.rl.train import train

pytestmark = pytest.mark.slow


def test_training_and_its_evaluation_start_from_the_pool(tmp_path) -> None:
    code = goal_macro_code("pickaxe", "make_wood_pickaxe", 200)
    link = PrefixLink(compile_macro(MacroSource("pickaxe", code)), "make_wood_pickaxe")
    builder = PrefixStart(make_task_env("collect_stone"), (link,), pool_size=3)
    for seed in range(3):
        builder.reset(seed=seed)
    assert len(builder.pool) == 3
    save_pool(tmp_path / "pool.pkl", builder.pool)

    cfg = load_config(builtin_config_path("smoke.yaml"),
                      [f"run_dir={tmp_path / 'run'}", "steps=2000", "task=collect_stone",
                       f"env.start_pool={tmp_path / 'pool.pkl'}"])
    assert env_backend(cfg) == "gym"  # restoring saved games is what the per-env wrappers do
    result = train(cfg)
    assert result.status == 0 and result.env_steps >= cfg.steps
    report = evaluate(result.run_dir, episodes=4)
    # Every evaluated episode began with the pickaxe made (a fresh world's 200-step random walk never does).
    assert report.achievement_success["make_wood_pickaxe"] == 1.0
    assert report.achievement_success["place_table"] == 1.0
