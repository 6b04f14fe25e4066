"""Run compiled macros as options inside an env, and expose primitives + macros as one action space.

`run_macro` executes one macro until it ends, fails or hits its step bound and returns the SMDP
transition (discounted reward sum, primitive step count, last observation). `MacroActionWrapper` is the
`gymnasium.Wrapper` the Sample Factory env workers use: it takes macro *source* (so it travels to worker
processes as text), compiles it in its constructor and keeps per-macro statistics. No exception raised by
macro code escapes: every failure becomes a `Diagnostic`.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import crafter
import gymnasium

from rlgpt.macro.api import ACTION_NAMES, GameAPI
from rlgpt.macro.budget import (
    DEFAULT_GRACE_SECONDS,
    DEFAULT_MAX_SHARE,
    MacroAbort,
    MacroLimits,
    TimeBudget,
    cpu_seconds,
)
from rlgpt.macro.compiler import CompiledMacro, MacroSource, compile_macro
from rlgpt.macro.diagnostics import (
    RUNTIME_FAILURE_KINDS,
    Diagnostic,
    describe_exception,
    describe_value,
    locate,
    make_diagnostic,
)
from rlgpt.macro.sandbox import Guard

_ACTION_INDEX = {name: i for i, name in enumerate(ACTION_NAMES)}
_NOOP = _ACTION_INDEX["noop"]


@dataclass(frozen=True)
class MacroResult:
    """The transition one macro invocation produced, as the policy sees it."""

    obs: Any
    """Observation after the last primitive step."""
    reward: float
    """Discounted reward sum ``sum_k gamma^k r_k`` over the primitive steps."""
    terminated: bool
    """The episode terminated during the macro."""
    truncated: bool
    """The episode was truncated (time limit) during the macro."""
    info: dict[str, Any]
    """Info dict of the last primitive step."""
    steps: int
    """Primitive steps taken (at least 1: a macro that acts not at all costs one ``noop``)."""
    outcome: str
    """``success`` (returned), ``episode_end`` (env ended first) or a failure kind."""
    diagnostic: Diagnostic | None
    """Why the macro failed, None unless ``outcome`` is a failure kind."""
    returned_at: int | None = None
    """For a call that returned (``success``): the line of the ``return`` it took, 0 when it ran off the
    end of its function (where a call that missed its goal gave up); None otherwise."""
    at_goal: bool = False
    """The call was ended by its goal (`MacroSource.goal`: the counter went up), not by its own code; its
    outcome is ``success``."""


def find_crafter(env: gymnasium.Env) -> crafter.Env:
    """The real `crafter.Env` behind a (wrapped) env: ``env.unwrapped.crafter`` or the env itself."""
    base = env.unwrapped
    game = getattr(base, "crafter", base)
    if not isinstance(game, crafter.Env):
        raise TypeError(
            "macros need a Crafter env exposing .crafter (rlgpt.envs.crafter.CrafterEnv), "
            f"got {type(base).__name__}"
        )
    return game


def _exception_diagnostic(exc: BaseException, macro: CompiledMacro) -> Diagnostic:
    """The diagnostic for an exception that ended a macro; never raises, whatever ``exc`` holds."""
    if isinstance(exc, MacroAbort):
        return exc.diagnostic
    try:
        return _describe_failure(exc, macro)
    except Exception as problem:  # noqa: BLE001 - last resort: describing must not kill the worker
        kind = "memory" if isinstance(exc, MemoryError) else "exception"
        return Diagnostic(kind, f"{type(exc).__name__} (could not be described: {type(problem).__name__})")


def _describe_failure(exc: BaseException, macro: CompiledMacro) -> Diagnostic:
    line = col = None
    # A RuntimeError raised for a StopIteration leaking out of a generator points at the original.
    for cause in (exc, exc.__cause__, exc.__context__):
        if cause is not None and line is None:
            line, col = locate(cause.__traceback__, macro.filename)
    if isinstance(exc, RecursionError):
        kind = "recursion"
    elif isinstance(exc, MemoryError):
        kind = "memory"
    elif _is_item_assignment_error(exc):
        kind = "mutation"
    else:
        kind = "exception"
    message = describe_exception(exc)
    if kind == "mutation":
        message += " (values from the game API are read-only copies; copy with dict()/list() to modify)"
    return make_diagnostic(kind, message, macro.source.code, line, col)


def _is_item_assignment_error(exc: BaseException) -> bool:
    """Python's own "... does not support item assignment/deletion" TypeError (str(exc) is not called)."""
    args = exc.args
    return (
        type(exc) is TypeError
        and type(args) is tuple
        and len(args) == 1
        and type(args[0]) is str
        and len(args[0]) < 200
        and "does not support item" in args[0]
    )


class _Session:
    """One invocation: the generator plus its guard; every resume is exception-proof."""

    def __init__(self, macro: CompiledMacro, game: GameAPI) -> None:
        self.macro = macro
        self.guard: Guard = macro.new_guard()
        self.gen: Any = None
        self.failure: Diagnostic | None = None
        self.done = False
        try:
            self.gen = macro.start(game, self.guard)
        except (Exception, MacroAbort) as exc:
            self._failed(exc)

    def _failed(self, exc: BaseException) -> None:
        self.failure = self.guard.failure or _exception_diagnostic(exc, self.macro)
        self.done = True

    def next_action(self) -> int | None:
        """The next primitive action index, or None once the macro ended (see ``failure``).

        Never raises: anything unexpected, even from describing the failure, ends the macro with a
        diagnostic instead of escaping into the env worker.
        """
        if self.done:
            return None
        try:
            return self._next_action()
        except (Exception, MacroAbort) as exc:  # last resort, see the docstring
            self.done = True
            if self.failure is None:
                self.failure = self.guard.failure or Diagnostic(
                    "memory" if isinstance(exc, MemoryError) else "exception",
                    f"the macro's outcome could not be processed ({type(exc).__name__})",
                )
            return None

    def _next_action(self) -> int | None:
        self.guard.arm()
        try:
            action = self.gen.send(None)
        except StopIteration:
            self.done = True
            self.failure = self.guard.failure
            return None
        except (Exception, MacroAbort) as exc:
            self._failed(exc)
            return None
        if self.guard.failure is not None:
            # The macro swallowed a guard abort (e.g. `finally: yield ...`) - it still failed.
            self.failure = self.guard.failure
            self.done = True
            return None
        if type(action) is str and action in _ACTION_INDEX:
            return _ACTION_INDEX[action]
        if type(action) is int and 0 <= action < len(ACTION_NAMES):
            return action
        self.failure = self._here(
            "bad_action",
            f"yielded {describe_value(action, 60)}; yield one of the primitive action names in game.actions",
        )
        self.done = True
        return None

    def _here(self, kind: str, message: str) -> Diagnostic:
        frame = getattr(self.gen, "gi_frame", None)
        line = frame.f_lineno if frame is not None else None
        return make_diagnostic(kind, message, self.macro.source.code, line, None)

    def stop(self, kind: str | None, message: str = "") -> None:
        """End early (step bound or episode end); ``finally`` blocks run under the guard."""
        if kind is not None and self.failure is None:
            self.failure = self._here(kind, message)
        self.done = True
        if self.gen is not None:
            self.guard.arm()
            try:
                self.gen.close()
            except (Exception, MacroAbort):
                pass


class MacroCall:
    """One invocation of a macro as an option, one primitive step at a time: the rules `run_macro` plays
    on one env and `rlgpt.macro.batch.BatchMacros` on many games side by side.

    Ask `next_action` for the next primitive action; after stepping the game with it, `record` its reward
    and whether the episode ended. ``None`` from `next_action` means the call is over: ``steps``,
    ``reward`` (the discounted sum), ``outcome`` and ``failure`` are then its result. A call always takes at
    least one step (a macro that acts not at all costs one ``noop``, or the episode would stall). A macro
    switched off by its time budget (``disabled``: that diagnostic) takes that one ``noop`` and fails with
    it, without running.
    """

    __slots__ = ("session", "game", "gamma", "max_steps", "reward", "discount", "steps", "outcome",
                 "failure", "returned_at", "at_goal", "_goal_count", "_goal_start", "_closing", "_over")

    def __init__(self, macro: CompiledMacro, game: GameAPI, gamma: float, max_steps: int,
                 disabled: Diagnostic | None = None) -> None:
        self.game, self.gamma, self.max_steps = game, gamma, max_steps
        self.reward, self.discount, self.steps = 0.0, 1.0, 0
        self.outcome = ""
        """``success`` (returned), ``episode_end`` (the episode ended first) or a failure kind; set once the
        call is over."""
        self.failure: Diagnostic | None = disabled
        """Why the macro failed, None unless ``outcome`` is a failure kind."""
        self.returned_at: int | None = None
        """Where a call that returned did (`MacroResult.returned_at`)."""
        self.at_goal = False
        """Whether the call's goal ended it (`MacroResult.at_goal`)."""
        # The option's termination condition: the sub-action's goal counter rising ends the call, so that
        # code which reached the goal and plays on (collecting more than asked, or spinning at a spent tile
        # until the player dies) hands control back where the probes judged it done.
        goal = macro.goal if disabled is None else None
        self._goal_count = goal.counter(game) if goal is not None else None
        self._goal_start = self._goal_count() if self._goal_count is not None else 0
        self._closing = disabled is not None  # the one noop step is the call's last
        self._over = False
        self.session = None if disabled is not None else _Session(macro, game)
        game.steps = 0
        game.last_reward = 0.0

    def next_action(self) -> int | None:
        """The next primitive action index, or None once the call is over. Never raises."""
        if self._over:
            return None
        if self._closing:
            return _NOOP
        session = self.session
        if self.steps >= self.max_steps:
            session.stop("max_steps", f"did not finish within {self.max_steps} primitive steps")
            return self._end()
        action = session.next_action()
        if action is None:
            if self.steps == 0:
                self._closing = True
                return _NOOP
            return self._end()
        return action

    def record(self, reward: float, episode_ended: bool) -> None:
        """The game took the step `next_action` gave: its reward, and whether the episode ended there."""
        self.steps += 1
        self.reward += self.discount * float(reward)
        self.discount *= self.gamma
        if self._closing:
            self._end()
            return
        self.game.steps = self.steps
        self.game.last_reward = float(reward)
        if episode_ended:
            self.session.stop(None)
            self._end("episode_end" if self.session.failure is None else "")
        elif self._goal_count is not None and self._goal_count() > self._goal_start:
            self.session.stop(None)
            self.at_goal = self.session.failure is None
            self._end()

    def _end(self, outcome: str = "") -> None:
        self._over = True
        if self.session is None:
            self.outcome = "disabled"
            return
        self.failure = self.session.failure
        self.outcome = outcome or (self.failure.kind if self.failure is not None else "success")
        if self.outcome == "success" and not self.at_goal:
            self.returned_at = self.session.guard.returned_at

    @property
    def over(self) -> bool:
        """Whether the call has ended (`next_action` answers None)."""
        return self._over


def run_macro(
    env: gymnasium.Env,
    macro: CompiledMacro,
    game: GameAPI,
    gamma: float,
    max_steps: int,
    disabled: Diagnostic | None = None,
) -> MacroResult:
    """Execute ``macro`` as an option on ``env`` (already reset) and return its SMDP transition (`MacroCall`'s
    rules; ``disabled``: the macro is switched off, the call is one ``noop`` failing with that diagnostic)."""
    call = MacroCall(macro, game, gamma, max_steps, disabled)
    obs: Any = None
    info: dict[str, Any] = {}
    terminated = truncated = False
    while (action := call.next_action()) is not None:
        obs, r, terminated, truncated, info = env.step(action)
        call.record(r, terminated or truncated)
    return MacroResult(obs, call.reward, terminated, truncated, info, call.steps, call.outcome, call.failure,
                       call.returned_at, call.at_goal)


@dataclass
class MacroStats:
    """Counters for one macro."""

    calls: int = 0
    """Invocations."""
    successes: int = 0
    """Invocations that ended by returning."""
    steps: int = 0
    """Primitive steps over all invocations."""
    failures: dict[str, int] = field(default_factory=lambda: dict.fromkeys(RUNTIME_FAILURE_KINDS, 0))
    """Failure count per kind in `RUNTIME_FAILURE_KINDS`."""
    interrupted: int = 0
    """Invocations cut short because the episode ended."""
    goal_ends: int = 0
    """Successful invocations that their goal ended (`MacroResult.at_goal`), not their own code."""

    def record(self, result: MacroResult | MacroCall) -> None:
        """Count one invocation."""
        self.calls += 1
        self.steps += result.steps
        if result.outcome == "success":
            self.successes += 1
            self.goal_ends += result.at_goal
        elif result.outcome == "episode_end":
            self.interrupted += 1
        else:
            self.failures[result.outcome] += 1

    def flat(self, name: str) -> dict[str, float]:
        """``macro/<name>/*`` entries for Sample Factory's ``episode_extra_stats``."""
        prefix = f"macro/{name}/"
        out = {
            prefix + "calls": float(self.calls),
            prefix + "successes": float(self.successes),
            prefix + "mean_length": self.steps / self.calls if self.calls else 0.0,
            prefix + "interrupted": float(self.interrupted),
            prefix + "goal_ends": float(self.goal_ends),
        }
        out.update({f"{prefix}fail_{kind}": float(n) for kind, n in self.failures.items()})
        return out


class _StepClock(gymnasium.Wrapper):
    """The env as a macro steps it, adding up the seconds spent in the game's own steps."""

    def __init__(self, env: gymnasium.Env) -> None:
        super().__init__(env)
        self.seconds = 0.0

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        start = cpu_seconds()
        out = self.env.step(action)
        self.seconds += cpu_seconds() - start
        return out


class MacroActionWrapper(gymnasium.Wrapper):
    """Action space = the env's primitives followed by compiled macros (one action each).

    Choosing a macro runs it as an option (`run_macro`); ``info["macro_steps"]`` is the number of primitive
    steps the action took (1 for a primitive), ``info["macro"]`` describes a macro invocation, and at
    episode end ``info["episode_extra_stats"]`` holds the episode's ``macro/<name>/*`` statistics.
    """

    def __init__(
        self,
        env: gymnasium.Env,
        macros: Sequence[MacroSource | str],
        gamma: float = 0.99,
        max_macro_steps: int = 32,
        limits: MacroLimits | None = None,
        seed: int | None = None,
        keep_diagnostics: int = 32,
        max_time_share: float = DEFAULT_MAX_SHARE,
        budget_grace_seconds: float = DEFAULT_GRACE_SECONDS,
    ) -> None:
        super().__init__(env)
        if not 0.0 < gamma <= 1.0:
            raise ValueError(f"gamma must be in (0, 1], got {gamma}")
        if max_macro_steps < 1:
            raise ValueError(f"max_macro_steps must be >= 1, got {max_macro_steps}")
        if not isinstance(env.action_space, gymnasium.spaces.Discrete):
            raise TypeError(f"MacroActionWrapper needs a Discrete action space, got {env.action_space}")
        self.compiled: tuple[CompiledMacro, ...] = tuple(compile_macro(m, limits) for m in macros)
        names = [m.name for m in self.compiled]
        if len(set(names)) != len(names):
            raise ValueError(f"macro names must be unique, got {names}")
        self.gamma = gamma
        self.max_macro_steps = max_macro_steps
        self.n_primitive = int(env.action_space.n)
        self.action_space = gymnasium.spaces.Discrete(self.n_primitive + len(self.compiled))
        self.game = GameAPI(find_crafter(env), random.Random(seed))
        self.stats: dict[str, MacroStats] = {n: MacroStats() for n in names}
        """Statistics over the wrapper's lifetime."""
        self.episode_stats: dict[str, MacroStats] = {n: MacroStats() for n in names}
        """Statistics of the current episode."""
        self.diagnostics: deque[tuple[str, Diagnostic]] = deque(maxlen=keep_diagnostics)
        """Most recent (macro name, failure) pairs, for the critic."""
        self.budgets: dict[str, TimeBudget] = {
            n: TimeBudget(f"macro {n!r}", max_time_share, budget_grace_seconds) for n in names}
        """Per macro: the time its own code takes against its game steps (`rlgpt.macro.budget`)."""
        self._clock = _StepClock(env)

    @property
    def action_names(self) -> tuple[str, ...]:
        """Primitive action names followed by macro names."""
        return ACTION_NAMES[: self.n_primitive] + tuple(m.name for m in self.compiled)

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        """Reset the env and the per-episode statistics."""
        self.episode_stats = {n: MacroStats() for n in self.stats}
        for budget in self.budgets.values():
            budget.new_episode()
        out = self.env.reset(**kwargs)
        self.game._new_episode()
        return out

    def step(self, action: int) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """A primitive step, or a whole macro invocation as one SMDP transition."""
        index = int(action)
        if not 0 <= index < self.action_space.n:
            raise ValueError(f"action must be in [0, {self.action_space.n}), got {action}")
        if index < self.n_primitive:
            obs, reward, terminated, truncated, info = self.env.step(index)
            info = dict(info)
            info["macro_steps"] = 1
        else:
            macro = self.compiled[index - self.n_primitive]
            budget = self.budgets[macro.name]
            if budget.disabled is not None:
                # Switched off for using too much of the step time: the action costs one noop.
                result = run_macro(self.env, macro, self.game, self.gamma, 1, disabled=budget.disabled)
            else:
                clock = self._clock
                game_seconds, start = clock.seconds, cpu_seconds()
                result = run_macro(clock, macro, self.game, self.gamma, self.max_macro_steps)
                total = cpu_seconds() - start
                disabled = budget.charge(total - (clock.seconds - game_seconds), total)
                if disabled is not None:
                    self.diagnostics.append((macro.name, disabled))
            obs, reward, terminated, truncated = (
                result.obs,
                result.reward,
                result.terminated,
                result.truncated,
            )
            info = dict(result.info)
            info["macro_steps"] = result.steps
            info["macro"] = {
                "name": macro.name,
                "outcome": result.outcome,
                "steps": result.steps,
                "diagnostic": None if result.diagnostic is None else result.diagnostic.to_dict(),
            }
            self.stats[macro.name].record(result)
            self.episode_stats[macro.name].record(result)
            if result.diagnostic is not None and result.outcome != "disabled":
                # (A disabled macro's diagnostic was kept once, when it was switched off.)
                self.diagnostics.append((macro.name, result.diagnostic))
        if terminated or truncated:
            extra = dict(info.get("episode_extra_stats", {}))
            for name, stats in self.episode_stats.items():
                extra.update(stats.flat(name))
                # Seconds of the macro's own code this episode (its time budget's count, for the critic).
                extra[f"macro/{name}/code_seconds"] = self.budgets[name].episode_code_seconds
            info["episode_extra_stats"] = extra
        return obs, reward, terminated, truncated, info
