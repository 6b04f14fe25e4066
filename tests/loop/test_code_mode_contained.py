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
    """Every step builds ten 100,000-item lists (5-10 ms; the fuel of one call allows no more) against a
    0.25 s wall clock. Worlds are fixed by the seed: at run seed 3 an idle player lives 183 and 150 steps
    in the first two test episodes (at seed 0 one of them dies after 18 steps, which a fast machine plays
    inside the clock), so each episode needs 0.75 s or more on any machine."""
    code = 'def policy(game):\n    for _ in range(10):\n        x = list(range(99999))\n    yield "noop"\n'
    cfg = dataclasses.replace(config(2, 10_000, contain_wall_seconds=0.25), seed=3)
    out = play_macro_policy(cfg, code)
    report = out["report"]
    assert out["ok"] and out["success_rate"] == 0.0 and report["episodes"] == 2
    assert len(report["failed_episodes"]) == 2 and all("[timeout]" in f for f in report["failed_episodes"])
