"""Algorithm 1 of RL-GPT: the two loops, read top to bottom in :func:`run_loop`.

Outer loop: the slow agent decomposes the task (again, with the critic's feedback, when the critic targets
it). Inner loop: the fast agent writes macros, the dense reward and the RL setup (compiled, repaired and
probed inside `FastAgent.run`), the executor trains and evaluates, and the critic targets the fast agent
(inner loop again), the slow agent (outer loop again) or says done.

Every arrow is a plain value written to the run directory before the next step starts, and a step whose
file exists is read instead of run (`step`). That is the whole resume story: a run killed at any point
(SIGKILL included) continues from its last completed step with the same command, and the response cache
(``RUN/llm_cache``) answers the LLM calls of a step that was cut short.

Layout of ``RUN/``::

    iter_000/slow.json       the decomposition in effect (``new``: asked this iteration, with its prompt)
    iter_000/fast.json       the fast agent's reply, every macro candidate with its attempts and probe
    iter_000/macros.yaml     the kept macros;  reward.py: the dense reward;  probes.json: kept macros' probes
    iter_000/train/          an `rlgpt train` run directory (job.json, checkpoints, metrics.csv, eval/)
    iter_000/eval.json       the training's outcome and its evaluation
    iter_000/critic.json     the critic's feedback and prompt (``by: threshold``: success reached it)
    llm_cache/               every request (prompt) and reply, one JSON file each
    summary.json             the result record: best iteration, success, budget used
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from rlgpt.agents.critic import Critic
from rlgpt.agents.fast import FastAgent
from rlgpt.agents.planner import Planner
from rlgpt.agents.replies import Decomposition, FastReply, Feedback, Plan
from rlgpt.agents.slow import SlowAgent
from rlgpt.config import RunConfig
from rlgpt.macro.diagnostics import Diagnostic
from rlgpt.macro.probe import ProbeCall, ProbeReport, ProbeState
from rlgpt.run import rundir
from rlgpt.run.executor import Executor, TrainJob
from rlgpt.run.skills import Skill, SkillLibrary, run_chain
from rlgpt.tracking import LoopProgress

SUMMARY_JSON = "summary.json"


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


def feedback_text(feedback: dict[str, Any]) -> str:
    """The critic's feedback as the text the next agent's prompt carries."""
    problems = "; ".join(feedback["problems"]) or "none"
    suggestions = "; ".join(feedback["suggestions"]) or "none"
    return f"Problems: {problems}\nSuggestions: {suggestions}"


def probe_from_dict(data: dict[str, Any]) -> ProbeReport:
    """A `ProbeReport` back from its JSON form (``probes.json``)."""
    def state(s: dict[str, Any]) -> ProbeState:
        return ProbeState(tuple(s["pos"]), dict(s["inventory"]), dict(s["achievements"]))

    calls = tuple(ProbeCall(**{**c, "before": state(c["before"]), "after": state(c["after"]),
                               "unlocked": tuple(c["unlocked"]), "trace": tuple(c.get("trace", ()))})
                  for c in data["calls"])
    return ProbeReport(data["macro"], data["goal"], calls, dict(data["outcomes"]),
                       tuple(data.get("setup", ())))


def fast_diagnostics(fast: dict[str, Any]) -> list[str]:
    """Why code the fast agent wrote was rejected: each candidate's and the reward's last diagnostics."""
    lines = []
    for choice in fast["macros"]:
        for candidate in choice["candidates"]:
            if candidate["code"] is None and candidate["attempts"]:
                for d in candidate["attempts"][-1]["diagnostics"]:
                    where = f"macro {choice['subaction']} candidate {candidate['index']}"
                    lines.append(f"{where}: {Diagnostic(**d)}")
    reward = fast["reward"]
    if reward["code"] is None and reward["attempts"]:
        for d in reward["attempts"][-1]["diagnostics"]:
            lines.append(f"reward (left out of training): {Diagnostic(**d)}")
    return lines


@dataclasses.dataclass
class Agents:
    """The LLM roles the loop drives (all over one client)."""

    slow: SlowAgent
    fast: FastAgent
    critic: Critic


class Loop:
    """One task's RL-GPT loop in one run directory."""

    def __init__(self, cfg: RunConfig, agents: Agents, executor: Executor, progress: LoopProgress) -> None:
        self.cfg = cfg
        self.agents = agents
        self.executor = executor
        self.progress = progress

    def run_loop(self, task: str, run_dir: Path, steps: int) -> dict[str, Any]:
        """Algorithm 1 on `task` with a budget of `steps` primitive steps; returns the summary record."""
        cfg = self.cfg
        per_iteration = cfg.iteration_budget(steps)
        iterations: list[dict[str, Any]] = []
        slow_feedback = "none"
        index = 0
        done = False
        for outer in range(cfg.max_outer):
            decomposition: Decomposition | None = None
            fast_feedback = "none"
            for inner in range(cfg.max_inner):
                it_dir = run_dir / f"iter_{index:03d}"
                self.progress.phase("slow", index, task)
                slow = step(it_dir / "slow.json", self.slow_step, task, decomposition, slow_feedback)
                decomposition = Decomposition.from_dict(slow["decomposition"])

                self.progress.phase("fast", index, task)
                self.agents.fast.on_phase = lambda phase, i=index: self.progress.phase(phase, i, task)
                fast = step(it_dir / "fast.json", self.fast_step, it_dir, task, decomposition, fast_feedback)
                reply = FastReply.from_dict(fast["reply"])

                self.progress.phase("train", index, task)
                evaluation = step(it_dir / "eval.json", self.train_step, it_dir, task, reply, per_iteration)
                self.progress.used(evaluation["steps"])

                self.progress.phase("critic", index, task)
                feedback = step(it_dir / "critic.json", self.critic_step, task, index, decomposition, it_dir,
                                fast, evaluation)

                iterations.append({"index": index, "outer": outer, "inner": inner, "dir": it_dir.name,
                                   "success_rate": evaluation["success_rate"], "steps": evaluation["steps"],
                                   "macros": [m.name for m in reply.macros], "critic": feedback["target"]})
                index += 1
                if feedback["target"] == "done":
                    done = True
                    break
                if feedback["target"] == "slow":
                    slow_feedback = feedback_text(feedback)
                    break
                fast_feedback = feedback_text(feedback)
            if done:
                break
        return self.summarize(task, run_dir, steps, iterations)

    # -- the steps ---------------------------------------------------------------------------------

    def slow_step(self, task: str, current: Decomposition | None, feedback: str) -> dict[str, Any]:
        """A new decomposition at the start of an outer iteration; later inner iterations carry it over."""
        if current is not None:
            return {"new": False, "feedback": feedback, "decomposition": current.to_dict()}
        decomposition = self.agents.slow.decompose(task, feedback)
        return {"new": True, "feedback": feedback, "decomposition": decomposition.to_dict(),
                "prompt": self.agents.slow.messages(task, feedback)}

    def fast_step(self, it_dir: Path, task: str, decomposition: Decomposition,
                  feedback: str) -> dict[str, Any]:
        """Macros, reward and setup (compile-and-repair and probes happen inside `FastAgent.run`); the kept
        code also goes to readable files beside ``fast.json``."""
        result = self.agents.fast.run(task, decomposition, feedback)
        reply = result.reply
        it_dir.mkdir(parents=True, exist_ok=True)
        if reply.macros:
            rundir.write_yaml(it_dir / "macros.yaml", [{"name": m.name, "description": m.description,
                                                        "code": m.code} for m in reply.macros])
        rundir.atomic_write_text(it_dir / "reward.py", reply.reward_code)
        probes = [c.best.probe.to_dict() for c in result.macros
                  if c.best is not None and c.best.probe is not None]
        rundir.write_json(it_dir / "probes.json", probes)
        return {"feedback": feedback, **result.to_dict()}

    def train_step(self, it_dir: Path, task: str, reply: FastReply, steps: int) -> dict[str, Any]:
        """Train on the augmented action space with the LLM's reward, observation and horizon; evaluate."""
        train = dataclasses.replace(self.cfg.train, task=task, steps=steps, seed=self.cfg.seed,
                                    run_dir=str(it_dir / "train"), eval_episodes=0, wandb=False,
                                    env=dataclasses.replace(self.cfg.train.env, episode_length=reply.horizon),
                                    macros=dataclasses.replace(self.cfg.train.macros, file=None))
        if reply.macros:
            train.macros.file = str(it_dir / "macros.yaml")
        job = TrainJob(train, reply.reward_code, reply.observation, self.cfg.eval_episodes,
                       self.cfg.train.env.episode_length)
        return job_record(self.executor.run(job))

    def critic_step(self, task: str, index: int, decomposition: Decomposition, it_dir: Path,
                    fast: dict[str, Any], evaluation: dict[str, Any]) -> dict[str, Any]:
        """Done without asking when the success threshold is reached; otherwise the critic's feedback."""
        if evaluation["success_rate"] >= self.cfg.success_threshold:
            return {"by": "threshold", "target": "done", "problems": [], "suggestions": []}
        probes = [probe_from_dict(p) for p in json.loads((it_dir / "probes.json").read_text())]
        diagnostics = fast_diagnostics(fast)
        if evaluation["error"]:
            diagnostics.append(f"training failed: {evaluation['error']}")
        args = (task, index + 1, decomposition, probes, evaluation["report"], diagnostics)
        feedback: Feedback = self.agents.critic.review(*args)
        return {"by": "critic", **feedback.to_dict(), "prompt": self.agents.critic.messages(*args)}

    # -- the planner: long-horizon tasks as a chain of skills -------------------------------------------

    def run_plan(self, task: str, run_dir: Path, steps: int, planner: Planner,
                 library: SkillLibrary) -> dict[str, Any]:
        """Plan a chain of subtasks; take each from the skill library when an entry meets the threshold, else
        run the loop on it (budget split evenly) and store the result as a skill when it meets the threshold;
        then play the chain in sequence and evaluate it on the final goal."""
        self.progress.phase("plan", 0, task)
        plan = step(run_dir / "plan.json", lambda: planner.plan(
            task, library.describe(self.cfg.skill_threshold)).to_dict())
        subtasks = Plan.from_dict(plan["plan"]).subtasks
        chain, used, parts = [], 0, []
        for i, sub in enumerate(subtasks):
            sub_dir = run_dir / f"sub_{i:02d}_{sub.name}"
            choice = step(sub_dir / "skill.json", self.skill_step, sub.name, sub_dir,
                          steps // len(subtasks), library)
            chain.append(Skill(**choice["skill"]))
            used += choice["steps"]
            parts.append({"index": i, "dir": sub_dir.name, "task": sub.name, "source": choice["source"],
                          "success_rate": choice["skill"]["success_rate"], "steps": choice["steps"],
                          "macros": [m["name"] for m in choice["skill"]["macros"]], "critic": ""})
        self.progress.phase("chain", len(subtasks) - 1, task)
        evaluation = step(run_dir / "chain.json", run_chain, chain, task, self.cfg.eval_episodes,
                          self.cfg.train.env.episode_length, self.cfg.seed)
        return result_record(self.cfg, task, "rlgpt", steps, used, evaluation, parts, best="chain",
                             plan=[s.name for s in subtasks])

    def skill_step(self, task: str, sub_dir: Path, steps: int, library: SkillLibrary) -> dict[str, Any]:
        """A subtask's skill: the library's best entry meeting the threshold, or the loop's best iteration
        (stored in the library when it meets the threshold)."""
        found = library.best(task, self.cfg.skill_threshold)
        if found is not None:
            return {"source": "library", "steps": 0, "skill": dataclasses.asdict(found)}
        summary = step(sub_dir / SUMMARY_JSON, self.run_loop, task, sub_dir, steps)
        best_dir = sub_dir / summary["best"]
        macros_file = best_dir / "macros.yaml"
        macros = yaml.safe_load(macros_file.read_text()) if macros_file.is_file() else []
        provenance = {"run_dir": str(sub_dir), "iteration": summary["best"],
                      "model_id": getattr(self.agents.fast.client, "model_id", "")}
        if summary["success_rate"] >= self.cfg.skill_threshold:
            skill = library.add(task, summary["success_rate"], summary["steps_used"], provenance,
                                best_dir / "train", macros)
            source = "trained, stored"
        else:  # not good enough for the library, but the chain still tries it
            skill = Skill(task, summary["success_rate"], summary["steps_used"], provenance, macros,
                          path=str(best_dir), policy="train")
            source = "trained, below threshold"
        return {"source": source, "steps": summary["steps_used"], "skill": dataclasses.asdict(skill)}

    def summarize(self, task: str, run_dir: Path, steps: int, iterations: list[dict[str, Any]]) -> dict:
        """The result record: the best iteration (highest success, then fewest steps) and the budget used."""
        best = max(iterations, key=lambda it: (it["success_rate"], -it["index"]))
        report = json.loads((run_dir / best["dir"] / "eval.json").read_text())["report"] or {}
        return result_record(self.cfg, task, "rlgpt", steps, sum(it["steps"] for it in iterations),
                             report, iterations, best=best["dir"],
                             checkpoint=str(run_dir / best["dir"] / "train"))


def job_record(result: Any) -> dict[str, Any]:
    """``eval.json``: a `JobResult` with the evaluation's success at the top (0 when the job failed)."""
    report = result.eval
    return {"ok": result.ok, "error": result.error, "steps": result.steps, "wall_time_s": result.wall_time_s,
            "success_rate": report["success_rate"] if report else 0.0, "report": report,
            "run_dir": result.run_dir}


def result_record(cfg: RunConfig, task: str, mode: str, budget: int, used: int, report: dict[str, Any],
                  iterations: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    """The record every mode writes as ``summary.json`` (what `rlgpt report` reads)."""
    return {"task": task, "mode": mode, "seed": cfg.seed, "steps_budget": budget, "steps_used": used,
            "success_rate": float(report.get("success_rate", 0.0)),
            "achievement_success": report.get("achievement_success", {}),
            "eval_episodes": report.get("episodes", 0), "iterations": iterations, **extra}
