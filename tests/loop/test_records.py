"""The typed run records (`rlgpt.run.records`) write the JSON run directories always held and read back
files of any version: older ones without the keys added since, newer ones with keys they do not know."""

from __future__ import annotations

import json

import pytest

from rlgpt import rundir
from rlgpt.config import load_run_config
from rlgpt.run.executor import JobResult
from rlgpt.run.records import IterationRecord, JobRecord, MarkEntry, RunSummary, job_record, result_record

# A trained loop iteration as `Loop.run_loop` wrote it before the record was typed.
TRAINED = {"index": 2, "outer": 1, "inner": 0, "dir": "iter_002", "ok": True, "success_rate": 0.5,
           "steps": 4096, "steps_by_kind": {"train": 4096, "probe": 120}, "macros": ["get_wood"],
           "written_by": {"get_wood": "model"}, "search": {"rounds": 1}, "critic": "fast",
           "fallbacks": {"slow": "recipe_graph"}}
# The iteration the budget stopped: no search, no fallbacks.
STOPPED = {"index": 3, "outer": 1, "inner": 1, "dir": "iter_003", "ok": False, "success_rate": 0.0,
           "steps": 0, "steps_by_kind": {"probe": 30}, "macros": [], "critic": "", "written_by": {},
           "stopped": "budget"}
# A planner chain's link and a ppo baseline's single step.
LINK = {"index": 0, "dir": "sub_00_collect_wood", "task": "collect_wood", "source": "library",
        "fallbacks": {}, "ok": True, "success_rate": 0.9, "steps": 0, "prefix_steps": 0,
        "steps_by_kind": {}, "start_states": 0, "critic": "", "macros": ["get_wood"]}
PPO = {"index": 0, "dir": "ppo", "ok": True, "success_rate": 0.25, "steps": 2048,
       "steps_by_kind": {"train": 2048}, "macros": [], "critic": ""}


def test_every_kind_of_iteration_is_written_as_before() -> None:
    for record in (TRAINED, STOPPED, LINK, PPO):
        assert IterationRecord.from_dict(record).to_dict() == record


def test_an_older_or_newer_iteration_still_loads() -> None:
    old = {"index": 0, "dir": "iter_000", "success_rate": 0.1, "steps": 10}  # before ok, kinds, writers
    it = IterationRecord.from_dict(old)
    assert (it.ok, it.steps_by_kind, it.written_by, it.fallbacks) == (True, {}, None, None)
    newer = IterationRecord.from_dict({**TRAINED, "a_key_from_the_future": 1})
    assert newer.to_dict() == TRAINED


def test_job_record_has_the_keys_training_json_always_had() -> None:
    ok = JobResult("/r/train", True, steps=512, wall_time_s=3.5,
                   eval={"success_rate": 0.75, "steps": 300, "split": "validation"}, extra={"attempts": 2})
    assert job_record(ok) == {"ok": True, "error": "", "steps": 512, "eval_steps": 300, "wall_time_s": 3.5,
                              "success_rate": 0.75, "report": ok.eval, "run_dir": "/r/train", "attempts": 2}
    failed = job_record(JobResult("/r/train", False, steps=100, eval={"success_rate": 1.0, "steps": 9},
                                  error="boom"))
    assert (failed["success_rate"], failed["eval_steps"], failed["report"], failed["attempts"]) == (
        0.0, 0, None, 1)
    assert "selected" not in failed and "candidates" not in failed


def test_job_record_reads_back_from_its_file(tmp_path) -> None:
    path = tmp_path / "training.json"
    written = {**job_record(JobResult("/r", True, steps=8, eval={"success_rate": 0.5, "steps": 4})),
               "selected": 1, "candidates": [{"k": 0}, {"k": 1}]}
    rundir.write_json(path, written)
    record = JobRecord.read(path)
    assert (record.selected, record.eval_steps, record.success_rate) == (1, 4, 0.5)
    assert record.to_dict() == json.loads(path.read_text())
    # A record from before eval_steps and attempts were kept.
    rundir.write_json(path, {"ok": True, "error": "", "steps": 8, "wall_time_s": 1.0, "success_rate": 0.5,
                             "report": {"success_rate": 0.5}, "run_dir": "/r"})
    assert (JobRecord.read(path).eval_steps, JobRecord.read(path).attempts) == (0, 1)


# ``summary.json`` of each mode as the runner wrote it before the record was typed (the loop's from a
# real run's, shortened): every key of each, None values included where the mode wrote them.
BASE = {"task": "collect_wood", "mode": "rlgpt", "seed": 0, "steps_budget": 8192, "steps_used": 4300,
        "steps_by_kind": {"eval": 375, "prefix": 0, "probe": 119, "reward_check": 40, "test_eval": 456,
                          "train": 3766},
        "prompt_knowledge": {"api": "primitives", "env_doc": "full", "examples": True,
                             "goal_fallback": False},
        "success_rate": 0.95, "achievement_success": {"collect_wood": 0.95}, "eval_episodes": 20,
        "eval_split": "test", "written_by": {"expert": 0, "library": 0, "model": 2}, "own_code_share": 1.0,
        "expert_code": False, "iterations": [TRAINED, STOPPED],
        "model_id": "embedded:qwen", "llm": {"llm/fast/calls": 13.0}, "run_dir": "/runs/mr0"}
MARKS = {"marks": [{"steps": 4096, "source": "final", "split": "test", "success_rate": 0.95,
                    "achievement_success": {}, "crafter_score": 0.0, "episodes": 20}],
         "steps_to_success": {"0.5": 4096, "0.8": 4096, "0.9": None}}
LOOP = {**BASE, **MARKS, "best": "iter_002", "checkpoint": "/runs/mr0/iter_002/train",
        "validation_success_rate": 1.0, "test_error": "", "fallbacks": {"fast_reward": ["task_reward"]}}
LOOP_UNTESTED = {**LOOP, "test_error": None}  # the selected iteration predates kept test evaluations
LOOP_FAILED = {**BASE, **MARKS, "best": None, "checkpoint": None, "fallbacks": {}, "eval_split": None,
               "own_code_share": None}
CHAIN = {**BASE, **MARKS, "best": "chain", "plan": ["collect_wood", "place_table"], "fallbacks": {},
         "iterations": [LINK]}
LINK_LOOP = {**BASE, "best": "iter_002", "checkpoint": "/runs/c/sub_00/iter_002/train",
             "validation_success_rate": 0.9, "test_error": "", "fallbacks": {}}  # a chain link's: no marks
PPO_FAILED = {**BASE, **MARKS, "mode": "ppo", "best": None, "checkpoint": None, "error": "worker died",
              "iterations": [PPO]}
CODE = {**BASE, **MARKS, "mode": "code", "best": "code", "played_steps": 456, "error": "",
        "skill_library": {"path": "/lib", "called": {}, "stored": []}}
OLD = {"task": "collect_wood", "mode": "rlgpt", "seed": 1, "steps_budget": 8192, "steps_used": 8000,
       "success_rate": 0.5, "achievement_success": {}, "eval_episodes": 10, "eval_split": "validation",
       "iterations": [{"index": 0, "dir": "iter_000", "success_rate": 0.5, "steps": 8000}],
       "best": "iter_000"}  # before steps by kind, prompt knowledge, writers and marks


@pytest.mark.parametrize("summary", [LOOP, LOOP_UNTESTED, LOOP_FAILED, CHAIN, LINK_LOOP, PPO_FAILED, CODE],
                         ids=["loop", "untested", "failed", "chain", "link", "ppo", "code"])
def test_every_kind_of_summary_is_written_as_before(summary) -> None:
    assert RunSummary.from_dict(summary).to_dict() == summary
    assert RunSummary.from_dict(json.loads(json.dumps(summary))).to_dict() == summary


def test_an_older_or_newer_summary_still_loads() -> None:
    old = RunSummary.from_dict(OLD)
    assert (old.steps_by_kind, old.written_by, old.marks, old.prompt_knowledge, old.fallbacks) == (
        None, None, None, {}, None)
    assert [it.ok for it in old.iterations] == [True] and old.best == "iter_000"
    assert RunSummary.from_dict({**LOOP, "a_key_from_the_future": 1}).to_dict() == LOOP


def test_mark_entries_are_typed_and_read_as_they_were_written() -> None:
    summary = RunSummary.from_dict(LOOP)
    assert summary.marks == [MarkEntry(steps=4096, source="final", split="test", success_rate=0.95,
                                       episodes=20)]
    saved = {"steps": 512, "source": "checkpoint", "split": "test", "success_rate": 0.5, "episodes": 4,
             "achievement_success": {"collect_wood": 0.5}, "crafter_score": 1.2, "dir": "/r/marks/512",
             "eval_steps": 900}
    failed = {"steps": 1024, "source": "checkpoint", "split": None, "success_rate": 0.0, "episodes": 0,
              "achievement_success": {}, "crafter_score": 0.0, "error": "worker died", "dir": "/r/m",
              "eval_steps": 0}
    for entry in (saved, failed):
        assert MarkEntry.from_dict(entry).to_dict() == entry
    # An entry from before the split was recorded was a test evaluation.
    assert MarkEntry.from_dict({"steps": 256, "success_rate": 1.0}).split == "test"
    # No report (code that never compiled): no split, so nothing reads it as a test result.
    missing = MarkEntry.of(2048, {"error": "no test evaluation"}, "final")
    assert (missing.split, missing.success_rate, missing.error) == (None, 0.0, "no test evaluation")


def test_result_record_writes_the_keys_each_mode_wrote() -> None:
    cfg = load_run_config(None, ["task=collect_wood", "mode=rlgpt", "seed=0"])
    report = {"success_rate": 0.5, "episodes": 20, "split": "test", "achievement_success": {"a": 0.5}}
    its = [IterationRecord.from_dict(TRAINED)]

    def keys(mode, **extra):
        return set(result_record(cfg, "collect_wood", mode, 8192, {"train": 10}, report, its, **extra))

    base = set(BASE) - {"model_id", "llm", "run_dir"}
    assert keys("rlgpt", best=None, checkpoint=None) == base | {"best", "checkpoint"}
    assert keys("rlgpt", best="iter_002", checkpoint="c", validation_success_rate=0.5,
                test_error=None) == base | {"best", "checkpoint", "validation_success_rate", "test_error"}
    assert keys("rlgpt", best="chain", plan=["a"]) == base | {"best", "plan"}
    assert keys("ppo", best=None, checkpoint=None, error=None) == base | {"best", "checkpoint", "error"}
    assert keys("code", best="code", played_steps=3, error="") == base | {"best", "played_steps", "error"}
    record = result_record(cfg, "collect_wood", "rlgpt", 8192, {"train": 10}, report, its, best="iter_002")
    assert RunSummary.from_dict(record).to_dict() == record
    assert record["written_by"] == {"model": 1, "library": 0, "expert": 0} and record["steps_used"] == 10
