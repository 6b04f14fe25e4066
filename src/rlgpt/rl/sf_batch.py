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
- macros (`rlgpt.macro.batch.BatchMacros`): the action space is the primitives followed by the macros; a
  game whose action is a macro runs it as an option, step by step through the sandbox, the batch stepping
  only the games still running one (`CrafterBatch.step_rows`), and gets one SMDP transition (discounted
  reward sum, ``k`` primitive steps) when every macro of the call has ended;
- the LLM's dense reward (`rlgpt.macro.reward.DenseReward`), after every primitive step of every game,
  within its episode cap; the observation parts the setup keeps (the others zeroed, as `ObservationParts`);
- the ``rollout/*`` and ``macro/*`` episode statistics (`rlgpt.rl.wrappers.episode_stats`,
  `BatchMacros.episode_extra`), reported for the games whose episode ended as arrays Sample Factory's
  batched runner files under the same keys;
- the ``num_frames`` observation key `rlgpt.rl.learner.SMDPLearner` reads: ``k`` of the transition that
  produced the observation (0 in the first observation, as `PrimitiveStepCount` gives);
- the world seeds (`rlgpt.rl.wrappers.game_seed`): game j of split s of worker w is the same game, same
  world, as env ``w * games_per_worker + s * N + j`` of the per-env path; and the macro API's and the dense
  reward's own seeded generators, one per game as one per env there, so that a game here is step for step
  that env (tests/rl/test_sf_batch.py).

Finished games are reset inside `step` (Sample Factory's multi-agent contract) and the returned observation
of such a row is the first one of its next episode. `rlgpt.rl.sf_env.make_batch_task_env` builds one for
Sample Factory.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from rlgpt.envs.batch import BatchStep, CrafterBatch
from rlgpt.envs.crafter import ACTION_NAMES, N_IDS, VECTOR_FIELDS
from rlgpt.envs.tasks import ACHIEVEMENTS, TaskSpec
from rlgpt.macro.api import GameAPI
from rlgpt.macro.batch import BATCH_STEP_SECONDS, BatchMacros, Marker
from rlgpt.macro.budget import DEFAULT_GRACE_SECONDS, DEFAULT_MAX_SHARE, MacroLimits
from rlgpt.macro.compiler import MacroSource
from rlgpt.macro.reward import DEFAULT_EPISODE_CAP, DenseReward, GameSnapshot
from rlgpt.macro.views import batch_views
from rlgpt.rl.learner import NUM_FRAMES_KEY
from rlgpt.rl.progress import ProgressReward
from rlgpt.rl.wrappers import episode_stats, game_seed


class BatchTaskEnv(gym.Env):
    """``batch.num_envs`` games of one `TaskSpec`, stepped together (Sample Factory multi-agent API), with
    the run's macros, dense reward and observation parts (module docstring). ``run_seed`` also seeds the
    macro API's and the reward's generators (as the per-env wrappers' seed); ``limits`` bounds every call of
    generated code (default `MacroLimits`)."""

    is_multiagent = True

    def __init__(
        self,
        batch: CrafterBatch,
        spec: TaskSpec,
        run_seed: int,
        macros: Sequence[MacroSource | str] = (),
        reward: str | None = None,
        observation: Sequence[str] | None = None,
        gamma: float = 0.99,
        max_macro_steps: int = 32,
        max_time_share: float = DEFAULT_MAX_SHARE,
        budget_grace_seconds: float = DEFAULT_GRACE_SECONDS,
        dense_reward_cap: float | None = DEFAULT_EPISODE_CAP,
        marker: Marker | None = None,
        limits: MacroLimits | None = None,
        progress_goals: Sequence[str] = (),
        progress_reward: float = 0.0,
    ) -> None:
        self.batch, self.spec, self.run_seed = batch, spec, int(run_seed)
        n = self.num_agents = int(batch.num_envs)
        view_h, view_w = batch.view_shape
        # Per game (agent), as the per-env path's wrappers present it: a checkpoint serves either backend.
        self.observation_space = gym.spaces.Dict(
            {
                "view": gym.spaces.Box(0, N_IDS - 1, shape=(view_h, view_w), dtype=np.uint8),
                "vector": gym.spaces.Box(0.0, np.inf, shape=(len(VECTOR_FIELDS),), dtype=np.float32),
                NUM_FRAMES_KEY: gym.spaces.Box(0.0, np.inf, shape=(1,), dtype=np.float32),
            }
        )
        pays_progress = bool(progress_goals) and progress_reward > 0
        views = batch_views(batch) if macros or reward or pays_progress else []
        budget = {"max_time_share": max_time_share, "budget_grace_seconds": budget_grace_seconds}
        self.macros = (
            BatchMacros(views, macros, len(ACTION_NAMES), gamma, max_macro_steps, limits, seed=self.run_seed,
                        marker=marker, **budget)
            if macros else None
        )
        self.action_space = gym.spaces.Discrete(self.macros.num_actions if self.macros else len(ACTION_NAMES))
        self.dense_reward = (DenseReward(reward, limits=limits, episode_cap=dense_reward_cap, **budget)
                             if reward else None)
        # The rewards' API per game (its own generator, as the per-env DenseRewardWrapper's; the progress
        # reward only reads the game, so the reward code's draws are the same with or without it).
        self._reward_games = [GameAPI(view, random.Random(self.run_seed)) for view in views] \
            if reward or pays_progress else []
        self._prev: list[GameSnapshot | None] = [None] * n  # per game, the state before its step
        # The plan's progress reward, one per game (`rlgpt.rl.progress`), read through each game's view.
        self._progress = [ProgressReward(progress_goals, progress_reward) for _ in range(n)] \
            if pays_progress else []
        self._dense_total = np.zeros(n)
        self.drop = tuple(k for k in ("view", "vector") if observation and k not in observation)
        """Observation keys zeroed (the parts the setup left out)."""
        self._targets = np.asarray(spec.target_indices)
        self._out = BatchStep(np.zeros((n, view_h, view_w), np.uint8), np.zeros((n, len(VECTOR_FIELDS)),
                              np.float32), np.zeros(n, np.float32), np.zeros(n, bool),
                              np.zeros((n, len(ACHIEVEMENTS)), np.int32))
        """Every game's last step (the batch writes the rows it steps)."""
        self._steps = np.zeros(n, np.int64)
        self._decisions = np.zeros(n, np.int64)
        self._success = np.zeros(n, bool)
        self._terminated = np.zeros(n, bool)
        self._truncated = np.zeros(n, bool)
        self._started = False

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """Start every game. Sample Factory passes its env index as ``seed``; game j gets the seed of env
        ``seed * num_agents + j`` of the run (`game_seed`). Without a seed, every game plays its next
        episode (a fresh batch starts at env index 0)."""
        every = np.ones(self.num_agents, bool)
        if seed is None and self._started:
            self.batch.reset_done(every, self._out)
        else:
            first = int(seed or 0) * self.num_agents
            obs = self.batch.reset([game_seed(self.run_seed, first + j) for j in range(self.num_agents)])
            self._out.view[:], self._out.vector[:] = obs.view, obs.vector
            self._started = True
        self._out.achievements[:] = 0
        self._new_episodes(every)
        return self._observation(np.zeros(self.num_agents)), {}

    def step(self, actions):
        """One decision of every game: a primitive step, or a whole macro call; finished games are reset and
        their rows hold the new episode's first observation. ``infos`` holds the ``rollout/*`` (and
        ``macro/*``) arrays when some episode ended (empty otherwise), read by Sample Factory for the
        finished rows only."""
        actions = np.asarray(actions).astype(np.int64)
        if actions.shape != (self.num_agents,):
            raise ValueError(f"actions must have shape ({self.num_agents},), got {actions.shape}")
        if actions.min() < 0 or actions.max() >= self.action_space.n:
            raise ValueError(f"actions must be in [0, {self.action_space.n}), got {actions.tolist()}")
        if self.macros is not None and actions.max() >= self.macros.n_primitive:
            k, reward = self.macros.run(actions, self._advance)
        else:
            k = np.ones(self.num_agents, np.int64)
            reward, _ = self._advance(np.arange(self.num_agents), actions)
        self._decisions += 1
        terminated, truncated = self._terminated.copy(), self._truncated.copy()
        done = terminated | truncated
        infos: dict[str, torch.Tensor] = {}
        if done.any():
            stats = episode_stats(self._success, self._steps, self._decisions, self._out.achievements > 0)
            if self.macros is not None:
                stats.update(self.macros.episode_extra(done))
            infos = {key: torch.from_numpy(np.asarray(value, np.float32)) for key, value in stats.items()}
            self.batch.reset_done(done, self._out)
            self._new_episodes(done)
        return self._observation(k), reward.astype(np.float32), terminated, truncated, infos

    def _advance(self, rows: np.ndarray, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """One primitive step of games ``rows``: the game, the task's rules, the dense reward. Returns their
        rewards and whether their episodes ended (`rlgpt.macro.batch.Advance`)."""
        out = self._out
        self.batch.step_rows(rows, actions, out)
        self._steps[rows] += 1
        success = (out.achievements[rows][:, self._targets] > 0).all(axis=1)
        at_limit = self._steps[rows] >= self.spec.episode_length
        reward, terminated, truncated = self.spec.outcome(success, out.dead[rows], at_limit, out.reward[rows])
        reward = np.asarray(reward, np.float64)
        if self.dense_reward is not None:
            for j, e in enumerate(rows.tolist()):
                game = self._reward_games[e]
                added, self._dense_total[e], _ = self.dense_reward.step(
                    game, self._prev[e], self._dense_total[e], BATCH_STEP_SECONDS)
                self._prev[e] = GameSnapshot.of(game)
                reward[j] += added
        for j, e in enumerate(rows.tolist() if self._progress else ()):
            reward[j] += self._progress[e].step(self._reward_games[e])
        self._success[rows], self._terminated[rows], self._truncated[rows] = success, terminated, truncated
        return reward, terminated | truncated

    def _new_episodes(self, rows: np.ndarray) -> None:
        """Games ``rows`` (bool) start an episode: counters, the dense reward's total and first state, macro
        statistics."""
        self._steps[rows] = 0
        self._decisions[rows] = 0
        if self.dense_reward is not None:
            self._dense_total[rows] = 0.0
            for e in np.flatnonzero(rows).tolist():
                self._prev[e] = GameSnapshot.of(self._reward_games[e])
        for e in np.flatnonzero(rows).tolist() if self._progress else ():
            self._progress[e].reset(self._reward_games[e])
        if self.macros is not None:
            self.macros.new_episodes(rows)

    def _observation(self, k: np.ndarray) -> dict[str, np.ndarray]:
        obs = {"view": self._out.view.copy(), "vector": self._out.vector.copy(),
               NUM_FRAMES_KEY: np.asarray(k, np.float32).reshape(-1, 1)}
        for key in self.drop:
            obs[key][:] = 0
        return obs

    def render(self):
        raise NotImplementedError("the batch backend has no renderer; evaluation plays the gym backend's env")
