"""The game API's searches over the local view, compiled: `find` and `step_toward`'s breadth-first search.

`rlgpt.macro.api.GameAPI` holds the local view as two small arrays whatever game it reads
(`rlgpt.macro.views`): ``mat[i, j]``, the material id of tile ``(x0 + i, y0 + j)`` (crafter's ids: 1 +
the index in `MATERIALS`, 0 outside the world), and ``obj[i, j]``, the kind of the object standing there (1
+ the index in `OBJECT_KINDS`, 0 for none). These functions search them. Each returns, besides its answer,
the element work it did (tiles looked at), which the sandbox charges as fuel when macro code made the call
(`rlgpt.macro.sandbox.Guard.call`): a macro pays for a search by what it cost, not one unit per call.
Compiled because, written in Python, the queries of a tree-seeking macro took ~45 us a step (bench/RESULTS.md,
"Macro overhead"), several times the compiled engine's whole game step; here they take ~6 us.
"""

from __future__ import annotations

import functools

import numpy as np
from numba import njit

# The four moves in `rlgpt.envs.crafter.MOVES` order (left, right, up, down): the search's neighbour order,
# which decides between equally short walks.
MOVE_DX = np.array([-1, 1, 0, 0], np.int64)
MOVE_DY = np.array([0, 0, -1, 1], np.int64)


@njit(cache=True)
def find_tiles(grid, code, own_i, own_j, skip_own, limit, out):  # pragma: no cover - compiled
    """The tiles of ``grid`` (``mat`` or ``obj``) holding ``code``, nearest to ``(own_i, own_j)`` first
    (Manhattan distance, then row j, then column i), at most ``limit`` of them, as ``(i, j)`` rows of
    ``out``; ``skip_own`` leaves out ``(own_i, own_j)``. Returns (how many, element work)."""
    w, h = grid.shape
    keys = np.empty(w * h, np.int64)
    n = 0
    for i in range(w):
        for j in range(h):
            if grid[i, j] == code and not (skip_own and i == own_i and j == own_j):
                dist = abs(i - own_i) + abs(j - own_j)
                keys[n] = (dist * h + j) * w + i  # (dist, j, i) in one int: each tile's key is its own
                n += 1
    keys = np.sort(keys[:n])
    n = min(n, limit)
    for k in range(n):
        out[k, 0] = keys[k] % w
        out[k, 1] = (keys[k] // w) % h
    return n, w * h + n


@njit(cache=True)
def first_step(mat, obj, walkable, start_i, start_j, goal_i, goal_j):  # pragma: no cover - compiled
    """Index (into the moves) of the first move of a shortest walk from ``start`` over free tiles of the view
    (a walkable material, no object) to a free tile next to ``goal``; -1 when there is none. Breadth-first,
    neighbours in move order, stopping at the first goal tile discovered (as `GameAPI.step_toward` was
    written in Python). Returns (move, element work)."""
    w, h = mat.shape
    goals = np.zeros((w, h), np.bool_)
    any_goal = False
    for d in range(4):
        x, y = goal_i + MOVE_DX[d], goal_j + MOVE_DY[d]
        if 0 <= x < w and 0 <= y < h and walkable[mat[x, y]] and obj[x, y] == 0:
            goals[x, y] = True
            any_goal = True
    if not any_goal:
        return -1, 4
    first = np.full((w, h), -2, np.int64)  # -2: not reached; -1: the start (no move yet); else a move
    first[start_i, start_j] = -1
    queue = np.empty(w * h, np.int64)
    queue[0] = start_i * h + start_j
    head, tail = 0, 1
    while head < tail:
        x, y = queue[head] // h, queue[head] % h
        head += 1
        for d in range(4):
            nx, ny = x + MOVE_DX[d], y + MOVE_DY[d]
            if not (0 <= nx < w and 0 <= ny < h) or first[nx, ny] != -2:
                continue
            if not walkable[mat[nx, ny]] or obj[nx, ny] != 0:
                continue
            first[nx, ny] = d if first[x, y] == -1 else first[x, y]
            if goals[nx, ny]:
                return first[nx, ny], 4 * head + 4
            queue[tail] = nx * h + ny
            tail += 1
    return -1, 4 * head + 4


@njit(cache=True)
def engine_window(mat, omap, objs, e, x0, y0, kind_field, out_mat, out_obj):  # pragma: no cover - compiled
    """Fill the view arrays (module docstring) of the tiles from ``(x0, y0)`` from game ``e`` of the compiled
    engine's state (`rlgpt.envs.engine.kernels.State`: ``omap`` holds record index + 1, a record's
    ``kind_field`` its kind, in `OBJECT_KINDS` order)."""
    w, h = out_mat.shape
    area_w, area_h = mat.shape[1], mat.shape[2]
    for i in range(w):
        for j in range(h):
            x, y = x0 + i, y0 + j
            if 0 <= x < area_w and 0 <= y < area_h:
                out_mat[i, j] = mat[e, x, y]
                o = omap[e, x, y]
                out_obj[i, j] = objs[e, o - 1, kind_field] + 1 if o else 0
            else:
                out_mat[i, j] = 0
                out_obj[i, j] = 0


@functools.cache
def warm_up() -> None:
    """Compile every query now (or load it from numba's on-disk cache), with the argument types the game API
    passes. Called before any macro code runs (`rlgpt.macro.api.GameAPI`): the first call of a query
    otherwise compiles inside the macro that made it, seconds on a fresh install, which the macro's
    per-step clock counts as a timeout (a probe then rejected a working macro)."""
    mat, obj = np.zeros((9, 7), np.uint8), np.zeros((9, 7), np.uint8)
    find_tiles(mat, 1, 4, 3, True, 63, np.zeros((63, 2), np.int64))
    first_step(mat, obj, np.zeros(2, np.bool_), 4, 3, 5, 3)
    engine_window(np.zeros((1, 9, 7), np.uint8), np.zeros((1, 9, 7), np.int32), np.zeros((1, 1, 8), np.int32),
                  0, 0, 0, 0, mat, obj)
