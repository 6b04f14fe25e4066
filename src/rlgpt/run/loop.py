"""Algorithm 1 of RL-GPT: the two loops, read top to bottom in :func:`run_loop`.

Outer loop: the slow agent decomposes the task (again, with the critic's feedback, when the critic targets
it). Inner loop: the fast agent writes macros, the dense reward and the RL setup (compiled, repaired and
probed inside `FastAgent.run`), the executor trains and evaluates, and the critic targets the fast agent
(inner loop again), the slow agent (outer loop again) or says done.

Every arrow is a plain value written to the run directory before the next step starts, and a step whose
file exists is read instead of run (`step`). That is the whole resume story: a run killed at any point
(SIGKILL included) continues from its last completed step with the same command, and the response cache
(``RUN/llm_cache``) answers the LLM calls of a step that was cut short.

The files of ``RUN/`` are listed in `rlgpt.run.layout`.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import yaml

from rlgpt.agents.critic import Critic
from rlgpt.agents.fast import FastAgent, fast_diagnostics
from rlgpt.agents.planner import Planner
from rlgpt.agents.replies import Decomposition, FastReply, Plan
from rlgpt.agents.slow import SlowAgent
from rlgpt.config import RunConfig
from rlgpt.macro.code_skills import code_skills
from rlgpt.macro.prefix import save_pool
from rlgpt.macro.probe import ProbeReport
from rlgpt.run import layout, rundir
from rlgpt.run.executor import Executor, TrainJob
from rlgpt.run.records import job_record, result_record, step
from rlgpt.run.skills import Skill, SkillLibrary, chain_limits, contained_run_chain, contained_start_pool
from rlgpt.tracking import LoopProgress


def feedback_text(feedback: dict[str, Any]) -> str:
    """The critic's feedback as the text the next agent's prompt carries."""
    problems = "; ".join(feedback["problems"]) or "none"
    suggestions = "; ".join(feedback["suggestions"]) or "none"
    return f"Problems: {problems}\nSuggestions: {suggestions}"


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

    def run_loop(self, task: str, run_dir: Path, steps: int, start_pool: str | None = None,
                 options: tuple[str, ...] = ()) -> dict[str, Any]:
        """Algorithm 1 on `task` with a budget of `steps` primitive steps; returns the summary record.
        Trainings start their episodes from `start_pool`'s states when given and have the stored policies in
        `options` as actions (a chain's later subtask)."""
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
                it_dir = layout.iteration_dir(run_dir, index)
                self.progress.phase("slow", index, task)
                slow = step(it_dir / layout.SLOW_JSON, self.slow_step, task, decomposition, slow_feedback)
                decomposition = Decomposition.from_dict(slow["decomposition"])

                self.progress.phase("fast", index, task)
                self.agents.fast.on_phase = lambda phase, i=index: self.progress.phase(phase, i, task)
                fast = step(it_dir / layout.FAST_JSON, self.fast_step, it_dir, task, decomposition,
                            fast_feedback)
                reply = FastReply.from_dict(fast["reply"])

                self.progress.phase("train", index, task)
                evaluation = step(layout.training_record(it_dir), self.train_step, it_dir, task, reply,
                                  per_iteration, start_pool, options)
                self.progress.used(evaluation["steps"])

                self.progress.phase("critic", index, task)
                feedback = step(it_dir / layout.CRITIC_JSON, self.critic_step, task, index, decomposition,
                                it_dir, fast, evaluation)

                iterations.append({"index": index, "outer": outer, "inner": inner, "dir": it_dir.name,
                                   "ok": evaluation["ok"], "success_rate": evaluation["success_rate"],
                                   "steps": evaluation["steps"], "macros": [m.name for m in reply.macros],
                                   "critic": feedback["target"],
                                   "fallbacks": {role: rec["fallback"] for role, rec in
                                                 (("slow", slow), ("fast_setup", fast), ("critic", feedback))
                                                 if rec.get("fallback")}})
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
        # A reply that never validates falls back to the recipe graph's decomposition (marked as such).
        result = self.agents.slow.decompose_or_fallback(task, feedback)
        record = {"new": True, "feedback": feedback, "decomposition": result.decomposition.to_dict(),
                  "prompt": self.agents.slow.messages(task, feedback)}
        if result.repairs:
            record["goal_repairs"] = result.repairs
        if result.cuts:
            record["prompt_cuts"] = result.cuts
        if result.fallback:
            record.update(fallback=result.fallback, error=result.error)
        return record

    def fast_step(self, it_dir: Path, task: str, decomposition: Decomposition,
                  feedback: str) -> dict[str, Any]:
        """Macros, reward and setup (compile-and-repair and probes happen inside `FastAgent.run`); the kept
        code also goes to readable files beside ``fast.json``."""
        result = self.agents.fast.run(task, decomposition, feedback)
        reply = result.reply
        it_dir.mkdir(parents=True, exist_ok=True)
        if reply.macros:
            rundir.write_yaml(it_dir / layout.MACROS_YAML, [{"name": m.name, "description": m.description,
                                                        "code": m.code} for m in reply.macros])
        rundir.atomic_write_text(it_dir / layout.REWARD_PY, reply.reward_code)
        probes = [c.best.probe.to_dict() for c in result.macros
                  if c.best is not None and c.best.probe is not None]
        rundir.write_json(it_dir / layout.PROBES_JSON, probes)
        return {"feedback": feedback, **result.to_dict()}

    def train_step(self, it_dir: Path, task: str, reply: FastReply, steps: int,
                   start_pool: str | None = None, options: tuple[str, ...] = ()) -> dict[str, Any]:
        """Train on the augmented action space (primitives, macros, `options`) with the LLM's reward,
        observation and horizon (from `start_pool`'s states when given); evaluate."""
        train = dataclasses.replace(self.cfg.train, task=task, steps=steps, seed=self.cfg.seed,
                                    run_dir=str(it_dir / layout.TRAIN_DIR), eval_episodes=0, wandb=False,
                                    options=options,
                                    env=dataclasses.replace(self.cfg.train.env, episode_length=reply.horizon,
                                                            start_pool=start_pool),
                                    macros=dataclasses.replace(self.cfg.train.macros, file=None))
        if reply.macros:
            train.macros.file = str(it_dir / layout.MACROS_YAML)
        job = TrainJob(train, reply.reward_code, reply.observation, self.cfg.eval_episodes,
                       self.cfg.train.env.episode_length)
        rundir.write_json(it_dir / layout.TRAIN_JOB_JSON, job.to_dict())
        return job_record(self.executor.run(job))

    def test_step(self, it_dir: Path) -> dict[str, Any] | None:
        """The selected iteration's policy evaluated once on test seeds (training is found finished and not
        repeated); its record, or None for an iteration trained before jobs were kept."""
        try:
            job = TrainJob.from_dict(json.loads((it_dir / layout.TRAIN_JOB_JSON).read_text()))
        except OSError:
            return None
        return job_record(self.executor.run(dataclasses.replace(job, eval_split="test")))

    def critic_step(self, task: str, index: int, decomposition: Decomposition, it_dir: Path,
                    fast: dict[str, Any], evaluation: dict[str, Any]) -> dict[str, Any]:
        """Done without asking when the success threshold is reached; otherwise the critic's feedback."""
        if evaluation["success_rate"] >= self.cfg.success_threshold:
            return {"by": "threshold", "target": "done", "problems": [], "suggestions": []}
        probes = [ProbeReport.from_dict(p) for p in json.loads((it_dir / layout.PROBES_JSON).read_text())]
        diagnostics = fast_diagnostics(fast)
        if evaluation["error"]:
            diagnostics.append(f"training failed: {evaluation['error']}")
        args = (task, index + 1, decomposition, probes, evaluation["report"], diagnostics)
        # A reply that never validates is a "fast" decision carrying the error (the run goes on).
        feedback, error = self.agents.critic.review_or_fallback(*args)
        record = {"by": "critic", **feedback.to_dict(), "prompt": self.agents.critic.messages(*args)}
        if error:
            record.update(fallback="fast", error=error)
        return record

    # -- the planner: long-horizon tasks as a chain of skills -------------------------------------------

    def run_plan(self, task: str, run_dir: Path, steps: int, planner: Planner,
                 library: SkillLibrary) -> dict[str, Any]:
        """Plan a chain of subtasks; take each from the skill library when an entry meets the threshold, else
        run the loop on it (budget split evenly) and store the result as a skill when it meets the threshold;
        then play the chain in sequence and evaluate it on the final goal."""
        self.progress.phase("plan", 0, task)
        plan = step(run_dir / layout.PLAN_JSON, lambda: planner.plan(
            task, library.describe(self.cfg.skill_threshold)).to_dict())
        subtasks = Plan.from_dict(plan["plan"]).subtasks
        chain, used, parts = [], 0, []
        for i, sub in enumerate(subtasks):
            sub_dir = layout.subtask_dir(run_dir, i, sub.name)
            starts = {"pool": None, "steps": 0, "reached": 0, "episodes": 0}
            if chain and self.cfg.chain_starts and library.best(sub.name, self.cfg.skill_threshold) is None:
                starts = step(sub_dir / layout.START_POOL_JSON, self.start_step, chain, sub_dir)
            # The chain's macros so far that reached their goals are callable skills of this subtask's.
            self.agents.fast.code_skills = code_skills([m for s in chain for m in s.macros])
            # The chain's trained policies so far are actions (options) of this subtask's trainings.
            options = tuple(str(s.policy_dir) for s in chain) if self.cfg.chain_options else ()
            choice = step(sub_dir / layout.SKILL_CHOICE_JSON, self.skill_step, sub.name, sub_dir,
                          steps // len(subtasks), library, starts["pool"], options)
            skill = choice["skill"]
            if skill is not None:  # a subtask whose every training failed is left out of the chain
                chain.append(Skill(**skill))
            used += choice["steps"] + starts["steps"]
            parts.append({"index": i, "dir": sub_dir.name, "task": sub.name, "source": choice["source"],
                          "ok": skill is not None, "success_rate": skill["success_rate"] if skill else 0.0,
                          "steps": choice["steps"], "prefix_steps": starts["steps"],
                          "start_states": starts["reached"], "critic": "",
                          "macros": [m["name"] for m in (skill or {}).get("macros", [])]})
        self.progress.phase("chain", len(subtasks) - 1, task)
        evaluation = step(run_dir / layout.CHAIN_JSON, contained_run_chain, chain, task,
                          self.cfg.eval_episodes, self.cfg.train.env.episode_length, self.cfg.seed,
                          chain_limits(self.cfg.train.macros))
        return result_record(self.cfg, task, "rlgpt", steps, used, evaluation, parts, best="chain",
                             plan=[s.name for s in subtasks])

    def start_step(self, chain: list[Skill], sub_dir: Path) -> dict[str, Any]:
        """The start states of the subtask after `chain`: its skills played from fresh worlds, the states
        where all reached their goals saved to ``start_pool.pkl`` (``pool`` None when none did: the subtask
        then trains from fresh worlds). Every step played is reported in ``steps``."""
        # The skills run generated macros: in a contained child (its failure: no states, and the error).
        found = contained_start_pool(chain, self.cfg.chain_starts, self.cfg.train.env.episode_length or 1000,
                                     seed=self.cfg.seed, limits=chain_limits(self.cfg.train.macros))
        pool = None
        if found["states"]:
            sub_dir.mkdir(parents=True, exist_ok=True)
            save_pool(sub_dir / layout.START_POOL_FILE, found["states"])
            pool = str(sub_dir / layout.START_POOL_FILE)
        return {"pool": pool, "steps": found["steps"], "reached": found["reached"],
                "episodes": found["episodes"], **({"error": found["error"]} if "error" in found else {})}

    def skill_step(self, task: str, sub_dir: Path, steps: int, library: SkillLibrary,
                   start_pool: str | None = None, options: tuple[str, ...] = ()) -> dict[str, Any]:
        """A subtask's skill: the library's best entry meeting the threshold, or the loop's best iteration
        (stored in the library when it meets the threshold), trained from `start_pool`'s states if given and
        with the stored policies in `options` as actions."""
        found = library.best(task, self.cfg.skill_threshold)
        if found is not None:
            return {"source": "library", "steps": 0, "skill": dataclasses.asdict(found)}
        summary = step(sub_dir / layout.SUMMARY_JSON, self.run_loop, task, sub_dir, steps, start_pool,
                       options)
        if summary["best"] is None:  # every training failed: nothing to play, but the steps were spent
            return {"source": "trained, failed", "steps": summary["steps_used"], "skill": None}
        best_dir = sub_dir / summary["best"]
        macros = measured_macros(best_dir)
        provenance = {"run_dir": str(sub_dir), "iteration": summary["best"],
                      "model_id": getattr(self.agents.fast.client, "model_id", "")}
        # Storing is a decision: it reads validation episodes, never the subtask's test result.
        rate = summary.get("validation_success_rate", summary["success_rate"])
        if rate >= self.cfg.skill_threshold:
            skill = library.add(task, rate, summary["steps_used"], provenance,
                                best_dir / layout.TRAIN_DIR, macros)
            source = "trained, stored"
        else:  # not good enough for the library, but the chain still tries it
            skill = Skill(task, rate, summary["steps_used"], provenance, macros,
                          path=str(best_dir), policy=layout.TRAIN_DIR)
            source = "trained, below threshold"
        return {"source": source, "steps": summary["steps_used"], "skill": dataclasses.asdict(skill)}

    def summarize(self, task: str, run_dir: Path, steps: int, iterations: list[dict[str, Any]]) -> dict:
        """The result record: the best iteration (highest success, then the earliest) among those whose
        training and evaluation finished (None when none did), and the budget used by all of them."""
        finished = [it for it in iterations if it.get("ok", True)]
        best = max(finished, key=lambda it: (it["success_rate"], -it["index"]), default=None)
        used = sum(it["steps"] for it in iterations)
        if best is None:
            return result_record(self.cfg, task, "rlgpt", steps, used, {}, iterations, best=None,
                                 checkpoint=None)
        best_dir = run_dir / best["dir"]
        validation = json.loads(layout.training_record(best_dir).read_text())["report"] or {}
        # Selection above saw validation episodes only; the reported result is a fresh evaluation of the
        # selected policy on test episodes (validation's when the iteration predates kept jobs).
        test = step(best_dir / layout.TEST_JSON, self.test_step, best_dir)
        report = (test or {}).get("report") or {}
        if not report:
            report = validation
        return result_record(self.cfg, task, "rlgpt", steps, used, report, iterations, best=best["dir"],
                             checkpoint=str(best_dir / layout.TRAIN_DIR),
                             validation_success_rate=float(validation.get("success_rate", 0.0)),
                             test_error=(test or {}).get("error"))


def measured_macros(it_dir: Path) -> list[dict[str, Any]]:
    """An iteration's trained macros (``macros.yaml``) with the goal and goal rate their probes measured
    (``probes.json``): what a skill stores so that later macros can call them."""
    macros_file = it_dir / layout.MACROS_YAML
    macros = yaml.safe_load(macros_file.read_text()) if macros_file.is_file() else []
    probes_file = it_dir / layout.PROBES_JSON
    probes = {p["macro"]: p for p in json.loads(probes_file.read_text())} if probes_file.is_file() else {}
    for m in macros:
        probe = probes.get(m["name"], {})
        m["goal"], m["goal_rate"] = probe.get("goal") or "", probe.get("goal_rate")
    return macros
