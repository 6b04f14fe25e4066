"""What `rlgpt run` shows on the console: its own lines only (Sample Factory's and llama.cpp's log lines go
to the run's log files), elapsed time and tokens while a phase runs, and wall time by phase at the end."""

from __future__ import annotations

import io
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from loop_helpers import SMOKE, cli

from rlgpt.llm.model_store import QWEN_CODER_0_5B, ensure_model
from rlgpt.rl.worker_boot import SF_CONSOLE_LEVEL_ENV
from rlgpt.tracking import LoopProgress

SF_LINE = re.compile(r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\]\[\d+\]")
"""The head of every Sample Factory log line (``[date time,ms][pid] message``)."""


@pytest.mark.slow
def test_a_run_prints_no_third_party_log_line_and_ends_with_wall_time_by_phase(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The default console, whatever level an earlier in-process training of this test session left for
    # its children in the environment.
    monkeypatch.delenv(SF_CONSOLE_LEVEL_ENV, raising=False)
    run_dir = tmp_path / "run"
    proc = cli("run", "--config", SMOKE, "--run-dir", str(run_dir), "--mode", "ppo", "--steps", "1024")
    assert proc.returncode == 0, proc.stderr
    console = proc.stdout + proc.stderr
    assert not SF_LINE.search(console), console
    assert "\x1b[" not in console  # no colour codes: Sample Factory's console handler wrote nothing
    for line in ("No checkpoints found", "Saved parameter configuration for experiment"):
        assert line not in console
        assert line in (run_dir / "ppo" / "train" / "sf_log.txt").read_text()
    assert "rlgpt run: collect_wood | iteration 1/1 | train " in proc.stderr
    ended = proc.stderr.strip().splitlines()[-1]
    duration = r"(\d+ min )?\d+ s"
    assert re.fullmatch(rf"rlgpt run: wall time {duration} by phase: (\w+ {duration}(, )?)+", ended), ended
    assert "train" in ended
    # A trained policy loaded outside its training (a test evaluation's child, `rlgpt replay`) is as quiet.
    replayed = cli("replay", str(run_dir), "--length", "20", "--out", str(tmp_path / "r.gif"), timeout=300)
    assert replayed.returncode == 0, replayed.stderr
    assert replayed.stderr == "" and not SF_LINE.search(replayed.stdout), replayed.stdout


def test_llama_cpp_warnings_go_to_the_backends_log_not_the_console(tmp_path: Path) -> None:
    """The embedded model's tokenizer (loaded without weights in the run's process) makes llama.cpp warn
    on the C-level stderr; the warning is in the backend's log directory, the console stays clean."""
    path = ensure_model(QWEN_CODER_0_5B)
    code = ("import sys; from rlgpt.llm.isolated import IsolatedBackend\n"
            "b = IsolatedBackend(sys.argv[1], log_dir=sys.argv[2]); print(b.count_tokens('hello world'))\n")
    proc = subprocess.run([sys.executable, "-c", code, str(path), str(tmp_path / "logs")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "2" and proc.stderr == ""
    assert "n_ctx_train" in (tmp_path / "logs" / "tokenizer.log").read_text()


def wait_for_text(stream: io.StringIO, text: str) -> str:
    deadline = time.monotonic() + 60  # a bound for a hung thread, not a timing assumption
    while text not in stream.getvalue():
        assert time.monotonic() < deadline, stream.getvalue()
        time.sleep(0.01)
    return stream.getvalue()


def test_an_llm_phase_shows_elapsed_seconds_and_tokens_while_it_runs(tmp_path: Path) -> None:
    stream = io.StringIO()
    answered = [0, 0]
    progress = LoopProgress(4096, 2, stream=stream, log_path=tmp_path / "phases.jsonl", every_s=0.01)
    in_flight = ["slow"]
    progress.tokens = lambda: tuple(answered)
    progress.waiting = lambda: in_flight[0]
    progress.phase("slow", 0, "collect_wood")
    wait_for_text(stream, "tokens 0 in / 0 out, the model is answering the slow request\n")
    answered[:] = [1200, 80]  # the request was answered
    in_flight[0] = None
    wait_for_text(stream, "tokens 1,200 in / 80 out\n")
    progress.phase("train", 0, "collect_wood")  # a training prints its own progress: no ticking
    shown = stream.getvalue()
    assert re.search(r"  done slow \| \d+ s, tokens 1,200 in / 80 out\n", shown), shown
    assert shown.endswith("| train  | budget 0/4,096 steps\n")
    progress.close()
    assert stream.getvalue().splitlines()[-1].startswith("rlgpt run: wall time ")
    assert [line.split('"phase": ')[1][:7] for line in (tmp_path / "phases.jsonl").read_text().splitlines()] \
        == ['"slow",', '"train"']


def test_a_verbose_training_leaves_the_next_one_in_the_process_quiet(monkeypatch: pytest.MonkeyPatch) -> None:
    """The level travels to a training's children in the environment; a verbose training before a quiet
    one in the same process (a notebook, the test session) must not make the quiet one verbose."""
    from rlgpt.rl import worker_boot

    monkeypatch.setattr(worker_boot, "_USER_CONSOLE_LEVEL", None)
    monkeypatch.setenv(SF_CONSOLE_LEVEL_ENV, "")
    monkeypatch.setenv(worker_boot.TRAINER_PID_ENV, "")
    worker_boot.boot_trainer(verbose=True)
    assert os.environ[SF_CONSOLE_LEVEL_ENV] == "DEBUG"
    worker_boot.boot_trainer(verbose=False)
    assert os.environ[SF_CONSOLE_LEVEL_ENV] == worker_boot.QUIET_LEVEL
    monkeypatch.setattr(worker_boot, "_USER_CONSOLE_LEVEL", "WARNING")  # the user's own choice holds
    worker_boot.boot_trainer(verbose=False)
    assert os.environ[SF_CONSOLE_LEVEL_ENV] == "WARNING"


def test_a_step_inside_a_phase_is_announced_for_the_iteration_under_way() -> None:
    """`LoopProgress.within` (the fast agent's probes): the open phase's iteration and task, nothing before
    any phase."""
    stream = io.StringIO()
    progress = LoopProgress(4096, 3, stream=stream)
    progress.within("probe")
    assert stream.getvalue() == ""
    progress.phase("fast", 1, "collect_wood")
    progress.within("probe")
    progress.within("fast")
    lines = [line for line in stream.getvalue().splitlines() if line.startswith("rlgpt run:")]
    assert [line.split(" | ")[:3] for line in lines] == [
        ["rlgpt run: collect_wood", "iteration 2/3", phase] for phase in ("fast  ", "probe ", "fast  ")]
    progress.close()


def kill_once_training(argv: list[str], train_dir: Path, log: Path) -> str:
    """Start the rlgpt command `argv`, send it SIGTERM (`kill PID`, what a scheduler sends) once the training
    in `train_dir` has logged steps, and return its stderr: it must exit 130, printing how to resume, and
    the training must have saved a checkpoint on its interrupted path (periodic saves are an hour apart
    here)."""
    from loop_helpers import wait_for

    from rlgpt.tracking import spent_steps

    metrics = train_dir / "metrics.csv"
    with log.open("w") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-m", "rlgpt.cli", *argv, "--set", "train.save_every_sec=3600"],
            stdout=subprocess.DEVNULL, stderr=stderr, env=dict(os.environ, OMP_NUM_THREADS="1"))
        try:
            wait_for(lambda: metrics.is_file() and spent_steps(metrics) > 0, "training steps", proc)
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=600) == 130
        finally:
            proc.kill()
    err = log.read_text()
    assert "rlgpt: interrupted; re-run the same command to resume" in err and "Traceback" not in err
    assert list((train_dir / "checkpoint_p0").glob("checkpoint_*.pth"))
    return err


@pytest.mark.slow
def test_kill_stops_a_run_like_ctrl_c_and_its_training_keeps_a_checkpoint(tmp_path: Path) -> None:
    # SIGTERM reaches `rlgpt run` only, not its training child: the run passes it on and waits, so the
    # child's interrupted path saves the policy before the run prints how to resume.
    run_dir = tmp_path / "run"
    kill_once_training(["run", "--config", SMOKE, "--run-dir", str(run_dir), "--mode", "ppo", "--steps",
                        "50000000"], run_dir / "ppo" / "train", tmp_path / "stderr.txt")


@pytest.mark.slow
def test_kill_stops_a_sweep_and_its_running_cell_and_no_queued_cell_starts(tmp_path: Path) -> None:
    # A sweep's cells used to run in a pool thread: the signal stopped only the wait for them, the running
    # cell trained on, and the pool's exit then ran every queued cell.
    out = tmp_path / "sweep"
    kill_once_training(["sweep", "--tasks", "collect_wood", "--modes", "ppo", "--seeds", "0,1",
                        "--out", str(out), "--config", SMOKE, "--steps", "50000000"],
                       out / "collect_wood-ppo-s0" / "ppo" / "train", tmp_path / "stderr.txt")
    assert not (out / "collect_wood-ppo-s1").exists()
