"""The batch interface's reference implementation: every row is one CrafterEnv, resets included."""

from __future__ import annotations

import numpy as np
import pytest

from rlgpt.envs.batch import ReferenceBatch
from rlgpt.envs.crafter import ACTION_NAMES, CrafterEnv
from rlgpt.envs.tasks import ACHIEVEMENTS


def test_rows_are_crafter_envs_through_resets():
    seeds = [5, 11, 5]
    batch = ReferenceBatch(3)
    obs = batch.reset(seeds)
    envs = [CrafterEnv(seed=None, length=None) for _ in seeds]
    expected = [env.reset(seed=s)[0] for env, s in zip(envs, seeds, strict=True)]
    rng = np.random.default_rng(0)
    for t in range(120):
        for i, o in enumerate(expected):
            assert np.array_equal(obs.view[i], o["view"]), (t, i)
            assert np.array_equal(obs.vector[i], o["vector"]), (t, i)
        actions = rng.integers(len(ACTION_NAMES), size=3)
        out = batch.step(actions)
        done = np.zeros(3, bool)
        for i, env in enumerate(envs):
            o, reward, dead, _, info = env.step(int(actions[i]))
            assert out.reward[i] == np.float32(reward) and out.dead[i] == dead
            assert out.achievements[i].tolist() == [info["achievements"][a] for a in ACHIEVEMENTS]
            expected[i] = o
            done[i] = dead or (t + i) % 40 == 39  # the caller decides when an episode is over
        for i in np.flatnonzero(done):
            expected[i] = envs[i].reset()[0]
        obs = out
        batch.reset_done(done, obs)


def test_bad_calls():
    batch = ReferenceBatch(2)
    with pytest.raises(RuntimeError, match="before reset"):
        batch.step(np.zeros(2, int))
    with pytest.raises(ValueError, match="one seed per game"):
        batch.reset([1])
    batch.reset([1, 2])
    with pytest.raises(ValueError, match="shape"):
        batch.step(np.zeros(3, int))
    with pytest.raises(ValueError, match="num_envs"):
        ReferenceBatch(0)
