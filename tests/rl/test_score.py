"""The Crafter score against its definition (Hafner 2021) and hand-computed values."""

import math

import pytest

from rlgpt.envs.tasks import ACHIEVEMENTS
from rlgpt.rl.score import crafter_score, percent_rates


def rates(value: float, **some: float) -> dict[str, float]:
    out = dict.fromkeys(ACHIEVEMENTS, value)
    out.update(some)
    return out


def test_edge_cases_of_the_definition():
    assert crafter_score(rates(0.0)) == 0.0
    assert crafter_score(rates(100.0)) == pytest.approx(100.0)
    assert crafter_score(rates(37.5)) == pytest.approx(37.5)  # a constant rate is its own score


def test_hand_computed_values():
    # One achievement at 100%, the rest at 0: exp(ln(101) / 22) - 1.
    assert crafter_score(rates(0.0, collect_wood=100.0)) == pytest.approx(101 ** (1 / 22) - 1)
    assert crafter_score(rates(0.0, collect_wood=100.0)) == pytest.approx(0.23340, abs=1e-5)
    # Half the achievements at 3%, half at 0: exp(11 ln 4 / 22) - 1 = sqrt(4) - 1 = 1.
    half = dict(zip(ACHIEVEMENTS, [3.0] * 11 + [0.0] * 11, strict=True))
    assert crafter_score(half) == pytest.approx(1.0)
    # Geometric, not arithmetic: far below the mean rate of 50.
    spread = dict(zip(ACHIEVEMENTS, [100.0] * 11 + [0.0] * 11, strict=True))
    assert crafter_score(spread) == pytest.approx(math.sqrt(101) - 1) and crafter_score(spread) < 50


def test_fractions_become_percentages():
    assert crafter_score(percent_rates(rates(0.5))) == pytest.approx(50.0)


def test_rejects_incomplete_or_out_of_range_rates():
    with pytest.raises(ValueError, match="missing"):
        crafter_score({"collect_wood": 10.0})
    with pytest.raises(ValueError, match="percentages"):
        crafter_score(rates(0.0, collect_wood=1.5e2))
