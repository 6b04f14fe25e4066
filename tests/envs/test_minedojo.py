"""MineDojo adapter: task table, action/observation mapping and success on MineDojo-shaped data, and the
construction error where MineDojo cannot run (no package, wrong or missing Java)."""

from __future__ import annotations

import importlib.util
import os
import socket
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from rlgpt.envs.minedojo import (
    ACTION_NAMES,
    ACTIONS,
    CAMERA_NOOP_BIN,
    FN_ATTACK,
    FN_CRAFT,
    FN_EQUIP,
    FN_PLACE,
    MINEDOJO_TASKS,
    N_INVENTORY_SLOTS,
    TRACKED_ITEMS,
    MineDojoTaskEnv,
    MineDojoUnavailable,
    check_minedojo_prerequisites,
    convert_observation,
    get_task,
    inventory_counts,
    noop_vector,
    observation_space,
    parse_java_major_version,
    task_success,
    to_minedojo_action,
)

# A stand-in for mc.ALL_CRAFT_SMELT_ITEMS (hand-craft items, then table-only, then smelting, as in MineDojo);
# the real list is only available with MineDojo installed, so indices are checked against this one.
CRAFT_ITEMS = [
    "acacia_boat",
    "crafting_table",
    "planks",
    "stick",
    "torch",
    "furnace",
    "iron_pickaxe",
    "stone_pickaxe",
    "wooden_pickaxe",
    "cooked_beef",
    "iron_ingot",
]
IMAGE_SIZE = (16, 24)


def _raw_obs(
    slots: dict[int, tuple[str, int]],
    pos: tuple[float, float, float] = (1.5, 64.0, -3.25),
    yaw: float = 90.0,
    pitch: float = -15.0,
    table: bool = True,
    furnace: bool = False,
) -> dict:
    """An observation laid out like MineDojo's (ARNNWrapper over MineDojoSim), inventory names with spaces."""
    names = np.array(["air"] * N_INVENTORY_SLOTS, dtype=object)
    quantity = np.zeros(N_INVENTORY_SLOTS, dtype=np.float32)
    for slot, (name, qty) in slots.items():
        names[slot], quantity[slot] = name, qty
    return {
        "rgb": np.full((3, *IMAGE_SIZE), 7, dtype=np.uint8),
        "inventory": {
            "name": names,
            "quantity": quantity,
            "variant": np.zeros(N_INVENTORY_SLOTS, dtype=np.int64),
            "max_durability": np.full(N_INVENTORY_SLOTS, -1.0, dtype=np.float32),
            "cur_durability": np.full(N_INVENTORY_SLOTS, -1.0, dtype=np.float32),
        },
        "life_stats": {
            "life": np.array([17.0], dtype=np.float32),
            "food": np.array([19.0], dtype=np.float32),
            "oxygen": np.array([300.0], dtype=np.float32),
            "armor": np.array([0.0], dtype=np.float32),
            "saturation": np.array([5.0], dtype=np.float32),
            "xp": np.array([0.0], dtype=np.float32),
            "is_sleeping": 0,
        },
        "location_stats": {
            "pos": np.array(pos, dtype=np.float32),
            "yaw": np.array([yaw], dtype=np.float32),
            "pitch": np.array([pitch], dtype=np.float32),
            "biome_id": np.array(4),
            "rainfall": np.array([0.8], dtype=np.float32),
        },
        "nearby_tools": {"table": np.array(table), "furnace": np.array(furnace)},
    }


# ------------------------------------------------------------------------------------------------ tasks


def test_task_table_maps_to_minedojo_harvest_kwargs() -> None:
    assert {
        "harvest_log",
        "crafting_table",
        "wooden_pickaxe",
        "stone_pickaxe",
        "iron_pickaxe",
        "furnace",
    } <= set(MINEDOJO_TASKS)
    log = get_task("harvest_log").make_kwargs()
    assert log == {
        "task_id": "harvest",
        "target_names": ["log"],
        "target_quantities": [1],
        "specified_biome": "forest",
    }
    for task in MINEDOJO_TASKS.values():
        kwargs = task.make_kwargs()
        assert len(kwargs["target_names"]) == len(kwargs["target_quantities"]) >= 1
        assert task.episode_length > 0 and task.description


def test_unknown_task_lists_valid_names() -> None:
    with pytest.raises(KeyError, match="harvest_log"):
        get_task("harvest_logs")
    with pytest.raises(KeyError, match="unknown MineDojo task"):
        MineDojoTaskEnv("no_such_task")


# ---------------------------------------------------------------------------------------------- actions


def _act(name: str, inventory: list[str] | None = None) -> np.ndarray:
    names = inventory if inventory is not None else ["air"] * N_INVENTORY_SLOTS
    return to_minedojo_action(ACTION_NAMES.index(name), names, CRAFT_ITEMS)


def test_movement_and_camera_actions() -> None:
    np.testing.assert_array_equal(_act("noop"), [0, 0, 0, 12, 12, 0, 0, 0])
    np.testing.assert_array_equal(_act("forward"), [1, 0, 0, 12, 12, 0, 0, 0])
    np.testing.assert_array_equal(_act("back"), [2, 0, 0, 12, 12, 0, 0, 0])
    np.testing.assert_array_equal(_act("right"), [0, 2, 0, 12, 12, 0, 0, 0])
    np.testing.assert_array_equal(_act("jump_forward"), [1, 0, 1, 12, 12, 0, 0, 0])
    assert _act("look_down")[3] == CAMERA_NOOP_BIN + 1 and _act("look_up")[3] == CAMERA_NOOP_BIN - 1
    assert _act("turn_right")[4] == CAMERA_NOOP_BIN + 1 and _act("turn_left")[4] == CAMERA_NOOP_BIN - 1
    # RL-GPT's generated code writes `action[5] = 3` for attack.
    assert _act("attack")[5] == FN_ATTACK == 3


def test_craft_actions_use_minedojo_craft_index() -> None:
    vec = _act("craft_crafting_table")
    assert vec[5] == FN_CRAFT and vec[6] == CRAFT_ITEMS.index("crafting_table")
    assert _act("smelt_iron_ingot")[6] == CRAFT_ITEMS.index("iron_ingot")
    with pytest.raises(ValueError, match="craft vocabulary"):
        to_minedojo_action(ACTION_NAMES.index("craft_planks"), ["air"] * N_INVENTORY_SLOTS, ["stick"])


def test_place_and_equip_pick_the_item_slot_or_noop() -> None:
    inventory = ["air"] * N_INVENTORY_SLOTS
    inventory[3], inventory[7] = "log", "crafting table"
    vec = _act("place_crafting_table", inventory)
    assert vec[5] == FN_PLACE and vec[7] == 7
    np.testing.assert_array_equal(_act("equip_wooden_pickaxe", inventory), noop_vector())
    inventory[30] = "wooden_pickaxe"
    vec = _act("equip_wooden_pickaxe", inventory)
    assert vec[5] == FN_EQUIP and vec[7] == 30


def test_every_action_is_inside_minedojo_multidiscrete() -> None:
    nvec = np.array([3, 3, 4, 25, 25, 8, len(CRAFT_ITEMS), N_INVENTORY_SLOTS])
    inventory = ["crafting table", "furnace", "wooden pickaxe", "stone pickaxe", "iron pickaxe"]
    inventory += ["air"] * (N_INVENTORY_SLOTS - len(inventory))
    assert len(set(ACTION_NAMES)) == len(ACTIONS)
    for i in range(len(ACTIONS)):
        vec = to_minedojo_action(i, inventory, CRAFT_ITEMS)
        assert vec.shape == (8,) and np.all(vec >= 0) and np.all(vec < nvec), (ACTION_NAMES[i], vec)
    with pytest.raises(IndexError):
        to_minedojo_action(len(ACTIONS), inventory, CRAFT_ITEMS)


# ----------------------------------------------------------------------------------------- observations


def test_inventory_counts_sum_slots_and_normalize_names() -> None:
    raw = _raw_obs({0: ("cobblestone", 64), 5: ("cobblestone", 3), 2: ("crafting table", 1), 9: ("air", 0)})
    assert inventory_counts(raw["inventory"]) == {"cobblestone": 67, "crafting_table": 1}


def test_convert_observation_matches_space() -> None:
    raw = _raw_obs({0: ("log", 2), 1: ("wooden pickaxe", 1)}, pos=(10.0, 12.5, -7.0), yaw=-45.0, pitch=30.0)
    obs = convert_observation(raw)
    assert obs["inventory"][TRACKED_ITEMS.index("log")] == 2
    assert obs["inventory"][TRACKED_ITEMS.index("wooden_pickaxe")] == 1
    assert obs["inventory"].sum() == 3
    np.testing.assert_allclose(obs["pos"], [10.0, 12.5, -7.0])
    np.testing.assert_allclose(obs["facing"], [-45.0, 30.0])
    np.testing.assert_allclose(obs["life"], [17.0, 19.0])
    np.testing.assert_allclose(obs["nearby"], [1.0, 0.0])
    assert obs["rgb"].shape == (3, *IMAGE_SIZE) and obs["rgb"].dtype == np.uint8
    assert observation_space(IMAGE_SIZE).contains(obs)
    no_rgb = convert_observation(raw, include_rgb=False)
    assert "rgb" not in no_rgb and observation_space(IMAGE_SIZE, include_rgb=False).contains(no_rgb)


def test_success_counts_only_items_gained_since_reset() -> None:
    task = get_task("harvest_log")
    start = inventory_counts(_raw_obs({0: ("log", 1)})["inventory"])
    assert not task_success(task, start, inventory_counts(_raw_obs({0: ("log", 1)})["inventory"]))
    assert task_success(task, start, inventory_counts(_raw_obs({0: ("log", 2)})["inventory"]))
    pick = get_task("wooden_pickaxe")
    assert not task_success(pick, {}, {"planks": 4, "stick": 2})
    assert task_success(pick, {}, inventory_counts(_raw_obs({4: ("wooden pickaxe", 1)})["inventory"]))


# ---------------------------------------------------------------------------------------- prerequisites


@pytest.mark.parametrize(
    ("text", "major"),
    [
        ('openjdk version "1.8.0_292"\nOpenJDK Runtime Environment', 8),
        ('java version "1.8.0_201"', 8),
        ('openjdk version "17.0.15" 2025-04-15', 17),
        ('openjdk version "11" 2018-09-25', 11),
        ("bash: java: command not found", None),
    ],
)
def test_parse_java_major_version(text: str, major: int | None) -> None:
    assert parse_java_major_version(text) == major


def test_missing_minedojo_fails_before_any_subprocess_or_download(monkeypatch) -> None:
    if importlib.util.find_spec("minedojo") is not None:
        pytest.skip("minedojo is installed here")

    def forbidden(*args, **kwargs):
        raise AssertionError("prerequisite check must not spawn processes or open connections")

    monkeypatch.setattr(subprocess, "Popen", forbidden)
    monkeypatch.setattr(socket.socket, "connect", forbidden)
    with pytest.raises(MineDojoUnavailable, match=r"MineDojo is not installed \(pip install minedojo"):
        MineDojoTaskEnv("harvest_log")


def _fake_java(directory: Path, version: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    java = directory / "java"
    java.write_text(f"#!/bin/sh\necho 'openjdk version \"{version}\" 2021-01-01' >&2\n")
    java.chmod(java.stat().st_mode | stat.S_IXUSR)
    return java


@pytest.fixture
def fake_minedojo(tmp_path, monkeypatch) -> Iterator[Path]:
    """An importable, empty `minedojo` package so the Java check is reached (stands in for the install)."""
    if importlib.util.find_spec("minedojo") is not None:
        pytest.skip("minedojo is installed here")
    (tmp_path / "site" / "minedojo").mkdir(parents=True)
    (tmp_path / "site" / "minedojo" / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    yield tmp_path
    sys.modules.pop("minedojo", None)


def test_wrong_java_version_is_reported(fake_minedojo, monkeypatch) -> None:
    _fake_java(fake_minedojo / "bin17", "17.0.15")
    monkeypatch.setenv("PATH", str(fake_minedojo / "bin17"))
    with pytest.raises(MineDojoUnavailable, match=r"requires Java 8 \(found: java 17 at .*bin17/java\)"):
        MineDojoTaskEnv("crafting_table")


def test_missing_java_is_reported(fake_minedojo, monkeypatch) -> None:
    (fake_minedojo / "empty").mkdir()
    monkeypatch.setenv("PATH", str(fake_minedojo / "empty"))
    with pytest.raises(MineDojoUnavailable, match=r"requires Java 8 \(found: none\)"):
        check_minedojo_prerequisites()


def test_java_home_8_is_preferred_over_path(fake_minedojo, monkeypatch) -> None:
    _fake_java(fake_minedojo / "bin17", "17.0.15")
    _fake_java(fake_minedojo / "jdk8" / "bin", "1.8.0_292")
    monkeypatch.setenv("PATH", str(fake_minedojo / "bin17") + os.pathsep + os.environ.get("PATH", ""))
    monkeypatch.setenv("JAVA_HOME", str(fake_minedojo / "jdk8"))
    assert check_minedojo_prerequisites() == 8
