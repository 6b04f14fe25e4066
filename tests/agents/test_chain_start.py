"""A chain's later subtask starts where the skills before it left off (`rlgpt.macro.prefix.StartSummary`):
every role's task description says what the episode starts with, the recipe steps already done are left
out (unless their material is needed again), and the slow agent's recipe-graph fallback plans only what is
missing. Prompts of tasks that start in a fresh world are unchanged."""

from __future__ import annotations

import pytest
from crafter_helpers import played_starts

from rlgpt.agents.common import describe_task
from rlgpt.agents.critic import Critic
from rlgpt.agents.envdoc import prerequisite_chain, remaining_chain, requirement_lines
from rlgpt.agents.fast import FastAgent
from rlgpt.agents.replies import Decomposition, SubAction
from rlgpt.agents.slow import SlowAgent, recipe_decomposition
from rlgpt.macro.compiler import MacroSource, compile_macro
from rlgpt.macro.prefix import PrefixLink, StartSummary
from rlgpt.run.loop import Agents

WOOD = compile_macro(MacroSource("wood", 'def wood(game):\n    yield from game.collect("wood", 3)\n'))
TABLE = compile_macro(MacroSource("table", 'def table(game):\n    yield from game.place("table")\n'))
STATES = played_starts((PrefixLink(WOOD, "collect_wood"), PrefixLink(TABLE, "place_table")))
# After collect_wood, place_table, make_wood_pickaxe and collect_stone: the pickaxe and one stone in hand.
AFTER_STONE = StartSummary(("collect_stone", "collect_wood", "make_wood_pickaxe", "place_table"),
                           (("stone", 1), ("wood_pickaxe", 1)))


def test_the_remaining_chain_leaves_out_what_the_start_has_done() -> None:
    full = prerequisite_chain(["make_stone_pickaxe"])
    assert full == ("collect_wood", "place_table", "make_wood_pickaxe", "collect_stone", "make_stone_pickaxe")
    # The stone pickaxe uses 1 wood (none held: collect it again) and 1 stone (held: done).
    assert remaining_chain(["make_stone_pickaxe"], AFTER_STONE.unlocked, dict(AFTER_STONE.inventory)) == (
        "collect_wood", "make_stone_pickaxe")
    with_wood = dict(AFTER_STONE.inventory, wood=2)
    assert remaining_chain(["make_stone_pickaxe"], AFTER_STONE.unlocked, with_wood) == ("make_stone_pickaxe",)
    # Nothing done: the whole chain, and the same text as before starts existed.
    assert remaining_chain(["make_stone_pickaxe"]) == full
    assert requirement_lines(["make_stone_pickaxe"], (), {}) == requirement_lines(["make_stone_pickaxe"])
    # A goal is listed even when a start has it already.
    assert remaining_chain(["place_table"], ("collect_wood", "place_table"), {}) == ("place_table",)


def test_the_task_description_states_the_start_and_lists_only_the_missing_steps() -> None:
    text = describe_task("make_stone_pickaxe", "full", AFTER_STONE)
    assert AFTER_STONE.describe() in text
    assert "1. collect_wood (1 wood needed in total" in text and "2. make_stone_pickaxe" in text
    assert "place_table:" not in text and "collect_stone" not in text.split("What it takes")[1]
    held = StartSummary(AFTER_STONE.unlocked, (("stone", 1), ("wood", 1), ("wood_pickaxe", 1)))
    assert "1. make_stone_pickaxe" in describe_task("make_stone_pickaxe", "full", held)
    # Without recipes in the prompt (the ablation) the start is still stated: it is the episode.
    assert describe_task("make_stone_pickaxe", "none", AFTER_STONE).endswith(AFTER_STONE.describe())
    assert describe_task("make_stone_pickaxe", "full", None) == describe_task("make_stone_pickaxe")


def test_the_recipe_fallback_plans_only_what_the_start_lacks() -> None:
    goals = [s.goal for s in recipe_decomposition("make_stone_pickaxe", AFTER_STONE).subactions]
    assert goals == ["collect_wood", "make_stone_pickaxe"]
    assert [s.goal for s in recipe_decomposition("make_stone_pickaxe").subactions] == list(
        prerequisite_chain(["make_stone_pickaxe"]))


@pytest.mark.parametrize("role", ["slow", "fast", "fast_reward", "fast_setup", "critic"])
def test_every_role_is_told_where_the_episodes_start(role) -> None:
    """`Agents.starting_from` reaches every role's prompt; an empty start puts them back to fresh
    worlds."""
    fresh_agents = Agents(SlowAgent(None), FastAgent(None), Critic(None))  # prompts only: no model is asked
    sub = SubAction("get_wood", "collect one wood", "code", "wood", "recipe")

    def task_text(agents: Agents) -> str:
        prompt = {"slow": lambda: agents.slow.prompt("make_stone_pickaxe"),
                  "fast": lambda: None,
                  "fast_reward": lambda: agents.fast.reward_prompt("make_stone_pickaxe",
                                                                   Decomposition((sub,))),
                  "fast_setup": lambda: agents.fast.setup_prompt("make_stone_pickaxe", None, ["get_wood"]),
                  "critic": lambda: agents.critic.prompt("make_stone_pickaxe", 1, None)}[role]()
        if prompt is None:  # the macro prompt is rendered and fitted in one call: read its text
            return "\n".join(m["content"] for m in agents.fast.macro_messages("make_stone_pickaxe", sub))
        return prompt.values["task"]

    fresh = task_text(fresh_agents)
    started = fresh_agents.starting_from(STATES)  # after collecting wood and placing a table, on real worlds
    start = started.fast.start
    assert start == StartSummary.of(STATES) and "place_table" in start.unlocked
    assert started.slow.start == started.critic.start == start
    assert start.describe() in task_text(started) and start.describe() not in fresh
    assert started.fast.start_states == tuple(STATES)
    again = started.starting_from(())
    assert again.fast.start is None and again.slow.start is None and again.critic.start is None
    assert task_text(again) == fresh and again.fast.start_states == ()


def test_a_reply_that_redoes_the_chains_prefix_keeps_only_what_is_missing() -> None:
    from rlgpt.agents.slow import check_goals

    def sub(name: str, goal: str) -> dict:
        return {"name": name, "description": name, "how": "code", "goal": goal, "why": "recipe"}

    reply = {"subactions": [sub("get_wood", "collect_wood"), sub("table", "place_table"),
                            sub("pickaxe", "wood_pickaxe"), sub("get_stone", "collect_stone"),
                            sub("stone_pickaxe", "make_stone_pickaxe")]}
    fixed, notes = check_goals(reply, "make_stone_pickaxe", "full", AFTER_STONE)
    # Wood is needed again (the stone pickaxe uses 1, none held); the table, the wood pickaxe (a goal naming
    # the item its achievement gives counts as that achievement) and the stone (1 held) are done.
    assert [s["goal"] for s in fixed["subactions"]] == ["collect_wood", "make_stone_pickaxe"]
    assert len(notes) == 3 and all("unlocked at the start" in n for n in notes)
    assert check_goals(reply, "make_stone_pickaxe", "full")[0] == reply  # a fresh world: nothing dropped
    # A reply of only done steps: the task's own step comes back (appended), never an empty plan.
    only_done, _ = check_goals({"subactions": [sub("table", "place_table")]}, "make_stone_pickaxe", "full",
                               AFTER_STONE)
    assert [s["goal"] for s in only_done["subactions"]] == ["make_stone_pickaxe"]


def test_starting_from_keeps_what_the_roles_were_constructed_with() -> None:
    """A subtask's roles are constructed anew (`Agents.starting_from`): its start and the chain's skills
    change, the rest is what the run's roles were constructed with."""
    from rlgpt.config import AgentConfig
    from rlgpt.macro.code_skills import CodeSkill
    from rlgpt.macro.contain import ContainLimits

    config, contain = AgentConfig(samples=3, env_doc="none"), ContainLimits(memory_mb=700)
    wood = CodeSkill("get_wood", "collect wood", "collect_wood", "def get_wood(game):\n    yield 0\n", 1.0)
    phases: list[str] = []
    run = Agents(SlowAgent(None, config), FastAgent(None, config, contain=contain, on_phase=phases.append,
                                                    library_skills={"get_wood": wood}), Critic(None, config))
    sub = run.starting_from(STATES, code_skills={"chain_wood": wood})
    assert sub.slow.config is sub.fast.config is sub.critic.config is config
    assert sub.fast.contain is contain and sub.fast.library_skills == {"get_wood": wood}
    assert sub.fast.code_skills == {"chain_wood": wood}
    sub.fast.on_phase("probe")
    assert phases == ["probe"]
    # Without new skills the fast agent keeps its own.
    assert sub.starting_from(()).fast.code_skills == {"chain_wood": wood}
