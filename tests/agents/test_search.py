"""The fast agent's test-time search and the critic's note, with a scripted model at the LLM boundary (the
replies a test needs, in order, through the real client, compiler, sandbox and Crafter probes)."""

from __future__ import annotations

import dataclasses
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from crafter_helpers import chop_source, fenced

from rlgpt.agents.critic import Critic, critic_notes
from rlgpt.agents.fast import CarriedMacro, FastAgent
from rlgpt.agents.replies import Decomposition, SubAction
from rlgpt.config import AgentConfig
from rlgpt.llm.client import LLMClient
from rlgpt.llm.types import Completion, Message, SamplingParams
from rlgpt.macro.diagnostics import MacroCompileError
from rlgpt.run.loop import carry, verified_macros

CHOP = SubAction("chop_tree", "walk to the nearest visible tree, face it and collect one wood", "code",
                 "wood", "a fixed recipe")
CRAFT = SubAction("craft", "craft a wood pickaxe", "code", "make_wood_pickaxe", "")
IDLE_CODE = 'def chop_tree(game):\n    for i in range(3):\n        yield "noop"\n'
IDLE = fenced(IDLE_CODE)
GOOD = fenced(chop_source("chop_tree"))
SEARCH = AgentConfig(samples=4, repair_retries=0, probe_repair_retries=2, probe_seeds=(0, 1),
                     probe_max_steps=64, goal_fallback=False, reward_dry_run_steps=5)

Reply = Callable[[list[Message], dict[str, Any] | None, SamplingParams], str]


@dataclass
class Scripted:
    """A backend answering with `reply(messages, schema, sampling)`; it records every request and every
    batch of samples asked for together."""

    reply: Reply
    delay_s: float = 0.0
    requests: list[tuple[list[Message], dict[str, Any] | None, SamplingParams]] = field(default_factory=list)
    batches: list[list[int]] = field(default_factory=list)

    model_id = "scripted"

    def complete(self, messages: list[Message], schema: dict[str, Any] | None,
                 sampling: SamplingParams) -> Completion:
        self.requests.append((messages, schema, sampling))
        time.sleep(self.delay_s)
        return Completion(self.reply(messages, schema, sampling), 10, 10, "stop", self.model_id)

    def complete_many(self, messages: list[Message], samplings: list[SamplingParams]) -> list[Completion]:
        self.batches.append([s.seed for s in samplings])
        return [self.complete(messages, None, s) for s in samplings]


def chain_reply(chop: str) -> Reply:
    """The fast agent's replies for the chain (CHOP, place_it): `chop` for chop_tree, an idle place_it, a
    zero reward and a minimal setup."""
    def reply(messages: list[Message], schema: dict[str, Any] | None, s: SamplingParams) -> str:
        asked = messages[-1]["content"]
        if schema is not None:
            return json.dumps({"horizon": 100, "observation": ["view"], "macros": []})
        if "Write the macro `chop_tree(game)`" in asked:
            return chop
        if "Write the macro `place_it(game)`" in asked:
            return IDLE.replace("chop_tree", "place_it")
        return "```python\ndef reward(game, prev):\n    return 0.0\n```"

    return reply


def test_the_search_stops_at_the_first_candidate_that_reaches_the_goal_in_every_probe_call() -> None:
    backend = Scripted(lambda messages, schema, s: {1: GOOD}.get(s.seed, IDLE))
    phases: list[str] = []
    agent = FastAgent(LLMClient(backend), SEARCH, on_phase=phases.append)
    choice = agent.write_macro("collect_wood", CHOP)
    # The four samples were decoded together, once; candidate 2 (seed 1) reached the goal in every probe
    # call, so candidates 3 and 4 were never compiled or probed and no repair round was asked for.
    assert backend.batches == [[0, 1, 2, 3]] and len(backend.requests) == 4
    assert [c.seed for c in choice.candidates] == [0, 1] and phases == ["probe", "fast"] * 2
    assert choice.candidates[0].probe is not None and choice.candidates[0].probe.goal_rate == 0.0
    assert choice.best is choice.candidates[1] and choice.candidates[1].reached
    stats = choice.search
    assert (stats.rounds, stats.sampled, stats.tried, stats.won, stats.stopped) == (1, 4, 2, 1, "goal")
    assert json.loads(json.dumps(choice.to_dict()))["search"]["won"] == 1


def test_a_repair_round_carries_the_failing_line_the_last_actions_and_the_inventory_change() -> None:
    # Collects a wood, then fails on its last line; the sub-action's goal is stone, so every call fails.
    crash = chop_source("chop_tree") + "    return start // 0\n"
    stone = SubAction("chop_tree", "mine a stone", "code", "stone", "")
    backend = Scripted(lambda messages, schema, s: fenced(crash) if s.seed == 0 else IDLE)
    agent = FastAgent(LLMClient(backend), AgentConfig(
        samples=1, repair_retries=0, probe_repair_retries=1, probe_seeds=(0,), probe_max_steps=64,
        goal_fallback=False))
    choice = agent.write_macro("collect_stone", stone)
    assert len(backend.requests) == 2  # the first round and one repair round, one sample each
    first, repair = choice.candidates
    assert first.probe is not None and first.probe.calls[0].inventory_diff == {"wood": 1}
    assert repair.revises == 0 and repair.seed == 1
    prompt = backend.requests[1][0][-1]["content"]
    lines = fenced(crash).splitlines()
    failing = next(i for i, line in enumerate(lines) if "// 0" in line)  # its 1-based line in the code
    assert f"The failing line ({failing}): return start // 0" in prompt
    assert "Its last actions: " in prompt and "do@tree" in prompt
    assert "Its inventory change: wood+1" in prompt and "return start // 0" in first.probe.calls[0].diagnostic
    assert choice.search.rounds == 2 and choice.search.stopped == "rounds" and choice.search.won is None


def repair_prompt(code: str, task: str, sub: SubAction, world: int, max_steps: int) -> str:
    """The repair round's prompt after `code`, the only reply, was probed once in `world`."""
    backend = Scripted(lambda messages, schema, s: fenced(code))
    agent = FastAgent(LLMClient(backend), AgentConfig(
        samples=1, repair_retries=0, probe_repair_retries=1, probe_seeds=(world,), probe_max_steps=max_steps,
        goal_fallback=False))
    agent.write_macro(task, sub)
    return backend.requests[1][0][-1]["content"]


def test_a_repair_round_says_a_macro_returned_without_its_goal_and_why_crafter_refused_its_craft() -> None:
    # Presses the craft with nothing held and no table, then returns: the call "succeeded" as a program
    # but never reached its goal, and the prompt says so and why crafter did nothing.
    prompt = repair_prompt('def craft(game):\n    yield "make_wood_pickaxe"\n', "make_wood_pickaxe", CRAFT,
                           world=0, max_steps=16)
    assert "it returned after 1 steps without reaching its goal" in prompt
    assert "ended with success" not in prompt
    assert "make_wood_pickaxe@" in prompt and "(refused: lacks 1 wood; no table nearby)" in prompt


def test_a_craft_macro_that_never_names_its_item_is_sent_back_before_any_probe() -> None:
    """The 1.5B's make_stone_pickaxe macros crafted the previous link's item (wood_pickaxe); named at
    compile time, the repair names the item and the call that makes it."""
    pick = SubAction("stone_pick", "make a stone pickaxe", "code", "make_stone_pickaxe", "")
    shifted = fenced('def stone_pick(game):\n    ok = yield from game.gather("stone")\n'
                     '    ok = yield from game.craft_item("wood_pickaxe")\n')
    fixed = shifted.replace('"wood_pickaxe"', '"stone_pickaxe"')

    def reply(messages: list[Message], schema: dict[str, Any] | None, s: SamplingParams) -> str:
        return fixed if "never names 'stone_pickaxe'" in messages[-1]["content"] else shifted

    config = dataclasses.replace(SEARCH, api="primitives", samples=1, repair_retries=1,
                                 probe_repair_retries=0, probe_max_steps=8)
    phases: list[str] = []
    choice = FastAgent(LLMClient(Scripted(reply)), config, on_phase=phases.append).write_macro(
        "make_stone_pickaxe", pick)
    (candidate,) = choice.candidates
    first, second = candidate.code.attempts
    assert [d.kind for d in first.diagnostics] == ["goal_unnamed"] and first.diagnostics[0].line == 3
    assert "It crafts 'wood_pickaxe' instead" in first.diagnostics[0].message
    assert "game.craft_item('stone_pickaxe')" in first.diagnostics[0].message
    assert second.diagnostics == () and "stone_pickaxe" in candidate.code.code
    assert phases == ["probe", "fast"] and candidate.probe is not None  # only the fixed code was probed
    # A macro composing a stored skill, or naming the item in its action, is not held to it.
    agent = FastAgent(LLMClient(Scripted(reply)), config)
    assert agent.compile_macro_code("stone_pick", 'def stone_pick(game):\n    yield "make_stone_pickaxe"\n',
                                    goal="make_stone_pickaxe") is not None
    # Code the compiler rejects gets the compiler's own, more precise diagnostics.
    with pytest.raises(MacroCompileError) as rejected:
        agent.compile_macro_code("stone_pick", "def stone_pick(game):\n"
                                 "    yield from game.make_wood_pickaxe()\n", goal="make_stone_pickaxe")
    assert [d.kind for d in rejected.value.diagnostics] == ["forbidden_attribute"]


def test_a_repair_round_says_a_spinning_macro_faces_the_tile_its_source_became() -> None:
    # The 1.5B's get_wood (measured on make_stone_sword): one walk to a tree, then `do` until it holds 4
    # wood. The tree turns into grass at the first wood: a call ends at its goal now, but a table's macro
    # gathering its two wood that way hits grass until the player dies. The prompt counts the whole run
    # and says, from crafter's data, what the tree became.
    spins = ('def table(game):\n    ok = yield from game.walk_to("tree")\n    while game.item("wood") < 2:\n'
             '        yield "do"\n    yield "place_table"\n')
    sub = SubAction("table", "collect two wood, then place a table", "code", "place_table", "")
    prompt = repair_prompt(spins, "place_table", sub, world=0, max_steps=400)  # until the player dies
    run = re.search(r"\(the last (\d+) actions were all do@grass\)", prompt)
    assert run and int(run.group(1)) > 8, prompt  # longer than the 8 actions the trace keeps
    assert "Collecting tree turns the tile into grass, so `do` facing grass gives no more wood" in prompt


def test_a_repeated_action_that_is_no_spent_source_gets_no_collecting_hint() -> None:
    # Pressing a craft with no table: the run is counted, but nothing was collected from a spent tile.
    press = 'def craft(game):\n    while True:\n        yield "make_wood_pickaxe"\n'
    prompt = repair_prompt(press, "make_wood_pickaxe", CRAFT, world=0, max_steps=16)
    assert "(the last 16 actions were all make_wood_pickaxe@" in prompt
    assert "Collecting" not in prompt


def test_a_repair_round_says_the_goals_source_was_never_in_view() -> None:
    # World 5 starts with no tree in view: a macro that returns when it sees none misses its goal there,
    # and the repair prompt says what was missing, from crafter's data (wood comes from a tree).
    returns = ('def chop_tree(game):\n    tree = game.nearest("tree")\n    if tree is None:\n'
               '        return False\n    ok = yield from game.walk_to("tree")\n    yield "do"\n')
    prompt = repair_prompt(returns, "collect_wood", CHOP, world=5, max_steps=64)
    assert "Not in view when it started nor when it ended: tree, which the goal needs" in prompt
    assert "without reaching its goal, at line 4: return False." in prompt
    assert "not in view at its start or end: tree" in prompt


def test_a_repair_round_says_a_missing_station_must_be_placed_and_what_its_recipe_lacked() -> None:
    # Exploring for a table in a world that has none (crafter's worlds start without one) with nothing
    # held: the prompt says that a table exists only once placed, not to explore for one, and what the
    # inventory lacked for the craft when the call ended.
    search = ('def pickaxe(game):\n    ok = yield from game.explore("table", max_steps=20)\n    if not ok:\n'
              '        return False\n    yield "make_wood_pickaxe"\n')
    sub = SubAction("pickaxe", "make a wood pickaxe", "code", "make_wood_pickaxe", "")
    prompt = repair_prompt(search, "make_wood_pickaxe", sub, world=0, max_steps=32)
    assert "No table was in view, and exploring finds none: a table exists only where the player" in prompt
    assert "Not in view when it started nor when it ended: table" not in prompt
    assert "When it ended, the inventory lacked 1 wood for make_wood_pickaxe: get that first." in prompt


def test_each_repair_round_revises_a_candidate_no_earlier_round_revised() -> None:
    # Three idle programs, each missing the goal alike: the earliest stays the best, yet the third round
    # revises the second (the first was revised already), never the same prompt twice.
    idle = {k: fenced(f'def chop_tree(game):\n    for i in range({k + 2}):\n        yield "noop"\n')
            for k in range(3)}
    backend = Scripted(lambda messages, schema, s: idle[s.seed])
    agent = FastAgent(LLMClient(backend), AgentConfig(
        samples=1, repair_retries=0, probe_repair_retries=2, probe_seeds=(0,), probe_max_steps=16,
        goal_fallback=False))
    choice = agent.write_macro("collect_wood", CHOP)
    assert [c.revises for c in choice.candidates] == [None, 0, 1]
    assert choice.best is choice.candidates[0]
    prompts = [request[0][-1]["content"] for request in backend.requests]
    assert "range(2)" in prompts[1] and "range(3)" in prompts[2] and "range(2)" not in prompts[2]


def test_no_round_starts_once_the_search_budget_is_spent() -> None:
    backend = Scripted(lambda messages, schema, s: IDLE, delay_s=0.05)
    agent = FastAgent(LLMClient(backend), AgentConfig(
        samples=2, repair_retries=0, probe_repair_retries=3, probe_seeds=(0,), probe_max_steps=16,
        goal_fallback=False, search_budget_s=0.01))
    choice = agent.write_macro("collect_wood", CHOP)
    assert choice.search.rounds == 1 and choice.search.stopped == "budget" and len(backend.requests) == 2
    assert choice.search.llm_s >= 0.1


def test_the_critics_named_sub_action_and_change_reach_the_next_fast_prompt_for_it() -> None:
    table = SubAction("place_it", "place a table", "code", "place_table", "")
    decomposition = Decomposition((CHOP, table))
    change = "stand next to the tree and yield do until the wood count goes up"
    verdict = {"target": "fast", "problems": ["chop_tree never faces the tree"], "suggestions": ["face it"],
               "subaction": "chop_tree", "change": change}
    critic_backend = Scripted(lambda messages, schema, s: json.dumps(verdict))
    agent = FastAgent(LLMClient(critic_backend), SEARCH)
    probe = agent.probe(agent.compile_macro_code("chop_tree", IDLE_CODE), "wood")
    evaluation = {"success_rate": 0.0, "macro_stats": {"chop_tree": {"calls": 12, "successes": 0}}}
    feedback, error = Critic(LLMClient(critic_backend)).review_or_fallback(
        "collect_wood", 1, decomposition, [probe], evaluation, [])
    assert not error and (feedback.subaction, feedback.change) == ("chop_tree", change)
    # The critic read the sub-action's probe and training statistics and its last actions.
    asked, schema, _ = critic_backend.requests[0]
    assert "- chop_tree: goal wood reached in 0 of 2 probe calls" in asked[-1]["content"]
    assert "in training: calls 12" in asked[-1]["content"] and "last actions: noop" in asked[-1]["content"]
    assert schema is not None and schema["properties"]["subaction"]["enum"] == ["chop_tree", "place_it", ""]

    fast_backend = Scripted(chain_reply(GOOD))
    agent = FastAgent(LLMClient(fast_backend), SEARCH)
    result = agent.run("collect_wood", decomposition, "none", critic_notes(feedback.to_dict()))
    asked = [m[-1]["content"] for m, schema, _ in fast_backend.requests if schema is None]
    chop = [p for p in asked if "Write the macro `chop_tree(game)`" in p]
    place = [p for p in asked if "Write the macro `place_it(game)`" in p]
    assert chop and all(f"The critic on `chop_tree`: {change}" in p for p in chop)
    assert place and all(change not in p for p in place)
    assert result.to_dict()["notes"] == {"chop_tree": change}


def test_a_macro_that_never_reached_its_goal_does_not_set_where_the_next_is_probed() -> None:
    # A kept macro that no probe call saw reach its goal is not trained (`trained_macros`), so the next
    # sub-action is probed from the worlds' start, not after it (measured: a get_wood that spun until the
    # player died left every later sub-action without a single probe call).
    table = SubAction("place_it", "place a table", "code", "place_table", "")

    def setups(chop: str) -> list[str]:
        config = dataclasses.replace(SEARCH, samples=1, probe_repair_retries=0)
        agent = FastAgent(LLMClient(Scripted(chain_reply(chop))), config)
        result = agent.run("place_table", Decomposition((CHOP, table)))
        place = result.to_dict()["macros"][1]
        assert place["subaction"] == "place_it"
        probe = place["candidates"][0]["probe"]
        assert len(probe["calls"]) == 2  # one call per probe world either way
        return probe["setup"]

    assert setups(IDLE) == []
    assert setups(GOOD) == ["chop_tree"]


def test_a_later_iterations_searches_sample_with_new_seeds() -> None:
    # The loop's second iteration asked the same prompts as its first; with the same seeds the response
    # cache gave the same replies back. Each draw (the iteration's index) samples from its own seeds.
    config = dataclasses.replace(SEARCH, samples=2, probe_repair_retries=1)
    seeds = []
    for draw in (0, 1):
        backend = Scripted(chain_reply(IDLE))
        FastAgent(LLMClient(backend), config).run("place_table", Decomposition((CHOP, SubAction(
            "place_it", "place a table", "code", "place_table", ""))), draw=draw)
        seeds.append({seed for batch in backend.batches for seed in batch})
    # Two rounds of two per sub-action, and one fresh round (the repair round brought back only repeats).
    assert seeds[0] == {0, 1, 2, 3, 4, 5}
    assert seeds[1] == {100, 101, 102, 103, 104, 105}


def test_a_reply_repeating_an_earlier_candidate_is_not_probed_again() -> None:
    backend = Scripted(lambda messages, schema, s: IDLE)
    agent = FastAgent(LLMClient(backend), AgentConfig(
        samples=3, repair_retries=0, probe_repair_retries=1, probe_seeds=(0, 1), probe_max_steps=16,
        goal_fallback=False))
    choice = agent.write_macro("collect_wood", CHOP)
    stats = choice.search
    # Three rounds of three samples (the repair round brought back only repeats, so one more round asked the
    # first prompt afresh), all the same reply: it was compiled and probed once.
    assert (stats.rounds, stats.sampled, stats.tried, stats.repeats, stats.fresh) == (3, 9, 1, 8, 1)
    assert len(choice.candidates) == 1 and choice.candidates[0].probe is not None
    assert len(choice.candidates[0].probe.calls) == 2


def test_a_repair_round_that_only_repeats_its_input_is_followed_by_fresh_first_prompt_samples() -> None:
    # The 1.5B's repair rounds often give the candidate they were shown back unchanged (2 of 2 samples in a
    # make run): such a round tried nothing, so the first prompt is asked again with new seeds.
    first: list[list[Message]] = []

    def reply(messages, schema, s):
        first.extend([] if first else [messages])
        return GOOD if messages == first[0] and s.seed > 0 else IDLE

    backend = Scripted(reply)
    agent = FastAgent(LLMClient(backend), AgentConfig(
        samples=1, repair_retries=0, probe_repair_retries=1, probe_seeds=(0, 1), probe_max_steps=64,
        goal_fallback=False))
    choice = agent.write_macro("collect_wood", CHOP)
    assert [sampling.seed for _, _, sampling in backend.requests] == [0, 1, 2]
    assert backend.requests[1][0] != first[0] and backend.requests[2][0] == first[0]
    stats = choice.search
    assert (stats.rounds, stats.repeats, stats.fresh, stats.won, stats.stopped) == (3, 1, 1, 1, "goal")
    assert choice.best is choice.candidates[1] and choice.best.seed == 2 and choice.best.revises is None


def test_an_earlier_iterations_verified_macro_is_kept_without_asking_the_model() -> None:
    backend = Scripted(lambda messages, schema, s: {1: GOOD}.get(s.seed, IDLE))
    agent = FastAgent(LLMClient(backend), SEARCH)
    first = agent.write_macro("collect_wood", CHOP)
    fast = {"macros": [first.to_dict()]}
    carried = verified_macros(fast, "iter_000")
    assert list(carried) == ["wood"] and carried["wood"].iteration == "iter_000"
    asked = len(backend.requests)
    # A re-decomposition names the same goal under another name: the macro is tried first, under the new
    # name, word for word, and kept when it reaches the goal in every probe call; the model is not asked.
    renamed = SubAction("get_wood", "collect one wood", "code", "wood", "")
    choice = agent.write_macro("collect_wood", renamed, carried=carried["wood"])
    assert len(backend.requests) == asked
    kept = choice.best
    assert kept is choice.candidates[0] and kept.reached and kept.carried_from == "iter_000"
    assert kept.written_by == "model" and kept.code.code.startswith(first.best.code.code.rstrip())
    assert choice.source is not None and choice.source.name == "get_wood"
    assert (choice.search.stopped, choice.search.won, choice.search.sampled) == ("carried", 0, 0)
    assert choice.to_dict()["candidates"][0]["carried_from"] == "iter_000"


def test_a_carried_macro_that_misses_the_goal_here_is_one_candidate_and_the_model_is_asked() -> None:
    backend = Scripted(lambda messages, schema, s: {1: GOOD}.get(s.seed, IDLE))
    agent = FastAgent(LLMClient(backend), SEARCH)
    idle = CarriedMacro("chop_tree", IDLE_CODE, "iter_000")
    choice = agent.write_macro("collect_wood", CHOP, carried=idle)
    assert choice.candidates[0].carried_from == "iter_000" and not choice.candidates[0].reached
    # The model's seed 0 wrote the carried program again (a repeat, not probed again); seed 1 won.
    assert choice.search.stopped == "goal" and choice.search.repeats == 1
    assert choice.best is choice.candidates[1] and choice.best.seed == 1
    assert choice.best.carried_from is None and len(backend.requests) == 4


def test_model_code_that_reached_its_goal_is_carried_the_best_rate_per_goal() -> None:
    def kept(written_by, goal_rate, goal="wood", code="def a(game):\n    yield 'noop'\n"):
        return {"subaction": "a", "best": 0, "candidates": [
            {"index": 0, "code": code, "written_by": written_by,
             "probe": {"goal": goal, "goal_rate": goal_rate}}]}

    fast = {"macros": [kept("model", 1.0), kept("library", 1.0, "stone"), kept("expert", 1.0, "coal"),
                       kept("model", 0.5, "sapling"), kept("model", 0.0, "drink"), kept("model", 1.0, None),
                       kept("model", 1.0, "iron", None), kept("model", "1", "diamond"),
                       {"subaction": "b", "best": None, "candidates": []},
                       {"subaction": "c", "best": 3, "candidates": []}]}
    found = verified_macros(fast, "iter_001")
    assert sorted(found) == ["sapling", "stone", "wood"] and found["sapling"].goal_rate == 0.5
    carried = {"sapling": CarriedMacro("s", "x", "iter_000", 0.75),
               "wood": CarriedMacro("w", "x", "iter_000")}
    carry(carried, found)
    assert {g: m.iteration for g, m in carried.items()} == {
        "sapling": "iter_000", "wood": "iter_001", "stone": "iter_001"}  # higher rate kept; ties: the later


def test_a_sub_action_the_critic_named_is_searched_though_its_carried_macro_reaches_the_goal() -> None:
    backend = Scripted(lambda messages, schema, s: IDLE)
    agent = FastAgent(LLMClient(backend), SEARCH)
    good = CarriedMacro("chop_tree", chop_source("chop_tree"), "iter_000")
    choice = agent.write_macro("collect_wood", CHOP, carried=good, search_anyway=True)
    assert choice.search.sampled > 0 and choice.search.stopped == "rounds"
    assert choice.best is choice.candidates[0] and choice.best.carried_from == "iter_000"  # nothing beat it


def test_a_reply_with_the_same_program_in_other_words_is_a_repeat_too() -> None:
    # A revision that returns its input with a new comment and other spacing: the same program, not probed
    # again; a program that differs in one statement is a new candidate.
    variants = {0: IDLE, 1: fenced("# walk nowhere\n" + IDLE_CODE.replace("range(3)", "range( 3 )")),
                2: fenced(IDLE_CODE.replace("range(3)", "range(4)"))}
    backend = Scripted(lambda messages, schema, s: variants[s.seed])
    agent = FastAgent(LLMClient(backend), AgentConfig(
        samples=3, repair_retries=0, probe_repair_retries=0, probe_seeds=(0,), probe_max_steps=16,
        goal_fallback=False))
    stats = agent.write_macro("collect_wood", CHOP).search
    assert (stats.sampled, stats.tried, stats.repeats) == (3, 2, 1)


def test_the_critic_reads_rejected_candidates_only_where_no_macro_was_kept() -> None:
    from rlgpt.agents.fast import fast_diagnostics
    from rlgpt.macro.diagnostics import Diagnostic

    rejected = {"index": 0, "code": None,
                "attempts": [{"diagnostics": [dataclasses.asdict(Diagnostic("syntax", "invalid syntax"))]}]}
    kept = {"index": 1, "code": IDLE_CODE, "attempts": []}
    fast = {"macros": [{"subaction": "get_wood", "best": 1, "candidates": [rejected, kept]},
                       {"subaction": "place_it", "best": None, "candidates": [rejected]}],
            "reward": {"code": None, "attempts": [{"diagnostics": [
                dataclasses.asdict(Diagnostic("exception", "ZeroDivisionError"))]}]}}
    lines = fast_diagnostics(fast)
    assert len(lines) == 2 and lines[0].startswith("macro place_it candidate 0: ")
    assert "get_wood" not in " ".join(lines) and lines[1].startswith("reward (left out of training)")
