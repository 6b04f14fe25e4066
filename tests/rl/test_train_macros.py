"""Compiled macros inside Sample Factory's worker processes: the action space grows, stats reach the logs."""

import json

import pytest
from crafter_helpers import assert_replay
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from rlgpt.config import ConfigError, builtin_config_path, load_config
from rlgpt.macro.files import MacroFileError, load_macro_file
from rlgpt.rl.checkpoint import latest_checkpoint, load_checkpoint
from rlgpt.rl.evaluate import evaluate
from rlgpt.rl.train import train
from rlgpt.rl.worker_config import worker_config
from rlgpt.tracking import read_metrics


@pytest.mark.parametrize("backend", ["auto", "gym"])
def test_macro_run_in_sf_workers(tmp_path, backend):
    """The same training on either env backend (auto: the batch one, macros run on the compiled engine)."""
    macro_file = builtin_config_path("macros/go_to_tree.yaml")
    cfg = load_config(
        builtin_config_path("smoke.yaml"),
        [f"run_dir={tmp_path / 'run'}", "steps=4000", f"macros.file={macro_file}", "eval_episodes=0",
         f"env.backend={backend}"],
    )
    result = train(cfg)
    assert result.status == 0
    sf_cfg = json.loads((result.run_dir / "config.json").read_text())
    assert sf_cfg["batched_sampling"] == (backend == "auto") and worker_config(sf_cfg).macros

    events = EventAccumulator(str(result.run_dir / ".summary" / "0"))
    events.Reload()
    tags = events.Tags()["scalars"]
    assert "macro/go_to_tree/calls" in tags, sorted(tags)
    assert max(e.value for e in events.Scalars("macro/go_to_tree/calls")) > 0

    # The budget, the checkpoint and metrics.csv count primitive (game) steps; a macro call is one decision
    # of several steps, so the run ends at 4000 game steps with fewer decisions (it used to end at 4000
    # decisions, which let a macro run play far more game steps than its budget).
    last = read_metrics(result.run_dir / "metrics.csv")[-1]
    ckpt = load_checkpoint(latest_checkpoint(result.run_dir))
    assert ckpt["env_steps"] == result.env_steps == int(last["env_steps"]) >= 4000
    assert ckpt["decisions"] == int(last["decisions"]) < 0.9 * ckpt["env_steps"]
    assert float(last["episode_steps"]) > float(last["episode_decisions"])

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

    if backend == "auto":  # `rlgpt replay` of the training directory: a test episode, one frame a step
        from rlgpt.run.replay import replay

        done = replay(result.run_dir, tmp_path / "replay.gif", episode=1, length=60)
        from rlgpt.rl.evaluate import eval_seed

        assert done.policy == str(result.run_dir.resolve())
        assert done.seed == eval_seed("test", int(sf_cfg["seed"] or 0), 1)
        assert done.frames == done.steps == sum(done.actions.values())
        assert_replay(done.path, done.steps)
        # The preview (W&B, `rlgpt report`) names why there is none and never raises: a disk that cannot
        # take the file is a reason, like a directory without a policy.
        from rlgpt.run.replay import preview

        blocker = tmp_path / "a_file"
        blocker.write_text("")
        missing, why = preview(result.run_dir, blocker / "replay.gif")
        assert missing is None and why
        assert preview(tmp_path / "nowhere") == (None, f"{str(tmp_path / 'nowhere')!r} is not a directory")


def test_stop_at_success_ends_the_run_at_the_first_full_window_past_it(tmp_path):
    cfg = load_config(
        builtin_config_path("smoke.yaml"),
        [f"run_dir={tmp_path / 'run'}", "steps=200000", "eval_episodes=0", "stop_at_success=0.3"],
    )
    result = train(cfg)
    rows = read_metrics(result.run_dir / "metrics.csv")
    assert result.status == 0 and result.env_steps < 200000
    # The row that reached it is the last (or the one before the end-of-training row).
    assert any(float(r["success"] or 0) >= 0.3 for r in rows[-2:])


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
