"""Compiled macros inside Sample Factory's worker processes: the action space grows, stats reach the logs."""

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from rlgpt.config import ConfigError, builtin_config_path, load_config
from rlgpt.macro.files import MacroFileError, load_macro_file
from rlgpt.rl.evaluate import evaluate
from rlgpt.rl.train import train
from rlgpt.tracking import read_metrics


def test_macro_run_in_sf_workers(tmp_path):
    macro_file = builtin_config_path("macros/go_to_tree.yaml")
    cfg = load_config(
        builtin_config_path("smoke.yaml"),
        [f"run_dir={tmp_path / 'run'}", "steps=4000", f"macros.file={macro_file}", "eval_episodes=0"],
    )
    result = train(cfg)
    assert result.status == 0

    events = EventAccumulator(str(result.run_dir / ".summary" / "0"))
    events.Reload()
    tags = events.Tags()["scalars"]
    assert "macro/go_to_tree/calls" in tags, sorted(tags)
    assert max(e.value for e in events.Scalars("macro/go_to_tree/calls")) > 0

    rows = [r for r in read_metrics(result.run_dir / "metrics.csv") if r["primitive_steps"]]
    # Macro calls take several primitive steps, so game steps outrun policy decisions.
    assert int(rows[-1]["primitive_steps"]) > int(rows[-1]["env_steps"])

    report = evaluate(result.run_dir, episodes=2, num_envs=2, write=False, episode_length=150)
    assert report.episodes == 2
    # The evaluation reports what the critic reads: per-macro counters and the last steps of failures.
    stats = report.macro_stats["go_to_tree"]
    assert set(stats) >= {"calls", "successes", "mean_length", "interrupted", "fail_max_steps"}
    assert stats["calls"] >= stats["successes"] + stats["interrupted"]
    assert report.mean_episode_steps <= 150  # the evaluation's own episode length replaced the training's
    failed = round(report.episodes * (1 - report.success_rate))
    assert len(report.traces) == failed
    assert all(t.endswith(("(died)", "(time limit)")) for t in report.traces)


def test_bad_macro_file_is_a_clear_error_before_training(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("- name: evil\n  code: |\n    def evil(game):\n        import os\n        yield 'noop'\n")
    with pytest.raises(MacroFileError, match="evil.*import"):
        load_macro_file(bad)
    cfg = load_config(None, [f"run_dir={tmp_path / 'run'}", f"macros.file={bad}"])
    with pytest.raises(MacroFileError):
        train(cfg)
    assert not (tmp_path / "run").exists()
    with pytest.raises(ConfigError):
        load_config(None, ["macros.max_steps=0"])
