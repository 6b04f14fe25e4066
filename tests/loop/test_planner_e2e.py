"""The planner end to end with the real embedded 0.5B model and real Sample Factory trainings: a task whose
prerequisite chain is long enough is planned into subtasks, each solved by the loop (or taken from the
skill library), and the chain is played from fresh worlds; every step the run took is counted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from loop_helpers import SMOKE, cli

from rlgpt.envs.tasks import ACHIEVEMENTS
from rlgpt.llm.model_store import QWEN_CODER_0_5B, ensure_model
from rlgpt.macro.prefix import StartSummary
from rlgpt.rl.worker_config import worker_config

pytestmark = pytest.mark.slow


@pytest.mark.timeout(1800)  # as long as its command may take (`cli`'s bound)
def test_a_small_planner_run_completes_with_the_real_model(tmp_path: Path) -> None:
    ensure_model(QWEN_CODER_0_5B)
    run_dir = tmp_path / "run"
    proc = cli("run", "--config", SMOKE, "--run-dir", str(run_dir), "--task", "place_table",
               "--steps", "8192", "--set", "planner_min_chain=2", "--set", f"skills_dir={tmp_path / 'lib'}",
               "--set", "chain_starts=2")
    assert proc.returncode == 0, proc.stderr[-3000:]

    plan = json.loads((run_dir / "plan.json").read_text())["plan"]["subtasks"]
    assert plan and all(s["name"] in ACHIEVEMENTS for s in plan)
    assert plan[-1]["name"] == "place_table"  # the chain ends at the task, whatever the model answered
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["best"] == "chain" and summary["plan"] == [s["name"] for s in plan]
    parts = summary["iterations"]
    assert [p["task"] for p in parts] == summary["plan"]
    for i, part in enumerate(parts):
        sub_dir = run_dir / part["dir"]
        choice = json.loads((sub_dir / "skill.json").read_text())
        assert choice["source"] in ("library", "trained, stored", "trained, below threshold",
                                    "trained, failed")
        if choice["source"] != "library":  # the loop ran on it: its iterations trained and were judged
            assert json.loads((sub_dir / "summary.json").read_text())["iterations"]
            assert list(sub_dir.glob("iter_000/critic.json"))
        if choice["source"] != "library" and i and parts[i - 1]["ok"]:
            # A later link trained with the earlier link's policy as an option.
            config = json.loads(next(sub_dir.glob("iter_*/train/config.json")).read_text())
            assert worker_config(config).train.options
        pool_record = sub_dir / "start_pool.json"
        starts = json.loads(pool_record.read_text()) if pool_record.is_file() else {}
        if choice["source"] != "library" and starts.get("pool"):
            # The link's agents were told where its episodes start (the pool's summary), not a fresh world.
            start = StartSummary.from_dict(starts["start"])
            slow = json.loads((sub_dir / "iter_000" / "slow.json").read_text())
            assert any(start.describe() in m["content"] for m in slow["prompt"])
    chain = json.loads((run_dir / "chain.json").read_text())
    assert chain["episodes"] == 4 and 0.0 <= chain["success_rate"] <= 1.0
    # Every step counted, by kind: the subtasks' (chain prefixes, probes, trainings, evaluations) and the
    # chain's test episodes (reported, not charged).
    by_kind = summary["steps_by_kind"]
    chained = {"test_eval": chain["steps"]}
    assert by_kind == {k: sum(p["steps_by_kind"][k] for p in parts) + chained.get(k, 0) for k in by_kind}
    assert summary["steps_used"] == sum(n for k, n in by_kind.items() if k != "test_eval") > 0
    assert by_kind["prefix"] == sum(p["prefix_steps"] for p in parts)
