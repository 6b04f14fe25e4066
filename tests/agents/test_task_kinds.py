"""Every task kind the CLI accepts has a recipe-graph fallback, and the slow agent's reply budget fits the
longest decomposition its schema allows (issue 27)."""

from __future__ import annotations

import pytest

from rlgpt import prompts
from rlgpt.agents.envdoc import achievement_requirements, benchmark_plan
from rlgpt.agents.planner import Planner, plan_goals
from rlgpt.agents.slow import (
    check_goals,
    max_reply_chars,
    recipe_chain,
    recipe_decomposition,
    reply_token_bound,
    rl_decomposition,
    slow_max_tokens,
    task_targets,
)
from rlgpt.config import AgentConfig
from rlgpt.envs.tasks import ACHIEVEMENTS
from rlgpt.macro.prefix import StartSummary


def test_the_benchmark_plan_covers_every_achievement_prerequisites_first() -> None:
    plan = benchmark_plan()
    assert sorted(plan) == sorted(ACHIEVEMENTS)
    needs = achievement_requirements()
    for i, achievement in enumerate(plan):
        assert needs[achievement] <= set(plan[:i]), achievement
    # The tech tree comes first; survival achievements no recipe involves come last.
    assert plan[-5:] == ("collect_drink", "defeat_skeleton", "defeat_zombie", "eat_cow", "wake_up")
    # From where an episode stands: what is unlocked is left out, the order kept.
    assert benchmark_plan(["collect_wood", "collect_sapling"]) == tuple(
        a for a in plan if a not in ("collect_wood", "collect_sapling"))


@pytest.mark.parametrize("task", ["crafter", "collect_wood", "make_wood_pickaxe+collect_stone",
                                  "collect_diamond", "place_plant+eat_cow"])
@pytest.mark.parametrize("env_doc", ["full", "rules", "none"])
def test_every_task_kind_has_a_fallback_decomposition(task: str, env_doc: str) -> None:
    recipe = recipe_decomposition(task)
    maximum = prompts.schema_for_role("slow")["properties"]["subactions"]["maxItems"]
    assert 1 <= len(recipe.subactions) <= maximum
    goals = [s.goal for s in recipe.subactions]
    needs = achievement_requirements()
    for i, goal in enumerate(goals):  # a chain an episode can follow (collect_diamond's: its last steps)
        assert needs[goal] <= set(goals[:i]) or task == "collect_diamond", goals
    if task == "crafter":
        assert goals == list(benchmark_plan()[:maximum]) and task_targets(task) == []
    else:
        assert set(task.split("+")) <= set(goals)
    # The repair pass leaves a fallback as it is (nothing to append or drop).
    assert check_goals(recipe.to_dict(), task) == (recipe.to_dict(), [])
    learned = rl_decomposition(task, env_doc)
    assert all(s.how == "rl" for s in learned.subactions) and learned.subactions


def test_a_chain_links_fallback_plans_from_its_start() -> None:
    start = StartSummary(("collect_wood", "place_table"), (("wood", 1),))
    assert recipe_chain("make_wood_pickaxe", start) == ("make_wood_pickaxe",)
    assert recipe_chain("crafter", start) == benchmark_plan(start.unlocked)[:8]


def test_every_decomposition_string_is_bounded_small_and_the_reply_budget_holds_the_longest() -> None:
    schema = prompts.schema_for_role("slow")
    item = schema["properties"]["subactions"]["items"]["properties"]
    # llama.cpp turns each maxLength into grammar rules: they stay small.
    assert all(("maxLength" in p and p["maxLength"] <= 200) or "enum" in p for p in item.values())
    chars, values = max_reply_chars(schema)
    assert chars > schema["properties"]["subactions"]["maxItems"] * (40 + 160 + 80)
    bound = reply_token_bound(schema)
    assert bound >= chars / 3.0 + values
    assert slow_max_tokens(AgentConfig()) == bound > AgentConfig().json_max_tokens
    assert slow_max_tokens(AgentConfig(json_max_tokens=4096)) == 4096
    assert slow_max_tokens(AgentConfig(slow_max_tokens=64)) == 64
    with pytest.raises(ValueError, match="maxItems"):
        max_reply_chars({"type": "array", "items": {"type": "string", "maxLength": 3}})
    with pytest.raises(ValueError, match="maxLength"):
        max_reply_chars({"type": "string"})


def test_the_planner_plans_every_task_kind() -> None:
    assert plan_goals("collect_wood+place_table") == ("collect_wood", "place_table")
    limit = prompts.schema_for_role("planner")["properties"]["subtasks"]["maxItems"]
    assert plan_goals("crafter") == benchmark_plan()[:limit]
    with pytest.raises(ValueError, match="unknown achievement"):
        Planner(None).plan("crafter+wood")  # type: ignore[arg-type]


def test_every_achievement_in_the_benchmark_plan_says_how_it_is_unlocked() -> None:
    """The benchmark's fallback reaches the survival achievements too: each has a line of its own."""
    from rlgpt.agents.envdoc import requirement_lines

    for achievement in ACHIEVEMENTS:
        last = requirement_lines([achievement]).splitlines()[-1]
        assert "see the rules above" not in last and achievement in last
