"""Slow agent, critic and planner against the real embedded 0.5B model: typed replies from their prompts
and schemas; the critic's prompt stays bounded; invalid plans are repaired from crafter's recipes."""

from __future__ import annotations

import json

import pytest
from agent_helpers import Recording, record_reply

from rlgpt import prompts
from rlgpt.agents.critic import Critic, render_eval
from rlgpt.agents.envdoc import achievement_requirements
from rlgpt.agents.planner import Planner, plan_problems, repair_plan
from rlgpt.agents.replies import Decomposition, Feedback, Plan, SubAction, Subtask
from rlgpt.agents.slow import SlowAgent
from rlgpt.config import AgentConfig
from rlgpt.llm.client import LLMClient
from rlgpt.llm.types import SamplingParams
from rlgpt.macro.diagnostics import Diagnostic
from rlgpt.macro.probe import probe_macro

CONFIG = AgentConfig(json_max_tokens=320)
CHOP = SubAction("chop_tree", "face a tree and collect wood", "code", "wood", "fixed recipe")
IDLE = "def chop_tree(game):\n    while True:\n        yield 'noop'\n"


@pytest.mark.slow
def test_slow_agent_decomposes_into_typed_subactions(client: LLMClient, recording: Recording) -> None:
    decomposition = SlowAgent(client, CONFIG).decompose("place_table")
    assert isinstance(decomposition, Decomposition) and decomposition.subactions
    needs = achievement_requirements()
    for sub in decomposition.subactions:
        assert sub.how in ("code", "rl") and sub.name
        goals = json.dumps(prompts.load_schema("decomposition"))
        assert sub.goal == "" or sub.goal in needs or f'"{sub.goal}"' in goals
    system = recording.requests[0][0][0]["content"]
    assert "make_wood_pickaxe: uses 1 wood" in system and "game.step_toward" in system


@pytest.mark.slow
def test_critic_reads_probes_eval_and_diagnostics(client: LLMClient, recording: Recording) -> None:
    probe = probe_macro(IDLE, seeds=(0, 1), max_steps=8, goal="wood")
    evaluation = {"task": "collect_wood", "episodes": 20, "success_rate": 0.05,
                  "achievement_success": {"collect_wood": 0.05, "collect_sapling": 0.0},
                  "macro_stats": {"chop_tree": {"calls": 40, "successes": 0, "failures": {"max_steps": 40}}},
                  "traces": ["move_left, move_left, chop_tree (max_steps)"]}
    diagnostics = [("chop_tree", Diagnostic("max_steps", "did not finish within 8 primitive steps", 3))]
    feedback = Critic(client, CONFIG).review("collect_wood", 1, Decomposition((CHOP,)), [probe], evaluation,
                                             diagnostics)
    assert isinstance(feedback, Feedback) and feedback.target in ("fast", "slow", "done")
    user = recording.requests[0][0][1]["content"]
    assert "goal wood reached 0%" in user and "max_steps 2" in user
    assert "success_rate: 0.05" in user and "collect_wood 5%" in user and "collect_sapling" not in user
    assert "macro chop_tree: calls 40, failures_max_steps 40" in user
    assert "chop_tree: [max_steps] at line 3" in user


def test_critic_prompt_is_bounded() -> None:
    probe = probe_macro(IDLE, seeds=tuple(range(12)), max_steps=4, goal="wood")
    config = AgentConfig(critic_max_chars=1500)
    huge = {"success_rate": 0.0, "traces": ["x" * 5000] * 10,
            "macro_stats": {f"m{i}": {"calls": i + 1} for i in range(400)}}
    diagnostics = [Diagnostic("exception", f"error {i}") for i in range(500)]
    messages = Critic(None, config).messages("collect_wood", 2, None, [probe] * 5, huge,  # type: ignore[arg-type]
                                             diagnostics)
    user = messages[1]["content"]
    assert len(user) < 1500 + 400 and "more characters cut" in user
    assert render_eval(None) == "(no evaluation yet)"


@pytest.mark.slow
def test_planner_returns_a_valid_chain_for_a_long_horizon_goal(client: LLMClient) -> None:
    result = Planner(client, CONFIG).plan("collect_diamond", {"collect_wood": "collects one wood"})
    assert plan_problems(result.plan, ("collect_diamond",)) == []
    assert result.plan.subtasks[-1].name == "collect_diamond"
    assert result.repaired == bool(result.problems)
    if result.model_plan is not None and not result.repaired:
        assert result.plan == result.model_plan
    json.dumps(result.to_dict())


def test_invalid_model_plan_is_repaired_and_says_so(client: LLMClient, recording: Recording) -> None:
    planner = Planner(client, CONFIG)
    skills = {"collect_wood": "collects one wood"}
    # Schema-valid but wrong (stone before any pickaxe; no table): recorded, the real model need not err.
    wrong = {"subtasks": [{"name": "collect_wood", "description": "chop", "reuse_skill": "collect_wood"},
                          {"name": "collect_stone", "description": "mine", "reuse_skill": "mine_stone"},
                          {"name": "make_stone_pickaxe", "description": "craft", "reuse_skill": ""}]}
    sampling = SamplingParams(temperature=0.0, max_tokens=CONFIG.json_max_tokens, seed=CONFIG.seed)
    record_reply(client, planner.messages("make_stone_pickaxe", skills), json.dumps(wrong), sampling,
                 prompts.schema_for_role("planner"))
    result = planner.plan("make_stone_pickaxe", skills)
    assert recording.requests == []  # served from the recorded reply through the client's cache
    assert result.repaired and result.model_plan is not None
    assert "collect_stone needs make_wood_pickaxe earlier in the plan" in result.problems
    assert "collect_stone reuses unknown skill 'mine_stone'" in result.problems
    names = [s.name for s in result.plan.subtasks]
    assert names == ["collect_wood", "place_table", "make_wood_pickaxe", "collect_stone",
                     "make_stone_pickaxe"]
    assert result.plan.subtasks[0].reuse_skill == "collect_wood" and result.plan.subtasks[3].reuse_skill == ""
    assert plan_problems(result.plan, ("make_stone_pickaxe",)) == []


def test_repair_without_a_model_plan_follows_the_dependency_graph() -> None:
    plan = repair_plan(None, ("eat_plant",), {})
    assert [s.name for s in plan.subtasks] == ["collect_sapling", "place_plant", "eat_plant"]
    bad = Plan((Subtask("place_table", "t", ""),))
    assert plan_problems(bad, ("place_table",)) == ["place_table needs collect_wood earlier in the plan"]


@pytest.mark.parametrize("api", ["expert", "primitives", "basic"])
def test_every_roles_prompt_starts_with_the_same_tokens(agent_model, api: str) -> None:
    # What llama.cpp reuses across calls is the longest common token prefix: every role's system message
    # must start with the same rules + API text (at the run's API level), so that a role's first call
    # computes only its own instructions.
    from rlgpt.agents.common import documentation
    from rlgpt.agents.fast import FastAgent

    config = AgentConfig(api=api)
    client = LLMClient(agent_model)
    decomposition = Decomposition((CHOP,))
    fast = FastAgent(client, config)
    systems = {
        "slow": SlowAgent(client, config).messages("place_table")[0],
        "fast": fast.macro_messages("place_table", CHOP)[0],
        "fast_reward": fast.reward_prompt("place_table", decomposition).render()[0],
        "fast_setup": fast.setup_prompt("place_table", decomposition, ["chop_tree"]).render()[0],
        "critic": Critic(client, config).prompt("place_table", 1, decomposition).render()[0],
        "planner": Planner(client, config).messages("place_table", {})[0],
    }
    doc = documentation(api)
    preamble = prompts.render("fast_setup", **doc, task="t", decomposition="d", macros="m",
                              feedback="f")[0]["content"].split("You are the fast agent")[0]
    assert doc["env_rules"] in preamble and doc["macro_api"] in preamble
    tokenize = agent_model.llama.tokenize
    want = tokenize(preamble.encode(), add_bos=False, special=True)
    for role, message in systems.items():
        assert message["role"] == "system" and message["content"].startswith(preamble), role
        got = tokenize(message["content"].encode(), add_bos=False, special=True)
        shared = next((i for i, (a, b) in enumerate(zip(want, got, strict=False)) if a != b), len(want))
        assert shared >= len(want) - 1, role  # the boundary token may merge with the role's first word


@pytest.mark.parametrize("api", ["basic", "primitives", "expert"])
def test_fast_examples_compile_at_their_api_level(api: str) -> None:
    """The fast prompt's example macros are valid code at the prompt's own API level, and at `primitives`
    they show the control primitives (the small model copies an example's style)."""
    import re

    from rlgpt.agents.common import knowledge_values
    from rlgpt.macro.compiler import MacroSource, compile_macro

    text = knowledge_values("fast", api=api)["examples"]
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) == 2
    for block in blocks:
        name = re.search(r"def (\w+)\(game\)", block).group(1)  # type: ignore[union-attr]
        compile_macro(MacroSource(name, block), api=api)
    uses_primitives = "yield from game." in text
    assert uses_primitives == (api == "primitives")
    assert knowledge_values("fast", api=api, examples=False)["examples"] == ""
