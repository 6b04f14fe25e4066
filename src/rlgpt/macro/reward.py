"""LLM-written dense reward code: compiled like macros, called after every primitive step, never raising.

The fast agent writes ``def reward(game, prev): ... return <number>``. ``game`` is the same read-only
`GameAPI` macros see (the state after the step); ``prev`` is a `GameSnapshot` of the state before the step
(``prev.inventory``, ``prev.achievements``, ``prev.pos``, ``prev.health``, ...). The code is compiled by
`compile_function` (the macro compiler's allow-list, instrumentation and `MacroLimits`); every failure
while it runs (exception, fuel, timeout, a value that is not a finite number) becomes a `Diagnostic` and a
dense reward of 0 for that step.
"""

from __future__ import annotations

import math
import random
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import gymnasium
import numpy as np

from rlgpt.macro.api import GameAPI
from rlgpt.macro.budget import (
    DEFAULT_GRACE_SECONDS,
    DEFAULT_MAX_SHARE,
    MacroAbort,
    MacroLimits,
    TimeBudget,
    cpu_seconds,
)
from rlgpt.macro.compiler import CompiledFunction, compile_function
from rlgpt.macro.diagnostics import Diagnostic, describe_exception, describe_value, locate, make_diagnostic
from rlgpt.macro.runtime import find_crafter

REWARD_ENTRY = "reward"
"""Name of the dense reward function the fast agent writes."""
REWARD_SIGNATURE = "def reward(game, prev):"
"""Its signature, as shown to the model."""
DEFAULT_EPISODE_CAP = 0.5
"""Default of `TrainConfig.dense_reward_cap`: the most the dense reward adds up to over an episode (below the
task's success reward of 1)."""
MAX_ABS_REWARD = 1e6
"""Largest dense reward magnitude accepted from one call. Beyond it a value is almost surely a bug, and it
would swamp the task reward (or overflow to inf once scaled and summed over a macro call)."""


def reward_value(value: object) -> tuple[float, str | None]:
    """``(float, None)`` for a finite number in ``[-MAX_ABS_REWARD, MAX_ABS_REWARD]``; ``(0.0, why)`` for
    anything else: any type, any size (an int too large for a float, NaN, inf, a str, a bool, a container,
    an object with ``__float__``). Never raises, and calls no method of ``value``: only exact ``int`` and
    ``float`` are converted (``int.bit_length`` first, so a huge int never reaches ``float()``)."""
    if isinstance(value, np.integer | np.floating):
        value = value.item()  # numpy's own scalars (the API's arrays), converted by numpy
    kind = type(value)
    if kind is int:
        if value.bit_length() > 64:  # type: ignore[attr-defined]
            return 0.0, f"reward() returned an int of {value.bit_length()} bits; return a small finite number"  # type: ignore[attr-defined]
        number = float(value)  # type: ignore[arg-type]
    elif kind is float:
        number = value  # type: ignore[assignment]
        if not math.isfinite(number):
            return 0.0, f"reward() returned {number!r}; return a finite number"
    else:
        shown = describe_value(value, 60) if kind in (str, type(None), bool) else f"a {kind.__name__}"
        return 0.0, f"reward() returned {shown}; return a finite number (int or float)"
    if abs(number) > MAX_ABS_REWARD:
        return 0.0, f"reward() returned {number:.3g}; keep it within +-{MAX_ABS_REWARD:g}"
    return number, None


@dataclass(frozen=True)
class GameSnapshot:
    """Read-only copy of the player's state at one step (``prev`` in reward code)."""

    pos: tuple[int, int]
    """Player position (x, y)."""
    facing: tuple[int, int]
    """Facing direction."""
    inventory: Mapping[str, int]
    """Inventory counts, incl. health/food/drink/energy."""
    achievements: Mapping[str, int]
    """Achievement counts."""
    health: int
    """Health points."""
    food: int
    """Food points."""
    drink: int
    """Drink points."""
    energy: int
    """Energy points."""
    sleeping: bool
    """Whether the player sleeps."""
    daylight: float
    """Daylight in [0, 1]."""

    @classmethod
    def of(cls, game: GameAPI) -> GameSnapshot:
        """Snapshot the state `game` shows now."""
        inventory = game.inventory
        return cls(game.pos, game.facing, MappingProxyType(dict(inventory)),
                   MappingProxyType(dict(game.achievements)), inventory["health"], inventory["food"],
                   inventory["drink"], inventory["energy"], game.sleeping, game.daylight)


def compile_reward(source: str, limits: MacroLimits | None = None) -> CompiledFunction:
    """Compile ``def reward(game, prev)``; raises `MacroCompileError` with every problem."""
    return compile_function(source, REWARD_ENTRY, 2, limits)


class RewardFunction:
    """A compiled reward, callable once per step; returns ``(value, diagnostic)`` and never raises."""

    def __init__(self, compiled: CompiledFunction) -> None:
        self.compiled = compiled
        self._guard = compiled.new_guard()
        self._func: Any = None
        self.load_failure: Diagnostic | None = None
        """Why the module body itself failed (then every call gives 0 with this diagnostic)."""
        try:
            self._func = compiled.load(self._guard)
        except (Exception, MacroAbort) as exc:
            self.load_failure = self._diagnostic(exc)

    def _diagnostic(self, exc: BaseException) -> Diagnostic:
        if self._guard.failure is not None:
            return self._guard.failure
        if isinstance(exc, MacroAbort):
            return exc.diagnostic
        line, col = locate(exc.__traceback__, self.compiled.filename)
        kind = "recursion" if isinstance(exc, RecursionError) else \
            "memory" if isinstance(exc, MemoryError) else "exception"
        return make_diagnostic(kind, describe_exception(exc), self.compiled.source, line, col)

    def __call__(self, game: GameAPI, prev: GameSnapshot) -> tuple[float, Diagnostic | None]:
        """The dense reward for the step ``prev -> game`` (0.0 and a diagnostic on any failure)."""
        if self.load_failure is not None:
            return 0.0, self.load_failure
        guard = self._guard
        # One guard per function, reset per call: fuel, depth and the clock are per call.
        guard.failure = None
        guard.fuel_used = 0
        guard.depth = 0
        guard.arm()
        try:
            value = self._func(game, prev)
        except (Exception, MacroAbort) as exc:
            return 0.0, self._diagnostic(exc)
        number, problem = reward_value(value)
        if problem is not None:
            return 0.0, make_diagnostic("exception", problem, self.compiled.source, None, None)
        return number, None


class DenseReward:
    """The dense reward's rules, for the per-env wrapper (`DenseRewardWrapper`) and the batch backend
    (`rlgpt.rl.sf_batch`, one episode total per game) alike: ``scale * reward(game, prev)`` after every
    primitive step, with the episode's running total kept within ``[0, episode_cap]`` (a step adds what keeps
    it inside), the code's time against the steps' (`TimeBudget`: past its share it pays 0), and every
    failure a diagnostic and 0 for that step (kept in ``diagnostics`` for the critic).

    Why that range: the total at any step of an episode then differs from its total at any other step by at
    most ``episode_cap``, below the task's success reward (1), so no episode that stops short (farming
    shaping that pays again and again, +0.5 per stone mined) earns more than one that reaches the goal. A
    range of ``+-cap`` swings by ``2 * cap``: the 1.5B's ``0.5 * (wood gained)`` paid +0.5 for wood and -0.5
    for each of the table and the pickaxe it was spent on, so collecting wood and stopping earned as much as
    making the pickaxe (0.5 + 0 against -0.5 + 1), sooner, and a make_wood_pickaxe policy that started at
    0.94 success fell to 0.00 over 250k steps. A penalty here takes back only what the shaping paid before.
    """

    def __init__(self, reward: CompiledFunction | str, scale: float = 1.0, limits: MacroLimits | None = None,
                 keep_diagnostics: int = 32, max_time_share: float = DEFAULT_MAX_SHARE,
                 budget_grace_seconds: float = DEFAULT_GRACE_SECONDS,
                 episode_cap: float | None = DEFAULT_EPISODE_CAP) -> None:
        if episode_cap is not None and not episode_cap > 0:
            raise ValueError(f"episode_cap must be > 0 or None (no cap), got {episode_cap!r}")
        compiled = compile_reward(reward, limits) if isinstance(reward, str) else reward
        self.reward_fn = RewardFunction(compiled)
        self.scale = scale
        self.episode_cap = episode_cap
        self.errors = 0
        """Failed reward calls over the object's lifetime."""
        self.calls = 0
        """Reward calls over the object's lifetime."""
        self.diagnostics: deque[Diagnostic] = deque(maxlen=keep_diagnostics)
        """Most recent failures."""
        self.budget = TimeBudget("the dense reward", max_time_share, budget_grace_seconds)
        """The reward code's time against the game's steps; past its share the reward is switched off (0)."""

    def step(self, game: GameAPI, prev: GameSnapshot, episode_total: float,
             step_seconds: float) -> tuple[float, float, Diagnostic | None]:
        """What the step ``prev -> game`` adds, given what the episode's steps added so far and the seconds
        the game took for the step; returns ``(added, the new episode total, diagnostic or None)``."""
        if self.budget.disabled is None:
            start = cpu_seconds()
            value, diagnostic = self.reward_fn(game, prev)
            code = cpu_seconds() - start
            diagnostic = self.budget.charge(code, code + step_seconds) or diagnostic
        else:
            value, diagnostic = 0.0, None  # switched off: its diagnostic was recorded when it happened
        self.calls += 1
        added = self.scale * value
        if self.episode_cap is not None:
            total = min(max(episode_total + added, 0.0), self.episode_cap)
            added = total - episode_total
        else:
            total = episode_total + added
        if diagnostic is not None:
            self.errors += 1
            self.diagnostics.append(diagnostic)
        return added, total, diagnostic


class DenseRewardWrapper(gymnasium.Wrapper):
    """Adds the dense reward (`DenseReward`) to every primitive step's reward (below any macro wrapper, so
    steps inside a macro are shaped too). ``info["dense_reward"]`` holds what the step added; a failing step
    adds ``info["dense_reward_diagnostic"]`` (a dict)."""

    def __init__(self, env: gymnasium.Env, reward: CompiledFunction | str, scale: float = 1.0,
                 limits: MacroLimits | None = None, seed: int | None = None,
                 keep_diagnostics: int = 32, max_time_share: float = DEFAULT_MAX_SHARE,
                 budget_grace_seconds: float = DEFAULT_GRACE_SECONDS,
                 episode_cap: float | None = DEFAULT_EPISODE_CAP) -> None:
        super().__init__(env)
        self.shaping = DenseReward(reward, scale, limits, keep_diagnostics, max_time_share,
                                   budget_grace_seconds, episode_cap)
        self.episode_total = 0.0
        """What the dense reward has added over the current episode (within ``[0, episode_cap]``)."""
        self.game = GameAPI(find_crafter(env), random.Random(seed))
        self._prev: GameSnapshot | None = None

    @property
    def errors(self) -> int:
        """Failed reward calls over the wrapper's lifetime."""
        return self.shaping.errors

    @property
    def calls(self) -> int:
        """Reward calls over the wrapper's lifetime."""
        return self.shaping.calls

    @property
    def diagnostics(self) -> deque[Diagnostic]:
        """Most recent failures."""
        return self.shaping.diagnostics

    @property
    def budget(self) -> TimeBudget:
        """The reward code's time budget."""
        return self.shaping.budget

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        """Reset the env and snapshot the first state."""
        self.budget.new_episode()
        self.episode_total = 0.0
        out = self.env.reset(**kwargs)
        self._prev = GameSnapshot.of(self.game)
        return out

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """One primitive step plus its dense reward."""
        if self._prev is None:
            raise RuntimeError("DenseRewardWrapper.step called before reset()")
        start = cpu_seconds()
        obs, reward, terminated, truncated, info = self.env.step(action)
        game_seconds = cpu_seconds() - start
        added, self.episode_total, diagnostic = self.shaping.step(self.game, self._prev, self.episode_total,
                                                                 game_seconds)
        self._prev = GameSnapshot.of(self.game)
        info = dict(info)
        info["dense_reward"] = added
        if diagnostic is not None:
            info["dense_reward_diagnostic"] = diagnostic.to_dict()
        return obs, float(reward) + added, terminated, truncated, info
