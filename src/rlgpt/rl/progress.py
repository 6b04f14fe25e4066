"""The plan's progress reward: a fixed amount the first time in an episode each of the slow agent's
sub-action goals is reached.

The slow agent's decomposition names a goal per sub-action (``wood``, ``place_table``, ``stone``, ...). On
the task's sparse reward alone, a training over the kept macros learns nothing until it happens to play
the whole chain, and the model's own dense reward is often rejected by its checks or pays the wrong thing
(one measured make_stone_pickaxe reward paid -1 per stone mined). Paying each goal once per episode (as
Crafter's own reward pays each achievement once) gives the policy a signal for every link without any
reward code: the plan is the model's, the rule is fixed. Measured against the task's reward alone on the
same macros: docs/results/own-code-longer-tasks.md.

Why once per episode and never taken back: a goal paid again and again (each wood collected) can be
farmed, and a goal whose item is spent later (wood into a table) must not cost what it paid. The sum is
bounded by ``value * len(goals)``; the task's own goals are left to the task's reward.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from typing import Any

import gymnasium

from rlgpt.envs.tasks import TaskSpec
from rlgpt.macro.api import GameAPI
from rlgpt.macro.goal import Goal
from rlgpt.macro.runtime import find_crafter

PROGRESS_REWARD_INFO = "progress_reward"
"""``info`` key of what the progress reward added on a step (`ProgressRewardWrapper`)."""


def progress_goals(goals: Iterable[str], targets: Iterable[str] = ()) -> tuple[str, ...]:
    """The goals a progress reward pays: each valid goal of `goals` once, in order, leaving out the task's
    own `targets` (achievements the task's reward already pays) and text that names no Crafter item or
    achievement (a garbled goal pays nothing rather than failing a training)."""
    skip = set(targets)
    kept: list[str] = []
    for goal in goals:
        if not isinstance(goal, str) or goal in skip or goal in kept:
            continue
        try:
            Goal.parse(goal)
        except ValueError:
            continue
        kept.append(goal)
    return tuple(kept)


def task_progress_goals(task: str, goals: Iterable[str]) -> tuple[str, ...]:
    """`progress_goals` of `goals` for `task`: its own targets left out; none for the Crafter benchmark,
    whose own reward already pays each achievement once per episode. The loop's plan
    (`rlgpt.run.loop.plan_goals`) and ``--mode ppo``'s recipe chain (`rlgpt.run.baselines.chain_goals`)
    both go through here."""
    spec = TaskSpec.from_name(task)
    if spec.benchmark:
        return ()
    return progress_goals(goals, spec.targets)


class ProgressReward:
    """`value` for each of `goals` the first time its counter (inventory item or achievement) goes up in an
    episode. One instance per game: `reset` at each episode's start, `step` after each primitive step."""

    def __init__(self, goals: Sequence[str], value: float) -> None:
        if not value > 0:
            raise ValueError(f"progress reward value must be > 0, got {value!r}")
        self.goals = tuple(Goal.parse(g) for g in dict.fromkeys(goals))
        self.value = float(value)
        self._before: tuple[int, ...] = ()
        self._paid = [False] * len(self.goals)

    def counts(self, game: GameAPI | Any) -> tuple[int, ...]:
        """The goals' counters in `game` (anything with ``inventory`` and ``achievements`` mappings)."""
        inventory, achievements = game.inventory, game.achievements
        return tuple((inventory if g.kind == "item" else achievements).get(g.name, 0) for g in self.goals)

    @property
    def reached(self) -> int:
        """Goals paid in the current episode."""
        return sum(self._paid)

    def reset(self, game: GameAPI | Any) -> None:
        """A new episode starts in `game`'s state: nothing paid yet."""
        self._before = self.counts(game)
        self._paid = [False] * len(self.goals)

    def step(self, game: GameAPI | Any) -> float:
        """What the step that led to `game`'s state pays: `value` per goal reached for the first time."""
        now = self.counts(game)
        added = 0.0
        for i, (before, after) in enumerate(zip(self._before, now, strict=True)):
            if after > before and not self._paid[i]:
                self._paid[i] = True
                added += self.value
        self._before = now
        return added


class ProgressRewardWrapper(gymnasium.Wrapper):
    """Adds the `ProgressReward` to every primitive step's reward (below any macro wrapper, as the dense
    reward: a macro call's steps are paid too, discounted by the macro wrapper). ``info["progress_reward"]``
    holds what the step added."""

    def __init__(self, env: gymnasium.Env, goals: Sequence[str], value: float) -> None:
        super().__init__(env)
        self.progress = ProgressReward(goals, value)
        self.game = GameAPI(find_crafter(env), random.Random(0))  # read only: its generator is never used

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        """Reset the env; nothing paid yet."""
        out = self.env.reset(**kwargs)
        self.progress.reset(self.game)
        return out

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """One primitive step plus what it reached."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        added = self.progress.step(self.game)
        info = dict(info)
        info[PROGRESS_REWARD_INFO] = added
        return obs, float(reward) + added, terminated, truncated, info
