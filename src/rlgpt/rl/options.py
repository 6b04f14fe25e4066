"""Trained policies as options: a subtask solved with RL becomes one action of the subtasks after it.

Chosen, the option runs the stored policy (`rlgpt.rl.stored_policy.StoredPolicy`: its network and its own
wrappers, macros included) on the same game until the count of its task's achievement rises, the episode
ends or `max_steps` primitive steps have passed; the call is one SMDP transition, like a macro call: its
rewards are summed discounted by ``gamma`` per primitive step and ``info["macro_steps"]`` is the number of
steps it took (`rlgpt.rl.wrappers.PrimitiveStepCount` turns that into k for the learner).

The stored policy steps the task env directly (through its own wrappers), so the wrappers of this training
between the option and the task env (the LLM's dense reward, this training's macros) do not see those
steps; the task's own reward does count. Statistics go to ``option/<task>/*`` at episode end.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym

from rlgpt.envs.tasks import TaskEnv, TaskSpec
from rlgpt.macro.runtime import find_crafter


class _Tap(gym.Wrapper):
    """The task env as an option's policy sees it: ``reset`` continues the current game (the option starts
    where the episode is) and every observation the task env returns is kept for the training's own
    wrappers."""

    def __init__(self, env: TaskEnv) -> None:
        super().__init__(env)
        self.last_obs: Any = None

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        return self.last_obs, {}

    def step(self, action: int) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.last_obs = obs
        return obs, reward, terminated, truncated, info


class _Shared:
    """One game's tap and its options' views (policy wrapper stacks over the tap), by policy directory.

    Every option wrapper on a game, at any nesting depth (an option's policy has options of its own), uses
    these: link k of a chain then has one view per earlier link instead of 2^(k-1). Sharing is safe because
    a view is never re-entered: while option j runs, only options trained before j (never j) can run
    inside it, and one game runs one option stack at a time."""

    def __init__(self, task_env: TaskEnv) -> None:
        self.tap = _Tap(task_env)
        self.views: dict[Any, gym.Env] = {}

    def view(self, policy: Any) -> gym.Env:
        """`policy`'s wrapper stack over the tap (built on first use; `policy`'s network built for it)."""
        key = getattr(policy, "policy_dir", None) or id(policy)
        if key not in self.views:
            self.views[key] = policy.wrap(self.tap)
        else:
            policy.build(self.views[key])
        return self.views[key]


def _shared(task_env: TaskEnv) -> _Shared:
    """The game's `_Shared`, kept on the task env itself (it lives and dies with the game)."""
    shared = task_env.__dict__.get("_rlgpt_option_views")
    if shared is None:
        shared = task_env.__dict__["_rlgpt_option_views"] = _Shared(task_env)
    return shared


def _task_env(env: gym.Env) -> TaskEnv:
    while not isinstance(env, TaskEnv):
        if not isinstance(env, gym.Wrapper):
            raise TypeError("options need a TaskEnv under the training's wrappers")
        env = env.env
    return env


def _observation_above(env: gym.Env, raw: Any) -> Any:
    """`raw` (a task-env observation) as the wrappers between `env` and the task env would return it."""
    chain = []
    while not isinstance(env, TaskEnv):
        chain.append(env)
        env = env.env  # type: ignore[attr-defined]
    for wrapper in reversed(chain):
        if isinstance(wrapper, gym.ObservationWrapper):
            raw = wrapper.observation(raw)
    return raw


class OptionActionWrapper(gym.Wrapper):
    """Action space = the env's actions followed by one option per stored policy (see the module docstring).
    """

    def __init__(self, env: gym.Env, policies: Sequence[Any], gamma: float = 0.99, max_steps: int = 300
                 ) -> None:
        """Args:
            env: the training's env stack so far (a `TaskEnv` under wrappers; Discrete actions).
            policies: stored policies (`StoredPolicy`), one option each, named by their task.
            gamma: discount per primitive step inside an option.
            max_steps: primitive step bound of one option call.
        """
        super().__init__(env)
        if not isinstance(env.action_space, gym.spaces.Discrete):
            raise TypeError(f"options need a Discrete action space, got {env.action_space}")
        self.n_inner = int(env.action_space.n)
        self.action_space = gym.spaces.Discrete(self.n_inner + len(policies))
        self.gamma, self.max_steps = gamma, max_steps
        shared = _shared(_task_env(env))
        self.tap = shared.tap
        self.policies = list(policies)
        self.views = [shared.view(p) for p in self.policies]
        self.names = [p.task for p in self.policies]
        self.goals = [TaskSpec.from_name(name).targets for name in self.names]
        self._episode: dict[str, float] = {}

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        self._episode = {}
        return self.env.reset(**kwargs)

    def step(self, action: int) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        index = int(action)
        if index < self.n_inner:
            obs, reward, terminated, truncated, info = self.env.step(index)
        else:
            obs, reward, terminated, truncated, info = self._run_option(index - self.n_inner)
        if terminated or truncated:
            info = dict(info)
            info["episode_extra_stats"] = {**info.get("episode_extra_stats", {}), **self._episode}
        return obs, reward, terminated, truncated, info

    def _run_option(self, i: int) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        policy, view, name = self.policies[i], self.views[i], self.names[i]
        player = find_crafter(self.env)._player
        before = [player.achievements[g] for g in self.goals[i]]
        # The game as it is now (the training's own steps since the last option went past the tap).
        self.tap.last_obs = self.env.unwrapped._observe()
        view_obs, _ = view.reset()
        total, discount, steps = 0.0, 1.0, 0
        terminated = truncated = reached = False
        info: dict[str, Any] = {}
        while steps < self.max_steps:
            view_obs, reward, terminated, truncated, info = view.step(policy.act(view_obs))
            k = int(info.get("macro_steps", 1))
            total += discount * float(reward)
            discount *= self.gamma ** k
            steps += k
            reached = any(player.achievements[g] > b for g, b in zip(self.goals[i], before, strict=True))
            if reached or terminated or truncated:
                break
        self._count(name, steps, reached)
        info = {k: v for k, v in info.items() if k != "episode_extra_stats"}
        info["macro_steps"] = max(steps, 1)
        info["option"] = {"name": name, "steps": steps, "reached": reached}
        return _observation_above(self.env, self.tap.last_obs), total, terminated, truncated, info

    def _count(self, name: str, steps: int, reached: bool) -> None:
        for key, value in (("calls", 1), ("reached", int(reached)), ("steps", steps)):
            full = f"option/{name}/{key}"
            self._episode[full] = self._episode.get(full, 0) + value
