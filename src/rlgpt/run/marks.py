"""Evaluation at budget marks: what "steps to success s" is measured from, alike for every mode.

A run's marks (`rlgpt.config.RunConfig.eval_marks`, those within its budget) are counts of the run's own
primitive steps, cumulative over its iterations. Each training is given the marks no earlier training
crossed (`training_marks`) and the run's count when it starts (``mark_offset``); its learner saves the policy
the first time the count reaches each of them (`rlgpt.rl.learner.MarkSaver`, ``train/marks/<m>/``). A mark
the count passed between trainings is saved by the next training at its first learner step.

After the run every mark is evaluated on test seeds, at the task's episode length (`eval_length`, the same
for every mode whatever horizon a training used) with the run's ``eval_episodes``: the saved policy through
the executor (its evaluation path in a child process, ``marks/<m>/test.json``, read back when it exists), or,
for a mark no training reached (the run ended before it: the loop stopped at its threshold, or no RL ran),
the run's final reported policy's test result, ``source: "final"``. ``steps_to_success`` is the first mark
whose test success reaches each level; training windows never enter it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rlgpt import layout
from rlgpt.config import RunConfig
from rlgpt.run.executor import Executor, TrainJob
from rlgpt.run.records import MarkEntry, job_record, step

SUCCESS_LEVELS = (0.5, 0.8, 0.9)
"""The success levels of ``steps_to_success``."""


def run_marks(cfg: RunConfig, budget: int | None = None) -> tuple[int, ...]:
    """The run's budget marks (sorted): `RunConfig.eval_marks` up to the budget (``cfg.steps`` by default)."""
    budget = cfg.steps if budget is None else budget
    return tuple(sorted({m for m in cfg.eval_marks if 0 < m <= budget}))


def training_marks(marks: Sequence[int], covered: int) -> tuple[int, ...]:
    """The marks a training saves: those past `covered`, the run's count when the previous training ended
    (every mark up to it was crossed, and saved, by an earlier training). The training saves the ones its
    own steps reach."""
    return tuple(m for m in marks if m > covered)


def eval_length(cfg: RunConfig, task: str) -> int:
    """The episode length every reported evaluation of `task` plays (`RunConfig.eval_length`)."""
    return cfg.eval_length(task)


def evaluate_marks(cfg: RunConfig, task: str, executor: Executor | None, trainings: Sequence[TrainJob],
                   final: dict[str, Any], trained_until: int,
                   budget: int | None = None) -> list[MarkEntry]:
    """One entry per mark of the run (sorted by steps): the test evaluation of the policy the first of
    `trainings` (in the order they ran) that saved the mark saved there; for a mark past `trained_until`
    (the run's count when its last training ended: no training reached the mark) the `final` report's (the
    run's reported policy's test evaluation) as ``source: "final"``. A mark a training reached but left no
    policy for (a run directory from before marks) has no entry."""
    # Only a test evaluation stands for the final policy: a run whose test evaluation failed reports its
    # validation result, which no mark may carry (a planner chain's report has no split: it plays test seeds).
    if final and "split" not in final:
        final = {**final, "split": "test"}
    if final.get("split") != "test":
        final = {"error": "the final policy has no test evaluation"
                          + (f" (its report is {final['split']!r})" if final.get("split") else "")}
    entries = []
    for mark in run_marks(cfg, budget):
        saved = next(((job, layout.mark_dir(Path(job.config.resolved_run_dir()), mark)) for job in trainings
                      if _has_policy(layout.mark_dir(Path(job.config.resolved_run_dir()), mark))), None)
        if saved is None or executor is None:
            if mark > trained_until:
                entries.append(MarkEntry.of(mark, final, "final"))
            continue
        job, mark_dir = saved
        record = step(mark_dir / layout.TEST_JSON, evaluate_mark, executor, job, mark_dir,
                      cfg.eval_episodes, eval_length(cfg, task))
        entry = MarkEntry.of(mark, record["report"] or {}, "checkpoint")
        entry.dir = str(mark_dir)
        entry.eval_steps = int(record.get("eval_steps", 0))  # the test episodes it played
        if not record["ok"]:
            entry.error = record["error"]
        entries.append(entry)
    return entries


def evaluate_mark(executor: Executor, job: TrainJob, mark_dir: Path, episodes: int,
                  length: int) -> dict[str, Any]:
    """The test evaluation of a mark's saved policy: the training's job, evaluate-only, on the copy's
    directory, run by the executor like any evaluation (a child process; its crash is a failed record)."""
    config = dataclasses.replace(job.config, run_dir=str(mark_dir))
    mark_job = dataclasses.replace(job, config=config, eval_episodes=episodes, eval_episode_length=length,
                                   eval_split="test", evaluate_only=True)
    return job_record(executor.run(mark_job))


def steps_to_success(marks: Sequence[MarkEntry],
                     levels: Sequence[float] = SUCCESS_LEVELS) -> dict[str, int | None]:
    """Per success level (keys ``"0.5"``, ...): the first mark whose test success reaches it, None when
    none does."""
    ordered = sorted(marks, key=lambda e: e.steps)
    return {str(level): next((e.steps for e in ordered if e.success_rate >= level), None) for level in levels}


def marks_steps(entries: Sequence[MarkEntry]) -> int:
    """The env steps the marks' test evaluations played (a run's ``test_eval`` steps; "final" entries
    played none)."""
    return sum(e.eval_steps or 0 for e in entries)


def marks_record(entries: list[MarkEntry]) -> dict[str, Any]:
    """The ``summary.json`` keys: ``marks`` and ``steps_to_success``."""
    return {"marks": entries, "steps_to_success": steps_to_success(entries)}


def _has_policy(mark_dir: Path) -> bool:
    return any((mark_dir / "checkpoint_p0").glob("checkpoint_*.pth"))
