"""envpool's built-in environments as Sample Factory batched environments.

Used to benchmark the RL core (APPO + batched sampling) on envs whose stepping cost is close to zero, so the
measured FPS is the learner/sampler overhead rather than the simulator. One env object created by
:func:`make_envpool_env` is one envpool pool of ``--envpool_num_envs`` environments stepped together;
Sample Factory creates ``num_envs_per_worker`` such objects per rollout worker, so a worker simulates
``num_envs_per_worker * envpool_num_envs`` environments.

Usage::

    from rlgpt.envs.envpool import parse_envpool_cfg, register_envpool_envs
    register_envpool_envs(["CartPole-v1"])
    cfg = parse_envpool_cfg(["--env=envpool_CartPole-v1", "--batched_sampling=True", ...])
    sample_factory.train.run_rl(cfg)
"""

from __future__ import annotations

import argparse
import difflib
import functools
from collections.abc import Iterable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from rlgpt.errors import RlgptError

ENV_PREFIX = "envpool_"
"""Prefix of the Sample Factory env names this module registers (``envpool_CartPole-v1``)."""

DEFAULT_ENV_IDS: tuple[str, ...] = ("CartPole-v1", "Acrobot-v1", "MountainCar-v0", "Pong-v5", "Breakout-v5")
"""envpool ids registered by :func:`register_envpool_envs` when no names are given."""

DEFAULT_NUM_ENVS = 8
"""Environments per envpool object when the config has no ``envpool_num_envs``."""

DEFAULT_NUM_THREADS = 1
"""envpool worker threads per pool; each SF rollout worker is already its own process, so one thread per pool
avoids oversubscribing small machines (raise it on many-core boxes)."""


class UnknownEnvpoolEnv(RlgptError, ValueError):
    """Raised for an env id that the installed envpool does not provide."""


class EnvpoolConfigError(RlgptError, ValueError):
    """Raised when the Sample Factory config cannot drive an envpool env (e.g. non-batched sampling)."""


@functools.cache
def all_envpool_ids() -> tuple[str, ...]:
    """All env ids the installed envpool provides (``envpool.list_all_envs()``)."""
    import envpool

    return tuple(envpool.list_all_envs())


def check_envpool_id(env_id: str) -> str:
    """Return ``env_id`` if envpool provides it, else raise :class:`UnknownEnvpoolEnv` naming valid ids."""
    known = all_envpool_ids()
    if env_id in known:
        return env_id
    close = difflib.get_close_matches(env_id, known, n=5, cutoff=0.5)
    examples = close or [e for e in DEFAULT_ENV_IDS if e in known]
    raise UnknownEnvpoolEnv(
        f"envpool has no env {env_id!r}; valid ids include {', '.join(examples)} "
        f"({len(known)} in total, see envpool.list_all_envs())"
    )


def envpool_id_from_name(full_env_name: str) -> str:
    """Map a Sample Factory env name (``envpool_CartPole-v1``) to its envpool id (``CartPole-v1``)."""
    if not full_env_name.startswith(ENV_PREFIX):
        raise UnknownEnvpoolEnv(
            f"env name {full_env_name!r} is not an envpool env name; expected {ENV_PREFIX}<envpool id>, "
            f"e.g. {ENV_PREFIX}CartPole-v1"
        )
    return check_envpool_id(full_env_name[len(ENV_PREFIX) :])


class EnvpoolBatchedEnv(gym.Wrapper):
    """An envpool pool seen by Sample Factory as one multi-agent env with ``num_agents`` = pool size.

    Sample Factory expects the observation returned with ``terminated | truncated`` to already be the first
    observation of the next episode. envpool instead resets a finished env on the *next* ``step`` call and
    ignores that step's action, which would feed SF a fake transition; this wrapper resets them at once.
    """

    def __init__(self, pool: Any):
        """Wrap a synchronous envpool pool created with ``env_type="gymnasium"``."""
        super().__init__(pool)
        self.num_agents: int = int(pool.config["num_envs"])
        """Number of environments in the pool (SF treats each as one agent)."""
        self.is_multiagent: bool = True
        """Always true: SF must keep the batch dimension even for a pool of one env."""
        for name, space in (("observation", pool.observation_space), ("action", pool.action_space)):
            if not isinstance(space, gym.spaces.Space):
                raise TypeError(
                    f"envpool returned a {type(space).__module__}.{type(space).__name__} {name} space; "
                    "create the pool with env_type='gymnasium' so Sample Factory gets gymnasium spaces"
                )
        # gymnasium 0.29's VectorEnv.close() (also run from __del__) reads attributes that only
        # VectorEnv.__init__ sets, and envpool never calls it: without these every close() raises.
        for attr, default in (("closed", False), ("viewer", None)):
            if not hasattr(pool, attr):
                setattr(pool, attr, default)
        self._action_dtype = pool.action_space.dtype
        self._action_shape = (self.num_agents, *pool.action_space.shape)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict]:
        """Reset every env in the pool.

        ``seed`` is ignored: envpool fixes seeds when the pool is made (see :func:`make_envpool_env`), and SF
        passes one on the first reset.
        """
        del seed
        return self.env.reset(options=options)

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict]:
        """Step all envs with a batch of actions; envs that finished are reset in the same call."""
        actions = np.asarray(actions, dtype=self._action_dtype).reshape(self._action_shape)
        obs, reward, terminated, truncated, info = self.env.step(actions)
        finished = np.flatnonzero(terminated | truncated).astype(np.int32)
        if finished.size:
            reset_obs, _ = self.env.reset(finished)
            obs[finished] = reset_obs
        return obs, reward.astype(np.float32, copy=False), terminated, truncated, info


def _random_seed() -> int:
    return int(np.random.SeedSequence().entropy % (2**31 - 1))


def make_envpool_env(
    full_env_name: str, cfg: Any, env_config: Any, render_mode: str | None = None
) -> gym.Env:
    """Sample Factory env factory: one envpool pool of ``cfg.envpool_num_envs`` envs for ``full_env_name``.

    Args:
        full_env_name: ``envpool_<envpool id>``, e.g. ``envpool_CartPole-v1``.
        cfg: SF config; needs ``batched_sampling=True``. ``envpool_num_envs``, ``envpool_num_threads`` and
            ``seed`` are read when present (see :func:`add_envpool_env_args`).
        env_config: SF's per-env info (its ``env_id`` gives pools disjoint seeds); may be None.
        render_mode: forwarded to envpool when given.
    """
    import envpool

    env_id = envpool_id_from_name(full_env_name)
    if not getattr(cfg, "batched_sampling", False):
        raise EnvpoolConfigError(
            f"{full_env_name} is a vectorized envpool env and needs --batched_sampling=True"
        )
    num_envs = int(getattr(cfg, "envpool_num_envs", DEFAULT_NUM_ENVS))
    num_threads = int(getattr(cfg, "envpool_num_threads", DEFAULT_NUM_THREADS))
    if num_envs < 1 or num_threads < 1:
        raise EnvpoolConfigError(
            f"--envpool_num_envs ({num_envs}) and --envpool_num_threads ({num_threads}) must be >= 1"
        )
    base_seed = getattr(cfg, "seed", None)
    base_seed = _random_seed() if base_seed is None else int(base_seed)
    pool_index = int(env_config["env_id"]) if env_config is not None else 0
    kwargs: dict[str, Any] = {}
    if render_mode is not None:
        kwargs["render_mode"] = render_mode
    pool = envpool.make(
        env_id,
        env_type="gymnasium",
        num_envs=num_envs,
        # batch_size == num_envs makes the pool synchronous: every step returns all envs in env-id order.
        batch_size=num_envs,
        num_threads=num_threads,
        # envpool seeds env i of a pool with seed + i, so pools get non-overlapping seed ranges.
        seed=base_seed + pool_index * num_envs,
        **kwargs,
    )
    return EnvpoolBatchedEnv(pool)


def register_envpool_envs(names: Iterable[str] = DEFAULT_ENV_IDS) -> list[str]:
    """Register envpool ids with Sample Factory as ``envpool_<id>``; returns the registered SF env names.

    Every id is checked against the installed envpool first, so a typo fails here with the list of close ids
    instead of inside a rollout worker.
    """
    from sample_factory.envs.env_utils import register_env

    env_ids = [check_envpool_id(n[len(ENV_PREFIX) :] if n.startswith(ENV_PREFIX) else n) for n in names]
    registered = []
    for env_id in env_ids:
        register_env(ENV_PREFIX + env_id, make_envpool_env)
        registered.append(ENV_PREFIX + env_id)
    return registered


def add_envpool_env_args(env: str, parser: argparse.ArgumentParser, evaluation: bool = False) -> None:
    """Add the envpool knobs to a Sample Factory argument parser (signature of SF's ``add_extra_params``)."""
    del env, evaluation
    parser.add_argument(
        "--envpool_num_envs",
        type=int,
        default=DEFAULT_NUM_ENVS,
        help="Environments per envpool object; a worker runs num_envs_per_worker * envpool_num_envs envs.",
    )
    parser.add_argument(
        "--envpool_num_threads",
        type=int,
        default=DEFAULT_NUM_THREADS,
        help="envpool worker threads per envpool object.",
    )


def parse_envpool_cfg(argv: Sequence[str], evaluation: bool = False) -> argparse.Namespace:
    """Parse a full Sample Factory config for an envpool env (SF args + :func:`add_envpool_env_args`)."""
    from sample_factory.cfg.arguments import parse_full_cfg, parse_sf_args

    argv = list(argv)
    parser, partial_cfg = parse_sf_args(argv=argv, evaluation=evaluation)
    add_envpool_env_args(partial_cfg.env, parser, evaluation=evaluation)
    return parse_full_cfg(parser, argv)
