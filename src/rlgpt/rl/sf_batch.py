"""A batch of Crafter games as one Sample Factory env: the ``batch`` env backend.

Sample Factory's batched sampling (``--batched_sampling``, the path it uses for envpool and Isaac Gym) takes
an env that presents ``num_agents = N`` and steps all N with one call, returning a dict of arrays. Each
rollout worker split then holds one `BatchTaskEnv` over a `rlgpt.envs.batch.CrafterBatch` of N games, and
the per-step work that scales with N (stepping, the task's rules, observation packing) is done on arrays
instead of once per game in Python wrappers and per-env messages.

What training needs from the per-env path (`rlgpt.rl.wrappers`) is kept, from the same definitions:

- the task (`rlgpt.envs.tasks.TaskSpec.outcome`): reward 1 and termination when every target is unlocked,
  termination on death, truncation at the episode length; for the Crafter benchmark crafter's own reward
  (the batch's, equal to `CrafterEnv`'s) and termination on death only;
- the ``rollout/*`` episode statistics (`rlgpt.rl.wrappers.episode_stats`), reported for the games whose
  episode ended as arrays Sample Factory's batched runner files under the same keys;
- the ``num_frames`` observation key `rlgpt.rl.learner.SMDPLearner` reads (k = 1 after every step: the
  batch path runs no macros; 0 in the first observation, as `PrimitiveStepCount` gives);
- the world seeds (`rlgpt.rl.wrappers.game_seed`): game j of split s of worker w is the same game, same
  world, as env ``w * games_per_worker + s * N + j`` of the per-env path.

Finished games are reset inside `step` (Sample Factory's multi-agent contract) and the returned observation
of such a row is the first one of its next episode. `rlgpt.rl.sf_env.make_batch_task_env` builds one for
Sample Factory.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch

from rlgpt.envs.batch import CrafterBatch
from rlgpt.envs.crafter import ACTION_NAMES, N_IDS, VECTOR_FIELDS
from rlgpt.envs.tasks import TaskSpec
from rlgpt.rl.learner import NUM_FRAMES_KEY
from rlgpt.rl.wrappers import episode_stats, game_seed


class BatchTaskEnv(gym.Env):
    """``batch.num_envs`` games of one `TaskSpec`, stepped together (Sample Factory multi-agent API)."""

    is_multiagent = True

    def __init__(self, batch: CrafterBatch, spec: TaskSpec, run_seed: int) -> None:
        self.batch, self.spec, self.run_seed = batch, spec, int(run_seed)
        self.num_agents = int(batch.num_envs)
        view_h, view_w = batch.view_shape
        # Per game (agent), as the per-env path's wrappers present it: a checkpoint serves either backend.
        self.observation_space = gym.spaces.Dict(
            {
                "view": gym.spaces.Box(0, N_IDS - 1, shape=(view_h, view_w), dtype=np.uint8),
                "vector": gym.spaces.Box(0.0, np.inf, shape=(len(VECTOR_FIELDS),), dtype=np.float32),
                NUM_FRAMES_KEY: gym.spaces.Box(0.0, np.inf, shape=(1,), dtype=np.float32),
            }
        )
        self.action_space = gym.spaces.Discrete(len(ACTION_NAMES))
        self._targets = np.asarray(spec.target_indices)
        self._steps = np.zeros(self.num_agents, np.int64)
        self._zeros = np.zeros((self.num_agents, 1), np.float32)
        self._ones = np.ones((self.num_agents, 1), np.float32)
        self._obs = None

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """Start every game. Sample Factory passes its env index as ``seed``; game j gets the seed of env
        ``seed * num_agents + j`` of the run (`game_seed`). Without a seed, every game plays its next
        episode (a fresh batch starts at env index 0)."""
        if seed is None and self._obs is not None:
            self.batch.reset_done(np.ones(self.num_agents, bool), self._obs)
            obs = self._obs
        else:
            first = int(seed or 0) * self.num_agents
            obs = self.batch.reset([game_seed(self.run_seed, first + j) for j in range(self.num_agents)])
        self._obs = obs
        self._steps[:] = 0
        return {"view": obs.view, "vector": obs.vector, NUM_FRAMES_KEY: self._zeros}, {}

    def step(self, actions):
        """One primitive step of every game; finished games are reset and their rows hold the new episode's
        first observation. ``infos`` holds the ``rollout/*`` arrays when some episode ended (empty otherwise),
        read by Sample Factory for the finished rows only."""
        out = self.batch.step(np.asarray(actions))
        self._steps += 1
        success = (out.achievements[:, self._targets] > 0).all(axis=1)
        at_limit = self._steps >= self.spec.episode_length
        reward, terminated, truncated = self.spec.outcome(success, out.dead, at_limit, out.reward)
        done = terminated | truncated
        infos: dict[str, torch.Tensor] = {}
        if done.any():
            stats = episode_stats(success, self._steps, self._steps, out.achievements > 0)
            infos = {key: torch.from_numpy(np.asarray(value, np.float32)) for key, value in stats.items()}
            self.batch.reset_done(done, out)
            self._steps[done] = 0
        self._obs = out
        obs = {"view": out.view, "vector": out.vector, NUM_FRAMES_KEY: self._ones}
        return obs, reward.astype(np.float32), terminated, truncated, infos

    def render(self):
        raise NotImplementedError("the batch backend has no renderer; evaluation plays the gym backend's env")

