"""The baselines of `rlgpt run`: ``--mode ppo`` (one training on the whole budget, no LLM) and
``--mode code`` (the LLM writes the whole policy as one macro; played with no RL).

Both write the same ``summary.json`` record as the loop (`rlgpt.run.records.result_record`), their steps
counted as primitive (game) steps alike, so `rlgpt report` puts them side by side.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from pathlib import Path
from typing import Any

import numpy as np

from rlgpt.agents.common import describe_task
from rlgpt.agents.fast import FastAgent
from rlgpt.agents.replies import SubAction
from rlgpt.config import RunConfig
from rlgpt.envs.tasks import ACHIEVEMENTS, TaskSpec, make_task_env
from rlgpt.macro.compiler import MacroSource
from rlgpt.macro.contain import ContainLimits, run_contained
from rlgpt.macro.runtime import MacroActionWrapper
from rlgpt.rl.evaluate import TRACE_EPISODES, TRACE_STEPS, eval_seed
from rlgpt.rl.score import crafter_score, percent_rates, success_measure
from rlgpt.rl.wrappers import EpisodeStats
from rlgpt.run import layout
from rlgpt.run.executor import Executor, TrainJob
from rlgpt.run.records import job_record, result_record, step
from rlgpt.tracking import LoopProgress

POLICY_MACRO = "policy"
"""Name of the one macro `--mode code` asks for."""


def run_ppo(cfg: RunConfig, run_dir: Path, executor: Executor, progress: LoopProgress) -> dict[str, Any]:
    """Plain PPO on the task's reward, primitives only, the whole budget in one training."""
    progress.phase("train", 0, cfg.task)
    train = dataclasses.replace(cfg.train, task=cfg.task, steps=cfg.steps, seed=cfg.seed,
                                run_dir=str(run_dir / layout.PPO_DIR / layout.TRAIN_DIR), eval_episodes=0,
                                wandb=False)
    trained = run_dir / layout.PPO_DIR / layout.TRAIN_DIR
    job = TrainJob(train, eval_episodes=cfg.eval_episodes, eval_split="test")  # no selection: test
    evaluation = step(layout.training_record(run_dir / layout.PPO_DIR), lambda: job_record(executor.run(job)))
    progress.used(evaluation["steps"])
    iterations = [{"index": 0, "dir": layout.PPO_DIR, "ok": evaluation["ok"],
                   "success_rate": evaluation["success_rate"], "steps": evaluation["steps"],
                   "macros": [], "critic": ""}]
    return result_record(cfg, cfg.task, "ppo", cfg.steps, evaluation["steps"], evaluation["report"] or {},
                         iterations, best=layout.PPO_DIR if evaluation["ok"] else None,  # never a failed job
                         checkpoint=str(trained) if evaluation["ok"] else None,
                         error=evaluation["error"])


def run_code(cfg: RunConfig, run_dir: Path, fast: FastAgent, progress: LoopProgress) -> dict[str, Any]:
    """The LLM's code as the whole policy: one macro (written, repaired and probed like any other),
    called again and again until each evaluation episode ends; no RL."""
    sub = policy_subaction(cfg.task)
    progress.phase("fast", 0, cfg.task)
    code_dir = run_dir / layout.CODE_DIR

    def write() -> dict[str, Any]:
        choice = fast.write_macro(cfg.task, sub)
        return {"source": None if choice.source is None else choice.source.code, **choice.to_dict()}

    written = step(code_dir / layout.FAST_JSON, write)
    progress.phase("eval", 0, cfg.task)
    evaluation = step(layout.training_record(code_dir), play_macro_policy, cfg, written["source"])
    iterations = [{"index": 0, "dir": layout.CODE_DIR, "ok": evaluation["ok"],
                   "success_rate": evaluation["success_rate"], "steps": 0,
                   "macros": [POLICY_MACRO] if written["source"] else [], "critic": ""}]
    return result_record(cfg, cfg.task, "code", cfg.steps, 0, evaluation["report"] or {}, iterations,
                         best=layout.CODE_DIR, played_steps=evaluation["played_steps"],
                         error=evaluation["error"])


def policy_subaction(task: str) -> SubAction:
    """What `--mode code` asks the fast agent for: the whole task as one macro, probed against its last
    target."""
    return SubAction(POLICY_MACRO, f"play the whole task: {describe_task(task)}; the function is called "
                     "again each time it returns, until the episode ends", "code",
                     TaskSpec.from_name(task).targets[-1], "code-as-policy baseline")


def play_macro_policy(cfg: RunConfig, code: str | None) -> dict[str, Any]:
    """Evaluate a macro as the whole policy on the same episodes (seeds, episode length, statistics) as a
    trained policy's evaluation; a macro that never compiled scores 0 with its reason."""
    if code is None:
        return {"ok": False, "error": "the model's policy code never compiled", "success_rate": 0.0,
                "played_steps": 0, "report": None}
    spec = TaskSpec.from_name(cfg.task)
    length = cfg.train.env.episode_length or spec.episode_length
    env = EpisodeStats(MacroActionWrapper(make_task_env(spec, episode_length=length),
                                          [MacroSource(POLICY_MACRO, code)], gamma=cfg.train.ppo.gamma,
                                          max_macro_steps=length, seed=cfg.seed,
                                          max_time_share=cfg.train.macros.max_time_share,
                                          budget_grace_seconds=cfg.train.macros.budget_grace_seconds),
                     run_seed=cfg.seed)
    results, traces, played, failures = [], [], 0, []
    contain = ContainLimits.from_config(cfg.train.macros)
    for episode in range(cfg.eval_episodes):
        # Each episode in a contained child (the code is the whole policy here): an episode whose process
        # runs out of memory or time, or dies, scores 0 and its diagnostic is reported; the run goes on.
        out = run_contained(_play_episode, env, eval_seed("test", cfg.seed, episode), limits=contain)
        if out.diagnostic is not None:
            failures.append(str(out.diagnostic))
            continue
        stats, success, recent = out.value
        played += int(stats["rollout/episode_steps"])
        results.append(stats)
        if not success and len(traces) < TRACE_EPISODES:
            traces.append(" -> ".join(recent))
    episodes = len(results) + len(failures)

    def mean(key: str) -> float:  # failed episodes count as 0 (no success, no achievement)
        return float(sum(s[key] for s in results) / episodes)

    achievement_success = {a: mean(f"rollout/achievement/{a}") for a in ACHIEVEMENTS}
    report = {
        "task": cfg.task, "episodes": episodes, "env_steps": 0, "split": "test",
        "success_rate": success_measure(cfg.task, mean("rollout/success"), achievement_success),
        "achievement_success": achievement_success,
        "crafter_score": crafter_score(percent_rates(achievement_success)),
        "mean_episode_steps": float(np.mean([s["rollout/episode_steps"] for s in results] or [0.0])),
        "macro_stats": {POLICY_MACRO: macro_totals(results)} if results else {},
        "traces": traces,
        "failed_episodes": failures[:TRACE_EPISODES],
    }
    return {"ok": True, "error": "", "success_rate": report["success_rate"], "played_steps": played,
            "report": report}


def _play_episode(env: Any, seed: int) -> tuple[dict[str, float], bool, list[str]]:
    """One evaluation episode of the policy macro (called again each time it returns): the episode's
    statistics, whether it succeeded, and the last calls' outcomes."""
    env.reset(seed=seed)
    recent: deque[str] = deque(maxlen=TRACE_STEPS)
    while True:
        _, _, terminated, truncated, info = env.step(env.action_space.n - 1)
        macro = info["macro"]
        recent.append(f"{POLICY_MACRO}[{macro['outcome']}, {macro['steps']} steps]")
        if terminated or truncated:
            break
    return dict(info["episode_extra_stats"]), bool(info["success"]), list(recent)


def macro_totals(episodes: list[dict[str, float]]) -> dict[str, float]:
    """The policy macro's counters summed over episodes (mean_length over all calls)."""
    prefix = f"macro/{POLICY_MACRO}/"
    totals = {k[len(prefix):]: float(sum(e[k] for e in episodes)) for k in episodes[0]
              if k.startswith(prefix) and k != prefix + "mean_length"}
    steps = sum(e[prefix + "mean_length"] * e[prefix + "calls"] for e in episodes)
    totals["mean_length"] = steps / totals["calls"] if totals.get("calls") else 0.0
    return totals
