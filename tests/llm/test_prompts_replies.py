"""Role templates render with their schemas; replies parse into typed objects and bad ones are refused."""

from __future__ import annotations

import json

import jsonschema
import pytest
from llama_cpp.llama_grammar import LlamaGrammar

from rlgpt import prompts
from rlgpt.agents.common import knowledge_values
from rlgpt.agents.replies import (
    Decomposition,
    FastReply,
    FastSetup,
    Feedback,
    Plan,
    ReplyValidationError,
    parse_reply,
)

VALUES = {
    "planner": {"task": "make an iron pickaxe", "skills": "collect_wood: get wood", "env_rules": "2D",
                "macro_api": "move(d)"},
    "slow": {"task": "collect wood", "env_rules": "Crafter", "macro_api": "move(d)", "feedback": "none",
             **knowledge_values("slow")},
    "fast": {"task": "collect wood", "name": "chop", "description": "chop a tree", "goal": "wood",
             "macro_api": "move(d)", "env_rules": "rules", "feedback": "none", "skills": "",
             **knowledge_values("fast")},
    "fast_reward": {"task": "collect wood", "decomposition": "chop", "macro_api": "move(d)",
                    "env_rules": "rules", "feedback": "none", **knowledge_values("fast_reward")},
    "fast_setup": {"task": "collect wood", "decomposition": "chop", "macros": "chop", "env_rules": "rules",
                   "macro_api": "move(d)", "feedback": "none"},
    "critic": {"task": "collect wood", "iteration": "2", "eval_report": "success 0.4", "diagnostics": "none",
               "env_rules": "rules", "macro_api": "move(d)", "decomposition": "chop", "probes": "none",
               "subactions": "none"},
}


@pytest.mark.parametrize("role", prompts.TEMPLATES)
def test_every_template_renders_with_its_schema(role: str) -> None:
    messages = prompts.render(role, **VALUES[role])
    assert [m["role"] for m in messages] == ["system", "user"]
    if role in prompts.SCHEMA_FOR_ROLE:
        assert prompts.schema_text(role) in messages[0]["content"]
        assert json.loads(prompts.schema_text(role)) == prompts.schema_for_role(role)
    else:
        # Code templates ask for a ```python block and never show a JSON schema.
        assert "```python" in messages[0]["content"] and '"$schema"' not in messages[0]["content"]
        with pytest.raises(prompts.PromptError, match="replies with code"):
            prompts.schema_for_role(role)
    assert VALUES[role]["task"] in messages[1]["content"]
    assert "$" not in messages[1]["content"]


@pytest.mark.parametrize("role", sorted(prompts.SCHEMA_FOR_ROLE))
def test_schemas_are_valid_and_compile_to_llama_grammar(role: str) -> None:
    schema = prompts.schema_for_role(role)
    jsonschema.Draft202012Validator.check_schema(schema)
    LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False)


def test_render_reports_missing_and_unexpected_values() -> None:
    with pytest.raises(prompts.PromptError, match=r"missing \['feedback'\], unexpected \['extra'\]"):
        prompts.render("slow", task="t", env_rules="e", macro_api="a", extra="x", **knowledge_values("slow"))
    with pytest.raises(prompts.PromptError, match="unknown role 'boss'"):
        prompts.render("boss")


EXAMPLES = {
    "slow": {"subactions": [{"name": "find_tree", "description": "walk", "how": "rl", "goal": "",
                             "why": "explore"},
                            {"name": "chop", "description": "collect wood", "how": "code", "goal": "wood",
                             "why": "fixed"}]},
    "fast_setup": {"horizon": 500, "observation": ["view", "vector"], "macros": ["chop"]},
    "fast": {"macros": [{"name": "chop", "description": "face tree", "code": "def chop(api):\n  yield 5"}],
             "reward_code": "def reward(game, prev):\n    return 0", "observation": ["view", "vector"],
             "horizon": 500},
    "critic": {"target": "fast", "problems": ["macro never ends"], "suggestions": ["return after 10 steps"]},
    "planner": {"subtasks": [{"name": "collect_wood", "description": "collect wood",
                              "reuse_skill": "collect_wood"},
                             {"name": "place_table", "description": "place table", "reuse_skill": ""}]},
}
TYPES = {"slow": Decomposition, "fast": FastReply, "fast_setup": FastSetup, "critic": Feedback,
         "planner": Plan}


@pytest.mark.parametrize("role", sorted(EXAMPLES))
def test_replies_parse_and_round_trip(role: str) -> None:
    reply = parse_reply(role, EXAMPLES[role])
    assert isinstance(reply, TYPES[role])
    assert reply.to_dict() == EXAMPLES[role]


@pytest.mark.parametrize(("role", "mutate", "message"), [
    ("slow", lambda d: d["subactions"][0].update(how="maybe"), "'maybe' is not one of"),
    ("slow", lambda d: d["subactions"][1].update(name="find_tree"), "appears twice"),
    ("slow", lambda d: d["subactions"][0].update(goal="gold"), "'gold' is not one of"),
    ("fast_setup", lambda d: d.update(horizon=0), "less than the minimum"),
    ("fast_setup", lambda d: d.update(observation=["pixels"]), "'pixels' is not one of"),
    ("fast", lambda d: d.update(horizon=0), "less than the minimum"),
    ("fast", lambda d: d["macros"][0].update(name="Bad Name"), "identifier"),
    ("planner", lambda d: d["subtasks"][0].update(name="wood"), "'wood' is not one of"),
    ("critic", lambda d: d.pop("target"), "'target' is a required property"),
    ("planner", lambda d: d.update(subtasks=[]), "should be non-empty"),
])
def test_invalid_replies_are_refused(role: str, mutate, message: str) -> None:
    data = json.loads(json.dumps(EXAMPLES[role]))
    mutate(data)
    with pytest.raises(ReplyValidationError, match=message):
        parse_reply(role, data)
