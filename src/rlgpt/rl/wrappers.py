"""The per-env (``gym`` backend) wrappers a training puts around one Crafter task env, and the world seeds
and episode statistics both backends share.

`wrap_task_env` applies them in their one order; `rlgpt.rl.sf_env` builds the task env and calls it for
Sample Factory, `rlgpt.run.skills` for a skill chained into another episode.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from sample_factory.utils.typing import Config

from rlgpt.envs.tasks import ACHIEVEMENTS
from rlgpt.macro.reward import DenseRewardWrapper
from rlgpt.macro.runtime import MacroActionWrapper
from rlgpt.rl.learner import NUM_FRAMES_KEY
from rlgpt.rl.macro_marker import protect_macro_env
from rlgpt.rl.options import OptionActionWrapper
from rlgpt.rl.progress import ProgressRewardWrapper
from rlgpt.rl.worker_config import WorkerConfig, worker_config
from rlgpt.rl.worker_memory import limit_worker_memory

# Keeps env seeds of different run seeds apart: SF seeds env i with i whatever the run seed is.
_SEED_STRIDE = 1_000_003


def game_seed(run_seed: int, game: int) -> int:
    """World seed of training game ``game`` (Sample Factory's env index, counting every game of every worker)
    in a run seeded ``run_seed``: the same games get the same worlds whichever backend steps them."""
    return run_seed * _SEED_STRIDE + game


def episode_stats(success: Any, steps: Any, decisions: Any, unlocked: Any) -> dict[str, Any]:
    """The ``rollout/*`` statistics of finished episodes: task success, primitive steps, policy decisions and
    whether each achievement was unlocked (``unlocked[..., i]`` for ``ACHIEVEMENTS[i]``). Scalars for one
    episode (`EpisodeStats`) or arrays with one entry per game (`rlgpt.rl.sf_batch`)."""
    stats = {"rollout/success": success, "rollout/episode_steps": steps,
             "rollout/episode_decisions": decisions}
    for i, name in enumerate(ACHIEVEMENTS):
        stats[f"rollout/achievement/{name}"] = unlocked[..., i]
    return stats


class EpisodeStats(gym.Wrapper):
    """Reports per-episode task success, every achievement and step counts under ``rollout/`` at episode
    end, and offsets env seeds by the run seed.

    ``rollout/episode_steps`` counts primitive steps and ``rollout/episode_decisions`` policy decisions;
    they differ when macros run (a macro is one decision of many primitive steps).
    """

    # Sample Factory probes these; answering here keeps gymnasium from warning about wrapper lookups.
    num_agents = 1
    is_multiagent = False

    def __init__(self, env: gym.Env, run_seed: int):
        super().__init__(env)
        self.run_seed = run_seed
        self.steps = 0
        self.decisions = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        if seed is not None:
            seed = game_seed(self.run_seed, seed)
        self.steps = 0
        self.decisions = 0
        return self.env.reset(seed=seed, options=options)

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.steps += int(info.get("macro_steps", 1))
        self.decisions += 1
        if terminated or truncated:
            unlocked = np.array([info["achievements"].get(name, 0) > 0 for name in ACHIEVEMENTS])
            stats = dict(info.get("episode_extra_stats", {}))
            ours = episode_stats(info["success"], self.steps, self.decisions, unlocked)
            stats.update((key, float(value)) for key, value in ours.items())
            info["episode_extra_stats"] = stats
        return obs, reward, terminated, truncated, info


class PrimitiveStepCount(gym.Wrapper):
    """Tells Sample Factory how many primitive (game) steps each policy decision took.

    The inner env reports ``k`` as ``info["macro_steps"]`` (`rlgpt.macro.runtime.MacroActionWrapper`; 1 when
    absent). This wrapper sets ``info["num_frames"] = k`` (Sample Factory's frameskip hook) and adds the
    observation key ``num_frames`` (float32, shape (1,)) holding ``k`` of the transition that produced the
    observation, which is how `rlgpt.rl.learner.SMDPLearner` learns it. Sample Factory resets an env right
    after its last step and stores the reset observation in that step's place, so a reset observation holds
    ``k`` of the step before it (0 for a first reset). A non-dict observation becomes ``{"obs": ...}``.
    """

    num_agents = 1
    is_multiagent = False

    def __init__(self, env: gym.Env):
        super().__init__(env)
        count = gym.spaces.Box(0.0, np.inf, shape=(1,), dtype=np.float32)
        inner = env.observation_space
        spaces = dict(inner.spaces) if isinstance(inner, gym.spaces.Dict) else {"obs": inner}
        if NUM_FRAMES_KEY in spaces:
            raise ValueError(f"the observation already has a {NUM_FRAMES_KEY!r} key")
        self.observation_space = gym.spaces.Dict({**spaces, NUM_FRAMES_KEY: count})
        self._last_k = 0

    def _with_count(self, obs: Any, k: int) -> dict[str, Any]:
        obs = dict(obs) if isinstance(obs, dict) else {"obs": obs}
        obs[NUM_FRAMES_KEY] = np.array([k], dtype=np.float32)
        return obs

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        obs, info = self.env.reset(seed=seed, options=options)
        k, self._last_k = self._last_k, 0
        return self._with_count(obs, k), info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        k = int(info.get("macro_steps", 1))
        info["num_frames"] = k
        self._last_k = k
        return self._with_count(obs, k), reward, terminated, truncated, info


class ObservationParts(gym.ObservationWrapper):
    """Zeroes the parts of a symbolic observation (``view``, ``vector``) the RL setup left out; the
    observation space keeps its shape so that the policy network is the same whatever the setup chose."""

    def __init__(self, env: gym.Env, keep: tuple[str, ...]):
        super().__init__(env)
        space = env.observation_space
        self.drop = tuple(k for k in getattr(space, "spaces", {}) if k not in keep)

    def observation(self, observation):
        if not self.drop:
            return observation
        observation = dict(observation)
        for key in self.drop:
            observation[key] = observation[key] * 0
        return observation


class ChannelsFirst(gym.ObservationWrapper):
    """HWC image observations (Crafter's pixels) as CHW, the layout Sample Factory's conv encoders expect."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        space = env.observation_space
        h, w, c = space.shape
        self.observation_space = gym.spaces.Box(space.low.transpose(2, 0, 1), space.high.transpose(2, 0, 1),
                                                shape=(c, h, w), dtype=space.dtype)

    def observation(self, observation):
        return np.ascontiguousarray(observation.transpose(2, 0, 1))


def is_hwc_image(space: gym.Space) -> bool:
    """A 3-D Box whose last axis holds 1-4 channels (an image in HWC layout)."""
    return isinstance(space, gym.spaces.Box) and len(space.shape) == 3 and space.shape[-1] <= 4


def time_budget(cfg: Any) -> dict[str, float]:
    """The time-budget arguments of the macro and reward wrappers (`rlgpt.macro.budget`)."""
    macros = worker_config(cfg).train.macros
    return {"max_time_share": macros.max_time_share, "budget_grace_seconds": macros.budget_grace_seconds}


def wrap_task_env(env: gym.Env, cfg: Config | WorkerConfig, dense_reward: bool = True,
                  options: Sequence[Any] = ()) -> gym.Env:
    """The wrappers a run's config puts around its task env (reward, observation, macros, `options`:
    stored policies as actions, statistics); also used to run a trained policy on another env
    (`rlgpt.rl.stored_policy`: a skill chained into another episode, or an option)."""
    wc = worker_config(cfg)
    if is_hwc_image(env.observation_space):
        env = ChannelsFirst(env)
    if wc.setup.reward_code and dense_reward:
        # The LLM's dense reward, shipped as source like macros; below the macro wrapper so that steps inside
        # a macro are shaped too. A failing reward gives 0 for that step and a diagnostic, never a crash.
        env = DenseRewardWrapper(env, wc.setup.reward_code, seed=wc.seed,
                                 episode_cap=wc.train.dense_reward_cap or None, **time_budget(wc))
        limit_worker_memory(wc)  # reward code runs here too: the same memory backstop as for macros
    if wc.setup.progress_goals and wc.train.progress_reward and dense_reward:
        env = ProgressRewardWrapper(env, wc.setup.progress_goals, wc.train.progress_reward)
    if wc.setup.observation:
        env = ObservationParts(env, wc.setup.observation)
    if wc.macros:
        # Source travels in the config; compiling here, inside the worker, avoids pickling code objects.
        env = MacroActionWrapper(env, list(wc.macros), gamma=wc.gamma,
                                 max_macro_steps=wc.train.macros.max_steps, seed=wc.seed, **time_budget(wc))
        env = protect_macro_env(env, cfg)
    if options:
        env = OptionActionWrapper(env, options, gamma=wc.gamma, max_steps=wc.train.macros.max_steps)
    return PrimitiveStepCount(EpisodeStats(env, run_seed=wc.seed))
