"""The fast agent's reward check on real Crafter (no model needed): compile, dry run, and the rejection of
rewards that pay for a state instead of a change."""

from __future__ import annotations

import pytest

from rlgpt.agents.fast import FastAgent
from rlgpt.config import AgentConfig
from rlgpt.macro.diagnostics import MacroCompileError


@pytest.fixture(scope="module")
def agent() -> FastAgent:
    return FastAgent(None, AgentConfig(reward_dry_run_steps=30))  # type: ignore[arg-type]


@pytest.mark.parametrize("body", [
    'return 10.0 if game.inventory["wood"] >= 3 else -1.0',  # what the 1.5B wrote for make_wood_pickaxe
    "return -0.01",  # a per-step penalty
    'return 0.1 * game.inventory["health"]',
])
def test_rewards_paid_where_nothing_changed_are_sent_back(agent: FastAgent, body: str) -> None:
    with pytest.raises(MacroCompileError) as err:
        agent.check_reward(f"def reward(game, prev):\n    {body}\n")
    (diagnostic,) = err.value.diagnostics
    assert diagnostic.kind == "reward_level" and "dry-run steps where no" in diagnostic.message


@pytest.mark.parametrize("body", [
    'return 0.5 * (game.inventory["wood"] - prev.inventory["wood"])',
    "return 0.0",
    'return 1.0 if game.achievements["collect_wood"] > prev.achievements["collect_wood"] else 0.0',
])
def test_rewards_of_changes_pass(agent: FastAgent, body: str) -> None:
    agent.check_reward(f"def reward(game, prev):\n    {body}\n")
