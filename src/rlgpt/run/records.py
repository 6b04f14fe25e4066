"""The records a run directory holds, shared by the loop and the baselines: how a step's value is written
and read back (`step`), an iteration's training record (`job_record`) and the run's result record
(`result_record`, ``summary.json``)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rlgpt.config import RunConfig
from rlgpt.run import rundir
from rlgpt.run.executor import JobResult


def step(path: Path, compute: Callable[..., dict[str, Any]], *args: Any) -> dict[str, Any]:
    """The value of one loop step: read from `path` when an earlier run finished it, else
    ``compute(*args)`` written atomically (the file appears only once the step is complete)."""
    if path.is_file():
        return json.loads(path.read_text())
    value = compute(*args)
    path.parent.mkdir(parents=True, exist_ok=True)
    rundir.write_json(path, value)
    # What a resumed run will read (keys sorted, tuples as lists): prompts built from it are then the same
    # in a fresh and a resumed run, so the response cache answers them.
    return json.loads(path.read_text())


def job_record(result: JobResult) -> dict[str, Any]:
    """``training.json``: a `JobResult` with the evaluation's success at the top (0 when the job failed);
    ``steps`` are the steps the job spent, a failed job's included."""
    report = result.eval
    return {"ok": result.ok, "error": result.error, "steps": result.steps, "wall_time_s": result.wall_time_s,
            "success_rate": report["success_rate"] if report and result.ok else 0.0,
            "report": report if result.ok else None, "run_dir": result.run_dir,
            "attempts": int(result.extra.get("attempts", 1))}


def result_record(cfg: RunConfig, task: str, mode: str, budget: int, used: int, report: dict[str, Any],
                  iterations: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    """The record every mode writes as ``summary.json`` (what `rlgpt report` reads)."""
    return {"task": task, "mode": mode, "seed": cfg.seed, "steps_budget": budget, "steps_used": used,
            "success_rate": float(report.get("success_rate", 0.0)),
            "achievement_success": report.get("achievement_success", {}),
            "eval_episodes": report.get("episodes", 0), "eval_split": report.get("split"),
            "iterations": iterations, **extra}
