"""Probe a compiled macro in a few seeded Crafter episodes, recording the state before and after each call.

This is the environment judging candidate code before any training (the paper's critic "observes the
environment before and after each action"): each call records position, inventory change, achievements
unlocked, the outcome kind, steps and the diagnostic, and the report says how often the macro returned
and, given a goal, how often the goal's counter went up. Everything is deterministic given the seeds
(world, the warm-up moves and the macro's own `game.random`), and serialises to JSON for the run directory
and the critic's prompt.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import gymnasium

from rlgpt.envs.crafter import DIRECTIONS, CrafterEnv, GameState
from rlgpt.macro.api import ACTION_NAMES, GameAPI
from rlgpt.macro.compiler import CompiledMacro, MacroSource, compile_macro
from rlgpt.macro.control import goal_sources, refusal
from rlgpt.macro.diagnostics import Diagnostic
from rlgpt.macro.goal import Goal
from rlgpt.macro.links import TOP_UP_CALLS, TopUp
from rlgpt.macro.runtime import run_macro

_MOVES = tuple(ACTION_NAMES.index(f"move_{name}") for _, name in DIRECTIONS)
TRACE_STEPS = 8
"""Actions kept at the end of each probed call (`ProbeCall.trace`): what a failing macro kept doing."""


@dataclass(frozen=True)
class ProbeState:
    """The player's state at one moment (inventory/achievements counts, non-zero entries only)."""

    pos: tuple[int, int]
    """Player position (x, y)."""
    inventory: dict[str, int]
    """Non-zero inventory counts."""
    achievements: dict[str, int]
    """Non-zero achievement counts."""

    @classmethod
    def of(cls, game: GameAPI) -> ProbeState:
        """Capture `game`'s state now."""
        return cls(game.pos, {k: v for k, v in game.inventory.items() if v},
                   {k: v for k, v in game.achievements.items() if v})


@dataclass(frozen=True)
class ProbeCall:
    """One macro invocation in a probe episode."""

    seed: int
    """Episode seed."""
    call: int
    """Index of the call within the episode."""
    before: ProbeState
    """State before the call."""
    after: ProbeState
    """State after the call."""
    inventory_diff: dict[str, int]
    """Inventory changes (after - before), non-zero only."""
    unlocked: tuple[str, ...]
    """Achievements whose counter went up during the call."""
    outcome: str
    """`MacroResult.outcome`: success, episode_end or a failure kind."""
    steps: int
    """Primitive steps the call took."""
    diagnostic: str | None
    """The failure, formatted, or None."""
    reached_goal: bool | None
    """Whether the goal was reached (None without a goal)."""
    trace: tuple[str, ...] = ()
    """The call's last `TRACE_STEPS` actions. An action other than a move says what the player faced,
    e.g. ``place_table@tree`` (placing onto a tree, which never works), and for a ``make_``/``place_``
    action crafter refused, why (`rlgpt.macro.control.refusal`), e.g.
    ``make_wood_pickaxe@grass(refused: no table nearby)``; a move that left the player where it was says
    what stopped it, e.g. ``move_down(blocked by tree)``."""
    failure: str = ""
    """Why the last control primitive the call ran returned False (`GameAPI.last_failure`, e.g. "cannot
    collect stone: it needs 1 wood_pickaxe in the inventory"); "" when none failed last."""
    returned_at: int | None = None
    """For a call that returned: the line of its code's ``return`` it took, 0 when it ran off the end of its
    function (`rlgpt.macro.runtime.MacroResult.returned_at`); None for other outcomes."""
    unseen: tuple[str, ...] = ()
    """For a call that missed its goal: the goal's sources (`rlgpt.macro.control.goal_sources`, e.g.
    ``("tree",)`` for wood) that were not in view, neither at the call's start nor when it ended.
    The code had to look for one and did not (measured: a get_wood that returns when no tree is in view
    probes 1.00 on worlds that start with one)."""
    repeated: int = 0
    """How many times in a row the call's last action (as `trace` writes it) was taken at its end: a macro
    that spins (``do`` at a spent tile until the player dies) shows a run far longer than `trace`."""

    @property
    def achieved(self) -> bool:
        """Whether the call reached the goal and left the player alive: a call that raised the counter and
        then played on until the player died (outcome ``episode_end``; probe episodes have no time limit)
        does not count, since nothing can follow it (the next sub-action starts where this one ends)."""
        return bool(self.reached_goal) and self.outcome != "episode_end"

    @property
    def died_after_goal(self) -> bool:
        """Whether the call reached the goal and then played on until the player died (not `achieved`)."""
        return bool(self.reached_goal) and not self.achieved

    def line(self) -> str:
        """One compact line for prompts."""
        diff = ", ".join(f"{k}{v:+d}" for k, v in self.inventory_diff.items()) or "no change"
        goal = "" if self.reached_goal is None else f" goal={'yes' if self.reached_goal else 'no'}"
        if self.died_after_goal:
            goal += " but the macro went on until the player died (return once the goal is reached)"
        diag = f" | {self.diagnostic}" if self.diagnostic else ""
        unlocked = f" unlocked {', '.join(self.unlocked)}" if self.unlocked else ""
        trace = f" | last actions: {' '.join(self.trace)}" if self.trace else ""
        if self.trace and self.repeated > 2:
            trace += f" (the last {self.repeated} all {self.trace[-1]})"
        trace += f" | last primitive failed: {self.failure}" if self.failure else ""
        trace += f" | not in view at its start or end: {', '.join(self.unseen)}" if self.unseen else ""
        return (f"seed {self.seed} call {self.call}: {self.outcome} in {self.steps} steps, "
                f"pos {self.before.pos}->{self.after.pos}, inventory {diff}{unlocked}{goal}{diag}{trace}")


@dataclass(frozen=True)
class ProbeReport:
    """All calls of one macro's probe and their summary."""

    macro: str
    """Macro name."""
    goal: str | None
    """The goal probed for, or None."""
    calls: tuple[ProbeCall, ...]
    """Every call, in order."""
    outcomes: dict[str, int] = field(default_factory=dict)
    """Count per outcome kind."""
    setup: tuple[str, ...] = ()
    """Macros run once each at the start of every episode before the probed calls (earlier sub-actions)."""
    env_steps: int = 0
    """Every primitive env step the probe played: the calls', the setup macros' and the warm-up moves' (what
    the run counts against its budget as ``probe`` steps). A probe whose process failed as a whole reports
    its bound (`probe_step_bound`): how far it got is unknown, and the budget must not be undercounted."""

    @property
    def success_rate(self) -> float:
        """Share of calls that ended by returning."""
        return self.outcomes.get("success", 0) / len(self.calls) if self.calls else 0.0

    @property
    def goal_rate(self) -> float | None:
        """Share of calls that reached the goal and left the player alive (`ProbeCall.achieved`; None without
        a goal)."""
        if self.goal is None or not self.calls:
            return None
        return self.achieved_calls / len(self.calls)

    @property
    def achieved_calls(self) -> int:
        """Calls that reached the goal and left the player alive (`ProbeCall.achieved`)."""
        return sum(c.achieved for c in self.calls)

    @property
    def mean_steps(self) -> float:
        """Mean primitive steps per call."""
        return sum(c.steps for c in self.calls) / len(self.calls) if self.calls else 0.0

    @property
    def episode_steps(self) -> float:
        """Mean primitive steps per probe episode (`env_steps` over the seeds with a recorded call): for a
        sub-action probed after the ones before it (`setup`, with their top-up calls), what playing the
        chain up to it once took."""
        seeds = len({c.seed for c in self.calls})
        return self.env_steps / seeds if seeds else 0.0

    def score(self) -> tuple[float, float, float]:
        """Sort key, higher is better: goal rate, then success rate, then fewer steps."""
        return (self.goal_rate or 0.0, self.success_rate, -self.mean_steps)

    def summary(self) -> str:
        """One line: rates and outcome counts."""
        goal = "" if self.goal_rate is None else f"goal {self.goal} reached {self.goal_rate:.0%}, "
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(self.outcomes.items()))
        after = f" (each after {', '.join(self.setup)})" if self.setup else ""
        return (f"macro {self.macro}: {len(self.calls)} calls{after}, {goal}returned "
                f"{self.success_rate:.0%}, mean {self.mean_steps:.1f} steps ({kinds})")

    def render(self, max_calls: int = 6, failed_only: bool = False) -> str:
        """Summary plus up to `max_calls` call lines (failures first), bounded for prompts; `failed_only`:
        the calls that missed, and one line counting the rest."""
        calls = sorted(self.calls, key=lambda c: (c.reached_goal is not False and c.outcome == "success"))
        if not failed_only:
            return "\n".join([self.summary(), *(f"  {c.line()}" for c in calls[:max_calls])])
        missed = [c for c in calls if not c.achieved][:max_calls]
        rest = len(self.calls) - len(missed)
        return "\n".join([self.summary(), *(f"  {c.line()}" for c in missed),
                          *([f"  ({rest} other calls reached the goal)"] if rest else [])])

    @classmethod
    def failed(cls, macro: str, goal: Goal | str | None, seed: int, diagnostic: Diagnostic,
               setup: tuple[str, ...] = (), env_steps: int = 0) -> ProbeReport:
        """The report of a probe whose process failed as a whole (`rlgpt.macro.contain`: out of memory,
        out of time, crashed): one call, of the diagnostic's kind, that reached nothing; `env_steps` is the
        probe's bound (`probe_step_bound`)."""
        nowhere = ProbeState((0, 0), {}, {})
        call = ProbeCall(seed=seed, call=0, before=nowhere, after=nowhere, inventory_diff={}, unlocked=(),
                         outcome=diagnostic.kind, steps=0, diagnostic=str(diagnostic),
                         reached_goal=None if goal is None else False)
        return cls(macro, None if goal is None else str(goal), (call,), {diagnostic.kind: 1}, setup,
                   env_steps)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form, summary rates included."""
        return {"macro": self.macro, "goal": self.goal, "outcomes": dict(self.outcomes),
                "success_rate": self.success_rate, "goal_rate": self.goal_rate, "mean_steps": self.mean_steps,
                "calls": [asdict(c) for c in self.calls], "setup": list(self.setup),
                "env_steps": self.env_steps}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProbeReport:
        """Inverse of to_dict (the summary rates are recomputed, not read). A report written before probes
        counted their steps reads with its calls' steps (setup and warm-up steps were not kept)."""
        def state(s: dict[str, Any]) -> ProbeState:
            return ProbeState(tuple(s["pos"]), dict(s["inventory"]), dict(s["achievements"]))

        calls = tuple(ProbeCall(**{**c, "before": state(c["before"]), "after": state(c["after"]),
                                   "unlocked": tuple(c["unlocked"]), "trace": tuple(c.get("trace", ())),
                                   "unseen": tuple(c.get("unseen", ()))})
                      for c in data["calls"])
        env_steps = int(data.get("env_steps", sum(c.steps for c in calls)))
        return cls(data["macro"], data["goal"], calls, dict(data["outcomes"]), tuple(data.get("setup", ())),
                   env_steps)


class _StepCounter(gymnasium.Wrapper):
    """Counts every primitive step played through it (the probe's ``env_steps``)."""

    def __init__(self, env: CrafterEnv) -> None:
        super().__init__(env)
        self.steps = 0

    def step(self, action: int):
        self.steps += 1
        return self.env.step(action)


def probe_step_bound(seeds: int, calls_per_episode: int, warmup_steps: int, max_steps: int,
                     setup: int = 0) -> int:
    """The most primitive steps a probe can play: per seed, every setup macro, its top-up calls
    (`rlgpt.macro.links.TOP_UP_CALLS`) and every call at `max_steps`, and the warm-up moves before each
    call."""
    setup_calls = setup + TOP_UP_CALLS if setup else 0
    return seeds * (setup_calls * max_steps + calls_per_episode * (warmup_steps + max_steps))


class _Trace(gymnasium.Wrapper):
    """The env as `run_macro` sees it, recording the last actions (with what the player faced)."""

    def __init__(self, env: CrafterEnv, game: GameAPI) -> None:
        super().__init__(env)
        self.game = game
        self.actions: deque[str] = deque(maxlen=TRACE_STEPS)
        self.repeated = 0
        """How many times in a row the last recorded action was taken."""

    def _record(self, action: str) -> None:
        self.repeated = self.repeated + 1 if self.actions and self.actions[-1] == action else 1
        self.actions.append(action)

    def step(self, action: int):
        name = ACTION_NAMES[int(action)]
        if not name.startswith("move_"):
            refused = refusal(self.game, name)  # the state before the step is what crafter judged
            self._record(f"{name}@{self.game.target_material or 'outside'}"
                         + (f"(refused: {refused})" if refused else ""))
            return self.env.step(action)
        before = self.game.pos
        out = self.env.step(action)
        if self.game.pos == before:  # the move turned the player toward what blocked it
            what = self.game.target_object or self.game.target_material or "the world's edge"
            name = f"{name}(blocked by {what})"
        self._record(name)
        return out


def probe_macro(macro: CompiledMacro | MacroSource | str, *, seeds: tuple[int, ...] = (0, 1, 2),
                calls_per_episode: int = 1, warmup_steps: int = 0, max_steps: int = 64,
                goal: Goal | str | None = None, env: CrafterEnv | None = None,
                setup: tuple[CompiledMacro, ...] = (), starts: Sequence[GameState] = ()) -> ProbeReport:
    """Run `macro` `calls_per_episode` times in one episode per seed and record every call.

    Args:
        macro: compiled macro or its source.
        seeds: one episode per seed (world and warm-up moves follow the seed).
        calls_per_episode: consecutive calls per episode (later calls start where the previous ended).
        warmup_steps: random moves before each call, so calls start in varied states.
        max_steps: primitive step bound per call (as in training).
        goal: counter that should go up per call ("wood", "collect_wood", "place_table", ...).
        env: a CrafterEnv to reuse (it is reset per seed); a fresh one by default.
        setup: macros run once each, in order, at the start of every episode (`max_steps` each), so that a
            sub-action is probed in the state the sub-actions before it leave (a table can only be placed
            once wood was collected); those whose goal gives what a later one's recipe lacks are called
            again (`rlgpt.macro.links.TopUp`: a call ends at its goal, one wood, and a table takes two).
            Their calls are not recorded; the calls' ``before`` state shows what they achieved.
        starts: saved states to start from instead of a fresh world (a chain's later subtask, whose
            episodes start where the skills before it left off): episode j restores ``starts[j % len]``
            after its seed's reset; the warm-up moves and the API's randomness still follow the seed.
    """
    compiled = macro if isinstance(macro, CompiledMacro) else compile_macro(macro)
    goal = Goal.parse(goal) if isinstance(goal, str) else goal
    base = env or CrafterEnv(length=None)
    # Every step goes through the counter (setup macros, warm-up moves and the calls): the report's
    # ``env_steps`` is what the probe cost, not only what its recorded calls took.
    env = _StepCounter(base)
    calls: list[ProbeCall] = []
    outcomes: dict[str, int] = {}
    sources = goal_sources(goal.name) if goal is not None else ()
    for j, seed in enumerate(seeds):
        env.reset(seed=seed)
        if starts:
            base.restore(starts[j % len(starts)])
        game = GameAPI(base.crafter, random.Random(seed))
        game._new_episode()  # a start state's stations (placed by its prefix) are remembered
        moves = random.Random(seed + 10_007)
        ended = False
        top_up = TopUp()
        for i, earlier in enumerate(setup):
            if earlier.goal is not None and top_up.before(env, game, setup[:i], earlier.goal.name,
                                                          max_steps) is not None:
                ended = True
                break
            result = run_macro(env, earlier, game, gamma=1.0, max_steps=max_steps)
            if result.terminated or result.truncated:
                ended = True
                break
        for call in range(0 if ended else calls_per_episode):
            if goal is not None and top_up.before(env, game, setup, goal.name, max_steps) is not None:
                break
            for _ in range(warmup_steps):
                _, _, terminated, truncated, _ = env.step(moves.choice(_MOVES))
                if terminated or truncated:
                    ended = True
                    break
            if ended:
                break
            before = ProbeState.of(game)
            seen = {kind for kind in sources if game.nearest(kind) is not None}
            game._failure = ""  # what a primitive of this call says, not of a setup macro or earlier call
            trace = _Trace(env, game)
            result = run_macro(trace, compiled, game, gamma=1.0, max_steps=max_steps)
            after = ProbeState.of(game)
            diff = {k: after.inventory.get(k, 0) - before.inventory.get(k, 0)
                    for k in sorted(set(before.inventory) | set(after.inventory))}
            unlocked = tuple(k for k in sorted(after.achievements)
                             if after.achievements[k] > before.achievements.get(k, 0))
            reached = None if goal is None else goal.reached(before, after)
            unseen = (tuple(k for k in sources if k not in seen and game.nearest(k) is None)
                      if reached is False else ())
            calls.append(ProbeCall(
                seed=seed, call=call, before=before, after=after,
                inventory_diff={k: v for k, v in diff.items() if v}, unlocked=unlocked,
                outcome=result.outcome, steps=result.steps,
                diagnostic=None if result.diagnostic is None else str(result.diagnostic),
                reached_goal=reached, trace=tuple(trace.actions), failure=game.last_failure,
                returned_at=result.returned_at,
                unseen=unseen, repeated=trace.repeated,
            ))
            outcomes[result.outcome] = outcomes.get(result.outcome, 0) + 1
            if result.terminated or result.truncated:
                break
    return ProbeReport(compiled.name, None if goal is None else str(goal), tuple(calls), outcomes,
                       tuple(m.name for m in setup), env.steps)
