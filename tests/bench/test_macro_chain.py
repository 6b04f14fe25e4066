"""`bench.macro_chain`: an iteration's kept macros played in the decomposition's order on real Crafter."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from crafter_helpers import chop_source

from bench.macro_chain import chain_rates, main
from rlgpt import layout


def iteration(tmp_path: Path, place_code: str) -> Path:
    (tmp_path / layout.RUN_YAML).write_text(yaml.safe_dump({"task": "place_table", "seed": 0}))
    it = tmp_path / "iter_000"
    it.mkdir()
    subactions = [{"name": "get_wood", "goal": "wood", "how": "code"},
                  {"name": "learned", "goal": "sapling", "how": "rl"},  # not coded: no macro, not played
                  {"name": "place", "goal": "place_table", "how": "code"}]
    (it / layout.SLOW_JSON).write_text(json.dumps({"decomposition": {"subactions": subactions}}))
    wood = chop_source("get_wood").replace('while game.inventory["wood"] <= start:',
                                           'while game.inventory["wood"] < start + 2:')
    macros = [{"name": "get_wood", "description": "two wood", "code": wood},
              {"name": "place", "description": "a table", "code": place_code}]
    (it / layout.MACROS_YAML).write_text(yaml.safe_dump(macros))
    return it


PLACE = 'def place(game):\n    yield "place_table"\n'


def test_links_are_played_in_order_and_the_task_is_read_from_the_last(tmp_path: Path, capsys) -> None:
    it = iteration(tmp_path, PLACE)
    rates, done, worlds = chain_rates(it, episodes=3)
    assert [(r.macro, r.goal, r.reached, r.worlds) for r in rates] == [
        ("get_wood", "wood", 3, 3), ("place", "place_table", 3, 3)]
    assert (done, worlds) == (3, 3)
    main([str(it), "--episodes", "2"])
    assert "unlocked the task's achievement in 2/2 worlds" in capsys.readouterr().out


def test_a_link_that_misses_its_goal_fails_the_chain(tmp_path: Path) -> None:
    rates, done, _ = chain_rates(iteration(tmp_path, 'def place(game):\n    yield "noop"\n'), episodes=2)
    assert [r.reached for r in rates] == [2, 0] and done == 0
