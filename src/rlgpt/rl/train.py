"""PPO training of a Crafter task with Sample Factory's APPO, read top to bottom in :func:`train`."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from sample_factory.algo.runners.runner import AlgoObserver
from sample_factory.train import make_runner

from rlgpt import layout, rundir
from rlgpt.config import NO_SETUP, EnvSetup, TrainConfig, to_dict
from rlgpt.env_registry import get_env
from rlgpt.procs import raise_terminated
from rlgpt.rl import learner as smdp_learner
from rlgpt.rl import sf_private
from rlgpt.rl.ad import learner_class
from rlgpt.rl.checkpoint import remove_partial_checkpoints
from rlgpt.rl.learner import DECISIONS_KEY
from rlgpt.rl.macro_marker import clear_markers
from rlgpt.rl.model import register_model
from rlgpt.rl.sf_config import build_sf_config
from rlgpt.rl.sf_env import register_task_env
from rlgpt.rl.worker_boot import boot_trainer, hold_sf_log, sf_log_to_file
from rlgpt.rl.worker_config import worker_config
from rlgpt.rl.worker_watch import StopDeadline, WorkerDiedError, WorkerWatch
from rlgpt.tracking import MetricsLog, ProgressLine


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
    disabled: dict[str, float] = dataclasses.field(default_factory=dict)
    """Macro -> its calls per episode, over the last episodes, that found it switched off by its time
    budget (`rlgpt.macro.budget.TimeBudget`); only macros with some. The evaluation after training runs in a
    fresh process where no macro is off yet, so only this says what the policy trained without."""


@contextlib.contextmanager
def _cores_without_the_learners(sf_cfg) -> Iterator[None]:
    """While Sample Factory's processes start and run: this process, and so every process it spawns
    (they inherit it), on every allowed core but the learner's; `rlgpt.rl.learner.SMDPLearner` moves the
    learner onto its core. The trainer's own affinity is restored afterwards (evaluation follows)."""
    core = worker_config(sf_cfg).learner_core
    if core < 0:
        yield
        return
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, before - {core})
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def _make_observer(metrics: MetricsLog, progress: ProgressLine, stop_at_success: float = 0.0):
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

        def mean(self, runner, key: str) -> float | None:
            stat = runner.policy_avg_stats.get(key)
            return float(np.mean(stat[0])) if stat and len(stat[0]) else None

        def steps(self, runner) -> int:
            return int(runner.env_steps.get(0, 0))

        def on_training_step(self, runner, training_iteration_since_resume: int) -> None:
            now, steps = time.time(), self.steps(runner)
            if self.last is not None and now > self.last[0] and steps >= self.last[1]:
                inst = (steps - self.last[1]) / (now - self.last[0])
                self.fps = inst if self.fps == 0.0 else 0.9 * self.fps + 0.1 * inst
            self.last = (now, steps)
            progress.update(steps, self.fps, self.mean(runner, "rollout/success"))

        def extra_summaries(self, runner, policy_id, writer, env_steps) -> None:
            if env_steps == self.logged_steps:
                return  # SF reports on a timer, also before the learner advanced; one row per env step
            reward = self.mean(runner, "reward")
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
                success=self.mean(runner, "rollout/success"),
                success_episodes=len(runner.policy_avg_stats.get("rollout/success", [()])[0]),
                episode_reward=reward,
                episode_steps=self.mean(runner, "rollout/episode_steps"),
                episode_decisions=self.mean(runner, "rollout/episode_decisions"),
                resumed_from=resumed_from,
            )
            self.logged_steps = env_steps
            success = runner.policy_avg_stats.get("rollout/success")
            if stop_at_success > 0 and success and len(success[0]) == success[0].maxlen:
                if float(np.mean(success[0])) >= stop_at_success:
                    sf_private.stop_training(runner)

    return RolloutObserver()


def train(
    cfg: TrainConfig,
    extra_sf_argv: Sequence[str] = (),
    setup: EnvSetup = NO_SETUP,
) -> TrainResult:
    """Train (or resume) a run; returns when ``cfg.steps`` primitive (game) steps are done.

    Re-running with the same config resumes from the newest checkpoint in the run directory. Raises
    :class:`~rlgpt.rl.worker_watch.WorkerDiedError` when a worker process dies (after stopping the run
    cleanly).
    ``cfg.stop_at_success`` ends it earlier, at the first metrics row whose rolling success over a full
    window of episodes reaches it. ``setup`` is the LLM-written part of the env (dense reward,
    observation parts); ``extra_sf_argv`` Sample Factory flags beyond the config's (`build_sf_config`).
    """
    # Fail on a bad task name before anything is created (a bad macro file or backend: build_sf_config,
    # which reads the macro file once for the whole training, before the run directory is made).
    get_env(cfg.env.kind).check_task(cfg.task)
    boot_trainer(cfg.verbose)  # Sample Factory's children die with this process
    held_log = hold_sf_log()
    env_name = register_task_env(cfg.task, cfg.env.kind)
    register_model()
    run_dir = cfg.resolved_run_dir().resolve()
    sf_cfg = build_sf_config(cfg, run_dir, env_name, extra_sf_argv, setup)

    run_dir = rundir.prepare_run_dir(run_dir)
    sf_log_to_file(run_dir / layout.SF_LOG, held_log)
    rundir.write_yaml(run_dir / layout.RLGPT_CONFIG, to_dict(cfg))
    remove_partial_checkpoints(run_dir)
    clear_markers(run_dir)
    if cfg.wandb:
        os.environ.setdefault("WANDB_MODE", "offline")
        os.environ.setdefault("WANDB_DIR", str(run_dir))

    metrics = MetricsLog(run_dir / layout.METRICS_CSV)
    progress = ProgressLine(cfg.steps)
    observer = _make_observer(metrics, progress, cfg.stop_at_success)
    t0 = time.time()
    # `kill PID` stops the run like Ctrl-C does (Sample Factory's interrupted path) instead of ending the
    # process on the spot; checkpoints and metrics.csv are kept either way and the same command resumes.
    previous_sigterm = signal.signal(signal.SIGTERM, raise_terminated)
    placement = contextlib.ExitStack()
    try:
        smdp_learner.install(learner_class(sf_cfg))
        placement.enter_context(_cores_without_the_learners(sf_cfg))
        sf_cfg, runner = make_runner(sf_cfg)
        runner.register_observer(observer)
        sf_private.add_policy_msg_handler(runner, DECISIONS_KEY, observer.on_learner_report)
        status = runner.init()
        if status == 0:
            watch = WorkerWatch(runner, run_dir, hang_s=cfg.macros.hang_seconds)
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
            if observer.logged_steps != observer.steps(runner):
                sf_private.report_summaries(runner)
                for writer in runner.writers.values():
                    writer.flush()
        steps = observer.steps(runner)
        success = observer.mean(runner, "rollout/success")
        progress.update(steps, observer.fps, success, force=True)
        disabled = {key.split("/")[1]: value for key in list(runner.policy_avg_stats)
                    if key.startswith("macro/") and key.endswith("/fail_disabled")
                    and (value := observer.mean(runner, key))}
    finally:
        placement.close()
        signal.signal(signal.SIGTERM, previous_sigterm)
        progress.close()
        metrics.close()
        clear_markers(run_dir)
    return TrainResult(run_dir, int(status), steps, time.time() - t0, success, disabled)
