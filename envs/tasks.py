"""Crafter tasks: one achievement (or a set of them) to unlock, with a sparse reward; or the Crafter benchmark
itself (`BENCHMARK_TASK`), with crafter's own reward.

LLM-written dense reward code is not a task property: it is compiled by the macro compiler and added by
`rlgpt.macro.reward.DenseRewardWrapper`, which contains its failures as diagnostics.
"""

from __future__ import annotations

import dataclasses
import difflib
from typing import Any

import gymnasium
from crafter import constants

from .crafter import CrafterEnv, GameState

ACHIEVEMENTS: tuple[str, ...] = tuple(constants.achievements)
"""Crafter's 22 achievement names, in crafter's data.yaml order."""

DEFAULT_EPISODE_LENGTH = 10000
"""Primitive steps per episode when a task does not say otherwise (crafter's own default length)."""

BENCHMARK_TASK = "crafter"
"""The task name of the Crafter benchmark (Hafner 2021): crafter's own reward (+1 the first time each of the
22 achievements is unlocked, plus the health change / 10), episodes that end only at death or at the episode
length, measured by the Crafter score (`rlgpt.rl.score.crafter_score`) instead of one task's success."""


@dataclasses.dataclass(frozen=True)
class TaskSpec:
    """A Crafter task: unlock every target achievement within one episode."""

    name: str
    """Task name: an achievement name, or several joined by ``+`` for a multi-target task."""
    targets: tuple[str, ...]
    """Achievements that must all be unlocked in the same episode for the task to succeed."""
    episode_length: int = DEFAULT_EPISODE_LENGTH
    """Episode limit in primitive steps; the episode is truncated when it is reached."""
    benchmark: bool = False
    """The Crafter benchmark (`BENCHMARK_TASK`): reward is crafter's own and unlocking the targets (all 22)
    does not end the episode; ``success`` still means every target unlocked."""

    def __post_init__(self) -> None:
        if not self.targets:
            raise ValueError(f"task {self.name!r} has no targets; give at least one achievement")
        for target in self.targets:
            _check_achievement(target)
        if self.episode_length <= 0:
            raise ValueError(f"episode_length must be a positive number of steps, got {self.episode_length}")

    @classmethod
    def from_name(cls, name: str, episode_length: int = DEFAULT_EPISODE_LENGTH) -> TaskSpec:
        """Build the task named ``name``: an achievement (``collect_wood``) or ``a+b`` for several targets."""
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"task name must be a non-empty string, got {name!r}")
        if name.strip() == BENCHMARK_TASK:
            return cls(name=BENCHMARK_TASK, targets=ACHIEVEMENTS, episode_length=episode_length,
                       benchmark=True)
        targets = tuple(part.strip() for part in name.split("+"))
        for target in targets:
            _check_achievement(target)
        if len(set(targets)) != len(targets):
            raise ValueError(f"task {name!r} lists an achievement twice; give each target once")
        return cls(name="+".join(targets), targets=targets, episode_length=episode_length)

    @property
    def target_indices(self) -> tuple[int, ...]:
        """Positions of the targets in `ACHIEVEMENTS` (columns of a batch's achievement counts)."""
        return tuple(ACHIEVEMENTS.index(target) for target in self.targets)

    def outcome(self, success: Any, dead: Any, at_limit: Any, crafter_reward: Any) -> tuple[Any, Any, Any]:
        """The step's ``(reward, terminated, truncated)``: `task_outcome`, or for the benchmark
        `benchmark_outcome`. Takes Python values (one game) or numpy arrays (a batch) alike."""
        if self.benchmark:
            return benchmark_outcome(crafter_reward, dead, at_limit)
        return task_outcome(success, dead, at_limit)


def task_outcome(success: Any, dead: Any, at_limit: Any) -> tuple[Any, Any, Any]:
    """The task's ``(reward, terminated, truncated)`` from whether every target is unlocked (``success``),
    the player died and the step limit is reached: reward 1.0 at success, termination on success or death,
    truncation at the limit unless the episode terminated.

    Takes Python bools (`TaskEnv`, one game) or numpy bool arrays (`rlgpt.rl.sf_batch`, a batch of games)
    and returns the same kind: the one definition of a task's episode end for both.
    """
    terminated = success | dead
    # ``^ True`` negates a Python bool and a numpy bool array alike (``~True`` is -2).
    return success * 1.0, terminated, at_limit & (terminated ^ True)


def benchmark_outcome(crafter_reward: Any, dead: Any, at_limit: Any) -> tuple[Any, Any, Any]:
    """The Crafter benchmark's ``(reward, terminated, truncated)``: crafter's own reward, termination on
    death only, truncation at the limit unless the player died (crafter's ``done = dead or over``)."""
    return crafter_reward, dead, at_limit & (dead ^ True)


def _check_achievement(target: str) -> None:
    """Raise a ValueError naming close matches when ``target`` is not a Crafter achievement."""
    if target in ACHIEVEMENTS:
        return
    close = difflib.get_close_matches(target, ACHIEVEMENTS, n=3)
    hint = f" Did you mean {', '.join(close)}?" if close else ""
    raise ValueError(
        f"unknown Crafter task {target!r}.{hint} Valid names: {', '.join(ACHIEVEMENTS)} (join with '+')."
    )


class TaskEnv(gymnasium.Wrapper):
    """A `CrafterEnv` playing one `TaskSpec`.

    Reward is 1.0 at the step all targets are unlocked (crafter's own reward is dropped; LLM-written dense
    reward code is added on top by `rlgpt.macro.reward.DenseRewardWrapper`). The episode terminates on
    success or death and is truncated at ``spec.episode_length``. The benchmark task (``spec.benchmark``)
    keeps crafter's own reward and terminates on death only. ``info`` adds ``success``, ``task`` and
    ``achievements`` (all 22 -> 1 if unlocked this episode else 0).
    """

    def __init__(self, env: CrafterEnv, spec: TaskSpec) -> None:
        if not isinstance(env, CrafterEnv):
            raise TypeError(f"TaskEnv wraps a CrafterEnv, got {type(env).__name__}")
        super().__init__(env)
        self._task = spec
        self._steps = 0

    @property
    def task(self) -> TaskSpec:
        """The task this env plays."""
        return self._task

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Start a new episode of the task (see `CrafterEnv.reset` for ``seed``)."""
        obs, info = self.env.reset(seed=seed, options=options)
        self._steps = 0
        return obs, self._task_info(info, success=False)

    def restore(self, state: GameState) -> tuple[Any, dict[str, Any]]:
        """Start a new episode of the task from a saved game state (`CrafterEnv.snapshot`): the step limit
        counts from here; achievements the state already holds count as unlocked."""
        obs, info = self.env.restore(state)
        self._steps = 0
        return obs, self._task_info(info, success=False)

    def step(self, action: int) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """One primitive step; returns ``(obs, reward, terminated, truncated, info)`` for the task."""
        obs, crafter_reward, dead, inner_truncated, info = self.env.step(action)
        self._steps += 1
        achievements = info["achievements"]
        success = all(achievements[target] > 0 for target in self._task.targets)
        at_limit = inner_truncated or self._steps >= self._task.episode_length
        reward, terminated, truncated = self._task.outcome(success, dead, at_limit, crafter_reward)
        return obs, reward, terminated, truncated, self._task_info(info, success)

    def _task_info(self, info: dict[str, Any], success: bool) -> dict[str, Any]:
        """Add the task's fields to the env's info."""
        info = dict(info)
        info["success"] = bool(success)
        info["task"] = self._task.name
        info["achievements"] = {name: int(info["achievements"][name] > 0) for name in ACHIEVEMENTS}
        return info


def make_task_env(
    task: str | TaskSpec,
    obs_mode: str = "symbolic",
    seed: int | None = None,
    episode_length: int | None = None,
) -> TaskEnv:
    """Create a `TaskEnv` for ``task`` (a name such as ``"collect_wood"`` / ``"a+b"``, or a `TaskSpec`).

    ``episode_length`` overrides the task's; the underlying `CrafterEnv` gets no length of its own so the
    task's limit is the one that truncates.
    """
    if isinstance(task, str):
        spec = (
            TaskSpec.from_name(task) if episode_length is None else TaskSpec.from_name(task, episode_length)
        )
    elif isinstance(task, TaskSpec):
        spec = task if episode_length is None else dataclasses.replace(task, episode_length=episode_length)
    else:
        raise TypeError(f"task must be a task name or a TaskSpec, got {type(task).__name__}")
    return TaskEnv(CrafterEnv(obs_mode=obs_mode, length=None, seed=seed), spec)


__all__ = [
    "ACHIEVEMENTS",
    "BENCHMARK_TASK",
    "DEFAULT_EPISODE_LENGTH",
    "TaskEnv",
    "TaskSpec",
    "benchmark_outcome",
    "make_task_env",
    "task_outcome",
]
