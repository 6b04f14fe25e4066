"""Trainings as Ray tasks (``rlgpt run --executor ray``): the same jobs, retries and step accounting as
`LocalExecutor` (both are `RetryingExecutor`), each attempt a task on a Ray cluster's worker.

An attempt is one Ray task asking for the job's CPUs and GPU fraction (`job_resources`). The task starts the
same child the local executor does (``python -m rlgpt.run.executor RUN/job.json``; Sample Factory's own
rollout worker processes run inside it, on that node) and dies with it both ways: the child gets SIGKILL when
the Ray worker dies. The run directory must be on storage every node sees (one machine, NFS, a mounted
bucket): the job reads its config, writes its checkpoints there and a later attempt, on whichever node,
resumes from them. The result itself comes back as the task's return value.

Ray's own task retries are off (``max_retries=0``): a lost worker (killed, OOM, node gone) is a failed
attempt of `RetryingExecutor.run`, which runs the job again from its newest checkpoint up to
``RunConfig.job_attempts`` times and records each attempt in ``attempts.json``, as locally.

`RayExecutor.run_many` submits several jobs at once (an iteration's candidates, ``train_candidates``): each is
its own Ray task, so they train concurrently on the cluster's workers, each with its own retries.

The LLM never runs here: the loop and its model stay in the driver process; only trainings fan out.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

from rlgpt import layout, rundir
from rlgpt.config import ConfigError, RayConfig
from rlgpt.procs import die_with_parent
from rlgpt.run.executor import JobResult, RetryingExecutor, TrainJob, attempt_result, job_argv


def require_ray() -> Any:
    """The ``ray`` module, or one ConfigError saying how to install it (an optional extra)."""
    try:
        import ray
    except ImportError:
        raise ConfigError("--executor ray needs Ray, an optional extra: pip install 'rlgpt[ray]'") from None
    return ray


def job_resources(job: TrainJob, config: RayConfig) -> dict[str, float]:
    """What one attempt of `job` asks Ray's scheduler for."""
    cpus = config.num_cpus if config.num_cpus is not None else float(job.config.env.num_workers)
    return {"num_cpus": cpus, "num_gpus": config.num_gpus}


def run_attempt_on_worker(run_dir: str) -> dict[str, Any]:
    """The Ray task: run ``run_dir/job.json`` once in a child process of this worker; return its exit status
    and ``result.json``. Records this worker (``ray_worker.json``) so that an operator, or a test, can find
    the process running the job."""
    path = Path(run_dir)
    rundir.write_json(path / layout.RAY_WORKER_JSON, {"pid": os.getpid(), "host": socket.gethostname()})
    process = subprocess.Popen(job_argv(path), preexec_fn=die_with_parent)
    returncode = process.wait()
    result_path = path / layout.RESULT_JSON
    found = json.loads(result_path.read_text()) if result_path.is_file() else None
    return {"returncode": returncode, "result": found, "pid": os.getpid()}


class RayExecutor(RetryingExecutor):
    """Runs each job's attempts as tasks on a Ray cluster (`config.address`; None starts a private one).
    `run_many` submits every job at once (a driver thread per job, each running its own attempts), so an
    iteration's candidates train concurrently on whichever workers have the resources."""

    concurrent = True

    def __init__(self, config: RayConfig, attempts: int = 1) -> None:
        ray = require_ray()
        super().__init__(attempts)
        self.config = config
        if not ray.is_initialized():
            # Trainings log to their run directory (sf_log.txt); forwarding every worker's output here would
            # interleave all running jobs' logs with the loop's own lines.
            ray.init(address=config.address, include_dashboard=False, log_to_driver=False,
                     configure_logging=False)
        self._task = ray.remote(max_retries=0)(run_attempt_on_worker)

    def _attempt(self, run_dir: Path) -> JobResult:
        import ray
        from ray.exceptions import RayError

        job = TrainJob.from_dict(json.loads((run_dir / layout.JOB_JSON).read_text()))
        t0 = time.time()
        ref = self._task.options(**job_resources(job, self.config)).remote(str(run_dir))
        try:
            out = ray.get(ref)
        except KeyboardInterrupt:
            ray.cancel(ref, force=True)
            raise
        except RayError as exc:  # the worker or its node died: a failed attempt, resumed by the next one
            first_line = (str(exc).strip().splitlines() or [""])[0]
            return JobResult(str(run_dir), False, wall_time_s=time.time() - t0,
                             error=f"the Ray worker running the job was lost ({type(exc).__name__}: "
                                   f"{first_line})", extra={"ray_error": type(exc).__name__})
        return attempt_result(run_dir, out["returncode"], time.time() - t0, out["result"])
