"""The baselines of `rlgpt run`: ``--mode ppo`` (one training on the whole budget, no LLM) and
``--mode code`` (the LLM writes the whole policy as one macro; played with no RL).

Both write the same ``summary.json`` record as the loop (`rlgpt.run.records.result_record`), their steps
counted as primitive (game) steps alike and by kind (ppo: train and test_eval; code: its probes and
test_eval), so `rlgpt report` puts them side by side.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rlgpt import layout
from rlgpt.agents.common import describe_task
from rlgpt.agents.envdoc import prerequisite_chain
from rlgpt.agents.fast import FastAgent, probe_steps
from rlgpt.agents.replies import SubAction
from rlgpt.config import RunConfig
from rlgpt.envs.tasks import TaskSpec, make_task_env
from rlgpt.macro.compiler import MacroSource
from rlgpt.macro.contain import ContainLimits, run_contained
from rlgpt.macro.runtime import MacroActionWrapper
from rlgpt.rl.evaluate import TRACE_EPISODES, eval_seeds, play_episode, summarize
from rlgpt.rl.progress import task_progress_goals
from rlgpt.rl.wrappers import EpisodeStats
from rlgpt.run.executor import Executor, TrainJob
from rlgpt.run.ledger import StepLedger
from rlgpt.run.marks import eval_length, evaluate_marks, marks_record, marks_steps, run_marks, training_marks
from rlgpt.run.records import IterationRecord, JobRecord, kept_writers, result_record, step
from rlgpt.tracking import LoopProgress

POLICY_MACRO = "policy"
"""Name of the one macro `--mode code` asks for."""


def chain_goals(task: str) -> tuple[str, ...]:
    """The achievements `--mode ppo`'s progress reward pays (`RunConfig.ppo_progress`): the task's
    prerequisite chain from crafter's recipes, prerequisites first, less the task's own targets; none for
    the Crafter benchmark, whose own reward already pays each achievement once per episode."""
    return task_progress_goals(task, prerequisite_chain(list(TaskSpec.from_name(task).targets)))


def run_ppo(cfg: RunConfig, run_dir: Path, executor: Executor, progress: LoopProgress) -> dict[str, Any]:
    """PPO on the task's reward (plus the recipe chain's progress reward with `RunConfig.ppo_progress`),
    primitives only, the whole budget in one training."""
    progress.phase("train", 0, cfg.task)
    offset = 0  # the run's count when the training starts (what its marks count from): nothing before it
    train = dataclasses.replace(cfg.train, task=cfg.task, steps=cfg.steps, seed=cfg.seed,
                                run_dir=str(run_dir / layout.PPO_DIR / layout.TRAIN_DIR), eval_episodes=0,
                                wandb=False, marks=training_marks(run_marks(cfg), offset), mark_offset=offset)
    trained = run_dir / layout.PPO_DIR / layout.TRAIN_DIR
    goals = chain_goals(cfg.task) if cfg.ppo_progress and cfg.train.progress_reward > 0 else ()
    job = TrainJob(train, eval_episodes=cfg.eval_episodes, eval_episode_length=eval_length(cfg, cfg.task),
                   eval_split="test", progress_goals=goals)  # no selection: test
    evaluation = JobRecord.from_dict(step(layout.training_record(run_dir / layout.PPO_DIR),
                                          lambda: JobRecord.of(executor.run(job)).to_dict()))
    ledger = StepLedger({"train": evaluation.steps, "test_eval": evaluation.eval_steps})
    progress.count(ledger)
    by_kind = ledger.by_kind()  # the iteration's: the training and its test evaluation
    # Every mark's saved policy on test seeds (marks past the training's end: its final test result).
    if run_marks(cfg):
        progress.phase("marks", 0, cfg.task)
    marks = evaluate_marks(cfg, cfg.task, executor, [job], evaluation.report or {},
                           offset + evaluation.steps)
    ledger.add("test_eval", marks_steps(marks))
    iterations = [IterationRecord(index=0, dir=layout.PPO_DIR, ok=evaluation.ok,
                                  success_rate=evaluation.success_rate, steps=evaluation.steps,
                                  steps_by_kind=by_kind, macros=[], critic="",
                                  rewards=["task", *(["chain"] if goals else [])])]
    return result_record(cfg, cfg.task, "ppo", cfg.steps, ledger.by_kind(), evaluation.report or {},
                         iterations, best=layout.PPO_DIR if evaluation.ok else None,  # never a failed job
                         checkpoint=str(trained) if evaluation.ok else None,
                         error=evaluation.error, **marks_record(marks))


def run_code(cfg: RunConfig, run_dir: Path, fast: FastAgent, progress: LoopProgress) -> dict[str, Any]:
    """The LLM's code as the whole policy: one macro (written, repaired and probed like any other),
    called again and again until each evaluation episode ends; no RL."""
    sub = policy_subaction(cfg.task, cfg.agents.env_doc)
    progress.phase("fast", 0, cfg.task)
    code_dir = run_dir / layout.CODE_DIR

    def write() -> dict[str, Any]:
        choice = fast.write_macro(cfg.task, sub)
        return {"source": None if choice.source is None else choice.source.code, **choice.to_dict(),
                "steps_by_kind": {"probe": probe_steps([choice])}}

    written = step(code_dir / layout.FAST_JSON, write)
    progress.code(kept_writers(written))
    ledger = StepLedger(written.get("steps_by_kind", {}))
    progress.count(ledger)
    progress.phase("eval", 0, cfg.task)
    evaluation = step(layout.training_record(code_dir), play_macro_policy, cfg, written["source"])
    # The policy's episodes are the reported (test) evaluation: reported, not charged.
    ledger.add("test_eval", evaluation["played_steps"])
    progress.count(ledger)
    iterations = [IterationRecord(index=0, dir=layout.CODE_DIR, ok=evaluation["ok"],
                                  success_rate=evaluation["success_rate"], steps=0,
                                  steps_by_kind=ledger.by_kind(),
                                  macros=[POLICY_MACRO] if written["source"] else [], critic="",
                                  written_by=kept_writers(written))]
    # No RL: the code is the policy at every mark (each mark carries its test result, source "final").
    marks = evaluate_marks(cfg, cfg.task, None, [], evaluation["report"] or {}, 0)
    return result_record(cfg, cfg.task, "code", cfg.steps, ledger.by_kind(), evaluation["report"] or {},
                         iterations,
                         best=layout.CODE_DIR, played_steps=evaluation["played_steps"],
                         error=evaluation["error"], **marks_record(marks))


def policy_subaction(task: str, env_doc: str = "full") -> SubAction:
    """What `--mode code` asks the fast agent for: the whole task as one macro, probed against its last
    target (the task described at prompt-knowledge level `env_doc`)."""
    return SubAction(POLICY_MACRO, f"play the whole task: {describe_task(task, env_doc)}; the function is "
                     "called again each time it returns, until the episode ends", "code",
                     TaskSpec.from_name(task).targets[-1], "code-as-policy baseline")


class MacroPolicy:
    """One macro as the whole policy (an `rlgpt.rl.evaluate.EpisodePolicy`): it is called again each time it
    returns."""

    def __init__(self, action: int) -> None:
        self.action = action
        """The macro's index in the env's action space."""

    def reset(self, slot: int) -> None:
        """Nothing to reset: the macro's state lives in its call."""

    def act(self, slots: Sequence[int], observations: Sequence[Any]) -> list[int]:
        return [self.action] * len(slots)


def macro_policy_env(cfg: RunConfig, code: str, length: int | None = None) -> EpisodeStats:
    """The env `--mode code` plays its policy macro on (its last action): the task's reported episode length
    (or `length`), the run's macro limits and seed."""
    length = length or eval_length(cfg, cfg.task)
    return EpisodeStats(MacroActionWrapper(make_task_env(TaskSpec.from_name(cfg.task), episode_length=length),
                                           [MacroSource(POLICY_MACRO, code)], gamma=cfg.train.ppo.gamma,
                                           max_macro_steps=length, seed=cfg.seed,
                                           max_time_share=cfg.train.macros.max_time_share,
                                           budget_grace_seconds=cfg.train.macros.budget_grace_seconds),
                        run_seed=cfg.seed)


def play_macro_policy(cfg: RunConfig, code: str | None) -> dict[str, Any]:
    """Evaluate a macro as the whole policy on the same episodes (seeds, episode length, statistics) as a
    trained policy's evaluation; a macro that never compiled scores 0 with its reason."""
    if code is None:
        return {"ok": False, "error": "the model's policy code never compiled", "success_rate": 0.0,
                "played_steps": 0, "report": None}
    env = macro_policy_env(cfg, code)
    policy = MacroPolicy(env.action_space.n - 1)
    played, failures = [], []
    contain = ContainLimits.from_config(cfg.train.macros)
    seeds = eval_seeds("test", cfg.seed, cfg.eval_episodes)
    for seed in seeds:
        # Each episode in a contained child (the code is the whole policy here): an episode whose process
        # runs out of memory or time, or dies, scores 0 and its diagnostic is reported; the run goes on.
        out = run_contained(play_episode, env, policy, seed, limits=contain)
        if out.diagnostic is None:
            played.append(out.value)
        else:
            failures.append(str(out.diagnostic))
    report = {**summarize(cfg.task, played, failed=len(failures)), "env_steps": 0, "split": "test",
              "seeds": seeds, "failed_episodes": failures[:TRACE_EPISODES]}
    return {"ok": True, "error": "", "success_rate": report["success_rate"], "played_steps": report["steps"],
            "report": report}
