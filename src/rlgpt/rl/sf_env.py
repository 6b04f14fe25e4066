"""Crafter tasks as Sample Factory environments, registered by name (``crafter_<task>``).

Sample Factory pickles its global context (env registry, model factory) into every process it spawns.
The env factory registered here is an `SFEnvFactory`, whose unpickling in such a process runs
`rlgpt.rl.worker_boot.boot_worker` first: importing this module does nothing else than define it.

Each Sample Factory env is one task env with the per-env wrappers (`rlgpt.rl.wrappers`, the ``gym``
backend) or a batch of games (`rlgpt.rl.sf_batch`, the ``batch`` backend), as the run's
``rlgpt_batch_games`` says (`rlgpt.rl.sf_config`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from sample_factory.envs.env_utils import register_env
from sample_factory.utils.typing import Config

from rlgpt.envs.tasks import TaskSpec, make_task_env
from rlgpt.macro.files import sources_from_json
from rlgpt.macro.prefix import PrefixStart, load_pool
from rlgpt.macro.reward import DEFAULT_EPISODE_CAP
from rlgpt.rl.sf_batch import BatchTaskEnv
from rlgpt.rl.sf_config import env_name_for_task, task_from_env_name
from rlgpt.rl.stored_policy import option_policies
from rlgpt.rl.worker_boot import boot_worker, quiet_known_warnings
from rlgpt.rl.workers import worker_marker
from rlgpt.rl.wrappers import time_budget, wrap_task_env


def make_crafter_env(full_env_name: str, cfg: Config, env_config: Any = None, render_mode: str | None = None):
    """One task env of ``crafter_<task>`` with the wrappers the run's config asks for (``gym`` backend)."""
    task = TaskSpec.from_name(task_from_env_name(full_env_name))
    env = make_task_env(task, obs_mode=cfg.rlgpt_obs_mode, episode_length=cfg.rlgpt_episode_length)
    pool = getattr(cfg, "rlgpt_start_pool", "")  # getattr: runs trained before the flag existed lack it
    if pool:
        env = PrefixStart(env, pool=load_pool(pool))
    return wrap_task_env(env, cfg, options=option_policies(cfg))


def make_batch_task_env(
    full_env_name: str, cfg: Config, env_config: Any = None, num_games: int | None = None
) -> BatchTaskEnv:
    """``num_games`` games of ``crafter_<task>`` as one env (the ``batch`` backend; default
    ``cfg.rlgpt_batch_games``, a worker split's games)."""
    task = TaskSpec.from_name(task_from_env_name(full_env_name))
    if cfg.rlgpt_episode_length:  # None: the task's default, as `make_task_env` has it
        task = dataclasses.replace(task, episode_length=int(cfg.rlgpt_episode_length))
    games = int(num_games or cfg.rlgpt_batch_games)
    # The one place that picks the batch implementation: the compiled engine, equal to
    # `rlgpt.envs.batch.ReferenceBatch` step for step (tests/envs). Deferred: its kernels load for seconds.
    from rlgpt.envs.engine import CompiledBatch

    quiet_known_warnings()  # Sample Factory's wrappers around a batch env warn on every attribute lookup
    # getattr: configs of runs trained before these flags existed lack them (as in `wrap_task_env`).
    macros = sources_from_json(cfg.rlgpt_macros) if getattr(cfg, "rlgpt_macros", "") else []
    reward = getattr(cfg, "rlgpt_reward", None) or None
    observation = getattr(cfg, "rlgpt_observation", None)
    marker = None
    if macros or reward:
        # Generated code runs in this worker: the memory backstop, and the marker naming a running macro.
        marker = worker_marker(cfg)
    return BatchTaskEnv(
        CompiledBatch(games), task, run_seed=int(cfg.seed or 0), macros=macros, reward=reward,
        observation=tuple(observation.split(",")) if observation else None, gamma=cfg.gamma,
        max_macro_steps=cfg.rlgpt_macro_max_steps,
        dense_reward_cap=float(getattr(cfg, "rlgpt_dense_reward_cap", DEFAULT_EPISODE_CAP)) or None,
        marker=marker, **time_budget(cfg),
    )


def make_sf_env(full_env_name: str, cfg: Config, env_config: Any = None, render_mode: str | None = None):
    """The env Sample Factory asks for: a batch of ``rlgpt_batch_games`` games when the run sets it,
    otherwise one task env."""
    if getattr(cfg, "rlgpt_batch_games", 0):  # getattr: configs saved before the batch backend lack it
        return make_batch_task_env(full_env_name, cfg, env_config)
    return make_crafter_env(full_env_name, cfg, env_config, render_mode)


class SFEnvFactory:
    """The env factory registered with Sample Factory (calls :func:`make_sf_env`).

    Unpickled in a Sample Factory process (its global context travels to every process it spawns, before
    that process's own work), it boots the process (`rlgpt.rl.worker_boot.boot_worker`).
    """

    def __call__(self, full_env_name: str, cfg: Config, env_config: Any = None, render_mode=None):
        return make_sf_env(full_env_name, cfg, env_config, render_mode)

    def __reduce__(self) -> tuple[Any, tuple[()]]:
        return _unpickle_in_worker, ()


def _unpickle_in_worker() -> SFEnvFactory:
    boot_worker()
    return SFEnvFactory()


def register_task_env(task: str) -> str:
    """Register the Sample Factory env for ``task`` (validated) and return its name."""
    TaskSpec.from_name(task)
    name = env_name_for_task(task)
    register_env(name, SFEnvFactory())
    return name
