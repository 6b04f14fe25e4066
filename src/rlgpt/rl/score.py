"""The Crafter score (Hafner 2021, "Benchmarking the Spectrum of Agent Capabilities", section 3).

The score aggregates the success rates s_i (in percent) of the 22 achievements by a geometric mean that is
offset by one: S = exp(mean_i ln(1 + s_i)) - 1. It lies in [0, 100]; all zero gives 0 and all 100 gives 100,
and a rare achievement moves it more than a common one does. s_i is the percentage of evaluation episodes in
which achievement i was unlocked at least once.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from rlgpt.envs.tasks import ACHIEVEMENTS, BENCHMARK_TASK

PAPER_SCORES_1M: dict[str, float] = {
    "PPO": 4.6,
    "DreamerV2": 10.0,
    "DreamerV3": 14.5,
    "PPO-ResNet": 15.6,
    "Achievement Distillation": 21.8,
    "SPRING (GPT-4, no training)": 27.3,
    "Human experts": 50.5,
}
"""Published Crafter scores at 1M environment steps (SPRING trains nothing; humans play without a step
budget): the anchors a run's score is read against."""


def crafter_score(success_rates: Mapping[str, float]) -> float:
    """The Crafter score of per-achievement success rates in percent (0-100), one per achievement of
    `ACHIEVEMENTS`; a ValueError when one is missing, unknown or out of range."""
    missing = [name for name in ACHIEVEMENTS if name not in success_rates]
    unknown = [name for name in success_rates if name not in ACHIEVEMENTS]
    if missing or unknown:
        raise ValueError(
            f"crafter_score needs the 22 achievements' rates: missing {missing}, unknown {unknown}")
    rates = [float(success_rates[name]) for name in ACHIEVEMENTS]
    if not all(0.0 <= r <= 100.0 for r in rates):
        raise ValueError(f"success rates are percentages in [0, 100], got {rates}")
    return math.exp(sum(math.log1p(r) for r in rates) / len(rates)) - 1.0


def percent_rates(fractions: Mapping[str, float]) -> dict[str, float]:
    """Per-achievement success fractions (0-1, as `rlgpt.rl.evaluate.EvalReport.achievement_success`)
    as the percentages the score takes."""
    return {name: 100.0 * float(value) for name, value in fractions.items()}


def success_measure(task: str, success_rate: float, achievement_success: Mapping[str, float]) -> float:
    """The number in [0, 1] the loop stops on and picks the best iteration by: the task's success rate, or
    for the Crafter benchmark (`BENCHMARK_TASK`) the Crafter score / 100 of the per-achievement success
    fractions (its own "success", all 22 achievements in one episode, is practically never reached)."""
    if task == BENCHMARK_TASK:
        return crafter_score(percent_rates(achievement_success)) / 100.0
    return float(success_rate)


__all__ = ["PAPER_SCORES_1M", "crafter_score", "percent_rates", "success_measure"]
