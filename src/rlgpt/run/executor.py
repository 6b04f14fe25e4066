"""Trainings go through one interface: a job (config in) -> a run directory and a result (out).

`LocalExecutor` runs each job in a child process (``python -m rlgpt.run.executor JOB.json``): Sample Factory
training, then the evaluation (under the env workers' memory backstop: it runs the job's macros and reward
in this child). A crash, a dead worker or a bad program in the job is a failed `JobResult`,
not a dead loop; the child dies with the loop (SIGKILL included). A failed attempt is run again (up to
``RunConfig.job_attempts``), resuming its training from the newest checkpoint, or only evaluating again when
the training had finished; every attempt is listed in ``attempts.json`` and its steps count. A cluster
backend (`rlgpt.run.ray_executor`) subclasses `RetryingExecutor` with its own `_attempt` (ship ``job.json``,
run this module there, read ``result.json`` back) without touching the loop.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from rlgpt import layout, rundir
from rlgpt.config import EnvSetup, TrainConfig, to_dict, train_config_from_dict
from rlgpt.procs import Terminated, die_with_parent
from rlgpt.tracking import spent_steps


@dataclass
class TrainJob:
    """One training + evaluation."""

    config: TrainConfig
    """The training (its ``run_dir`` is where everything goes; ``steps`` counts primitive steps)."""
    reward_code: str = ""
    """Source of the dense reward ``def reward(game, prev)`` ("" = the task's reward only)."""
    observation: tuple[str, ...] = ()
    """Observation parts the policy sees (empty = all)."""
    eval_episodes: int = 20
    """Evaluation episodes after training."""
    eval_episode_length: int | None = None
    """Episode limit of the evaluation (None = the training's)."""
    eval_split: str = "validation"
    """Evaluation seed split (`rlgpt.rl.evaluate.SPLITS`): "validation" for what the loop selects on,
    "test" for the reported result."""
    evaluate_only: bool = False
    """Only evaluate the policy already in the run directory, never train (a budget mark's policy copy,
    `rlgpt.run.marks`); a directory without a checkpoint is a failed job."""
    eval_seed: int | None = None
    """The run seed whose evaluation episodes are played (`rlgpt.rl.evaluate.eval_seed`); None = the
    training's seed. An iteration's candidates train with seeds of their own but are all evaluated on the
    run's episodes, so that they are compared (and the selected one tested) like one training."""
    progress_goals: tuple[str, ...] = ()
    """Goals the plan's progress reward pays once per episode each (`rlgpt.config.EnvSetup.progress_goals`;
    empty: none)."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (``job.json``)."""
        out = {"config": to_dict(self.config), "reward_code": self.reward_code,
               "observation": list(self.observation), "eval_episodes": self.eval_episodes,
               "eval_episode_length": self.eval_episode_length, "eval_split": self.eval_split,
               "evaluate_only": self.evaluate_only}
        if self.eval_seed is not None:
            out["eval_seed"] = self.eval_seed
        if self.progress_goals:
            out["progress_goals"] = list(self.progress_goals)
        return out

    def episodes_seed(self) -> int:
        """The run seed of the evaluation's episodes (`eval_seed`, else the training's seed)."""
        return self.config.seed if self.eval_seed is None else self.eval_seed

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainJob:
        """Inverse of to_dict."""
        return cls(train_config_from_dict(data["config"]), data["reward_code"], tuple(data["observation"]),
                   int(data["eval_episodes"]), data["eval_episode_length"],
                   data.get("eval_split", "validation"), bool(data.get("evaluate_only", False)),
                   data.get("eval_seed"), tuple(data.get("progress_goals", ())))

    def env_setup(self) -> EnvSetup:
        """The training's env beyond the TrainConfig: the LLM's reward and observation, the plan's goals."""
        return EnvSetup(self.reward_code, self.observation, self.progress_goals)


@dataclass
class JobResult:
    """What a job produced."""

    run_dir: str
    """The training's run directory."""
    ok: bool
    """Training and evaluation finished."""
    steps: int = 0
    """Primitive steps trained."""
    wall_time_s: float = 0.0
    """Wall time of the job (this attempt)."""
    eval: dict[str, Any] | None = None
    """The evaluation (`rlgpt.rl.evaluate.EvalReport` as a dict); None when the job failed."""
    error: str = ""
    """Why the job failed ("" when ok)."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Backend-specific details (e.g. the exit status)."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (``result.json``)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> JobResult:
        """Inverse of to_dict."""
        return cls(**data)


class Executor(Protocol):
    """Runs training jobs; each call blocks until its job is done (the loop's iterations depend on each
    other); callers in different threads (`rlgpt.run.sweep`) may run jobs at the same time."""

    def run(self, job: TrainJob) -> JobResult:
        """Run `job` to completion (resuming its run directory if it holds an earlier attempt)."""
        ...

    def run_many(self, jobs: Sequence[TrainJob]) -> list[JobResult]:
        """Run independent `jobs` (an iteration's candidates, each in its own run directory) to completion,
        at the same time where the backend has room; their results in the order of `jobs`."""
        ...


class RetryingExecutor:
    """What every backend shares: a job's run directory and ``job.json``, up to `attempts` attempts (each
    resuming from the newest checkpoint, none after a failure that would only repeat), every attempt listed
    in ``attempts.json`` and its steps counted. A backend implements `_attempt`: run ``job.json`` once
    (``python -m rlgpt.run.executor``, which resumes by itself) and return its result."""

    concurrent: bool = False
    """Whether `run_many` runs its jobs at the same time (one thread each waiting on its job) or one after
    another."""

    def __init__(self, attempts: int = 1) -> None:
        self.attempts = attempts

    def run_many(self, jobs: Sequence[TrainJob]) -> list[JobResult]:
        """`run` on each job, each with its own attempts and resume: concurrently when the backend is
        `concurrent`, else one after another."""
        if not self.concurrent or len(jobs) < 2:
            return [self.run(job) for job in jobs]
        with ThreadPoolExecutor(max_workers=len(jobs), thread_name_prefix="job") as pool:
            return list(pool.map(self.run, jobs))

    def run(self, job: TrainJob) -> JobResult:
        run_dir = rundir.prepare_run_dir(job.config.resolved_run_dir()).resolve()
        job.config.run_dir = str(run_dir)
        rundir.write_json(run_dir / layout.JOB_JSON, job.to_dict())
        history = read_attempts(run_dir)
        for _ in range(self.attempts):
            (run_dir / layout.RESULT_JSON).unlink(missing_ok=True)
            result = self._attempt(run_dir)
            history.append({"ok": result.ok, "error": result.error, "wall_time_s": result.wall_time_s,
                            "spent_steps": spent_steps(run_dir / layout.METRICS_CSV), **result.extra})
            rundir.write_json(run_dir / layout.ATTEMPTS_JSON, history)
            if result.ok or not result.extra.get("retryable", True):
                break
        # Every session of the run directory counts, a failed job's and earlier attempts' included.
        result.steps = max(result.steps, spent_steps(run_dir / layout.METRICS_CSV, result.steps))
        result.extra["attempts"] = len(history)
        return result

    def _attempt(self, run_dir: Path) -> JobResult:
        """One attempt at ``run_dir/job.json``; a crash is a failed result (KeyboardInterrupt on Ctrl-C)."""
        raise NotImplementedError


class LocalExecutor(RetryingExecutor):
    """Runs each job in a child Python process on this machine; a failed attempt is run again (up to
    `attempts` in all), resuming from the newest checkpoint, unless its failure would only repeat.
    `run_many` runs its jobs one after another: a training already uses the machine's cores (its rollout
    workers), and a small box (2 cores) has no room for two at once."""

    def __init__(self, python: str = sys.executable, attempts: int = 1, stop_grace_s: float = 90.0) -> None:
        super().__init__(attempts)
        self.python = python
        self.stop_grace_s = stop_grace_s
        """How long an interrupted command waits for its training child to checkpoint and exit: Sample
        Factory's own stop takes up to `TrainConfig.stop_grace_sec` (45 s) plus the save."""
        self.process: subprocess.Popen | None = None
        """The running attempt's child (None between attempts)."""

    def _attempt(self, run_dir: Path) -> JobResult:
        t0 = time.time()
        self.process = subprocess.Popen(job_argv(run_dir, self.python), preexec_fn=die_with_parent)
        try:
            returncode = self.process.wait()
        except KeyboardInterrupt as exc:
            # Ctrl-C reached the child too (the same process group); `kill PID` reached this process only and
            # is passed on. Either way the child gets to checkpoint: this process's exit would SIGKILL it.
            stop_child(self.process, self.stop_grace_s, forward=isinstance(exc, Terminated))
            raise
        finally:
            self.process = None
        return attempt_result(run_dir, returncode, time.time() - t0)


def stop_child(process: subprocess.Popen, grace_s: float, forward: bool = True) -> None:
    """Let a training child stop (Sample Factory's interrupted path, which saves a checkpoint): send it
    SIGTERM when `forward` (not when it got the Ctrl-C itself: a second signal would cut its save short),
    wait up to `grace_s` seconds, and SIGKILL it after that."""
    if forward and process.poll() is None:
        process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def job_argv(run_dir: Path, python: str = sys.executable) -> list[str]:
    """The command that runs ``run_dir/job.json`` once (this module's `main`)."""
    return [python, "-m", "rlgpt.run.executor", str(run_dir / layout.JOB_JSON)]


def attempt_result(run_dir: Path, returncode: int, wall_time_s: float,
                   found: dict[str, Any] | None = None) -> JobResult:
    """The result of an attempt whose process exited with `returncode`: its ``result.json`` (or `found`,
    that file's content read where the process ran), else a failure naming the status."""
    result_path = run_dir / layout.RESULT_JSON
    if found is None and result_path.is_file():
        found = json.loads(result_path.read_text())
    if found is not None:
        return JobResult.from_dict(found)
    if returncode in (-signal.SIGINT, 130):
        raise KeyboardInterrupt
    return JobResult(str(run_dir), False, wall_time_s=wall_time_s,
                     error=f"training process exited with status {returncode} without a result; "
                           f"see {run_dir / layout.SF_LOG}", extra={"returncode": returncode})


def read_attempts(run_dir: Path) -> list[dict[str, Any]]:
    """The executor's earlier attempts in `run_dir` (``attempts.json``; [] when none or unreadable)."""
    try:
        found = json.loads((run_dir / layout.ATTEMPTS_JSON).read_text())
    except (OSError, ValueError):
        return []
    return found if isinstance(found, list) else []


def run_job(job: TrainJob) -> JobResult:
    """Train and evaluate in this process (what the child of `LocalExecutor` does). A run directory whose
    training already finished (``trained.json`` for the same steps), or an `evaluate_only` job's, is only
    evaluated."""
    from sample_factory.algo.utils.misc import ExperimentStatus

    from rlgpt.errors import ConfigError
    from rlgpt.macro.reward import compile_reward
    from rlgpt.rl.evaluate import evaluate, plot_learning_curves
    from rlgpt.rl.train import train

    t0 = time.time()
    run_dir = job.config.resolved_run_dir()
    try:
        if job.reward_code:
            compile_reward(job.reward_code)  # a bad reward is one error here, not a crash in every worker
    except Exception as exc:  # the same code fails the same way again: not worth another attempt
        return JobResult(str(run_dir), False, error=f"{type(exc).__name__}: {exc}",
                         extra={"retryable": False})
    if job.evaluate_only:
        cap_evaluation_memory(job)
        report = evaluate(run_dir, episodes=job.eval_episodes, episode_length=job.eval_episode_length,
                          seed=job.episodes_seed(), split=job.eval_split, write=False)
        return JobResult(str(run_dir), True, 0, time.time() - t0, dataclasses.asdict(report),
                         extra={"evaluated_steps": report.env_steps})
    trained = _finished_training(run_dir, job.config.steps)
    if trained is None:
        try:
            result = train(job.config, setup=job.env_setup())
        except ConfigError as exc:
            return JobResult(str(run_dir), False, error=f"{type(exc).__name__}: {exc}",
                             extra={"retryable": False})
        if result.status == ExperimentStatus.INTERRUPTED:
            raise KeyboardInterrupt
        if result.status != ExperimentStatus.SUCCESS:
            return JobResult(str(result.run_dir), False, result.env_steps, time.time() - t0,
                             error=f"Sample Factory status {result.status}; see {run_dir / layout.SF_LOG}",
                             extra={"status": int(result.status)})
        trained = {"steps": job.config.steps, "env_steps": result.env_steps}
        if result.disabled:
            trained["disabled_in_training"] = {k: round(v, 3) for k, v in result.disabled.items()}
        rundir.write_json(run_dir / layout.TRAINED_JSON, trained)
        plot_learning_curves(run_dir)
    cap_evaluation_memory(job)
    report = evaluate(run_dir, episodes=job.eval_episodes, episode_length=job.eval_episode_length,
                      seed=job.episodes_seed(), split=job.eval_split, write=job.eval_split == "validation")
    found = dataclasses.asdict(report)
    if trained.get("disabled_in_training"):  # beside the evaluation that could not see it (`TrainResult`)
        found["disabled_in_training"] = trained["disabled_in_training"]
    return JobResult(str(run_dir), True, int(trained["env_steps"]), time.time() - t0, found)


def cap_evaluation_memory(job: TrainJob) -> int | None:
    """Apply the env workers' memory backstop (`rlgpt.rl.worker_memory.set_memory_limit`, headroom
    ``macros.memory_limit_mb``) to this process before it evaluates: the evaluation steps the job's macros
    and dense reward here, not in a Sample Factory worker. Only for the job's own child process (a
    process-wide limit would cap any other caller for good); set after training, so the training's
    processes never inherit it. Returns the limit in bytes (None when disabled)."""
    from rlgpt.rl.worker_memory import set_memory_limit

    return set_memory_limit(job.config.macros.memory_limit_mb)


def _finished_training(run_dir: Path, steps: int) -> dict[str, Any] | None:
    """``trained.json`` when an earlier attempt finished training `steps` steps in `run_dir`, else None."""
    try:
        found = json.loads((run_dir / layout.TRAINED_JSON).read_text())
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) and found.get("steps") == steps else None


def main(argv: list[str] | None = None) -> int:
    """``python -m rlgpt.run.executor JOB.json``: run the job, write ``result.json`` beside it."""
    argv = sys.argv[1:] if argv is None else argv
    job_path = Path(argv[0])
    job = TrainJob.from_dict(json.loads(job_path.read_text()))
    try:
        result = run_job(job)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # any failure of the job is a result the loop can report, not a lost run
        import traceback

        # The run's console gets one line; the traceback is kept beside the job for whoever debugs it.
        error = f"{type(exc).__name__}: {exc}"
        where = job_path.parent / layout.JOB_ERROR_TXT
        where.write_text(traceback.format_exc())
        print(f"rlgpt: training job failed: {error} (traceback: {where})", file=sys.stderr)
        result = JobResult(str(job_path.parent), False, error=error)
    rundir.write_json(job_path.parent / layout.RESULT_JSON, result.to_dict())
    return 0


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    sys.exit(main())
