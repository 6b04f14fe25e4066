"""The compiled game: crafter's step and reset over many games held in arrays.

Every function mirrors one piece of crafter (``objects.py``, ``engine.World``, ``env.Env``, CrafterEnv's
glue) statement by statement, in crafter's order, with crafter's random draws: that order *is* the game,
since every object shares the world's RNG. Comments name the crafter code each part follows and say why
where the array form differs from it.

How crafter's object list is held: ``World._objects`` is an append-only list (removed objects leave
``None``) and ``World.objects`` is a snapshot of the live ones in insertion order. Here a game's objects
are records ``objs[game, i]`` in insertion order, appended at ``game[e, NOBJ]``; removal only marks a
record (and clears its cell of ``omap``), and the marked records are squeezed out at the start of the next
step. So the records ``0 .. n-1`` at the start of a step are exactly crafter's snapshot: objects removed
during the step stay in it (crafter goes on updating an object that removed itself: a zombie killed this
step still moves and bites, a dead skeleton can still shoot), and objects added during the step (arrows,
saplings) are not in it. The player is record 0: it is added first and never removed. ``omap`` holds record
index + 1 (0: no object), so it orders objects as crafter's ``_obj_map`` does, which
`rlgpt.envs.crafter.in_world_order` sorts by.

crafter's chunks are a dict of sets keyed in the order a chunk first held an object; only those chunks are
ever balanced, in that order. The game record keeps that order; which objects a chunk holds is read off
their positions.

Performance notes (for the speed of both the compiled code and the compiling): whole-array assignments are
written as loops (numba's broadcasting assignment pulls in seconds of compiling for its error messages);
crafter's rule tables are module constants (numba freezes them into the compiled code;
`compiled_digest` guards against a stale on-disk cache), and helpers take plain arrays and ints. Passing a
tuple of arrays to a helper makes numba reference-count every array in it on every call, which cost more
than the game itself.
"""

from __future__ import annotations

import zlib
from typing import NamedTuple

import numpy as np
from numba import njit

from .. import mt19937 as mt
from .. import worldgen
from ..tasks import ACHIEVEMENTS
from .rules import (
    ARROW,
    CHUNK,
    COW,
    DO,
    ITEMS,
    MAKE,
    MOVE,
    NOOP,
    PLACE,
    PLANT,
    PLAYER,
    RULES,
    SKELETON,
    SLEEP,
    ZOMBIE,
)

# crafter's rules as compile-time constants (see rules.Rules for what each table holds).
_ACT_KIND = RULES.act_kind
_ACT_ARG = RULES.act_arg
_DIRS = RULES.dirs
_ITEM_MAX = RULES.item_max
_ITEM_INIT = RULES.item_init
_WALK = RULES.walk
# Constants passed to helpers are numpy scalars: numba compiles a separate copy of a function for every
# distinct plain-int (literal) argument it is called with, which multiplied the compile time.
_CREATURE, _PLAYER_WALK, _ARROW_WALK = np.int64(0), np.int64(1), np.int64(2)  # rows of _WALK
_COLLECT_OK = RULES.collect_ok
_COLLECT_REQ = RULES.collect_req
_COLLECT_RECV = RULES.collect_recv
_COLLECT_LEAVES = RULES.collect_leaves
_COLLECT_PROB = RULES.collect_prob
_PLACE_USES = RULES.place_uses
_PLACE_WHERE = RULES.place_where
_PLACE_KIND = RULES.place_kind
_PLACE_MAT = RULES.place_mat
_PLACE_ACH = RULES.place_ach
_MAKE_NEARBY = RULES.make_nearby
_MAKE_USES = RULES.make_uses
_MAKE_ITEM = RULES.make_item
_MAKE_GIVES = RULES.make_gives
_MAKE_ACH = RULES.make_ach
_BALANCE = RULES.balance
_BALANCE_PROB = RULES.balance_prob
_START_HEALTH = RULES.start_health
_SWORDS = RULES.swords
_WATER, _LAVA, _GRASS, _PATH = RULES.water, RULES.lava, RULES.grass, RULES.path
_TABLE, _FURNACE = RULES.table, RULES.furnace
_WAKE_UP, _EAT_PLANT, _EAT_COW = RULES.wake_up, RULES.eat_plant, RULES.eat_cow
_DEFEAT_ZOMBIE, _DEFEAT_SKELETON = RULES.defeat_zombie, RULES.defeat_skeleton
_OBJ_ID_BASE = RULES.obj_id_base
_CHUNK_W, _CHUNK_H = CHUNK
_PLAYER_KIND, _ARROW_KIND = np.int64(PLAYER), np.int64(ARROW)
_PLAYER_RECORD = np.int64(0)
_N_DIRS = np.int64(4)
_LONG_AXIS = np.bool_(True)
_ARROW_DAMAGE, _TRAMPLE_DAMAGE = np.int64(2), np.int64(1)
_SIMPLEX_SEEDS = np.int64(2**31 - 1)  # worldgen draws the simplex seed with randint(0, 2**31 - 1)
_ZOMBIES, _SKELETONS, _COWS = np.int64(0), np.int64(1), np.int64(2)  # rows of _BALANCE

# Fields of an object record (int32).
KIND, X, Y, HEALTH, COUNTER, FX, FY, REMOVED = range(8)
N_FIELDS = 8
"""``COUNTER`` is a zombie's cooldown, a skeleton's reload, a plant's growth; ``FX, FY`` an arrow's facing."""

# Columns of a game's int64 record. LAST_HEALTH is the player's ``_last_health`` (wake up when hurt),
# GAME_LAST_HEALTH the env's (reward). Then the inventory (health included), achievement counts, the
# achievements already rewarded (``Env._unlocked``), which chunks are keys of crafter's chunk dict, and
# those keys in the dict's order.
NOBJ, NCHUNKS, FACE_X, FACE_Y, SLEEPING, LAST_HEALTH, FATIGUE, GAME_LAST_HEALTH, STEP = range(9)
INV = 9
ACH = INV + len(ITEMS)
UNLOCKED = ACH + len(ACHIEVEMENTS)
CHUNK_SEEN = UNLOCKED + len(ACHIEVEMENTS)
_HEALTH = INV + RULES.health
_FOOD = INV + RULES.food
_DRINK = INV + RULES.drink
_ENERGY = INV + RULES.energy
_MAX_ENERGY = RULES.item_max[RULES.energy]
_N_ITEMS = len(ITEMS)
_N_ACH = len(ACHIEVEMENTS)
# Columns of a game's float64 record: crafter's hunger, thirst and recover go up by 0.5 while asleep.
HUNGER, THIRST, RECOVER, DAYLIGHT = range(4)
N_FLOAT = 4


class State(NamedTuple):
    """All games' state (row = game)."""

    mat: np.ndarray
    """uint8 [games, area_w, area_h]: material ids (crafter's ``_mat_map``)."""
    omap: np.ndarray
    """int32 [games, area_w, area_h]: object record index + 1, 0 = none (crafter's ``_obj_map``)."""
    objs: np.ndarray
    """int32 [games, capacity, N_FIELDS]: object records in insertion order."""
    game: np.ndarray
    """int64 [games, CHUNK_SEEN + 2 * chunks]: the columns named above."""
    flt: np.ndarray
    """float64 [games, N_FLOAT]: hunger, thirst, recover, daylight."""
    key: np.ndarray
    """uint32 [games, 624]: the world RNG's MT19937 key."""
    pos: np.ndarray
    """int64 [games]: the world RNG's position in its key."""


def new_state(games: int, area: tuple[int, int], chunks: int) -> State:
    """Zeroed state for ``games`` games (every one must be reset before it is stepped)."""
    w, h = area
    # Live objects hold distinct cells, and a step adds at most one object per free cell, so a step never
    # holds more than twice the cells in records.
    capacity = 2 * w * h + 1
    key, pos = mt.new_states(games)
    return State(
        mat=np.zeros((games, w, h), np.uint8),
        omap=np.zeros((games, w, h), np.int32),
        objs=np.zeros((games, capacity, N_FIELDS), np.int32),
        game=np.zeros((games, CHUNK_SEEN + 2 * chunks), np.int64),
        flt=np.zeros((games, N_FLOAT), np.float64),
        key=key,
        pos=pos,
    )


def _digest() -> int:
    """CRC of everything this module compiles in as a constant."""
    crc = zlib.crc32(repr((CHUNK, len(ITEMS), len(ACHIEVEMENTS))).encode())
    for value in RULES:
        crc = zlib.crc32(np.ascontiguousarray(value).tobytes() + np.asarray(value).dtype.str.encode(), crc)
    return crc


RULES_DIGEST = _digest()
"""Digest of the rule tables this process computed from crafter's data."""


@njit(cache=True)
def compiled_digest():  # pragma: no cover - compiled
    """`RULES_DIGEST` as it was when the kernels were compiled: numba's on-disk cache keys on this file
    only, so tables computed differently (another crafter) would otherwise run with stale constants."""
    return RULES_DIGEST


# ------------------------------------------------------------------ world (crafter's engine.World)


@njit(cache=True)
def _mat_at(mat, e, x, y):  # pragma: no cover - compiled
    """Material id at (x, y), 0 (crafter's None) outside the world."""
    if 0 <= x < mat.shape[1] and 0 <= y < mat.shape[2]:
        return np.int64(mat[e, x, y])
    return 0


@njit(cache=True)
def _obj_at(omap, e, x, y):  # pragma: no cover - compiled
    """Record index of the object at (x, y), -1 for none or outside."""
    if 0 <= x < omap.shape[1] and 0 <= y < omap.shape[2]:
        return np.int64(omap[e, x, y]) - 1
    return -1


@njit(cache=True)
def _is_free(mat, omap, e, x, y, walk):  # pragma: no cover - compiled
    """``Object.is_free``: inside, no object, a material of row ``walk`` of the walkable table."""
    if 0 <= x < mat.shape[1] and 0 <= y < mat.shape[2]:
        return omap[e, x, y] == 0 and _WALK[walk, mat[e, x, y]]
    return False


@njit(cache=True)
def _note_chunk(omap, game, e, x, y):  # pragma: no cover - compiled
    """An object entered the chunk of (x, y): it becomes a key of crafter's chunk dict if it was not."""
    chunks_y = (omap.shape[2] + _CHUNK_H - 1) // _CHUNK_H
    cid = (x // _CHUNK_W) * chunks_y + y // _CHUNK_H
    if not game[e, CHUNK_SEEN + cid]:
        game[e, CHUNK_SEEN + cid] = 1
        chunks = (game.shape[1] - CHUNK_SEEN) // 2
        game[e, CHUNK_SEEN + chunks + game[e, NCHUNKS]] = cid
        game[e, NCHUNKS] += 1


@njit(cache=True)
def _add(omap, objs, game, e, kind, x, y):  # pragma: no cover - compiled
    """``World.add`` of a new object of ``kind`` (crafter's constructor values); returns its record."""
    i = game[e, NOBJ]
    objs[e, i, KIND] = kind
    objs[e, i, X] = x
    objs[e, i, Y] = y
    objs[e, i, HEALTH] = _START_HEALTH[kind]
    objs[e, i, COUNTER] = 0
    objs[e, i, FX] = 0
    objs[e, i, FY] = 0
    objs[e, i, REMOVED] = 0
    omap[e, x, y] = i + 1
    _note_chunk(omap, game, e, x, y)
    game[e, NOBJ] = i + 1
    return i


@njit(cache=True)
def _remove(omap, objs, e, i):  # pragma: no cover - compiled
    """``World.remove``: a second removal does nothing; the record stays until the next step starts."""
    if objs[e, i, REMOVED]:
        return
    omap[e, objs[e, i, X], objs[e, i, Y]] = 0
    objs[e, i, REMOVED] = 1


@njit(cache=True)
def _move(mat, omap, objs, game, e, i, dx, dy, walk):  # pragma: no cover - compiled
    """``Object.move``: True when the target is free, even for a removed object, which stays put."""
    x, y = objs[e, i, X], objs[e, i, Y]
    tx, ty = x + dx, y + dy
    if not _is_free(mat, omap, e, tx, ty, walk):
        return False
    if not objs[e, i, REMOVED]:
        omap[e, tx, ty] = omap[e, x, y]
        omap[e, x, y] = 0
        _note_chunk(omap, game, e, tx, ty)
        objs[e, i, X] = tx
        objs[e, i, Y] = ty
    return True


@njit(cache=True)
def _hurt(objs, game, e, i, amount):  # pragma: no cover - compiled
    """``obj.health -= amount`` (the setter keeps it >= 0); the player's health is its inventory's."""
    if i == 0:
        game[e, _HEALTH] = max(0, game[e, _HEALTH] - amount)
    else:
        objs[e, i, HEALTH] = max(0, objs[e, i, HEALTH] - amount)


@njit(cache=True)
def _compact(omap, objs, game, e):  # pragma: no cover - compiled
    """Drop the records of removed objects, keeping the order (crafter's snapshot skips its ``None``)."""
    n = game[e, NOBJ]
    j = 0
    for i in range(n):
        if objs[e, i, REMOVED]:
            continue
        if j != i:
            for f in range(N_FIELDS):
                objs[e, j, f] = objs[e, i, f]
            omap[e, objs[e, j, X], objs[e, j, Y]] = j + 1
        j += 1
    game[e, NOBJ] = j


@njit(cache=True)
def _toward(x, y, tx, ty, long_axis):  # pragma: no cover - compiled
    """``Object.toward``: a unit step toward (tx, ty) along the long (or short) axis, (0, 0) possible."""
    ox, oy = tx - x, ty - y
    if (abs(ox) > abs(oy)) if long_axis else (abs(ox) <= abs(oy)):
        return np.sign(ox), 0
    return 0, np.sign(oy)


# ------------------------------------------------------------------ the player (crafter's objects.Player)


@njit(cache=True)
def _damage(game, e):  # pragma: no cover - compiled
    """The damage the player's ``do`` deals: 1, or the best sword's."""
    damage = 1
    for s in range(_SWORDS.shape[0]):
        if game[e, INV + _SWORDS[s, 0]] > 0:
            damage = max(damage, _SWORDS[s, 1])
    return damage


@njit(cache=True)
def _do_object(objs, game, flt, e, o):  # pragma: no cover - compiled
    """``Player._do_object`` on record ``o``."""
    damage = _damage(game, e)
    kind = objs[e, o, KIND]
    if kind == PLANT:
        if objs[e, o, COUNTER] > 300:  # Plant.ripe
            objs[e, o, COUNTER] = 0
            game[e, _FOOD] += 4
            game[e, ACH + _EAT_PLANT] += 1
    elif kind == ZOMBIE:
        _hurt(objs, game, e, o, damage)
        if objs[e, o, HEALTH] <= 0:
            game[e, ACH + _DEFEAT_ZOMBIE] += 1
    elif kind == SKELETON:
        _hurt(objs, game, e, o, damage)
        if objs[e, o, HEALTH] <= 0:
            game[e, ACH + _DEFEAT_SKELETON] += 1
    elif kind == COW:
        _hurt(objs, game, e, o, damage)
        if objs[e, o, HEALTH] <= 0:
            game[e, _FOOD] += 6
            game[e, ACH + _EAT_COW] += 1
            flt[e, HUNGER] = 0.0


@njit(cache=True)
def _do_material(mat, game, flt, key, pos, e, tx, ty, m):  # pragma: no cover - compiled
    """``Player._do_material``: the target turns into what it leaves before the (always drawn) roll."""
    if m == _WATER:
        flt[e, THIRST] = 0.0
    if not _COLLECT_OK[m]:
        return
    for r in range(_COLLECT_REQ.shape[1]):
        item = _COLLECT_REQ[m, r, 0]
        if item >= 0 and game[e, INV + item] < _COLLECT_REQ[m, r, 1]:
            return
    mat[e, tx, ty] = _COLLECT_LEAVES[m]
    if mt.uniform(key, pos, e) <= _COLLECT_PROB[m]:
        for r in range(_COLLECT_RECV.shape[1]):
            item = _COLLECT_RECV[m, r, 0]
            if item >= 0:
                game[e, INV + item] += _COLLECT_RECV[m, r, 1]
                game[e, ACH + _COLLECT_RECV[m, r, 2]] += 1


@njit(cache=True)
def _place(mat, omap, objs, game, e, p, tx, ty, m):  # pragma: no cover - compiled
    """``Player._place`` of recipe ``p`` on the target cell (material ``m``, 0 outside)."""
    if _obj_at(omap, e, tx, ty) >= 0:
        return
    if not _PLACE_WHERE[p, m]:
        return
    for u in range(_PLACE_USES.shape[1]):
        item = _PLACE_USES[p, u, 0]
        if item >= 0 and game[e, INV + item] < _PLACE_USES[p, u, 1]:
            return
    for u in range(_PLACE_USES.shape[1]):
        item = _PLACE_USES[p, u, 0]
        if item >= 0:
            game[e, INV + item] -= _PLACE_USES[p, u, 1]
    if _PLACE_KIND[p] < 0:
        mat[e, tx, ty] = _PLACE_MAT[p]
    else:
        _add(omap, objs, game, e, _PLACE_KIND[p], tx, ty)
    game[e, ACH + _PLACE_ACH[p]] += 1


@njit(cache=True)
def _near(mat, e, x, y, material):  # pragma: no cover - compiled
    """Whether ``material`` is in ``World.nearby(pos, 1)``'s materials.

    crafter slices ``_mat_map[x - 1: x + 2, y - 1: y + 2]``; at x or y = 0 the start is -1, which numpy
    reads from the far end, so the slice is empty and nothing is near. The bounds follow Python's slicing.
    """
    w, h = mat.shape[1], mat.shape[2]
    x0, x1 = x - 1, min(x + 2, w)
    y0, y1 = y - 1, min(y + 2, h)
    if x0 < 0:
        x0 = max(x0 + w, 0)
    if y0 < 0:
        y0 = max(y0 + h, 0)
    for cx in range(x0, x1):
        for cy in range(y0, y1):
            if mat[e, cx, cy] == material:
                return True
    return False


@njit(cache=True)
def _make(mat, objs, game, e, k):  # pragma: no cover - compiled
    """``Player._make`` of recipe ``k``."""
    px, py = objs[e, 0, X], objs[e, 0, Y]
    for q in range(_MAKE_NEARBY.shape[1]):
        need = _MAKE_NEARBY[k, q]
        if need >= 0 and not _near(mat, e, px, py, need):
            return
    for u in range(_MAKE_USES.shape[1]):
        item = _MAKE_USES[k, u, 0]
        if item >= 0 and game[e, INV + item] < _MAKE_USES[k, u, 1]:
            return
    for u in range(_MAKE_USES.shape[1]):
        item = _MAKE_USES[k, u, 0]
        if item >= 0:
            game[e, INV + item] -= _MAKE_USES[k, u, 1]
    game[e, INV + _MAKE_ITEM[k]] += _MAKE_GIVES[k]
    game[e, ACH + _MAKE_ACH[k]] += 1


@njit(cache=True)
def _update_player(mat, omap, objs, game, flt, key, pos, e, action):  # pragma: no cover - compiled
    """``Player.update`` with ``action``."""
    px, py = objs[e, 0, X], objs[e, 0, Y]
    tx, ty = px + game[e, FACE_X], py + game[e, FACE_Y]
    tmat = _mat_at(mat, e, tx, ty)
    tobj = _obj_at(omap, e, tx, ty)
    kind = _ACT_KIND[action]
    if game[e, SLEEPING]:
        if game[e, _ENERGY] < _MAX_ENERGY:
            kind = SLEEP
        else:
            game[e, SLEEPING] = 0
            game[e, ACH + _WAKE_UP] += 1
    if kind == NOOP:
        pass
    elif kind == MOVE:
        d = _ACT_ARG[action]
        game[e, FACE_X] = _DIRS[d, 0]
        game[e, FACE_Y] = _DIRS[d, 1]
        _move(mat, omap, objs, game, e, _PLAYER_RECORD, _DIRS[d, 0], _DIRS[d, 1], _PLAYER_WALK)
        if mat[e, objs[e, 0, X], objs[e, 0, Y]] == _LAVA:
            game[e, _HEALTH] = 0
    elif kind == DO and tobj >= 0:
        _do_object(objs, game, flt, e, tobj)
    elif kind == DO:
        _do_material(mat, game, flt, key, pos, e, tx, ty, tmat)
    elif kind == SLEEP:
        if game[e, _ENERGY] < _MAX_ENERGY:
            game[e, SLEEPING] = 1
    elif kind == PLACE:
        _place(mat, omap, objs, game, e, _ACT_ARG[action], tx, ty, tmat)
    elif kind == MAKE:
        _make(mat, objs, game, e, _ACT_ARG[action])
    sleeping = game[e, SLEEPING] != 0
    # _update_life_stats
    flt[e, HUNGER] += 0.5 if sleeping else 1.0
    if flt[e, HUNGER] > 25:
        flt[e, HUNGER] = 0.0
        game[e, _FOOD] -= 1
    flt[e, THIRST] += 0.5 if sleeping else 1.0
    if flt[e, THIRST] > 20:
        flt[e, THIRST] = 0.0
        game[e, _DRINK] -= 1
    if sleeping:
        game[e, FATIGUE] = min(game[e, FATIGUE] - 1, 0)
    else:
        game[e, FATIGUE] += 1
    if game[e, FATIGUE] < -10:
        game[e, FATIGUE] = 0
        game[e, _ENERGY] += 1
    if game[e, FATIGUE] > 30:
        game[e, FATIGUE] = 0
        game[e, _ENERGY] -= 1
    # _degen_or_regen_health, before the inventory is clamped (as in crafter)
    if game[e, _FOOD] > 0 and game[e, _DRINK] > 0 and (game[e, _ENERGY] > 0 or sleeping):
        flt[e, RECOVER] += 2.0 if sleeping else 1.0
    else:
        flt[e, RECOVER] -= 0.5 if sleeping else 1.0
    if flt[e, RECOVER] > 25:
        flt[e, RECOVER] = 0.0
        game[e, _HEALTH] = max(0, game[e, _HEALTH] + 1)
    if flt[e, RECOVER] < -15:
        flt[e, RECOVER] = 0.0
        game[e, _HEALTH] = max(0, game[e, _HEALTH] - 1)
    for i in range(_N_ITEMS):
        game[e, INV + i] = max(0, min(game[e, INV + i], _ITEM_MAX[i]))
    # _wake_up_when_hurt
    if game[e, _HEALTH] < game[e, LAST_HEALTH]:
        game[e, SLEEPING] = 0
    game[e, LAST_HEALTH] = game[e, _HEALTH]


# ------------------------------------------------------------------ creatures (crafter's objects.py)


@njit(cache=True)
def _update_cow(mat, omap, objs, game, key, pos, e, i):  # pragma: no cover - compiled
    if objs[e, i, HEALTH] <= 0:
        _remove(omap, objs, e, i)
    if mt.uniform(key, pos, e) < 0.5:
        d = mt.randint(key, pos, e, _N_DIRS)  # Object.random_dir
        _move(mat, omap, objs, game, e, i, _DIRS[d, 0], _DIRS[d, 1], _CREATURE)


@njit(cache=True)
def _update_zombie(mat, omap, objs, game, key, pos, e, i):  # pragma: no cover - compiled
    if objs[e, i, HEALTH] <= 0:
        _remove(omap, objs, e, i)
    px, py = objs[e, 0, X], objs[e, 0, Y]
    dist = abs(px - objs[e, i, X]) + abs(py - objs[e, i, Y])
    if dist <= 8 and mt.uniform(key, pos, e) < 0.9:
        long_axis = mt.uniform(key, pos, e) < 0.8
        dx, dy = _toward(objs[e, i, X], objs[e, i, Y], px, py, long_axis)
    else:
        d = mt.randint(key, pos, e, _N_DIRS)
        dx, dy = _DIRS[d, 0], _DIRS[d, 1]
    _move(mat, omap, objs, game, e, i, dx, dy, _CREATURE)
    dist = abs(px - objs[e, i, X]) + abs(py - objs[e, i, Y])
    if dist <= 1:
        if objs[e, i, COUNTER]:
            objs[e, i, COUNTER] -= 1
        else:
            _hurt(objs, game, e, _PLAYER_RECORD, 7 if game[e, SLEEPING] else 2)
            objs[e, i, COUNTER] = 5


@njit(cache=True)
def _update_skeleton(mat, omap, objs, game, key, pos, e, i):  # pragma: no cover - compiled
    if objs[e, i, HEALTH] <= 0:
        _remove(omap, objs, e, i)
    objs[e, i, COUNTER] = max(0, objs[e, i, COUNTER] - 1)
    px, py = objs[e, 0, X], objs[e, 0, Y]
    x, y = objs[e, i, X], objs[e, i, Y]
    dist = abs(px - x) + abs(py - y)
    if dist <= 3:
        long_axis = mt.uniform(key, pos, e) < 0.6
        dx, dy = _toward(x, y, px, py, long_axis)
        if _move(mat, omap, objs, game, e, i, -dx, -dy, _CREATURE):
            return
    # A failed retreat did not move the skeleton, so (x, y) is still its position.
    if dist <= 5 and mt.uniform(key, pos, e) < 0.5:
        # Skeleton._shoot(self.toward(self.player))
        dx, dy = _toward(x, y, px, py, _LONG_AXIS)
        if objs[e, i, COUNTER] > 0:
            return
        if dx == 0 and dy == 0:
            return
        if _is_free(mat, omap, e, x + dx, y + dy, _ARROW_WALK):
            a = _add(omap, objs, game, e, _ARROW_KIND, x + dx, y + dy)
            objs[e, a, FX] = dx
            objs[e, a, FY] = dy
            objs[e, i, COUNTER] = 4
    elif dist <= 8 and mt.uniform(key, pos, e) < 0.3:
        long_axis = mt.uniform(key, pos, e) < 0.6
        dx, dy = _toward(x, y, px, py, long_axis)
        _move(mat, omap, objs, game, e, i, dx, dy, _CREATURE)
    elif mt.uniform(key, pos, e) < 0.2:
        d = mt.randint(key, pos, e, _N_DIRS)
        _move(mat, omap, objs, game, e, i, _DIRS[d, 0], _DIRS[d, 1], _CREATURE)


@njit(cache=True)
def _update_arrow(mat, omap, objs, game, e, i):  # pragma: no cover - compiled
    fx, fy = np.int64(objs[e, i, FX]), np.int64(objs[e, i, FY])
    tx, ty = objs[e, i, X] + fx, objs[e, i, Y] + fy
    m = _mat_at(mat, e, tx, ty)
    o = _obj_at(omap, e, tx, ty)
    if o >= 0:
        _hurt(objs, game, e, o, _ARROW_DAMAGE)
        _remove(omap, objs, e, i)
    elif not _WALK[_ARROW_WALK, m]:
        _remove(omap, objs, e, i)
        if m == _TABLE or m == _FURNACE:
            mat[e, tx, ty] = _PATH
    else:
        _move(mat, omap, objs, game, e, i, fx, fy, _ARROW_WALK)


@njit(cache=True)
def _update_plant(omap, objs, game, e, i):  # pragma: no cover - compiled
    objs[e, i, COUNTER] += 1
    x, y = objs[e, i, X], objs[e, i, Y]
    hit = False
    for d in range(4):
        o = _obj_at(omap, e, x + _DIRS[d, 0], y + _DIRS[d, 1])
        if o >= 0:
            kind = objs[e, o, KIND]
            if kind == ZOMBIE or kind == SKELETON or kind == COW:
                hit = True
    if hit:
        _hurt(objs, game, e, i, _TRAMPLE_DAMAGE)
    if objs[e, i, HEALTH] <= 0:
        _remove(omap, objs, e, i)


# ------------------------------------------------------------------ the env (crafter's env.Env, CrafterEnv)


@njit(cache=True)
def _nth_cell(mat, e, xmin, xmax, ymin, ymax, material, n):  # pragma: no cover - compiled
    """The ``n``-th cell of ``material`` in the chunk, in the order ``xs[mask]`` lists them (x-major)."""
    for x in range(xmin, xmax):
        for y in range(ymin, ymax):
            if mat[e, x, y] == material:
                if n == 0:
                    return x, y
                n -= 1
    return -1, -1


@njit(cache=True)
def _balance_object(
    mat, omap, objs, game, key, pos, e, b, xmin, xmax, ymin, ymax, space, count, target_min, target_max
):  # pragma: no cover - compiled
    """``Env._balance_object`` for call ``b`` of `rules.BALANCE`; ``count`` creatures of its kind live in
    the chunk, ``space`` cells of its material."""
    kind, material = _BALANCE[b, 0], _BALANCE[b, 1]
    px, py = objs[e, 0, X], objs[e, 0, Y]
    if count < int(target_min) and mt.uniform(key, pos, e) < _BALANCE_PROB[b, 0]:
        x, y = _nth_cell(mat, e, xmin, xmax, ymin, ymax, material, mt.randint(key, pos, e, space))
        empty = omap[e, x, y] == 0
        away = abs(x - px) + abs(y - py) >= _BALANCE[b, 2]
        if empty and away:
            _add(omap, objs, game, e, kind, x, y)
    elif count > int(target_max) and mt.uniform(key, pos, e) < _BALANCE_PROB[b, 1]:
        n = mt.randint(key, pos, e, count)
        # creatures[n]: the chunk's creatures of this kind in insertion order (CrafterEnv's in_world_order).
        for i in range(game[e, NOBJ]):
            if objs[e, i, REMOVED] or objs[e, i, KIND] != kind:
                continue
            x, y = objs[e, i, X], objs[e, i, Y]
            if xmin <= x < xmax and ymin <= y < ymax:
                if n == 0:
                    if abs(x - px) + abs(y - py) >= _BALANCE[b, 3]:
                        _remove(omap, objs, e, i)
                    break
                n -= 1


@njit(cache=True)
def _chunk_census(mat, objs, game, e, xmin, xmax, ymin, ymax):  # pragma: no cover - compiled
    """Live zombies, skeletons and cows in the chunk, and its grass and path cells."""
    zombies = skeletons = cows = 0
    for i in range(game[e, NOBJ]):
        if objs[e, i, REMOVED]:
            continue
        x, y = objs[e, i, X], objs[e, i, Y]
        if xmin <= x < xmax and ymin <= y < ymax:
            kind = objs[e, i, KIND]
            if kind == ZOMBIE:
                zombies += 1
            elif kind == SKELETON:
                skeletons += 1
            elif kind == COW:
                cows += 1
    grass = path = 0
    for x in range(xmin, xmax):
        for y in range(ymin, ymax):
            m = mat[e, x, y]
            if m == _GRASS:
                grass += 1
            elif m == _PATH:
                path += 1
    return zombies, skeletons, cows, grass, path


@njit(cache=True)
def _balance(mat, omap, objs, game, flt, key, pos, e):  # pragma: no cover - compiled
    """``Env._balance_chunk`` over the chunk dict in its order.

    Balancing a chunk only adds or removes creatures of the kind being balanced inside that chunk, so the
    counts taken before its three calls are still right when each call comes.
    """
    light = flt[e, DAYLIGHT]
    w, h = mat.shape[1], mat.shape[2]
    chunks_y = (h + _CHUNK_H - 1) // _CHUNK_H
    chunks = (game.shape[1] - CHUNK_SEEN) // 2
    for c in range(game[e, NCHUNKS]):
        cid = game[e, CHUNK_SEEN + chunks + c]
        xmin = (cid // chunks_y) * _CHUNK_W
        ymin = (cid % chunks_y) * _CHUNK_H
        xmax = min(xmin + _CHUNK_W, w)
        ymax = min(ymin + _CHUNK_H, h)
        zombies, skeletons, cows, grass, path = _chunk_census(mat, objs, game, e, xmin, xmax, ymin, ymax)
        # The target functions of Env._balance_chunk's three calls (as floats: they pass through int()).
        _balance_object(
            mat, omap, objs, game, key, pos, e, _ZOMBIES, xmin, xmax, ymin, ymax, grass, zombies,
            0.0 if grass < 50 else 3.5 - 3 * light, 3.5 - 3 * light,
        )  # fmt: skip
        _balance_object(
            mat, omap, objs, game, key, pos, e, _SKELETONS, xmin, xmax, ymin, ymax, path, skeletons,
            0.0 if path < 6 else 1.0, 2.0,
        )  # fmt: skip
        _balance_object(
            mat, omap, objs, game, key, pos, e, _COWS, xmin, xmax, ymin, ymax, grass, cows,
            0.0 if grass < 30 else 1.0, 1.5 + light,
        )  # fmt: skip


@njit(cache=True)
def _observe(mat, omap, objs, game, flt, key, pos, e, noise, view, vector):  # pragma: no cover - compiled
    """``CrafterEnv._observe``: the night noise draw, then ``local_view()`` and ``vector()`` into row e."""
    if flt[e, DAYLIGHT] < 0.5:
        mt.skip_doubles(key, pos, e, noise)
    view_h, view_w = view.shape[1], view.shape[2]
    w, h = mat.shape[1], mat.shape[2]
    x0, y0 = objs[e, 0, X] - view_w // 2, objs[e, 0, Y] - view_h // 2
    for row in range(view_h):
        for col in range(view_w):
            x, y = x0 + col, y0 + row
            if 0 <= x < w and 0 <= y < h:
                o = omap[e, x, y]
                if o:
                    view[e, row, col] = _OBJ_ID_BASE + objs[e, o - 1, KIND]
                else:
                    view[e, row, col] = mat[e, x, y]
            else:
                view[e, row, col] = 0
    for i in range(_N_ITEMS):
        vector[e, i] = game[e, INV + i]
    for d in range(4):
        facing = _DIRS[d, 0] == game[e, FACE_X] and _DIRS[d, 1] == game[e, FACE_Y]
        vector[e, _N_ITEMS + d] = 1.0 if facing else 0.0
    vector[e, _N_ITEMS + 4] = flt[e, DAYLIGHT]
    vector[e, _N_ITEMS + 5] = 1.0 if game[e, SLEEPING] else 0.0


DAYLIGHT_TABLE_SHORT = -2
"""What `step` returns when its daylight table is too short."""


@njit(cache=True)
def _step_game(mat, omap, objs, game, flt, key, pos, e, action, daylight, radius, noise, view, vector, reward,
               dead, achievements):  # pragma: no cover - compiled
    """``CrafterEnv.step`` of game e (its arguments checked by the caller); writes row e of the outputs."""
    _compact(omap, objs, game, e)
    game[e, STEP] += 1
    flt[e, DAYLIGHT] = daylight[game[e, STEP]]
    # crafter's update loop over its snapshot (records 0 .. n-1, see the module docstring); the distance
    # is measured when an object's turn comes, after the objects before it have moved.
    n = game[e, NOBJ]
    for i in range(n):
        kind = objs[e, i, KIND]
        if abs(objs[e, i, X] - objs[e, 0, X]) + abs(objs[e, i, Y] - objs[e, 0, Y]) >= radius:
            continue
        if kind == PLAYER:
            _update_player(mat, omap, objs, game, flt, key, pos, e, action)
        elif kind == COW:
            _update_cow(mat, omap, objs, game, key, pos, e, i)
        elif kind == ZOMBIE:
            _update_zombie(mat, omap, objs, game, key, pos, e, i)
        elif kind == SKELETON:
            _update_skeleton(mat, omap, objs, game, key, pos, e, i)
        elif kind == ARROW:
            _update_arrow(mat, omap, objs, game, e, i)
        elif kind == PLANT:
            _update_plant(omap, objs, game, e, i)
    if game[e, STEP] % 10 == 0:
        _balance(mat, omap, objs, game, flt, key, pos, e)
    _observe(mat, omap, objs, game, flt, key, pos, e, noise, view, vector)
    health = game[e, _HEALTH]
    r = (health - game[e, GAME_LAST_HEALTH]) / 10
    game[e, GAME_LAST_HEALTH] = health
    new = False
    for a in range(_N_ACH):
        achievements[e, a] = game[e, ACH + a]
        if game[e, ACH + a] > 0 and not game[e, UNLOCKED + a]:
            game[e, UNLOCKED + a] = 1
            new = True
    if new:
        r += 1.0
    reward[e] = r
    dead[e] = health <= 0


@njit(cache=True)
def step_rows(S, rows, actions, daylight, radius, noise, view, vector, reward, dead,
              achievements):  # pragma: no cover - compiled
    """``CrafterEnv.step`` of the games ``rows`` only (game ``rows[j]`` takes ``actions[j]``), each exactly as
    if it were stepped alone: a game's step reads and writes its own row of the state and of the outputs,
    and the other rows of the outputs are left as they are.

    ``daylight[t]`` is crafter's daylight at step t; ``radius`` the update radius; ``noise`` the doubles of
    the night noise. Returns -1, or without stepping any game: the position in ``rows`` of the first action
    out of range, or `DAYLIGHT_TABLE_SHORT` when ``daylight`` does not reach the next step of every game.
    """
    mat, omap, objs, game, flt, key, pos = S
    for j in range(rows.shape[0]):
        if not 0 <= actions[j] < _ACT_KIND.shape[0]:
            return j
        if game[rows[j], STEP] + 1 >= daylight.shape[0]:
            return DAYLIGHT_TABLE_SHORT
    for j in range(rows.shape[0]):
        _step_game(mat, omap, objs, game, flt, key, pos, rows[j], actions[j], daylight, radius, noise, view,
                   vector, reward, dead, achievements)
    return -1


@njit(cache=True)
def step(S, actions, daylight, radius, noise, view, vector, reward, dead, achievements):  # pragma: no cover
    """``CrafterEnv.step`` for every game (`step_rows` of all rows); writes the observation, reward, death and
    achievement counts. Returns as `step_rows`, with the index of the first action out of range."""
    rows = np.arange(actions.shape[0])
    return step_rows(S, rows, actions, daylight, radius, noise, view, vector, reward, dead, achievements)


# ------------------------------------------------------------------ reset (crafter's Env.reset + worldgen)


@njit(cache=True)
def simplex_perm(seed, grad_len, perm, grad):  # pragma: no cover - compiled
    """``opensimplex.internals._init(seed)``: the permutation tables, with its 64-bit wrap-around, into
    ``perm`` and ``grad`` (int64 ``[256]`` each).

    opensimplex wraps its LCG through ctypes' int64 but computes ``(seed + 31) % (i + 1)`` on a Python
    int, where that sum does not wrap; the remainder is taken here in a form that cannot overflow.
    """
    source = np.arange(256)
    s = np.uint64(seed)
    a = np.uint64(6364136223846793005)
    c = np.uint64(1442695040888963407)
    for _ in range(3):
        s = s * a + c
    for i in range(255, -1, -1):
        s = s * a + c
        m = i + 1
        r = ((np.int64(s) % m) + 31) % m
        perm[i] = source[r]
        grad[i] = int((perm[i] % (grad_len / 3)) * 3)
        source[r] = source[i]


@njit(cache=True)
def reset_noise(
    key, pos, rows, world_seeds, grad_len, tables, noise, minus_start, perms, grads, gradients
):  # pragma: no cover - compiled
    """First half of ``Env.reset`` for ``rows``: seed the world RNG, draw the simplex seed as crafter's
    generator does, and evaluate worldgen's smooth noise octaves (into ``noise[k]`` for the k-th row) and
    the argument of crafter's ``np.exp`` (``minus_start[k]``), which the caller applies with numpy.

    ``tables`` is `worldgen.kernel_tables`: the noise comes from them and each row's vertex gradients
    (kept in ``gradients[k]`` for `reset_world`); with no vertices (`worldgen.NO_TABLES`) it is evaluated
    point by point with opensimplex's ``_noise3`` on the row's ``perms[k]``, ``grads[k]`` instead (the same
    worlds, several times slower).
    """
    offsets, coef, vertex, vertices, vertex_rows, row_coef, row_start, row_step, bound, margin = tables
    direct = vertices.shape[0] == 0
    w, h = noise.shape[2], noise.shape[3]
    for k in range(rows.shape[0]):
        e = rows[k]
        mt.seed(key, pos, e, world_seeds[k])
        simplex_perm(mt.randint(key, pos, e, _SIMPLEX_SEEDS), grad_len, perms[k], grads[k])
        tab = (offsets, coef, vertex, gradients[k], vertex_rows, row_coef, row_start, row_step, bound, margin)
        if direct:
            worldgen._smooth_noise(tab, (perms[k], grads[k]), noise[k])
        else:
            worldgen._vertex_gradients(vertices, perms[k], grads[k], gradients[k])
            worldgen._smooth_noise(tab, None, noise[k])
        worldgen._minus_start_logits(noise[k], w // 2, h // 2, minus_start[k])


@njit(cache=True)
def reset_world(
    S, rows, perms, grads, tables, gradients, noise, exp_minus_start, mat_ids, tunnels, placed, daylight0,
    night_noise, view, vector
):  # pragma: no cover - compiled
    """Second half of ``Env.reset`` for ``rows`` (after `reset_noise` and numpy's ``exp`` of its
    ``minus_start``): the tiles and objects of crafter's generator (its compiled ``_tiles``, drawing from
    this game's RNG), a fresh player, the first observation into row e. ``tunnels`` and ``placed`` are
    `worldgen._tiles`' scratch."""
    mat, omap, objs, game, flt, key, pos = S
    w, h = mat.shape[1], mat.shape[2]
    px, py = w // 2, h // 2
    offsets, coef, vertex, vertices, vertex_rows, row_coef, row_start, row_step, bound, margin = tables
    direct = vertices.shape[0] == 0
    for k in range(rows.shape[0]):
        e = rows[k]
        tab = (offsets, coef, vertex, gradients[k], vertex_rows, row_coef, row_start, row_step, bound, margin)
        if direct:
            n_placed = worldgen._tiles(
                tab, (perms[k], grads[k]), noise[k], exp_minus_start[k], px, py, key, pos, e, mat_ids,
                mat[e], tunnels, placed,
            )  # fmt: skip
        else:
            n_placed = worldgen._tiles(
                tab, None, noise[k], exp_minus_start[k], px, py, key, pos, e, mat_ids, mat[e], tunnels, placed
            )
        for x in range(w):
            for y in range(h):
                omap[e, x, y] = 0
        for i in range(game.shape[1]):
            game[e, i] = 0
        # crafter.Env.reset adds the player first, then generate_world its creatures in order.
        _add(omap, objs, game, e, _PLAYER_KIND, px, py)
        for j in range(n_placed):
            if placed[j, 0] == worldgen._COW:
                kind = COW
            elif placed[j, 0] == worldgen._ZOMBIE:
                kind = ZOMBIE
            else:
                kind = SKELETON
            _add(omap, objs, game, e, kind, placed[j, 1], placed[j, 2])
        for i in range(_N_ITEMS):
            game[e, INV + i] = _ITEM_INIT[i]
        game[e, FACE_Y] = 1  # Player.facing starts as (0, 1)
        game[e, LAST_HEALTH] = game[e, _HEALTH]
        game[e, GAME_LAST_HEALTH] = game[e, _HEALTH]
        for i in range(N_FLOAT):
            flt[e, i] = 0.0
        flt[e, DAYLIGHT] = daylight0
        _observe(mat, omap, objs, game, flt, key, pos, e, night_noise, view, vector)
