"""PPO training of a Crafter task with Sample Factory's APPO, read top to bottom in :func:`train`."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from sample_factory.algo.runners.runner import AlgoObserver
from sample_factory.cfg.arguments import parse_full_cfg, parse_sf_args
from sample_factory.train import make_runner

from rlgpt.run import rundir
from rlgpt.config import TrainConfig, to_dict
from rlgpt.envs.tasks import TaskSpec
from rlgpt.errors import ConfigError
from rlgpt.kernels import dispatch
from rlgpt.macro.files import load_macro_file, sources_to_json
from rlgpt.rl import learner as smdp_learner
from rlgpt.rl.checkpoint import remove_partial_checkpoints
from rlgpt.rl.learner import DECISIONS_KEY
from rlgpt.rl.model import register_model
from rlgpt.rl.sf_env import (
    SF_CONSOLE_LEVEL_ENV,
    TRAINER_PID_ENV,
    add_rlgpt_args,
    apply_console_level,
    register_task_env,
)
from rlgpt.rl.workers import StopDeadline, WorkerDiedError, WorkerWatch, clear_markers
from rlgpt.tracking import SUCCESS_WINDOW, MetricsLog, ProgressLine


@dataclass
class TrainResult:
    """What a finished (or resumed-and-finished) training run reports."""

    run_dir: Path
    """The run directory."""
    status: int
    """Sample Factory's exit status (0 = success)."""
    env_steps: int
    """Primitive (game) steps trained, counting earlier sessions of a resumed run."""
    wall_time_s: float
    """Wall time of this session."""
    success: float | None
    """Mean rollout success over the last episodes (None if no episode finished)."""


def sf_argv(cfg: TrainConfig, run_dir: Path, env_name: str) -> list[str]:
    """Translate a TrainConfig into Sample Factory flags (the one place the two vocabularies meet)."""
    p = cfg.ppo
    return [
        f"--env={env_name}",
        f"--experiment={run_dir.name}",
        f"--train_dir={run_dir.parent}",
        "--device=cpu",
        f"--seed={cfg.seed}",
        f"--train_for_env_steps={cfg.steps}",
        f"--num_workers={cfg.env.num_workers}",
        f"--num_envs_per_worker={cfg.env.num_envs_per_worker}",
        f"--worker_num_splits={cfg.env.worker_num_splits}",
        f"--async_rl={p.async_rl}",
        "--serial_mode=False",
        "--use_rnn=False",
        # Observations are scaled inside the policy (ids are embedded, counts log1p'd).
        "--normalize_input=False",
        "--normalize_returns=True",
        f"--learning_rate={p.learning_rate}",
        f"--gamma={p.gamma}",
        f"--gae_lambda={p.gae_lambda}",
        f"--rollout={p.rollout}",
        f"--batch_size={p.batch_size}",
        f"--num_batches_per_epoch={p.num_batches_per_epoch}",
        f"--num_epochs={p.num_epochs}",
        f"--ppo_clip_ratio={p.ppo_clip_ratio}",
        f"--value_loss_coeff={p.value_loss_coeff}",
        f"--exploration_loss_coeff={p.exploration_loss_coeff}",
        f"--max_grad_norm={p.max_grad_norm}",
        f"--max_policy_lag={p.max_policy_lag}",
        f"--rlgpt_hidden_size={p.hidden_size}",
        f"--rlgpt_encoder_precision={encoder_precision(p.encoder_precision)}",
        f"--rlgpt_obs_mode={cfg.env.obs_mode}",
        f"--rlgpt_episode_length={cfg.env.episode_length or TaskSpec.from_name(cfg.task).episode_length}",
        f"--save_every_sec={cfg.save_every_sec}",
        "--keep_checkpoints=2",
        f"--experiment_summaries_interval={cfg.summaries_every_sec}",
        f"--flush_summaries_interval={cfg.summaries_every_sec}",
        f"--stats_avg={SUCCESS_WINDOW}",
        "--heartbeat_interval=60",
        "--heartbeat_reporting_interval=600",
        # Two cores: pinning workers to cores only fights the learner for them.
        "--set_workers_cpu_affinity=False",
        f"--with_wandb={cfg.wandb}",
        f"--wandb_project={cfg.wandb_project}",
        f"--rlgpt_macro_max_steps={cfg.macros.max_steps}",
        f"--rlgpt_macro_memory_mb={cfg.macros.memory_limit_mb}",
    ] + ([f"--rlgpt_macros={sources_to_json(load_macro_file(cfg.macros.file))}"] if cfg.macros.file else [])


def encoder_precision(setting: str) -> str:
    """``fp32`` or ``bf16``: `rlgpt.config.PPOConfig.encoder_precision` with ``auto`` resolved for this
    machine (training runs on CPU: ``--device=cpu``)."""
    if setting != "auto":
        return setting
    return "bf16" if dispatch.native_bf16("cpu") else "fp32"


def env_backend(cfg: TrainConfig, sf_cfg) -> str:
    """The env backend a run uses, ``batch`` or ``gym`` (`rlgpt.config.EnvConfig.backend`): ``auto`` takes
    ``batch`` unless the run needs what only the per-env wrappers do; ``batch`` for such a run is a
    ConfigError naming why."""
    if cfg.env.backend == "gym":
        return "gym"
    needs_gym = [
        why
        for needed, why in (
            (sf_cfg.rlgpt_obs_mode != "symbolic", "pixel observations"),
            (bool(sf_cfg.rlgpt_macros), "macros"),
            (bool(sf_cfg.rlgpt_reward), "the LLM's dense reward"),
            (bool(sf_cfg.rlgpt_observation), "observation parts"),
        )
        if needed
    ]
    if needs_gym and cfg.env.backend == "batch":
        raise ConfigError(f"env.backend=batch cannot run {' or '.join(needs_gym)} (they run per env in "
                          "Python); use env.backend=auto or env.backend=gym")
    return "gym" if needs_gym else "batch"


def backend_argv(backend: str, sf_cfg) -> list[str]:
    """Sample Factory flags of an env backend, all of them every time (a resumed run reloads its saved
    config, and a flag left out would keep the earlier session's value).

    ``batch``: each of a worker's ``worker_num_splits`` Sample Factory envs is one batch of
    ``num_envs_per_worker / worker_num_splits`` games, sampled with SF's batched sampling.
    """
    if backend == "gym":
        return ["--batched_sampling=False", "--rlgpt_batch_games=0"]
    splits = sf_cfg.worker_num_splits
    games = sf_cfg.num_envs_per_worker // splits
    trajectories = sf_cfg.batch_size * sf_cfg.num_batches_per_epoch // sf_cfg.rollout
    if trajectories % games and games % trajectories:
        # Sample Factory's batched sampling hands the learner whole splits (its BufferMgr asserts this).
        raise ConfigError(
            f"env.backend=batch steps {games} games per split (env.num_envs_per_worker / {splits}), which "
            f"must divide the {trajectories} trajectories of a training batch (ppo.batch_size * "
            "ppo.num_batches_per_epoch / ppo.rollout) or be a multiple of them"
        )
    return [
        "--batched_sampling=True",
        f"--num_envs_per_worker={splits}",
        f"--rlgpt_batch_games={games}",
        # Crafter runs on the CPU: actions in, observations out as CPU arrays.
        "--env_gpu_actions=False",
        "--env_gpu_observations=False",
    ]


def learner_core(cfg: TrainConfig, backend: str) -> int:
    """The CPU core the learner gets to itself (`rlgpt.config.TrainConfig.learner_core`), -1 for none."""
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    own = cfg.learner_core == "own" or (cfg.learner_core == "auto" and backend == "batch")
    return cores[-1] if own and len(cores) >= 2 else -1


def build_sf_config(cfg: TrainConfig, run_dir: Path, env_name: str, extra_argv: Sequence[str] = ()):
    """Parse the Sample Factory config of a run (registers rlgpt's own flags first), with the flags of the
    env backend it resolves to (:func:`env_backend`) and of the learner's core (:func:`learner_core`)."""
    argv = sf_argv(cfg, run_dir, env_name) + list(extra_argv)
    sf_cfg = _parse_sf_argv(argv)
    backend = env_backend(cfg, sf_cfg)
    argv += backend_argv(backend, sf_cfg) + [f"--rlgpt_learner_core={learner_core(cfg, backend)}"]
    return _parse_sf_argv(argv)


@contextlib.contextmanager
def _cores_without_the_learners(sf_cfg) -> Iterator[None]:
    """While Sample Factory's processes start and run: this process, and so every process it spawns
    (they inherit it), on every allowed core but the learner's; `rlgpt.rl.learner.SMDPLearner` moves the
    learner onto its core. The trainer's own affinity is restored afterwards (evaluation follows)."""
    core = int(getattr(sf_cfg, "rlgpt_learner_core", -1))
    if core < 0:
        yield
        return
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, before - {core})
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def _parse_sf_argv(argv: list[str]):
    parser, _ = parse_sf_args(argv=argv, evaluation=False)
    add_rlgpt_args(parser)
    return parse_full_cfg(parser, argv=argv)


def _make_observer(metrics: MetricsLog, progress: ProgressLine, stop_at_success: float | None = None):
    class RolloutObserver(AlgoObserver):
        """Adds ``rollout/*`` scalars, appends metrics.csv and drives the progress line.

        Sample Factory's ``env_steps`` count primitive (game) steps exactly (`rlgpt.rl.learner.SMDPLearner`);
        ``decisions`` (policy decisions, fewer when macros run) arrive in the learner's reports.
        """

        def __init__(self) -> None:
            self.t0 = time.time()
            self.last: tuple[float, int] | None = None
            self.fps = 0.0
            self.logged_steps = -1
            self.decisions: int | None = None

        def on_learner_report(self, runner, msg: dict, policy_id: int) -> None:
            self.decisions = int(msg[DECISIONS_KEY])

        def _mean(self, runner, key: str) -> float | None:
            stat = runner.policy_avg_stats.get(key)
            return float(np.mean(stat[0])) if stat and len(stat[0]) else None

        def _steps(self, runner) -> int:
            return int(runner.env_steps.get(0, 0))

        def on_training_step(self, runner, training_iteration_since_resume: int) -> None:
            now, steps = time.time(), self._steps(runner)
            if self.last is not None and now > self.last[0] and steps >= self.last[1]:
                inst = (steps - self.last[1]) / (now - self.last[0])
                self.fps = inst if self.fps == 0.0 else 0.9 * self.fps + 0.1 * inst
            self.last = (now, steps)
            progress.update(steps, self.fps, self._mean(runner, "rollout/success"))

        def extra_summaries(self, runner, policy_id, writer, env_steps) -> None:
            if env_steps == self.logged_steps:
                return  # SF reports on a timer, also before the learner advanced; one row per env step
            reward = self._mean(runner, "reward")
            writer.add_scalar("rollout/fps", self.fps, env_steps)
            if self.decisions is not None:
                writer.add_scalar("rollout/decisions", self.decisions, env_steps)
            if reward is not None:
                writer.add_scalar("rollout/episode_reward", reward, env_steps)
            # The checkpoint this session resumed from (0 for a fresh run): rows an earlier, killed session
            # logged past it are superseded by this session's (`rlgpt.tracking.read_curve` drops them).
            resumed_from = env_steps - (runner.total_env_steps_since_resume or 0)
            metrics.write(
                env_steps=env_steps,
                decisions=self.decisions,
                wall_time=round(time.time() - self.t0, 2),
                fps=round(self.fps, 1),
                success=self._mean(runner, "rollout/success"),
                success_episodes=len(runner.policy_avg_stats.get("rollout/success", [()])[0]),
                episode_reward=reward,
                episode_steps=self._mean(runner, "rollout/episode_steps"),
                episode_decisions=self._mean(runner, "rollout/episode_decisions"),
                resumed_from=resumed_from,
            )
            self.logged_steps = env_steps
            success = runner.policy_avg_stats.get("rollout/success")
            if stop_at_success is not None and success and len(success[0]) == success[0].maxlen:
                if float(np.mean(success[0])) >= stop_at_success:
                    runner._stop_training()

    return RolloutObserver()


def train(
    cfg: TrainConfig, extra_sf_argv: Sequence[str] = (), stop_at_success: float | None = None
) -> TrainResult:
    """Train (or resume) a run; returns when ``cfg.steps`` primitive (game) steps are done.

    Re-running with the same config resumes from the newest checkpoint in the run directory. Raises
    :class:`~rlgpt.rl.workers.WorkerDiedError` when a worker process dies (after stopping the run cleanly).
    ``stop_at_success`` (benchmarks) ends the run early at the first metrics row whose rolling success over
    a full window of episodes reaches it.
    """
    # Fail on a bad task name, macro file or backend before anything is created.
    TaskSpec.from_name(cfg.task)
    if cfg.macros.file:
        load_macro_file(cfg.macros.file)
    os.environ.setdefault(SF_CONSOLE_LEVEL_ENV, "DEBUG" if cfg.verbose else "WARNING")
    os.environ[TRAINER_PID_ENV] = str(os.getpid())  # Sample Factory's children die with this process
    apply_console_level()
    env_name = register_task_env(cfg.task)
    register_model()
    sf_cfg = build_sf_config(cfg, cfg.resolved_run_dir().resolve(), env_name, extra_sf_argv)

    run_dir = rundir.prepare_run_dir(cfg.resolved_run_dir()).resolve()
    rundir.write_yaml(run_dir / rundir.RLGPT_CONFIG, to_dict(cfg))
    remove_partial_checkpoints(run_dir)
    clear_markers(run_dir)
    if cfg.wandb:
        os.environ.setdefault("WANDB_MODE", "offline")
        os.environ.setdefault("WANDB_DIR", str(run_dir))

    metrics = MetricsLog(run_dir / rundir.METRICS_CSV)
    progress = ProgressLine(cfg.steps)
    observer = _make_observer(metrics, progress, stop_at_success)
    t0 = time.time()
    # `kill PID` stops the run like Ctrl-C does (Sample Factory's interrupted path) instead of ending the
    # process on the spot; checkpoints and metrics.csv are kept either way and the same command resumes.
    previous_sigterm = signal.signal(signal.SIGTERM, _raise_keyboard_interrupt)
    placement = contextlib.ExitStack()
    try:
        smdp_learner.install()
        placement.enter_context(_cores_without_the_learners(sf_cfg))
        sf_cfg, runner = make_runner(sf_cfg)
        runner.register_observer(observer)
        # Not runner.register_policy_msg_handler: SF 2.1.1 stores the bare function where it iterates a list.
        runner.policy_msg_handlers.setdefault(DECISIONS_KEY, []).append(observer.on_learner_report)
        status = runner.init()
        if status == 0:
            watch = WorkerWatch(runner, run_dir)
            deadline = StopDeadline(watch.processes, run_dir, cfg.stop_grace_sec,
                                    recorded_death=lambda: watch.death, stopping=lambda: runner.stopped,
                                    before_exit=progress.close)
            deadline.start()
            try:
                status = runner.run()
            finally:
                deadline.finish()
            if watch.death is not None:
                raise WorkerDiedError(watch.death.describe(run_dir))
            # SF writes summaries periodically but not when training ends; the last point is written here.
            if observer.logged_steps != observer._steps(runner):
                runner._report_experiment_summaries()
                for writer in runner.writers.values():
                    writer.flush()
        steps = observer._steps(runner)
        success = observer._mean(runner, "rollout/success")
        progress.update(steps, observer.fps, success, force=True)
    finally:
        placement.close()
        signal.signal(signal.SIGTERM, previous_sigterm)
        progress.close()
        metrics.close()
        clear_markers(run_dir)
    return TrainResult(run_dir, int(status), steps, time.time() - t0, success)


def _raise_keyboard_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")
