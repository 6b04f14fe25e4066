"""The typed run records (`rlgpt.run.records`) write the JSON run directories always held and read back
files of any version: older ones without the keys added since, newer ones with keys they do not know."""

from __future__ import annotations

import json

from rlgpt import rundir
from rlgpt.run.executor import JobResult
from rlgpt.run.records import IterationRecord, JobRecord, job_record

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
