"""An iteration's training candidates (``RunConfig.train_candidates``): one reply trained with several RL
seeds, each in its own directory on an even share of the iteration's budget, every one charged, the best
validation success selected (and the only one evaluated on test seeds)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from loop_helpers import smoke_config, write_step
from test_seams import FIRST, fast_without_code

from rlgpt import layout
from rlgpt.config import CANDIDATE_SEED_STRIDE, ConfigError, candidate_seed
from rlgpt.rl.evaluate import MAX_RUN_SEED, eval_seeds
from rlgpt.run.executor import JobResult, TrainJob
from rlgpt.run.loop import candidates_record
from rlgpt.run.runner import run


def prefill_iteration(run_dir: Path) -> Path:
    """Iteration 0's decomposition and fast step as a run records them (no LLM is asked)."""
    it = run_dir / "iter_000"
    write_step(it / "slow.json", {"new": True, "feedback": "none", "decomposition": FIRST.to_dict()})
    write_step(it / "fast.json", fast_without_code())
    write_step(it / "probes.json", [])
    (it / "reward.py").write_text("def reward(game, prev):\n    return 0.0\n")
    return it


def assert_candidates_trained(run_dir: Path, summary: dict, cfg) -> dict:
    """Both candidates trained (distinct seeds, own directories, the run's validation episodes), the best
    validation success is selected, every candidate's steps are charged; returns the training record."""
    it = run_dir / "iter_000"
    record = json.loads((it / layout.TRAINING_JSON).read_text())
    cands = record["candidates"]
    assert [c["k"] for c in cands] == [0, 1] and all(c["ok"] for c in cands), cands
    assert [c["seed"] for c in cands] == [cfg.seed, cfg.seed + CANDIDATE_SEED_STRIDE]
    assert [Path(c["dir"]) for c in cands] == [(it / "train").resolve(), (it / "train_cand_1").resolve()]
    share = (cfg.steps - 2 * cfg.eval_episodes * 200) // 2
    for c in cands:
        train_dir = Path(c["dir"])
        sf = json.loads((train_dir / layout.SF_CONFIG).read_text())
        assert sf["seed"] == c["seed"]  # Sample Factory trained with the candidate's own seed
        assert c["steps"] >= share and c["job"]["config"]["steps"] == share
        validation = json.loads((train_dir / layout.EVAL_DIR / layout.EVAL_JSON).read_text())
        # Every candidate played the run's validation episodes, whatever seed it trained with.
        assert validation["split"] == "validation" and validation["seeds"] == eval_seeds(
            "validation", cfg.seed, cfg.eval_episodes)
        assert c["success_rate"] == validation["success_rate"]
    best = max(range(2), key=lambda k: (cands[k]["success_rate"], -k))
    assert record["selected"] == best and record["success_rate"] == cands[best]["success_rate"]
    assert record["run_dir"] == cands[best]["dir"]
    # Every candidate's steps charged: training and validation episodes of both.
    assert record["steps"] == sum(c["steps"] for c in cands)
    assert summary["steps_by_kind"]["train"] == record["steps"]
    assert summary["steps_by_kind"]["eval"] == sum(c["eval_steps"] for c in cands) == record["eval_steps"]
    assert all(c["eval_steps"] > 0 for c in cands)
    assert summary["iterations"][0]["steps"] == record["steps"]
    # The selected candidate is the one kept and evaluated on test seeds.
    job = TrainJob.from_dict(json.loads((it / layout.TRAIN_JOB_JSON).read_text()))
    assert Path(job.config.run_dir).resolve() == Path(cands[best]["dir"])
    test = json.loads((it / layout.TEST_JSON).read_text())
    assert test["ok"] and Path(test["run_dir"]) == Path(cands[best]["dir"])
    assert test["report"]["seeds"] == eval_seeds("test", cfg.seed, cfg.eval_episodes)
    assert summary["checkpoint"] == str(layout.candidate_dir(it, best))
    return record


@pytest.mark.slow
def test_two_candidates_train_locally_with_their_own_seeds_and_the_best_is_selected(tmp_path: Path):
    run_dir = tmp_path / "run"
    # One iteration; 4096 steps less both validation evaluations (2 x 4 x 200) split in two: 1248 each.
    # Marks: 512 in candidate 0's window of the ledger, 2048 in candidate 1's (from 1248 on).
    cfg = smoke_config(run_dir, "steps=4096", "success_threshold=0", "train_candidates=2",
                       "eval_marks=[512,2048]")
    it = prefill_iteration(run_dir)
    summary = run(cfg)
    assert summary["best"] == "iter_000"
    record = assert_candidates_trained(run_dir, summary, cfg)
    # Each candidate saved the marks of its own window, counted from where the ledger charges it.
    assert [c["job"]["config"]["mark_offset"] for c in record["candidates"]] == [0, 1248]
    assert {int(p.name) for p in (it / "train" / layout.MARKS_DIR).iterdir()} == {512}
    assert {int(p.name) for p in (it / "train_cand_1" / layout.MARKS_DIR).iterdir()} == {2048}
    assert [(m["steps"], m["source"], m["split"]) for m in summary["marks"]] == [
        (512, "checkpoint", "test"), (2048, "checkpoint", "test")]
    assert summary["marks"][1]["dir"] == str(layout.mark_dir(it / "train_cand_1", 2048).resolve())


def result(run_dir: str, ok: bool, success: float, steps: int = 100) -> JobResult:
    report = {"success_rate": success, "steps": 40, "split": "validation"}
    return JobResult(run_dir, ok, steps, 1.0, report if ok else None, "" if ok else "boom")


def test_the_record_selects_the_best_validation_success_ties_to_the_lowest_k(tmp_path: Path) -> None:
    cfg = smoke_config(tmp_path / "run", "train_candidates=3")
    jobs = [TrainJob(cfg.train) for _ in range(3)]
    found = [result("a", True, 0.25), result("b", True, 0.5), result("c", True, 0.5)]
    record = candidates_record(jobs, found)
    assert record["selected"] == 1 and record["run_dir"] == "b" and record["success_rate"] == 0.5
    assert record["steps"] == 300 and record["eval_steps"] == 120
    assert [c["success_rate"] for c in record["candidates"]] == [0.25, 0.5, 0.5]
    # A failed candidate is never selected over one that finished, however it is ordered; its steps count.
    found = [result("a", False, 0.0, 500), result("b", True, 0.0), result("c", False, 0.0)]
    record = candidates_record(jobs, found)
    assert record["selected"] == 1 and record["ok"] and record["steps"] == 700 and record["eval_steps"] == 40
    assert [c["error"] for c in record["candidates"]] == ["boom", "", "boom"]


def test_candidate_seeds_never_collide_and_the_knob_is_validated(tmp_path: Path) -> None:
    assert CANDIDATE_SEED_STRIDE == MAX_RUN_SEED  # run seeds stay below the stride
    seeds = [candidate_seed(s, k) for s in (0, 1, 2, MAX_RUN_SEED - 1) for k in range(4)]
    assert len(set(seeds)) == len(seeds) and [candidate_seed(s, 0) for s in (0, 7)] == [0, 7]
    for bad in ("train_candidates=0", "train_candidates=1000"):
        with pytest.raises(ConfigError, match="train_candidates"):
            smoke_config(tmp_path / "run", bad)
    with pytest.raises(ConfigError, match="seed must be in"):
        smoke_config(tmp_path / "run", "train_candidates=2", f"seed={MAX_RUN_SEED}")
