"""Evaluation at budget marks through `rlgpt run` with real Sample Factory trainings: the loop's and PPO's
mark policies are evaluated on test seeds only, at the task's episode length; a mark the run never reached
carries the final (reported) policy; ``steps_to_success`` comes from the marks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from loop_helpers import smoke_config, write_step
from test_seams import FIRST, fast_without_code

from rlgpt import layout
from rlgpt.rl.checkpoint import latest_checkpoint, load_checkpoint
from rlgpt.rl.evaluate import TEST_SEED_BASE, VALIDATION_SEED_BASE, eval_seed
from rlgpt.run.marks import evaluate_marks, steps_to_success
from rlgpt.run.records import MarkEntry
from rlgpt.run.runner import run

HORIZON = 16
"""The fast agent's horizon for the loop's training: evaluations must not use it."""


def assert_test_seeds_only(report: dict, seed: int, episodes: int) -> None:
    """The report played exactly the run's first `episodes` test episodes, and no validation seed."""
    assert report["split"] == "test" and report["episodes"] == episodes
    assert report["seeds"] == [eval_seed("test", seed, i) for i in range(episodes)]
    assert all(s >= TEST_SEED_BASE for s in report["seeds"])  # every validation seed is below the test base


def mark_dirs(train_dir: Path) -> set[int]:
    found = train_dir / layout.MARKS_DIR
    return {int(p.name) for p in found.iterdir()} if found.is_dir() else set()


@pytest.mark.slow
def test_loop_marks_are_test_evaluations_and_the_unreached_mark_carries_the_final_policy(tmp_path: Path):
    run_dir = tmp_path / "run"
    # Two iterations of 1024 steps each planned; the threshold 0 stops the loop after the first, so the
    # mark at 2048 is past the run's end. 4096 is above the budget: ignored.
    cfg = smoke_config(run_dir, "max_outer=1", "max_inner=2", "steps=2048", "success_threshold=0",
                       "eval_marks=[512,1024,2048,4096]")
    it = run_dir / "iter_000"
    write_step(it / "slow.json", {"new": True, "feedback": "none", "decomposition": FIRST.to_dict()})
    write_step(it / "fast.json", fast_without_code(horizon=HORIZON))
    write_step(it / "probes.json", [])
    (it / "reward.py").write_text("def reward(game, prev):\n    return 0.0\n")

    summary = run(cfg)

    assert [i["dir"] for i in summary["iterations"]] == ["iter_000"] and summary["best"] == "iter_000"
    assert summary["steps_used"] >= 1024
    assert [(m["steps"], m["source"]) for m in summary["marks"]] == [
        (512, "checkpoint"), (1024, "checkpoint"), (2048, "final")]
    assert mark_dirs(it / "train") == {512, 1024}
    validation = json.loads((it / "training.json").read_text())["report"]
    assert validation["split"] == "validation"
    assert all(VALIDATION_SEED_BASE <= s < TEST_SEED_BASE for s in validation["seeds"])
    final_test = json.loads((it / "test.json").read_text())["report"]
    assert_test_seeds_only(final_test, cfg.seed, cfg.eval_episodes)
    for entry in summary["marks"][:2]:
        mark_dir = layout.mark_dir(it / "train", entry["steps"])
        record = json.loads((mark_dir / "test.json").read_text())
        assert record["ok"], record["error"]
        report = record["report"]
        assert_test_seeds_only(report, cfg.seed, cfg.eval_episodes)
        # The mark's own policy (saved when the run crossed it), not the final one.
        saved = json.loads((mark_dir / "mark.json").read_text())
        assert report["env_steps"] == saved["env_steps"] == load_checkpoint(latest_checkpoint(mark_dir))[
            "env_steps"] >= entry["steps"]
        if entry["steps"] == 512:  # (the last mark's policy may be the final one: SF can stop right at it)
            assert report["env_steps"] < final_test["env_steps"]
        # Played at the task's episode length, not the training's horizon.
        job = json.loads((mark_dir / "job.json").read_text())
        assert job["evaluate_only"] and job["eval_split"] == "test" and job["eval_episode_length"] == 200
        assert report["mean_episode_steps"] > HORIZON
        assert entry["split"] == "test" and entry["episodes"] == cfg.eval_episodes
        assert entry["success_rate"] == report["success_rate"]
        assert entry["achievement_success"] == report["achievement_success"]
    # The final test evaluation too played the task's length, not the horizon it trained at.
    assert final_test["mean_episode_steps"] > HORIZON
    final = summary["marks"][2]
    assert final["split"] == "test" and final["success_rate"] == summary["success_rate"]
    assert final["achievement_success"] == summary["achievement_success"]
    assert summary["steps_to_success"] == steps_to_success([MarkEntry.from_dict(m) for m in summary["marks"]])
    assert set(summary["steps_to_success"]) == {"0.5", "0.8", "0.9"}
    phases = [json.loads(line)["phase"] for line in (run_dir / "phases.jsonl").read_text().splitlines()]
    assert phases == ["slow", "fast", "train", "critic", "marks"]  # the marks' evaluations timed apart

    # A finished run read back: every mark's evaluation is a step read from its file, nothing evaluated again.
    stamps = {m: (layout.mark_dir(it / "train", m) / "test.json").stat().st_mtime_ns for m in (512, 1024)}
    again = run(cfg)
    assert again["marks"] == summary["marks"] and again["steps_to_success"] == summary["steps_to_success"]
    assert stamps == {m: (layout.mark_dir(it / "train", m) / "test.json").stat().st_mtime_ns
                      for m in (512, 1024)}


@pytest.mark.slow
def test_ppo_marks_are_its_training_checkpoints_on_test_seeds(tmp_path: Path):
    run_dir = tmp_path / "run"
    cfg = smoke_config(run_dir, "mode=ppo", "steps=1024", "eval_marks=[256,1024,4096]")
    summary = run(cfg)
    assert [(m["steps"], m["source"]) for m in summary["marks"]] == [(256, "checkpoint"),
                                                                      (1024, "checkpoint")]
    train_dir = run_dir / "ppo" / "train"
    assert mark_dirs(train_dir) == {256, 1024}
    steps = []
    for entry in summary["marks"]:
        report = json.loads((layout.mark_dir(train_dir, entry["steps"]) / "test.json").read_text())["report"]
        assert_test_seeds_only(report, cfg.seed, cfg.eval_episodes)
        assert entry["success_rate"] == report["success_rate"]
        steps.append(report["env_steps"])
    # The mark at the budget is the policy the training ended with; the earlier one an earlier policy.
    assert steps[0] < steps[1] <= summary["steps_used"]
    assert summary["steps_to_success"] == steps_to_success([MarkEntry.from_dict(m) for m in summary["marks"]])


def test_steps_to_success_is_the_first_mark_reaching_each_level() -> None:
    marks = [MarkEntry(steps=100_000, success_rate=0.85), MarkEntry(steps=50_000, success_rate=0.5),
             MarkEntry(steps=250_000, success_rate=0.7), MarkEntry(steps=500_000, success_rate=0.95)]
    assert steps_to_success(marks) == {"0.5": 50_000, "0.8": 100_000, "0.9": 500_000}
    assert steps_to_success(marks[1:3]) == {"0.5": 50_000, "0.8": None, "0.9": None}
    assert steps_to_success([]) == {"0.5": None, "0.8": None, "0.9": None}


def test_only_a_test_evaluation_stands_for_the_final_policy_at_unreached_marks(tmp_path: Path) -> None:
    cfg = smoke_config(tmp_path / "run", "steps=4096", "eval_marks=[1024,2048,4096,8192]")
    test = {"split": "test", "success_rate": 0.75, "achievement_success": {"collect_wood": 0.75},
            "episodes": 4, "crafter_score": 3.0}
    # No training saved a copy: marks up to where the last training ended have no policy (no entry); later
    # ones carry the final test result; 8192 is above the budget.
    entries = evaluate_marks(cfg, cfg.task, None, [], test, trained_until=2048)
    assert [(e.steps, e.source, e.split, e.success_rate) for e in entries] == [(4096, "final", "test", 0.75)]
    assert entries[0].achievement_success == test["achievement_success"] and entries[0].error is None
    # A run whose test evaluation failed reports its validation result: no mark carries it.
    validation = {**test, "split": "validation"}
    entries = evaluate_marks(cfg, cfg.task, None, [], validation, trained_until=0)
    assert [e.steps for e in entries] == [1024, 2048, 4096]
    assert all(e.split is None and e.success_rate == 0.0 and "validation" in e.error for e in entries)
    assert steps_to_success(entries) == {"0.5": None, "0.8": None, "0.9": None}
    # A planner chain's record has no split (it plays test seeds): it stands for the final policy.
    chain = {k: v for k, v in test.items() if k != "split"}
    entries = evaluate_marks(cfg, cfg.task, None, [], chain, trained_until=0)
    assert [e.split for e in entries] == ["test"] * 3
