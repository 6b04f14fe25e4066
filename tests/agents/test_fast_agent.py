"""The fast agent against the real embedded 0.5B model: code blocks, compile-and-repair, sampling, probes,
the reward's compile/dry-run/repair loop and the small setup schema."""

from __future__ import annotations

import dataclasses
import json

import pytest
from agent_helpers import Recording, record_reply
from crafter_helpers import chop_source, fenced

from rlgpt.agents.fast import MACRO_REPAIR_HINT, FastAgent, probe_steps
from rlgpt.agents.replies import Decomposition, FastReply, FastSetup, SubAction
from rlgpt.config import AgentConfig
from rlgpt.llm.client import LLMClient
from rlgpt.macro.compiler import MacroSource, compile_macro
from rlgpt.macro.reward import compile_reward

CHOP = SubAction("chop_tree", "walk to the nearest visible tree, face it and collect one wood", "code",
                 "wood", "a fixed recipe")
# The model's own candidates only: the trusted fallback macro has its own test below.
CONFIG = AgentConfig(samples=2, repair_retries=1, probe_repair_retries=0, code_max_tokens=256,
                     json_max_tokens=96, probe_seeds=(0, 1), probe_max_steps=32, reward_dry_run_steps=10,
                     goal_fallback=False)


@pytest.mark.slow
def test_samples_distinct_candidates_compiles_probes_and_keeps_the_best(client: LLMClient,
                                                                        recording: Recording) -> None:
    phases: list[str] = []
    agent = FastAgent(client, CONFIG, on_phase=phases.append)
    choice = agent.write_macro("collect_wood", CHOP)
    # Two samples; one that repeats an earlier reply word for word is counted, not tried again.
    assert choice.search.sampled == 2 and choice.search.tried + choice.search.repeats == 2
    assert [c.index for c in choice.candidates] == list(range(choice.search.tried))
    # Candidate i was sampled at temperature > 0 with its own seed, so both are real model calls.
    first_calls = [r for r in recording.requests if len(r[0]) == 2]
    assert [r[2].seed for r in first_calls] == [0, 1] and all(r[2].temperature > 0 for r in first_calls)
    assert all(r[1] is None for r in recording.requests)  # code is never asked for inside JSON
    for cand in choice.candidates:
        assert 1 <= len(cand.code.attempts) <= 2
        last = cand.code.attempts[-1]
        if cand.code.code is not None:
            assert not last.diagnostics and cand.probe is not None and len(cand.probe.calls) == 2
            compile_macro(MacroSource(CHOP.name, cand.code.code))
        else:
            assert last.diagnostics and cand.probe is None
        for earlier in cand.code.attempts[:-1]:
            assert earlier.diagnostics  # only rejected code is repaired
    compiled = [c for c in choice.candidates if c.probe is not None]
    assert phases == ["probe", "fast"] * len(compiled)  # the progress line shows each probe as a phase
    if compiled:
        assert choice.best is not None and choice.best.probe is not None
        assert choice.best.probe.score() == max(c.probe.score() for c in compiled)  # type: ignore[union-attr]
        assert choice.source is not None and choice.source.name == CHOP.name
    else:
        assert choice.best is None and choice.source is None
    json.dumps(choice.to_dict())


@pytest.mark.slow
def test_compile_errors_go_back_to_the_model_with_their_diagnostics(client: LLMClient,
                                                                    recording: Recording) -> None:
    # Without the trusted goal macro, which would reach the goal and make the repair needless.
    # No repair round either: this is about the compile repair of one candidate.
    agent = FastAgent(client, AgentConfig(samples=1, repair_retries=1, probe_repair_retries=0,
                                          code_max_tokens=256, probe_seeds=(0,), probe_max_steps=16,
                                          goal_fallback=False))
    messages = agent.macro_messages("collect_wood", CHOP)
    # A reply the model wrote in the measurements; recorded because sampling cannot be steered to it.
    bad = ("```python\nimport random\ndef chop_tree(game):\n    for _ in range(10):\n"
           "        yield random.choice(game.actions)\n```")
    record_reply(client, messages, bad, agent._sampling(0))
    choice = agent.write_macro("collect_wood", CHOP)
    attempts = choice.candidates[0].code.attempts
    assert attempts[0].reply == bad and {d.kind for d in attempts[0].diagnostics} >= {"forbidden_node"}
    # The repair request is a real model call that carries the model's reply and the compiler's words.
    assert len(recording.requests) == 1 and len(attempts) == 2
    repair = recording.requests[0][0]
    assert repair[-2] == {"role": "assistant", "content": bad}
    assert "imports are not allowed" in repair[-1]["content"] and "line 1" in repair[-1]["content"]
    assert MACRO_REPAIR_HINT in repair[-1]["content"]
    assert choice.candidates[0].code.first_try is False


@pytest.mark.slow
def test_a_macro_that_misses_its_goal_goes_back_with_what_its_probes_saw(client: LLMClient,
                                                                        recording: Recording) -> None:
    agent = FastAgent(client, dataclasses.replace(CONFIG, samples=1, probe_repair_retries=1))
    messages = agent.macro_messages("collect_wood", CHOP)
    # Compiles and returns, but hits whatever it faces instead of walking to a tree: no wood, ever.
    idle = '```python\ndef chop_tree(game):\n    for i in range(3):\n        yield "do"\n```'
    record_reply(client, messages, idle, agent._sampling(0))
    choice = agent.write_macro("collect_wood", CHOP)
    first, *revised = choice.candidates
    assert first.probe is not None and first.probe.goal_rate == 0.0 and first.revises is None
    # The revision request is a real model call that carries the probes (with the last actions and what
    # they faced) and the failing code; it is sampled with its own seed.
    asked, _, sampling = recording.requests[0]
    text = asked[-1]["content"]
    assert "reached its goal in 0 of 2 probe calls" in text and "last actions: do@" in text
    assert 'for i in range(3):\n        yield "do"' in text and sampling.seed == CONFIG.seed + 1
    # The model's revision is a new candidate revising the first, or the same program again: a repeat,
    # not probed again (it would replay the same worlds), and then one round samples the first prompt
    # afresh (a new candidate revising nothing, or a repeat again).
    repairs = [c for c in revised if c.revises == 0]
    fresh = [c for c in revised if c.revises is None]
    assert len(repairs) + len(fresh) == len(revised) and len(repairs) <= 1
    assert (choice.search.fresh, len(fresh) + choice.search.repeats) == ((0, 0) if repairs else (1, 2))
    for revision in repairs:
        assert revision.index == 1 and revision.revises == 0
        # The revision is kept only if it probes better.
        better = revision.probe is not None and revision.probe.score() > first.probe.score()
        assert choice.best is (revision if better else first)
        assert json.loads(json.dumps(choice.to_dict()))["candidates"][1]["revises"] == 0


@pytest.mark.slow
def test_a_macro_that_reaches_its_goal_on_every_probe_is_not_revised(client: LLMClient,
                                                                     recording: Recording) -> None:
    agent = FastAgent(client, dataclasses.replace(CONFIG, samples=1, probe_repair_retries=2,
                                                  probe_max_steps=64))
    messages = agent.macro_messages("collect_wood", CHOP)
    good = fenced(chop_source("chop_tree"))
    record_reply(client, messages, good, agent._sampling(0))
    choice = agent.write_macro("collect_wood", CHOP)
    assert len(choice.candidates) == 1 and choice.best is choice.candidates[0]
    assert choice.best.probe is not None and choice.best.probe.goal_rate == 1.0
    assert recording.requests == []  # the model was not asked again


@pytest.mark.slow
def test_reward_is_compiled_dry_run_and_runtime_failures_are_repaired(client: LLMClient,
                                                                      recording: Recording) -> None:
    agent = FastAgent(client, CONFIG)
    decomposition = Decomposition((CHOP,))
    messages = agent.reward_prompt("collect_wood", decomposition).render()
    bad = ("```python\ndef reward(game, prev):\n"
           "    return 1 / (game.inventory['wood'] - prev.inventory['wood'])\n```")
    record_reply(client, messages, bad, agent._sampling(0))
    result = agent.write_reward("collect_wood", decomposition)
    first = result.attempts[0]
    assert first.diagnostics[0].kind == "exception" and "ZeroDivisionError" in first.diagnostics[0].message
    assert "ZeroDivisionError" in recording.requests[0][0][-1]["content"]
    if result.code is not None:
        compile_reward(result.code)
    else:
        assert result.attempts[-1].diagnostics


@pytest.mark.slow
def test_setup_schema_runs_on_the_real_model_and_limits_macro_names(client: LLMClient,
                                                                   recording: Recording) -> None:
    setup = FastAgent(client, CONFIG).write_setup("collect_wood", Decomposition((CHOP,)), ["chop_tree"])
    assert isinstance(setup, FastSetup)
    assert 16 <= setup.horizon <= 10000 and set(setup.observation) <= {"view", "vector"}
    assert set(setup.macros) <= {"chop_tree"}
    schema = recording.requests[0][1]
    assert schema is not None and schema["properties"]["macros"]["items"]["enum"] == ["chop_tree"]


@pytest.mark.slow
def test_run_assembles_a_trainable_reply(client: LLMClient) -> None:
    config = AgentConfig(samples=1, repair_retries=1, code_max_tokens=256, json_max_tokens=96,
                         probe_seeds=(0,), probe_max_steps=32, reward_dry_run_steps=10)
    decomposition = Decomposition((CHOP, SubAction("explore", "find trees", "rl", "", "needs search")))
    result = FastAgent(client, config).run("collect_wood", decomposition)
    assert len(result.macros) == 1 and result.macros[0].subaction == CHOP
    for macro in result.reply.macros:
        compile_macro(macro)
    if result.reply.reward_code:
        compile_reward(result.reply.reward_code)
    assert FastReply.from_dict(json.loads(json.dumps(result.reply.to_dict()))) == result.reply
    json.dumps(result.to_dict())


STONE = SubAction("get_stone", "mine one stone", "code", "stone", "a walking loop")
IDLE = "```python\ndef get_stone(game):\n    for i in range(3):\n        yield \"noop\"\n```"


@pytest.mark.parametrize("knobs, offered", [
    ({}, False),  # the default: no expert code
    ({"goal_fallback": True, "api": "expert"}, True),
    ({"goal_fallback": True, "api": "basic"}, False),
    ({"goal_fallback": True, "api": "primitives"}, True)])
def test_a_sub_action_no_sample_reaches_gets_the_trusted_goal_macro_when_it_probes_better(
        client: LLMClient, recording: Recording, knobs: dict, offered: bool) -> None:
    config = AgentConfig(samples=1, repair_retries=0, probe_repair_retries=0, code_max_tokens=256,
                         probe_seeds=(0, 1), probe_max_steps=200, **knobs)
    agent = FastAgent(client, config)
    record_reply(client, agent.macro_messages("collect_stone", STONE), IDLE, agent._sampling(0))
    choice = agent.write_macro("collect_stone", STONE)
    assert len(recording.requests) == 0  # the recorded idle reply; the fallback asks the model nothing
    assert choice.candidates[0].probe is not None and choice.candidates[0].probe.goal_rate == 0.0
    if not offered:
        assert len(choice.candidates) == 1 and choice.best is choice.candidates[0]
        return
    fallback = choice.candidates[-1]
    assert len(choice.candidates) == 2 and fallback.fallback and not choice.candidates[0].fallback
    # From a fresh world the goal macro gets a pickaxe (wood, table) before it mines: it reaches the goal.
    assert fallback.probe is not None and fallback.probe.goal_rate == 1.0
    assert choice.best is fallback and choice.source is not None
    assert 'yield from game.collect("stone"' in choice.source.code
    assert choice.to_dict()["candidates"][1]["fallback"] is True
    # Expert code at any level, and labelled so; the model's candidate is the model's.
    assert fallback.written_by == "expert" and choice.candidates[0].written_by == "model"
    assert choice.written_by == "expert" and choice.to_dict()["written_by"] == "expert"


def test_at_the_primitives_level_an_expert_call_does_not_compile_and_the_model_is_told_why(
        client: LLMClient, recording: Recording) -> None:
    config = AgentConfig(samples=1, repair_retries=0, probe_repair_retries=0, code_max_tokens=256,
                         probe_seeds=(0,), probe_max_steps=50, api="primitives", goal_fallback=False)
    agent = FastAgent(client, config)
    expert = "```python\ndef get_stone(game):\n    ok = yield from game.collect(\"stone\")\n```"
    record_reply(client, agent.macro_messages("collect_stone", STONE), expert, agent._sampling(0))
    choice = agent.write_macro("collect_stone", STONE)
    attempt = choice.candidates[0].code.attempts[0]
    assert choice.best is None and [d.kind for d in attempt.diagnostics] == ["api_level"]
    assert "game.gather" in attempt.diagnostics[0].message
    assert "game.collect(" not in agent.macro_messages("collect_stone", STONE)[0]["content"]


def test_the_horizon_floor_fits_the_chosen_macros_chain_twice() -> None:
    from rlgpt.agents.code import CodeAttempt, CodeResult
    from rlgpt.agents.fast import HORIZON_SLACK, MacroCandidate, MacroChoice, chain_horizon
    from rlgpt.macro.probe import probe_macro

    def choice(steps: int) -> MacroChoice:
        code = f"def wait(game):\n    for i in range({steps}):\n        yield 'noop'\n"
        compiled = compile_macro(MacroSource("wait", code))
        probe = probe_macro(compiled, seeds=(0, 1), max_steps=64)
        made = MacroChoice(SubAction("wait", "wait", "code", "", ""))
        made.best = MacroCandidate(0, CodeResult(code, compiled, [CodeAttempt("", code, ())]), probe)
        return made

    assert chain_horizon([]) == 0
    assert chain_horizon([choice(10), choice(30)]) == int(HORIZON_SLACK * 40)
    unprobed = MacroChoice(SubAction("x", "x", "code", "", ""))
    assert chain_horizon([choice(10), unprobed]) == int(HORIZON_SLACK * 10)
    # A link probed after the ones before it: its probe episodes played the chain (a one-wood call twice for
    # a two-wood table, then the table's one step), longer than one call of each.
    chop = compile_macro(MacroSource("chop", chop_source("chop", steps=300), goal="wood"))
    place = 'def place(game):\n    yield "place_table"\n'
    table = MacroChoice(SubAction("place", "place a table", "code", "place_table", ""))
    table.best = MacroCandidate(0, CodeResult(place, None, []), probe_macro(
        place, seeds=(0, 1), goal="place_table", setup=(chop,), max_steps=300))
    wood = MacroChoice(SubAction("chop", "chop", "code", "wood", ""))
    wood.best = MacroCandidate(0, CodeResult("", chop, []), probe_macro(chop, seeds=(0, 1), goal="wood",
                                                                          max_steps=300))
    chain = table.best.probe.episode_steps
    assert chain > wood.best.probe.mean_steps + table.best.probe.mean_steps
    assert chain_horizon([wood, table]) == int(HORIZON_SLACK * chain + 0.5)


def test_stored_skills_are_listed_in_the_prompt_and_linked_into_the_kept_macro(
        client: LLMClient, recording: Recording) -> None:
    from rlgpt.macro.code_skills import CodeSkill

    agent = FastAgent(client, AgentConfig(samples=1, repair_retries=0, probe_repair_retries=0,
                                          probe_seeds=(0,), probe_max_steps=200, goal_fallback=False))
    plain = agent.macro_messages("place_table", CHOP)[1]["content"]
    wood = 'def get_wood(game):\n    ok = yield from game.gather("wood", 2)\n'
    agent = FastAgent(client, agent.config,
                      code_skills={"get_wood": CodeSkill("get_wood", "collect two wood", "wood", wood, 1.0)})
    messages = agent.macro_messages("place_table", CHOP)
    assert "skills" not in plain and "skills.get_wood(game): collect two wood" in messages[1]["content"]
    reply = "```python\ndef chop_tree(game):\n    ok = yield from skills.get_wood(game)\n```"
    record_reply(client, messages, reply, agent._sampling(0))
    choice = agent.write_macro("place_table", CHOP)
    assert not recording.requests and choice.source is not None
    assert "def skill_get_wood(game)" in choice.source.code  # what trains is the linked module
    assert choice.best is not None and choice.best.probe is not None and choice.best.probe.goal_rate == 1.0


def test_the_trusted_goal_macro_is_probed_before_a_revision_is_asked_for(client: LLMClient,
                                                                         recording: Recording) -> None:
    config = AgentConfig(samples=1, repair_retries=0, probe_repair_retries=1, code_max_tokens=256,
                         probe_seeds=(0, 1), probe_max_steps=200, goal_fallback=True)
    agent = FastAgent(client, config)
    record_reply(client, agent.macro_messages("collect_stone", STONE), IDLE, agent._sampling(0))
    choice = agent.write_macro("collect_stone", STONE)
    # The goal macro reached the goal on every probe: no revision of the idle candidate is asked for.
    assert not recording.requests
    assert [c.fallback for c in choice.candidates] == [False, True] and choice.best is choice.candidates[1]


def test_a_compile_error_is_not_repaired_once_the_trusted_goal_macro_reaches_the_goal(
        client: LLMClient, recording: Recording) -> None:
    config = AgentConfig(samples=2, repair_retries=2, probe_repair_retries=1, code_max_tokens=256,
                         probe_seeds=(0, 1), probe_max_steps=200, goal_fallback=True)
    agent = FastAgent(client, config)
    broken = "```python\ndef get_stone(game):\n    import os\n    yield \"noop\"\n```"
    record_reply(client, agent.macro_messages("collect_stone", STONE), broken, agent._sampling(0))
    choice = agent.write_macro("collect_stone", STONE)
    # The round's second sample was decoded with the first; no repair and no revision was asked for, and
    # the second sample was never compiled or probed: the goal macro was probed first and reached the goal.
    assert [r[2].seed for r in recording.requests] == [1]
    assert choice.search.sampled == 2 and choice.search.tried == 1 and choice.search.stopped == "fallback"
    first, fallback = choice.candidates
    assert first.code.code is None and len(first.code.attempts) == 1 and first.probe is None
    assert fallback.fallback and fallback.index == 1 and choice.best is fallback
    assert probe_steps([choice]) == fallback.probe.env_steps  # its probes are counted


@pytest.mark.slow
def test_a_revision_revises_the_models_own_candidate_when_the_goal_macro_fails_too(
        client: LLMClient, recording: Recording) -> None:
    # 8 steps are too few for the goal macro to get a pickaxe and mine from a fresh world.
    config = AgentConfig(samples=1, repair_retries=0, probe_repair_retries=1, code_max_tokens=256,
                         probe_seeds=(0,), probe_max_steps=8, goal_fallback=True)
    agent = FastAgent(client, config)
    record_reply(client, agent.macro_messages("collect_stone", STONE), IDLE, agent._sampling(0))
    choice = agent.write_macro("collect_stone", STONE)
    fallback = choice.candidates[1]
    assert fallback.fallback and fallback.probe is not None and fallback.probe.goal_rate == 0.0
    # One model call: the revision, which shows the model its own idle code, not the trusted macro.
    assert len(recording.requests) == 1
    request = recording.requests[0][0][1]["content"]
    assert 'yield "noop"' in request and "game.collect(" not in request
    # A new candidate revising the model's own, or its program again (a repeat, not probed again).
    assert (len(choice.candidates), choice.search.repeats) in ((3, 0), (2, 1))
    assert all(c.revises == 0 for c in choice.candidates[2:])


def test_a_macro_that_never_reached_its_goal_is_not_trained_with_whatever_the_setup_lists(
        client: LLMClient) -> None:
    """Calling a macro that never reached its goal costs the policy its steps for nothing: the training
    gets the macros that reached their goal in a probe call, and goal-less ones only where the setup
    lists them."""
    from rlgpt.agents.code import CodeAttempt, CodeResult
    from rlgpt.agents.fast import MacroCandidate, MacroChoice, trained_macros

    agent = FastAgent(client, dataclasses.replace(CONFIG, probe_max_steps=100))
    wander = SubAction("wander", "walk around", "code", "", "no goal")

    def choice(sub: SubAction, code: str) -> MacroChoice:
        compiled = agent.compile_macro_code(sub.name, code)
        candidate = MacroCandidate(0, CodeResult(code, compiled, [CodeAttempt("", code, ())]),
                                   agent.probe(compiled, sub.goal))
        made = MacroChoice(sub)
        made.candidates.append(candidate)
        made.best = candidate
        return made

    idle = IDLE.split("\n", 1)[1].rsplit("```", 1)[0]
    kept = {"chop_tree": choice(CHOP, chop_source("chop_tree")), "get_stone": choice(STONE, idle),
            "wander": choice(wander, idle.replace("get_stone", "wander"))}
    assert kept["chop_tree"].best.probe.goal_rate > 0 and kept["get_stone"].best.probe.goal_rate == 0
    everything = ["chop_tree", "get_stone", "wander"]
    assert trained_macros(kept, everything) == ["chop_tree", "wander"]
    assert trained_macros(kept, []) == ["chop_tree"]
