"""A policy is evaluated on the env it trained on: the same macros, seed and actions played through
training's env (the batch backend's `BatchTaskEnv` over the compiled engine, as Sample Factory builds it) and
through evaluation's (`rlgpt.rl.evaluate.evaluation_envs` from the saved run config, played by the
evaluation's episode runner `play_episodes`) give the same trajectory, rewards and macro statistics."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from sample_factory.algo.utils.make_env import make_env_func_batched
from sample_factory.cfg.arguments import cfg_dict
from sample_factory.utils.attr_dict import AttrDict

# The batch backend's own test's macros (one walks to a tree, one collects wood, one raises, one returns at
# once, one wanders until cut off) and dense reward (it draws from its own generator too).
from test_sf_batch import MACROS, REWARD

from rlgpt import layout
from rlgpt.config import EnvSetup, load_config
from rlgpt.envs.crafter import ACTION_NAMES
from rlgpt.envs.tasks import ACHIEVEMENTS
from rlgpt.rl.checkpoint import load_sf_config
from rlgpt.rl.evaluate import Episode, evaluation_envs, play_episode, summarize
from rlgpt.rl.learner import NUM_FRAMES_KEY
from rlgpt.rl.sf_batch import BatchTaskEnv
from rlgpt.rl.sf_config import build_sf_config
from rlgpt.rl.sf_env import register_task_env
from rlgpt.rl.worker_config import worker_config

GAMES = 8
ENV_INDEX = 1  # the Sample Factory env (a worker's split) the batch is; its games are seeds 8..15


class Scripted:
    """An `EpisodePolicy` playing a fixed action list per slot, recording the observations it was shown."""

    def __init__(self, actions: np.ndarray) -> None:
        self.actions = actions
        self.seen: list[list[dict]] = [[] for _ in actions]

    def reset(self, slot: int) -> None:
        self.seen[slot] = []

    def act(self, slots, observations):
        out = []
        for slot, obs in zip(slots, observations, strict=True):
            self.seen[slot].append({k: np.array(v) for k, v in obs.items()})
            out.append(int(self.actions[slot][len(self.seen[slot]) - 1]))
        return out


def play_batch(sf_cfg, actions: np.ndarray) -> tuple[list[Episode], list[list[dict]]]:
    """Each game's first episode on training's env, with its row of ``actions``, as `Episode` records."""
    env = make_env_func_batched(sf_cfg, AttrDict(worker_index=0, vector_index=ENV_INDEX, env_id=ENV_INDEX))
    assert isinstance(env.unwrapped, BatchTaskEnv) and env.num_agents == GAMES
    env.seed(ENV_INDEX)
    obs, _ = env.reset()
    seen: list[list[dict]] = [[] for _ in range(GAMES)]
    returns = [0.0] * GAMES
    done: dict[int, Episode] = {}
    while len(done) < GAMES:
        decision = []
        for j in range(GAMES):
            if j not in done:
                seen[j].append({k: obs[k][j].numpy().copy() for k in obs})
                decision.append(actions[j][len(seen[j]) - 1])
            else:
                decision.append(0)  # a later episode of a finished game: not compared
        obs, reward, terminated, truncated, infos = env.step(torch.as_tensor(decision, dtype=torch.int32))
        for j in range(GAMES):
            if j in done:
                continue
            returns[j] += float(reward[j])
            if terminated[j] or truncated[j]:
                stats = {k: float(v[j]) for k, v in infos.items() if k.startswith(("rollout/", "macro/"))}
                unlocked = [a for a in ACHIEVEMENTS if stats[f"rollout/achievement/{a}"]]
                done[j] = Episode(success=bool(stats["rollout/success"]),
                                  steps=int(stats["rollout/episode_steps"]), decisions=len(seen[j]),
                                  episode_return=returns[j], unlocked=unlocked,
                                  stats=stats, trace="")
    env.close()
    return [done[j] for j in range(GAMES)], seen


def test_training_and_evaluation_envs_play_the_same_episodes(tmp_path: Path) -> None:
    macro_file = tmp_path / "macros.yaml"
    macro_file.write_text(MACROS)
    cfg = load_config(None, ["task=collect_stone", "env.episode_length=150", "seed=7",
                             f"macros.file={macro_file}", "macros.max_steps=12",
                             f"env.num_envs_per_worker={2 * GAMES}",
                             f"ppo.batch_size={GAMES * 64}"])
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    sf_cfg = build_sf_config(cfg, run_dir, register_task_env(cfg.task),
                             setup=EnvSetup(reward_code=REWARD, observation=("view", "vector")))
    assert worker_config(sf_cfg).batch_games == GAMES
    # The run's config as the trainer saves it and the evaluation reads it back.
    (run_dir / layout.SF_CONFIG).write_text(json.dumps(cfg_dict(sf_cfg), default=str))
    saved = load_sf_config(run_dir)

    n_actions = len(ACTION_NAMES) + 5
    rng = np.random.default_rng(3)
    macro = rng.random((GAMES, 200)) < 0.5  # macros half of the time: calls of many lengths side by side
    actions = np.where(macro, rng.integers(len(ACTION_NAMES), n_actions, (GAMES, 200)),
                       rng.integers(len(ACTION_NAMES), size=(GAMES, 200)))

    trained, trained_seen = play_batch(sf_cfg, actions)
    envs = evaluation_envs(saved, GAMES)
    assert envs[0].action_space.n == n_actions
    seeds = [ENV_INDEX * GAMES + j for j in range(GAMES)]  # the batch's game seeds (`game_seed`)
    policies = [Scripted(actions[j : j + 1]) for j in range(GAMES)]
    evaluated = [play_episode(env, policy, seed)
                 for env, policy, seed in zip(envs, policies, seeds, strict=True)]

    calls = 0
    for j in range(GAMES):
        got, want = evaluated[j], trained[j]
        assert len(policies[j].seen[0]) == len(trained_seen[j]) == want.decisions, j
        for t, (a, b) in enumerate(zip(policies[j].seen[0], trained_seen[j], strict=True)):
            for key in ("view", "vector", NUM_FRAMES_KEY):
                assert np.array_equal(a[key], b[key]), (j, t, key)
        assert (got.success, got.steps, got.decisions, got.unlocked) == (
            want.success, want.steps, want.decisions, want.unlocked), j
        assert got.episode_return == pytest.approx(want.episode_return, abs=1e-5), j
        timings = [k for k in got.stats if k.endswith("code_seconds")]
        assert {k: v for k, v in got.stats.items() if k not in timings} == pytest.approx(
            {k: v for k, v in want.stats.items() if k not in timings}), j
        calls += sum(v for k, v in got.stats.items() if k.endswith("/calls"))
    trained_macros = summarize(cfg.task, trained)["macro_stats"]
    evaluated_macros = summarize(cfg.task, evaluated)["macro_stats"]
    for name in ("go_to_tree", "wood", "broken", "idle", "wander"):
        assert evaluated_macros[name]["calls"] > 0, evaluated_macros
        drop = {k for k in evaluated_macros[name] if "seconds" in k}
        assert {k: v for k, v in evaluated_macros[name].items() if k not in drop} == pytest.approx(
            {k: v for k, v in trained_macros[name].items() if k not in drop}), name
    assert calls >= 100, calls
    # Calls that succeeded, raised and hit the step bound were all compared.
    assert evaluated_macros["wood"]["successes"] and evaluated_macros["broken"]["fail_exception"]
    assert evaluated_macros["wood"]["goal_ends"] == evaluated_macros["wood"]["successes"]
    assert evaluated_macros["wander"]["fail_max_steps"], evaluated_macros


def test_a_macro_is_compiled_once_per_process(tmp_path: Path) -> None:
    """The trainer's check of the macro file, every env of a worker and the evaluation share one
    compilation."""
    from rlgpt.macro.batch import BatchMacros
    from rlgpt.macro.compiler import compile_macro
    from rlgpt.macro.files import load_macro_file
    from rlgpt.macro.runtime import MacroActionWrapper

    macro_file = tmp_path / "macros.yaml"
    macro_file.write_text(MACROS)
    cfg = load_config(None, [f"macros.file={macro_file}", "env.backend=gym"])
    sf_cfg = build_sf_config(cfg, tmp_path / "run", register_task_env(cfg.task))
    checked = [compile_macro(source) for source in load_macro_file(macro_file)]

    def macro_layer(env):
        while not isinstance(env, MacroActionWrapper):
            env = env.env
        return env

    envs = evaluation_envs(sf_cfg, 2)
    assert macro_layer(envs[0]).compiled == macro_layer(envs[1]).compiled
    assert all(a is b for a, b in zip(macro_layer(envs[0]).compiled, checked, strict=True))
    batch = BatchMacros((), list(worker_config(sf_cfg).macros), n_primitive=len(ACTION_NAMES))
    assert all(a is b for a, b in zip(batch.compiled, checked, strict=True))
