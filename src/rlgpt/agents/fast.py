"""The fast agent: writes macro code for the coded sub-actions and the RL setup (reward, observation,
macros, horizon).

Code comes out of ```python blocks, never JSON strings. For each coded sub-action the agent searches at
test time (`FastAgent.write_macro`): a round samples `AgentConfig.samples` candidates from distinct seeds,
decoded together (`LLMClient.chat_many`), sends compiler diagnostics back to the model
(`AgentConfig.repair_retries`), probes each candidate that compiles in seeded Crafter episodes
(`rlgpt.macro.probe`) and stops at the first that reaches its goal in every probe call; while none does,
repair rounds (`AgentConfig.probe_repair_retries`) sample again from a prompt carrying the best failing
candidate's code, diagnostic, failing line, last actions and inventory change, within
`AgentConfig.search_budget_s` of LLM time. The search's statistics go into ``fast.json`` (`SearchStats`).
The dense reward is compiled by the same compiler, dry-run on
real Crafter and repaired the same way. Only the short setup fields go through a (small) JSON schema.
"""

from __future__ import annotations

import dataclasses
import functools
import random
import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from crafter import constants

from rlgpt import prompts
from rlgpt.agents.code import (
    CodeAttempt,
    CodeResult,
    extract_function,
    format_diagnostics,
    program_key,
    write_code,
)
from rlgpt.agents.common import (
    degradable,
    describe_task,
    documentation,
    knowledge_values,
    note_fallback,
    render_decomposition,
)
from rlgpt.agents.replies import Decomposition, FastReply, FastSetup, SubAction
from rlgpt.config import AgentConfig
from rlgpt.envs.crafter import ACTION_NAMES, CrafterEnv, GameState
from rlgpt.llm.client import LLMClient
from rlgpt.llm.context import RolePrompt, ask_fitted, fit
from rlgpt.llm.types import Completion, SamplingParams
from rlgpt.macro.api import GameAPI
from rlgpt.macro.budget import MacroLimits
from rlgpt.macro.code_skills import CodeSkill, goal_key, link_skills, retrieve
from rlgpt.macro.compiler import CompiledFunction, CompiledMacro, MacroSource, compile_macro
from rlgpt.macro.contain import ContainLimits, run_contained
from rlgpt.macro.control import goal_macro_code, placed_only, recipe_gap, spent_source
from rlgpt.macro.diagnostics import Diagnostic, MacroCompileError
from rlgpt.macro.goal import Goal
from rlgpt.macro.probe import ProbeReport, probe_macro, probe_step_bound
from rlgpt.macro.reward import REWARD_ENTRY, DenseRewardWrapper, compile_reward
from rlgpt.macro.validate import unnamed_goal

if TYPE_CHECKING:
    from rlgpt.macro.prefix import StartSummary

ROLE = "fast"
"""Accounting role of every fast-agent call (`llm/fast/*`)."""
MACRO_REPAIR_HINT = ("Remember: an action is a string you yield (for example `yield \"do\"` or "
                     "`yield \"place_table\"`), `game` has only the members in the API reference, and "
                     "nothing can be imported.")
"""Sent after a macro's diagnostics: the measured repeat offenders (imports, game.<action>() calls)."""
REWARD_REPAIR_HINT = ("Remember: reward(game, prev) returns a number, never yields, uses only the members "
                      "in the API reference, and cannot import anything.")
"""Sent after the reward's diagnostics."""
REWARD_MIN_STEADY = 5
"""Dry-run steps without any count change needed before a reward paid on most of them is rejected."""


WrittenBy = Literal["model", "library", "expert"]
"""Who wrote a macro (`MacroCandidate.written_by`; `rlgpt.run.records.WRITERS` counts them)."""


@dataclass
class MacroCandidate:
    """One sampled macro: its compile-and-repair history and, when it compiled, its probe."""

    index: int
    """Position in `MacroChoice.candidates`."""
    code: CodeResult
    """Accepted code (or None) and every attempt with its diagnostics."""
    probe: ProbeReport | None
    """Probe of the compiled macro (None when it never compiled)."""
    revises: int | None = None
    """Index of the candidate whose probe this one was asked to fix (None for an independent sample)."""
    written_by: WrittenBy = "model"
    """Who wrote the code: ``model`` (in this run), ``library`` (the model, earlier, verified: a stored
    skill) or ``expert`` (the trusted goal macro, `macro.control.goal_macro_code`: offered when no sample
    reached the goal in every probe call, and kept only when it probes better)."""

    @property
    def fallback(self) -> bool:
        """Whether this is the trusted goal macro (expert code)."""
        return self.written_by == "expert"
    seed: int | None = None
    """Sampling seed of its first reply (None for the trusted goal macro and a carried macro)."""
    carried_from: str | None = None
    """The iteration directory whose kept macro this is (`CarriedMacro`; None: written in this iteration)."""

    @property
    def reached(self) -> bool:
        """Whether its probe reached the goal in every call (what ends the search)."""
        return self.probe is not None and self.probe.goal_rate == 1.0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (``fallback`` kept beside ``written_by`` for readers of older runs' files)."""
        return {"index": self.index, "code": self.code.code, "first_try": self.code.first_try,
                "attempts": [a.to_dict() for a in self.code.attempts],
                "probe": None if self.probe is None else self.probe.to_dict(), "revises": self.revises,
                "written_by": self.written_by, "fallback": self.fallback, "seed": self.seed,
                **({"carried_from": self.carried_from} if self.carried_from else {})}


@dataclass(frozen=True)
class CarriedMacro:
    """A macro an earlier iteration of the run kept that reached its sub-action's goal in a probe call
    (`rlgpt.run.loop.verified_macros`): a later iteration's sub-action with the same goal tries it first
    (probed again where that iteration's chain leaves the player) and asks the model only if it misses the
    goal in some call; then it stays the first candidate, which a new one must beat. A re-decomposition or
    a new search thus keeps what worked instead of sampling it again, and maybe worse."""

    name: str
    """The sub-action (and entry function) it was written for."""
    code: str
    """Its source as kept."""
    iteration: str
    """The iteration directory it was kept in."""
    goal_rate: float = 1.0
    """Its probe goal rate there."""

    def source_for(self, name: str) -> str:
        """The code as the macro `name`: as kept, plus an entry of that name calling it when the new
        sub-action is named otherwise (the model's code stays word for word)."""
        if name == self.name:
            return self.code
        return f"{self.code.rstrip()}\n\n\ndef {name}(game):\n    return (yield from {self.name}(game))\n"


@dataclass
class SearchStats:
    """What the test-time search for one sub-action's macro spent and found."""

    rounds: int = 0
    """Sampling rounds run: the first, then repair rounds."""
    sampled: int = 0
    """Model replies sampled (decoded together per round; compile repairs not included)."""
    tried: int = 0
    """Sampled candidates compiled (with repairs) and, when they compiled, probed; a round's later replies
    are never tried once one reached the goal."""
    repeats: int = 0
    """Sampled replies identical to an earlier candidate's first reply for this sub-action: not tried
    again (its probes would replay the same worlds and count their env steps twice)."""
    fresh: int = 0
    """Repair rounds whose every reply repeated an earlier candidate, each followed by one more round
    sampled from the first prompt (at most `FRESH_ROUNDS`; it does not count against the repair rounds)."""
    llm_s: float = 0.0
    """Wall seconds the search waited for the model (samples and compile repairs)."""
    won: int | None = None
    """Index of the model's candidate that reached the goal in every probe call (None: none did)."""
    stopped: str = ""
    """Why it ended: ``carried`` (an earlier iteration's macro for the same goal reached it in every probe
    call here too: `CarriedMacro`; no model call), ``goal`` (a candidate won), ``fallback`` (the trusted
    goal macro reached the goal), ``budget`` (`AgentConfig.search_budget_s` spent), ``rounds`` (every
    round ran), ``no_goal`` (a sub-action without a goal: one round, the best probe kept) or ``llm_error``
    (the model could not be asked: `error`)."""
    error: str = ""
    """The LLM fault that ended the search (``llm_error``), else ""."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return dataclasses.asdict(self)


@dataclass
class MacroChoice:
    """All candidates for one coded sub-action and the one kept."""

    subaction: SubAction
    """The sub-action the macro implements."""
    candidates: list[MacroCandidate] = field(default_factory=list)
    """Every sample, in order."""
    best: MacroCandidate | None = None
    """The compiled candidate with the best probe (None when none compiled)."""
    trusted: MacroCandidate | None = None
    """The trusted goal macro once probed (`FastAgent._trusted`); in `candidates` once offered."""
    search: SearchStats = field(default_factory=SearchStats)
    """What the search spent and found."""

    @property
    def source(self) -> MacroSource | None:
        """The kept macro's source, with the stored skills it calls linked in (what trains)."""
        if self.best is None or self.best.code.code is None:
            return None
        compiled = self.best.code.compiled
        code = compiled.source.code if isinstance(compiled, CompiledMacro) else self.best.code.code
        return MacroSource(self.subaction.name, code, self.subaction.description, self.subaction.goal)

    @property
    def written_by(self) -> WrittenBy | None:
        """Who wrote the kept macro (`MacroCandidate.written_by`; None when none was kept)."""
        return None if self.best is None else self.best.written_by

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"subaction": self.subaction.name, "best": None if self.best is None else self.best.index,
                "written_by": self.written_by, "candidates": [c.to_dict() for c in self.candidates],
                "search": self.search.to_dict()}


@dataclass
class FastResult:
    """Everything one fast-agent pass produced: the reply for training plus the evidence behind it."""

    reply: FastReply
    """Macros, reward code, observation and horizon for training."""
    macros: list[MacroChoice]
    """Per coded sub-action: candidates, probes and the kept one."""
    reward: CodeResult
    """The reward's compile/dry-run/repair history."""
    setup: FastSetup
    """The model's structured setup reply (or the defaults, see `setup_error`)."""
    setup_error: str = ""
    """Why the setup is `FastSetup.default` (the model's reply never validated); "" = the model's."""
    reward_check_steps: int = 0
    """Primitive env steps the reward's dry runs played (every attempt's)."""
    notes: Mapping[str, str] = field(default_factory=dict)
    """The critic's change per sub-action this pass was given (`FastAgent.run`'s `notes`)."""

    @property
    def steps_by_kind(self) -> dict[str, int]:
        """The env steps this pass played: every candidate's probe and the reward's dry runs."""
        return {"probe": probe_steps(self.macros), "reward_check": self.reward_check_steps}

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (for the run directory)."""
        return {"reply": self.reply.to_dict(), "macros": [m.to_dict() for m in self.macros],
                "reward": {"code": self.reward.code, "attempts": [a.to_dict() for a in self.reward.attempts],
                           **({"error": self.reward.error} if self.reward.error else {})},
                "setup": self.setup.to_dict(), "steps_by_kind": self.steps_by_kind,
                "search": search_summary(self.macros), "notes": dict(self.notes),
                **({"fallback": "setup_defaults", "error": self.setup_error} if self.setup_error else {})}


def search_summary(choices: list[MacroChoice]) -> dict[str, Any]:
    """The search's totals over `choices` (for the loop's records and the report): rounds, sampled and tried
    candidates, LLM seconds, and per sub-action which candidate won (None: none reached its goal)."""
    stats = [c.search for c in choices]
    return {"rounds": sum(s.rounds for s in stats), "sampled": sum(s.sampled for s in stats),
            "tried": sum(s.tried for s in stats), "repeats": sum(s.repeats for s in stats),
            "llm_s": round(sum(s.llm_s for s in stats), 3),
            "won": {c.subaction.name: c.search.won for c in choices}}


def probe_steps(choices: list[MacroChoice]) -> int:
    """Primitive env steps the probes of every candidate of `choices` played (kept or not)."""
    return sum(c.probe.env_steps for choice in choices for c in choice.candidates if c.probe is not None)


def fast_diagnostics(fast: dict[str, Any]) -> list[str]:
    """Why code in a `FastResult` (its JSON form) was rejected, where that left a sub-action without a
    macro: its candidates' last diagnostics; and the reward's. A sub-action that kept a macro is judged by
    that macro's probes (the critic's sub-action block), not by the candidates it beat: measured, the 1.5B
    critic named a discarded candidate's compile error as what to fix while the kept macro was the one
    failing."""
    lines = []
    for choice in fast["macros"]:
        if choice.get("best") is not None:
            continue
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


def prerequisites(goal: str) -> tuple[str, ...]:
    """The achievements that must come before `goal` (an achievement, or an item some achievement
    provides), from crafter's recipes; () for any other goal."""
    from rlgpt.agents.envdoc import achievement_requirements, prerequisite_chain

    known = achievement_requirements()
    achievement = goal if goal in known else next((a for a in sorted(known) if goal_key(a) == goal), "")
    return prerequisite_chain([achievement])[:-1] if achievement else ()


def goal_text(sub: SubAction) -> str:
    """How the prompt states a sub-action's success condition."""
    if not sub.goal:
        return sub.description
    kind = "achievement" if Goal.parse(sub.goal).kind == "achievement" else "inventory item"
    # The runtime ends the call at that step (`MacroSource.goal`): saying so keeps the model from writing
    # loops that gather more than one (the policy calls the macro again for more).
    return (f"the {kind} count of {sub.goal!r} goes up by at least 1 (the call ends there by itself; "
            f"it is called again for more)")


_LINE = re.compile(r"at line (\d+)")


def failing_call_text(candidate: MacroCandidate) -> str:
    """The worst probe call of `candidate` spelled out for a repair: its outcome and diagnostic, the failing
    line of its code (numbered), its last actions and its inventory change ("" when every call reached the
    goal)."""
    assert candidate.probe is not None
    failed = [c for c in candidate.probe.calls if c.reached_goal is False or c.outcome != "success"]
    if not failed:
        return ""
    call = failed[0]
    code = (candidate.code.code or "").splitlines()
    if call.outcome == "success":  # the macro returned, but without its goal (or with no goal to check)
        ended = f"it returned after {call.steps} steps without reaching its goal"
        n = call.returned_at
        # (A macro calling stored skills runs linked code, whose lines are not its own: then no line.)
        at = code[n - 1].strip() if n and 1 <= n <= len(code) else ""
        ended += (f", at line {n}: {at}" if at.startswith("return") else
                  ", at the end of its function" if n == 0 else "") + "."
    else:
        ended = f"it ended with {call.outcome} after {call.steps} steps."
    lines = [f"A failing call (seed {call.seed}): {ended}"]
    if call.died_after_goal:
        lines.append("It reached the goal, then kept acting until the player died: return once it holds.")
    if call.diagnostic:
        lines.append(f"Diagnostic: {call.diagnostic}")
        found = _LINE.search(call.diagnostic)
        if found and 1 <= int(found.group(1)) <= len(code):
            n = int(found.group(1))
            lines.append(f"The failing line ({n}): {code[n - 1].strip()}")
    lines.append(f"Its last actions: {' '.join(call.trace) or '(none)'}")
    if call.trace and call.repeated > 2:
        last = call.trace[-1]
        lines[-1] += f" (the last {call.repeated} actions were all {last})"
        action, _, faced = last.partition("@")
        goal = candidate.probe.goal
        source = spent_source(goal, faced) if action == "do" and goal else None
        if source:
            gives = " and ".join(constants.collect[source]["receive"])
            # Measured: the 1.5B wrote walk_to("tree") once, then `do` until it held 4 wood; the tree
            # turned into grass at the first wood and the macro hit grass until the player died.
            lines.append(f"Collecting {source} turns the tile into {faced}, so `do` facing {faced} gives no "
                         f"more {gives}: after each {source} collected, walk to the next {source} before "
                         f"the next `do`.")
    found = [k for k in call.unseen if not placed_only(k)]
    if found:
        what = " and ".join(found)
        lines.append(f"Not in view when it started nor when it ended: {what}, which the goal needs. When "
                     f"none is in view, the code must look for one (move or explore until one is in view) "
                     f"instead of returning.")
    for kind in (k for k in call.unseen if placed_only(k)):
        # Measured: told to look for the table it needed, the 1.5B explored for 100 steps in worlds that
        # have none until the player places one.
        lines.append(f"No {kind} was in view, and exploring finds none: a {kind} exists only where the "
                     f"player placed one (place_{kind}). Place one first, or walk back to one placed "
                     f"earlier.")
    action, lacking = recipe_gap(candidate.probe.goal or "", call.after.inventory)
    if lacking:
        lacks = ", ".join(f"{n} {k}" for k, n in lacking.items())
        lines.append(f"When it ended, the inventory lacked {lacks} for {action}: get that first.")
    diff = ", ".join(f"{k}{v:+d}" for k, v in call.inventory_diff.items()) or "no change"
    lines.append(f"Its inventory change: {diff} (inventory before: "
                 f"{', '.join(f'{k} {v}' for k, v in call.before.inventory.items()) or 'empty'})")
    return "\n".join(lines)


def probe_feedback(sub: SubAction, candidate: MacroCandidate, feedback: str = "none") -> str:
    """The feedback slot of a repair round: the earlier feedback, what the candidate's probes saw, its worst
    call spelled out (`failing_call_text`) and its code."""
    assert candidate.probe is not None and candidate.code.code is not None
    probe = candidate.probe
    reached = probe.achieved_calls
    earlier = "" if feedback in ("", "none") else f"{feedback}\n"
    failing = failing_call_text(candidate)
    # The calls that missed, not the ones that worked: shown five good calls and one bad, the 1.5B answered
    # that its code "already correctly implements the logic" and returned it unchanged (measured).
    return (f"{earlier}Your earlier `{sub.name}` reached its goal in {reached} of {len(probe.calls)} probe "
            f"calls (each call starts in a fresh seeded world), so it is not correct yet:\n"
            f"{probe.render(failed_only=True)}\nIts code:\n```python\n{candidate.code.code.strip()}\n```\n"
            f"{failing + chr(10) if failing else ''}Change the code so that this call reaches the goal too "
            f"(look at the last actions and what they faced); keep what worked.")


def compile_feedback(sub: SubAction, candidate: MacroCandidate, feedback: str = "none") -> str:
    """The feedback slot of a repair round when no candidate compiled: the closest one's last reply and its
    diagnostics."""
    earlier = "" if feedback in ("", "none") else f"{feedback}\n"
    last = candidate.code.attempts[-1]
    code = last.code or last.reply
    return (f"{earlier}Your earlier `{sub.name}` was rejected:\n{format_diagnostics(last.diagnostics)}\n"
            f"Its code:\n```python\n{code.strip()}\n```\nWrite it again without these problems.")


def note_feedback(sub: SubAction, feedback: str, note: str) -> str:
    """The feedback slot of `sub`'s prompt: the general feedback, then the critic's change for exactly this
    sub-action (its words, unchanged)."""
    if not note:
        return feedback
    earlier = "" if feedback in ("", "none") else f"{feedback}\n"
    return f"{earlier}The critic on `{sub.name}`: {note}"


HORIZON_SLACK = 2.0
"""How many times the probed length of the chosen macros' chain a training episode lasts at least."""
HORIZON_CAP = 10_000
"""Longest horizon the floor raises to (the setup schema's maximum)."""


FRESH_ROUNDS = 1
"""Most extra rounds per sub-action sampled from the first prompt after a repair round that brought back
only repeats (`SearchStats.fresh`)."""
DRAW_STRIDE = 100
"""Sampling seeds one `FastAgent.run` draw shifts the macro searches by. Measured on make_stone_sword: the
second iteration asked three sub-actions' unchanged prompts with the first's seeds, and the response cache
gave the same 18 replies back (no decode, nothing new). A search samples far fewer than 100 replies; a run's
seeds span `rlgpt.config.SEED_STRIDE` (1000), so draws 0-9 stay inside it."""


def reached_goal_once(choice: MacroChoice) -> bool:
    """Whether `choice`'s kept macro reached its sub-action's goal in at least one probe call (what
    `MacroCandidate.reached` asks of every call, to end the search)."""
    best = choice.best
    return best is not None and best.probe is not None and (best.probe.goal_rate or 0.0) > 0.0


def trained_macros(kept: Mapping[str, MacroChoice], listed: Collection[str]) -> list[str]:
    """The kept macros a training gets (`FastAgent.run`), in `kept`'s order: each that reached its goal in
    a probe call, and each of a sub-action without a goal that the setup `listed`."""
    return [name for name, c in kept.items()
            if reached_goal_once(c) or (not c.subaction.goal and name in listed)]


def chain_horizon(choices: list[MacroChoice]) -> int:
    """The horizon floor for training with `choices`' kept macros: `HORIZON_SLACK` times what playing their
    chain once takes, the larger of the sum of their probed mean call steps and their longest probe
    episode (`ProbeReport.episode_steps`: a later sub-action's probe plays the earlier ones first, and
    calls them again where its recipe needs more, since a call ends at its goal: one wood per call). A
    small model's horizon (16 steps) shorter than the chain would make the goal unreachable in any training
    episode."""
    probes = [c.best.probe for c in choices if c.best is not None and c.best.probe is not None]
    steps = max(sum(p.mean_steps for p in probes), max((p.episode_steps for p in probes), default=0.0))
    return min(HORIZON_CAP, int(HORIZON_SLACK * steps + 0.5))


def counters(game: GameAPI) -> tuple[tuple[str, int], ...]:
    """Inventory and achievement counts of `game`'s player, comparable across steps."""
    return (*sorted(game.inventory.items()), *sorted(game.achievements.items()))


def dry_run_reward(env: CrafterEnv, compiled: CompiledFunction, steps: int,
                   seed: int) -> tuple[Diagnostic | None, int]:
    """Run a compiled reward for up to `steps` random steps on `env`: its first runtime diagnostic, a
    ``reward_level`` diagnostic when it pays for sitting in a state, or None; and the steps played."""
    wrapped = DenseRewardWrapper(env, compiled, seed=seed, episode_cap=None)  # judge what it returns
    wrapped.reset(seed=seed)
    moves = random.Random(seed)
    steady = paid = 0  # steps where no counter changed, and those of them the reward paid on
    played = 0
    for _ in range(steps):
        before = counters(wrapped.game)
        _, _, terminated, truncated, info = wrapped.step(moves.randrange(len(ACTION_NAMES)))
        played += 1
        if wrapped.diagnostics:
            return wrapped.diagnostics[0], played
        if counters(wrapped.game) == before:
            steady += 1
            paid += info["dense_reward"] != 0.0
        if terminated or truncated:
            break
    if steady >= REWARD_MIN_STEADY and paid * 2 > steady:
        # A level ("10 while wood >= 3, else -1") is paid for sitting in a state: PPO learns to stay
        # there (or to end episodes early) instead of finishing the task. Seen with the 1.5B.
        return Diagnostic(
            "reward_level", f"the reward was nonzero on {paid} of {steady} dry-run steps where no "
            f"inventory or achievement count changed; return a value only when something changed "
            f"(game minus prev), 0 otherwise"), played
    return None, played


class FastAgent:
    """Writes, repairs, probes and selects macro code; writes the dense reward and the RL setup."""

    def __init__(self, client: LLMClient, config: AgentConfig | None = None,
                 limits: MacroLimits | None = None, contain: ContainLimits | None = None, *,
                 on_phase: Callable[[str], None] | None = None, start: StartSummary | None = None,
                 start_states: tuple[GameState, ...] = (), code_skills: Mapping[str, CodeSkill] | None = None,
                 library_skills: Mapping[str, CodeSkill] | None = None) -> None:
        """Args: client: the LLM; config: agent knobs; limits: sandbox limits for macros and reward;
        contain: OS limits of the child process each probe and reward dry run runs in; on_phase, start,
        start_states, code_skills, library_skills: the attributes of those names (their defaults: no
        progress, fresh worlds, no skills)."""
        self.client = client
        self.config = config or AgentConfig()
        self.limits = limits
        self.contain = contain or ContainLimits()
        self._env: CrafterEnv | None = None
        self.on_phase: Callable[[str], None] = on_phase or (lambda phase: None)
        """Called with "probe" before a candidate's probe and "fast" after it (the loop's progress line)."""
        self.start: StartSummary | None = start
        """Where the task's episodes start when not in a fresh world (a chain's later subtask: the summary
        of its start states, `rlgpt.macro.prefix.StartSummary`); the task's description says so. The loop
        builds its agents per subtask with it (`rlgpt.run.loop.Agents.starting_from`)."""
        self.start_states: tuple[GameState, ...] = tuple(start_states)
        """The start states themselves: probe episode j restores state j modulo their number (after its
        seed's reset), so a macro is probed where training will run it (given with `start`)."""
        self.code_skills: dict[str, CodeSkill] = dict(code_skills or {})
        """Stored macros later macros may call (``yield from skills.<name>(game)``): listed in the prompt,
        linked in at compile time (`rlgpt.macro.code_skills`). The planner gives the chain's so far."""
        self.library_skills: dict[str, CodeSkill] = dict(library_skills or {})
        """The skill library's code skills (`rlgpt.run.skills.CodeLibrary`): each prompt lists those
        relevant to its sub-action (`rlgpt.macro.code_skills.retrieve`); any of them links in."""
        self.reward_check_steps = 0
        """Primitive env steps every reward dry run of this agent played so far (`FastResult` takes the
        part of one `run`)."""

    @property
    def env(self) -> CrafterEnv:
        """The Crafter env probes and dry runs use (built on first use; reset per seed)."""
        if self._env is None:
            self._env = CrafterEnv(length=None)
        return self._env

    def _sampling(self, index: int) -> SamplingParams:
        return SamplingParams(temperature=self.config.temperature, top_p=0.95,
                              max_tokens=self.config.code_max_tokens, seed=self.config.seed + index)

    # -- macros ------------------------------------------------------------------------------------

    def macro_messages(self, task: str, sub: SubAction, feedback: str = "none") -> list[dict[str, str]]:
        """The prompt asking for sub-action `sub`'s macro, fitted to the context (feedback and the stored
        skills are cut first)."""
        cfg = self.config
        prompt = RolePrompt("fast", {**documentation(cfg.api, cfg.env_doc),
                                     "task": describe_task(task, cfg.env_doc, self.start),
                                     "name": sub.name, "description": sub.description, "goal": goal_text(sub),
                                     "feedback": feedback or "none", "skills": self.skills_text(sub),
                                     **knowledge_values("fast", cfg.env_doc, cfg.examples, cfg.api)})
        return fit(prompt, self.client, self.config.code_max_tokens)

    def relevant_skills(self, sub: SubAction | None = None) -> dict[str, CodeSkill]:
        """The stored skills `sub`'s prompt lists: the chain's, then the library's relevant to `sub`."""
        found = dict(self.code_skills)
        if sub is not None and self.library_skills:
            found.update(retrieve(self.library_skills, sub.goal, sub.description, prerequisites(sub.goal)))
        return found

    def skills_text(self, sub: SubAction | None = None) -> str:
        """The prompt's list of callable stored skills ("" when there are none)."""
        skills = self.relevant_skills(sub)
        if not skills:
            return ""
        lines = [s.line() for s in skills.values()]
        return ("Stored skills that already work; call one with `ok = yield from skills.<name>(game)`:\n"
                + "\n".join(lines))

    def compile_macro_code(self, name: str, code: str, api: str | None = None,
                           goal: str = "") -> CompiledMacro:
        """The compile step of the repair loop (raises MacroCompileError): stored skills it calls (the
        library's or the chain's) are linked in first; the code may use the game members of API level `api`
        (the config's by default); its calls end once `goal` goes up (`MacroSource.goal`). A crafting goal's
        macro that never names the item it makes is rejected too (`unnamed_goal`)."""
        api = api or self.config.api
        linkable = {**self.library_skills, **self.code_skills}
        source = MacroSource(name, link_skills(name, code, linkable), goal=goal)
        compiled = compile_macro(source, self.limits, api)
        wrong = unnamed_goal(code, goal, api)  # after the compiler's own diagnostics, which are more precise
        if wrong is not None:
            raise MacroCompileError(name, (wrong,))
        return compiled

    def probe(self, compiled: CompiledMacro, goal: str, setup: tuple[CompiledMacro, ...] = ()) -> ProbeReport:
        """Probe a compiled macro with the configured seeds/steps against `goal` ("" = none), each episode
        starting with the `setup` macros (the kept macros of the sub-actions before it)."""
        cfg = self.config
        # Generated code never runs in the loop's own process: a probe that dies, or runs out of memory or
        # time, is a failed report the critic and the repair loop see, not the end of the run.
        seeds = cfg.probe_episode_seeds
        probe = functools.partial(
            probe_macro, seeds=seeds, calls_per_episode=cfg.probe_calls_per_episode,
            warmup_steps=cfg.probe_warmup_steps, max_steps=cfg.probe_max_steps, goal=goal or None,
            env=self.env, setup=setup, starts=self.start_states)
        contained = run_contained(probe, compiled, limits=self.contain)
        if contained.diagnostic is not None:
            bound = probe_step_bound(len(seeds), cfg.probe_calls_per_episode, cfg.probe_warmup_steps,
                                     cfg.probe_max_steps, len(setup))
            return ProbeReport.failed(compiled.name, goal or None, seeds[0], contained.diagnostic,
                                      tuple(m.name for m in setup), bound)
        return contained.value

    def _candidate(self, index: int, messages: list[dict[str, str]], choice: MacroChoice,
                   setup: tuple[CompiledMacro, ...], revises: int | None = None, seed: int = 0,
                   first: Completion | None = None, give_up: Callable[[], bool] | None = None
                   ) -> MacroCandidate:
        """One macro (its first reply `first`, already sampled with `seed`, or asked for here): repair
        compile errors (unless `give_up` says to stop: the trusted goal macro settles the sub-action, or
        the search's time is spent), probe it if it compiles."""
        sub = choice.subaction
        result = write_code(self.client, ROLE, messages, sub.name,
                            lambda code: self.compile_macro_code(sub.name, code, goal=sub.goal),
                            sampling=self._sampling(seed - self.config.seed),
                            retries=self.config.repair_retries, repair_hint=MACRO_REPAIR_HINT, first=first,
                            give_up=give_up or (lambda: self._fallback_settles(choice, setup)))
        probe = None
        if result.compiled is not None:
            self.on_phase("probe")
            probe = self.probe(result.compiled, sub.goal, setup)
            self.on_phase("fast")
        return MacroCandidate(index, result, probe, revises, seed=seed)

    def _carried(self, carried: CarriedMacro, sub: SubAction,
                 setup: tuple[CompiledMacro, ...]) -> MacroCandidate | None:
        """`carried` as `sub`'s first candidate, compiled at the configured API level and probed after
        `setup` (None when it no longer compiles)."""
        code = carried.source_for(sub.name)
        try:
            compiled = self.compile_macro_code(sub.name, code, goal=sub.goal)
        except MacroCompileError:
            return None
        self.on_phase("probe")
        probe = self.probe(compiled, sub.goal, setup)
        self.on_phase("fast")
        return MacroCandidate(0, CodeResult(code, compiled, [CodeAttempt("", code, ())]), probe,
                              carried_from=carried.iteration)

    @staticmethod
    def _best(candidates: list[MacroCandidate]) -> MacroCandidate | None:
        """The probed candidate with the best probe score, the earliest among equals (None: none probed)."""
        probed = [c for c in candidates if c.probe is not None]
        return max(probed, key=lambda c: (c.probe.score(), -c.index)) if probed else None  # type: ignore[union-attr]

    @classmethod
    def _select(cls, choice: MacroChoice) -> None:
        best = cls._best(choice.candidates)
        if best is not None:
            choice.best = best

    def _llm_seconds(self) -> float:
        usage = self.client.usage.get(ROLE)
        return 0.0 if usage is None else usage.latency_s

    def write_macro(self, task: str, sub: SubAction, feedback: str = "none",
                    setup: tuple[CompiledMacro, ...] = (),
                    carried: CarriedMacro | None = None, search_anyway: bool = False,
                    draw: int = 0) -> MacroChoice:
        """Search for `sub`'s macro (probed after `setup`, the kept macros before it) and keep the best.

        A `carried` macro (an earlier iteration's for the same goal) is compiled and probed first; when it
        reaches the goal in every probe call it is kept and the model is not asked (unless `search_anyway`:
        the critic asked for a change). Otherwise it is candidate 0, kept unless a sample probes better.

        Round 0 samples `AgentConfig.samples` replies from distinct seeds, decoded together
        (`LLMClient.chat_many`); they are tried in order (compiled, compile errors repaired, probed), and
        the search stops at the first that reaches the goal in every probe call: the later replies of its
        round are never compiled or probed (the seeds start `draw` times `DRAW_STRIDE` past the agent's
        own: `run`'s iteration). While none does, each repair round (at most
        `AgentConfig.probe_repair_retries`) samples as many again from a prompt that carries the best
        failing candidate not revised in an earlier round (the best again once all were): its probes,
        diagnostic, failing line, last actions and inventory change (`probe_feedback`;
        `compile_feedback` when nothing compiled); no round starts once
        `AgentConfig.search_budget_s` of LLM time is spent.

        Whenever the model's candidates so far miss the goal in some probe call, the trusted goal macro is
        offered (`_offer_fallback`) and probed before the model is asked anything more (a compile repair,
        another round); once it reaches the goal in every probe call the search ends: no model call could
        beat it on the goal."""
        cfg = self.config
        choice = MacroChoice(sub)
        stats = choice.search
        spent_before = self._llm_seconds()

        def spent() -> float:
            return self._llm_seconds() - spent_before

        def out_of_time() -> bool:
            return cfg.search_budget_s > 0 and spent() >= cfg.search_budget_s

        def give_up() -> bool:
            return out_of_time() or self._fallback_settles(choice, setup)

        if carried is not None and sub.goal:
            earlier = self._carried(carried, sub, setup)
            if earlier is not None:
                choice.candidates.append(earlier)
                self._select(choice)
                if earlier.reached and not search_anyway:
                    stats.won, stats.stopped = earlier.index, "carried"
                    return choice
        first = messages = self.macro_messages(task, sub, feedback)
        revises: int | None = None
        revised: set[int] = set()
        stats.stopped = "rounds"
        round_, fresh = 0, False
        while round_ < 1 + cfg.probe_repair_retries:
            if round_ > 0 and not sub.goal:
                stats.stopped = "no_goal"
                break
            if fresh:
                messages, revises = first, None
            elif round_ > 0:
                model = [c for c in choice.candidates if not c.fallback]
                # The best candidate not revised yet: the same prompt again brought the same program back
                # (measured: a third round of 2 samples gave 2 repeats), while a newer attempt's own failure
                # (it tried exploring and passed None to step_toward) is the next thing to fix.
                best = self._best([c for c in model if c.index not in revised]) or self._best(model)
                if best is not None:
                    messages = self.macro_messages(task, sub, probe_feedback(sub, best, feedback))
                elif model:
                    messages = self.macro_messages(task, sub, compile_feedback(sub, model[-1], feedback))
                revises = None if best is None else best.index
                if revises is not None:
                    revised.add(revises)
            if out_of_time():
                stats.stopped = "budget"
                break
            seeds = [cfg.seed + draw * DRAW_STRIDE + stats.sampled + k for k in range(cfg.samples)]
            try:
                replies = self.client.chat_many(ROLE, messages, [self._sampling(s - cfg.seed) for s in seeds])
            except Exception as exc:  # a dead or timed-out server: the candidates so far are what there is
                if not degradable(exc):
                    raise
                stats.stopped, stats.error = "llm_error", str(exc)
                break
            stats.rounds += 1
            stats.sampled += len(replies)
            repeats_before = stats.repeats
            for seed, reply in zip(seeds, replies, strict=True):
                # The trusted goal macro's record has no model reply (""): only the model's own count. The
                # same program again (a revision often returns its input unchanged, comments and all, in
                # a new reply) would replay the same worlds: a repeat too.
                program = program_key(extract_function(reply.text, sub.name))
                if any(not c.fallback and c.code.attempts
                       and (c.code.attempts[0].reply == reply.text
                            or (program is not None and program_key(c.code.attempts[0].code) == program))
                       for c in choice.candidates):
                    stats.repeats += 1
                    continue
                candidate = self._candidate(len(choice.candidates), messages, choice, setup, revises, seed,
                                            first=reply, give_up=give_up)
                choice.candidates.append(candidate)
                stats.tried += 1
                self._select(choice)
                if candidate.reached:
                    stats.won, stats.stopped = candidate.index, "goal"
                    break
                self._offer_fallback(choice, setup)
                if self._reached(choice) and choice.best is not None and choice.best.fallback:
                    stats.stopped = "fallback"
                    break
            if stats.stopped in ("goal", "fallback"):
                break
            # A repair prompt whose replies all gave its input back (measured: 2 of 2 in a make run, 3-6 per
            # make_stone_sword run) tried nothing: the next round asks the first prompt afresh, new seeds.
            fresh = (revises is not None and stats.repeats - repeats_before == len(replies)
                     and stats.fresh < FRESH_ROUNDS)
            if fresh:
                stats.fresh += 1
            else:
                round_ += 1
        if stats.stopped == "llm_error":  # the model's candidates so far, or none: the goal macro may help
            self._offer_fallback(choice, setup)
        stats.llm_s = round(spent(), 3)
        return choice

    def _trusted(self, choice: MacroChoice, setup: tuple[CompiledMacro, ...]) -> MacroCandidate | None:
        """The trusted one-call goal macro of `choice`'s sub-action (`goal_macro_code`: e.g.
        ``yield from game.collect("stone")``), compiled and probed on first need (None: there is none, or
        the config turns it off: `AgentConfig.goal_fallback`, API level ``basic``). It is expert code at
        any level (compiled as such), and recorded as ``written_by: expert``."""
        sub = choice.subaction
        if choice.trusted is not None or not self.config.goal_fallback or self.config.api == "basic" \
                or not sub.goal:
            return choice.trusted
        code = goal_macro_code(sub.name, sub.goal, self.config.probe_max_steps)
        if code is None:
            return None
        # Trusted: a failure here is a bug.
        compiled = self.compile_macro_code(sub.name, code, "expert", sub.goal)
        self.on_phase("probe")
        probe = self.probe(compiled, sub.goal, setup)
        self.on_phase("fast")
        result = CodeResult(code, compiled, [CodeAttempt("", code, ())])
        # Its index: where it is offered.
        choice.trusted = MacroCandidate(-1, result, probe, written_by="expert")
        return choice.trusted

    @staticmethod
    def _reached(choice: MacroChoice) -> bool:
        """Whether one of `choice`'s candidates reached the goal in every probe call."""
        best = choice.best
        return best is not None and best.probe is not None and best.probe.goal_rate == 1.0

    def _fallback_settles(self, choice: MacroChoice, setup: tuple[CompiledMacro, ...]) -> bool:
        """Whether, while none of `choice`'s candidates reached the goal in every probe call, the trusted
        goal macro does (probed here on first need; `_offer_fallback` adds it to the candidates)."""
        if self._reached(choice):
            return False
        trusted = self._trusted(choice, setup)
        return trusted is not None and trusted.probe is not None and trusted.probe.goal_rate == 1.0

    def _offer_fallback(self, choice: MacroChoice, setup: tuple[CompiledMacro, ...]) -> None:
        """When no candidate reached the sub-action's goal in every probe call, or the trusted goal macro
        was probed already, add it (`_trusted`) as one more candidate (once: every probe it played is
        counted); it is kept only if it probes better. The small model writes walking loops well and
        placing/crafting badly: this keeps a coded sub-action from failing for want of a working building
        block."""
        if any(c.fallback for c in choice.candidates):
            return
        if choice.trusted is None and self._reached(choice):
            return
        trusted = self._trusted(choice, setup)
        if trusted is not None:
            choice.candidates.append(dataclasses.replace(trusted, index=len(choice.candidates)))
            self._select(choice)

    # -- reward ------------------------------------------------------------------------------------

    def check_reward(self, code: str) -> CompiledFunction:
        """Compile the reward and dry-run it on real Crafter; a runtime failure is raised as a
        MacroCompileError so that the repair loop sends it back like a compile error."""
        compiled = compile_reward(code, self.limits)
        steps = self.config.reward_dry_run_steps
        if steps:
            # In a contained child, like probes: a reward that kills its process is a diagnostic to repair.
            contained = run_contained(dry_run_reward, self.env, compiled, steps, self.config.seed,
                                      limits=self.contain)
            # A dry run whose process failed counts its bound: how far it got is unknown.
            diagnostic, played = ((contained.diagnostic, steps) if contained.diagnostic is not None
                                 else contained.value)
            self.reward_check_steps += played
            if diagnostic is not None:
                raise MacroCompileError(REWARD_ENTRY, (diagnostic,))
        return compiled


    def reward_prompt(self, task: str, decomposition: Decomposition | None,
                      feedback: str = "none") -> RolePrompt:
        """The prompt values asking for the dense reward."""
        cfg = self.config
        return RolePrompt("fast_reward", {
            **documentation(cfg.api, cfg.env_doc), "task": describe_task(task, cfg.env_doc, self.start),
            "decomposition": render_decomposition(decomposition), "feedback": feedback or "none",
            **knowledge_values("fast_reward", cfg.env_doc, cfg.examples)})

    def write_reward(self, task: str, decomposition: Decomposition | None,
                     feedback: str = "none") -> CodeResult:
        """Ask for ``def reward(game, prev)``; compile, dry-run and repair it."""
        messages = fit(self.reward_prompt(task, decomposition, feedback), self.client,
                       self.config.code_max_tokens)
        return write_code(self.client, ROLE, messages, REWARD_ENTRY, self.check_reward,
                          sampling=self._sampling(0), retries=self.config.repair_retries,
                          repair_hint=REWARD_REPAIR_HINT)

    # -- setup -------------------------------------------------------------------------------------

    @staticmethod
    def setup_schema(macro_names: list[str]) -> dict[str, Any]:
        """The setup reply's JSON schema, macro names limited to `macro_names`."""
        schema = prompts.schema_for_role("fast_setup")
        macros = schema["properties"]["macros"]
        if macro_names:
            macros["items"] = {"type": "string", "enum": list(macro_names)}
        else:
            macros["maxItems"] = 0
        return schema

    def setup_prompt(self, task: str, decomposition: Decomposition | None, macro_names: list[str],
                     feedback: str = "none") -> RolePrompt:
        """The prompt values asking for the RL setup."""
        env_doc = self.config.env_doc
        return RolePrompt("fast_setup", {
            **documentation(self.config.api, env_doc),
            "task": describe_task(task, env_doc, self.start),
            "decomposition": render_decomposition(decomposition),
            "macros": ", ".join(macro_names) or "(none)", "feedback": feedback or "none"})

    def setup_sampling(self) -> SamplingParams:
        """The setup request's sampling (greedy, the agent's seed)."""
        return SamplingParams(temperature=0.0, max_tokens=self.config.json_max_tokens, seed=self.config.seed)

    def write_setup(self, task: str, decomposition: Decomposition | None, macro_names: list[str],
                    feedback: str = "none") -> FastSetup:
        """Ask for horizon, observation parts and macros (a small JSON schema, names limited to those
        offered)."""
        schema = self.setup_schema(macro_names)
        prompt = self.setup_prompt(task, decomposition, macro_names, feedback)
        sampling = self.setup_sampling()
        data = ask_fitted(prompt, self.client, self.config.json_max_tokens,
                          lambda messages: self.client.structured(ROLE, messages, schema, sampling=sampling))
        return FastSetup.from_dict(data)

    def setup_or_fallback(self, task: str, decomposition: Decomposition | None, macro_names: list[str],
                          feedback: str = "none") -> tuple[FastSetup, str]:
        """`write_setup`, or, when its reply never validates, `FastSetup`'s defaults with every offered macro
        (counted in ``llm/fallbacks``); returns the setup and the error ("" = none)."""
        try:
            return self.write_setup(task, decomposition, macro_names, feedback), ""
        except Exception as exc:
            if not degradable(exc):
                raise
            note_fallback(self.client, ROLE)
            return FastSetup.default(macro_names), str(exc)

    # -- everything --------------------------------------------------------------------------------

    def run(self, task: str, decomposition: Decomposition, feedback: str = "none",
            notes: Mapping[str, str] | None = None,
            carried: Mapping[str, CarriedMacro] | None = None, draw: int = 0) -> FastResult:
        """Macros for every "code" sub-action, the reward and the setup, assembled into a FastReply.
        `draw` (the loop's iteration index) shifts the macro searches' sampling seeds by `DRAW_STRIDE` each:
        a later iteration asking a sub-action's prompt again samples anew.
        `notes` maps a sub-action to the critic's change for it (`rlgpt.agents.critic.Critic`): that
        sub-action's prompt carries it word for word (`note_feedback`). `carried` maps a goal to an earlier
        iteration's macro that reached it (`rlgpt.run.loop.verified_macros`): tried first for a sub-action
        with that goal; a sub-action the critic's notes name is searched even when it reaches the goal again.

        The reply's macros are the kept macros whose probe reached their goal at least once (a good macro
        is not dropped because a small model left it out of the setup's list), and those of sub-actions
        without a goal that the setup lists. A macro that never reached its goal is left out whatever the
        setup says: calling it costs the policy up to `MacroConfig.max_steps` steps for nothing, and its
        sub-action is learned on primitives instead (the critic sees its probes). A reward that never passed
        its checks is left out (``reward_code == ""``) rather than trained with.
        """
        choices: list[MacroChoice] = []
        setup: tuple[CompiledMacro, ...] = ()
        for sub in decomposition.subactions:
            if sub.how != "code":
                continue
            # Each sub-action is probed where the coded ones before it leave the player (an "rl" one in
            # between is skipped: nothing plays it before training).
            note = (notes or {}).get(sub.name, "")
            choice = self.write_macro(task, sub, note_feedback(sub, feedback, note), setup,
                                      (carried or {}).get(sub.goal), search_anyway=bool(note), draw=draw)
            choices.append(choice)
            # Only a macro training gets (`trained_macros`) sets where the next ones are probed: measured on
            # make_stone_sword, a get_wood that spun until the player died left every later sub-action
            # with no probe call at all, and their searches (13 minutes of decoding) with nothing to go by.
            if choice.best is not None and (reached_goal_once(choice) or not sub.goal):
                setup = (*setup, choice.best.code.compiled)
        kept = {c.subaction.name: c for c in choices if c.source is not None}
        checked = self.reward_check_steps
        reward = self.write_reward(task, decomposition, feedback)
        setup, setup_error = self.setup_or_fallback(task, decomposition, list(kept), feedback)
        chosen = trained_macros(kept, setup.macros)
        reply = FastReply(tuple(kept[n].source for n in chosen),  # type: ignore[misc]
                          reward.code or "", setup.observation,
                          max(setup.horizon, chain_horizon([kept[n] for n in chosen])))
        return FastResult(reply, choices, reward, setup, setup_error, self.reward_check_steps - checked,
                          dict(notes or {}))
