"""envpool backend: batched stepping semantics and a real short Sample Factory run."""

from __future__ import annotations

from types import SimpleNamespace

import gymnasium as gym
import numpy as np
import pytest

pytest.importorskip("envpool")

from rlgpt.envs.envpool import (  # noqa: E402
    EnvpoolBatchedEnv,
    EnvpoolConfigError,
    UnknownEnvpoolEnv,
    check_envpool_id,
    make_envpool_env,
    parse_envpool_cfg,
    register_envpool_envs,
)


def _cfg(num_envs: int = 4, seed: int | None = 7, batched: bool = True) -> SimpleNamespace:
    return SimpleNamespace(
        batched_sampling=batched, envpool_num_envs=num_envs, envpool_num_threads=1, seed=seed
    )


def test_cartpole_batch_shapes_and_dtypes() -> None:
    env = make_envpool_env("envpool_CartPole-v1", _cfg(num_envs=5), {"env_id": 0})
    assert isinstance(env, EnvpoolBatchedEnv)
    assert env.num_agents == 5 and env.is_multiagent
    assert isinstance(env.observation_space, gym.spaces.Box) and env.observation_space.shape == (4,)
    assert isinstance(env.action_space, gym.spaces.Discrete) and env.action_space.n == 2

    obs, info = env.reset(seed=123)
    assert obs.shape == (5, 4) and obs.dtype == np.float32
    assert np.all(info["elapsed_step"] == 0)

    # SF hands discrete actions as int32 of shape (num_agents,); a torch-style (n, 1) batch must work too.
    obs, rew, term, trunc, info = env.step(np.ones((5, 1), dtype=np.int64))
    assert obs.shape == (5, 4) and obs.dtype == np.float32
    assert rew.shape == (5,) and rew.dtype == np.float32 and np.all(rew == 1.0)
    assert term.dtype == np.bool_ and trunc.dtype == np.bool_ and term.shape == trunc.shape == (5,)
    assert np.all(info["elapsed_step"] == 1)
    env.close()


def test_finished_envs_are_reset_in_the_same_step() -> None:
    env = make_envpool_env("envpool_CartPole-v1", _cfg(num_envs=4), None)
    env.reset()
    # Always pushing right topples the pole within ~10 steps for every env.
    finished_seen = np.zeros(4, dtype=bool)
    for _ in range(60):
        obs, _, term, trunc, info = env.step(np.ones(4, dtype=np.int32))
        done = term | trunc
        if done.any():
            # The returned observation is already the next episode's first one: near-upright pole.
            assert np.all(np.abs(obs[done]) < 0.06), obs[done]
            prev_elapsed = info["elapsed_step"].copy()
            _, _, _, _, info = env.step(np.ones(4, dtype=np.int32))
            # The next step is a real first step (envpool would otherwise spend it resetting).
            assert np.all(info["elapsed_step"][done] == 1)
            assert np.all(info["elapsed_step"][~done] == prev_elapsed[~done] + 1)
            finished_seen |= done
        if finished_seen.all():
            break
    assert finished_seen.all()


def test_seeds_differ_between_pools_and_repeat_per_pool() -> None:
    first = [
        make_envpool_env("envpool_CartPole-v1", _cfg(num_envs=2), {"env_id": i}).reset()[0] for i in (0, 1)
    ]
    again = make_envpool_env("envpool_CartPole-v1", _cfg(num_envs=2), {"env_id": 0}).reset()[0]
    np.testing.assert_array_equal(first[0], again)
    assert not np.allclose(first[0], first[1])


def test_unknown_env_id_lists_valid_ids() -> None:
    with pytest.raises(UnknownEnvpoolEnv, match=r"CartPole-v1"):
        check_envpool_id("CartPol-v1")
    with pytest.raises(UnknownEnvpoolEnv, match=r"valid ids include"):
        make_envpool_env("envpool_NoSuchGame-v9", _cfg(), None)
    with pytest.raises(UnknownEnvpoolEnv, match=r"envpool_<envpool id>"):
        make_envpool_env("CartPole-v1", _cfg(), None)
    with pytest.raises(UnknownEnvpoolEnv):
        register_envpool_envs(["CartPole-v1", "Nope-v0"])


def test_non_batched_sampling_is_rejected() -> None:
    with pytest.raises(EnvpoolConfigError, match="batched_sampling=True"):
        make_envpool_env("envpool_CartPole-v1", _cfg(batched=False), None)


def test_atari_pool_gives_uint8_frames() -> None:
    env = make_envpool_env("envpool_Pong-v5", _cfg(num_envs=2), None)
    obs, _ = env.reset()
    assert obs.shape == (2, 4, 84, 84) and obs.dtype == np.uint8
    assert isinstance(env.action_space, gym.spaces.Discrete)
    env.close()


@pytest.mark.slow
def test_sample_factory_batched_training_run(tmp_path) -> None:
    from sample_factory.train import run_rl

    register_envpool_envs(["CartPole-v1"])
    cfg = parse_envpool_cfg(
        [
            "--env=envpool_CartPole-v1",
            "--experiment=envpool_cartpole",
            f"--train_dir={tmp_path}",
            "--batched_sampling=True",
            "--num_workers=1",
            "--num_envs_per_worker=2",
            "--worker_num_splits=2",
            "--envpool_num_envs=8",
            "--envpool_num_threads=1",
            "--rollout=16",
            "--batch_size=256",
            "--num_batches_per_epoch=1",
            "--train_for_env_steps=3000",
            "--device=cpu",
            "--seed=3",
            "--decorrelate_envs_on_one_worker=False",
            "--save_every_sec=3600",
            "--with_wandb=False",
        ]
    )
    assert cfg.envpool_num_envs == 8
    status = run_rl(cfg)  # a hang is caught by pytest-timeout; its speed is not what this checks
    assert status == 0
    checkpoints = list((tmp_path / "envpool_cartpole" / "checkpoint_p0").glob("checkpoint_*.pth"))
    assert checkpoints, f"no checkpoint written under {tmp_path}"
