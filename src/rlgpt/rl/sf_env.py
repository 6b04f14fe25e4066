"""Tasks of the registered environments (`rlgpt.env_registry`) as Sample Factory environments, registered by
name (``<env>_<task>``, e.g. ``crafter_collect_wood``, ``minedojo_harvest_log``).

Sample Factory pickles its global context (env registry, model factory) into every process it spawns.
The env factory registered here is an `SFEnvFactory`, whose unpickling in such a process runs
`rlgpt.rl.worker_boot.boot_worker` first: importing this module does nothing else than define it.

Each Sample Factory env is one task env with the per-env wrappers (`rlgpt.rl.wrappers`, the ``gym``
backend) or a batch of games (`rlgpt.rl.sf_batch`, the ``batch`` backend), as the run's
`rlgpt.rl.worker_config.WorkerConfig.batch_games` says.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from sample_factory.envs.env_utils import register_env
from sample_factory.utils.typing import Config

from rlgpt.env_registry import DEFAULT_ENV, get_env, parse_sf_env_name, sf_env_name
from rlgpt.envs.tasks import TaskSpec
from rlgpt.macro.prefix import PrefixStart, load_pool
from rlgpt.rl.macro_marker import worker_marker
from rlgpt.rl.sf_batch import BatchTaskEnv
from rlgpt.rl.stored_policy import option_policies
from rlgpt.rl.worker_boot import boot_worker, quiet_known_warnings
from rlgpt.rl.worker_config import WorkerConfig, worker_config
from rlgpt.rl.wrappers import time_budget, wrap_task_env


def make_gym_env(full_env_name: str, cfg: Config | WorkerConfig, env_config: Any = None,
                 render_mode: str | None = None):
    """One task env of ``<env>_<task>`` with the wrappers the run's config asks for (``gym`` backend)."""
    wc = worker_config(cfg)
    kind, task = parse_sf_env_name(full_env_name)
    env = get_env(kind).make_task_env(task, wc.train.env.obs_mode, wc.episode_length or None)
    if wc.train.env.start_pool:
        env = PrefixStart(env, pool=load_pool(wc.train.env.start_pool))
    return wrap_task_env(env, cfg, options=option_policies(wc))


def make_batch_task_env(
    full_env_name: str, cfg: Config | WorkerConfig, env_config: Any = None, num_games: int | None = None
) -> BatchTaskEnv:
    """``num_games`` games of ``crafter_<task>`` as one env (the ``batch`` backend; default
    `WorkerConfig.batch_games`, a worker split's games)."""
    wc = worker_config(cfg)
    task = TaskSpec.from_name(parse_sf_env_name(full_env_name)[1])
    if wc.episode_length:  # 0: the task's default, as `make_task_env` has it
        task = dataclasses.replace(task, episode_length=wc.episode_length)
    games = int(num_games or wc.batch_games)
    # The one place that picks the batch implementation: the compiled engine, equal to
    # `rlgpt.envs.batch.ReferenceBatch` step for step (tests/envs). Deferred: its kernels load for seconds.
    from rlgpt.envs.engine import CompiledBatch

    quiet_known_warnings()  # Sample Factory's wrappers around a batch env warn on every attribute lookup
    marker = None
    if wc.macros or wc.setup.reward_code:
        # Generated code runs in this worker: the memory backstop, and the marker naming a running macro.
        marker = worker_marker(cfg)
    return BatchTaskEnv(
        CompiledBatch(games), task, run_seed=wc.seed, macros=list(wc.macros),
        reward=wc.setup.reward_code or None, observation=wc.setup.observation or None, gamma=wc.gamma,
        max_macro_steps=wc.train.macros.max_steps,
        dense_reward_cap=wc.train.dense_reward_cap or None, marker=marker, **time_budget(wc),
        progress_goals=wc.setup.progress_goals, progress_reward=wc.train.progress_reward,
    )


def make_sf_env(full_env_name: str, cfg: Config, env_config: Any = None, render_mode: str | None = None):
    """The env Sample Factory asks for: a batch of `WorkerConfig.batch_games` games when the run sets it,
    otherwise one task env."""
    if worker_config(cfg).batch_games:
        return make_batch_task_env(full_env_name, cfg, env_config)
    return make_gym_env(full_env_name, cfg, env_config, render_mode)


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


def register_task_env(task: str, kind: str = DEFAULT_ENV) -> str:
    """Register the Sample Factory env for ``task`` of env ``kind`` (validated) and return its name."""
    get_env(kind).check_task(task)
    name = sf_env_name(kind, task)
    register_env(name, SFEnvFactory())
    return name
