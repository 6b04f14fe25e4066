"""Crafter tasks: one achievement (or a set of them) to unlock, with a sparse reward and a dense-reward hook.

The dense-reward hook is where LLM-written reward code plugs in, so `TaskEnv` contains its failures
instead of letting them end the run.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
from typing import Any, Protocol

import gymnasium
from crafter import constants

from .crafter import CrafterEnv

ACHIEVEMENTS: tuple[str, ...] = tuple(constants.achievements)
"""Crafter's 22 achievement names, in crafter's data.yaml order."""

DEFAULT_EPISODE_LENGTH = 10000
"""Primitive steps per episode when a task does not say otherwise (crafter's own default length)."""


@dataclasses.dataclass(frozen=True)
class TaskSpec:
    """A Crafter task: unlock every target achievement within one episode."""

    name: str
    """Task name: an achievement name, or several joined by ``+`` for a multi-target task."""
    targets: tuple[str, ...]
    """Achievements that must all be unlocked in the same episode for the task to succeed."""
    episode_length: int = DEFAULT_EPISODE_LENGTH
    """Episode limit in primitive steps; the episode is truncated when it is reached."""

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
        targets = tuple(part.strip() for part in name.split("+"))
        for target in targets:
            _check_achievement(target)
        if len(set(targets)) != len(targets):
            raise ValueError(f"task {name!r} lists an achievement twice; give each target once")
        return cls(name="+".join(targets), targets=targets, episode_length=episode_length)


def _check_achievement(target: str) -> None:
    """Raise a ValueError naming close matches when ``target`` is not a Crafter achievement."""
    if target in ACHIEVEMENTS:
        return
    close = difflib.get_close_matches(target, ACHIEVEMENTS, n=3)
    hint = f" Did you mean {', '.join(close)}?" if close else ""
    raise ValueError(
        f"unknown Crafter task {target!r}.{hint} Valid names: {', '.join(ACHIEVEMENTS)} (join with '+')."
    )


class DenseReward(Protocol):
    """A shaped-reward function: ``(previous_state, action, state) -> float``.

    The states are plain dicts built by `task_state` (``inventory``, ``achievements``, ``player_pos``,
    ``facing``, ``sleeping``, ``daylight``, ``step``); ``action`` is the primitive action id. The value is
    added to the task's sparse reward at every step. LLM-written reward code is called through this hook;
    if it raises or returns something that is not a finite number, `TaskEnv` counts the error and uses 0.
    """

    def __call__(self, prev_state: dict[str, Any], action: int, state: dict[str, Any]) -> float:
        """Return the shaped reward for the transition ``prev_state --action--> state``."""
        ...


def task_state(env: CrafterEnv, step: int) -> dict[str, Any]:
    """The plain-dict game state a `DenseReward` sees (fresh dicts, safe to mutate)."""
    game = env.crafter
    player = game._player
    return {
        "inventory": dict(player.inventory),
        "achievements": dict(player.achievements),
        "player_pos": (int(player.pos[0]), int(player.pos[1])),
        "facing": (int(player.facing[0]), int(player.facing[1])),
        "sleeping": bool(player.sleeping),
        "daylight": float(game._world.daylight),
        "step": step,
    }


class TaskEnv(gymnasium.Wrapper):
    """A `CrafterEnv` playing one `TaskSpec`.

    Reward is 1.0 at the step all targets are unlocked plus the dense hook's value (crafter's own reward is
    dropped). The episode terminates on success or death and is truncated at ``spec.episode_length``.
    ``info`` adds ``success``, ``task``, ``achievements`` (all 22 -> 1 if unlocked this episode else 0),
    ``dense_reward`` and ``dense_reward_errors`` (failed hook calls this episode; the last error message is
    in ``dense_reward_error`` on the step it happened).
    """

    def __init__(self, env: CrafterEnv, spec: TaskSpec, dense_reward: DenseReward | None = None) -> None:
        if not isinstance(env, CrafterEnv):
            raise TypeError(f"TaskEnv wraps a CrafterEnv, got {type(env).__name__}")
        if dense_reward is not None and not callable(dense_reward):
            raise TypeError(
                f"dense_reward must be callable (prev_state, action, state) -> float, got {dense_reward!r}"
            )
        super().__init__(env)
        self._task = spec
        self.dense_reward = dense_reward
        self._steps = 0
        self._errors = 0
        self._prev_state: dict[str, Any] | None = None

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
        self._errors = 0
        self._prev_state = task_state(self.env, 0) if self.dense_reward is not None else None
        return obs, self._task_info(info, success=False)

    def step(self, action: int) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """One primitive step; returns ``(obs, reward, terminated, truncated, info)`` for the task."""
        obs, _, dead, inner_truncated, info = self.env.step(action)
        self._steps += 1
        achievements = info["achievements"]
        success = all(achievements[target] > 0 for target in self._task.targets)
        reward = 1.0 if success else 0.0
        dense, error = 0.0, None
        if self.dense_reward is not None:
            dense, error = self._dense(action)
            reward += dense
        terminated = success or dead
        truncated = not terminated and (inner_truncated or self._steps >= self._task.episode_length)
        info = self._task_info(info, success)
        info["dense_reward"] = dense
        if error is not None:
            info["dense_reward_error"] = error
        return obs, reward, terminated, truncated, info

    def _dense(self, action: int) -> tuple[float, str | None]:
        """Call the hook; a raise or a non-finite / non-numeric value counts as an error and gives 0."""
        assert self._prev_state is not None and self.dense_reward is not None
        prev, self._prev_state = self._prev_state, task_state(self.env, self._steps)
        try:
            value = float(self.dense_reward(prev, int(action), task_state(self.env, self._steps)))
            if not math.isfinite(value):
                raise ValueError(f"dense reward returned {value}, expected a finite number")
        except Exception as exc:  # generated reward code may fail in any way; contain it
            self._errors += 1
            return 0.0, f"{type(exc).__name__}: {exc}"
        return value, None

    def _task_info(self, info: dict[str, Any], success: bool) -> dict[str, Any]:
        """Add the task's fields to the env's info."""
        info = dict(info)
        info["success"] = bool(success)
        info["task"] = self._task.name
        info["achievements"] = {name: int(info["achievements"][name] > 0) for name in ACHIEVEMENTS}
        info["dense_reward_errors"] = self._errors
        return info


def make_task_env(
    task: str | TaskSpec,
    obs_mode: str = "symbolic",
    seed: int | None = None,
    episode_length: int | None = None,
    dense_reward: DenseReward | None = None,
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
    return TaskEnv(CrafterEnv(obs_mode=obs_mode, length=None, seed=seed), spec, dense_reward)


__all__ = [
    "ACHIEVEMENTS",
    "DEFAULT_EPISODE_LENGTH",
    "DenseReward",
    "TaskEnv",
    "TaskSpec",
    "make_task_env",
    "task_state",
]
