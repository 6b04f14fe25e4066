"""`rlgpt run`: sets up one run (run directory, LLM client, agents, executor, tracking), dispatches on the
mode (the loop, the planner chain for long-horizon tasks, or a baseline) and writes ``summary.json``."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlgpt import layout, rundir
from rlgpt.config import RunConfig
from rlgpt.llm.accounting import AccountedClient
from rlgpt.llm.types import Backend
from rlgpt.run.executor import Executor, LocalExecutor
from rlgpt.run.records import JobRecord, RunSummary, kept_candidate
from rlgpt.tracking import LoopProgress, llm_tokens, log_to_wandb

if TYPE_CHECKING:
    from rlgpt.run.skills import CodeLibrary, SkillLibrary


def make_client(cfg: RunConfig, run_dir: Path, backend: Backend | None = None) -> AccountedClient:
    """The run's LLM client (its response cache: ``llm.cache_dir``, by default in the run directory)."""
    from rlgpt.llm.config import build_client

    return AccountedClient(build_client(cfg.llm, backend=backend, log_dir=run_dir / layout.LLM_LOGS))


def wandb_scalars(summary: RunSummary, run_dir: Path) -> tuple[list[tuple[int, dict[str, float]]],
                                                               dict[str, float]]:
    """What `log_to_wandb` logs of a finished run: per iteration (its index, its scalars: ``train/steps``,
    ``eval/`` success and per achievement, ``budget/`` steps by kind, ``macro/`` counters of its
    evaluation) and the run's final scalars (``llm/``, the best success, the budget)."""
    iterations = []
    for it in summary.iterations:
        scalars: dict[str, float] = {"train/steps": it.steps, "eval/success_rate": it.success_rate}
        scalars.update({f"budget/steps_{k}": v for k, v in (it.steps_by_kind or {}).items()})
        path = layout.training_record(run_dir / it.dir)
        report = (JobRecord.read(path).report if path.is_file() else None) or {}
        achieved = report.get("achievement_success") or {}
        scalars.update({f"eval/achievement/{k}": v for k, v in achieved.items()})
        for macro, stats in (report.get("macro_stats") or {}).items():
            scalars.update({f"macro/{macro}/{k}": v for k, v in stats.items()})
        iterations.append((it.index, scalars))
    final = {**(summary.llm or {}), "eval/best_success_rate": summary.success_rate,
             "train/steps_used": summary.steps_used, "budget/steps_used": summary.steps_used,
             **{f"budget/total_steps_{k}": v for k, v in (summary.steps_by_kind or {}).items()}}
    return iterations, final


def code_skills_record(cfg: RunConfig, run_dir: Path, summary: RunSummary, library: SkillLibrary,
                       read: CodeLibrary, model_id: str) -> dict[str, Any]:
    """``summary.json``'s ``skill_library``: the library the run read (`CodeLibrary.ref`), which of its
    skills the best iteration's kept macros call, and the code skills the run stored (a loop run's best
    iteration's verified macros, `rlgpt.run.skills.verified_code_skills`)."""
    import json

    from rlgpt.macro.code_skills import called_skills
    from rlgpt.run.loop import measured_macros
    from rlgpt.run.skills import verified_code_skills

    record: dict[str, Any] = {**read.ref(), "called": {}, "stored": []}
    best = summary.best
    fast_file = run_dir / str(best) / layout.FAST_JSON
    if not best or not fast_file.is_file():  # no iteration finished, a planner chain, the code mode
        return record
    fast = json.loads(fast_file.read_text())
    for choice in fast.get("macros", []):
        calls = [n for n in called_skills((kept_candidate(choice) or {}).get("code") or "")
                 if n in read.skills]
        if calls:
            record["called"][choice["subaction"]] = calls
    found = verified_code_skills(
        measured_macros(run_dir / best), fast, float(summary.validation_success_rate or 0.0),
        cfg.code_skill_min_goal_rate, cfg.skill_threshold,
        {"run_dir": str(run_dir), "iteration": best, "task": cfg.task, "seed": cfg.seed,
         "model_id": model_id})
    for skill in found:
        entry, stored = library.add_code(skill)
        record["stored"].append({"name": skill.name, "stored": stored, "version": entry.version,
                                 "hash": entry.hash})
    return record


def make_executor(cfg: RunConfig) -> Executor:
    """The executor ``cfg.executor`` names (a Ray one connects to its cluster here)."""
    if cfg.executor == "ray":
        from rlgpt.run.ray_executor import RayExecutor

        return RayExecutor(cfg.ray, attempts=cfg.job_attempts)
    return LocalExecutor(attempts=cfg.job_attempts)


def uses_planner(cfg: RunConfig) -> bool:
    """Long-horizon tasks (a prerequisite chain of at least ``planner_min_chain`` achievements) go through
    the task planner and the skill library. The Crafter benchmark does not: it has no chain to reach, the
    slow agent decomposes "unlock as many achievements as you can"."""
    from rlgpt.agents.envdoc import prerequisite_chain
    from rlgpt.envs.tasks import BENCHMARK_TASK

    if cfg.task == BENCHMARK_TASK:
        return False
    return len(prerequisite_chain(cfg.task.split("+"))) >= cfg.planner_min_chain


def run(cfg: RunConfig, executor: Executor | None = None, backend: Backend | None = None) -> dict[str, Any]:
    """Run (or resume) ``cfg``'s run to the end and return its summary record (also in ``summary.json``).

    Args:
        cfg: the run.
        executor: where trainings run (default: `make_executor`, as ``cfg.executor`` says).
        backend: an already loaded LLM backend to use instead of building one from ``cfg.llm``.
    """
    from rlgpt.env_registry import get_env

    get_env(cfg.train.env.kind).check_task(cfg.task)
    executor = executor or make_executor(cfg)
    run_dir = rundir.prepare_run_dir(cfg.resolved_run_dir()).resolve()
    with rundir.locked_run_dir(run_dir, layout.RUN_LOCK):
        return _run_in(cfg, run_dir, executor, backend)


def _run_in(cfg: RunConfig, run_dir: Path, executor: Executor,
            backend: Backend | None) -> dict[str, Any]:
    """`run` once it holds `run_dir`."""
    rundir.write_yaml(run_dir / layout.RUN_YAML, dataclasses.asdict(cfg))
    progress = LoopProgress(cfg.steps, cfg.iterations if cfg.mode == "rlgpt" else 1,
                            log_path=run_dir / layout.PHASES_JSONL)
    client = None
    if cfg.mode == "ppo":
        from rlgpt.run.baselines import run_ppo

        summary = run_ppo(cfg, run_dir, executor, progress)
    else:
        client = make_client(cfg, run_dir, backend)
        progress.tokens = lambda: llm_tokens(client.metrics())
        progress.waiting = lambda: client.inner.in_flight
        from rlgpt.agents.fast import FastAgent
        from rlgpt.macro.contain import ContainLimits

        if cfg.code_skills:
            from rlgpt.run.skills import SkillLibrary

            library = SkillLibrary(cfg.skills_dir)
            read = library.code_library()
        fast = FastAgent(client, cfg.agents, contain=ContainLimits.from_config(cfg.train.macros),  # type: ignore[arg-type]
                         library_skills=read.skills if cfg.code_skills else None)
        if cfg.mode == "code":
            from rlgpt.run.baselines import run_code

            summary = run_code(cfg, run_dir, fast, progress)
        else:
            from rlgpt.agents.critic import Critic
            from rlgpt.agents.slow import SlowAgent
            from rlgpt.run.loop import Agents, Loop

            agents = Agents(SlowAgent(client, cfg.agents), fast, Critic(client, cfg.agents))  # type: ignore[arg-type]
            loop = Loop(cfg, agents, executor, progress)
            if uses_planner(cfg):
                from rlgpt.agents.planner import Planner
                from rlgpt.run.skills import SkillLibrary

                summary = loop.run_plan(cfg.task, run_dir, cfg.steps, Planner(client, cfg.agents),  # type: ignore[arg-type]
                                        SkillLibrary(cfg.skills_dir))
            else:
                summary = loop.run_loop(cfg.task, run_dir, cfg.steps)
    record = RunSummary.from_dict(summary)
    if client is not None:
        record.model_id = client.model_id
        record.llm = client.metrics()
        if cfg.code_skills:
            record.skill_library = code_skills_record(cfg, run_dir, record, library, read, client.model_id)
    progress.close()
    record.run_dir = str(run_dir)
    summary = record.to_dict()
    rundir.write_json(run_dir / layout.SUMMARY_JSON, summary)
    if cfg.wandb:
        log_to_wandb(dataclasses.asdict(cfg), cfg.wandb_project, run_dir, *wandb_scalars(record, run_dir),
                     _replay_gif(run_dir))
    return summary


def _replay_gif(run_dir: Path) -> Path | None:
    """The run's test episode 0 as a GIF for W&B (`rlgpt.run.replay`, at most ``PREVIEW_STEPS``: a
    visualisation after the run, its steps in no budget); None, with the reason on stderr, when the run has
    no policy to replay."""
    from rlgpt.run.replay import preview

    done, why = preview(run_dir)
    if done is None:
        print(f"rlgpt run: no replay for W&B: {why}", file=sys.stderr)
        return None
    return done.path
