"""The Crafter benchmark task (``--task crafter``): crafter's own reward, death and episode length, step for
step what ``crafter.Env`` gives for the same seed and actions, on both env backends."""

from pathlib import Path

import numpy as np
import torch
from crafter_helpers import PinnedCrafter
from sample_factory.algo.utils.make_env import make_env_func_batched
from sample_factory.utils.attr_dict import AttrDict

from rlgpt.config import load_config
from rlgpt.envs.crafter import ACTION_NAMES
from rlgpt.envs.tasks import ACHIEVEMENTS, BENCHMARK_TASK, DEFAULT_EPISODE_LENGTH, TaskSpec, make_task_env
from rlgpt.rl.sf_config import build_sf_config
from rlgpt.rl.sf_env import make_gym_env, register_task_env
from rlgpt.rl.worker_config import worker_config


def test_benchmark_spec_targets_every_achievement_at_crafters_length():
    spec = TaskSpec.from_name(BENCHMARK_TASK)
    assert spec.benchmark and spec.targets == ACHIEVEMENTS and len(spec.targets) == 22
    assert spec.episode_length == DEFAULT_EPISODE_LENGTH == 10000
    assert not TaskSpec.from_name("collect_wood").benchmark


def test_reward_and_episode_ends_equal_crafter_env():
    """Returns, per-step rewards, deaths and the length cut equal crafter's own env over whole episodes
    (seeds chosen so that one episode ends in death and one at the length)."""
    ends = set()
    for seed, length in ((1, 10000), (2, 60)):
        ref = PinnedCrafter(seed=seed, length=length)
        ref.reset()
        env = make_task_env(BENCHMARK_TASK, seed=seed, episode_length=length)
        env.reset()
        actions = np.random.default_rng(seed).integers(len(ACTION_NAMES), size=length)
        ref_return = ours = 0.0
        for t, action in enumerate(actions.tolist()):
            _, ref_reward, ref_done, ref_info = ref.step(action)
            _, reward, terminated, truncated, info = env.step(action)
            assert reward == ref_reward, (seed, t)
            assert terminated == (ref_info["discount"] == 0.0) and (terminated or truncated) == ref_done
            ref_return, ours = ref_return + ref_reward, ours + reward
            if ref_done:
                ends.add("died" if terminated else "length")
                break
        assert ours == ref_return
        assert ref_return >= 1.0  # some achievement was rewarded
    assert ends == {"died", "length"}


def test_batch_backend_rows_equal_the_per_env_benchmark_env():
    cfg = load_config(None, ["task=crafter", "env.episode_length=50", "seed=3"])
    sf_cfg = build_sf_config(cfg, Path("/nonexistent/run"), register_task_env(cfg.task))
    assert worker_config(sf_cfg).batch_games == 4  # the compiled engine takes the benchmark task
    env = make_env_func_batched(sf_cfg, AttrDict(worker_index=0, vector_index=0, env_id=0))
    env.seed(0)
    env.reset()
    singles = [make_gym_env(sf_cfg.env, sf_cfg) for _ in range(4)]
    for j, single in enumerate(singles):
        single.reset(seed=j)
    rng = np.random.default_rng(0)
    rewarded = truncations = 0
    for t in range(120):
        actions = rng.integers(len(ACTION_NAMES), size=4)
        _, reward, terminated, truncated, _ = env.step(torch.as_tensor(actions, dtype=torch.int32))
        for j, single in enumerate(singles):
            _, r, term, trunc, _ = single.step(int(actions[j]))
            got = (reward[j].item(), bool(terminated[j]), bool(truncated[j]))
            assert got == (np.float32(r), term, trunc), (t, j)
            rewarded += r >= 1.0
            truncations += trunc
            if term or trunc:
                single.reset()
    assert rewarded > 0 and truncations >= 4


def test_the_loop_asks_for_as_many_achievements_as_possible_without_a_planner_chain():
    from rlgpt.agents.common import describe_task
    from rlgpt.config import load_run_config
    from rlgpt.run.runner import uses_planner

    text = describe_task(BENCHMARK_TASK)
    assert "as many different achievements as you can" in text
    assert all(name in text for name in ACHIEVEMENTS)
    assert not uses_planner(load_run_config(None, ["task=crafter", "steps=1000000"]))
    assert uses_planner(load_run_config(None, ["task=collect_diamond"]))
