"""The batch backend: a BatchTaskEnv row is, step for step, the per-env path's task env (same seeds and
actions): observation, num_frames, reward, episode ends, auto-reset, and the rollout/* episode statistics;
and how `rlgpt train` picks the backend."""

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import psutil
import pytest
import torch
from sample_factory.algo.utils.make_env import make_env_func_batched
from sample_factory.utils.attr_dict import AttrDict

from rlgpt.config import NO_SETUP, ConfigError, EnvSetup, builtin_config_path, load_config
from rlgpt.envs.crafter import ACTION_NAMES
from rlgpt.envs.tasks import ACHIEVEMENTS
from rlgpt.rl.learner import NUM_FRAMES_KEY
from rlgpt.rl.sf_batch import BatchTaskEnv
from rlgpt.rl.sf_config import build_sf_config
from rlgpt.rl.sf_env import make_gym_env, register_task_env
from rlgpt.rl.worker_config import worker_config
from rlgpt.rl.wrappers import episode_stats

STAT_KEYS = set(episode_stats(0.0, 0, 0, np.zeros(len(ACHIEVEMENTS))))


def sf_config(*overrides: str, setup: EnvSetup = NO_SETUP):
    cfg = load_config(None, list(overrides))
    return build_sf_config(cfg, Path("/nonexistent/run"), register_task_env(cfg.task), setup=setup)


def test_rows_are_the_per_env_task_envs_through_episode_ends():
    # collect_sapling succeeds often under random actions; length 40 truncates the rest.
    sf_cfg = sf_config("task=collect_sapling", "env.episode_length=40", "seed=7")
    assert worker_config(sf_cfg).batch_games == 4 and sf_cfg.batched_sampling
    # What Sample Factory builds for split 1 of worker 0 (its env index 1), wrappers included.
    env = make_env_func_batched(sf_cfg, AttrDict(worker_index=0, vector_index=1, env_id=1))
    assert env.num_agents == 4
    env.seed(1)
    obs, _ = env.reset()
    singles = [make_gym_env(sf_cfg.env, sf_cfg) for _ in range(4)]
    expected = [single.reset(seed=4 + j)[0] for j, single in enumerate(singles)]  # env index 1 * 4 + j
    rng = np.random.default_rng(0)
    ends = {"success": 0, "truncated": 0}
    for t in range(300):
        for j, o in enumerate(expected):
            for key in ("view", "vector", NUM_FRAMES_KEY):
                assert np.array_equal(obs[key][j].numpy(), o[key]), (t, j, key)
        actions = rng.integers(len(ACTION_NAMES), size=4)
        obs, reward, terminated, truncated, infos = env.step(torch.as_tensor(actions, dtype=torch.int32))
        for j, single in enumerate(singles):
            o, r, term, trunc, info = single.step(int(actions[j]))
            assert (reward[j].item(), bool(terminated[j]), bool(truncated[j])) == (r, term, trunc), (t, j)
            if term or trunc:
                stats = info["episode_extra_stats"]
                assert set(stats) == STAT_KEYS
                assert {k: stats[k] for k in STAT_KEYS} == {k: infos[k][j].item() for k in STAT_KEYS}, (t, j)
                ends["success" if info["success"] else "truncated"] += 1
                o, _ = single.reset()
            expected[j] = o
        if not (terminated | truncated).any():
            assert infos == {}
    assert ends["success"] >= 3 and ends["truncated"] >= 3, ends  # both kinds of episode end were checked


def test_observation_and_action_spaces_match_the_per_env_path():
    sf_cfg = sf_config()
    batch = make_env_func_batched(sf_cfg, AttrDict(worker_index=0, vector_index=0, env_id=0))
    single = make_gym_env(sf_cfg.env, sf_cfg)
    assert batch.observation_space == single.observation_space
    assert batch.action_space == single.action_space


def test_first_observation_has_no_primitive_steps_and_reset_without_seed_starts_new_episodes():
    sf_cfg = sf_config("env.num_envs_per_worker=4")
    env = make_env_func_batched(sf_cfg, AttrDict(worker_index=0, vector_index=0, env_id=0)).unwrapped
    assert isinstance(env, BatchTaskEnv)
    first, _ = env.reset(seed=0)
    assert not first[NUM_FRAMES_KEY].any()
    view = first["view"].copy()
    obs, *_ = env.step(np.zeros(2, np.int32))
    assert (obs[NUM_FRAMES_KEY] == 1).all()
    again, _ = env.reset()
    assert not np.array_equal(again["view"], view)  # episode 2 of each seed: another world


@pytest.mark.parametrize(
    "overrides, setup, backend",
    [
        ((), NO_SETUP, "batch"),
        (("env.backend=gym",), NO_SETUP, "gym"),
        (("env.obs_mode=pixels",), NO_SETUP, "gym"),
        (("macros.file=" + str(Path(__file__).parents[2] / "configs/macros/go_to_tree.yaml"),),
         NO_SETUP, "batch"),
        ((), EnvSetup(reward_code="def reward(game, prev):\n    return 0.0"), "batch"),
        ((), EnvSetup(observation=("view",)), "batch"),
        (("env.start_pool=/nonexistent/pool.pkl",), NO_SETUP, "gym"),
        (("options=[collect_wood]",), NO_SETUP, "gym"),
    ],
)
def test_auto_takes_the_batch_backend_wherever_it_applies(overrides, setup, backend):
    sf_cfg = sf_config(*overrides, setup=setup)
    assert (sf_cfg.batched_sampling, worker_config(sf_cfg).batch_games > 0) == ((backend == "batch"),) * 2
    # The gym backend keeps Sample Factory's per-env layout: 8 envs per worker in two splits.
    assert sf_cfg.num_envs_per_worker == (2 if backend == "batch" else 8)


def test_batch_backend_refuses_what_runs_per_env():
    with pytest.raises(ConfigError, match="env.backend=batch cannot run pixel observations"):
        sf_config("env.backend=batch", "env.obs_mode=pixels")
    with pytest.raises(ConfigError, match="cannot run saved start states"):
        sf_config("env.backend=batch", "env.start_pool=/nonexistent/pool.pkl")
    with pytest.raises(ConfigError, match="env.backend must be one of auto, batch, gym"):
        load_config(None, ["env.backend=envpool"])


def test_batch_backend_needs_splits_that_fill_training_batches():
    # 24 games per split against 16 trajectories per batch (1024 / 64): neither divides the other.
    with pytest.raises(ConfigError, match="24 games per split"):
        sf_config("env.num_envs_per_worker=48", "ppo.batch_size=1024", "ppo.rollout=64")
    sf_cfg = sf_config("env.num_envs_per_worker=64", "ppo.batch_size=1024", "ppo.rollout=64")
    assert worker_config(sf_cfg).batch_games == 32


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2+ usable CPU cores")
@pytest.mark.parametrize(
    "overrides, own_core",
    [
        ((), True),  # auto + batch backend
        (("env.backend=gym",), False),
        (("learner_core=shared",), False),
        (("learner_core=own", "env.backend=gym"), True),
    ],
)
def test_learner_core_resolution(overrides, own_core):
    core = worker_config(sf_config(*overrides)).learner_core
    assert core == (max(os.sched_getaffinity(0)) if own_core else -1)
    with pytest.raises(ConfigError, match="learner_core must be one of auto, own, shared"):
        load_config(None, ["learner_core=half"])


@pytest.mark.slow
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2+ usable CPU cores")
def test_a_batch_run_gives_the_learner_a_core_of_its_own(tmp_path):
    """While a batch-backend run trains, its learner runs on the last core and every other process of the
    run on the others; the trainer gets all its cores back afterwards (checked by its evaluation's)."""
    run_dir = tmp_path / "run"
    argv = [sys.executable, "-m", "rlgpt.cli", "train", "--config", str(builtin_config_path("smoke.yaml")),
            "--run-dir", str(run_dir), "--steps", "200000", "--set", "eval_episodes=0"]
    cores = os.sched_getaffinity(0)
    last = max(cores)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    with open(tmp_path / "stderr.txt", "wb") as err:
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
    try:
        deadline, learner = time.time() + 240, None
        while time.time() < deadline and learner is None:
            log = run_dir / "sf_log.txt"
            lines = log.read_text(errors="replace").splitlines() if log.exists() else []
            found = [line for line in lines if "LearnerWorker_p0 finished initialization" in line]
            learner = int(found[0].split("][", 1)[1].split("]", 1)[0]) if found else None
            assert proc.poll() is None, (tmp_path / "stderr.txt").read_text()[-2000:]
            time.sleep(0.5)
        assert learner is not None, "the learner never started"
        time.sleep(2)  # the learner pins itself in init(), before it logs that it finished
        children = psutil.Process(proc.pid).children(recursive=True)
        assert learner in {c.pid for c in children}
        assert os.sched_getaffinity(learner) == {last}
        # (what the learner itself starts, e.g. torch's shared-memory manager, shares its core)
        learners = {learner} | {c.pid for c in psutil.Process(learner).children(recursive=True)}
        for pid in [proc.pid] + [c.pid for c in children if c.pid not in learners]:
            try:
                assert os.sched_getaffinity(pid) == cores - {last}, pid
            except ProcessLookupError:  # a short-lived helper process that has exited
                pass
    finally:
        proc.terminate()
        proc.wait(timeout=120)


MACROS = """
- name: go_to_tree
  code: |
    def go_to_tree(game):
        for attempt in range(64):
            tree = game.nearest("tree")
            if tree is not None and game.is_facing(tree):
                return
            if tree is None:
                yield game.random_move()
            else:
                step = game.step_toward(tree)
                yield step if step is not None else game.random_move()
- name: wood
  goal: wood
  code: |
    def wood(game):
        while True:  # the goal ends the call at the first wood
            ok = yield from game.collect("wood")
- name: broken
  code: |
    def broken(game):
        yield "move_left"
        x = [1][game.steps + 5]
        yield "noop"
- name: idle
  code: |
    def idle(game):
        if game.health > 100:
            yield "noop"
- name: wander
  code: |
    def wander(game):
        while True:
            yield game.random_move()
"""
# The dense reward draws from its own generator too (game.random()), so the generators are compared.
REWARD = ('def reward(game, prev):\n'
          '    return 0.2 * (game.inventory["wood"] - prev.inventory["wood"]) + 0.01 * game.random()\n')


def test_rows_with_macros_reward_and_observation_parts_are_the_per_env_envs(tmp_path):
    """Each game of a batch env with macros, a dense reward and observation parts is, decision for decision,
    the per-env path's env with the same wrappers (same seeds and actions): observation, num_frames (k),
    reward (the discounted sum over a macro's steps, shaped and capped), episode ends, and every rollout/*
    and macro/* statistic at episode ends (the seconds of macro code aside)."""
    macro_file = tmp_path / "macros.yaml"
    macro_file.write_text(MACROS)
    sf_cfg = sf_config("task=collect_wood", "env.episode_length=60", "seed=7", f"macros.file={macro_file}",
                       "macros.max_steps=12", setup=EnvSetup(reward_code=REWARD, observation=("view",)))
    assert worker_config(sf_cfg).batch_games == 4 and sf_cfg.batched_sampling
    env = make_env_func_batched(sf_cfg, AttrDict(worker_index=0, vector_index=1, env_id=1))
    n_actions = len(ACTION_NAMES) + 5
    assert env.action_space.n == n_actions
    env.seed(1)
    obs, _ = env.reset()
    singles = [make_gym_env(sf_cfg.env, sf_cfg) for _ in range(4)]
    expected = [single.reset(seed=4 + j)[0] for j, single in enumerate(singles)]
    rng = np.random.default_rng(0)
    seen = {"ends": 0, "macro calls": 0, "k > 1": 0, "outcomes": set()}
    for t in range(150):
        for j, o in enumerate(expected):
            for key in ("view", "vector", NUM_FRAMES_KEY):
                assert np.array_equal(obs[key][j].numpy(), o[key]), (t, j, key)
        # Macros half of the time, so that rows run macro calls of different lengths side by side.
        macro = rng.random(4) < 0.5
        actions = np.where(macro, rng.integers(len(ACTION_NAMES), n_actions, size=4),
                           rng.integers(len(ACTION_NAMES), size=4))
        obs, reward, terminated, truncated, infos = env.step(torch.as_tensor(actions, dtype=torch.int32))
        for j, single in enumerate(singles):
            o, r, term, trunc, info = single.step(int(actions[j]))
            got = (reward[j].item(), bool(terminated[j]), bool(truncated[j]))
            assert got == (np.float32(r), term, trunc), (t, j, info.get("macro"))
            if "macro" in info:
                seen["macro calls"] += 1
                seen["k > 1"] += info["macro_steps"] > 1
                seen["outcomes"].add(info["macro"]["outcome"])
            if term or trunc:
                stats = {k: v for k, v in info["episode_extra_stats"].items()
                         if not k.endswith("code_seconds")}  # timings
                assert {k: infos[k][j].item() for k in stats} == pytest.approx(stats), (t, j)
                seen["ends"] += 1
                o, _ = single.reset()
            expected[j] = o
    assert not obs["vector"].any()  # the setup keeps the view only
    assert seen["ends"] >= 10 and seen["macro calls"] >= 200 and seen["k > 1"] >= 100, seen
    assert seen["outcomes"] >= {"success", "exception", "max_steps", "episode_end"}, seen
