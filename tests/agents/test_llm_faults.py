"""LLM faults degrade, never end a run (issue 13), against the real embedded 0.5B model: prompts are cut to
the context in priority order; a server-side overflow is shrunk and answered; a reply that never validates
falls back per role (recorded, counted, retried with a new seed); garbled goals are repaired."""

from __future__ import annotations

from pathlib import Path

import pytest
from agent_helpers import Recording

from rlgpt.agents.critic import Critic
from rlgpt.agents.fast import FastAgent
from rlgpt.agents.replies import Decomposition, FastSetup, SubAction
from rlgpt.agents.slow import RECIPE_GRAPH, SlowAgent, check_goals, recipe_decomposition
from rlgpt.config import AgentConfig, RunConfig
from rlgpt.llm.cache import ResponseCache
from rlgpt.llm.client import LLMClient, retry_seed
from rlgpt.llm.config import LLMConfig
from rlgpt.llm.context import CUT_ORDER, DEFAULT_N_CTX, RolePrompt, fit, priority, prompt_tokens
from rlgpt.macro.probe import probe_macro

CHOP = SubAction("chop_tree", "face a tree and collect wood", "code", "wood", "fixed recipe")
IDLE = "def chop_tree(game):\n    while True:\n        yield 'noop'\n"
# A completion limit no JSON reply of these schemas fits in: the real model's reply is cut, never valid.
UNFIT = AgentConfig(json_max_tokens=4, slow_max_tokens=4)


def big_critic_prompt(critic: Critic) -> RolePrompt:
    probe = probe_macro(IDLE, seeds=tuple(range(8)), max_steps=4, goal="wood")
    evaluation = {"success_rate": 0.0, "traces": [f"move_left x{i}, noop, chop_tree (max_steps)" * 8
                                                  for i in range(40)]}
    diagnostics = [f"chop_tree: [runtime] error number {i} at line {i}" for i in range(400)]
    return critic.prompt("collect_wood", 3, Decomposition((CHOP,)), [probe] * 6, evaluation, diagnostics)


def test_default_context_is_large_enough_without_a_config() -> None:
    assert DEFAULT_N_CTX == 8192
    assert LLMConfig().n_ctx == DEFAULT_N_CTX and RunConfig().llm.n_ctx == DEFAULT_N_CTX


def test_prompt_is_cut_in_priority_order_to_fit(agent_model) -> None:
    client = LLMClient(agent_model)
    critic = Critic(client, AgentConfig(critic_max_chars=40000))
    whole = prompt_tokens(client, big_critic_prompt(critic).render())
    for shortfall, expect in ((200, ["probes"]), (whole // 3, None)):
        prompt = big_critic_prompt(critic)
        budget = whole - shortfall
        messages = fit(prompt, client, 0, budget)
        assert prompt_tokens(client, messages) <= budget
        assert prompt.cuts and (expect is None or prompt.cuts == expect)
        # Cut in priority order (what is cut first, first), each with a visible marker.
        assert prompt.cuts == sorted(prompt.cuts, key=priority, reverse=True)
        assert all(name in CUT_ORDER for name in prompt.cuts)
        assert all("[cut:" in prompt.values[name] for name in prompt.cuts)
        # The rules, the API and the task are never cut.
        assert critic.prompt("collect_wood", 3, None).values["env_rules"] == prompt.values["env_rules"]
        assert "Task: unlock the achievement collect_wood" in messages[1]["content"]
    assert len(prompt.cuts) >= 2


@pytest.mark.slow
def test_overflowing_prompt_is_shrunk_and_answered(agent_model, tmp_path: Path) -> None:
    # The client believes in a context twice the model's: the prompt fitted to it overflows the real
    # llama.cpp context, which refuses it; the prompt is fitted smaller and answered.
    recording = Recording(agent_model)
    client = LLMClient(recording, n_ctx=2 * agent_model.n_ctx, schema_retries=0,
                       cache=ResponseCache(tmp_path / "cache"))
    critic = Critic(client, AgentConfig(critic_max_chars=40000, json_max_tokens=96))
    args = ("collect_wood", 3, Decomposition((CHOP,)))
    prompt = big_critic_prompt(critic)
    assert prompt_tokens(agent_model, prompt.render()) > agent_model.n_ctx
    feedback, error = critic.review_or_fallback(*args, *[[probe_macro(IDLE, seeds=(0,), max_steps=4,
                                                                        goal="wood")] * 40],
                                                {"traces": ["noop " * 400] * 30}, ["x" * 300] * 200)
    # The first request was refused by llama.cpp (too long for its context), the last one answered.
    sent = [prompt_tokens(agent_model, messages) for messages, _, _ in recording.requests]
    assert len(sent) >= 2 and sent[0] + 96 > agent_model.n_ctx and sent[-1] + 96 <= agent_model.n_ctx
    assert sent == sorted(sent, reverse=True)
    assert "[cut:" in recording.requests[-1][0][1]["content"]
    assert client.usage["critic"].calls == 1  # one answer (a refused prompt is no call)
    # Answered: valid feedback, or (a 96-token reply of the 0.5B may be cut) the fallback, never overflow.
    assert "context" not in error and feedback.target in ("fast", "slow", "done")


@pytest.mark.slow
def test_never_valid_replies_fall_back_per_role(agent_model, tmp_path: Path) -> None:
    recording = Recording(agent_model)
    cache = ResponseCache(tmp_path / "cache")
    client = LLMClient(recording, cache=cache, schema_retries=1)

    slow = SlowAgent(client, UNFIT).decompose_or_fallback("make_wood_pickaxe")
    assert slow.fallback == RECIPE_GRAPH and "no schema-valid reply" in slow.error
    assert slow.decomposition == recipe_decomposition("make_wood_pickaxe")
    assert [s.goal for s in slow.decomposition.subactions] == ["collect_wood", "place_table",
                                                               "make_wood_pickaxe"]
    # The re-ask after the invalid reply used a new sampling seed (its own cache entry).
    seeds = [sampling.seed for _, _, sampling in recording.requests]
    assert seeds == [0, retry_seed(0, 1)] and seeds[0] != seeds[1]

    feedback, error = Critic(client, UNFIT).review_or_fallback("collect_wood", 1, Decomposition((CHOP,)))
    assert feedback.target == "fast" and error and error[:60] in feedback.problems[0]

    setup, setup_error = FastAgent(client, UNFIT).setup_or_fallback(
        "collect_wood", Decomposition((CHOP,)), ["chop_tree"])
    assert setup == FastSetup.default(["chop_tree"]) and setup_error
    assert client.metrics()["llm/fallbacks"] == 3.0
    assert {r: client.metrics()[f"llm/{r}/fallbacks"] for r in ("slow", "critic", "fast")} == \
        {"slow": 1.0, "critic": 1.0, "fast": 1.0}

    # Resuming with the same cache asks the model nothing again and lands on the same fallback.
    asked = len(recording.requests)
    again = SlowAgent(LLMClient(recording, cache=cache, schema_retries=1), UNFIT)
    assert again.decompose_or_fallback("make_wood_pickaxe").decomposition == slow.decomposition
    assert len(recording.requests) == asked


def test_retry_seed_is_new_per_attempt() -> None:
    seeds = [retry_seed(5, a) for a in range(4)]
    assert seeds[0] == 5 and len(set(seeds)) == 4


def sub(name: str, goal: str) -> dict:
    return {"name": name, "description": "d", "how": "code", "goal": goal, "why": ""}


def test_check_goals_repairs_garbled_goals() -> None:
    data = {"subactions": [sub("collect_wood", "wood"), sub("get_coal", "Coals"), sub("dance", "moonwalk"),
                           sub("make_stone_pickaxe", "collect_stone")]}
    fixed, notes = check_goals(data, "make_stone_pickaxe")
    goals = [s["goal"] for s in fixed["subactions"]]
    # Named after an achievement -> that achievement; a misspelt item -> the item; nonsense -> dropped; the
    # chain's links no goal covers (the table, the wood pickaxe, and the stone: a gap after the wood)
    # inserted before the last.
    assert goals == ["collect_wood", "coal", "", "place_table", "make_wood_pickaxe", "collect_stone",
                     "make_stone_pickaxe"]
    assert len(notes) == 8 and any("moonwalk" in n and "dropped" in n for n in notes)
    assert sum(n.startswith("inserted") for n in notes) == 3
    assert data["subactions"][3]["goal"] == "collect_stone"  # the input is not modified
    # Its goal was another step's, and so was its description: the recipe's replaces it.
    assert fixed["subactions"][-1]["description"].startswith("make_stone_pickaxe: uses 1 wood, 1 stone")
    assert [s["description"] for s in fixed["subactions"][:3]] == ["d", "d", "d"]
    Decomposition.from_dict(fixed)


def test_a_material_the_plan_skips_between_two_links_is_inserted_one_before_its_first_is_not() -> None:
    """The 1.5B's make_stone_pickaxe plan (seed 0): wood, table, wood pickaxe, stone pickaxe, no stone. Its
    stone-pickaxe macros crafted from the inventory as the recipe line says and never gathered the stone."""
    plan = {"subactions": [sub("get_wood", "wood"), sub("place_table", "place_table"),
                           sub("make_wood_pickaxe", "make_wood_pickaxe"),
                           sub("make_stone_pickaxe", "make_stone_pickaxe")]}
    fixed, notes = check_goals(plan, "make_stone_pickaxe")
    assert [s["goal"] for s in fixed["subactions"]] == ["wood", "place_table", "make_wood_pickaxe",
                                                         "collect_stone", "make_stone_pickaxe"]
    assert notes == ["inserted 'collect_stone' at 3: no sub-action had this link of the recipe chain as goal"]
    assert fixed["subactions"][3]["how"] == "code"
    # The same gap before a station: the furnace is built of stone, which the plan never gathers.
    furnace = {"subactions": [sub("wood", "wood"), sub("table", "place_table"), sub("pick", "wood_pickaxe"),
                              sub("furnace", "place_furnace")]}
    assert [s["goal"] for s in check_goals(furnace, "place_furnace")[0]["subactions"]] == [
        "wood", "place_table", "wood_pickaxe", "collect_stone", "place_furnace"]
    # Wood the chain needs before the plan's first link is that first macro's to gather (or a stored skill).
    late = {"subactions": [sub("place_table", "place_table"), sub("make_wood_pickaxe", "make_wood_pickaxe")]}
    assert check_goals(late, "make_wood_pickaxe") == (late, [])
    # Without the recipes in the prompts nothing is inserted.
    assert check_goals(plan, "make_stone_pickaxe", "rules")[0] == plan


def test_a_goal_naming_the_achievements_own_item_keeps_its_description() -> None:
    data = {"subactions": [sub("collect_wood", "wood"), sub("place_table", "table"),
                           sub("make_wood_pickaxe", "wood_pickaxe")]}
    fixed, notes = check_goals(data, "make_wood_pickaxe")
    assert [s["goal"] for s in fixed["subactions"]] == ["collect_wood", "place_table", "make_wood_pickaxe"]
    assert [s["description"] for s in fixed["subactions"]] == ["d", "d", "d"]
    assert not any("description" in n for n in notes)
    # Without recipes in the prompts, a replaced description names the achievement only.
    shifted = {"subactions": [sub("make_wood_pickaxe", "place_table")]}
    assert check_goals(shifted, "make_wood_pickaxe", "rules")[0]["subactions"][0]["description"] == (
        "unlock the achievement make_wood_pickaxe")


def test_a_craft_or_place_description_that_contradicts_the_recipe_gets_the_recipes() -> None:
    # Wordings the 1.5B wrote (make_stone_sword, place_furnace): the collecting sub-action's template copied
    # onto a craft, and a table placed on a tree. The fast agent wrote what they said.
    said = {"get_wood": "explore until a tree tile is in view, walk to it, face it and do until the "
                        "inventory holds 4 wood",
            "place_table": "face a tree tile and place_table",
            "make_wood_pickaxe": "explore until a table tile is in view, walk to it, face it and do until "
                                 "the inventory holds 1 wood_pickaxe",
            "pickaxe": "walk to the nearest stone tile, face it and do until the inventory holds 1 "
                       "stone_pickaxe",
            "make_stone_sword": "face a grass tile and make_stone_sword"}
    goals = {"get_wood": "wood", "place_table": "place_table", "make_wood_pickaxe": "make_wood_pickaxe",
             "pickaxe": "stone_pickaxe", "make_stone_sword": "make_stone_sword"}
    data = {"subactions": [{**sub(n, goals[n]), "description": d} for n, d in said.items()]}
    fixed, notes = check_goals(data, "make_stone_sword+make_stone_pickaxe")
    got = {s["name"]: s["description"] for s in fixed["subactions"]}
    assert got["get_wood"] == said["get_wood"]  # collecting is a `do`
    assert got["make_stone_sword"] == said["make_stone_sword"]  # nothing the recipe forbids
    assert got["place_table"].startswith("place_table: uses") and "grass, sand, path" in got["place_table"]
    assert got["make_wood_pickaxe"].startswith("make_wood_pickaxe: uses 1 wood")
    assert got["pickaxe"].startswith("make_stone_pickaxe: uses")
    assert "place_table: description -> the recipe's (table cannot be placed on tree)" in notes
    assert ("make_wood_pickaxe: description -> the recipe's (it said to `do`, and make_wood_pickaxe is its "
            "own action)") in notes
    Decomposition.from_dict(fixed)


STEPS = [sub("get_wood", "wood"), sub("get_iron", "iron"), sub("pickaxe", "wood_pickaxe"),
         sub("stone", "collect_stone"), sub("iron_pickaxe", "make_iron_pickaxe")]


@pytest.mark.parametrize("task, kept, inserted", [
    ("collect_iron", ["get_wood", "get_iron"],
     ["get_wood", "place_table", "make_wood_pickaxe", "collect_stone", "make_stone_pickaxe", "get_iron"]),
    ("collect_wood", ["get_wood"], ["get_wood"]),
    ("make_wood_pickaxe+collect_stone", ["get_wood", "get_iron", "pickaxe", "stone"],
     ["get_wood", "get_iron", "place_table", "pickaxe", "stone"])])
def test_check_goals_drops_what_comes_after_the_tasks_achievements(task: str, kept: list[str],
                                                                     inserted: list[str]) -> None:
    """The task's episode ends when its achievements are unlocked: later sub-actions never run (the small
    model appends the tech tree's next step, e.g. an iron pickaxe after collecting iron). The chain's links
    left out are inserted before the first later link (iron needs the stone pickaxe, and so on)."""
    fixed, notes = check_goals({"subactions": STEPS}, task)
    names = [s["name"] for s in fixed["subactions"]]
    assert [n for n in names if n in {s["name"] for s in STEPS}] == kept and names == inserted
    assert sum("after the task's achievements" in n for n in notes) == len(STEPS) - len(kept)
    # Without the recipes in the prompt nothing is inserted (the plan's knowledge stays the model's).
    assert [s["name"] for s in check_goals({"subactions": STEPS}, task, "rules")[0]["subactions"]] == kept


def test_check_goals_keeps_every_step_before_an_uncovered_task() -> None:
    fixed, notes = check_goals({"subactions": STEPS}, "collect_diamond")
    assert [s["name"] for s in fixed["subactions"]] == [s["name"] for s in STEPS] + ["collect_diamond"]
    assert not any("after the task's achievements" in n for n in notes)


@pytest.mark.parametrize("task", ["collect_diamond", "eat_cow", "place_furnace+make_iron_sword"])
def test_check_goals_appends_the_tasks_own_achievement(task: str) -> None:
    data = {"subactions": [sub(f"step_{i}", "wood") for i in range(8)]}
    fixed, notes = check_goals(data, task)
    goals = [s["goal"] for s in fixed["subactions"]]
    for target in task.split("+"):
        assert target in goals
    assert len(goals) <= 8 and notes
    Decomposition.from_dict(fixed)
    assert check_goals({"subactions": [sub("get", "diamond")]}, "collect_diamond")[1] == []  # the item counts
    unchanged, none = check_goals(fixed, task)
    assert unchanged == fixed and none == []
