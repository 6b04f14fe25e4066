"""The CLI's user errors: one line on stderr, exit status 2, nothing created."""

import os
import subprocess
import sys

import pytest

from rlgpt.cli import main


def run_cli(*args, cwd=None):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    return subprocess.run(
        [sys.executable, "-m", "rlgpt.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=120,
    )


def assert_one_line_error(proc, *fragments):
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("rlgpt: error: ")
    for fragment in fragments:
        assert fragment in lines[0]


def test_bad_task_name(tmp_path):
    proc = run_cli("train", "--task", "colect_wood", "--run-dir", str(tmp_path / "run"))
    assert_one_line_error(proc, "colect_wood", "collect_wood")
    assert not (tmp_path / "run").exists()


def test_bad_config_value(tmp_path):
    proc = run_cli("train", "--steps", "lots", "--run-dir", str(tmp_path / "run"))
    assert_one_line_error(proc, "steps: expected an integer")
    proc = run_cli("train", "--set", "ppo.gamma=2", "--run-dir", str(tmp_path / "run"))
    assert_one_line_error(proc, "ppo.gamma")


def test_batch_backend_with_what_runs_per_env(tmp_path):
    proc = run_cli("train", "--set", "env.backend=batch", "--set", "env.obs_mode=pixels",
                   "--run-dir", str(tmp_path / "run"))
    assert_one_line_error(proc, "env.backend=batch cannot run pixel observations", "env.backend=auto")
    proc = run_cli("train", "--set", "env.num_envs_per_worker=48", "--run-dir", str(tmp_path / "run"))
    assert_one_line_error(proc, "24 games per split")
    assert not (tmp_path / "run").exists()


def test_unwritable_run_dir(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    proc = run_cli("train", "--run-dir", str(blocker / "run"))
    assert_one_line_error(proc, "not writable", str(blocker / "run"))


def test_eval_of_a_directory_that_is_not_a_run(tmp_path):
    proc = run_cli("eval", str(tmp_path))
    assert_one_line_error(proc, "not a training run directory")


def test_help_lists_commands(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert "train" in out and "eval" in out
