"""Role templates render with their schemas; replies parse into typed objects and bad ones are refused."""

from __future__ import annotations

import json

import jsonschema
import pytest
from llama_cpp.llama_grammar import LlamaGrammar

from rlgpt import prompts
from rlgpt.agents.replies import (
    Decomposition,
    FastReply,
    Feedback,
    Plan,
    ReplyValidationError,
    parse_reply,
)

VALUES = {
    "planner": {"task": "make an iron pickaxe", "skills": "collect_wood: get wood", "env_description": "2D"},
    "slow": {"task": "collect wood", "env_description": "Crafter", "feedback": "none"},
    "fast": {"task": "collect wood", "decomposition": "{}", "macro_api": "move(d)", "observation_keys": "inv",
             "feedback": "none"},
    "critic": {"task": "collect wood", "iteration": "2", "eval_report": "success 0.4", "diagnostics": "none"},
}


@pytest.mark.parametrize("role", prompts.ROLES)
def test_every_role_renders_with_its_schema(role: str) -> None:
    messages = prompts.render(role, **VALUES[role])
    assert [m["role"] for m in messages] == ["system", "user"]
    assert json.dumps(prompts.schema_for_role(role), indent=1) in messages[0]["content"]
    assert VALUES[role]["task"] in messages[1]["content"]
    assert "$" not in messages[1]["content"]


@pytest.mark.parametrize("role", prompts.ROLES)
def test_schemas_are_valid_and_compile_to_llama_grammar(role: str) -> None:
    schema = prompts.schema_for_role(role)
    jsonschema.Draft202012Validator.check_schema(schema)
    LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False)


def test_render_reports_missing_and_unexpected_values() -> None:
    with pytest.raises(prompts.PromptError, match=r"missing \['feedback'\], unexpected \['extra'\]"):
        prompts.render("slow", task="t", env_description="e", extra="x")
    with pytest.raises(prompts.PromptError, match="unknown role 'boss'"):
        prompts.render("boss")


EXAMPLES = {
    "slow": {"subactions": [{"name": "find_tree", "description": "walk", "how": "rl", "why": "explore"},
                            {"name": "chop", "description": "collect wood", "how": "code", "why": "fixed"}]},
    "fast": {"macros": [{"name": "chop", "description": "face tree", "code": "def chop(api):\n  yield 5"}],
             "reward_code": "return inv['wood']", "observation": ["inventory", "semantic"], "horizon": 500},
    "critic": {"target": "fast", "problems": ["macro never ends"], "suggestions": ["return after 10 steps"]},
    "planner": {"subtasks": [{"name": "wood", "description": "collect wood", "reuse_skill": "collect_wood"},
                             {"name": "table", "description": "place table", "reuse_skill": ""}]},
}
TYPES = {"slow": Decomposition, "fast": FastReply, "critic": Feedback, "planner": Plan}


@pytest.mark.parametrize("role", prompts.ROLES)
def test_replies_parse_and_round_trip(role: str) -> None:
    reply = parse_reply(role, EXAMPLES[role])
    assert isinstance(reply, TYPES[role])
    assert reply.to_dict() == EXAMPLES[role]


@pytest.mark.parametrize(("role", "mutate", "message"), [
    ("slow", lambda d: d["subactions"][0].update(how="maybe"), "'maybe' is not one of"),
    ("slow", lambda d: d["subactions"][1].update(name="find_tree"), "appears twice"),
    ("fast", lambda d: d.update(horizon=0), "less than the minimum"),
    ("fast", lambda d: d["macros"][0].update(name="Bad Name"), "does not match"),
    ("critic", lambda d: d.pop("target"), "'target' is a required property"),
    ("planner", lambda d: d.update(subtasks=[]), "should be non-empty"),
])
def test_invalid_replies_are_refused(role: str, mutate, message: str) -> None:
    data = json.loads(json.dumps(EXAMPLES[role]))
    mutate(data)
    with pytest.raises(ReplyValidationError, match=message):
        parse_reply(role, data)
