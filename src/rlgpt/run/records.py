"""The records a run directory holds, shared by the loop and the baselines: how a step's value is written
and read back (`step`), an iteration's training record (`job_record`) and the run's result record
(`result_record`, ``summary.json``), and who wrote the kept macros (`kept_writers`, `writer_counts`)."""

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


WRITERS: tuple[str, ...] = ("model", "library", "expert")
"""Who wrote a kept macro (`rlgpt.agents.fast.MacroCandidate.written_by`): the model in this run, the
model earlier (a verified skill of the library), or expert code (the trusted goal macro)."""


def kept_writers(fast: Mapping[str, Any]) -> dict[str, str]:
    """Sub-action -> who wrote its kept macro, from a ``fast.json`` (a loop iteration's, with ``macros``, or
    ``--mode code``'s single choice). Files written before the label read theirs from the kept candidate's
    ``fallback`` flag (the trusted goal macro: expert). A loop iteration's macros are those its reply
    trained with: a choice the reply left out (it never reached its goal) carried nothing."""
    choices = fast.get("macros", [fast] if "candidates" in fast else [])
    reply = fast.get("reply")
    trained = {m.get("name") for m in reply.get("macros", [])} if isinstance(reply, dict) else None
    kept: dict[str, str] = {}
    for choice in choices:
        if choice.get("best") is None or (trained is not None and choice.get("subaction") not in trained):
            continue
        writer = choice.get("written_by")
        if writer is None:
            best = next((c for c in choice["candidates"] if c["index"] == choice["best"]), {})
            writer = "expert" if best.get("fallback") else "model"
        kept[choice["subaction"]] = writer
    return kept


def writer_counts(writers: Mapping[str, str]) -> dict[str, int]:
    """How many kept macros each of `WRITERS` wrote."""
    return {w: sum(1 for v in writers.values() if v == w) for w in WRITERS}


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
    while the validation episodes (``eval``) decide the threshold stop and the selection and are charged.

    ``written_by`` counts who wrote the macros the reported policy used (the iteration ``best`` names, each
    iteration's from its own ``written_by``; `WRITERS`), ``own_code_share`` is the model's and the
    library's share of them (None without macros), and ``expert_code`` says whether any iteration kept
    expert code (what a reader must know before crediting the model)."""
    by_kind = {**no_steps(), **by_kind}
    selected = [it for it in iterations if it.get("dir") == extra.get("best")] or iterations[-1:]
    counts = writer_counts({k: v for it in selected for k, v in it.get("written_by", {}).items()})
    total = sum(counts.values())
    return {"task": task, "mode": mode, "seed": cfg.seed, "steps_budget": budget,
            "steps_used": charged(by_kind), "steps_by_kind": by_kind,
            "prompt_knowledge": {"env_doc": cfg.agents.env_doc, "examples": cfg.agents.examples,
                                 "api": cfg.agents.api, "goal_fallback": cfg.agents.goal_fallback},
            "success_rate": float(report.get("success_rate", 0.0)),
            "achievement_success": report.get("achievement_success", {}),
            "eval_episodes": report.get("episodes", 0), "eval_split": report.get("split"),
            "written_by": counts,
            "own_code_share": (counts["model"] + counts["library"]) / total if total else None,
            "expert_code": any("expert" in it.get("written_by", {}).values() for it in iterations),
            "iterations": iterations, **extra}
