"""A real (short) Sample Factory APPO run on a Crafter task, then evaluation from its checkpoint."""

import json
import subprocess
import sys

import numpy as np
import pytest
import torch

from rlgpt import layout, rundir
from rlgpt.config import builtin_config_path, load_config
from rlgpt.envs.tasks import ACHIEVEMENTS
from rlgpt.rl.checkpoint import latest_checkpoint, load_checkpoint
from rlgpt.rl.evaluate import evaluate, plot_learning_curves
from rlgpt.rl.train import train
from rlgpt.rl.worker_config import worker_config
from rlgpt.rl.wrappers import episode_stats
from rlgpt.tracking import read_metrics

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("runs") / "smoke"
    cfg = load_config(builtin_config_path("smoke.yaml"), [f"run_dir={run_dir}", "steps=8000"])
    # SF starts tracking its best policy after 100k steps by default; from then on every checkpoint holds
    # the numpy scalar that torch's safe loader refuses. Start at once so this short run gets there too.
    result = train(cfg, extra_sf_argv=["--save_best_after=0", "--save_best_every_sec=1"])
    return cfg, result


def test_training_reaches_the_step_budget_and_logs(trained_run):
    cfg, result = trained_run
    assert result.status == 0
    assert result.env_steps >= cfg.steps
    rows = read_metrics(result.run_dir / "metrics.csv")
    assert rows and int(rows[-1]["env_steps"]) > 0
    assert any(r["success"] not in ("", None) for r in rows), "no episode statistics reached the log"
    assert plot_learning_curves(result.run_dir).stat().st_size > 1000
    summaries = list((result.run_dir / ".summary" / "0").glob("events.out.tfevents.*"))
    assert summaries


def test_checkpoint_loads_with_the_safe_unpickler(trained_run):
    _, result = trained_run
    ckpt = load_checkpoint(latest_checkpoint(result.run_dir))
    assert ckpt["env_steps"] > 0
    assert any(k.startswith("encoder.") for k in ckpt["model"])
    assert isinstance(ckpt["best_performance"], np.floating), "SF's best-policy tracking did not run"
    best = load_checkpoint(latest_checkpoint(result.run_dir, kind="best"))
    # Not its env_steps: SF saves the best policy when episode statistics arrive, with the learner's count
    # at that moment, 0 when the first episodes end before its first batch (seen in CI on a loaded box).
    assert any(k.startswith("encoder.") for k in best["model"])


def test_without_the_allow_list_torch_refuses_the_checkpoint(trained_run):
    """Guards the reason rlgpt.rl.checkpoint exists: if SF checkpoints ever stop needing it, this fails."""
    _, result = trained_run
    path = latest_checkpoint(result.run_dir)
    code = f"import torch; torch.load({str(path)!r}, weights_only=True)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "numpy" in proc.stderr


def test_evaluate_writes_json_and_chart(trained_run):
    _, result = trained_run
    report = evaluate(result.run_dir, episodes=3, num_envs=2)
    assert report.episodes == 3
    assert set(report.achievement_success) == set(ACHIEVEMENTS)
    assert 0.0 <= report.success_rate <= 1.0
    assert report.success_rate == report.achievement_success["collect_wood"]
    data = json.loads((result.run_dir / "eval" / "eval.json").read_text())
    assert data["episodes"] == 3 and data["task"] == "collect_wood"
    assert (result.run_dir / "eval" / "eval_success.png").stat().st_size > 1000
    # Every file of the run directory is readable like any other output: open()'s mode, never mkstemp's 0600.
    expected = 0o666 & ~rundir.current_umask()
    files = [p for p in result.run_dir.rglob("*") if p.is_file()]
    assert {"rlgpt.yaml", "eval.json", "metrics.csv"} <= {p.name for p in files}
    assert {str(p.relative_to(result.run_dir)): oct(p.stat().st_mode & 0o777) for p in files
            if p.stat().st_mode & 0o777 != expected} == {}

    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(result.run_dir / ".summary" / "0"))
    events.Reload()
    tags = events.Tags()["scalars"]
    assert "eval/success_rate" in tags
    assert any(t.startswith("train/") for t in tags)
    # Every rollout/* episode statistic of the per-env path, here from the batch backend.
    stat_keys = episode_stats(0.0, 0, 0, np.zeros(len(ACHIEVEMENTS)))
    assert set(stat_keys) <= set(tags), sorted(set(stat_keys) - set(tags))


def test_smoke_config_trains_with_the_batch_backend(trained_run):
    """`env.backend: auto` put this run's games into batches (Sample Factory's batched sampling)."""
    _, result = trained_run
    sf_config = json.loads((result.run_dir / layout.SF_CONFIG).read_text())
    assert sf_config["batched_sampling"] is True
    assert (sf_config["num_envs_per_worker"], worker_config(sf_config).batch_games) == (2, 2)


def test_policy_is_seeded(trained_run):
    """Same checkpoint, same eval seed -> same episodes (envs and sampled actions are reproducible), whatever
    the caller's torch generator holds."""
    _, result = trained_run
    torch.manual_seed(0)
    a = evaluate(result.run_dir, episodes=2, num_envs=2, seed=5, write=False)
    torch.manual_seed(1)
    b = evaluate(result.run_dir, episodes=2, num_envs=2, seed=5, write=False)
    assert a == b
