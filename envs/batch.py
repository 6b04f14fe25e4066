"""N Crafter games stepped together: the interface trainers use for symbolic-observation training, and its
reference implementation over `CrafterEnv`.

A batch owns ``num_envs`` games and steps them all with one call. It knows nothing of tasks, rewards
other than crafter's, or episode limits: the caller decides which games are over (a task reached, the player
died, a step limit) and resets exactly those with :meth:`CrafterBatch.reset_done`. Every row is, step for
step, what one `CrafterEnv` returns for the same seed and actions: the same symbolic ``view`` and ``vector``,
crafter's reward, death, and achievement counts. `ReferenceBatch` is that definition, written as a loop over
`CrafterEnv`s; a compiled implementation must match it row by row (tests/envs).

Seeding follows `CrafterEnv.reset`: :meth:`reset` with seed ``s`` plays episode 1 of ``s``; each later
:meth:`reset_done` of that row plays the next episode of the same seed (crafter's episode counter).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from .crafter import VECTOR_FIELDS, CrafterEnv
from .tasks import ACHIEVEMENTS


@dataclass
class BatchObs:
    """The symbolic observation of every game (row i = game i)."""

    view: np.ndarray
    """uint8 ``[num_envs, view_h, view_w]``: semantic ids of the local view (`CrafterEnv.local_view`)."""
    vector: np.ndarray
    """float32 ``[num_envs, len(VECTOR_FIELDS)]``: inventory, facing, daylight, sleeping
    (`CrafterEnv.vector`)."""

    @classmethod
    def zeros(cls, num_envs: int, view_shape: tuple[int, int]) -> BatchObs:
        """An observation of ``num_envs`` games to fill in."""
        view = np.zeros((num_envs, *view_shape), np.uint8)
        return cls(view, np.zeros((num_envs, len(VECTOR_FIELDS)), np.float32))


def check_seeds(seeds: Sequence[int], num_envs: int) -> None:
    """`CrafterBatch.reset`'s argument check: one seed per game."""
    if len(seeds) != num_envs:
        raise ValueError(f"reset needs one seed per game ({num_envs}), got {len(seeds)}")


def check_actions(actions: np.ndarray, num_envs: int, started: bool) -> np.ndarray:
    """`CrafterBatch.step`'s checks: reset came first and there is one action per game. Returns the actions
    as an array."""
    if not started:
        raise RuntimeError("step called before reset(); call reset(seeds) first")
    actions = np.asarray(actions)
    if actions.shape != (num_envs,):
        raise ValueError(f"actions must have shape ({num_envs},), got {actions.shape}")
    return actions


def check_rows(
    rows: np.ndarray, actions: np.ndarray, num_envs: int, started: bool
) -> tuple[np.ndarray, np.ndarray]:
    """`CrafterBatch.step_rows`'s checks: reset came first, increasing rows in range, one action per row.
    Returns both as arrays."""
    if not started:
        raise RuntimeError("step_rows called before reset(); call reset(seeds) first")
    rows, actions = np.asarray(rows), np.asarray(actions)
    if rows.ndim != 1 or rows.dtype.kind not in "iu":
        raise ValueError(f"rows must be a 1-D array of row indices, got {rows.dtype} of shape {rows.shape}")
    if actions.shape != rows.shape:
        raise ValueError(f"step_rows needs one action per row ({len(rows)}), got shape {actions.shape}")
    # On Python ints: numpy's per-call overhead (~10 us for unique/min/max) would cost more than stepping
    # the one game a macro call often steps.
    listed = rows.tolist()
    increasing = all(a < b for a, b in zip(listed, listed[1:], strict=False))
    if listed and (listed[0] < 0 or listed[-1] >= num_envs or not increasing):
        raise ValueError(f"rows must be increasing indices in [0, {num_envs}), got {listed}")
    return rows, actions


@dataclass
class BatchStep(BatchObs):
    """What one :meth:`CrafterBatch.step` returns, row i for game i (observation after the step)."""

    reward: np.ndarray
    """float32 ``[num_envs]``: crafter's reward (health change / 10, plus 1 per achievement unlocked)."""
    dead: np.ndarray
    """bool ``[num_envs]``: the player's health reached 0 (`CrafterEnv.step`'s ``terminated``)."""
    achievements: np.ndarray
    """int32 ``[num_envs, len(ACHIEVEMENTS)]``: crafter's achievement counts this episode, in `ACHIEVEMENTS`
    order."""


class CrafterBatch(Protocol):
    """``num_envs`` Crafter games (symbolic observation, no episode limit of their own)."""

    num_envs: int
    """Number of games."""
    view_shape: tuple[int, int]
    """``(view_h, view_w)`` of the symbolic view."""

    def reset(self, seeds: Sequence[int]) -> BatchObs:
        """Start every game: row i plays episode 1 of ``seeds[i]``."""
        ...

    def step(self, actions: np.ndarray) -> BatchStep:
        """Advance every game one primitive step (``actions``: int ``[num_envs]`` in ``[0, 17)``)."""
        ...

    def step_rows(self, rows: np.ndarray, actions: np.ndarray, out: BatchStep) -> None:
        """Advance only the games ``rows`` (increasing indices) one primitive step, game ``rows[j]`` taking
        ``actions[j]``, each as if it were stepped alone; their results go into those rows of ``out`` (the
        other rows are left as they are)."""
        ...

    def reset_done(self, done: np.ndarray, obs: BatchObs) -> None:
        """Start the next episode of the games where ``done`` (bool ``[num_envs]``) is set, writing their
        first observation into those rows of ``obs`` (the other rows are left as they are)."""
        ...


class ReferenceBatch:
    """`CrafterBatch` as a loop over `CrafterEnv`s: the definition a compiled engine is checked against."""

    def __init__(self, num_envs: int, area: tuple[int, int] = (64, 64), view: tuple[int, int] = (9, 9)):
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        self.num_envs = int(num_envs)
        self.envs = [CrafterEnv("symbolic", area=area, view=view, length=None) for _ in range(self.num_envs)]
        space = self.envs[0].observation_space["view"]
        self.view_shape = (int(space.shape[0]), int(space.shape[1]))
        self._started = False

    def reset(self, seeds: Sequence[int]) -> BatchObs:
        check_seeds(seeds, self.num_envs)
        obs = BatchObs.zeros(self.num_envs, self.view_shape)
        for i, (env, seed) in enumerate(zip(self.envs, seeds, strict=True)):
            o, _ = env.reset(seed=int(seed))
            obs.view[i], obs.vector[i] = o["view"], o["vector"]
        self._started = True
        return obs

    def step(self, actions: np.ndarray) -> BatchStep:
        actions = check_actions(actions, self.num_envs, self._started)
        obs = BatchObs.zeros(self.num_envs, self.view_shape)
        out = BatchStep(
            obs.view,
            obs.vector,
            np.zeros(self.num_envs, np.float32),
            np.zeros(self.num_envs, bool),
            np.zeros((self.num_envs, len(ACHIEVEMENTS)), np.int32),
        )
        self.step_rows(np.arange(self.num_envs), actions, out)
        return out

    def step_rows(self, rows: np.ndarray, actions: np.ndarray, out: BatchStep) -> None:
        rows, actions = check_rows(rows, actions, self.num_envs, self._started)
        for i, action in zip(rows.tolist(), actions.tolist(), strict=True):
            o, reward, dead, _, info = self.envs[i].step(int(action))
            out.view[i], out.vector[i] = o["view"], o["vector"]
            out.reward[i], out.dead[i] = reward, dead
            out.achievements[i] = [info["achievements"][name] for name in ACHIEVEMENTS]

    def reset_done(self, done: np.ndarray, obs: BatchObs) -> None:
        for i in np.flatnonzero(np.asarray(done)):
            o, _ = self.envs[i].reset()
            obs.view[i], obs.vector[i] = o["view"], o["vector"]

