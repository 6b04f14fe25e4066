"""`rlgpt run`: sets up one run (run directory, LLM client, agents, executor, tracking), dispatches on the
mode (the loop, the planner chain for long-horizon tasks, or a baseline) and writes ``summary.json``."""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from pathlib import Path
from typing import Any

from rlgpt.config import RunConfig
from rlgpt.llm.client import LLMClient
from rlgpt.llm.types import Backend
from rlgpt.run import rundir
from rlgpt.run.executor import Executor, LocalExecutor
from rlgpt.run.loop import SUMMARY_JSON
from rlgpt.tracking import LoopProgress

RUN_YAML = "run.yaml"
PHASES_JSONL = "phases.jsonl"
"""One line per finished phase: task, iteration, phase and its wall time (`LoopProgress`)."""


class AccountedClient:
    """The agents' view of an `LLMClient` that also counts schema retries per role
    (``llm/<role>/schema_retries``): each answer a `structured` call needed beyond its first."""

    def __init__(self, inner: LLMClient) -> None:
        self.inner = inner
        self.schema_retries: dict[str, int] = defaultdict(int)

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    def _answers(self) -> int:
        return sum(u.calls for u in self.inner.usage.values()) + self.inner.cache_hits

    def chat(self, role: str, messages: list, **kwargs: Any):
        return self.inner.chat(role, messages, **kwargs)

    def structured(self, role: str, messages: list, schema: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        before = self._answers()
        try:
            return self.inner.structured(role, messages, schema, **kwargs)
        finally:
            self.schema_retries[role] += max(self._answers() - before - 1, 0)

    def metrics(self) -> dict[str, float]:
        """The client's ``llm/*`` metrics plus schema retries per role."""
        out = self.inner.metrics()
        out.update({f"llm/{role}/schema_retries": float(n) for role, n in self.schema_retries.items()})
        return out


def make_client(cfg: RunConfig, run_dir: Path, backend: Backend | None = None) -> AccountedClient:
    """The run's LLM client (its response cache: ``llm.cache_dir``, by default in the run directory)."""
    from rlgpt.llm.config import build_client

    return AccountedClient(build_client(cfg.llm, backend=backend))


def uses_planner(cfg: RunConfig) -> bool:
    """Long-horizon tasks (a prerequisite chain of at least ``planner_min_chain`` achievements) go through
    the task planner and the skill library."""
    from rlgpt.agents.envdoc import prerequisite_chain

    return len(prerequisite_chain(cfg.task.split("+"))) >= cfg.planner_min_chain


def run(cfg: RunConfig, executor: Executor | None = None, backend: Backend | None = None) -> dict[str, Any]:
    """Run (or resume) ``cfg``'s run to the end and return its summary record (also in ``summary.json``).

    Args:
        cfg: the run.
        executor: where trainings run (default: `LocalExecutor`, child processes here).
        backend: an already loaded LLM backend to use instead of building one from ``cfg.llm``.
    """
    from rlgpt.envs.tasks import TaskSpec

    TaskSpec.from_name(cfg.task)
    run_dir = rundir.prepare_run_dir(cfg.resolved_run_dir()).resolve()
    rundir.write_yaml(run_dir / RUN_YAML, dataclasses.asdict(cfg))
    executor = executor or LocalExecutor()
    progress = LoopProgress(cfg.steps, cfg.iterations if cfg.mode == "rlgpt" else 1,
                            log_path=run_dir / PHASES_JSONL)
    client = None
    if cfg.mode == "ppo":
        from rlgpt.run.baselines import run_ppo

        summary = run_ppo(cfg, run_dir, executor, progress)
    else:
        client = make_client(cfg, run_dir, backend)
        from rlgpt.agents.fast import FastAgent

        fast = FastAgent(client, cfg.agents)  # type: ignore[arg-type]
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
        summary["model_id"] = client.model_id
        summary["llm"] = client.metrics()
    progress.close()
    summary["run_dir"] = str(run_dir)
    rundir.write_json(run_dir / SUMMARY_JSON, summary)
    if cfg.wandb:
        log_to_wandb(cfg, run_dir, summary)
    return summary


WANDB_ID = "wandb_id.txt"


def log_to_wandb(cfg: RunConfig, run_dir: Path, summary: dict[str, Any]) -> None:
    """One W&B run per `rlgpt run` (offline unless ``WANDB_MODE`` says otherwise; a resumed run continues
    the same W&B run): per iteration ``train/`` (steps, wall time), ``eval/`` (success, per achievement) and
    ``macro/`` (per-macro counters of the evaluation); ``llm/`` at the end; the generated code as
    artifacts."""
    import json
    import os
    import uuid

    import wandb

    os.environ.setdefault("WANDB_MODE", "offline")
    id_path = run_dir / WANDB_ID
    if not id_path.is_file():
        rundir.atomic_write_text(id_path, uuid.uuid4().hex[:12])
    run = wandb.init(id=id_path.read_text().strip(), project=cfg.wandb_project, dir=str(run_dir),
                     config=dataclasses.asdict(cfg), resume="allow", name=run_dir.name)
    try:
        for it in summary["iterations"]:
            scalars: dict[str, float] = {"train/steps": it["steps"], "eval/success_rate": it["success_rate"]}
            eval_path = run_dir / it["dir"] / "eval.json"
            report = json.loads(eval_path.read_text()).get("report") if eval_path.is_file() else None
            for name, rate in ((report or {}).get("achievement_success") or {}).items():
                scalars[f"eval/achievement/{name}"] = rate
            for macro, stats in ((report or {}).get("macro_stats") or {}).items():
                scalars.update({f"macro/{macro}/{k}": v for k, v in stats.items()})
            run.log(scalars, step=it["index"])
        final = {**summary.get("llm", {}), "eval/best_success_rate": summary["success_rate"],
                 "train/steps_used": summary["steps_used"]}
        run.log(final, step=len(summary["iterations"]))
        code = wandb.Artifact(f"code-{run_dir.name}", type="code")
        for path in sorted(run_dir.glob("*/macros.yaml")) + sorted(run_dir.glob("*/reward.py")):
            code.add_file(str(path), name=f"{path.parent.name}/{path.name}")
        if code.manifest.entries:
            run.log_artifact(code)
    finally:
        run.finish()
        # finish() can return before W&B's service has written the last records; stopping the service
        # flushes them, so the offline run is complete on disk when `rlgpt run` returns.
        wandb.teardown()
