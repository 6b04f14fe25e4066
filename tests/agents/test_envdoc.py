"""The environment documentation is generated from crafter's data.yaml and states every rule exactly."""

from __future__ import annotations

import pathlib

import crafter
import pytest
import ruamel.yaml

from rlgpt.agents.envdoc import achievement_requirements, crafter_rules, prerequisite_chain

DATA = ruamel.yaml.YAML(typ="safe", pure=True).load(
    (pathlib.Path(crafter.__file__).parent / "data.yaml").read_text())


def _amounts(mapping: dict[str, int]) -> str:
    return ", ".join(f"{n} {k}" for k, n in mapping.items())


def test_every_action_recipe_and_requirement_appears_exactly() -> None:
    doc = crafter_rules()
    lines = doc.splitlines()
    for action in DATA["actions"]:
        assert any(line.startswith(f"- {action}: ") for line in lines), action
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
    for item, info in DATA["items"].items():
        assert f"{item} (" in doc and f"{info['max']}" in doc
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
