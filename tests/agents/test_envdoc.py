"""The environment documentation is generated from crafter's data.yaml and states every rule exactly."""

from __future__ import annotations

import pathlib

import crafter
import pytest
import ruamel.yaml

from rlgpt.agents.common import describe_task
from rlgpt.agents.envdoc import achievement_requirements, crafter_rules, prerequisite_chain, requirement_lines

DATA = ruamel.yaml.YAML(typ="safe", pure=True).load(
    (pathlib.Path(crafter.__file__).parent / "data.yaml").read_text())


def _amounts(mapping: dict[str, int]) -> str:
    return ", ".join(f"{n} {k}" for k, n in mapping.items())


def test_every_action_recipe_and_requirement_appears_exactly() -> None:
    doc = crafter_rules()
    lines = doc.splitlines()
    actions = lines[lines.index("Actions (one per step):") + 1:]
    actions = actions[:actions.index("")]
    for action in DATA["actions"]:  # once, on the line of its family (moves, place_*, make_*) or its own
        named = [line.split(":")[0].removeprefix("- ").split(", ") for line in actions]
        assert sum(action in names for names in named) == 1, action
    for name, info in DATA["make"].items():
        line = next(x for x in lines if x.startswith(f"- make_{name}: uses"))
        assert f"uses {_amounts(info['uses'])} from the inventory" in line
        assert f"needs {' and '.join(info['nearby'])} nearby" in line
    for name, info in DATA["place"].items():
        line = next(x for x in lines if x.startswith(f"- place_{name}: uses"))
        assert f"uses {_amounts(info['uses'])}" in line and ", ".join(info["where"]) in line
    for material, info in DATA["collect"].items():
        line = next(x for x in lines if x.startswith(f"- {material}: "))
        if info["require"]:
            assert f"needs {_amounts(info['require'])} in the inventory" in line
        else:
            assert "needs no tool" in line
        assert f"gives {_amounts(info['receive'])}" in line
        if "probability" in info:
            assert f"probability {info['probability']}" in line
    assert f"Walkable materials: {', '.join(DATA['walkable'])}" in doc
    stock = {line.split(":")[0]: line for line in lines if line.startswith(("Inventory:", "Survival:"))}
    for item, info in DATA["items"].items():
        line = stock["Survival" if item in ("health", "food", "drink", "energy") else "Inventory"]
        group = next(g for g in line.split(": ", 1)[1].split("; ") if f" {item}," in f" {g.split(' (')[0]},")
        assert f"max {info['max']} each" in group or f"0-{info['max']} each" in group, item
        assert f"start at {info['initial']}" in group, item
    for achievement in DATA["achievements"]:
        assert achievement in doc


def test_requirements_follow_the_recipes() -> None:
    needs = achievement_requirements()
    assert set(needs) == set(DATA["achievements"])
    assert needs["collect_stone"] == {"make_wood_pickaxe"}
    assert needs["make_wood_pickaxe"] == {"collect_wood", "place_table"}
    assert needs["make_iron_pickaxe"] == {"collect_wood", "collect_coal", "collect_iron", "place_table",
                                          "place_furnace"}
    assert needs["place_furnace"] == {"collect_stone"}
    assert needs["collect_wood"] == needs["collect_drink"] == needs["defeat_zombie"] == frozenset()


@pytest.mark.parametrize("goal", list(DATA["achievements"]))
def test_prerequisite_chain_orders_prerequisites_first(goal: str) -> None:
    chain = prerequisite_chain([goal])
    assert chain[-1] == goal and len(set(chain)) == len(chain)
    needs = achievement_requirements()
    for i, step in enumerate(chain):
        assert needs[step] <= set(chain[:i]), step


def test_prerequisite_chain_rejects_unknown_goal() -> None:
    with pytest.raises(ValueError, match="unknown achievement 'collect_gold'"):
        prerequisite_chain(["collect_gold"])


@pytest.mark.parametrize("goal", sorted(DATA["achievements"]))
def test_requirement_lines_number_the_chain_and_count_what_it_consumes(goal: str) -> None:
    chain = prerequisite_chain([goal])
    lines = requirement_lines([goal]).splitlines()
    assert [line.split(" ", 1)[1].split(":")[0].split(" (")[0] for line in lines] == list(chain)
    assert [line.split(".", 1)[0] for line in lines] == [str(i) for i in range(1, len(chain) + 1)]
    # Every material a later step uses is collected earlier with its total over the whole chain.
    used: dict[str, int] = {}
    for achievement in chain:
        kind, _, name = achievement.partition("_")
        recipe = {"place": DATA["place"], "make": DATA["make"]}.get(kind, {}).get(name, {})
        for item, n in recipe.get("uses", {}).items():
            used[item] = used.get(item, 0) + n
    for item, n in used.items():
        collect = next(line for line in lines if line.split(" ", 1)[1].startswith(f"collect_{item}"))
        assert f"({n} {item} needed in total" in collect


def test_a_task_prompt_carries_its_requirements() -> None:
    text = describe_task("make_wood_pickaxe")
    # crafter's recipes: a table uses 2 wood and the pickaxe 1 more, with the table nearby.
    assert "1. collect_wood (3 wood needed in total" in text and "3. make_wood_pickaxe: uses 1 wood" in text
    assert "2. place_table" in describe_task("collect_coal+place_table")
