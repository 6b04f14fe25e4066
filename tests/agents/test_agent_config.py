"""AgentConfig refuses bad knobs; the schemas' Crafter enums match crafter's own data."""

from __future__ import annotations

import pytest
from crafter import constants

from rlgpt import prompts
from rlgpt.config import AgentConfig, ConfigError


@pytest.mark.parametrize(("knobs", "message"), [
    ({"samples": 0}, "samples must be >= 1"),
    ({"repair_retries": -1}, "repair_retries must be >= 0"),
    ({"probe_repair_retries": -1}, "probe_repair_retries must be >= 0"),
    ({"probe_seeds": ()}, "at least one seed"),
    ({"probe_max_steps": 0}, "probe_max_steps must be >= 1"),
    ({"temperature": -0.1}, "temperature must be >= 0"),
])
def test_bad_knobs_are_refused(knobs: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        AgentConfig(**knobs)


def test_schema_enums_follow_crafter_data() -> None:
    goal = prompts.load_schema("decomposition")["properties"]["subactions"]["items"]["properties"]["goal"]
    assert goal["enum"] == ["", *constants.achievements, *constants.items]
    name = prompts.load_schema("plan")["properties"]["subtasks"]["items"]["properties"]["name"]
    assert name["enum"] == list(constants.achievements)
