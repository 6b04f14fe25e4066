"""The prompt-knowledge ablation (`AgentConfig.env_doc`, `AgentConfig.examples`): each level changes what
every role's prompt says, ``full`` with examples is the prompt as it was, a bad value is a ConfigError, and
under the ablation the slow agent's fallback does not bring back the withheld recipes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from loop_helpers import record, role_schema, slow_sampling, smoke_config

from rlgpt.agents.critic import Critic
from rlgpt.agents.envdoc import crafter_rules, requirement_lines
from rlgpt.agents.fast import FastAgent
from rlgpt.agents.planner import Planner
from rlgpt.agents.replies import SubAction
from rlgpt.agents.slow import RECIPE_GRAPH, TASK_AS_RL, SlowAgent
from rlgpt.config import AgentConfig, ConfigError, load_run_config
from rlgpt.llm.config import build_client
from rlgpt.run.baselines import policy_subaction

TASK = "make_wood_pickaxe"
CHAIN = requirement_lines([TASK])
"""The computed prerequisite chain `full` puts under the task."""
RULE = "- tree: needs no tool"
"""A line of crafter's rules (the Collecting section)."""
CHAIN_GUIDE = "Write one sub-action per numbered step"
SUB = SubAction("chop", "walk to a tree and collect wood", "code", "wood", "fixed recipe")


def text(messages: list[dict[str, str]]) -> str:
    return "\n".join(m["content"] for m in messages)


def prompts_at(env_doc: str, examples: bool = True) -> dict[str, str]:
    """Every role's prompt for `TASK` at one level (no model: a client without a context size is not
    fitted)."""
    cfg = AgentConfig(env_doc=env_doc, examples=examples)
    client = object()
    fast = FastAgent(client, cfg)  # type: ignore[arg-type]
    return {
        "slow": text(SlowAgent(client, cfg).prompt(TASK).render()),  # type: ignore[arg-type]
        "fast": text(fast.macro_messages(TASK, SUB)),
        "reward": text(fast.reward_prompt(TASK, None).render()),
        "setup": text(fast.setup_prompt(TASK, None, ["chop"]).render()),
        "critic": text(Critic(client, cfg).prompt(TASK, 0, None).render()),  # type: ignore[arg-type]
        "planner": text(Planner(client, cfg).messages(TASK, {})),  # type: ignore[arg-type]
    }


def test_each_env_doc_level_changes_what_every_role_is_told() -> None:
    full, rules, none = prompts_at("full"), prompts_at("rules"), prompts_at("none")
    assert CHAIN.splitlines()[0] in CHAIN and "place_table" in CHAIN  # the chain is real text to look for
    for role in full:
        # full: the rules and the computed chain; rules: the rules only; none: neither.
        assert RULE in full[role] and CHAIN in full[role], role
        assert RULE in rules[role] and CHAIN not in rules[role], role
        assert RULE not in none[role] and CHAIN not in none[role], role
        assert crafter_rules() not in none[role], role
        # Every level still names the task and lists the actions.
        for level in (full, rules, none):
            assert f"unlock the achievement {TASK}" in level[role], role
            assert "move_left" in level[role] and "make_wood_pickaxe" in level[role], role
    # The slow prompt's instruction to follow the chain goes with the chain; the stations rule with the rules.
    assert CHAIN_GUIDE in full["slow"] and CHAIN_GUIDE not in rules["slow"] + none["slow"]
    assert "Tables and furnaces do not exist" in full["slow"] + rules["slow"]
    assert "Tables and furnaces do not exist" not in none["slow"]
    # The slow example shows its own task's chain only at full.
    assert "1. collect_sapling" in full["slow"] and "1. collect_sapling" not in rules["slow"]
    assert '"get_sapling"' in rules["slow"] and '"get_sapling"' in none["slow"]
    # The code baseline's whole-task sub-action follows the level too.
    assert CHAIN in policy_subaction(TASK, "full").description
    assert CHAIN not in policy_subaction(TASK, "none").description


def test_examples_off_drops_every_worked_example() -> None:
    on, off = prompts_at("full", True), prompts_at("full", False)
    # The fast agent's examples at the default API level (primitives: `fast.examples_primitives.part.md`).
    for role, example in (("fast", "def drink_water(game):"), ("fast", "def meet_cow(game):"),
                          ("reward", 'gained = game.inventory["sapling"]'), ("slow", '"get_sapling"')):
        assert example in on[role] and example not in off[role], (role, example)
    # Only the examples go: the rules, the chain and the format instructions stay.
    for role in ("fast", "reward", "slow"):
        assert RULE in off[role] and CHAIN in off[role]
        assert "Reply with" in off[role]
    assert on["setup"] == off["setup"] and on["critic"] == off["critic"]


@pytest.mark.parametrize("override", ["agents.env_doc=partial", "agents.env_doc=", "agents.examples=maybe"])
def test_a_bad_knob_value_is_a_config_error(override: str) -> None:
    with pytest.raises(ConfigError, match=override.split("=")[0].split(".")[1]):
        load_run_config(None, [override])


def test_the_knobs_load_from_overrides() -> None:
    cfg = load_run_config(None, ["agents.env_doc=rules", "agents.examples=false"])
    assert cfg.agents.env_doc == "rules" and cfg.agents.examples is False
    with pytest.raises(ConfigError, match="full, rules, none"):
        AgentConfig(env_doc="FULL")


@pytest.mark.parametrize(("env_doc", "fallback"), [("full", RECIPE_GRAPH), ("none", TASK_AS_RL),
                                                   ("rules", TASK_AS_RL)])
def test_the_slow_fallback_uses_no_withheld_recipes(tmp_path: Path, env_doc: str, fallback: str) -> None:
    cfg = smoke_config(tmp_path / "run", "llm.schema_retries=0", f"task={TASK}", f"agents.env_doc={env_doc}")
    slow = SlowAgent(build_client(cfg.llm), cfg.agents)
    record(cfg, slow.messages(TASK), "Sure! Chop trees, then craft.", slow_sampling(cfg), role_schema("slow"))
    result = slow.decompose_or_fallback(TASK)
    assert result.fallback == fallback
    written = json.dumps(result.decomposition.to_dict())
    subs = result.decomposition.subactions
    if env_doc == "full":  # the recipe graph: the chain, each step coded with its recipe line
        assert [s.name for s in subs] == ["collect_wood", "place_table", "make_wood_pickaxe"]
        assert "nearby" in written
    else:  # only the task's name: RL learns it
        assert [(s.name, s.how, s.goal) for s in subs] == [(TASK, "rl", TASK)]
        assert "place_table" not in written and "nearby" not in written
