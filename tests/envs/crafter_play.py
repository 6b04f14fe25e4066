"""Scripted Crafter players that reach the game's deeper dynamics, for dynamics-equality tests.

Random actions rarely get past wood and saplings. These players read a crafter game's full state (the
world map, objects, inventory) and pick actions that climb the tech tree, hunt creatures, farm, walk into
lava or idle until they starve, with some randomness so that they get unstuck. They only choose actions:
every effect goes through the game's own step, so any game stepped with the same actions can be compared.
`crafter_row_state` and `assert_same_state` are that comparison, a crafter game against an engine row.
"""

from __future__ import annotations

import numpy as np
from crafter import constants, objects

from rlgpt.envs.crafter import ACTION_NAMES, DIRECTIONS, CrafterEnv

A = {name: i for i, name in enumerate(ACTION_NAMES)}
_MOVES = {step: A[f"move_{name}"] for step, name in DIRECTIONS}
_TOOLS = ("iron_pickaxe", "iron_sword", "stone_pickaxe", "stone_sword", "wood_pickaxe", "wood_sword")
POLICIES = ("tech", "hunter", "farmer", "lava", "idle", "random")
"""Names of the scripted players `choose` knows."""


def _near_materials(world, pos) -> set[str]:
    materials, _ = world.nearby(pos, 1)
    return set(materials)


def _step_toward(world, player, target: tuple[int, int], rng: np.random.Generator, can_dig: set[str]) -> int:
    """One action that brings the player closer to ``target``: face it when adjacent, else a greedy move
    around lava, digging through materials in ``can_dig`` and moving at random when blocked."""
    px, py = int(player.pos[0]), int(player.pos[1])
    dx, dy = target[0] - px, target[1] - py
    steps = []
    if dx:
        steps.append((int(np.sign(dx)), 0))
    if dy:
        steps.append((0, int(np.sign(dy))))
    if abs(dy) > abs(dx):
        steps.reverse()
    for step in steps:
        cell = (px + step[0], py + step[1])
        material, obj = world[cell]
        if cell == tuple(target):
            # Moving into an occupied target only turns the player toward it.
            return A["do"] if tuple(player.facing) == step else _MOVES[step]
        if obj is None and material in ("grass", "sand", "path"):
            return _MOVES[step]
        if material in can_dig and obj is None:
            return A["do"] if tuple(player.facing) == step else _MOVES[step]
    return _random_move(rng)


def _random_move(rng: np.random.Generator) -> int:
    return int(rng.choice(list(_MOVES.values())))


def _nearest(cells: np.ndarray, pos) -> tuple[int, int] | None:
    if len(cells) == 0:
        return None
    d = np.abs(cells[:, 0] - pos[0]) + np.abs(cells[:, 1] - pos[1])
    x, y = cells[int(np.argmin(d))]
    return int(x), int(y)


def _nearest_material(world, pos, material: str) -> tuple[int, int] | None:
    return _nearest(np.argwhere(world._mat_map == world._mat_ids[material]), pos)


def _nearest_object(world, pos, kinds: tuple[type, ...]) -> tuple[int, int] | None:
    cells = [obj.pos for obj in world.objects if isinstance(obj, kinds)]
    return _nearest(np.array(cells).reshape(-1, 2), pos)


def _can(inventory: dict, uses: dict) -> bool:
    return all(inventory[k] >= v for k, v in uses.items())


def _fight(world, player) -> int | None:
    """Face and hit an adjacent zombie or skeleton, if there is one."""
    for step, action in _MOVES.items():
        _, obj = world[(player.pos[0] + step[0], player.pos[1] + step[1])]
        if isinstance(obj, (objects.Zombie, objects.Skeleton)):
            return A["do"] if tuple(player.facing) == step else action
    return None


def _tech(env: CrafterEnv, rng: np.random.Generator) -> int:
    """Make the tools in order; gather what the next one needs (a table and furnace included)."""
    world, player = env.crafter._world, env.crafter._player
    inv, pos = player.inventory, player.pos
    fight = _fight(world, player)
    if fight is not None:
        return fight
    if inv["energy"] < 2 and not player.sleeping:
        return A["sleep"]
    if rng.random() < 0.08:
        return int(rng.integers(len(ACTION_NAMES)))
    facing = world[(pos[0] + player.facing[0], pos[1] + player.facing[1])]
    if facing[0] in ("water", "lava") and inv["stone"] > 4 and rng.random() < 0.5:
        return A["place_stone"]
    if inv["sapling"] and facing == ("grass", None) and rng.random() < 0.3:
        return A["place_plant"]
    dig = {"tree"} | ({"stone", "coal"} if inv["wood_pickaxe"] else set())
    if inv["stone_pickaxe"]:
        dig.add("iron")
    if inv["food"] < 5:
        cow = _nearest_object(world, pos, (objects.Cow,))
        if cow is not None:
            return _step_toward(world, player, cow, rng, dig)
    goal = "water" if inv["drink"] < 4 else None
    tool = next((t for t in reversed(_TOOLS) if not inv[t]), None)
    if goal is None and tool is not None:
        info = constants.make[tool]
        near = _near_materials(world, pos)
        need = dict(info["uses"])
        for station in info["nearby"]:
            if station not in near:
                for item, amount in constants.place[station]["uses"].items():
                    need[item] = need.get(item, 0) + amount
        missing = [item for item, amount in need.items() if inv[item] < amount]
        if missing:
            goal = {"wood": "tree"}.get(missing[0], missing[0])
        else:
            for station in info["nearby"]:
                if station not in near:
                    # The facing cell may not take it: then a random move before trying again.
                    return A[f"place_{station}"] if rng.random() < 0.7 else _random_move(rng)
            return A[f"make_{tool}"]
    if goal is None:
        goal = "diamond" if inv["iron_pickaxe"] else "tree"
    target = _nearest_material(world, pos, goal)
    if target is None:
        return _random_move(rng)
    return _step_toward(world, player, target, rng, dig)


def _hunter(env: CrafterEnv, rng: np.random.Generator) -> int:
    world, player = env.crafter._world, env.crafter._player
    inv = player.inventory
    near = _near_materials(world, player.pos)
    if not inv["wood_sword"] and "table" in near and inv["wood"]:
        return A["make_wood_sword"]
    if inv["wood"] < 3 and not inv["wood_sword"]:
        target = _nearest_material(world, player.pos, "tree")
    elif not inv["wood_sword"] and "table" not in near:
        return A["place_table"] if rng.random() < 0.7 else _random_move(rng)
    else:
        kinds = (objects.Zombie, objects.Skeleton) if rng.random() < 0.8 else (objects.Cow,)
        target = _nearest_object(world, player.pos, kinds)
    if target is None or rng.random() < 0.1:
        return _random_move(rng)
    return _step_toward(world, player, target, rng, {"tree"})


def _farmer(env: CrafterEnv, rng: np.random.Generator) -> int:
    world, player = env.crafter._world, env.crafter._player
    inv = player.inventory
    plant = _nearest_object(world, player.pos, (objects.Plant,))
    if plant is not None:
        ripe = [o for o in world.objects if isinstance(o, objects.Plant) and o.ripe]
        if ripe:
            return _step_toward(world, player, tuple(int(v) for v in ripe[0].pos), rng, set())
        water = _nearest_material(world, player.pos, "water")
        if inv["drink"] < 3 and water is not None:
            return _step_toward(world, player, water, rng, set())
        # Stay near the plant (within the update radius, so that it grows), sleeping when tired.
        if inv["energy"] < 3:
            return A["sleep"]
        far = abs(plant[0] - player.pos[0]) + abs(plant[1] - player.pos[1]) > 3
        return _step_toward(world, player, plant, rng, set()) if far else A["noop"]
    facing = world[(player.pos[0] + player.facing[0], player.pos[1] + player.facing[1])]
    if inv["sapling"] and facing == ("grass", None):
        return A["place_plant"]
    if facing[0] == "grass":
        return A["do"]  # collect a sapling (probability 0.1)
    return _random_move(rng)


def _lava(env: CrafterEnv, rng: np.random.Generator) -> int:
    world, player = env.crafter._world, env.crafter._player
    target = _nearest_material(world, player.pos, "lava")
    if target is None or rng.random() < 0.2:
        return int(rng.integers(len(ACTION_NAMES)))
    dx, dy = target[0] - player.pos[0], target[1] - player.pos[1]
    if abs(dx) + abs(dy) == 1:
        return _MOVES[(int(dx), int(dy))]
    return _step_toward(world, player, target, rng, {"tree"})


def choose(policy: str, env: CrafterEnv, rng: np.random.Generator) -> int:
    """The action scripted player ``policy`` (one of `POLICIES`) takes in ``env``'s current game."""
    if policy == "tech":
        return _tech(env, rng)
    if policy == "hunter":
        return _hunter(env, rng)
    if policy == "farmer":
        return _farmer(env, rng)
    if policy == "lava":
        return _lava(env, rng)
    if policy == "idle":
        return A["sleep"] if rng.random() < 0.3 else A["noop"]
    if policy == "random":
        return int(rng.integers(len(ACTION_NAMES)))
    raise ValueError(f"unknown policy {policy!r}; known: {POLICIES}")


def crafter_row_state(env: CrafterEnv) -> dict:
    """The hidden state of ``env``'s game in the form of `CompiledBatch.row_state`."""
    game = env.crafter
    world, player = game._world, game._player
    objs = []
    for obj in world.objects:
        kind = type(obj).__name__.lower()
        extra: tuple[int, ...] = ()
        if isinstance(obj, objects.Zombie):
            extra = (obj.cooldown,)
        elif isinstance(obj, objects.Skeleton):
            extra = (obj.reload,)
        elif isinstance(obj, objects.Plant):
            extra = (obj.grown,)
        elif isinstance(obj, objects.Arrow):
            extra = tuple(obj.facing.tolist())
        x, y = obj.pos.tolist()
        objs.append((kind, x, y, int(obj.health), *extra))
    rng = world.random.get_state()
    return {
        "materials": world._mat_map.copy(),
        "objects": objs,
        "inventory": dict(player.inventory),
        "achievements": dict(player.achievements),
        "facing": (int(player.facing[0]), int(player.facing[1])),
        "sleeping": bool(player.sleeping),
        "last_health": int(player._last_health),
        "hunger": float(player._hunger),
        "thirst": float(player._thirst),
        "fatigue": int(player._fatigue),
        "recover": float(player._recover),
        "step": int(game._step),
        "daylight": float(world.daylight),
        "chunks": [tuple(map(int, key)) for key in world._chunks],
        "rng": (rng[1], int(rng[2])),
    }


def assert_same_state(engine: dict, reference: dict, where: object) -> None:
    """Every entry of two row states equal, naming the first that is not."""
    assert engine.keys() == reference.keys()
    for name in reference:
        a, b = engine[name], reference[name]
        if name == "materials":
            same = np.array_equal(a, b)
        elif name == "rng":
            same = np.array_equal(a[0], b[0]) and a[1] == b[1]
        else:
            same = a == b
        assert same, f"{where}: {name} differs:\nengine    {a}\nreference {b}"
