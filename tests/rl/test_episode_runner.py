"""The one episode runner (`rlgpt.rl.evaluate.play_episodes`) on real Crafter with a real macro: its own
accounting agrees with the env's episode statistics (what evaluations read before it existed), lockstep
envs play every seed once, and `summarize` counts unplayed episodes as failures."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from crafter_helpers import chop_source

from rlgpt.envs.crafter import ACTION_NAMES
from rlgpt.envs.tasks import ACHIEVEMENTS, make_task_env
from rlgpt.macro.compiler import MacroSource
from rlgpt.macro.runtime import MacroActionWrapper
from rlgpt.rl.checkpoint import EvalError
from rlgpt.rl.evaluate import TRACE_STEPS, eval_seeds, play_episodes, summarize
from rlgpt.rl.wrappers import EpisodeStats

CHOP = chop_source()


class Alternating:
    """Macro on even decisions, a primitive move on odd ones (both kinds of action in every episode)."""

    def __init__(self, macro: int) -> None:
        self.macro = macro
        self.decisions: dict[int, int] = {}
        self.resets: list[int] = []

    def reset(self, slot: int) -> None:
        self.decisions[slot] = 0
        self.resets.append(slot)

    def act(self, slots: Sequence[int], observations: Sequence[Any]) -> list[int]:
        actions = []
        for slot in slots:
            actions.append(self.macro if self.decisions[slot] % 2 == 0 else ACTION_NAMES.index("move_left"))
            self.decisions[slot] += 1
        return actions


def macro_env(length: int) -> EpisodeStats:
    task_env = make_task_env("collect_drink", episode_length=length)
    macros = MacroActionWrapper(task_env, [MacroSource("chop", CHOP)], max_macro_steps=20, seed=0)
    return EpisodeStats(macros, run_seed=0)


def test_runner_accounting_matches_the_envs_episode_statistics() -> None:
    envs = [macro_env(120), macro_env(120)]
    policy = Alternating(len(ACTION_NAMES))
    seeds = eval_seeds("validation", 0, 3)
    episodes = play_episodes(envs, policy, seeds)

    assert len(episodes) == 3 and len(policy.resets) == 3  # two envs in lockstep played three seeds
    for episode in episodes:
        stats = episode.stats
        assert episode.steps == stats["rollout/episode_steps"] > episode.decisions  # macros took several
        assert episode.decisions == stats["rollout/episode_decisions"]
        assert float(episode.success) == stats["rollout/success"]
        assert episode.unlocked == [a for a in ACHIEVEMENTS if stats[f"rollout/achievement/{a}"]]
        assert stats["macro/chop/calls"] == (episode.decisions + 1) // 2
        parts = episode.trace.split(" -> ")
        assert len(parts) == TRACE_STEPS and episode.trace.endswith(("(died)", "(time limit)"))
        assert any(p.startswith("chop[") for p in parts) and any(p.startswith("move_left") for p in parts)

    summary = summarize("collect_drink", episodes)
    assert summary["episodes"] == 3 and summary["steps"] == sum(e.steps for e in episodes)
    assert summary["mean_episode_steps"] == pytest.approx(summary["steps"] / 3)
    assert summary["macro_stats"]["chop"]["calls"] == sum(e.stats["macro/chop/calls"] for e in episodes)
    assert len(summary["traces"]) == sum(not e.success for e in episodes)

    # One more episode that never finished: a failure in every rate, no steps added.
    with_failure = summarize("collect_drink", episodes, failed=1)
    assert with_failure["episodes"] == 4 and with_failure["steps"] == summary["steps"]
    for name, rate in summary["achievement_success"].items():
        assert with_failure["achievement_success"][name] == pytest.approx(rate * 3 / 4)
    with pytest.raises(EvalError):
        summarize("collect_drink", [])
