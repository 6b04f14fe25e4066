"""metrics.csv after a kill and resume: each env step once, in order, in what curves and benchmarks read."""

from __future__ import annotations

import csv
import shutil

import pytest

from rlgpt.config import builtin_config_path, load_config
from rlgpt.rl.checkpoint import latest_checkpoint, load_checkpoint
from rlgpt.rl.evaluate import plot_learning_curves
from rlgpt.rl.train import train
from rlgpt.tracking import METRIC_FIELDS, MetricsLog, read_curve, read_metrics


def steps(rows) -> list[int]:
    return [int(r["env_steps"]) for r in rows]


def test_rows_past_the_resume_point_are_superseded(tmp_path):
    path = tmp_path / "metrics.csv"
    killed = MetricsLog(path)  # session 0 checkpointed at 34,816, logged on to 59,392, then was killed
    for s in (10_240, 22_528, 34_816, 47_104, 59_392):
        killed.write(env_steps=s, success=0.1, resumed_from=0)
    killed.close()
    resumed = MetricsLog(path)
    assert resumed.session == 1
    for s in (40_960, 53_248, 65_536):
        resumed.write(env_steps=s, success=0.5, resumed_from=34_816)
    resumed.close()

    assert steps(read_metrics(path)) == [10_240, 22_528, 34_816, 47_104, 59_392, 40_960, 53_248, 65_536]
    curve = read_curve(path)
    assert steps(curve) == [10_240, 22_528, 34_816, 40_960, 53_248, 65_536]
    assert [r["session"] for r in curve] == ["0", "0", "0", "1", "1", "1"]


def test_several_resumes_and_a_legacy_file_without_the_resume_column(tmp_path):
    path = tmp_path / "metrics.csv"
    legacy = (
        "env_steps",
        "primitive_steps",
        "wall_time",
        "fps",
        "success",
        "episode_reward",
        "episode_steps",
    )
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow((*legacy, "session"))
        for session, xs in enumerate(((10, 20, 30, 59), (34, 44, 54), (50, 60))):
            for x in xs:
                writer.writerow((x, x, 0, 0, 0.5, 0, 0, session))
    # Without resumed_from each session is cut where the next one's first row starts.
    assert steps(read_curve(path)) == [10, 20, 30, 34, 44, 50, 60]
    # A new session appends under the file's own header, so old and new rows stay aligned.
    log = MetricsLog(path)
    log.write(env_steps=70, decisions=35, success=0.9, resumed_from=60)
    log.close()
    rows = read_metrics(path)
    assert (
        list(rows[-1]) == [*legacy, "session"] and rows[-1]["success"] == "0.9" and rows[-1]["session"] == "3"
    )
    assert steps(read_curve(path)) == [10, 20, 30, 34, 44, 50, 60, 70]


def test_new_file_has_the_documented_columns(tmp_path):
    log = MetricsLog(tmp_path / "m.csv")
    log.write(env_steps=5)
    log.close()
    assert tuple(read_metrics(tmp_path / "m.csv")[0]) == METRIC_FIELDS


@pytest.mark.slow
def test_resume_from_an_older_checkpoint_supersedes_the_rows_after_it(tmp_path):
    """The kill -9 case without a race: session 1 logs past its checkpoint, which is then lost (its
    checkpoints are replaced by session 0's), so session 2 resumes from session 0's and retrains."""
    run_dir = tmp_path / "run"
    base = [f"run_dir={run_dir}", "eval_episodes=0", "summaries_every_sec=1"]
    smoke = builtin_config_path("smoke.yaml")
    train(load_config(smoke, [*base, "steps=3000"]))
    saved = tmp_path / "saved"
    shutil.copytree(run_dir / "checkpoint_p0", saved)
    resume_point = load_checkpoint(latest_checkpoint(run_dir))["env_steps"]

    train(load_config(smoke, [*base, "steps=9000"]))
    shutil.rmtree(run_dir / "checkpoint_p0")
    shutil.copytree(saved, run_dir / "checkpoint_p0")
    train(load_config(smoke, [*base, "steps=9000"]))

    rows = read_metrics(run_dir / "metrics.csv")
    for session in "012":  # within a session each env step is logged once
        xs = steps(r for r in rows if r["session"] == session)
        assert xs and xs == sorted(set(xs)), (session, xs)
    session1 = [r for r in rows if r["session"] == "1"]
    session2 = [r for r in rows if r["session"] == "2"]
    assert {r["resumed_from"] for r in session2} == {str(resume_point)}
    assert max(steps(session1)) > int(session2[0]["env_steps"]), (
        "session 1 should have logged past the resume"
    )
    assert steps(rows) != sorted(steps(rows)), "the raw file should go backwards here"

    curve = read_curve(run_dir / "metrics.csv")
    xs = steps(curve)
    assert xs == sorted(xs) and len(xs) == len(set(xs)), xs
    assert all(int(r["env_steps"]) <= resume_point for r in curve if r["session"] == "1")
    assert curve[-1]["session"] == "2"
    assert plot_learning_curves(run_dir) is not None
