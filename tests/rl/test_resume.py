"""A training run killed with SIGKILL continues from its last checkpoint when the same command is re-run."""

import glob
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import torch

from rlgpt.config import builtin_config_path
from rlgpt.rl.macro_marker import read_marker
from rlgpt.tracking import read_metrics

pytestmark = pytest.mark.slow
ENV = dict(os.environ, OMP_NUM_THREADS="1", WANDB_MODE="offline")


def command(run_dir: Path, steps: int = 30000, extra: tuple[str, ...] = ("--wandb",)) -> list[str]:
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
        str(steps),
        "--set",
        "save_every_sec=2",
        "--set",
        "eval_episodes=0",
        *extra,
    ]


def macro_command(run_dir: Path) -> list[str]:
    """A seconds-long run whose action space has the go_to_tree macro beside the primitives."""
    return command(run_dir, 12000, ("--set", f"macros.file={builtin_config_path('macros/go_to_tree.yaml')}"))


def checkpoints(run_dir: Path) -> list[str]:
    return sorted(glob.glob(str(run_dir / "checkpoint_p0" / "checkpoint_*.pth")))


def saved_env_steps(run_dir: Path) -> int | None:
    """env_steps of the newest checkpoint, or None while there is none (or it was just rotated away)."""
    found = checkpoints(run_dir)
    if not found:
        return None
    try:
        return int(torch.load(found[-1], weights_only=False)["env_steps"])
    except FileNotFoundError:  # Sample Factory keeps two checkpoints and deletes the oldest
        return None


class Run:
    """A training run started as a user would; stderr goes to a file (a pipe nobody reads could fill up)."""

    def __init__(self, argv: list[str], log: Path) -> None:
        self.log = log
        with open(log, "wb") as err:
            self.proc = subprocess.Popen(
                argv, env=ENV, start_new_session=True, stdout=subprocess.DEVNULL, stderr=err
            )

    def stderr(self) -> str:
        return self.log.read_text(errors="replace")

    def wait(self, timeout: float = 180) -> int:
        return self.proc.wait(timeout=timeout)

    def kill_all(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()


def start_and_wait_for_a_checkpoint(
    run_dir: Path, argv: list[str] | None = None
) -> tuple[Run, list[psutil.Process]]:
    """Start a training run; once a checkpoint of a trained policy (env_steps > 0) and two metrics rows
    exist, return it and its workers.

    Sample Factory saves a checkpoint before the first training step too (env_steps == 0), and metrics
    rows are written before any training: neither says that training has been checkpointed.
    """
    run = Run(argv or command(run_dir), run_dir.parent / f"{run_dir.name}-stderr.txt")
    deadline = time.time() + 240
    try:
        while time.time() < deadline:
            metrics = run_dir / "metrics.csv"
            if (saved_env_steps(run_dir) or 0) > 0 and metrics.exists() and len(read_metrics(metrics)) >= 2:
                return run, psutil.Process(run.proc.pid).children(recursive=True)
            assert run.proc.poll() is None, f"training ended before it was killed: {run.stderr()[-2000:]}"
            time.sleep(0.2)
        pytest.fail("no checkpoint of a trained policy and metrics within 240 s")
    except BaseException:
        run.kill_all()
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
    first.proc.kill()
    first.proc.wait()
    assert first.proc.returncode == -signal.SIGKILL
    assert_no_process_left(workers)

    rows_before = read_metrics(run_dir / "metrics.csv")
    saved = torch.load(checkpoints(run_dir)[-1], weights_only=False)["env_steps"]
    assert saved > 0
    # The learner may die mid-save: Sample Factory then leaves a torn `checkpoint_temp`, which it would
    # load first on resume (and, failing, start from scratch).
    (run_dir / "checkpoint_p0" / "checkpoint_temp").write_bytes(b"PK\x03\x04 torn")

    second = subprocess.run(command(run_dir), env=ENV, capture_output=True, text=True, timeout=600)
    assert second.returncode == 0, second.stderr[-3000:]

    log = (run_dir / "sf_log.txt").read_text()
    assert "Loaded experiment state" in log
    assert json.loads((run_dir / "config.json").read_text())["batched_sampling"], "not the batch backend"
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
    run, workers = start_and_wait_for_a_checkpoint(run_dir)
    run.proc.terminate()
    assert run.wait(timeout=120) == 130, run.stderr()[-2000:]
    assert "interrupted; re-run the same command to resume" in run.stderr()
    assert_no_process_left(workers)
    assert read_metrics(run_dir / "metrics.csv") and checkpoints(run_dir)


def env_worker(run: Run, run_dir: Path) -> tuple[int, Path]:
    """The run's env worker (the trainer's child that keeps a running-macro marker) and its marker."""
    children = {p.pid for p in psutil.Process(run.proc.pid).children(recursive=True)}
    # Sample Factory also makes one env in a short-lived process to learn the spaces; that one is gone.
    found = [m for m in (run_dir / ".workers").iterdir() if int(m.name) in children]
    assert len(found) == 1, (found, children)
    return int(found[0].name), found[0]


def kill_worker_when(pid: int, marker: Path, wanted: str) -> None:
    """SIGKILL the worker at a moment its marker reads ``wanted`` (a macro name, or "" for none running).

    The marker is re-read while the worker is stopped (SIGSTOP, and seen stopped), so what the worker was
    doing when it died is known, not guessed; otherwise it is resumed and the next chance is taken.
    """
    worker = psutil.Process(pid)
    deadline = time.time() + 120
    while time.time() < deadline:
        if read_marker(marker) == wanted:
            worker.suspend()
            while worker.status() != psutil.STATUS_STOPPED:
                time.sleep(0.001)
            if read_marker(marker) == wanted:
                worker.kill()
                return
            worker.resume()
        time.sleep(0.001)
    pytest.fail(f"the env worker's marker never read {wanted!r} within 120 s")


def dies_and_ends_the_run(run_dir: Path, wanted: str) -> tuple[str, int]:
    """Kill the env worker of a macro run while its marker reads ``wanted``; return the run's last stderr
    line and the env_steps checkpointed before the kill."""
    run, _ = start_and_wait_for_a_checkpoint(run_dir, macro_command(run_dir))
    try:
        pid, marker = env_worker(run, run_dir)
        saved = saved_env_steps(run_dir)
        kill_worker_when(pid, marker, wanted)
        code = run.wait(timeout=180)
    finally:
        run.kill_all()
    assert code == 1, run.stderr()[-3000:]
    what = f"while running macro {wanted!r}" if wanted else "while no macro was running"
    assert run.stderr().strip().splitlines()[-1] == (
        f"rlgpt: error: env worker {pid} (rollout_proc0) died (SIGKILL) {what}; checkpoints and metrics "
        f"kept in {run_dir.resolve()}, re-run the same command to resume"
    )
    return run.stderr(), saved


def test_env_worker_dying_mid_macro_names_the_macro_and_the_same_command_resumes(tmp_path):
    run_dir = tmp_path / "run"
    _, saved = dies_and_ends_the_run(run_dir, "go_to_tree")
    # The learner outlived the worker and saved once more as the run stopped; metrics rows are kept.
    assert saved_env_steps(run_dir) >= saved > 0
    rows_before = read_metrics(run_dir / "metrics.csv")
    assert rows_before
    assert not (run_dir / ".workers").exists(), "markers of the dead run were left behind"

    second = subprocess.run(macro_command(run_dir), env=ENV, capture_output=True, text=True, timeout=600)
    assert second.returncode == 0, second.stderr[-3000:]
    assert "Loaded experiment state" in (run_dir / "sf_log.txt").read_text()
    rows_after = read_metrics(run_dir / "metrics.csv")
    assert rows_after[: len(rows_before)] == rows_before
    resumed = [r for r in rows_after if r["session"] == "1"]
    assert resumed and int(resumed[0]["env_steps"]) >= saved > 0, "the second session started from scratch"
    assert saved_env_steps(run_dir) >= 12000


def test_env_worker_dying_between_macros_says_no_macro_was_running(tmp_path):
    run_dir = tmp_path / "run"
    _, saved = dies_and_ends_the_run(run_dir, "")
    assert saved_env_steps(run_dir) >= saved > 0
    assert read_metrics(run_dir / "metrics.csv")


def learner_pid(run_dir: Path, workers: list[psutil.Process]) -> int:
    """The learner process: only the learner saves checkpoints, and the log tags each line with its pid."""
    savers = re.findall(r"\]\[0*(\d+)\] Saving \S+checkpoint_", (run_dir / "sf_log.txt").read_text())
    learner = int(savers[-1])
    assert learner in {w.pid for w in workers}
    return learner


def test_a_stop_that_never_completes_after_a_death_still_ends_the_run(tmp_path):
    """A component that never answers the stop cannot keep a run with a dead worker alive: here the learner
    is SIGSTOPped; in the wild, a process blocks for good on a queue lock that the killed worker held."""
    run_dir = tmp_path / "run"
    argv = macro_command(run_dir) + ["--set", "stop_grace_sec=3"]
    run, workers = start_and_wait_for_a_checkpoint(run_dir, argv)
    try:
        learner = learner_pid(run_dir, workers)
        pid, marker = env_worker(run, run_dir)
        psutil.Process(learner).suspend()
        worker = psutil.Process(pid)
        worker.suspend()  # stopped first, so that the marker read says what it was doing when it died
        while worker.status() != psutil.STATUS_STOPPED:
            time.sleep(0.001)
        macro = read_marker(marker)
        worker.kill()
        code = run.wait(timeout=180)
    finally:
        run.kill_all()
    assert code == 1, run.stderr()[-3000:]
    what = f"while running macro {macro!r}" if macro else "while no macro was running"
    assert run.stderr().strip().splitlines()[-1] == (
        f"rlgpt: error: env worker {pid} (rollout_proc0) died (SIGKILL) {what}; checkpoints and metrics "
        f"kept in {run_dir.resolve()}, re-run the same command to resume"
    )
    assert_no_process_left(workers)
    assert not (run_dir / ".workers").exists(), "markers of the dead run were left behind"


def test_learner_dying_ends_the_run_with_one_line(tmp_path):
    """Sample Factory alone waits forever for a dead learner's batcher (a thread of that process)."""
    run_dir = tmp_path / "run"
    run, workers = start_and_wait_for_a_checkpoint(run_dir)
    try:
        learner = learner_pid(run_dir, workers)
        saved = saved_env_steps(run_dir)
        os.kill(learner, signal.SIGKILL)
        code = run.wait(timeout=180)
    finally:
        run.kill_all()
    assert code == 1, run.stderr()[-3000:]
    assert run.stderr().strip().splitlines()[-1] == (
        f"rlgpt: error: learner {learner} (learner_proc0) died (SIGKILL); checkpoints and metrics kept in "
        f"{run_dir.resolve()}, re-run the same command to resume"
    )
    assert_no_process_left(workers)
    assert saved_env_steps(run_dir) >= saved > 0
    assert read_metrics(run_dir / "metrics.csv")
