"""Hostile generated code inside real Sample Factory env workers (issue 13): a macro that grows a list in
C, a macro that takes nearly all the step time and a reward that returns an int too large for a float.
The training finishes; each shows up where the critic reads it (``macro/<name>/fail_*``)."""

import json
import os
import resource
import subprocess

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from rlgpt import layout
from rlgpt.config import EnvSetup, builtin_config_path, load_config
from rlgpt.rl.train import train
from rlgpt.run.executor import JobResult, TrainJob, job_argv
from rlgpt.run.loop import disabled_diagnostics

GROW = """
- name: grow
  code: |
    def grow(game):
        a = [0]
        while True:
            a.extend(enumerate(a))
        yield "noop"
"""
SLOW = """
- name: slow
  code: |
    def slow(game):
        while True:
            for _ in range(10):
                x = list(range(99999))
            yield "noop"
"""
REWARD = "def reward(game, prev):\n    return 2 ** 4000\n"


def hostile_training(tmp_path, macros: str, *overrides: str):
    """Train the smoke config with `macros` and the huge-int reward; the most of each ``macro/*`` scalar
    over the run's summaries (Sample Factory reports them as means over its last 32 episodes), and the
    training's result."""
    macro_file = tmp_path / "hostile.yaml"
    macro_file.write_text(macros)
    cfg = load_config(
        builtin_config_path("smoke.yaml"),
        [f"run_dir={tmp_path / 'run'}", f"macros.file={macro_file}", "eval_episodes=0", "macros.max_steps=8",
         *overrides],
    )
    result = train(cfg, setup=EnvSetup(reward_code=REWARD))
    assert result.status == 0 and result.env_steps >= cfg.steps

    events = EventAccumulator(str(result.run_dir / ".summary" / "0"))
    events.Reload()
    tags = events.Tags()["scalars"]
    assert any(tag.startswith("macro/") for tag in tags), sorted(tags)
    most = {tag: max(e.value for e in events.Scalars(tag)) for tag in tags if tag.startswith("macro/")}
    return most, result


def test_a_macro_that_grows_memory_in_c_fails_each_call_and_the_training_finishes(tmp_path):
    # The time budget off (share 1): each call of grow runs into the worker's memory backstop (kept small
    # so a call fails in a fraction of a second) instead of being switched off after its first call, so
    # the 32 episodes a summary averages always hold some of its failures.
    most, result = hostile_training(tmp_path, GROW, "steps=1500", "env.episode_length=30",
                                    "macros.max_time_share=1", "macros.memory_limit_mb=256")
    assert most["macro/grow/calls"] > 0 and most["macro/grow/fail_memory"] > 0
    assert most["macro/grow/successes"] == 0
    assert result.disabled == {}  # failing is not being switched off


def test_a_macro_that_hogs_the_step_time_is_switched_off_and_the_training_finishes(tmp_path):
    # Switched off for the rest of the process: every later call of it reads fail_disabled.
    most, result = hostile_training(tmp_path, SLOW, "steps=3000", "env.episode_length=60",
                                    "macros.budget_grace_seconds=0.2", "macros.max_time_share=0.5")
    assert most["macro/slow/calls"] > 0 and most["macro/slow/fail_disabled"] > 0
    assert most["macro/slow/successes"] == 0
    # The training says so itself, and the job's evaluation record carries it to the critic: the evaluation
    # runs in a fresh process where the macro is not off yet.
    assert result.disabled["slow"] > 0
    trained = {"steps": 3000, "env_steps": result.env_steps, "disabled_in_training": {"slow": 1.5}}
    (result.run_dir / layout.TRAINED_JSON).write_text(json.dumps(trained))
    cfg = load_config(builtin_config_path("smoke.yaml"), [
        f"run_dir={result.run_dir}", f"macros.file={tmp_path / 'hostile.yaml'}", "eval_episodes=0",
        "macros.max_steps=8", "steps=3000", "env.episode_length=60"])
    # The job runs as the executor runs it, in a child process: it caps its own process's memory before
    # evaluating, which must not reach this test process (the later tests check that it is uncapped).
    job = result.run_dir / layout.JOB_JSON
    job.write_text(json.dumps(TrainJob(cfg, REWARD, eval_episodes=1, eval_episode_length=20).to_dict()))
    subprocess.run(job_argv(result.run_dir), check=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
    found = JobResult.from_dict(json.loads((result.run_dir / layout.RESULT_JSON).read_text()))
    assert found.ok and found.eval["disabled_in_training"] == {"slow": 1.5}
    assert resource.getrlimit(resource.RLIMIT_DATA)[0] == resource.RLIM_INFINITY
    assert disabled_diagnostics(found.eval["disabled_in_training"]) == [
        "macro slow was switched off in training: its code took most of its steps' CPU time (1.5 calls per "
        "episode found it off); do less work per step"]
