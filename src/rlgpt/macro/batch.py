"""Macros as actions of a batch of games (the batch env backend, `rlgpt.rl.sf_batch`).

`BatchMacros` is `rlgpt.macro.runtime.MacroActionWrapper` for N games stepped together: action ``i`` of a
game is primitive ``i`` below ``n_primitive`` and a compiled macro above. `BatchMacros.run` plays one
decision of every game: the games that chose a primitive take that one step, the others run their macro's
generator (`MacroCall`, the per-env path's rules, through the same sandbox) step by step, and only the games
still running a macro are stepped, until every macro call of the batch ended; each game then has one SMDP
transition (the discounted reward sum and its primitive step count ``k``). A game whose episode ends is not
stepped again in that decision.

Everything the per-env wrapper keeps is kept per game: the macro API's own seeded generator (each game's
`GameAPI` gets ``random.Random(seed)``, as each per-env wrapper does, so a game here is step for step the
per-env game), per-macro statistics over the object's lifetime and per episode (``macro/<name>/*``,
`episode_extra`), recent diagnostics, the time budget and the running-macro marker. Time: on the compiled
engine a game step costs ~10 us, so the share of *its* time that the per-env budget bounds would switch off
ordinary code (the control primitives take 0.1-0.25 of a `CrafterEnv` step); each primitive step a macro
runs therefore counts as `BATCH_STEP_SECONDS`, what a primitive step of a batch-backend training takes.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np

from rlgpt.macro.api import GameAPI
from rlgpt.macro.budget import DEFAULT_GRACE_SECONDS, DEFAULT_MAX_SHARE, MacroLimits, TimeBudget, cpu_seconds
from rlgpt.macro.compiler import CompiledMacro, MacroSource, compile_macro
from rlgpt.macro.diagnostics import Diagnostic
from rlgpt.macro.runtime import MacroCall, MacroStats
from rlgpt.macro.views import GameView

BATCH_STEP_SECONDS = 2e-4
"""What one primitive step counts as in a macro's (and the dense reward's) time budget on the batch
backend: a batch-backend training runs ~5,000 primitive steps/s on 2 cores (bench/RESULTS.md), so code
under the default share (0.9) costs such a training at most ~10x, as it costs the per-env path's."""

Advance = Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]
"""``advance(rows, actions)``: step games ``rows`` once (``actions[j]`` for ``rows[j]``); returns each one's
reward and whether its episode ended."""


class Marker(Protocol):
    """What `BatchMacros` tells the env worker's running-macro marker
    (`rlgpt.rl.macro_marker.MacroMarker`), which names the macro a dead or hung worker was running."""

    def encode(self, name: str) -> bytes:
        """The bytes that name a macro (computed once per macro)."""
        ...

    def running(self, encoded_name: bytes) -> None:
        """Macro calls start now; ``encoded_name`` is the macro about to run."""
        ...

    def rename(self, encoded_name: bytes) -> None:
        """The macro about to run its code, keeping the time the calls started."""
        ...

    def idle(self) -> None:
        """No macro runs."""
        ...


class BatchMacros:
    """Compiled macros over ``views`` (one `GameView` per game), per game the per-env wrapper's state."""

    def __init__(
        self,
        views: Sequence[GameView],
        macros: Sequence[MacroSource | str],
        n_primitive: int,
        gamma: float = 0.99,
        max_macro_steps: int = 32,
        limits: MacroLimits | None = None,
        seed: int | None = None,
        keep_diagnostics: int = 32,
        max_time_share: float = DEFAULT_MAX_SHARE,
        budget_grace_seconds: float = DEFAULT_GRACE_SECONDS,
        marker: Marker | None = None,
    ) -> None:
        if not 0.0 < gamma <= 1.0:
            raise ValueError(f"gamma must be in (0, 1], got {gamma}")
        if max_macro_steps < 1:
            raise ValueError(f"max_macro_steps must be >= 1, got {max_macro_steps}")
        self.compiled: tuple[CompiledMacro, ...] = tuple(compile_macro(m, limits) for m in macros)
        names = [m.name for m in self.compiled]
        if len(set(names)) != len(names):
            raise ValueError(f"macro names must be unique, got {names}")
        self.names = tuple(names)
        self.n_primitive = int(n_primitive)
        self.gamma, self.max_macro_steps = gamma, max_macro_steps
        self.games = [GameAPI(view, random.Random(seed)) for view in views]
        """Each game's API (macro code's ``game``)."""
        self.stats: dict[str, MacroStats] = {n: MacroStats() for n in names}
        """Statistics over the object's lifetime, all games together."""
        self.episode_stats = [{n: MacroStats() for n in names} for _ in self.games]
        """Per game: statistics of its current episode."""
        self.episode_code_seconds = np.zeros((len(self.games), len(names)))
        """Per game and macro: seconds of the macro's own code this episode."""
        self.diagnostics: deque[tuple[str, Diagnostic]] = deque(maxlen=keep_diagnostics)
        """Most recent (macro name, failure) pairs, for the critic."""
        self.budgets: dict[str, TimeBudget] = {
            n: TimeBudget(f"macro {n!r}", max_time_share, budget_grace_seconds) for n in names}
        """Per macro: the time its own code takes against its game steps (`rlgpt.macro.budget`)."""
        self.marker = marker
        self._encoded = [marker.encode(n) for n in names] if marker is not None else []

    @property
    def num_actions(self) -> int:
        """Primitives and macros."""
        return self.n_primitive + len(self.compiled)

    def run(self, actions: np.ndarray, advance: Advance) -> tuple[np.ndarray, np.ndarray]:
        """One decision of every game (``actions``: int ``[games]`` in ``[0, num_actions)``), stepping the
        games through ``advance`` (`Advance`); returns each game's primitive step count ``k`` and discounted
        reward sum. Never raises for anything a macro does."""
        n = len(self.games)
        k = np.zeros(n, np.int64)
        total = np.zeros(n)
        stepping = actions < self.n_primitive
        primitive = np.flatnonzero(stepping)
        step_actions = np.where(stepping, actions, 0)
        chosen = [(e, int(actions[e]) - self.n_primitive) for e in np.flatnonzero(~stepping).tolist()]
        marker = self.marker if chosen else None
        if marker is not None:
            marker.running(self._encoded[chosen[0][1]])
        calls: list[tuple[int, int, MacroCall]] = []
        code = np.zeros(n)
        for e, m in chosen:
            if marker is not None:
                marker.rename(self._encoded[m])  # starting a call runs the macro's module code
            start = cpu_seconds()
            call = MacroCall(self.compiled[m], self.games[e], self.gamma, self.max_macro_steps,
                             self.budgets[self.names[m]].disabled)
            code[e] += cpu_seconds() - start
            calls.append((e, m, call))
        active = calls
        slot = np.zeros(n, np.int64)
        first = True
        while True:
            running = []
            for e, m, call in active:
                if marker is not None:
                    marker.rename(self._encoded[m])
                start = cpu_seconds()
                action = call.next_action()
                code[e] += cpu_seconds() - start
                if action is not None:
                    step_actions[e] = action
                    stepping[e] = True
                    running.append((e, m, call))
            active = running
            rows = np.flatnonzero(stepping)
            if not len(rows):
                break
            reward, ended = advance(rows, step_actions[rows])
            k[rows] += 1
            slot[rows] = np.arange(len(rows))
            if first:
                total[primitive] = reward[slot[primitive]]
                first = False
            for e, _, call in active:
                call.record(float(reward[slot[e]]), bool(ended[slot[e]]))
            stepping[:] = False
        if marker is not None:
            marker.idle()
        for e, m, call in calls:
            self._finish(e, m, call, code[e])
            total[e] = call.reward
        return k, total

    def _finish(self, e: int, m: int, call: MacroCall, code_seconds: float) -> None:
        """Count one ended call (the per-env wrapper's bookkeeping)."""
        name = self.names[m]
        if call.outcome != "disabled":  # a disabled macro's call runs no code (its diagnostic was kept)
            disabled = self.budgets[name].charge(code_seconds, code_seconds + call.steps * BATCH_STEP_SECONDS)
            if disabled is not None:
                self.diagnostics.append((name, disabled))
            if call.failure is not None:
                self.diagnostics.append((name, call.failure))
            self.episode_code_seconds[e, m] += code_seconds
        self.stats[name].record(call)
        self.episode_stats[e][name].record(call)

    def episode_extra(self, ended: np.ndarray) -> dict[str, np.ndarray]:
        """The ``macro/<name>/*`` statistics of the episodes of games ``ended`` (bool ``[games]``), one array
        per key with those games' values (0 elsewhere), as the per-env wrapper reports them at an episode's
        end."""
        out: dict[str, np.ndarray] = {}
        for e in np.flatnonzero(ended).tolist():
            for m, (name, stats) in enumerate(self.episode_stats[e].items()):
                flat = stats.flat(name)
                flat[f"macro/{name}/code_seconds"] = float(self.episode_code_seconds[e, m])
                for key, value in flat.items():
                    out.setdefault(key, np.zeros(len(self.games), np.float32))[e] = value
        return out

    def new_episodes(self, rows: np.ndarray) -> None:
        """Games ``rows`` (bool ``[games]``, already reset) start an episode: their episode statistics and
        their game objects' episode memory start over."""
        for e in np.flatnonzero(rows).tolist():
            self.games[e]._new_episode()
            self.episode_stats[e] = {n: MacroStats() for n in self.names}
            self.episode_code_seconds[e] = 0.0
