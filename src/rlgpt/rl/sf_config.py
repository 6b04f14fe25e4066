"""The one place a `TrainConfig` (and a job's LLM-written env setup) becomes Sample Factory's config.

:func:`build_sf_config` writes every flag a training sets from the dataclasses (never a second copy of
their defaults), resolves the env backend and the learner's core from the same config, and parses the
command line once. rlgpt's own settings travel as one flag, the typed `rlgpt.rl.worker_config.WorkerConfig`
as JSON. Every flag is passed every time: a resumed run reloads its saved ``config.json`` and only flags
given on the command line override it.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from sample_factory.cfg.arguments import parse_full_cfg, parse_sf_args
from sample_factory.utils.typing import Config

from rlgpt.config import NO_SETUP, EnvSetup, TrainConfig
from rlgpt.env_registry import get_env
from rlgpt.errors import ConfigError
from rlgpt.kernels import dispatch
from rlgpt.macro.files import load_macro_file
from rlgpt.rl.worker_config import FLAG, WorkerConfig
from rlgpt.tracking import SUCCESS_WINDOW


def training_device(setting: str) -> str:
    """``cpu`` or ``cuda``: `rlgpt.config.TrainConfig.device` resolved for this machine; ``cuda`` where torch
    sees no CUDA device is a ConfigError before any process starts."""
    if setting == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if setting == "cuda" and not torch.cuda.is_available():
        raise ConfigError("device=cuda, but torch sees no CUDA device here (torch "
                          f"{torch.__version__}); use device=cpu or device=auto")
    return setting


def encoder_precision(setting: str, device: str = "cpu") -> str:
    """``fp32`` or ``bf16``: `rlgpt.config.PPOConfig.encoder_precision` with ``auto`` resolved for the
    training's `device` (``cpu`` or ``cuda``, `training_device`)."""
    if setting != "auto":
        return setting
    return "bf16" if dispatch.native_bf16(device) else "fp32"


def env_backend(cfg: TrainConfig, setup: EnvSetup = NO_SETUP) -> str:
    """The env backend a run uses, ``batch`` or ``gym`` (`rlgpt.config.EnvConfig.backend`): ``auto`` takes
    ``batch`` unless the run needs what only the per-env wrappers do (macros, the dense reward and
    observation parts run on both); ``batch`` for such a run is a ConfigError naming why."""
    if cfg.env.backend == "gym":
        return "gym"
    batchable = get_env(cfg.env.kind).batch_backend
    needs_gym = [
        why
        for needed, why in (
            (cfg.env.obs_mode != "symbolic", "pixel observations"),
            (bool(cfg.env.start_pool), "saved start states"),
            (bool(cfg.options), "stored policies as options"),
            (not batchable, f"{cfg.env.kind} games (the batch engine runs Crafter's)"),
        )
        if needed
    ]
    if needs_gym and cfg.env.backend == "batch":
        raise ConfigError(f"env.backend=batch cannot run {' or '.join(needs_gym)} (they run per env in "
                          "Python); use env.backend=auto or env.backend=gym")
    return "gym" if needs_gym else "batch"


def batch_games(cfg: TrainConfig, backend: str) -> int:
    """Games per Sample Factory env: 0 for ``gym`` (one task env each); for ``batch``, each of a worker's
    ``worker_num_splits`` envs is one batch of ``num_envs_per_worker / worker_num_splits`` games."""
    if backend == "gym":
        return 0
    splits, games = cfg.env.worker_num_splits, cfg.env.num_envs_per_worker // cfg.env.worker_num_splits
    trajectories = cfg.ppo.batch_size * cfg.ppo.num_batches_per_epoch // cfg.ppo.rollout
    if trajectories % games and games % trajectories:
        # Sample Factory's batched sampling hands the learner whole splits (its BufferMgr asserts this).
        raise ConfigError(
            f"env.backend=batch steps {games} games per split (env.num_envs_per_worker / {splits}), which "
            f"must divide the {trajectories} trajectories of a training batch (ppo.batch_size * "
            "ppo.num_batches_per_epoch / ppo.rollout) or be a multiple of them"
        )
    return games


def learner_core(cfg: TrainConfig, backend: str) -> int:
    """The CPU core the learner gets to itself (`rlgpt.config.TrainConfig.learner_core`), -1 for none."""
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    own = cfg.learner_core == "own" or (cfg.learner_core == "auto" and backend == "batch")
    return cores[-1] if own and len(cores) >= 2 else -1


def resolve_worker_config(cfg: TrainConfig, setup: EnvSetup = NO_SETUP, backend: str = "gym") -> WorkerConfig:
    """What every process of the training reads (`rlgpt.rl.worker_config`): the config, the job's setup, the
    macro file's sources (read and checked here, once) and what this machine and ``backend`` resolve."""
    return WorkerConfig(
        train=cfg,
        setup=setup,
        macros=tuple(load_macro_file(cfg.macros.file)) if cfg.macros.file else (),
        episode_length=cfg.env.episode_length or get_env(cfg.env.kind).episode_length(cfg.task),
        batch_games=batch_games(cfg, backend),
        learner_core=learner_core(cfg, backend),
        encoder_precision=encoder_precision(cfg.ppo.encoder_precision, training_device(cfg.device)),
    )


def sf_flags(cfg: TrainConfig, run_dir: Path, env_name: str, backend: str) -> dict[str, Any]:
    """Sample Factory's own flags of a training (the one place the two vocabularies meet)."""
    p, env = cfg.ppo, cfg.env
    batched = backend == "batch"
    return {
        "env": env_name,
        "experiment": run_dir.name,
        "train_dir": run_dir.parent,
        "device": {"cpu": "cpu", "cuda": "gpu"}[training_device(cfg.device)],  # Sample Factory's names
        "seed": cfg.seed,
        "train_for_env_steps": cfg.steps,
        "num_workers": env.num_workers,
        # batch: each of a worker's splits is one Sample Factory env holding a batch of games.
        "num_envs_per_worker": env.worker_num_splits if batched else env.num_envs_per_worker,
        "worker_num_splits": env.worker_num_splits,
        "batched_sampling": batched,
        "async_rl": p.async_rl,
        "serial_mode": False,
        "use_rnn": p.use_rnn,
        "rnn_size": p.hidden_size,
        # Observations are scaled inside the policy (ids are embedded, counts log1p'd).
        "normalize_input": False,
        "normalize_returns": True,
        "learning_rate": p.learning_rate,
        "gamma": p.gamma,
        "gae_lambda": p.gae_lambda,
        "rollout": p.rollout,
        "batch_size": p.batch_size,
        "num_batches_per_epoch": p.num_batches_per_epoch,
        "num_epochs": p.num_epochs,
        "ppo_clip_ratio": p.ppo_clip_ratio,
        "value_loss_coeff": p.value_loss_coeff,
        "exploration_loss_coeff": p.exploration_loss_coeff,
        "max_grad_norm": p.max_grad_norm,
        "max_policy_lag": p.max_policy_lag,
        "save_every_sec": cfg.save_every_sec,
        "keep_checkpoints": 2,
        "experiment_summaries_interval": cfg.summaries_every_sec,
        "flush_summaries_interval": cfg.summaries_every_sec,
        "stats_avg": SUCCESS_WINDOW,
        "heartbeat_interval": 60,
        "heartbeat_reporting_interval": 600,
        # Two cores: pinning workers to cores only fights the learner for them.
        "set_workers_cpu_affinity": False,
        "with_wandb": cfg.wandb,
        "wandb_project": cfg.wandb_project,
        # Crafter runs on the CPU: actions in, observations out as CPU arrays (batched sampling).
        **({"env_gpu_actions": False, "env_gpu_observations": False} if batched else {}),
    }


# What the batch backend derives from them: a flag that overrides one of these would leave its batches
# inconsistent with Sample Factory's buffers.
_BATCH_INPUTS = ("num_envs_per_worker", "worker_num_splits", "batch_size", "num_batches_per_epoch", "rollout")


def build_sf_config(
    cfg: TrainConfig,
    run_dir: Path,
    env_name: str,
    extra_argv: Sequence[str] = (),
    setup: EnvSetup = NO_SETUP,
) -> Config:
    """Sample Factory's config of a training: the flags of :func:`sf_flags` and the `WorkerConfig` for the
    env backend it resolves to (:func:`env_backend`), then ``extra_argv`` (Sample Factory flags the
    TrainConfig has no knob for, or overrides of its own: tests, the benchmark's Sample-Factory-defaults
    trainer), parsed once."""
    ours = [flag for flag in extra_argv if flag.startswith(f"--{FLAG}")]
    if ours:
        raise ConfigError(f"extra Sample Factory flags {ours} set rlgpt's own flags, which come from the "
                          "TrainConfig and the EnvSetup")
    backend = env_backend(cfg, setup)
    clash = sorted({flag[2:].split("=", 1)[0] for flag in extra_argv} & set(_BATCH_INPUTS))
    if backend == "batch" and clash:
        raise ConfigError(f"extra Sample Factory flags {clash} would change what the batch backend sized its "
                          "batches from; set them in the TrainConfig")
    ours = resolve_worker_config(cfg, setup, backend)
    flags = {**sf_flags(cfg, run_dir, env_name, backend), FLAG: ours.to_json()}
    argv = [f"--{name}={value}" for name, value in flags.items()] + list(extra_argv)
    parser, _ = parse_sf_args(argv=argv, evaluation=False)
    add_rlgpt_args(parser)
    return parse_full_cfg(parser, argv=argv)


def add_rlgpt_args(parser: argparse.ArgumentParser) -> None:
    """Register rlgpt's one flag with Sample Factory's parser (saved in the run's config.json): the
    `WorkerConfig` as JSON (`rlgpt.rl.worker_config`; every default is its dataclasses')."""
    parser.add_argument(f"--{FLAG}", default="", type=str)
