"""The Crafter benchmark end to end at a tiny budget: real Sample Factory training on ``--task crafter``
(crafter's reward), evaluation with the Crafter score and chart, and `rlgpt report`'s Crafter section."""

import dataclasses
import json

import pytest

from rlgpt import layout
from rlgpt.config import builtin_config_path, load_config, load_run_config
from rlgpt.envs.tasks import ACHIEVEMENTS
from rlgpt.rl.evaluate import evaluate
from rlgpt.rl.score import crafter_score, percent_rates
from rlgpt.rl.train import train
from rlgpt.run.records import result_record
from rlgpt.run.report import write_report

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def crafter_run(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("runs") / "crafter"
    cfg = load_config(builtin_config_path("smoke.yaml"),
                      [f"run_dir={run_dir}", "task=crafter", "steps=3000", "env.episode_length=100"])
    result = train(cfg)
    assert result.status == 0 and result.env_steps >= cfg.steps
    return result


def test_training_on_crafters_reward_then_evaluation_reports_the_score(crafter_run):
    # 200 steps: a random policy unlocks some achievement in all but about 1 episode in 40 at that length.
    report = evaluate(crafter_run.run_dir, episodes=4, num_envs=2, episode_length=200)
    assert report.task == "crafter" and report.episodes == 4
    assert 100 < report.mean_episode_steps <= 200  # a died episode ends early; not all four do
    assert report.crafter_score == pytest.approx(crafter_score(percent_rates(report.achievement_success)))
    # The loop's measure for the benchmark is the score, not "all 22 in one episode".
    assert report.success_rate == pytest.approx(report.crafter_score / 100)
    assert report.crafter_score > 0
    data = json.loads((crafter_run.run_dir / layout.EVAL_DIR / layout.EVAL_JSON).read_text())
    assert data["crafter_score"] == report.crafter_score
    assert (crafter_run.run_dir / layout.EVAL_DIR / layout.EVAL_CRAFTER_PNG).stat().st_size > 5000

    run_cfg = load_run_config(None, ["task=crafter", "mode=ppo"])
    summary = result_record(run_cfg, "crafter", "ppo", 3000, {"train": crafter_run.env_steps},
                            dataclasses.asdict(report), [])
    other = dict(summary, seed=1, achievement_success=dict.fromkeys(ACHIEVEMENTS, 0.0))
    dirs = []
    for i, s in enumerate((summary, other)):
        d = crafter_run.run_dir.parent / f"summary{i}"
        d.mkdir()
        (d / layout.SUMMARY_JSON).write_text(json.dumps(s))
        dirs.append(d)
    out = write_report(dirs, crafter_run.run_dir.parent / "report")
    text = out["markdown"].read_text()
    assert "# Crafter benchmark" in text
    # Two seeds: the mean of this run's score and 0, the range from 0 to this run's score.
    assert f"| ppo | {report.crafter_score / 2:.2f} | 0.00-{report.crafter_score:.2f} | 2 |" in text
    assert out["crafter"].stat().st_size > 5000
