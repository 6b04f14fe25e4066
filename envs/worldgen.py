"""Crafter's world generation, compiled: the worlds of ``crafter.worldgen.generate_world``, ~10x faster.

crafter builds a 64x64 world tile by tile in Python, calling OpenSimplex noise up to 13 times per tile
through several layers of Python helpers; a reset costs 35-100 ms, which is 200-600 primitive steps and
dominates training throughput once episodes get short. Here the same computation runs in a numba-compiled
loop: the same noise function (opensimplex's own compiled ``_noise3`` on the same permutation tables), the
same floating-point expressions in the same order, the same branch order, and the same sequence of random
draws from the world's RNG (drawn by `rlgpt.envs.mt19937` from its MT19937 state), which is left in
exactly the state crafter's generator leaves it in. The three smooth fields every tile needs (start area,
water, mountain) are crafter's expressions, compiled, except ``np.exp``, which stays numpy's (numba's
differs in the last bit). A noise value crafter computes but whose value cannot change the outcome is not
computed (noise has no side effect). `tests/envs/test_worldgen.py` checks equality with crafter's
generator world by world: materials, objects (kind, position, order) and RNG state.

The noise itself is read from tables (`noise_tables`, `_noise_at`): every noise value crafter reads
is traced once per world size into its terms, and a world only supplies the gradients at ~2.1k lattice
vertices; the sums are redone in opensimplex's order, so the doubles are opensimplex's, bit for bit. The
kernels (`_smooth_noise`, `_tiles`: crafter's rules, written once) read the noise through `_noise_at`:
from the tables, or, given a world's ``(perm, grad)``, point by point from ``_noise3``: the reference
`CompiledBatch(noise="direct")` runs and `bench.worldgen` measures against.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import os
import time
import types
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from crafter import engine, objects
from numba import njit
from opensimplex import OpenSimplex
from opensimplex.constants import GRADIENTS3, NORM_CONSTANT3
from opensimplex.internals import _noise3

from . import mt19937 as mt

# Material codes of the compiled loop, mapped to crafter's material names afterwards.
_MATERIALS = ("grass", "path", "coal", "iron", "diamond", "lava", "stone", "sand", "water", "tree")
_GRASS, _PATH, _COAL, _IRON, _DIAMOND, _LAVA, _STONE, _SAND, _WATER, _TREE = range(len(_MATERIALS))
_COW, _ZOMBIE, _SKELETON = range(3)
# crafter normalizes the mountain noise by sum({15: 1, 5: 0.3}.values()), computed the same way here.
_MOUNTAIN_NORM = sum({15: 1, 5: 0.3}.values())


@njit(cache=True)
def _minus_start_logits(noise, px, py, out):  # pragma: no cover - compiled
    """``-start`` before crafter's sigmoid at every tile, from `_smooth_noise`'s octaves (``[5, width,
    height]``) with the player at (px, py): the argument crafter passes to ``np.exp``, which the caller
    applies with numpy so that it is crafter's function (numba's ``exp`` differs from numpy's in the last
    bit for about a quarter of doubles)."""
    _, width, height = noise.shape
    for x in range(width):
        for y in range(height):
            start = 4 - np.sqrt(np.float64((x - px) ** 2 + (y - py) ** 2))
            out[x, y] = -(start + 2 * noise[0, x, y])


@njit(cache=True, inline="always")
def _fields_at(noise, exp_minus_start, x, y):  # pragma: no cover - compiled
    """crafter's start, water and mountain at tile (x, y) (``_set_material``), from the octaves and
    ``np.exp(-start)``: the same IEEE operations in the same order."""
    s = 1 / (1 + exp_minus_start[x, y])
    w = (noise[1, x, y] + 0.15 * noise[2, x, y] + 0.1) - 2 * s
    m = (noise[3, x, y] + 0.3 * noise[4, x, y]) / _MOUNTAIN_NORM - (4 * s + 0.3 * w)
    return s, w, m


# ------------------------------------------------------------------ noise tables (the fast path)
#
# OpenSimplex's value at a point is a sum, in an order its branches fix, of one term per nearby lattice
# vertex: ``attn**4 * (g . d)``, where ``attn`` and the offset ``d`` depend only on the point and the
# gradient ``g`` only on the seed's permutation at that vertex. crafter samples the noise at the same points
# in every world (tile coordinates scaled by fixed factors), so everything but ``g`` is computed once per
# world size by tracing opensimplex's own ``_noise3`` (`_trace_noise3`), and a reset only looks up the
# gradients and redoes the same multiply-adds in the same order: the same doubles, bit for bit.

# crafter's noise octaves (``_set_material``): the start, water and mountain fields (`_N_SMOOTH`), then the
# ones tiles read when their branch asks.
_N_SMOOTH = 5
_CAVE, _HTUNNEL, _VTUNNEL, _COAL_N, _IRON_N, _LAVA_N, _SAND_N, _TREE_N = range(5, 13)
_N_OCTAVES = 13


@njit(cache=True)
def _octave_input(o, x, y):  # pragma: no cover - compiled
    """crafter's noise input ``(x, y, z)`` for octave ``o`` at tile (x, y), in crafter's own expressions;
    its ``py_func`` gives tracing (`_trace_tables`) the same doubles on Python ints."""
    if o == 0:
        return x / 3, y / 3, 8  # start area
    if o == 1:
        return x / 15, y / 15, 3  # water, 2 octaves
    if o == 2:
        return x / 5, y / 5, 3
    if o == 3:
        return x / 15, y / 15, 0  # mountain, 2 octaves
    if o == 4:
        return x / 5, y / 5, 0
    if o == _CAVE:
        return x / 7, y / 7, 6
    if o == _HTUNNEL:
        return (2 * x) / 3, (y / 5) / 3, 7
    if o == _VTUNNEL:
        return (x / 5) / 3, (2 * y) / 3, 7
    if o == _COAL_N:
        return x / 8, y / 8, 1
    if o == _IRON_N:
        return x / 6, y / 6, 2
    if o == _LAVA_N:
        return x / 5, y / 5, 6
    if o == _SAND_N:
        return x / 9, y / 9, 4
    return x / 7, y / 7, 5  # _TREE_N


_GRADIENTS3 = GRADIENTS3.astype(np.int64)
_NORM3 = NORM_CONSTANT3


class _Traced:
    """What the traced ``_extrapolate3`` returns: ``attn4 * _Traced(...)`` records the term, adds nothing."""

    __slots__ = ("args", "terms")

    def __init__(self, terms: list, args: tuple) -> None:
        self.terms, self.args = terms, args

    def __rmul__(self, attn4: float) -> float:
        self.terms.append((attn4, *self.args))
        return 0.0


def _trace_noise3(x: float, y: float, z: float) -> list[tuple]:
    """The terms of opensimplex's ``_noise3(x, y, z)`` in its summation order:
    (attn4, xsb, ysb, zsb, dx, dy, dz)."""
    terms: list[tuple] = []

    def extrapolate(perm, grad, xsb, ysb, zsb, dx, dy, dz):
        return _Traced(terms, (xsb, ysb, zsb, dx, dy, dz))

    source = _noise3.py_func
    traced = types.FunctionType(source.__code__, {**source.__globals__, "_extrapolate3": extrapolate})
    traced(x, y, z, None, None)
    return terms


@dataclass(frozen=True)
class NoiseTables:
    """The seed-independent part of every noise value crafter's generator reads in a world of one size.

    Octave ``o`` at tile (x, y) sums terms ``offsets[o, x * height + y]`` up to the next offset; term j has
    coefficients ``coef[j] = (attn4, dx, dy, dz)`` and gradient at lattice vertex ``vertices[vertex[j]]``
    (coordinates modulo 256, all opensimplex's hash reads). A 64x64 world has ~312k terms on ~2.1k vertices.
    Offsets and vertex ids are unsigned (uint32; uint16 while the ids fit), see `_table_noise`.
    """

    offsets: np.ndarray
    coef: np.ndarray
    vertex: np.ndarray
    vertices: np.ndarray
    seconds: float
    """How long getting them took, at the engine's construction, once per world size and process: tracing
    them (1-3 s, the first time on a machine) or loading them from disk."""


def _tables_path(width: int, height: int) -> Path:
    """Where traced tables are kept between processes: beside numba's cache of this module (or under
    ``NUMBA_CACHE_DIR``), named by the world size and a digest of what they are traced from (this file and
    opensimplex's ``_noise3``), so a changed generator never reads stale tables."""
    source = Path(__file__).read_bytes() + inspect.getsource(_noise3.py_func).encode()
    digest = hashlib.sha256(source).hexdigest()[:16]
    root = os.environ.get("NUMBA_CACHE_DIR")
    folder = Path(root) if root else Path(__file__).parent / "__pycache__"
    return folder / f"worldgen_noise_{width}x{height}_{digest}.npz"


@functools.lru_cache(maxsize=4)
def noise_tables(width: int, height: int) -> NoiseTables:
    """The tables of a ``width`` x ``height`` world: loaded from disk (`_tables_path`), or traced (1-3 s
    for 64x64) and saved there for the next process; cached in this process."""
    began = time.perf_counter()
    path = _tables_path(width, height)
    try:
        with np.load(path) as saved:
            arrays = [saved[name] for name in ("offsets", "coef", "vertex", "vertices")]
        return NoiseTables(*arrays, time.perf_counter() - began)
    except (OSError, KeyError, ValueError):
        pass  # not there yet (or unreadable): trace
    tables = _trace_tables(width, height, began)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f"{path.stem}.{os.getpid()}.npz")
        np.savez(
            partial, offsets=tables.offsets, coef=tables.coef, vertex=tables.vertex, vertices=tables.vertices
        )
        os.replace(partial, path)  # atomic: concurrent workers never read a half-written file
    except OSError:
        pass  # a read-only install traces in every process instead
    return tables


def _trace_tables(width: int, height: int, began: float) -> NoiseTables:
    """Trace every noise input of a ``width`` x ``height`` world (`noise_tables` without the disk)."""
    offsets = np.zeros((_N_OCTAVES, width * height + 1), np.uint32)
    coef: list[tuple] = []
    vertex: list[int] = []
    ids: dict[tuple[int, int, int], int] = {}
    for o in range(_N_OCTAVES):
        for x in range(width):
            for y in range(height):
                offsets[o, x * height + y] = len(coef)
                for attn4, xsb, ysb, zsb, dx, dy, dz in _trace_noise3(*_octave_input.py_func(o, x, y)):
                    coef.append((attn4, dx, dy, dz))
                    # (perm[(perm[xsb & 255] + ysb) & 255] + zsb) & 255 only reads the coordinates mod 256.
                    vertex.append(ids.setdefault((xsb & 0xFF, ysb & 0xFF, zsb & 0xFF), len(ids)))
        offsets[o, width * height] = len(coef)
    return NoiseTables(
        offsets,
        np.array(coef, np.float64),
        np.array(vertex, np.uint16 if len(ids) <= 2**16 else np.uint32),
        np.array(list(ids), np.int64).reshape(-1, 3),
        time.perf_counter() - began,
    )


@njit(cache=True)
def _vertex_gradients(vertices, perm, grad, out):  # pragma: no cover - compiled
    """``_extrapolate3``'s gradient (g1, g2, g3) at every vertex for this permutation, as doubles (the
    int64 -> double conversion ``g1 * dx`` makes anyway), into ``out`` (``[vertices, 3]``)."""
    for v in range(vertices.shape[0]):
        index = grad[(perm[(perm[vertices[v, 0]] + vertices[v, 1]) & 0xFF] + vertices[v, 2]) & 0xFF]
        for i in range(3):
            out[v, i] = _GRADIENTS3[index + i]


def table_args(tables: NoiseTables, perm: np.ndarray, grad: np.ndarray) -> tuple:
    """The ``tab`` argument of the table kernels for the world whose simplex tables are ``perm``, ``grad``."""
    gradients = np.empty((len(tables.vertices), 3))
    _vertex_gradients(tables.vertices, perm, grad, gradients)
    return tables.offsets, tables.coef, tables.vertex, gradients


@njit(cache=True, inline="always")
def _table_noise(o, t, tab):  # pragma: no cover - compiled
    """opensimplex's ``_noise3`` at octave ``o``'s input for tile ``t``: its terms, re-summed in order
    (``value += attn4 * (g1 * dx + g2 * dy + g3 * dz)``, then ``/ NORM_CONSTANT3``)."""
    offsets, coef, vertex, gradient = tab
    value = 0.0
    # Unsigned indices (and unsigned vertex ids): numba then leaves out its negative-index wrap-around on
    # every read, a quarter of this loop's time.
    for j in range(np.uint64(offsets[o, t]), np.uint64(offsets[o, t + 1])):
        v = vertex[j]
        ext = gradient[v, 0] * coef[j, 1] + gradient[v, 1] * coef[j, 2] + gradient[v, 2] * coef[j, 3]
        value += coef[j, 0] * ext
    return value / _NORM3


@njit(cache=True)
def _point_noise(o, x, y, perm, grad):  # pragma: no cover - compiled
    """opensimplex's ``_noise3`` at octave ``o``'s input for tile (x, y), point by point."""
    a, b, c = _octave_input(o, x, y)
    return _noise3(a, b, c, perm, grad)


@njit(cache=True, inline="always")
def _noise_at(o, x, y, height, tab, simplex):  # pragma: no cover - compiled
    """Octave ``o`` of crafter's noise at tile (x, y) of a ``height``-tall world: from the tables ``tab``
    (`table_args`) when ``simplex`` is None, else point by point from ``_noise3`` on the world's simplex
    tables ``simplex = (perm, grad)`` (the reference); the same doubles either way. numba decides
    ``simplex is None`` when it compiles a kernel for a None argument, so the table kernels carry no trace
    of the point-by-point path."""
    if simplex is None:
        return _table_noise(o, x * height + y, tab)
    return _point_noise(o, x, y, simplex[0], simplex[1])


@njit(cache=True)
def _smooth_noise(tab, simplex, out):  # pragma: no cover - compiled
    """The noise octaves of the start, water and mountain fields at every tile, as crafter evaluates them
    (the noise as `_noise_at` reads it), into ``out`` (``[5, width, height]``)."""
    _, width, height = out.shape
    for o in range(_N_SMOOTH):
        for x in range(width):
            for y in range(height):
                out[o, x, y] = _noise_at(o, x, y, height, tab, simplex)


@njit(cache=True)
def _tiles(
    tab, simplex, noise, exp_minus_start, px, py, key, pos, row, ids, material, tunnels, placed
):  # pragma: no cover - compiled
    """crafter's per-tile branches (``_set_material``, then ``_set_object``) in crafter's loop order, with
    the player at (px, py).

    The smooth fields come from `_smooth_noise`'s octaves ``noise`` and ``np.exp`` of
    `_minus_start_logits` (`_fields_at`), the other octaves from `_noise_at` where a branch reads them.
    Random draws come from the MT19937 state ``key[row]``, ``pos[row]`` (`rlgpt.envs.mt19937`), one
    per ``uniform()`` crafter calls, so the state ends where crafter's leaves ``world.random``. Writes
    crafter's material ids (``ids[code]``) into ``material`` and the creatures placed, as rows (kind, x, y)
    in placement order, into ``placed`` (room for one per tile); ``tunnels`` is scratch (bool, one per
    tile). Returns the number of creatures.
    """
    width, height = material.shape
    p = pos[row]
    for x in range(width):
        for y in range(height):
            s, w, m = _fields_at(noise, exp_minus_start, x, y)
            tunnels[x, y] = False
            if s > 0.5:
                code = _GRASS
            elif m > 0.15:
                # crafter tests the cave noise first; it has no side effect, so it is only read where
                # the mountain test leaves the outcome open.
                if m > 0.3 and _noise_at(_CAVE, x, y, height, tab, simplex) > 0.15:  # cave
                    code = _PATH
                elif _noise_at(_HTUNNEL, x, y, height, tab, simplex) > 0.4:  # horizontal tunnel
                    code = _PATH
                    tunnels[x, y] = True
                elif _noise_at(_VTUNNEL, x, y, height, tab, simplex) > 0.4:  # vertical tunnel
                    code = _PATH
                    tunnels[x, y] = True
                else:
                    code = _STONE
                    if _noise_at(_COAL_N, x, y, height, tab, simplex) > 0:
                        u, p = mt.next_uniform(key, row, p)
                        if u > 0.85:
                            code = _COAL
                    if code == _STONE and _noise_at(_IRON_N, x, y, height, tab, simplex) > 0.4:
                        u, p = mt.next_uniform(key, row, p)
                        if u > 0.75:
                            code = _IRON
                    if code == _STONE and m > 0.18:
                        u, p = mt.next_uniform(key, row, p)
                        if u > 0.994:
                            code = _DIAMOND
                    maybe_lava = code == _STONE and m > 0.3
                    if maybe_lava and _noise_at(_LAVA_N, x, y, height, tab, simplex) > 0.35:
                        code = _LAVA
            elif 0.25 < w <= 0.35 and _noise_at(_SAND_N, x, y, height, tab, simplex) > -0.2:
                code = _SAND
            elif 0.3 < w:
                code = _WATER
            else:
                code = _GRASS
                if _noise_at(_TREE_N, x, y, height, tab, simplex) > 0:
                    u, p = mt.next_uniform(key, row, p)
                    if u > 0.8:
                        code = _TREE
            material[x, y] = ids[code]
    grass, sand, path = ids[_GRASS], ids[_SAND], ids[_PATH]
    n_placed = 0
    for x in range(width):
        for y in range(height):
            here = material[x, y]
            if here != grass and here != sand and here != path:
                continue
            # crafter compares np.sqrt(dist2) with 3 and 10: sqrt is correctly rounded and monotone, and
            # exact at 9 and 100, so on the integer dist2 these are dist2 > 9 and dist2 > 100.
            dist2 = (x - px) ** 2 + (y - py) ** 2
            kind = -1
            if dist2 > 9 and here == grass:
                u, p = mt.next_uniform(key, row, p)
                if u > 0.985:
                    kind = _COW
            if kind < 0 and dist2 > 100:
                u, p = mt.next_uniform(key, row, p)
                if u > 0.993:
                    kind = _ZOMBIE
            if kind < 0 and here == path and tunnels[x, y]:
                u, p = mt.next_uniform(key, row, p)
                if u > 0.95:
                    kind = _SKELETON
            if kind >= 0:
                placed[n_placed, 0] = kind
                placed[n_placed, 1] = x
                placed[n_placed, 2] = y
                n_placed += 1
    pos[row] = p
    return n_placed


def generate_world(world: engine.World, player: objects.Player) -> None:
    """Drop-in for ``crafter.worldgen.generate_world(world, player)``: same world, same RNG state."""
    rng = world.random
    simplex = OpenSimplex(seed=rng.randint(0, 2**31 - 1))
    perm, grad = simplex._perm, simplex._perm_grad_index3
    width, height = world.area
    px, py = int(player.pos[0]), int(player.pos[1])

    tab = table_args(noise_tables(width, height), perm, grad)
    noise = np.empty((_N_SMOOTH, width, height))
    _smooth_noise(tab, None, noise)
    minus_start = np.empty((width, height))
    _minus_start_logits(noise, px, py, minus_start)

    # _tiles draws from the world RNG's MT19937 state as arrays, which then become the RNG's state.
    name, key, position, has_gauss, gauss = rng.get_state()
    key, position = key[None].copy(), np.array([position], np.int64)
    ids = np.array([world._mat_ids[name] for name in _MATERIALS], dtype=world._mat_map.dtype)
    tunnels = np.empty((width, height), np.bool_)
    placed = np.empty((width * height, 3), np.int64)
    n_placed = _tiles(
        tab, None, noise, np.exp(minus_start), px, py, key, position, 0, ids, world._mat_map, tunnels, placed
    )
    rng.set_state((name, key[0], int(position[0]), has_gauss, gauss))

    for kind, x, y in placed[:n_placed].tolist():
        if kind == _COW:
            world.add(objects.Cow(world, (x, y)))
        elif kind == _ZOMBIE:
            world.add(objects.Zombie(world, (x, y), player))
        else:
            world.add(objects.Skeleton(world, (x, y), player))
