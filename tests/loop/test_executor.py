"""The executor and the RL side of the fast agent's setup: the LLM's reward and observation reach the
Sample Factory env (shipped as text in the config), and a failing job is a result, not a crashed loop."""

from __future__ import annotations

import json
import os
import resource
import signal
import threading
from pathlib import Path

import numpy as np
import pytest
from loop_helpers import wait_for

from rlgpt.config import builtin_config_path, load_config
from rlgpt.layout import ATTEMPTS_JSON, JOB_ERROR_TXT, RESULT_JSON, TRAINED_JSON
from rlgpt.rl.sf_config import build_sf_config
from rlgpt.rl.sf_env import make_gym_env, register_task_env
from rlgpt.run.executor import LocalExecutor, TrainJob
from rlgpt.run.records import job_record
from rlgpt.tracking import MetricsLog, read_metrics, spent_steps

REWARD = "def reward(game, prev):\n    return 0.5 + game.inventory['wood'] - prev.inventory['wood']\n"


def smoke_train(run_dir: Path):
    return load_config(builtin_config_path("smoke.yaml"), [f"run_dir={run_dir}", "steps=1024"])


def test_reward_and_observation_are_applied_in_the_sf_env(tmp_path: Path) -> None:
    cfg = smoke_train(tmp_path / "run")
    job = TrainJob(cfg, reward_code=REWARD, observation=("view",))
    sf_cfg = build_sf_config(cfg, tmp_path / "run", register_task_env(cfg.task), setup=job.env_setup())
    env = make_gym_env(sf_cfg.env, sf_cfg)
    obs, _ = env.reset(seed=0)
    assert not np.any(obs["vector"]) and np.any(obs["view"])  # the vector part was left out
    _, reward, _, _, info = env.step(0)
    assert info["dense_reward"] == 0.5 and reward == 0.5
    # Without the flags the env is the plain task env.
    plain = build_sf_config(cfg, tmp_path / "run", register_task_env(cfg.task))
    obs, _ = make_gym_env(plain.env, plain).reset(seed=0)
    assert np.any(obs["vector"])


def test_a_failing_job_is_a_result(tmp_path: Path) -> None:
    cfg = smoke_train(tmp_path / "run")
    bad = "def reward(game, prev):\n    import os\n    return 0\n"
    result = LocalExecutor(attempts=3).run(TrainJob(cfg, reward_code=bad, eval_episodes=1))
    assert not result.ok and "import" in result.error and result.eval is None
    assert json.loads((tmp_path / "run" / RESULT_JSON).read_text())["ok"] is False
    # Bad code fails the same way every time: one attempt, not three.
    assert len(json.loads((tmp_path / "run" / ATTEMPTS_JSON).read_text())) == 1 and result.steps == 0


def test_a_job_that_raises_prints_one_line_and_keeps_the_traceback(
        tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    # A macro file the training cannot load (seen when a run's recorded macros met a stricter compiler).
    macros = tmp_path / "macros.yaml"
    macros.write_text("- name: m\n  description: d\n  code: |\n    def m(game):\n        import os\n")
    cfg = load_config(builtin_config_path("smoke.yaml"),
                      [f"run_dir={tmp_path / 'run'}", "steps=1024", f"macros.file={macros}"])
    result = LocalExecutor(attempts=1).run(TrainJob(cfg))
    assert not result.ok and "MacroFileError" in result.error
    err = capfd.readouterr().err
    assert "Traceback" not in err and f"training job failed: {result.error}" in err
    assert "Traceback" in (tmp_path / "run" / JOB_ERROR_TXT).read_text()


def test_a_job_that_dies_is_a_result(tmp_path: Path) -> None:
    cfg = smoke_train(tmp_path / "run")
    result = LocalExecutor(python="/bin/false", attempts=2).run(TrainJob(cfg))
    assert not result.ok and "status 1" in result.error
    # A process that died is tried again; every attempt is on record.
    attempts = json.loads((tmp_path / "run" / ATTEMPTS_JSON).read_text())
    assert [a["returncode"] for a in attempts] == [1, 1] and result.extra["attempts"] == 2


@pytest.mark.slow
def test_a_job_killed_mid_training_resumes_from_its_checkpoint_and_counts_its_steps(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    # Seconds of training past the first checkpoint (saved every second): the kill lands mid-training.
    cfg = load_config(builtin_config_path("smoke.yaml"), [f"run_dir={run_dir}", "steps=24576",
                                                          "save_every_sec=1"])
    executor = LocalExecutor(attempts=2)
    outcome = {}
    job = threading.Thread(target=lambda: outcome.update(result=executor.run(TrainJob(cfg, eval_episodes=1))))
    job.start()
    try:
        # The first attempt's child, once it has saved a checkpoint past step 0 (Sample Factory saves one
        # at the start) and before it finished training.
        def trained_checkpoint() -> bool:
            names = [p.stem for p in run_dir.glob("checkpoint_p0/checkpoint_*.pth")]
            return executor.process is not None and any(int(n.rsplit("_", 1)[1]) > 0 for n in names)

        wait_for(trained_checkpoint, "a checkpoint of the first attempt")
        child = executor.process
        os.kill(child.pid, signal.SIGKILL)  # as the OOM killer does: no result, no clean stop
        killed_before_the_end = not (run_dir / TRAINED_JSON).exists()
    finally:
        job.join()
    assert killed_before_the_end, "the first attempt finished its training before it was killed"
    result = outcome["result"]
    assert result.ok, result.error
    attempts = json.loads((run_dir / ATTEMPTS_JSON).read_text())
    assert [(a["ok"], a.get("returncode")) for a in attempts] == [(False, -signal.SIGKILL), (True, None)]
    # The second attempt resumed from the first one's checkpoint instead of starting over ...
    sessions = {}
    for row in read_metrics(run_dir / "metrics.csv"):
        sessions.setdefault(int(row["session"]), []).append(row)
    assert sorted(sessions) == [0, 1]
    assert int(float(sessions[1][0]["resumed_from"])) > 0
    resumed = int(float(sessions[1][0]["resumed_from"]))
    killed_reached = max(resumed, *(int(float(r["env_steps"])) for r in sessions[0]))
    final = json.loads((run_dir / TRAINED_JSON).read_text())["env_steps"]  # the policy's own count
    # ... and the steps of both attempts count: the killed one's as well as the resumed one's.
    assert result.steps == killed_reached + final - resumed >= final >= cfg.steps
    assert job_record(result)["steps"] == result.steps and job_record(result)["attempts"] == 2
    # A job whose training finished (as after an evaluation that crashed) is only evaluated again.
    again = LocalExecutor().run(TrainJob(cfg, eval_episodes=1))
    assert again.ok and again.eval is not None and again.steps == result.steps
    assert {int(r["session"]) for r in read_metrics(run_dir / "metrics.csv")} == {0, 1}


def test_spent_steps_count_every_session_and_the_work_a_kill_lost(tmp_path: Path) -> None:
    path = tmp_path / "metrics.csv"
    assert spent_steps(path) == 0
    killed = MetricsLog(path)  # trained to 1000, saved a checkpoint at 512, then killed
    for steps in (0, 1000):
        killed.write(env_steps=steps, resumed_from=0)
    killed.close()
    resumed = MetricsLog(path)  # resumed from 512, its last row at 2048, finished at 2100
    for steps in (512, 2048):
        resumed.write(env_steps=steps, resumed_from=512)
    resumed.close()
    assert spent_steps(path) == 1000 + (2048 - 512)
    assert spent_steps(path, final_steps=2100) == 1000 + (2100 - 512)
    # A session killed before its first row still trained up to the checkpoint the next one resumed from.
    quiet = tmp_path / "quiet.csv"
    for session, rows in enumerate(([0], [768, 4096])):
        log = MetricsLog(quiet)
        for steps in rows:
            log.write(env_steps=steps, resumed_from=0 if session == 0 else 768)
        log.close()
    assert spent_steps(quiet) == 768 + (4096 - 768)


def _evaluate_past_the_cap(job: TrainJob) -> dict:
    """In a forked child: `run_job` of an evaluate-only job whose evaluation allocates 256 MiB in one C call
    (as a macro growing memory inside one builtin would) and reports what happened."""
    import rlgpt.rl.evaluate as evaluate_module
    from rlgpt.rl.evaluate import EvalReport
    from rlgpt.run.executor import run_job

    seen: dict = {}

    def evaluate(run_dir, **kwargs):
        seen["limit"] = resource.getrlimit(resource.RLIMIT_DATA)[0]
        try:
            seen["allocated"] = len(bytearray(256 * 2**20))
        except MemoryError:
            seen["allocated"] = 0
        return EvalReport(job.config.task, 0, 0, 0.0, {}, 0.0, 0.0, 0.0, False)

    evaluate_module.evaluate = evaluate
    result = run_job(job)
    return {"ok": result.ok, **seen}


def test_the_evaluation_of_a_job_runs_under_the_macro_memory_backstop(tmp_path: Path) -> None:
    from rlgpt.macro.contain import ContainLimits, run_contained

    cfg = smoke_train(tmp_path / "run")
    cfg.macros.memory_limit_mb = 64
    job = TrainJob(cfg, eval_episodes=1, evaluate_only=True)
    # The child's own OS limits are off, so only the job's backstop can stop the allocation.
    out = run_contained(_evaluate_past_the_cap, job, limits=ContainLimits(memory_mb=0, cpu_seconds=0))
    assert out.ok, out.diagnostic
    assert out.value["ok"] and out.value["limit"] != resource.RLIM_INFINITY
    assert out.value["allocated"] == 0  # MemoryError in the evaluation, not 256 MiB taken
    # Disabled (0), the same allocation goes through: the test can tell the two apart.
    cfg.macros.memory_limit_mb = 0
    out = run_contained(_evaluate_past_the_cap, TrainJob(cfg, eval_episodes=1, evaluate_only=True),
                        limits=ContainLimits(memory_mb=0, cpu_seconds=0))
    assert out.ok and out.value["allocated"] == 256 * 2**20
