"""The records a run directory holds, shared by the loop, the baselines and the report: how a step's value
is written and read back (`step`), an iteration's training record (`JobRecord`, ``training.json``), an
entry of the summary's ``iterations`` (`IterationRecord`), the run's result record (`RunSummary`,
``summary.json``, built by `result_record`), and who wrote the kept macros (`kept_writers`, `writer_counts`).

The typed records write the JSON the run directory always held (`Record.to_dict`) and read any version of
it back (`Record.from_dict`: keys an older file lacks take their defaults, keys a newer one adds are
ignored), so runs recorded before them still load."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, Self

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


class Record:
    """A typed record of a run directory's JSON (a dataclass mixin)."""

    OMIT_NONE: ClassVar[tuple[str, ...]] = ()
    """Fields left out of `to_dict` while None: keys that only some records of the kind carry."""

    def to_dict(self) -> dict[str, Any]:
        """The record as written to the run directory."""
        return {k: v for k, v in dataclasses.asdict(self).items()  # type: ignore[call-overload]
                if v is not None or k not in self.OMIT_NONE}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        """The record from `data` as any version of the run directory wrote it: missing keys take their
        defaults, unknown keys are ignored."""
        names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        return cls(**{k: v for k, v in data.items() if k in names})

    @classmethod
    def read(cls, path: Path) -> Self:
        """The record in the JSON file at `path` (`from_dict`)."""
        return cls.from_dict(json.loads(path.read_text()))


@dataclasses.dataclass
class IterationRecord(Record):
    """One entry of ``summary.json``'s ``iterations``: a loop iteration (`rlgpt.run.loop.Loop.run_loop`),
    a planner chain's link (`rlgpt.run.loop.Loop.run_plan`) or a baseline's single step
    (`rlgpt.run.baselines`). The optional fields are the kinds' own and absent from the others'."""

    OMIT_NONE = ("outer", "inner", "written_by", "search", "fallbacks", "stopped", "task", "source",
                 "prefix_steps", "start_states", "rewards")

    index: int = 0
    """Position in the run (iterations, or links of a plan)."""
    dir: str = ""
    """Its directory in the run directory (`rlgpt.layout.iteration_dir`, ``subtask_dir``, ...)."""
    ok: bool = True
    """Its training and evaluation finished (a link: it has a skill to play)."""
    success_rate: float = 0.0
    """Validation success of its evaluation (0 when it failed)."""
    steps: int = 0
    """Primitive steps it trained."""
    steps_by_kind: dict[str, int] = dataclasses.field(default_factory=dict)
    """Every env step it took, per kind (`rlgpt.run.ledger.STEP_KINDS`)."""
    macros: list[str] = dataclasses.field(default_factory=list)
    """The names of the macros it trained with."""
    critic: str = ""
    """The critic's target after it ("fast", "slow", "done"; "" when none was asked)."""
    outer: int | None = None
    """A loop iteration's outer-loop index."""
    inner: int | None = None
    """A loop iteration's inner-loop index."""
    written_by: dict[str, str] | None = None
    """Sub-action -> who wrote its kept macro (`WRITERS`)."""
    search: dict[str, Any] | None = None
    """The fast agent's test-time search totals (`rlgpt.agents.fast.search_summary`); a trained loop
    iteration's."""
    fallbacks: dict[str, Any] | None = None
    """Role -> what it fell back to (`rlgpt.run.loop.iteration_fallbacks`; a link: its loop's)."""
    stopped: str | None = None
    """Why the loop ended before training it ("budget")."""
    task: str | None = None
    """A link's subtask."""
    source: str | None = None
    """Where a link's skill came from ("library", "trained, stored", ...)."""
    prefix_steps: int | None = None
    """Steps a link's start states took to build (the chain so far played)."""
    start_states: int | None = None
    """How many start states a link trained from."""
    rewards: list[str] | None = None
    """What its training's reward added up (`REWARDS`); None where not recorded."""


@dataclasses.dataclass
class JobRecord(Record):
    """``training.json`` (and ``test.json``, a mark's record): a `JobResult` with the evaluation's success
    at the top (0 when the job failed). Of an iteration with several candidates it is the selected one's
    with ``selected`` and ``candidates`` (`rlgpt.run.loop.candidates_record`)."""

    OMIT_NONE = ("selected", "candidates")

    ok: bool = False
    """Training and evaluation finished."""
    error: str | None = ""
    """Why the job failed ("" when ok)."""
    steps: int = 0
    """The steps the job trained, a failed job's included (several candidates: all of theirs)."""
    eval_steps: int = 0
    """The steps its evaluation played (0 when the job failed: an evaluation that crashed left no count)."""
    wall_time_s: float = 0.0
    """Wall time of the job."""
    success_rate: float = 0.0
    """The evaluation's success (0 when the job failed)."""
    report: dict[str, Any] | None = None
    """The evaluation (`rlgpt.rl.evaluate.EvalReport` as a dict); None when the job failed."""
    run_dir: str | None = None
    """The training's run directory."""
    attempts: int = 1
    """How many times the executor ran it (`RunConfig.job_attempts`)."""
    selected: int | None = None
    """Several candidates: the selected one's k."""
    candidates: list[dict[str, Any]] | None = None
    """Several candidates: each one's k, seed, dir, ok, error, steps, eval_steps, success and job."""

    @classmethod
    def of(cls, result: JobResult) -> JobRecord:
        """The record of one job's `result`."""
        report = result.eval
        return cls(ok=result.ok, error=result.error, steps=result.steps,
                   eval_steps=int((report or {}).get("steps", 0)) if result.ok else 0,
                   wall_time_s=result.wall_time_s,
                   success_rate=report["success_rate"] if report and result.ok else 0.0,
                   report=report if result.ok else None, run_dir=result.run_dir,
                   attempts=int(result.extra.get("attempts", 1)))


WRITERS: tuple[str, ...] = ("model", "library", "expert")
"""Who wrote a kept macro (`rlgpt.agents.fast.MacroCandidate.written_by`): the model in this run, the
model earlier (a verified skill of the library), or expert code (the trusted goal macro)."""


REWARDS = ("task", "plan", "chain", "model")
"""What a training's reward can add up (`IterationRecord.rewards`): ``task``, the task's own (1 at success,
crafter's for the benchmark); ``plan``, the progress reward on the slow agent's sub-action goals
(`rlgpt.rl.progress`); ``chain``, the same reward on the task's recipe chain (``--mode ppo`` with
`rlgpt.config.RunConfig.ppo_progress`); ``model``, the fast agent's dense reward code."""


def training_rewards(job: Mapping[str, Any]) -> list[str]:
    """`REWARDS` a training job (``TrainJob.to_dict``'s form) adds up."""
    plan = bool(job.get("progress_goals")) and bool(job.get("config", {}).get("progress_reward"))
    return ["task", *(["plan"] if plan else []), *(["model"] if job.get("reward_code") else [])]


def kept_candidate(choice: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The kept candidate of one sub-action's choice in a ``fast.json`` (the one whose ``index`` is the
    choice's ``best``); None when it kept none."""
    best = choice.get("best")
    if best is None:
        return None
    return next((c for c in choice.get("candidates") or () if c.get("index") == best), None)


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
            writer = "expert" if (kept_candidate(choice) or {}).get("fallback") else "model"
        kept[choice["subaction"]] = writer
    return kept


def writer_counts(writers: Mapping[str, str]) -> dict[str, int]:
    """How many kept macros each of `WRITERS` wrote."""
    return {w: sum(1 for v in writers.values() if v == w) for w in WRITERS}


def job_record(result: JobResult) -> dict[str, Any]:
    """``training.json`` of one job: `JobRecord.of` as written."""
    return JobRecord.of(result).to_dict()


@dataclasses.dataclass
class MarkEntry(Record):
    """One entry of ``summary.json``'s ``marks``: the test evaluation of the policy at one budget mark
    (`rlgpt.run.marks.evaluate_marks`)."""

    OMIT_NONE = ("error", "dir", "eval_steps")

    steps: int = 0
    """The mark: the run's primitive steps the policy stands for."""
    source: str = "checkpoint"
    """``checkpoint`` (the policy a training saved at the mark) or ``final`` (no training reached the mark:
    the run's reported policy's test result)."""
    split: str | None = "test"
    """The evaluation's seeds: ``test``; None when there was no evaluation (then `error` says why). Entries
    written before the key existed were test evaluations."""
    success_rate: float = 0.0
    """Test success (0 without an evaluation)."""
    achievement_success: dict[str, float] = dataclasses.field(default_factory=dict)
    """Per-achievement success (0-1)."""
    crafter_score: float = 0.0
    """The Crafter score of those episodes."""
    episodes: int = 0
    """Episodes played."""
    error: str | None = None
    """Why the evaluation failed or is missing; absent when it did not."""
    dir: str | None = None
    """The saved policy's directory (``checkpoint`` entries)."""
    eval_steps: int | None = None
    """The env steps its test episodes played (``checkpoint`` entries; ``final`` entries played none)."""

    @classmethod
    def of(cls, mark: int, report: Mapping[str, Any], source: str) -> Self:
        """The entry of an evaluation report (its ``error`` when it has one; no report: split None,
        success 0, so that nothing reads it as a test result)."""
        return cls(steps=mark, source=source, split=report.get("split"),
                   success_rate=float(report.get("success_rate", 0.0)),
                   achievement_success=report.get("achievement_success", {}),
                   crafter_score=float(report.get("crafter_score", 0.0)),
                   episodes=int(report.get("episodes", 0)), error=report.get("error") or None)


@dataclasses.dataclass
class RunSummary(Record):
    """``summary.json``: the result record every mode writes (`result_record`; the runner adds
    ``model_id``, ``llm``, ``skill_library`` and ``run_dir``) and `rlgpt report` reads. A summary written
    before a key existed reads as the field's default (None where a reader must tell "not recorded")."""

    OMIT_NONE = ("checkpoint", "validation_success_rate", "test_error", "error", "played_steps", "plan",
                 "fallbacks", "marks", "steps_to_success", "model_id", "llm", "skill_library", "run_dir",
                 "rewards")

    task: str = ""
    """The task the run learned (a chain: its final task)."""
    mode: str = ""
    """``rlgpt``, ``ppo`` or ``code``."""
    seed: int | None = None
    """The run's seed (None: unrecorded)."""
    steps_budget: int = 0
    """``--steps``: what the run was allowed to charge."""
    steps_used: int = 0
    """The steps charged to the budget: ``steps_by_kind`` summed without ``test_eval``."""
    steps_by_kind: dict[str, int] | None = None
    """Every env step the run took, per kind (`rlgpt.run.ledger.STEP_KINDS`); None in a run written before
    steps were counted by kind."""
    prompt_knowledge: dict[str, Any] = dataclasses.field(default_factory=dict)
    """The agents' ablation knobs the report labels runs by (``env_doc``, ``examples``, ``api``,
    ``goal_fallback``); a key an older run lacks had its default."""
    success_rate: float = 0.0
    """The reported success: the selected policy's test evaluation (validation's for runs before it)."""
    achievement_success: dict[str, float] = dataclasses.field(default_factory=dict)
    """Per-achievement success (0-1) of that evaluation."""
    eval_episodes: int = 0
    """How many episodes that evaluation played."""
    eval_split: str | None = None
    """Which seeds it played (``test``; None when nothing was evaluated)."""
    written_by: dict[str, int] | None = None
    """How many of the reported policy's kept macros each of `WRITERS` wrote; None in a run written before
    the summary said so."""
    own_code_share: float | None = None
    """The model's and the library's share of those macros (None without macros)."""
    expert_code: bool = False
    """Some iteration kept expert code."""
    rewards: list[str] | None = None
    """What the reported policy's training reward added up (`REWARDS`; the selected iteration's); None
    where not recorded."""
    iterations: list[IterationRecord] = dataclasses.field(default_factory=list)
    """The run's iterations (a chain: its links; a baseline: its single step)."""
    best: str | None = None
    """The selected iteration's directory (``chain`` for a plan; None when no training finished)."""
    checkpoint: str | None = None
    """The selected policy's training directory: the loop's and ``ppo``'s (None when none finished)."""
    validation_success_rate: float | None = None
    """The selected iteration's validation success (the loop's, when one finished)."""
    test_error: str | None = None
    """Why the selected policy's test evaluation failed ("" when it did not); beside
    ``validation_success_rate``."""
    error: str | None = None
    """Why a baseline's job failed ("" when it did not; ``ppo``'s and ``code``'s)."""
    played_steps: int | None = None
    """``code``: the steps its policy played."""
    plan: list[str] | None = None
    """A chain: the planner's subtasks."""
    fallbacks: dict[str, list[str]] | None = None
    """Role -> what it fell back to over the run (`rlgpt.run.loop.run_fallbacks`; the loop's)."""
    marks: list[MarkEntry] | None = None
    """The budget-mark test evaluations (`rlgpt.run.marks.evaluate_marks`); None in a run without them."""
    steps_to_success: dict[str, int | None] | None = None
    """Per success level ("0.5", ...): the first mark reaching it (`rlgpt.run.marks.steps_to_success`)."""
    model_id: str | None = None
    """The LLM the agents used (modes with agents)."""
    llm: dict[str, float] | None = None
    """The LLM client's metrics (calls, tokens, cache hits, fallbacks)."""
    skill_library: dict[str, Any] | None = None
    """The code library the run read and what it stored (`rlgpt.run.runner.code_skills_record`)."""
    run_dir: str | None = None
    """The run directory (the report sets it to the directory it read when absent)."""

    def __post_init__(self) -> None:
        if self.marks is not None:  # entries given as written (a mode's record, a test) read as typed
            self.marks = [m if isinstance(m, MarkEntry) else MarkEntry.from_dict(m) for m in self.marks]

    def kept_none(self) -> tuple[str, ...]:
        """The `OMIT_NONE` keys this summary's mode writes even when None: ``checkpoint`` (the loop's and
        ``ppo``'s), ``error`` (the baselines') and ``test_error`` (the loop's, beside
        ``validation_success_rate``)."""
        kept = []
        if self.mode == "ppo" or (self.mode == "rlgpt" and self.plan is None):
            kept.append("checkpoint")
        if self.mode in ("ppo", "code"):
            kept.append("error")
        if self.validation_success_rate is not None:
            kept.append("test_error")
        return tuple(kept)

    def to_dict(self) -> dict[str, Any]:
        data = super().to_dict()
        for key in self.kept_none():
            data.setdefault(key, None)
        data["iterations"] = [it.to_dict() for it in self.iterations]
        if self.marks is not None:
            data["marks"] = [m.to_dict() for m in self.marks]
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        summary = super().from_dict(data)
        summary.iterations = [IterationRecord.from_dict(it) for it in data.get("iterations") or []]
        return summary


def result_record(cfg: RunConfig, task: str, mode: str, budget: int, by_kind: Mapping[str, int],
                  report: dict[str, Any], iterations: Sequence[IterationRecord],
                  **extra: Any) -> dict[str, Any]:
    """The record every mode writes as ``summary.json`` (what `rlgpt report` reads): `RunSummary` as
    written, the `RunSummary` fields in `extra` set (``best``, ``marks``, ...). ``prompt_knowledge``
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
    selected = [it for it in iterations if it.dir == extra.get("best")] or list(iterations[-1:])
    if selected and selected[0].rewards is not None:
        extra.setdefault("rewards", selected[0].rewards)
    counts = writer_counts({k: v for it in selected for k, v in (it.written_by or {}).items()})
    total = sum(counts.values())
    return RunSummary(
        task=task, mode=mode, seed=cfg.seed, steps_budget=budget, steps_used=charged(by_kind),
        steps_by_kind=by_kind,
        prompt_knowledge={"env_doc": cfg.agents.env_doc, "examples": cfg.agents.examples,
                          "api": cfg.agents.api, "goal_fallback": cfg.agents.goal_fallback},
        success_rate=float(report.get("success_rate", 0.0)),
        achievement_success=report.get("achievement_success", {}),
        eval_episodes=report.get("episodes", 0), eval_split=report.get("split"),
        written_by=counts, own_code_share=(counts["model"] + counts["library"]) / total if total else None,
        expert_code=any("expert" in (it.written_by or {}).values() for it in iterations),
        iterations=list(iterations), **extra).to_dict()
