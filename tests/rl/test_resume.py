"""A training run killed with SIGKILL continues from its last checkpoint when the same command is re-run."""

import glob
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import torch

from rlgpt.config import builtin_config_path
from rlgpt.tracking import read_metrics

pytestmark = pytest.mark.slow
ENV = dict(os.environ, OMP_NUM_THREADS="1", WANDB_MODE="offline")


def command(run_dir: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "rlgpt.cli",
        "train",
        "--config",
        str(builtin_config_path("smoke.yaml")),
        "--run-dir",
        str(run_dir),
        "--steps",
        "30000",
        "--set",
        "save_every_sec=2",
        "--set",
        "eval_episodes=0",
        "--wandb",
    ]


def checkpoints(run_dir: Path) -> list[str]:
    return sorted(glob.glob(str(run_dir / "checkpoint_p0" / "checkpoint_*.pth")))


def start_and_wait_for_a_checkpoint(run_dir: Path) -> tuple[subprocess.Popen, list[psutil.Process]]:
    """Start a training run; once it has a checkpoint and two metrics rows, return it and its workers."""
    proc = subprocess.Popen(
        command(run_dir), env=ENV, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    deadline = time.time() + 240
    try:
        while time.time() < deadline:
            metrics = run_dir / "metrics.csv"
            if checkpoints(run_dir) and metrics.exists() and len(read_metrics(metrics)) >= 2:
                return proc, psutil.Process(proc.pid).children(recursive=True)
            assert proc.poll() is None, "training ended before it could be killed"
            time.sleep(0.5)
        pytest.fail("no checkpoint and metrics within 240 s")
    except BaseException:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise


def assert_no_process_left(workers: list[psutil.Process]) -> None:
    """Every Sample Factory child of a stopped trainer exits on its own, within seconds."""
    assert workers, "the trainer had no worker processes"
    _, alive = psutil.wait_procs(workers, timeout=30)
    for proc in alive:
        proc.kill()
    assert not alive, f"orphaned workers kept running: {[p.pid for p in alive]}"


def test_sigkill_then_same_command_resumes(tmp_path):
    run_dir = tmp_path / "run"
    first, workers = start_and_wait_for_a_checkpoint(run_dir)
    # Only the trainer is killed, as `kill -9 PID` would: its workers must not outlive it.
    first.kill()
    first.wait()
    assert first.returncode == -signal.SIGKILL
    assert_no_process_left(workers)

    rows_before = read_metrics(run_dir / "metrics.csv")
    saved = torch.load(checkpoints(run_dir)[-1], weights_only=False)["env_steps"]
    assert saved > 0

    second = subprocess.run(command(run_dir), env=ENV, capture_output=True, text=True, timeout=600)
    assert second.returncode == 0, second.stderr[-3000:]

    log = (run_dir / "sf_log.txt").read_text()
    assert "Loaded experiment state" in log
    rows_after = read_metrics(run_dir / "metrics.csv")
    assert rows_after[: len(rows_before)] == rows_before, "rows logged before the kill were lost"
    resumed = [r for r in rows_after if r["session"] == "1"]
    assert resumed, "the second session logged nothing"
    assert int(resumed[0]["env_steps"]) >= saved > 0, "the second session started from scratch"
    assert (
        int(resumed[-1]["env_steps"]) >= 30000
        or torch.load(checkpoints(run_dir)[-1], weights_only=False)["env_steps"] >= 30000
    )

    # Both sessions logged to the same W&B run id.
    offline_runs = sorted((run_dir / "wandb").glob("offline-run-*"))
    assert len(offline_runs) == 2, offline_runs
    assert len({p.name.rsplit("-", 1)[-1] for p in offline_runs}) == 1


def test_sigterm_stops_the_run_cleanly(tmp_path):
    run_dir = tmp_path / "run"
    proc, workers = start_and_wait_for_a_checkpoint(run_dir)
    proc.terminate()
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr.decode()[-2000:]
    assert "interrupted; re-run the same command to resume" in stderr.decode()
    assert_no_process_left(workers)
    assert read_metrics(run_dir / "metrics.csv") and checkpoints(run_dir)
