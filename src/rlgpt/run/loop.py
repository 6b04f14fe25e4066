"""Algorithm 1 of RL-GPT: the two loops, read top to bottom in :func:`run_loop`.

Outer loop: the slow agent decomposes the task (again, with the critic's feedback, when the critic targets
it). Inner loop: the fast agent writes macros, the dense reward and the RL setup (compiled, repaired and
probed inside `FastAgent.run`), the executor trains and evaluates, and the critic targets the fast agent
(inner loop again), the slow agent (outer loop again) or says done.

Every arrow is a plain value written to the run directory before the next step starts, and a step whose
file exists is read instead of run (`step`). That is the whole resume story: a run killed at any point
(SIGKILL included) continues from its last completed step with the same command, and the response cache
(``RUN/llm_cache``) answers the LLM calls of a step that was cut short.

Every env step the run takes (probes, reward dry runs, chain prefixes, trainings, evaluations) is counted
in `Loop.ledger` (`rlgpt.run.ledger`) as the step files report it, so a resumed run counts what it reads
exactly as what it plays; ``--steps`` caps the charged total (`training_budget`).

The files of ``RUN/`` are listed in `rlgpt.layout`.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from rlgpt import layout, rundir
from rlgpt.agents.critic import Critic, critic_notes
from rlgpt.agents.fast import CarriedMacro, FastAgent, fast_diagnostics
from rlgpt.agents.planner import Planner
from rlgpt.agents.replies import Decomposition, FastReply, Plan
from rlgpt.agents.slow import SlowAgent, goal_covers
from rlgpt.config import ConfigError, RunConfig, candidate_seed
from rlgpt.envs.crafter import GameState
from rlgpt.envs.tasks import TaskSpec
from rlgpt.llm.errors import ContextOverflowError
from rlgpt.llm.types import Message
from rlgpt.macro.code_skills import CodeSkill, code_skills
from rlgpt.macro.prefix import StartSummary, load_pool, save_pool
from rlgpt.macro.probe import ProbeReport
from rlgpt.rl.progress import task_progress_goals
from rlgpt.run.chain import chain_limits, contained_run_chain, contained_start_pool
from rlgpt.run.executor import Executor, JobResult, TrainJob
from rlgpt.run.ledger import StepLedger, charged, steps_by_kind
from rlgpt.run.marks import (
    eval_length,
    evaluate_marks,
    marks_record,
    marks_steps,
    run_marks,
    training_marks,
)
from rlgpt.run.records import (
    IterationRecord,
    JobRecord,
    RunSummary,
    job_record,
    kept_candidate,
    kept_writers,
    result_record,
    step,
    training_rewards,
)
from rlgpt.run.skills import Skill, SkillLibrary
from rlgpt.tracking import LoopProgress


def feedback_text(feedback: dict[str, Any]) -> str:
    """The critic's feedback as the text the next agent's prompt carries."""
    problems = "; ".join(feedback["problems"]) or "none"
    suggestions = "; ".join(feedback["suggestions"]) or "none"
    return f"Problems: {problems}\nSuggestions: {suggestions}"


def plan_goals(task: str, decomposition: Decomposition) -> tuple[str, ...]:
    """The goals the plan's progress reward pays (`rlgpt.rl.progress`): every sub-action's goal, in the
    decomposition's order, less the task's own targets. None for the Crafter benchmark, whose own reward
    already pays each achievement once per episode."""
    return task_progress_goals(task, (s.goal for s in decomposition.subactions))


def verified_macros(fast: Mapping[str, Any], iteration: str) -> dict[str, CarriedMacro]:
    """Goal -> `CarriedMacro` for each kept macro of a fast step's record (``fast.json``) written by the model
    (in the run, or the library's) that reached its goal in some probe call."""
    found: dict[str, CarriedMacro] = {}
    for choice in fast.get("macros", ()):
        kept = kept_candidate(choice) or {}
        probe = kept.get("probe") or {}
        rate = probe.get("goal_rate")
        if kept.get("written_by", "model") in ("model", "library") and kept.get("code") \
                and probe.get("goal") and isinstance(rate, int | float) and rate > 0:
            found[probe["goal"]] = CarriedMacro(choice["subaction"], kept["code"], iteration, float(rate))
    return found


def carry(carried: dict[str, CarriedMacro], found: Mapping[str, CarriedMacro]) -> None:
    """Add an iteration's `verified_macros` to the run's `carried`, per goal keeping the higher goal rate
    (the later iteration's on a tie)."""
    for goal, macro in found.items():
        if goal not in carried or macro.goal_rate >= carried[goal].goal_rate:
            carried[goal] = macro


def workable_plan(task: str, decomposition: Decomposition, fast: Mapping[str, Any]) -> str:
    """Why `decomposition` is kept although the critic asked the slow agent for a new one ("" when it is
    not): its goals cover every achievement of the task, and every coded sub-action's kept macro reached
    its goal in a probe call. Then the code works and what is missing is the policy's: in recorded runs
    the 1.5B critic's "slow" verdicts on such plans carried garbled changes, and each new decomposition
    dropped a working link (make_stone_pickaxe: get_stone replaced by place_stone, get_wood dropped)."""
    subactions = decomposition.subactions
    targets = TaskSpec.from_name(task).targets
    if not subactions or not all(any(goal_covers(s.goal, t) for s in subactions) for t in targets):
        return ""
    reached = set()
    for choice in fast.get("macros", ()):
        probe = (kept_candidate(choice) or {}).get("probe") or {}
        if isinstance(probe.get("goal_rate"), int | float) and probe["goal_rate"] > 0:
            reached.add(probe.get("goal"))
    coded = [s for s in subactions if s.how == "code"]
    if not coded or any(s.goal not in reached for s in coded):
        return ""
    return (f"every coded sub-action's macro reached its goal in a probe call ({len(coded)} of {len(coded)}) "
            f"and its goals cover the task; the decomposition is kept")


def disabled_diagnostics(disabled: Any) -> list[str]:
    """The critic's line for each macro switched off in training (`rlgpt.rl.train.TrainResult.disabled`)."""
    if not isinstance(disabled, Mapping):
        return []
    return [f"macro {name} was switched off in training: its code took most of its steps' CPU time "
            f"({calls:.1f} calls per episode found it off); do less work per step"
            for name, calls in disabled.items() if isinstance(calls, int | float)]


def recorded_rewards(it_dir: Path) -> list[str] | None:
    """What the iteration's training reward added up (`rlgpt.run.records.REWARDS`), read from its
    ``train_job.json`` (None when it has none)."""
    try:
        return training_rewards(json.loads((it_dir / layout.TRAIN_JOB_JSON).read_text()))
    except (OSError, ValueError):
        return None


def training_budget(per_iteration: int, remaining: int, eval_bound: int) -> int:
    """Primitive steps an iteration may train: its share of the budget (`RunConfig.iteration_budget`), but
    no more than what `remaining` (the budget less every step counted so far, this iteration's probes and
    reward checks included) leaves after its validation evaluation (`eval_bound`, the most steps that can
    play); 0 when nothing is left. Sample Factory stops after the batch that reaches it, so a run's charged
    steps exceed ``--steps`` by at most one training batch (`rlgpt.rl.learner.SMDPLearner` drops the
    batches that arrive past a training's budget): ``batch_size`` decisions, so with macros the primitive
    steps of their calls (1,310 for one 256-decision batch in the e2e test's run)."""
    return max(0, min(per_iteration, remaining - eval_bound))


@dataclasses.dataclass
class Agents:
    """The LLM roles the loop drives (all over one client)."""

    slow: SlowAgent
    fast: FastAgent
    critic: Critic

    def starting_from(self, states: Sequence[GameState], code_skills: Mapping[str, CodeSkill] | None = None,
                      on_phase: Callable[[str], None] | None = None) -> Agents:
        """The roles for a task whose episodes start from `states` (a chain's later subtask, its start pool;
        a fresh world when empty): each constructed with the summary its prompts state (``start``:
        `StartSummary`, None for fresh worlds), the fast agent also with the states themselves and, when
        given, the chain's `code_skills` and `on_phase`; everything else as these roles have it."""
        start = StartSummary.of(states) if states else None
        fast = self.fast
        return Agents(
            type(self.slow)(self.slow.client, self.slow.config, start=start),
            type(fast)(fast.client, fast.config, fast.limits, fast.contain, start=start,
                       start_states=tuple(states), library_skills=fast.library_skills,
                       code_skills=fast.code_skills if code_skills is None else code_skills,
                       on_phase=on_phase or fast.on_phase),
            type(self.critic)(self.critic.client, self.critic.config, start=start))


def iteration_fallbacks(slow: dict[str, Any], fast: dict[str, Any], critic: dict[str, Any]) -> dict[str, str]:
    """Which role fell back to what in one iteration (roles that used the model's reply are absent):
    ``slow`` (``recipe_graph``, ``task_as_rl``), ``fast_macro`` (``goal_macro``: a kept macro is the trusted
    goal macro; ``no_macro``: a coded sub-action kept none, so RL plays it with primitives), ``fast_reward``
    (``task_reward``: no dense reward passed its checks, the task's own reward trains), ``fast_setup``
    (``setup_defaults``) and ``critic`` (``fast``)."""
    out = {role: rec["fallback"] for role, rec in (("slow", slow), ("fast_setup", fast), ("critic", critic))
           if rec.get("fallback")}
    macro = []
    for choice in fast.get("macros", []):
        if choice["best"] is None:
            macro.append("no_macro")
        elif (kept_candidate(choice) or {}).get("fallback"):
            macro.append("goal_macro")
    if macro:
        out["fast_macro"] = "+".join(sorted(set(macro)))
    if "reward" in fast and not fast["reward"].get("code"):
        out["fast_reward"] = "task_reward"
    return out


def run_fallbacks(records: Sequence[IterationRecord]) -> dict[str, list[str]]:
    """Every role's fallbacks over `records` (iterations, or a plan's links with their own), each named once:
    what a run's summary says it fell back to."""
    out: dict[str, list[str]] = {}
    for rec in records:
        for role, names in (rec.fallbacks or {}).items():
            for name in names if isinstance(names, list) else [names]:
                if name not in out.setdefault(role, []):
                    out[role].append(name)
    return out



def recorded_prompt(messages: Callable[..., list[Message]], *args: Any) -> list[Message] | str:
    """A role's prompt for its step file, fitted as it was sent; a prompt that cannot fit the context (the
    role fell back without asking: `rlgpt.llm.errors.ContextOverflowError`) is recorded as that error, so
    recording never ends a run the role's fallback carried on."""
    try:
        return messages(*args)
    except ContextOverflowError as exc:
        return f"not sent: {exc}"

class Loop:
    """One task's RL-GPT loop in one run directory."""

    def __init__(self, cfg: RunConfig, agents: Agents, executor: Executor, progress: LoopProgress) -> None:
        self.cfg = cfg
        self.agents = agents
        self.executor = executor
        self.progress = progress
        self.ledger = StepLedger()
        """Every env step this run has taken so far, per kind (a planner's subtasks included); ``.used`` is
        what the budget is charged, e.g. the offset of the steps of the training about to start."""

    def count(self, kind: str, steps: int) -> None:
        """Count `steps` env steps of `kind` in the ledger (and on the status line)."""
        self.ledger.add(kind, steps)
        self.progress.count(self.ledger)

    def steps_counted(self) -> int:
        """The run's primitive steps counted so far, charged to the budget (``self.ledger.used``: what
        budget marks are measured in)."""
        return self.ledger.used

    def run_loop(self, task: str, run_dir: Path, steps: int, start_pool: str | None = None,
                 options: tuple[str, ...] = (), with_marks: bool = True,
                 code_skills: Mapping[str, CodeSkill] | None = None) -> dict[str, Any]:
        """Algorithm 1 on `task` with a budget of `steps` primitive steps; returns the summary record.
        Trainings start their episodes from `start_pool`'s states when given and have the stored policies in
        `options` as actions, and macros may call `code_skills` (a chain's later subtask). With `with_marks`
        the trainings save the run's budget marks and the summary evaluates them (`rlgpt.run.marks`; a
        planner's subtasks do not)."""
        cfg = self.cfg
        # The agents plan, write and probe code for what the start states still lack; the fast agent's
        # probes show on the progress line as phases of the iteration under way.
        self.agents = self.agents.starting_from(load_pool(start_pool) if start_pool else (), code_skills,
                                                on_phase=self.progress.within)
        per_iteration = cfg.iteration_budget(steps)
        marks = run_marks(cfg, steps) if with_marks else ()
        covered = self.steps_counted()  # the run's count where the last training ended
        start = self.ledger.by_kind()

        def remaining() -> int:
            return steps - (self.ledger.used - charged(start))

        iterations: list[IterationRecord] = []
        # Goal -> the model-written macro that reached it in the most probe calls so far: later iterations try
        # it first (a re-decomposition keeps what worked). Rebuilt from each fast.json, so a resumed run
        # carries the same macros.
        carried: dict[str, CarriedMacro] = {}
        slow_feedback = "none"
        index = 0
        done = False
        for outer in range(cfg.max_outer):
            decomposition: Decomposition | None = None
            fast_feedback, fast_notes = "none", {}
            for inner in range(cfg.max_inner):
                if remaining() <= 0:  # the budget is spent: no new iteration
                    done = True
                    break
                before = self.ledger.by_kind()
                it_dir = layout.iteration_dir(run_dir, index)
                self.progress.phase("slow", index, task)
                slow = step(it_dir / layout.SLOW_JSON, self.slow_step, task, decomposition, slow_feedback)
                decomposition = Decomposition.from_dict(slow["decomposition"])

                self.progress.phase("fast", index, task)
                fast = step(it_dir / layout.FAST_JSON, self.fast_step, it_dir, task, decomposition,
                            fast_feedback, fast_notes, dict(carried), index)
                carry(carried, verified_macros(fast, it_dir.name))
                reply = FastReply.from_dict(fast["reply"])
                self.progress.code(kept_writers(fast))
                for kind, n in fast.get("steps_by_kind", {}).items():  # probes and reward dry runs
                    self.count(kind, n)

                # Each candidate trains an even share and plays its own validation evaluation.
                candidates = cfg.train_candidates
                budget = training_budget(per_iteration, remaining(),
                                         candidates * self.eval_bound(task)) // candidates
                if budget <= 0 and not layout.training_record(it_dir).is_file():
                    # What the probes left cannot pay for a training and its evaluation: the run ends here.
                    iterations.append(IterationRecord(
                        index=index, outer=outer, inner=inner, dir=it_dir.name, ok=False, success_rate=0.0,
                        steps=0, steps_by_kind=self.ledger.since(before),
                        macros=[m.name for m in reply.macros], critic="", written_by=kept_writers(fast),
                        stopped="budget"))
                    done = True
                    break
                self.progress.phase("train", index, task)
                evaluation = JobRecord.from_dict(step(
                    layout.training_record(it_dir), self.train_step, it_dir, task, reply, budget, start_pool,
                    options, training_marks(marks, covered), self.steps_counted(),
                    plan_goals(task, decomposition)))
                self.count("train", evaluation.steps)
                covered = self.steps_counted()
                self.count("eval", evaluation.eval_steps)

                self.progress.phase("critic", index, task)
                feedback = step(it_dir / layout.CRITIC_JSON, self.critic_step, task, index, decomposition,
                                it_dir, fast, evaluation, outer + 1 < cfg.max_outer,
                                inner + 1 < cfg.max_inner)

                iterations.append(IterationRecord(
                    index=index, outer=outer, inner=inner, dir=it_dir.name, ok=evaluation.ok,
                    success_rate=evaluation.success_rate, steps=evaluation.steps,
                    steps_by_kind=self.ledger.since(before), macros=[m.name for m in reply.macros],
                    written_by=kept_writers(fast), search=fast.get("search"), critic=feedback["target"],
                    fallbacks=iteration_fallbacks(slow, fast, feedback), rewards=recorded_rewards(it_dir)))
                index += 1
                if feedback["target"] == "done":
                    done = True
                    break
                if feedback["target"] == "slow":
                    slow_feedback = feedback_text(feedback)
                    break
                fast_feedback, fast_notes = feedback_text(feedback), critic_notes(feedback)
            if done:
                break
        return self.summarize(task, run_dir, steps, iterations, start, with_marks)

    def eval_bound(self, task: str) -> int:
        """The most primitive steps an iteration's validation evaluation can play: its episodes at the
        evaluation's episode length (`rlgpt.run.marks.eval_length`)."""
        return self.cfg.eval_bound(task)

    # -- the steps ---------------------------------------------------------------------------------

    def slow_step(self, task: str, current: Decomposition | None, feedback: str) -> dict[str, Any]:
        """A new decomposition at the start of an outer iteration; later inner iterations carry it over."""
        if current is not None:
            return {"new": False, "feedback": feedback, "decomposition": current.to_dict()}
        # A reply that never validates falls back to the recipe graph's decomposition (marked as such); under
        # the prompt-knowledge ablation to RL on the task (`SlowAgent.decompose_or_fallback`).
        result = self.agents.slow.decompose_or_fallback(task, feedback)
        record = {"new": True, "feedback": feedback, "decomposition": result.decomposition.to_dict(),
                  "prompt": recorded_prompt(self.agents.slow.messages, task, feedback)}
        if result.repairs:
            record["goal_repairs"] = result.repairs
        if result.cuts:
            record["prompt_cuts"] = result.cuts
        if result.fallback:
            record.update(fallback=result.fallback, error=result.error,
                          env_doc=self.agents.slow.config.env_doc)
        return record

    def fast_step(self, it_dir: Path, task: str, decomposition: Decomposition,
                  feedback: str, notes: dict[str, str] | None = None,
                  carried: Mapping[str, CarriedMacro] | None = None, index: int = 0) -> dict[str, Any]:
        """Macros, reward and setup (compile-and-repair and probes happen inside `FastAgent.run`; `notes`: the
        critic's change for the sub-action it named; `carried`: earlier iterations' verified macros by goal;
        `index`: the iteration's, its searches' draw of sampling seeds); the kept code also goes to readable
        files beside ``fast.json``."""
        result = self.agents.fast.run(task, decomposition, feedback, notes, carried, draw=index)
        reply = result.reply
        it_dir.mkdir(parents=True, exist_ok=True)
        if reply.macros:
            rundir.write_yaml(it_dir / layout.MACROS_YAML, [m.to_dict() for m in reply.macros])
        rundir.atomic_write_text(it_dir / layout.REWARD_PY, reply.reward_code)
        probes = [c.best.probe.to_dict() for c in result.macros
                  if c.best is not None and c.best.probe is not None]
        rundir.write_json(it_dir / layout.PROBES_JSON, probes)
        return {"feedback": feedback, **result.to_dict()}

    def train_step(self, it_dir: Path, task: str, reply: FastReply, steps: int,
                   start_pool: str | None = None, options: tuple[str, ...] = (), marks: tuple[int, ...] = (),
                   mark_offset: int = 0, goals: tuple[str, ...] = ()) -> dict[str, Any]:
        """Train on the augmented action space (primitives, macros, `options`) with the LLM's reward, the
        plan's progress reward on `goals` (`plan_goals`), observation and horizon (from `start_pool`'s states
        when given), saving the policy at the budget `marks` the run's count (from `mark_offset`) reaches;
        evaluate at the task's episode length.

        With ``train_candidates`` > 1 every candidate trains `steps` (its share) through
        `Executor.run_many` (`candidate_jobs`) and the record is `candidates_record`'s."""
        jobs = self.candidate_jobs(it_dir, task, reply, steps, start_pool, options, marks, mark_offset, goals)
        if len(jobs) == 1:
            rundir.write_json(it_dir / layout.TRAIN_JOB_JSON, jobs[0].to_dict())
            return job_record(self.executor.run(jobs[0]))
        record = candidates_record(jobs, self.executor.run_many(jobs))
        rundir.write_json(it_dir / layout.TRAIN_JOB_JSON, record["candidates"][record["selected"]]["job"])
        return record

    def candidate_jobs(self, it_dir: Path, task: str, reply: FastReply, steps: int,
                       start_pool: str | None, options: tuple[str, ...], marks: tuple[int, ...],
                       mark_offset: int, goals: tuple[str, ...] = ()) -> list[TrainJob]:
        """One job per candidate (``train_candidates``): the same reply, `steps` each, candidate k's seed
        (`rlgpt.config.candidate_seed`) and directory (`layout.candidate_dir`); every one evaluated on the
        run's validation episodes. Budget marks: the ledger charges the candidates in the order k, so
        candidate k counts from ``mark_offset + k * steps`` and saves the marks in its own window (candidate
        0 also those passed since the previous training, as a single training does)."""
        jobs = []
        # The Crafter benchmark's episode is part of its definition (its reward counts each achievement's
        # first unlock in an episode of 10,000 steps): the fast agent's horizon would cut off what a long
        # episode unlocks, so its trainings play the benchmark's own length.
        horizon = self.cfg.eval_length(task) if TaskSpec.from_name(task).benchmark else reply.horizon
        for k in range(self.cfg.train_candidates):
            offset = mark_offset + k * steps
            own_marks = tuple(marks) if k == 0 else tuple(m for m in marks if m > offset)
            train = dataclasses.replace(self.cfg.train, task=task, steps=steps,
                                        seed=candidate_seed(self.cfg.seed, k),
                                        run_dir=str(layout.candidate_dir(it_dir, k)), eval_episodes=0,
                                        wandb=False, options=options, marks=own_marks, mark_offset=offset,
                                        env=dataclasses.replace(self.cfg.train.env,
                                                                episode_length=horizon,
                                                                start_pool=start_pool),
                                        macros=dataclasses.replace(self.cfg.train.macros, file=None))
            if reply.macros:
                train.macros.file = str(it_dir / layout.MACROS_YAML)
            jobs.append(TrainJob(train, reply.reward_code, reply.observation, self.cfg.eval_episodes,
                                 eval_length(self.cfg, task), eval_seed=None if k == 0 else self.cfg.seed,
                                 progress_goals=goals))
        return jobs

    def test_step(self, it_dir: Path) -> dict[str, Any] | None:
        """The selected iteration's policy evaluated once on test seeds (training is found finished and not
        repeated); its record, or None for an iteration trained before jobs were kept."""
        try:
            job = TrainJob.from_dict(json.loads((it_dir / layout.TRAIN_JOB_JSON).read_text()))
        except OSError:
            return None
        return job_record(self.executor.run(dataclasses.replace(job, eval_split="test")))

    def critic_step(self, task: str, index: int, decomposition: Decomposition, it_dir: Path,
                    fast: dict[str, Any], evaluation: JobRecord, outer_left: bool = True,
                    inner_left: bool = True) -> dict[str, Any]:
        """Done without asking when the success threshold is reached; otherwise the critic's feedback.
        `outer_left`/`inner_left`: whether the loop has another outer (new decomposition) or inner (same
        decomposition, new code) iteration after this one."""
        if evaluation.success_rate >= self.cfg.success_threshold:
            return {"by": "threshold", "target": "done", "problems": [], "suggestions": []}
        probes = [ProbeReport.from_dict(p) for p in json.loads((it_dir / layout.PROBES_JSON).read_text())]
        diagnostics = fast_diagnostics(fast)
        if evaluation.error:
            diagnostics.append(f"training failed: {evaluation.error}")
        diagnostics.extend(disabled_diagnostics((evaluation.report or {}).get("disabled_in_training")))
        args = (task, index + 1, decomposition, probes, evaluation.report, diagnostics)
        # A reply that never validates is a "fast" decision carrying the error (the run goes on).
        feedback, error = self.agents.critic.review_or_fallback(*args)
        record = {"by": "critic", **feedback.to_dict(),
                  "prompt": recorded_prompt(self.agents.critic.messages, *args)}
        if error:
            record.update(fallback="fast", error=error)
        if record["target"] == "slow" and (why := workable_plan(task, decomposition, fast)):
            record.update(target="fast", overruled=f"slow: {why}")
        if record["target"] == "slow" and not outer_left and inner_left:
            # A "slow" verdict ends the inner loop, and with no outer iteration left that ended the run with
            # its inner iterations' budget unspent (every unnamed-achievement run at max_outer 1 stopped after
            # 1 of 2 iterations); the change goes to the fast agent's next iteration instead.
            record.update(target="fast", overruled=f"slow: no outer iteration is left (max_outer "
                                                   f"{self.cfg.max_outer}); the fast agent gets the change")
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
        self.check_link_budget(steps, [s.name for s in subtasks])
        start = self.ledger.by_kind()
        chain, parts = [], []
        for i, sub in enumerate(subtasks):
            sub_dir = layout.subtask_dir(run_dir, i, sub.name)
            before = self.ledger.by_kind()
            starts = {"pool": None, "steps": 0, "reached": 0, "episodes": 0}
            if chain and self.cfg.chain_starts and library.best(sub.name, self.cfg.skill_threshold) is None:
                starts = step(sub_dir / layout.START_POOL_JSON, self.start_step, chain, sub_dir)
            self.count("prefix", starts["steps"])
            # The chain's trained policies so far are actions (options) of this subtask's trainings.
            options = tuple(str(s.policy_dir) for s in chain) if self.cfg.chain_options else ()
            # A subtask's share of the budget, no more than what the run has left.
            share = min(steps // len(subtasks), steps - (self.ledger.used - charged(start)))
            chosen = self.ledger.by_kind()
            # The chain's macros so far that reached their goals are callable skills of this subtask's.
            skills = code_skills([m for s in chain for m in s.macros])
            choice = step(sub_dir / layout.SKILL_CHOICE_JSON, self.skill_step, sub.name, sub_dir,
                          share, library, starts["pool"], options, skills)
            # The subtask's steps as its record says (its loop counted them when it ran; a resumed run reads
            # the record instead): the ledger is the same either way.
            self.ledger.restore(chosen)
            self.ledger.add_all(steps_by_kind(choice))
            self.progress.count(self.ledger)
            skill = choice["skill"]
            if skill is not None:  # a subtask whose every training failed is left out of the chain
                chain.append(Skill(**skill))
            link = sub_dir / layout.SUMMARY_JSON  # absent when the link's skill came from the library
            link_fallbacks = (RunSummary.read(link).fallbacks or {}) if link.exists() else {}
            parts.append(IterationRecord(
                index=i, dir=sub_dir.name, task=sub.name, source=choice["source"], fallbacks=link_fallbacks,
                ok=skill is not None, success_rate=skill["success_rate"] if skill else 0.0,
                steps=choice["steps"], prefix_steps=starts["steps"], steps_by_kind=self.ledger.since(before),
                start_states=starts["reached"], critic="",
                macros=[m["name"] for m in (skill or {}).get("macros", [])]))
        self.progress.phase("chain", len(subtasks) - 1, task)
        evaluation = step(run_dir / layout.CHAIN_JSON, contained_run_chain, chain, task,
                          self.cfg.eval_episodes, self.cfg.train.env.episode_length, self.cfg.seed,
                          chain_limits(self.cfg.train.macros))
        self.count("test_eval", evaluation.get("steps", 0))  # the chain on test episodes
        # The chain is a policy of the task only once every link is trained: marks past its end carry its
        # test result; earlier ones have no policy of the task to evaluate (and no entry).
        marks = evaluate_marks(self.cfg, task, None, [], evaluation, self.ledger.used - charged(start), steps)
        fallbacks = run_fallbacks(parts)
        if plan.get("fallback"):
            fallbacks["planner"] = [plan["fallback"]]
        return result_record(self.cfg, task, "rlgpt", steps, self.ledger.since(start), evaluation, parts,
                             best="chain", plan=[s.name for s in subtasks], fallbacks=fallbacks,
                             **marks_record(marks))

    def check_link_budget(self, steps: int, links: list[str]) -> None:
        """Raise ConfigError when `steps` split over the plan's `links` (each link's loop then over its
        iterations) leave an iteration nothing to train after its validation evaluation: such
        a run would plan and write code for every link and train none. The plan is kept (``plan.json``), so
        the same command with a larger ``--steps`` goes on from it."""
        shortfall = self.cfg.budget_shortfall(steps, links)
        if shortfall:
            raise ConfigError(shortfall)

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
                "episodes": found["episodes"],
                **({"start": StartSummary.of(found["states"]).to_dict()} if found["states"] else {}),
                **({"error": found["error"]} if "error" in found else {})}

    def skill_step(self, task: str, sub_dir: Path, steps: int, library: SkillLibrary,
                   start_pool: str | None = None, options: tuple[str, ...] = (),
                   code_skills: Mapping[str, CodeSkill] | None = None) -> dict[str, Any]:
        """A subtask's skill: the library's best entry meeting the threshold, or the loop's best iteration
        (stored in the library when it meets the threshold), trained from `start_pool`'s states if given,
        with the stored policies in `options` as actions and `code_skills` callable by its macros."""
        found = library.best(task, self.cfg.skill_threshold)
        if found is not None:
            return {"source": "library", "steps": 0, "steps_by_kind": {}, "skill": dataclasses.asdict(found)}
        written = step(sub_dir / layout.SUMMARY_JSON, self.run_loop, task, sub_dir, steps, start_pool,
                       options, False, code_skills)
        by_kind = steps_by_kind(written)
        summary = RunSummary.from_dict(written)
        if summary.best is None:  # every training failed: nothing to play, but the steps were spent
            return {"source": "trained, failed", "steps": summary.steps_used, "steps_by_kind": by_kind,
                    "skill": None}
        best_dir = sub_dir / summary.best
        macros = measured_macros(best_dir)
        provenance = {"run_dir": str(sub_dir), "iteration": summary.best,
                      "model_id": getattr(self.agents.fast.client, "model_id", "")}
        # Storing is a decision: it reads validation episodes, never the subtask's test result.
        rate = (summary.success_rate if summary.validation_success_rate is None
                else summary.validation_success_rate)
        if rate >= self.cfg.skill_threshold:
            skill = library.add(task, rate, summary.steps_used, provenance,
                                selected_train_dir(best_dir), macros)
            source = "trained, stored"
        else:  # not good enough for the library, but the chain still tries it
            skill = Skill(task, rate, summary.steps_used, provenance, macros,
                          path=str(best_dir), policy=selected_train_dir(best_dir).name)
            source = "trained, below threshold"
        return {"source": source, "steps": summary.steps_used, "steps_by_kind": by_kind,
                "skill": dataclasses.asdict(skill)}

    def summarize(self, task: str, run_dir: Path, steps: int, iterations: list[IterationRecord],
                  start: dict[str, int], with_marks: bool = True) -> dict:
        """`_summarize`'s record with ``fallbacks``: every role's fallbacks over the iterations
        (`run_fallbacks`)."""
        return {**self._summarize(task, run_dir, steps, iterations, start, with_marks),
                "fallbacks": run_fallbacks(iterations)}

    def _summarize(self, task: str, run_dir: Path, steps: int, iterations: list[IterationRecord],
                   start: dict[str, int], with_marks: bool = True) -> dict:
        """The result record: the best iteration (highest success, then the earliest) among those whose
        training and evaluation finished (None when none did), every step counted since `start` (the
        ledger when the loop began; the selected policy's test evaluation and the marks' included), and
        (with `with_marks`) the test evaluations at the run's budget marks."""
        finished = [it for it in iterations if it.ok]
        best = max(finished, key=lambda it: (it.success_rate, -it.index), default=None)
        if best is None:
            marks = self.marks_step(task, run_dir, steps, iterations, {}, with_marks)
            return result_record(self.cfg, task, "rlgpt", steps, self.ledger.since(start), {}, iterations,
                                 best=None, checkpoint=None, **marks)
        best_dir = run_dir / best.dir
        validation = JobRecord.read(layout.training_record(best_dir)).report or {}
        # Selection above saw validation episodes only; the reported result is a fresh evaluation of the
        # selected policy on test episodes (validation's when the iteration predates kept jobs).
        tested = step(best_dir / layout.TEST_JSON, self.test_step, best_dir)
        test = JobRecord.from_dict(tested) if tested else None
        self.count("test_eval", test.eval_steps if test else 0)
        report = (test.report if test else None) or {}
        if not report:
            report = validation
        marks = self.marks_step(task, run_dir, steps, iterations, report, with_marks)
        return result_record(self.cfg, task, "rlgpt", steps, self.ledger.since(start), report, iterations,
                             best=best.dir,
                             checkpoint=str(selected_train_dir(best_dir)),
                             validation_success_rate=float(validation.get("success_rate", 0.0)),
                             test_error=test.error if test else None, **marks)

    def marks_step(self, task: str, run_dir: Path, steps: int, iterations: list[IterationRecord],
                   final: dict[str, Any], with_marks: bool = True) -> dict[str, Any]:
        """``marks`` and ``steps_to_success``: every budget mark's policy (saved by the iteration's training
        that crossed it) evaluated on test seeds, the `final` (reported) test result for marks the run never
        reached; nothing when `with_marks` is off. The marks' test episodes count as ``test_eval``."""
        if not with_marks:
            return {}
        if run_marks(self.cfg, steps):
            self.progress.phase("marks", max(len(iterations) - 1, 0), task)
        jobs, trained_until = [], 0
        for it in iterations:
            it_dir = run_dir / it.dir
            record = (JobRecord.read(layout.training_record(it_dir))
                      if layout.training_record(it_dir).is_file() else JobRecord())
            if record.candidates:  # every candidate in the order k, each with its own window
                for cand in record.candidates:
                    job = TrainJob.from_dict(cand["job"])
                    jobs.append(job)
                    trained_until = max(trained_until, job.config.mark_offset + cand["steps"])
                continue
            try:
                saved_job = (it_dir / layout.TRAIN_JOB_JSON).read_text()
            except OSError:  # trained before jobs were kept (and marks): its steps are all it tells
                trained_until += it.steps
                continue
            job = TrainJob.from_dict(json.loads(saved_job))
            jobs.append(job)
            trained_until = max(trained_until, job.config.mark_offset + it.steps)
        entries = evaluate_marks(self.cfg, task, self.executor, jobs, final, trained_until, steps)
        self.count("test_eval", marks_steps(entries))
        return marks_record(entries)


def candidates_record(jobs: list[TrainJob], results: list[JobResult]) -> dict[str, Any]:
    """``training.json`` of an iteration with several candidates: the selected candidate's `job_record`
    (the best validation success among those that finished, ties to the lowest k; candidate 0 when none
    did) with ``selected`` (its k) and ``candidates`` (each one's k, seed, dir, ok, error, steps,
    eval_steps, validation success, and its job), except ``steps`` and ``eval_steps``, which are every
    candidate's together: what the iteration cost, what the ledger charges."""
    records = [JobRecord.of(r) for r in results]
    selected = max(range(len(records)), key=lambda k: (records[k].ok, records[k].success_rate, -k))
    return dataclasses.replace(
        records[selected], selected=selected, steps=sum(r.steps for r in records),
        eval_steps=sum(r.eval_steps for r in records),
        candidates=[{"k": k, "seed": job.config.seed, "dir": r.run_dir, "ok": r.ok, "error": r.error,
                     "steps": r.steps, "eval_steps": r.eval_steps, "success_rate": r.success_rate,
                     "attempts": r.attempts, "job": job.to_dict()}
                    for k, (job, r) in enumerate(zip(jobs, records, strict=True))]).to_dict()


def selected_train_dir(it_dir: Path) -> Path:
    """The training run directory of an iteration's selected candidate (``train/`` for an iteration of
    one)."""
    record = layout.training_record(it_dir)
    selected = json.loads(record.read_text()).get("selected", 0) if record.is_file() else 0
    return layout.candidate_dir(it_dir, int(selected))


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
