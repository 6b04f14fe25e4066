"""bench.chain_start's link starts: the chain's earlier links played by the trusted goal macros on real
worlds, summarised as the link's agents are told it (the model's side is measured by the script)."""

from __future__ import annotations

from bench.chain_start import start_of
from rlgpt.agents.envdoc import prerequisite_chain, remaining_chain


def test_a_links_start_has_every_earlier_achievement_and_plans_only_the_rest() -> None:
    chain = prerequisite_chain(["make_stone_pickaxe"])
    start = start_of(chain, 3, worlds=2, seed=0)  # after wood, table and the wood pickaxe
    assert set(chain[:3]) <= set(start.unlocked) and dict(start.inventory).get("wood_pickaxe", 0) >= 1
    rest = remaining_chain([chain[-1]], start.unlocked, dict(start.inventory))
    assert "place_table" not in rest and "make_wood_pickaxe" not in rest and rest[-1] == chain[-1]
