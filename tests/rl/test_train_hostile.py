"""Hostile generated code inside real Sample Factory env workers (issue 13): a macro that grows a list in
C, a macro that takes nearly all the step time and a reward that returns an int too large for a float.
The training finishes; each shows up where the critic reads it (``macro/<name>/fail_*``)."""

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from rlgpt.config import EnvSetup, builtin_config_path, load_config
from rlgpt.rl.train import train

MACROS = """
- name: grow
  code: |
    def grow(game):
        a = [0]
        while True:
            a.extend(enumerate(a))
        yield "noop"
- name: slow
  code: |
    def slow(game):
        while True:
            for _ in range(10):
                x = list(range(99999))
            yield "noop"
"""
REWARD = "def reward(game, prev):\n    return 2 ** 4000\n"


def test_hostile_macros_and_reward_in_sf_workers(tmp_path):
    macro_file = tmp_path / "hostile.yaml"
    macro_file.write_text(MACROS)
    cfg = load_config(
        builtin_config_path("smoke.yaml"),
        [f"run_dir={tmp_path / 'run'}", "steps=3000", f"macros.file={macro_file}", "eval_episodes=0",
         "macros.max_steps=8", "env.episode_length=60", "macros.budget_grace_seconds=0.2",
         "macros.max_time_share=0.5"],
    )
    result = train(cfg, setup=EnvSetup(reward_code=REWARD))
    assert result.status == 0 and result.env_steps >= 3000

    events = EventAccumulator(str(result.run_dir / ".summary" / "0"))
    events.Reload()

    tags = events.Tags()["scalars"]
    assert "macro/grow/calls" in tags, sorted(tags)

    def most(tag: str) -> float:
        return max(e.value for e in events.Scalars(tag))

    assert most("macro/grow/calls") > 0 and most("macro/grow/fail_memory") > 0
    assert most("macro/grow/successes") == 0
    assert most("macro/slow/fail_disabled") > 0
