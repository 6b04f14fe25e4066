"""The plan's progress reward (`rlgpt.rl.progress`): each goal paid once per episode, the same on both env
backends, and the loop's goals taken from the slow agent's decomposition."""

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from sample_factory.algo.utils.make_env import make_env_func_batched
from sample_factory.utils.attr_dict import AttrDict

from rlgpt.agents.replies import Decomposition, SubAction
from rlgpt.config import ConfigError, EnvSetup, load_config
from rlgpt.envs.crafter import ACTION_NAMES
from rlgpt.rl.progress import PROGRESS_REWARD_INFO, ProgressReward, progress_goals
from rlgpt.rl.sf_config import build_sf_config
from rlgpt.rl.sf_env import make_gym_env, register_task_env
from rlgpt.rl.worker_config import WorkerConfig, worker_config
from rlgpt.run.executor import TrainJob
from rlgpt.run.loop import plan_goals


def state(inventory=None, achievements=None):
    return SimpleNamespace(inventory=dict(inventory or {}), achievements=dict(achievements or {}))


def test_each_goal_pays_once_per_episode_and_never_takes_back():
    progress = ProgressReward(["wood", "place_table", "wood"], 0.25)  # a repeated goal is one goal
    assert len(progress.goals) == 2
    progress.reset(state())
    assert progress.step(state({"wood": 1})) == 0.25
    assert progress.step(state({"wood": 2})) == 0.0  # more of the same goal: paid already
    # The wood spent on the table goes down (never a penalty); the table pays.
    assert progress.step(state({"wood": 1}, {"place_table": 1})) == 0.25
    assert progress.step(state({"wood": 2}, {"place_table": 1})) == 0.0
    assert progress.reached == 2
    progress.reset(state({"wood": 5}))  # a new episode: what the start holds is not a gain
    assert progress.reached == 0
    assert progress.step(state({"wood": 5})) == 0.0
    assert progress.step(state({"wood": 6}, {"place_table": 1})) == 0.5  # both in one step


def test_goals_leave_out_the_task_and_what_names_nothing():
    assert progress_goals(["wood", "place_table", "wood", "make_wood_pickaxe", "a tree", "", 7],
                          targets=("make_wood_pickaxe",)) == ("wood", "place_table")
    with pytest.raises(ValueError, match="must be > 0"):
        ProgressReward(["wood"], 0.0)


def decomposition(*goals: str) -> Decomposition:
    return Decomposition(tuple(SubAction(name=f"s{i}", description="d", how="code", why="w", goal=g)
                               for i, g in enumerate(goals)))


def test_the_loop_pays_the_sub_action_goals_but_not_the_task_or_the_benchmark():
    plan = decomposition("wood", "place_table", "stone", "make_stone_pickaxe")
    assert plan_goals("make_stone_pickaxe", plan) == ("wood", "place_table", "stone")
    assert plan_goals("crafter", plan) == ()  # crafter's own reward pays each achievement once already


def test_goals_travel_with_the_job_and_the_worker_config(tmp_path):
    cfg = load_config(None, ["task=collect_stone", f"run_dir={tmp_path}"])
    job = TrainJob(cfg, progress_goals=("wood", "wood_pickaxe"))
    again = TrainJob.from_dict(job.to_dict())
    assert again.progress_goals == ("wood", "wood_pickaxe")
    assert again.env_setup().progress_goals == ("wood", "wood_pickaxe")
    assert TrainJob.from_dict({**job.to_dict(), "progress_goals": []}).progress_goals == ()
    sf_cfg = build_sf_config(cfg, tmp_path, register_task_env(cfg.task), setup=job.env_setup())
    decoded = WorkerConfig.from_json(worker_config(sf_cfg).to_json())
    assert decoded.setup.progress_goals == ("wood", "wood_pickaxe")
    assert decoded.train.progress_reward == cfg.progress_reward > 0


def test_a_negative_value_is_a_config_error():
    with pytest.raises(ConfigError, match="progress_reward"):
        load_config(None, ["progress_reward=-1"])


def test_batch_rows_pay_what_the_per_env_wrapper_pays():
    """The batch backend's rows and the per-env path's envs (same seeds, same actions) get the same reward,
    progress included, and the progress reward is paid (saplings under random actions)."""
    cfg = load_config(None, ["task=collect_wood", "env.episode_length=60", "seed=3", "progress_reward=0.3"])
    sf_cfg = build_sf_config(cfg, Path("/nonexistent/run"), register_task_env(cfg.task),
                             setup=EnvSetup(progress_goals=("sapling", "collect_sapling")))
    assert worker_config(sf_cfg).batch_games == 4
    env = make_env_func_batched(sf_cfg, AttrDict(worker_index=0, vector_index=1, env_id=1))
    env.seed(1)
    env.reset()
    singles = [make_gym_env(sf_cfg.env, sf_cfg) for _ in range(4)]
    for j, single in enumerate(singles):
        single.reset(seed=4 + j)
    rng = np.random.default_rng(0)
    paid = 0
    for t in range(400):
        actions = rng.integers(len(ACTION_NAMES), size=4)
        _, reward, terminated, truncated, _ = env.step(torch.as_tensor(actions, dtype=torch.int32))
        for j, single in enumerate(singles):
            _, r, term, trunc, info = single.step(int(actions[j]))
            assert reward[j].item() == pytest.approx(r), (t, j)
            assert info[PROGRESS_REWARD_INFO] in (0.0, 0.3, 0.6)
            paid += info[PROGRESS_REWARD_INFO] > 0
            if term or trunc:
                single.reset()
    assert paid >= 3


def test_every_candidate_job_of_an_iteration_gets_the_plan_goals(tmp_path):
    from rlgpt.agents.replies import FastReply
    from rlgpt.config import load_run_config
    from rlgpt.run.loop import Loop

    cfg = load_run_config(None, [f"run_dir={tmp_path}", "train_candidates=2"])
    reply = FastReply((), "", ("view", "vector"), 100)
    goals = plan_goals("make_stone_pickaxe", decomposition("wood", "stone", "make_stone_pickaxe"))
    jobs = Loop.candidate_jobs(SimpleNamespace(cfg=cfg), tmp_path / "iter_000", "make_stone_pickaxe", reply,
                               1000, None, (), (), 0, goals)
    assert [job.progress_goals for job in jobs] == [("wood", "stone")] * 2
    assert [job.env_setup().progress_goals for job in jobs] == [("wood", "stone")] * 2
