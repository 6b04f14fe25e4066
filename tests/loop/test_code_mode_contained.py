"""`--mode code` plays the model's policy macro one contained episode at a time (issue 13), on real
Crafter: a working policy scores, a policy whose episode outlives the wall clock scores 0 for that episode
with its diagnostic, and the evaluation still completes."""

from __future__ import annotations

import dataclasses

from rlgpt.config import RunConfig
from rlgpt.run.baselines import play_macro_policy


def config(episodes: int, length: int, **macros: object) -> RunConfig:
    cfg = RunConfig(task="collect_wood", eval_episodes=episodes)
    train = cfg.train
    train = dataclasses.replace(train, env=dataclasses.replace(train.env, episode_length=length),
                                macros=dataclasses.replace(train.macros, **macros))
    return dataclasses.replace(cfg, train=train)


def test_a_working_policy_scores() -> None:
    out = play_macro_policy(config(2, 300), 'def policy(game):\n    ok = yield from game.collect("wood")\n')
    assert out["ok"] and out["success_rate"] > 0 and out["played_steps"] > 0
    assert out["report"]["failed_episodes"] == [] and out["report"]["episodes"] == 2


def test_an_episode_past_the_wall_clock_is_a_failed_episode() -> None:
    """Every step builds ten 100,000-item lists (~10 ms, more under load) and an idle player lives for
    hundreds of steps: seconds per episode on any machine, against a 0.5 s wall clock."""
    code = 'def policy(game):\n    for _ in range(10):\n        x = list(range(99999))\n    yield "noop"\n'
    out = play_macro_policy(config(2, 10_000, contain_wall_seconds=0.5), code)
    report = out["report"]
    assert out["ok"] and out["success_rate"] == 0.0 and report["episodes"] == 2
    assert len(report["failed_episodes"]) == 2 and all("[timeout]" in f for f in report["failed_episodes"])
