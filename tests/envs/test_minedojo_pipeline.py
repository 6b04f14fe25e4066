"""MineDojo through rlgpt's pipeline: ``rlgpt train --env minedojo`` and ``rlgpt run --env minedojo``
end to end against a double that speaks MineDojo's API (``minedojo_double/``: Minecraft cannot run here),
with the real adapter (`rlgpt.envs.minedojo`), registry, Sample Factory training and evaluation under test;
and one error line, exit 2, where MineDojo is not installed."""

from __future__ import annotations

import importlib.util
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from rlgpt import layout
from rlgpt.config import builtin_config_path

DOUBLE = Path(__file__).parent / "minedojo_double"
RLGPT = [sys.executable, "-m", "rlgpt.cli"]
TRAIN_FLAGS = ["--config", str(builtin_config_path("smoke.yaml")), "--set", "env.episode_length=40",
               "--set", "eval_episodes=2"]


@pytest.fixture
def with_double(tmp_path: Path, monkeypatch) -> dict[str, str]:
    """The environment of a machine with MineDojo installed: the double importable, a JDK 8's ``java``."""
    if importlib.util.find_spec("minedojo") is not None:
        pytest.skip("the real minedojo is installed here")
    java = tmp_path / "jdk8" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text("#!/bin/sh\necho 'openjdk version \"1.8.0_292\"' >&2\n")
    java.chmod(java.stat().st_mode | stat.S_IXUSR)
    monkeypatch.syspath_prepend(str(DOUBLE))
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk8"))
    yield dict(os.environ, PYTHONPATH=os.pathsep.join([str(DOUBLE), os.environ.get("PYTHONPATH", "")]),
               JAVA_HOME=str(tmp_path / "jdk8"), OMP_NUM_THREADS="1")
    for name in [m for m in sys.modules if m == "minedojo" or m.startswith("minedojo.")]:
        sys.modules.pop(name)


def test_the_registered_env_is_the_adapter_over_minedojo(with_double) -> None:
    import minedojo

    from rlgpt.env_registry import get_env
    from rlgpt.envs.minedojo import ACTION_NAMES

    kind = get_env("minedojo")
    kind.check_available()
    env = kind.make_task_env("harvest_log", "symbolic", 30)
    assert minedojo.made[-1]["target_names"] == ["log"] and minedojo.made[-1]["specified_biome"] == "forest"
    assert "rgb" not in env.observation_space.spaces  # symbolic: no frame
    obs, info = env.reset()
    assert env.observation_space.contains(obs) and not info["success"]
    attack = ACTION_NAMES.index("attack")
    for _ in range(4):
        obs, reward, terminated, truncated, info = env.step(attack)
    assert (reward, terminated, truncated, info["success"], info["inventory"]) == (1.0, True, False, True,
                                                                                   {"log": 1})
    env.reset()
    for _ in range(30):  # turned away from the tree: no log, truncated at the episode length
        *_, terminated, truncated, info = env.step(ACTION_NAMES.index("turn_left"))
    assert truncated and not terminated and not info["success"]
    assert "harvest_log" in kind.tasks() and "attack" in kind.rules()


def test_rlgpt_train_env_minedojo_trains_and_evaluates(with_double, tmp_path: Path) -> None:
    run_dir = tmp_path / "train"
    proc = subprocess.run([*RLGPT, "train", "--env", "minedojo", "--task", "harvest_log", "--steps", "600",
                           "--run-dir", str(run_dir), *TRAIN_FLAGS],
                          env=with_double, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "trained harvest_log" in proc.stdout and "eval: success" in proc.stdout
    from rlgpt.rl.worker_config import worker_config
    from rlgpt.tracking import read_metrics

    rows = read_metrics(run_dir / layout.METRICS_CSV)
    assert rows and int(rows[-1]["env_steps"]) >= 600
    saved = json.loads((run_dir / "config.json").read_text())
    assert saved["env"] == "minedojo_harvest_log" and worker_config(saved).train.env.kind == "minedojo"
    report = json.loads((run_dir / "eval" / "eval.json").read_text())
    assert report["episodes"] == 2 and report["task"] == "harvest_log"


def test_rlgpt_run_env_minedojo_trains_primitives(with_double, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    flags = ["--env", "minedojo", "--task", "harvest_log", "--mode", "ppo", "--steps", "600",
             "--run-dir", str(run_dir), "--config", str(builtin_config_path("run_smoke.yaml")),
             "--set", "train.env.episode_length=40", "--set", "eval_episodes=2", "--set", "eval_marks=[]"]
    proc = subprocess.run([*RLGPT, "run", *flags], env=with_double, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["task"] == "harvest_log" and summary["mode"] == "ppo"
    # The LLM loop needs a macro game API, which only Crafter has: one clear error before anything runs.
    proc = subprocess.run([*RLGPT, "run", "--env", "minedojo", "--task", "harvest_log", "--mode", "rlgpt",
                           "--run-dir", str(tmp_path / "loop")],
                          env=with_double, capture_output=True, text=True, timeout=120)
    assert not (tmp_path / "loop").exists()
    assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [
        "rlgpt: error: env minedojo has no macro game API yet, so the LLM loop and code mode cannot run on "
        "it: use --mode ppo"]


@pytest.mark.parametrize("command", ["train", "run"])
def test_without_minedojo_one_error_line_and_exit_2(command: str, tmp_path: Path) -> None:
    if importlib.util.find_spec("minedojo") is not None:
        pytest.skip("minedojo is installed here")
    extra = ["--mode", "ppo"] if command == "run" else []
    proc = subprocess.run([*RLGPT, command, "--env", "minedojo", "--task", "harvest_log", *extra,
                           "--run-dir", str(tmp_path / "run")], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [proc.stderr.strip()]
    assert proc.stderr.startswith("rlgpt: error: --env minedojo: MineDojo is not installed (pip install")
    assert not (tmp_path / "run").exists()
