"""The records a run directory holds, shared by the loop and the baselines: how a step's value is written
and read back (`step`), an iteration's training record (`job_record`) and the run's result record
(`result_record`, ``summary.json``)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from rlgpt import rundir
from rlgpt.config import RunConfig
from rlgpt.run.executor import JobResult
from rlgpt.run.ledger import charged, no_steps


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
    ``steps`` are the steps the job trained, a failed job's included; ``eval_steps`` the steps its
    evaluation played (0 when the job failed: an evaluation that crashed left no count)."""
    report = result.eval
    eval_steps = int((report or {}).get("steps", 0)) if result.ok else 0
    return {"ok": result.ok, "error": result.error, "steps": result.steps, "eval_steps": eval_steps,
            "wall_time_s": result.wall_time_s,
            "success_rate": report["success_rate"] if report and result.ok else 0.0,
            "report": report if result.ok else None, "run_dir": result.run_dir,
            "attempts": int(result.extra.get("attempts", 1))}


def result_record(cfg: RunConfig, task: str, mode: str, budget: int, by_kind: Mapping[str, int],
                  report: dict[str, Any], iterations: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    """The record every mode writes as ``summary.json`` (what `rlgpt report` reads). ``prompt_knowledge``
    holds the agents' ablation knobs the report labels runs by: the prompt-knowledge ones
    (`AgentConfig.env_doc`, ``examples``) and the API ablation's (``api``, ``goal_fallback``).

    ``steps_by_kind`` holds every env step the run took, per kind (`rlgpt.run.ledger.STEP_KINDS`: train,
    probe, reward_check, prefix, eval, test_eval); ``steps_used``, what ``--steps`` caps, is their sum
    without ``test_eval``: the test episodes only measure the result (nothing the run decides reads them),
    while the validation episodes (``eval``) decide the threshold stop and the selection and are charged."""
    by_kind = {**no_steps(), **by_kind}
    return {"task": task, "mode": mode, "seed": cfg.seed, "steps_budget": budget,
            "steps_used": charged(by_kind), "steps_by_kind": by_kind,
            "prompt_knowledge": {"env_doc": cfg.agents.env_doc, "examples": cfg.agents.examples,
                                 "api": cfg.agents.api, "goal_fallback": cfg.agents.goal_fallback},
            "success_rate": float(report.get("success_rate", 0.0)),
            "achievement_success": report.get("achievement_success", {}),
            "eval_episodes": report.get("episodes", 0), "eval_split": report.get("split"),
            "iterations": iterations, **extra}
