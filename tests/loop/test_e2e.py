"""End to end with the real embedded 0.5B model and real Sample Factory training: one full outer iteration
(slow -> fast -> probe -> train -> eval -> critic) of `rlgpt run`, killed with SIGKILL once training has
started and resumed with the same command, which must not ask the model again for the finished steps."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from loop_helpers import SMOKE, WAIT_S, wait_for

from rlgpt.envs.tasks import ACHIEVEMENTS
from rlgpt.llm.model_store import QWEN_CODER_0_5B, ensure_model
from rlgpt.rl.worker_config import worker_config

pytestmark = pytest.mark.slow

def children(pid: int) -> list[int]:
    """Pids of the direct children of `pid`."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def cmdline(pid: int) -> str:
    """The command line of process `pid` ("" once it is gone)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.timeout(3 * WAIT_S)  # the real model twice; the inner waits bound each part
def test_one_outer_iteration_with_the_real_model_survives_sigkill(tmp_path: Path) -> None:
    ensure_model(QWEN_CODER_0_5B)
    run_dir = tmp_path / "run"
    # place_table with the threshold out of reach (above 1), so the critic (not the threshold) ends the
    # iteration: with the trusted goal macro a few thousand steps can place a table in every episode.
    command = [sys.executable, "-m", "rlgpt.cli", "run", "--config", SMOKE, "--run-dir", str(run_dir),
               "--task", "place_table", "--set", "success_threshold=2"]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    it = run_dir / "iter_000"

    first = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # The training job is submitted only after the slow and fast steps (and the probes) are complete; its
        # child process starts just after the job file is written.
        def training() -> bool:
            return (it / "train" / "job.json").is_file() and any(
                "rlgpt.run.executor" in cmdline(pid) for pid in children(first.pid))

        wait_for(training, "the training job's process", first)
        spawned = children(first.pid)  # the trainer and the LLM server
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    answered = len(list((run_dir / "llm_cache").glob("*/*.json")))
    assert answered >= 3  # slow, at least the reward and the setup of the fast agent
    # The trainer and the model server die with the loop instead of running on as orphans.
    assert len(spawned) >= 2
    wait_for(lambda: not any(alive(pid) for pid in spawned), "the loop's children to die with it")
    assert not (it / "training.json").exists()

    second = subprocess.run(command, env=env, capture_output=True, text=True, timeout=WAIT_S)
    assert second.returncode == 0, second.stderr

    # Slow agent: a typed decomposition with coded and/or learned sub-actions.
    slow = json.loads((it / "slow.json").read_text())
    assert slow["new"] is True and slow["decomposition"]["subactions"]
    assert all(s["how"] in ("code", "rl") for s in slow["decomposition"]["subactions"])
    # Fast agent: one macro choice per coded sub-action, every attempt recorded; probes of the kept ones.
    fast = json.loads((it / "fast.json").read_text())
    coded = [s["name"] for s in slow["decomposition"]["subactions"] if s["how"] == "code"]
    assert [m["subaction"] for m in fast["macros"]] == coded
    assert all(c["attempts"] for m in fast["macros"] for c in m["candidates"])
    kept = [m["name"] for m in fast["reply"]["macros"]]
    probes = json.loads((it / "probes.json").read_text())
    assert {p["macro"] for p in probes} >= set(kept) and all(p["calls"] for p in probes)
    assert (it / "reward.py").read_text() == fast["reply"]["reward_code"]
    assert (it / "macros.yaml").is_file() == bool(kept)
    # Training on primitives + the kept macros with the fast agent's horizon, then the evaluation.
    job = json.loads((it / "train" / "job.json").read_text())
    assert job["config"]["env"]["episode_length"] == fast["reply"]["horizon"]
    sf_config = json.loads((it / "train" / "config.json").read_text())
    ours = worker_config(sf_config)
    assert [dataclasses.asdict(m) for m in ours.macros] == fast["reply"]["macros"]
    assert ours.setup.reward_code == fast["reply"]["reward_code"]
    assert list((it / "train" / "checkpoint_p0").glob("checkpoint_*.pth"))
    evaluation = json.loads((it / "training.json").read_text())
    assert evaluation["ok"], evaluation["error"]
    report = evaluation["report"]
    assert report["episodes"] == 4 and set(report["achievement_success"]) == set(ACHIEVEMENTS)
    assert set(report["macro_stats"]) == set(kept)
    # The training's share: the budget less the probes, the reward checks and its evaluation's bound.
    budget = json.loads((it / "train" / "job.json").read_text())["config"]["steps"]
    spent = sum(fast["steps_by_kind"].values())
    assert budget == min(4096, 4096 - spent - 4 * 200) and evaluation["steps"] >= budget
    # Critic: typed feedback (or done by threshold).
    critic = json.loads((it / "critic.json").read_text())
    assert critic["target"] in ("fast", "slow", "done") and critic["by"] in ("critic", "threshold")

    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["mode"] == "rlgpt" and summary["best"] == "iter_000" and len(summary["iterations"]) == 1
    assert summary["steps_by_kind"]["probe"] == sum(
        c["probe"]["env_steps"] for m in fast["macros"] for c in m["candidates"] if c["probe"])
    assert summary["steps_used"] == evaluation["steps"] + evaluation["eval_steps"] + spent
    # Selection saw validation episodes; the reported result is the selected policy on test episodes.
    assert report["split"] == "validation" and summary["validation_success_rate"] == report["success_rate"]
    test = json.loads((it / "test.json").read_text())
    assert test["ok"], test["error"]
    assert test["report"]["split"] == "test" and summary["eval_split"] == "test"
    assert summary["success_rate"] == test["report"]["success_rate"] and test["report"]["episodes"] == 4
    assert test["report"]["env_steps"] == report["env_steps"]  # the same checkpoint, not trained again
    assert summary["model_id"].endswith(QWEN_CODER_0_5B.filename)
    # The resumed session asked the model nothing the killed one had answered: no slow or fast calls.
    llm = summary["llm"]
    assert "llm/slow/calls" not in llm and "llm/fast/calls" not in llm, llm
    assert len(list((run_dir / "llm_cache").glob("*/*.json"))) == answered + llm.get("llm/critic/calls", 0)
    assert llm.get("llm/critic/calls", 0.0) == (1.0 if critic["by"] == "critic" else 0.0)
    assert "| place_table |" in second.stdout and "rlgpt" in second.stdout
