"""`rlgpt run --task T` on the run's defaults (no `--config`) with the real embedded 0.5B model completes an
iteration including the critic, on an achievement no prompt example names. The defaults are what a new
user gets: the context window, every role's token limits and prompt (before this test existed, the default
4096-token context was smaller than the critic's prompt and such a run ended after its first training).
Only what multiplies LLM calls or env steps is turned down (one sample, no repairs, one iteration, a tiny
budget, two short evaluation episodes), not what sizes a prompt."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from loop_helpers import cli

from rlgpt.llm.model_store import QWEN_CODER_0_5B, ensure_model

pytestmark = pytest.mark.slow


@pytest.mark.timeout(1800)  # the real model on the default prompts: minutes, more on a loaded box
def test_a_default_run_on_an_unnamed_task_reaches_the_critic(tmp_path: Path) -> None:
    ensure_model(QWEN_CODER_0_5B)
    run_dir = tmp_path / "run"
    # 20-step evaluation episodes are too short to make a stone sword from nothing: the threshold is not met
    # and the critic is asked.
    proc = cli("run", "--task", "make_stone_sword", "--steps", "2048", "--run-dir", str(run_dir),
               "--set", "llm.model=qwen2.5-coder-0.5b", "--set", "agents.samples=1",
               "--set", "agents.repair_retries=0", "--set", "agents.probe_repair_retries=0",
               "--set", "max_outer=1", "--set", "max_inner=1",
               "--set", "eval_episodes=2", "--set", "train.env.episode_length=20")
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["task"] == "make_stone_sword" and len(summary["iterations"]) == 1
    it = run_dir / "iter_000"
    critic = json.loads((it / "critic.json").read_text())
    assert critic["by"] == "critic" and critic["target"] in ("fast", "slow", "done")
    # The critic's prompt was sent (fitted to the default context, cut if it had to be) and answered.
    assert summary["llm"]["llm/critic/calls"] >= 1
    assert json.loads((it / "training.json").read_text())["ok"]
