"""Budget marks in a real Sample Factory training: the learner saves a policy copy exactly at the marks the
run's step count (offset + the training's own steps) crossed, each an evaluable run directory."""

import json

import pytest

from rlgpt import layout
from rlgpt.config import builtin_config_path, load_config
from rlgpt.rl.checkpoint import latest_checkpoint, load_checkpoint
from rlgpt.rl.evaluate import evaluate
from rlgpt.rl.train import train

pytestmark = pytest.mark.slow

OFFSET = 512
"""Steps the run had counted before this training (a mark at or below it is due at the first batch)."""


def test_a_training_saves_exactly_the_marks_it_crossed(tmp_path):
    run_dir = tmp_path / "train"
    marks = (256, 1024, 1536, 1792, 100_000)
    cfg = load_config(builtin_config_path("smoke.yaml"),
                      [f"run_dir={run_dir}", "steps=1280", f"mark_offset={OFFSET}",
                       f"marks=[{','.join(str(m) for m in marks)}]"])
    result = train(cfg)
    assert result.status == 0
    run_steps = OFFSET + result.env_steps
    crossed = {m for m in marks if m <= run_steps}
    assert {256, 1024, 1536, 1792} >= crossed >= {256, 1024, 1536}
    saved = {int(p.name) for p in (run_dir / layout.MARKS_DIR).iterdir()}
    assert saved == crossed
    batch = cfg.ppo.batch_size  # no macros: every learner step trains exactly one batch of primitive steps
    for mark in sorted(saved):
        out = layout.mark_dir(run_dir, mark)
        record = json.loads((out / layout.MARK_RECORD_JSON).read_text())
        # Saved at the first learner step at or past the mark (the first one for a mark below the offset).
        assert record["run_steps"] == OFFSET + record["env_steps"] >= mark
        assert record["env_steps"] == batch if mark <= OFFSET else record["run_steps"] - batch < mark
        checkpoint = load_checkpoint(latest_checkpoint(out))
        assert checkpoint["env_steps"] == record["env_steps"]
        assert all(t.device.type == "cpu" for t in checkpoint["model"].values())
        assert not list(out.glob("checkpoint_p0/*_temp"))
    # A copy is a run directory of its own: evaluated like the training's, with its own policy.
    first, last = min(saved), max(saved)
    report = evaluate(layout.mark_dir(run_dir, first), episodes=2, num_envs=2, split="test", write=False)
    assert report.episodes == 2 and report.split == "test"
    assert report.env_steps == json.loads((layout.mark_dir(run_dir, first) / "mark.json").read_text())[
        "env_steps"] < load_checkpoint(latest_checkpoint(layout.mark_dir(run_dir, last)))["env_steps"]


def test_a_killed_training_keeps_the_marks_it_saved_and_saves_the_rest_on_resume(tmp_path):
    import signal
    import subprocess
    import time

    import psutil
    from test_resume import ENV, Run, assert_no_process_left, command, saved_env_steps

    late_mark = 20480
    run_dir = tmp_path / "run"
    argv = command(run_dir, late_mark + 4096, ("--set", f"marks=[512,{late_mark}]"))
    first = Run(argv, tmp_path / "first-stderr.txt")
    early, late_dir = layout.mark_dir(run_dir, 512), layout.mark_dir(run_dir, late_mark)
    deadline = time.time() + 240  # a bound for a hung run, not a timing assumption
    try:
        # Killed once a regular checkpoint past the first mark exists: the resumed session starts past it.
        while not ((saved_env_steps(run_dir) or 0) > 512 and list(early.glob("checkpoint_p0/*.pth"))):
            assert first.proc.poll() is None, f"training ended before it was killed: {first.stderr()[-2000:]}"
            assert time.time() < deadline, "no checkpoint past the first mark within 240 s"
            time.sleep(0.2)
        workers = psutil.Process(first.proc.pid).children(recursive=True)
    finally:
        first.kill_all()
    assert first.proc.returncode == -signal.SIGKILL
    assert_no_process_left(workers)

    def copies(mark_dir):
        return {p.name: p.stat().st_mtime_ns for p in mark_dir.glob("checkpoint_p0/*")}

    kept = copies(early)
    # The kill normally comes long before the late mark (a checkpoint is saved every 2 s); a session that
    # got there first must have its copy kept too (only a finished copy counts: a copy torn by the kill is
    # a temporary file the resumed session replaces).
    late_kept = copies(late_dir) if list(late_dir.glob("checkpoint_p0/*.pth")) else None

    second = subprocess.run(argv, env=ENV, capture_output=True, text=True, timeout=600)
    assert second.returncode == 0, second.stderr[-3000:]
    assert "Loaded experiment state" in (run_dir / "sf_log.txt").read_text()
    # The copy the killed session saved is the policy that crossed the mark: kept as it was, not replaced by
    # the resumed policy (which is already past the mark at its first step).
    assert copies(early) == kept
    if late_kept is not None:
        assert copies(late_dir) == late_kept
    late = json.loads((late_dir / layout.MARK_RECORD_JSON).read_text())
    batch = load_config(builtin_config_path("smoke.yaml")).ppo.batch_size
    assert late["run_steps"] >= late_mark > late["run_steps"] - batch  # the first learner step past it
    assert len(list(late_dir.glob("checkpoint_p0/*"))) == 1
