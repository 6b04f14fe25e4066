"""Every task kind survives every LLM fault (issue 27).

The LLM is replaced at the client's seam (`rlgpt.llm.types.Backend`, what the embedded model and the HTTP
server implement): `ScriptedBackend` answers every role validly except one, whose requests get a fault.
Everything behind the seam is real: `LLMClient` (schema checks, re-asks, the response cache), the agents
and their fallbacks, the loop, Crafter, the probes in contained children and Sample Factory training.

- `test_never_valid_roles_fall_back_in_a_real_run`: for each task kind the CLI accepts (one achievement,
  ``a+b``, the Crafter benchmark, a planner chain's links), a real run (real Crafter, a tiny real
  training per loop) whose every role (planner, slow, fast macro, fast reward, fast setup, critic) never
  answers validly finishes, and its summary names each role's fallback. Every role fails in the same run:
  a training costs about a minute on the shared 2-core box, one run per (kind, role) would cost 20.
- `test_every_fault_falls_back_at_the_client_seam`: every fault (never schema-valid, cut off at
  ``max_tokens``, a server error, a timeout, an empty reply) x every role x each task kind, one role faulty
  and the others answering validly, through each role's own entry point: it falls back, and to what.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from loop_helpers import smoke_config

from rlgpt import layout
from rlgpt.agents.critic import Critic
from rlgpt.agents.fast import FastAgent
from rlgpt.agents.planner import Planner
from rlgpt.agents.replies import Decomposition, FastSetup, SubAction
from rlgpt.agents.slow import RECIPE_GRAPH, SlowAgent, recipe_decomposition
from rlgpt.config import AgentConfig
from rlgpt.llm.client import LLMClient
from rlgpt.llm.errors import HTTPStatusError, ServerUnavailableError
from rlgpt.llm.types import Completion, Message, SamplingParams
from rlgpt.run.runner import run

ROLES = ("planner", "slow", "fast_macro", "fast_reward", "fast_setup", "critic")
"""Every kind of LLM request a run makes (the fast agent's three at the client are one role, ``fast``)."""

FALLBACK = {"planner": "recipe_graph", "slow": RECIPE_GRAPH, "fast_macro": "no_macro",
            "fast_reward": "task_reward", "fast_setup": "setup_defaults", "critic": "fast"}
"""What a run's summary names when a role never answered validly (agents.goal_fallback off: a sub-action
whose macro never compiled keeps none)."""

KINDS = {"single": "collect_wood", "a+b": "collect_wood+collect_sapling", "benchmark": "crafter",
         "chain": "place_table"}
"""A task of each kind ``rlgpt run --task`` accepts; ``chain`` is planned (two links: wood, then table)."""

FAULTS = ("invalid", "cut", "server_error", "timeout", "empty")

SCHEMA_ROLE = {"Decomposition": "slow", "Feedback": "critic", "Plan": "planner", "FastSetup": "fast_setup"}


def request_role(messages: list[Message], schema: dict[str, Any] | None) -> str:
    """Which role asked: structured requests by their schema, code requests by their system prompt."""
    if schema is not None:
        return SCHEMA_ROLE[schema["title"]]
    return "fast_reward" if "def reward(game, prev)" in messages[0]["content"] else "fast_macro"


VALID: dict[str, str] = {
    "slow": json.dumps({"subactions": [{"name": "gather", "description": "walk to a tree and collect wood",
                                        "how": "code", "goal": "collect_wood", "why": "a fixed recipe"}]}),
    "fast_macro": "```python\ndef gather(game):\n    yield 'noop'\n```",
    "fast_reward": "```python\ndef reward(game, prev):\n"
                   "    return 0.1 * (game.inventory['wood'] - prev.inventory['wood'])\n```",
    "fast_setup": json.dumps({"horizon": 64, "observation": ["view", "vector"], "macros": []}),
    "critic": json.dumps({"target": "fast", "problems": ["slow progress"], "suggestions": ["keep going"]}),
    "planner": json.dumps({"subtasks": [
        {"name": "collect_wood", "description": "collect wood", "reuse_skill": ""},
        {"name": "place_table", "description": "place a table", "reuse_skill": ""}]}),
}
"""A schema-valid (and compiling) reply per role."""

BAD = {"invalid": ("Sure! First I would chop some trees, then craft a table.", "stop"),
       "empty": ("", "stop")}
CUT = {"json": '{"subactions": [{"name": "gather", "description": "walk to', "code": (
    "```python\ndef gather(game):\n    while game.inventory['wood'] < 3:\n        if game.")}


class ScriptedBackend:
    """A `Backend` that answers every role with `VALID` except the faulty one (`faulty(role, messages)` says
    which, at the time of the request), whose requests get `fault`: ``invalid`` (prose, never schema-valid),
    ``cut`` (stopped at ``max_tokens`` mid-reply), ``server_error`` (HTTP 500), ``timeout`` (what the HTTP
    backend raises after its retries time out) or ``empty``."""

    model_id = "scripted-faults"

    def __init__(self, faulty: Any, fault: str = "invalid") -> None:
        self.faulty = faulty if callable(faulty) else (lambda role, messages: role == faulty)
        self.fault = fault
        self.asked: Counter[str] = Counter()
        self.faulted: Counter[str] = Counter()

    def complete(self, messages: list[Message], schema: dict[str, Any] | None,
                 sampling: SamplingParams) -> Completion:
        role = request_role(messages, schema)
        self.asked[role] += 1
        if not self.faulty(role, messages):
            return Completion(VALID[role], 10, 10, "stop", self.model_id)
        self.faulted[role] += 1
        if self.fault == "server_error":
            raise HTTPStatusError("POST http://127.0.0.1:1/v1/chat/completions -> HTTP 500: internal error",
                                  500, "internal error")
        if self.fault == "timeout":
            raise ServerUnavailableError("POST http://127.0.0.1:1/v1/chat/completions failed after 3 "
                                         "attempts: timed out")
        if self.fault == "cut":
            text = CUT["code" if schema is None else "json"]
            return Completion(text, 10, sampling.max_tokens, "length", self.model_id)
        text, finish = BAD[self.fault]
        return Completion(text, 10, 10, finish, self.model_id)


# -- one real run per task kind, every role faulty ------------------------------------------------------


def kind_config(run_dir: Path, kind: str) -> Any:
    chain = kind == "chain"
    return smoke_config(
        run_dir, f"task={KINDS[kind]}", "llm.replay_only=false", "max_outer=1", "max_inner=1",
        # One tiny training per loop: a batch of 64 steps, a 1-episode validation of 16 steps.
        f"steps={128 * (2 if chain else 1)}", "train.ppo.batch_size=64", "train.ppo.rollout=16",
        "eval_episodes=1", "train.env.episode_length=16",
        "success_threshold=2", "agents.goal_fallback=false", "agents.probe_repair_retries=0",
        "agents.probe_max_steps=8", "agents.reward_dry_run_steps=4",
        f"planner_min_chain={2 if chain else 99}", "chain_starts=0", f"skills_dir={run_dir / 'skills'}")


@pytest.mark.slow
@pytest.mark.parametrize("kind", list(KINDS))
def test_never_valid_roles_fall_back_in_a_real_run(kind: str, tmp_path: Path) -> None:
    """Every role's replies are never schema-valid (prose): the run plans (a chain), decomposes, writes
    code and setup, trains, evaluates and reviews on every role's fallback, and its summary names each.
    One training per loop (a chain: one per link) is what a cell costs on a 2-core box; which role falls
    back to what in isolation, with the others valid, is `test_every_fault_falls_back_at_the_client_seam`."""
    backend = ScriptedBackend(lambda role, messages: True, "invalid")
    summary = run(kind_config(tmp_path / "run", kind), backend=backend)
    written = json.loads((tmp_path / "run" / layout.SUMMARY_JSON).read_text())
    assert written["fallbacks"] == summary["fallbacks"]
    roles = set(ROLES) if kind == "chain" else set(ROLES) - {"planner"}
    assert set(backend.faulted) == roles
    assert summary["fallbacks"] == {role: [FALLBACK[role]] for role in roles}
    if kind == "chain":
        assert summary["plan"] == ["collect_wood", "place_table"]
        links = [json.loads((tmp_path / "run" / part["dir"] / layout.SUMMARY_JSON).read_text())
                 for part in summary["iterations"]]
        iterations = [it for link in links for it in link["iterations"]]
        assert [link["task"] for link in links] == summary["plan"]
    else:
        iterations = summary["iterations"]
    for it in iterations:  # each loop's iteration trained on the fallbacks and names them
        assert it["ok"] and it["steps"] > 0, it
        assert it["fallbacks"] == {role: FALLBACK[role] for role in roles - {"planner"}}, it
    if kind == "benchmark":  # the benchmark's plan over the achievement graph, not an achievement's chain
        slow = json.loads((tmp_path / "run" / "iter_000" / layout.SLOW_JSON).read_text())
        assert slow["decomposition"] == recipe_decomposition("crafter").to_dict()
    metrics = summary["llm"]
    assert {role: metrics[f"llm/{role}/fallbacks"] for role in ("slow", "critic", "fast")} == \
        {"slow": len(iterations), "critic": len(iterations), "fast": len(iterations)}  # fast: the setup


# -- every other fault, once per role, at the client seam ----------------------------------------------


GATHER = SubAction("gather", "walk to a tree and collect wood", "code", "collect_wood", "a fixed recipe")
SEAM_CONFIG = AgentConfig(samples=1, repair_retries=1, probe_repair_retries=0, goal_fallback=False,
                          probe_seeds=(0,), probe_max_steps=8, reward_dry_run_steps=4)


def fall_back(role: str, client: LLMClient, task: str) -> str:
    """Ask `role` through its agent's own entry point and return the fallback it took ("" = none)."""
    decomposition = Decomposition((GATHER,))
    if role == "planner":
        return Planner(client, SEAM_CONFIG).plan(task).fallback or ""
    if role == "slow":
        result = SlowAgent(client, SEAM_CONFIG).decompose_or_fallback(task)
        assert result.fallback != RECIPE_GRAPH or result.decomposition == recipe_decomposition(task)
        return result.fallback or ""
    if role == "critic":
        return "fast" if Critic(client, SEAM_CONFIG).review_or_fallback(task, 1, decomposition)[1] else ""
    fast = FastAgent(client, SEAM_CONFIG)
    if role == "fast_setup":
        setup, error = fast.setup_or_fallback(task, decomposition, ["gather"])
        return "setup_defaults" if error and setup == FastSetup.default(["gather"]) else ""
    if role == "fast_reward":
        return "task_reward" if fast.write_reward(task, decomposition).code is None else ""
    choice = fast.write_macro(task, GATHER)
    return "no_macro" if choice.best is None else ""


@pytest.mark.parametrize("kind", ["single", "a+b", "benchmark"])
@pytest.mark.parametrize("fault", FAULTS)
@pytest.mark.parametrize("role", ROLES)
def test_every_fault_falls_back_at_the_client_seam(role: str, fault: str, kind: str) -> None:
    backend = ScriptedBackend(role, fault)
    client = LLMClient(backend, schema_retries=1)
    assert fall_back(role, client, KINDS[kind]) == FALLBACK[role]
    assert backend.faulted[role] >= 1
