"""crafter's rules and geometry as numeric tables for the compiled engine.

Everything data-driven in crafter (actions, items, walkable materials, collect / place / make recipes,
achievements) is read from ``crafter.constants`` here, so the kernels hold no recipe of their own; what
crafter hard-codes in ``objects.py`` / ``env.py`` (which material a move into kills, which items make a
sword, the balancing parameters) is looked up by name from the same constants. `Rules` is a namedtuple of
arrays and ints, which numba passes to compiled functions as one argument.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from crafter import constants, objects

from ..crafter import ACTION_NAMES, DIRECTIONS, ID_NAMES, ITEMS, MATERIALS
from ..tasks import ACHIEVEMENTS

KINDS: tuple[str, ...] = ("player", "cow", "zombie", "skeleton", "arrow", "plant")
"""Object kinds of the engine, in crafter's semantic-id order (`rlgpt.envs.crafter.ID_NAMES`)."""
PLAYER, COW, ZOMBIE, SKELETON, ARROW, PLANT = range(len(KINDS))

CHUNK: tuple[int, int] = (12, 12)
"""Chunk size of crafter's world (``crafter.Env`` builds ``engine.World(area, materials, (12, 12))``)."""

# Action kinds of the player's update branches.
NOOP, MOVE, DO, SLEEP, PLACE, MAKE = range(6)

# crafter.Env._balance_chunk's three calls: kind, material, span_dist, despawn_dist, spawn_prob,
# despawn_prob. Their target functions are written out in kernels._balance_chunk.
BALANCE = (
    (ZOMBIE, "grass", 6, 0, 0.3, 0.4),
    (SKELETON, "path", 7, 7, 0.1, 0.1),
    (COW, "grass", 5, 5, 0.01, 0.1),
)
# Health each kind starts with (crafter's constructors); the player's health is its inventory's.
START_HEALTH = {COW: 3, ZOMBIE: 5, SKELETON: 3, ARROW: 0, PLANT: 1}


class Rules(NamedTuple):
    """crafter's rules as tables the kernels index."""

    act_kind: np.ndarray
    """int64 [actions]: NOOP, MOVE, DO, SLEEP, PLACE or MAKE."""
    act_arg: np.ndarray
    """int64 [actions]: direction index (MOVE), place recipe (PLACE) or make recipe (MAKE)."""
    dirs: np.ndarray
    """int64 [4, 2]: crafter's ``Object.all_dirs`` (left, right, up, down), also the facing order."""
    item_max: np.ndarray
    """int64 [items]."""
    item_init: np.ndarray
    """int64 [items]."""
    walk: np.ndarray
    """bool [3, materials + 1]: walkable material ids of creatures, of the player (+ lava), of arrows
    (+ water, lava); id 0 is outside the world."""
    collect_ok: np.ndarray
    """bool [materials + 1]: the material can be collected."""
    collect_req: np.ndarray
    """int64 [materials + 1, r, 2]: (item, amount) required, item -1 = none."""
    collect_recv: np.ndarray
    """int64 [materials + 1, r, 3]: (item, amount, achievement) received, item -1 = none."""
    collect_leaves: np.ndarray
    """int64 [materials + 1]: material left behind."""
    collect_prob: np.ndarray
    """float64 [materials + 1]: probability of receiving (crafter compares ``uniform() <= p``)."""
    place_uses: np.ndarray
    """int64 [recipes, u, 2]: (item, amount) used, item -1 = none."""
    place_where: np.ndarray
    """bool [recipes, materials + 1]: target materials allowed."""
    place_kind: np.ndarray
    """int64 [recipes]: object kind placed, -1 for a material."""
    place_mat: np.ndarray
    """int64 [recipes]: material placed."""
    place_ach: np.ndarray
    """int64 [recipes]: achievement counted."""
    make_nearby: np.ndarray
    """int64 [recipes, q]: materials needed in the 3x3 around the player, -1 = none."""
    make_uses: np.ndarray
    """int64 [recipes, u, 2]: (item, amount) used, item -1 = none."""
    make_item: np.ndarray
    """int64 [recipes]: item made."""
    make_gives: np.ndarray
    """int64 [recipes]: how many."""
    make_ach: np.ndarray
    """int64 [recipes]: achievement counted."""
    balance: np.ndarray
    """int64 [3, 4]: kind, material, span_dist, despawn_dist of `BALANCE`'s three calls."""
    balance_prob: np.ndarray
    """float64 [3, 2]: spawn_prob, despawn_prob of the same calls."""
    start_health: np.ndarray
    """int64 [kinds]: health of a new object of each kind."""
    # Names crafter's objects.py hard-codes.
    water: int
    lava: int
    grass: int
    path: int
    table: int
    furnace: int
    health: int
    food: int
    drink: int
    energy: int
    swords: np.ndarray
    """int64 [3, 2]: (item, damage) of the wood, stone and iron sword."""
    wake_up: int
    eat_plant: int
    eat_cow: int
    defeat_zombie: int
    defeat_skeleton: int
    obj_id_base: int
    """Semantic id of the first object kind (the player); kind k has id ``obj_id_base + k``."""


class Geometry(NamedTuple):
    """One configuration's sizes (world area, view), as the kernels need them."""

    area_w: int
    area_h: int
    chunks: int
    """Chunks of the world (a chunk's id is ``(x // CHUNK[0]) * chunks_y + y // CHUNK[1]``)."""
    chunks_y: int
    radius: int
    """Objects update when their L1 distance to the player is below this (``2 * max(view)``)."""
    view_w: int
    view_h: int
    noise: int
    """Doubles crafter's renderer draws at night (the night noise of its local view)."""


def _pad(values: list[int], width: int) -> list[int]:
    return values + [-1] * (width - len(values))


def _pairs(entries: dict[str, int], width: int, index: dict[str, int]) -> list[list[int]]:
    rows = [[index[name], int(amount)] for name, amount in entries.items()]
    return rows + [[-1, 0]] * (width - len(rows))


def make_rules() -> Rules:
    """crafter's rules as tables, read from ``crafter.constants``."""
    mat = {name: i + 1 for i, name in enumerate(MATERIALS)}
    item = {name: i for i, name in enumerate(ITEMS)}
    ach = {name: i for i, name in enumerate(ACHIEVEMENTS)}
    n_mat = len(MATERIALS) + 1
    facing_names = [name for _, name in DIRECTIONS]
    dirs = [tuple(d) for d in objects.Object.all_dirs.fget(None)]
    if dirs != [d for d, _ in DIRECTIONS]:
        raise RuntimeError("crafter's Object.all_dirs no longer matches the facing order of CrafterEnv")
    place_names, make_names = list(constants.place), list(constants.make)

    act_kind, act_arg = [], []
    for name in ACTION_NAMES:
        if name == "noop":
            act_kind.append(NOOP), act_arg.append(0)
        elif name.startswith("move_"):
            act_kind.append(MOVE), act_arg.append(facing_names.index(name[len("move_") :]))
        elif name == "do":
            act_kind.append(DO), act_arg.append(0)
        elif name == "sleep":
            act_kind.append(SLEEP), act_arg.append(0)
        elif name.startswith("place_"):
            act_kind.append(PLACE), act_arg.append(place_names.index(name[len("place_") :]))
        elif name.startswith("make_"):
            act_kind.append(MAKE), act_arg.append(make_names.index(name[len("make_") :]))
        else:
            raise RuntimeError(f"crafter action {name!r} has no compiled counterpart")

    walk = np.zeros((3, n_mat), bool)
    for row, names in enumerate(
        (constants.walkable, objects.Player.walkable.fget(None), objects.Arrow.walkable)
    ):
        for name in names:
            walk[row, mat[name]] = True

    width = max(max(len(c["require"]), len(c["receive"])) for c in constants.collect.values())
    collect_ok = np.zeros(n_mat, bool)
    collect_req = np.full((n_mat, width, 2), -1, np.int64)
    collect_recv = np.full((n_mat, width, 3), -1, np.int64)
    collect_leaves = np.zeros(n_mat, np.int64)
    collect_prob = np.ones(n_mat)
    for name, info in constants.collect.items():
        m = mat[name]
        collect_ok[m] = True
        collect_req[m] = _pairs(info["require"], width, item)
        recv = [[item[k], int(v), ach[f"collect_{k}"]] for k, v in info["receive"].items()]
        collect_recv[m] = recv + [[-1, 0, -1]] * (width - len(recv))
        collect_leaves[m] = mat[info["leaves"]]
        collect_prob[m] = info.get("probability", 1)

    uses = max(len(r["uses"]) for r in (*constants.place.values(), *constants.make.values()))
    place_where = np.zeros((len(place_names), n_mat), bool)
    place_kind, place_mat = [], []
    for p, name in enumerate(place_names):
        info = constants.place[name]
        for where in info["where"]:
            place_where[p, mat[where]] = True
        place_kind.append(KINDS.index(name) if info["type"] == "object" else -1)
        place_mat.append(mat[name] if info["type"] == "material" else 0)
    nearby = max(len(r["nearby"]) for r in constants.make.values())

    def i64(rows: object) -> np.ndarray:
        return np.asarray(rows, np.int64)

    if tuple(ID_NAMES[ID_NAMES.index(KINDS[0]) :]) != KINDS:
        raise RuntimeError(f"object ids of CrafterEnv {ID_NAMES} no longer match the engine's kinds {KINDS}")
    return Rules(
        act_kind=i64(act_kind),
        act_arg=i64(act_arg),
        dirs=i64(dirs),
        item_max=i64([constants.items[n]["max"] for n in ITEMS]),
        item_init=i64([constants.items[n]["initial"] for n in ITEMS]),
        walk=walk,
        collect_ok=collect_ok,
        collect_req=collect_req,
        collect_recv=collect_recv,
        collect_leaves=collect_leaves,
        collect_prob=collect_prob,
        place_uses=i64([_pairs(constants.place[n]["uses"], uses, item) for n in place_names]),
        place_where=place_where,
        place_kind=i64(place_kind),
        place_mat=i64(place_mat),
        place_ach=i64([ach[f"place_{n}"] for n in place_names]),
        make_nearby=i64([_pad([mat[m] for m in constants.make[n]["nearby"]], nearby) for n in make_names]),
        make_uses=i64([_pairs(constants.make[n]["uses"], uses, item) for n in make_names]),
        make_item=i64([item[n] for n in make_names]),
        make_gives=i64([constants.make[n]["gives"] for n in make_names]),
        make_ach=i64([ach[f"make_{n}"] for n in make_names]),
        balance=i64([[k, mat[m], span, despan] for k, m, span, despan, _, _ in BALANCE]),
        balance_prob=np.array([[sp, dp] for *_, sp, dp in BALANCE], np.float64),
        start_health=i64([0] + [START_HEALTH[k] for k in range(1, len(KINDS))]),
        water=mat["water"],
        lava=mat["lava"],
        grass=mat["grass"],
        path=mat["path"],
        table=mat["table"],
        furnace=mat["furnace"],
        health=item["health"],
        food=item["food"],
        drink=item["drink"],
        energy=item["energy"],
        swords=i64([[item["wood_sword"], 2], [item["stone_sword"], 3], [item["iron_sword"], 5]]),
        wake_up=ach["wake_up"],
        eat_plant=ach["eat_plant"],
        eat_cow=ach["eat_cow"],
        defeat_zombie=ach["defeat_zombie"],
        defeat_skeleton=ach["defeat_skeleton"],
        obj_id_base=ID_NAMES.index(KINDS[0]),
    )


def make_geometry(
    area: tuple[int, int], view: tuple[int, int], size: tuple[int, int] = (64, 64)
) -> Geometry:
    """The sizes of crafter with world ``area``, ``view`` grid and image ``size``, as `CrafterEnv` has them
    (its local view grid, update radius and night-noise shape)."""
    unit = np.asarray(size) // np.asarray(view)
    item_rows = int(np.ceil(len(ITEMS) / view[0]))
    grid = np.array([view[0], view[1] - item_rows])
    chunks_y = -(-area[1] // CHUNK[1])
    return Geometry(
        area_w=int(area[0]),
        area_h=int(area[1]),
        chunks=-(-area[0] // CHUNK[0]) * chunks_y,
        chunks_y=chunks_y,
        radius=2 * int(max(view)),
        view_w=int(grid[0]),
        view_h=int(grid[1]),
        noise=int(np.prod(grid * unit)),
    )


RULES: Rules = make_rules()
"""crafter's rules; the kernels read these tables as compile-time constants."""
