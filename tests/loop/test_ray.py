"""Trainings on a real local Ray cluster (`rlgpt.run.ray_executor`) and sweeps over it (`rlgpt.run.sweep`).

Ray probes cloud metadata addresses when it starts, so every cluster test runs inside its own network
namespace (``unshare -n``, loopback up): the test runs itself again there, in a pytest of its own, which
starts a 2-CPU head node (2 worker processes run jobs of 1 CPU side by side) on a private port, runs the
scenario and stops the cluster. Needs root for ``unshare`` (skipped otherwise) and the ``ray`` extra.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest
from loop_helpers import SMOKE, assert_error_line, cli, wait_for

from rlgpt import layout
from rlgpt.config import load_run_config
from rlgpt.run.executor import LocalExecutor, TrainJob
from rlgpt.tracking import read_metrics

IN_NETNS = "RLGPT_TEST_IN_NETNS"
"""Set in the namespace's pytest: run the scenario instead of starting the namespace."""
PORT = 6390
"""The head node's port: free in any fresh namespace, whatever other clusters run on this machine."""
ADDRESS = f"127.0.0.1:{PORT}"
RAY = [sys.executable, str(Path(sys.executable).parent / "ray")]
"""The ``ray`` CLI run by this interpreter (its script's shebang may name another one, in a copied venv):
the cluster's workers then run this interpreter and import this checkout's rlgpt."""


def in_netns(test):
    """Run `test` in a pytest inside a new network namespace with loopback up."""

    @functools.wraps(test)
    def wrapper(*args, **kwargs):
        if os.environ.get(IN_NETNS) == "1":
            return test(*args, **kwargs)
        pytest.importorskip("ray")
        if os.geteuid() != 0 or shutil.which("unshare") is None:
            pytest.skip("needs root and unshare for a private network namespace")
        node = os.environ["PYTEST_CURRENT_TEST"].rsplit(" ", 1)[0]
        env = dict(os.environ, **{IN_NETNS: "1"}, OMP_NUM_THREADS="1")
        script = 'ip link set lo up && exec "$0" -m pytest -q -x -p no:cacheprovider -s "$1"'
        proc = subprocess.run(["unshare", "-n", "sh", "-c", script, sys.executable, node], env=env,
                              capture_output=True, text=True)
        assert proc.returncode == 0, (proc.stdout + proc.stderr)[-6000:]

    return wrapper


@pytest.fixture
def cluster():
    """A 2-CPU Ray head node on `PORT` (inside the namespace only); stopped afterwards."""
    if os.environ.get(IN_NETNS) != "1":
        yield None
        return
    temp = tempfile.mkdtemp(prefix="rt", dir="/tmp")  # short: Ray's socket paths must fit 107 bytes
    subprocess.run([*RAY, "start", "--head", f"--port={PORT}", "--num-cpus=2", "--include-dashboard=false",
                    "--disable-usage-stats", f"--temp-dir={temp}"], check=True, capture_output=True)
    try:
        yield ADDRESS
    finally:
        import ray

        if ray.is_initialized():
            ray.shutdown()
        subprocess.run([*RAY, "stop", "--force"], capture_output=True)
        shutil.rmtree(temp, ignore_errors=True)


def cell_config(run_dir: Path, *extra: str):
    return load_run_config(SMOKE, [f"run_dir={run_dir}", "steps=2048", "executor=ray",
                                   f"ray.address={ADDRESS}", "ray.num_cpus=1", "train.save_every_sec=1",
                                   *extra])


def sessions(train_dir: Path) -> dict[int, list[dict]]:
    out: dict[int, list[dict]] = {}
    for row in read_metrics(train_dir / layout.METRICS_CSV):
        out.setdefault(int(row["session"]), []).append(row)
    return out


def trained_checkpoint(train_dir: Path) -> bool:
    """A checkpoint past step 0 (Sample Factory saves one at the start)."""
    names = [p.stem for p in train_dir.glob("checkpoint_p0/checkpoint_*.pth")]
    return any(int(n.rsplit("_", 1)[1]) > 0 for n in names)


def test_executor_ray_without_ray_is_one_error_line(tmp_path: Path) -> None:
    code = ("import sys; sys.modules['ray'] = None; from rlgpt.cli import main; "
            f"sys.exit(main(['run', '--mode', 'ppo', '--executor', 'ray', '--run-dir', '{tmp_path / 'r'}']))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert_error_line(proc, "--executor ray needs Ray", "pip install 'rlgpt[ray]'")
    assert not (tmp_path / "r" / layout.RUN_YAML).exists()  # refused before the run started


@pytest.mark.slow
@in_netns
def test_a_sweep_on_ray_survives_a_killed_worker_and_equals_local(tmp_path: Path, cluster) -> None:
    from rlgpt.run.ray_executor import RayExecutor
    from rlgpt.run.sweep import cells, read_sweep, run_sweep

    out = tmp_path / "sweep"
    matrix = cells(["collect_wood"], ["ppo"], [0, 1])
    executor = RayExecutor(cell_config(out / "x").ray, attempts=2)
    outcome: dict = {}
    # Trainings of seconds past their first checkpoint (saved every second): the kill lands mid-training.
    steps = 8192
    sweep = threading.Thread(target=lambda: outcome.update(record=run_sweep(
        out, matrix, lambda c, d: cell_config(d, f"task={c.task}", f"mode={c.mode}", f"seed={c.seed}",
                                              f"steps={steps}"),
        executor, parallel=2)))
    sweep.start()
    victim = out / matrix[1].name / layout.PPO_DIR / layout.TRAIN_DIR
    try:
        # Seed 1's training, once it saved a trained checkpoint: kill the Ray worker process running it.
        wait_for(lambda: ((victim / layout.RAY_WORKER_JSON).is_file() and trained_checkpoint(victim))
                 or (victim / layout.TRAINED_JSON).exists(), "a checkpoint of seed 1's first attempt")
        assert not (victim / layout.TRAINED_JSON).exists(), "the training finished before it could be killed"
        killed = json.loads((victim / layout.RAY_WORKER_JSON).read_text())["pid"]
        os.kill(killed, signal.SIGKILL)
    finally:
        sweep.join()
    record = outcome["record"]
    assert [c["state"] for c in record["cells"]] == ["done", "done"], record
    assert "| collect_wood |" in record["table"] and Path(record["report"]["markdown"]).is_file()
    assert read_sweep(out) == record

    # Both cells trained on Ray workers, side by side in two worker processes (both jobs were submitted at
    # once to 2 free CPUs); the retry ran on a new worker (it may be seed 0's, once that one was done).
    other = out / matrix[0].name / layout.PPO_DIR / layout.TRAIN_DIR
    worker_of = {d: json.loads((d / layout.RAY_WORKER_JSON).read_text())["pid"] for d in (other, victim)}
    assert worker_of[other] != killed and worker_of[victim] != killed

    # The killed attempt is on record as a lost worker; the retry resumed from its checkpoint.
    attempts = json.loads((victim / layout.ATTEMPTS_JSON).read_text())
    assert [(a["ok"], a.get("ray_error")) for a in attempts] == [(False, "WorkerCrashedError"), (True, None)]
    by_session = sessions(victim)
    assert sorted(by_session) == [0, 1] and int(float(by_session[1][0]["resumed_from"])) > 0
    assert sorted(sessions(other)) == [0]
    summary = json.loads((out / matrix[1].name / layout.SUMMARY_JSON).read_text())
    final = json.loads((victim / layout.TRAINED_JSON).read_text())["env_steps"]
    resumed = int(float(by_session[1][0]["resumed_from"]))
    killed_reached = max(resumed, *(int(float(r["env_steps"])) for r in by_session[0]))
    # The killed attempt's steps count as well (those past its checkpoint, when it logged any).
    assert summary["steps_used"] == killed_reached + final - resumed >= final >= steps

    # The results equal a local run's: the local executor on the same run directories (finished: it only
    # evaluates) gives the evaluation the sweep reported.
    for cell in matrix:
        train_dir = out / cell.name / layout.PPO_DIR / layout.TRAIN_DIR
        job = TrainJob.from_dict(json.loads((train_dir / layout.JOB_JSON).read_text()))
        local = LocalExecutor().run(job)
        reported = json.loads((out / cell.name / layout.PPO_DIR / layout.TRAINING_JSON).read_text())
        assert local.ok and local.eval == reported["report"]
        assert json.loads((out / cell.name / layout.SUMMARY_JSON).read_text())["success_rate"] == \
            local.eval["success_rate"]


@pytest.mark.slow
@in_netns
def test_a_killed_sweep_driver_resumes_without_redoing_finished_cells(tmp_path: Path, cluster) -> None:
    out = tmp_path / "sweep"
    args = ["sweep", "--tasks", "collect_wood", "--modes", "ppo", "--seeds", "0,1", "--out", str(out),
            "--config", SMOKE, "--steps", "16384", "--executor", "ray", "--ray-address", ADDRESS,
            "--parallel", "1", "--set", "ray.num_cpus=1", "--set", "train.save_every_sec=1"]
    first, second = (out / n / layout.PPO_DIR / layout.TRAIN_DIR for n in ("collect_wood-ppo-s0",
                                                                             "collect_wood-ppo-s1"))
    env = dict(os.environ, OMP_NUM_THREADS="1")
    driver = subprocess.Popen([sys.executable, "-m", "rlgpt.cli", *args], env=env, stderr=subprocess.PIPE,
                              stdout=subprocess.DEVNULL, text=True)
    try:
        # One cell finished, the other one's training has a checkpoint: kill the driver, as a lost login
        # session or the OOM killer would.
        wait_for(lambda: (first.parent.parent / layout.SUMMARY_JSON).is_file()
                 and (second / layout.RAY_WORKER_JSON).is_file() and trained_checkpoint(second),
                 "the first cell done and a checkpoint of the second", driver)
        driver.send_signal(signal.SIGKILL)
    finally:
        driver.wait()
    worker = json.loads((second / layout.RAY_WORKER_JSON).read_text())["pid"]
    # Ray ends the dead driver's tasks (and the trainings dying with them) before the run is resumed.
    wait_for(lambda: not Path(f"/proc/{worker}").exists(), "the dead driver's Ray worker to end")
    assert not (second / layout.TRAINED_JSON).exists(), "the training ended before the driver's death did"
    done_before = (first.parent.parent / layout.SUMMARY_JSON).read_text()
    mtime = (first.parent.parent / layout.SUMMARY_JSON).stat().st_mtime_ns

    proc = cli(*args)
    assert proc.returncode == 0, proc.stderr
    record = json.loads((out / layout.SWEEP_JSON).read_text())
    assert [(c["state"], c["resumed"]) for c in record["cells"]] == [("done", False), ("done", True)]
    assert "| collect_wood |" in proc.stdout and "n=2" in proc.stdout  # two seeds in the Table 2 cell
    # The finished cell was read, not run again ...
    summary = first.parent.parent / layout.SUMMARY_JSON
    assert summary.read_text() == done_before and summary.stat().st_mtime_ns == mtime
    assert sorted(sessions(first)) == [0]
    # ... and the killed one resumed from its checkpoint instead of starting over.
    by_session = sessions(second)
    assert sorted(by_session) == [0, 1] and int(float(by_session[1][0]["resumed_from"])) > 0


def test_a_sweep_with_a_bad_cell_config_fails_before_running(tmp_path: Path) -> None:
    proc = cli("sweep", "--tasks", "collect_wood", "--modes", "ppo,nonsense", "--out", str(tmp_path / "s"),
               "--config", SMOKE)
    assert_error_line(proc, "mode must be one of")
    assert not (tmp_path / "s" / layout.SWEEP_JSON).exists()


@pytest.mark.slow
@in_netns
def test_an_iterations_candidates_train_as_concurrent_ray_tasks(tmp_path: Path, cluster) -> None:
    from test_candidates import assert_candidates_trained, prefill_iteration

    from rlgpt.run.runner import run

    run_dir = tmp_path / "run"
    cfg = cell_config(run_dir, "steps=4096", "success_threshold=0", "train_candidates=2", "eval_marks=[]",
                      "llm.replay_only=true", f"llm.cache_dir={run_dir / 'llm_cache'}")
    it = prefill_iteration(run_dir)
    dirs = [layout.candidate_dir(it, k) for k in (0, 1)]
    outcome: dict = {}
    loop = threading.Thread(target=lambda: outcome.update(summary=run(cfg)))
    loop.start()
    overlapped: list[set[int]] = []

    def in_flight() -> bool:
        """Both candidates' Ray tasks started and neither has its result yet (a task writes its worker
        record when it starts and the job's result.json when it ends)."""
        return all((d / layout.RAY_WORKER_JSON).is_file() and not (d / layout.RESULT_JSON).is_file()
                   for d in dirs)

    def workers_in_flight() -> set[int]:
        """The Ray workers running the two trainings, read while both run: the selected candidate's test
        evaluation later runs in its directory too, on whichever worker is free, and rewrites its record."""
        return {json.loads((d / layout.RAY_WORKER_JSON).read_text())["pid"] for d in dirs}

    try:
        # Run one after another, the first candidate's result would exist before the second task starts.
        wait_for(lambda: (in_flight() and not overlapped.append(workers_in_flight())) or not loop.is_alive(),
                 "both candidates' Ray tasks in flight, or the loop's end")
    finally:
        loop.join()
    assert overlapped, "the candidates never trained at the same time"
    assert len(overlapped[0]) == 2, overlapped  # two Ray worker processes, one per candidate
    assert_candidates_trained(run_dir, outcome["summary"], cfg)
