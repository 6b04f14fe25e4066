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
octaves read at most tiles (water, mountain, horizontal tunnels, trees) are first approximated for the
whole world in vectorized loops, to within a bound traced with the tables, and read exactly only where
the bound leaves one of crafter's comparisons open (`_approximate_octaves`). The kernels
(`_smooth_noise`, `_tiles`: crafter's rules, written once) read the noise through `_noise_at`: from the
tables, or, given a world's ``(perm, grad)``, point by point from ``_noise3``: the reference
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
from opensimplex.constants import GRADIENTS3, NORM_CONSTANT3, SQUISH_CONSTANT3, STRETCH_CONSTANT3
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
def _water_mountain(s, n1, n2, n3, n4):  # pragma: no cover - compiled
    """crafter's water and mountain at a tile (``_set_material``) from its start ``s`` and octaves 1-4 of
    its noise: the same IEEE operations in the same order."""
    w = (n1 + 0.15 * n2 + 0.1) - 2 * s
    m = (n3 + 0.3 * n4) / _MOUNTAIN_NORM - (4 * s + 0.3 * w)
    return w, m


@njit(cache=True, inline="always")
def _undecided(w, m, mw, mm):  # pragma: no cover - compiled
    """Whether water ``w`` or mountain ``m``, each known to within ``mw``, ``mm`` of crafter's value, lies
    that close to a threshold crafter compares it with (so the comparison could go either way). Outside
    these windows every comparison comes out as on crafter's value."""
    near_w = (abs(w - 0.25) <= mw) | (abs(w - 0.3) <= mw) | (abs(w - 0.35) <= mw)
    return near_w | (abs(m - 0.15) <= mm) | (abs(m - 0.18) <= mm) | (abs(m - 0.3) <= mm)


# ------------------------------------------------------------------ noise tables (the fast path)
#
# OpenSimplex's value at a point is a sum, in an order its branches fix, of one term per nearby lattice
# vertex: ``attn**4 * (g . d)``, where ``attn`` and the offset ``d`` depend only on the point and the
# gradient ``g`` only on the seed's permutation at that vertex. crafter samples the noise at the same points
# in every world (tile coordinates scaled by fixed factors), so everything but ``g`` is computed once per
# world size by tracing opensimplex's own ``_noise3`` (`_trace_noise3`), and a reset only looks up the
# gradients and redoes the same multiply-adds in the same order: the same doubles, bit for bit.
#
# That exact sum costs eight loads and seven flops a term, one term after another (~1 ns a term here); the
# water and mountain octaves are read at every tile, and an octave read lazily costs more (~25 ns a read:
# the branch waits on scattered table reads). Every noise value crafter reads is only ever compared with
# thresholds, though, so for the octaves that cost the most (`_APPROXIMATED`: water, mountain, and the
# horizontal tunnels and trees, read at most mountain and grass tiles) a reset first computes an
# approximation at every tile, vertex by vertex: each lattice vertex adds its term to a run of tiles along
# y (`_approximate_octaves`), from the vertex's geometry rather than from traced coefficients, in loops the
# compiler vectorizes. Tracing bounds how far that sum can be from opensimplex's doubles (`_approximation`:
# the vertices opensimplex leaves out at a tile, or adds, plus rounding), and where a value lies within the
# bound of a threshold the exact one comes from the tables instead (`_undecided`, `_exceeds`): every
# comparison crafter makes comes out as on its doubles.

# crafter's noise octaves (``_set_material``): the start, water and mountain fields (`_N_SMOOTH`), then the
# ones tiles read when their branch asks.
_N_SMOOTH = 5
_CAVE, _HTUNNEL, _VTUNNEL, _COAL_N, _IRON_N, _LAVA_N, _SAND_N, _TREE_N = range(5, 13)
_N_OCTAVES = 13
# The octaves a reset approximates first (water, mountain, horizontal tunnels, trees: the start octave
# goes through numpy's exp, so it stays exact, and the other lazy ones are read at few tiles or, the
# vertical tunnels, would take short rows), each into a plane of `_smooth_noise`'s output (`_PLANES`); the
# tiles one approximation row spans at least (a multiple of the vector width); and what the bound allows for
# rounding: a term's offsets (below 50) come out of opensimplex's and the rows' arithmetic a few ulps apart
# (< 1e-13), a term moves by less than 2000 times that, and both sums add ~10 terms below 300 with a few
# roundings each (fastmath's fused or reordered ones included), so the two differ by far less than 1e-10.
_APPROXIMATED = (1, 2, 3, 4, _HTUNNEL, _TREE_N)
_PLANES = (1, 2, 3, 4, 5, 6)
_HTUNNEL_PLANE, _TREE_PLANE = 5, 6
_N_PLANES = 7
_LANES = 8
_ROUNDING = 1e-10


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

    Exact terms: octave ``o`` at tile (x, y) sums terms ``offsets[o, x * height + y]`` up to the next
    offset; term j has coefficients ``coef[j] = (attn4, dx, dy, dz)`` and gradient at lattice vertex
    ``vertices[vertex[j]]`` (coordinates modulo 256, all opensimplex's hash reads). A 64x64 world has ~312k
    terms on ~2.1k vertices. Offsets and vertex ids are unsigned (uint32; uint16 while the ids fit), see
    `_table_noise`.

    Approximation of the `_APPROXIMATED` octaves (`_approximate_octaves`): octave ``o``'s rows are
    ``rows[row_start[o]:row_start[o + 1]]``, each ``(vertex id, x, y0, lanes)``: the vertex's term at
    tiles (x, y0 .. y0 + lanes - 1), whose offset from the vertex is ``(a, b0 + l * row_step[o], c)`` at
    lane l, with ``row_coef[row] = (a, c, 2 - a * a - c * c, b0)``. ``bound[o]``: how far the approximation
    can be from opensimplex's value at any tile; ``margin``: what that makes for crafter's water and
    mountain (`_undecided`).
    """

    offsets: np.ndarray
    coef: np.ndarray
    vertex: np.ndarray
    vertices: np.ndarray
    rows: np.ndarray
    row_coef: np.ndarray
    row_start: np.ndarray
    row_step: np.ndarray
    bound: np.ndarray
    margin: np.ndarray
    seconds: float
    """How long getting them took, at the engine's construction, once per world size and process: tracing
    them (1-5 s, the first time on a machine) or loading them from disk."""


_ARRAYS = (
    "offsets",
    "coef",
    "vertex",
    "vertices",
    "rows",
    "row_coef",
    "row_start",
    "row_step",
    "bound",
    "margin",
)
"""`NoiseTables`' arrays, in the order the kernels take them (`kernel_tables`)."""


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
    """The tables of a ``width`` x ``height`` world: loaded from disk (`_tables_path`), or traced (1-5 s
    for 64x64) and saved there for the next process; cached in this process."""
    began = time.perf_counter()
    path = _tables_path(width, height)
    try:
        with np.load(path) as saved:
            arrays = [saved[name] for name in _ARRAYS]
        return NoiseTables(*arrays, time.perf_counter() - began)
    except (OSError, KeyError, ValueError):
        pass  # not there yet (or unreadable): trace
    tables = _trace_tables(width, height, began)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f"{path.stem}.{os.getpid()}.npz")
        np.savez(partial, **{name: getattr(tables, name) for name in _ARRAYS})
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
    approximations = []
    for o in range(_N_OCTAVES):
        traced = []
        for x in range(width):
            for y in range(height):
                offsets[o, x * height + y] = len(coef)
                traced.append(_trace_noise3(*_octave_input.py_func(o, x, y)))
                for attn4, xsb, ysb, zsb, dx, dy, dz in traced[-1]:
                    coef.append((attn4, dx, dy, dz))
                    # (perm[(perm[xsb & 255] + ysb) & 255] + zsb) & 255 only reads the coordinates mod 256.
                    vertex.append(ids.setdefault((xsb & 0xFF, ysb & 0xFF, zsb & 0xFF), len(ids)))
        offsets[o, width * height] = len(coef)
        approximations.append(_approximation(o, width, height, traced, ids) if o in _APPROXIMATED else None)
    row_start = np.zeros(_N_OCTAVES + 1, np.int64)
    rows, row_coef, row_step, bound = [], [], np.zeros(_N_OCTAVES), np.zeros(_N_OCTAVES)
    for o, approximation in enumerate(approximations):
        if approximation is not None:
            o_rows, o_coef, row_step[o], bound[o] = approximation
            rows += o_rows
            row_coef += o_coef
        row_start[o + 1] = len(rows)
    # What the octaves' bounds make for crafter's water (n1 + 0.15 n2 + 0.1) - 2 s and mountain
    # (n3 + 0.3 n4) / 1.3 - (4 s + 0.3 water), with the expressions' own rounding (< 1e-14).
    margin_w = bound[1] + 0.15 * bound[2] + 1e-12
    margin_m = (bound[3] + 0.3 * bound[4]) / _MOUNTAIN_NORM + 0.3 * margin_w + 1e-12
    return NoiseTables(
        offsets,
        np.array(coef, np.float64),
        np.array(vertex, np.uint16 if len(ids) <= 2**16 else np.uint32),
        np.array(list(ids), np.int64).reshape(-1, 3),
        np.array(rows, np.int32).reshape(-1, 4),
        np.array(row_coef, np.float64).reshape(-1, 4),
        row_start,
        row_step,
        bound,
        np.array([margin_w, margin_m]),
        time.perf_counter() - began,
    )


def _max_product(dx: float, dy: float, dz: float) -> float:
    """The largest ``|g . d|`` over opensimplex's 24 gradients, which are the permutations of (11, 4, 4)
    with every sign: a term's size, whatever the seed."""
    ax, ay, az = abs(dx), abs(dy), abs(dz)
    return 4 * (ax + ay + az) + 7 * max(ax, ay, az)


def _approximation(
    o: int, width: int, height: int, traced: list[list[tuple]], ids: dict
) -> tuple[list, list, float, float]:
    """The rows of octave ``o``'s approximation (`NoiseTables`), its lane step and its bound, given
    opensimplex's terms at every tile (``traced[x * height + y]``, `_trace_noise3`); new lattice vertices
    get ids in ``ids``.

    The rows hold every lattice vertex's term wherever its attenuation is positive: the noise as a sum over
    the lattice. opensimplex's ``_noise3`` sums over the vertices its branches pick, which at some tiles
    leave out a vertex whose attenuation is positive (up to 1/6) or take one in whose attenuation is not,
    by rounding; the bound is the largest sum, over the tiles, of the terms in one sum and not the other,
    each at its largest over the gradients (`_max_product`), plus `_ROUNDING`.
    """
    xs = np.array([_octave_input.py_func(o, x, 0)[0] for x in range(width)])
    ys = np.array([_octave_input.py_func(o, 0, y)[1] for y in range(height)])
    z = _octave_input.py_func(o, 0, 0)[2]
    step = _octave_input.py_func(o, 0, 1)[1]
    # Lattice (skewed) coordinates of the world's corners; a vertex within sqrt(2) of a tile is within 3.
    corners = [(a, b, z) for a in (xs[0], xs[-1]) for b in (ys[0], ys[-1])]
    skewed = np.array([[u + (a + b + c) * STRETCH_CONSTANT3 for u in (a, b, c)] for a, b, c in corners])
    low, high = np.floor(skewed.min(0)).astype(int) - 3, np.floor(skewed.max(0)).astype(int) + 3
    rows, coef = [], []
    summed: list[dict] = [{} for _ in range(width * height)]  # tile -> {vertex: |term| at most}
    for i in range(low[0], high[0] + 1):
        for j in range(low[1], high[1] + 1):
            for k in range(low[2], high[2] + 1):
                squish = (i + j + k) * SQUISH_CONSTANT3
                vx, vy, c = i + squish, j + squish, z - (k + squish)
                if c * c >= 2:
                    continue
                reach = np.sqrt(2 - c * c) + 1e-9
                for x in range(np.searchsorted(xs, vx - reach), np.searchsorted(xs, vx + reach)):
                    a = xs[x] - vx
                    base = 2 - a * a - c * c
                    if base <= 0:
                        continue
                    inside = np.flatnonzero(base - (ys - vy) ** 2 > 0)
                    if not len(inside):
                        continue
                    run = inside[-1] + 1 - inside[0]
                    lanes = min(-(-run // _LANES) * _LANES, height)
                    y0 = min(int(inside[0]), height - lanes)
                    b0 = ys[y0] - vy
                    v = ids.setdefault((i & 0xFF, j & 0xFF, k & 0xFF), len(ids))
                    rows.append((v, x, y0, lanes))
                    coef.append((a, c, base, b0))
                    # The lanes exactly as `_approximate_octaves` computes them.
                    b = b0 + np.arange(lanes) * step
                    t = base - b * b
                    for lane in np.flatnonzero(t > 0):
                        summed[x * height + y0 + lane][(i, j, k)] = t[lane] ** 4 * _max_product(a, b[lane], c)
    worst = 0.0
    for tile, terms in enumerate(traced):
        ours = summed[tile]
        theirs = {
            (xsb, ysb, zsb): attn4 * _max_product(dx, dy, dz) for attn4, xsb, ysb, zsb, dx, dy, dz in terms
        }
        apart = sum(size for v, size in ours.items() if v not in theirs)
        apart += sum(size for v, size in theirs.items() if v not in ours)
        worst = max(worst, apart)
    return rows, coef, step, worst / _NORM3 + _ROUNDING


@njit(cache=True)
def _vertex_gradients(vertices, perm, grad, out):  # pragma: no cover - compiled
    """``_extrapolate3``'s gradient (g1, g2, g3) at every vertex for this permutation, as doubles (the
    int64 -> double conversion ``g1 * dx`` makes anyway), into ``out`` (``[vertices, 3]``)."""
    for v in range(vertices.shape[0]):
        index = grad[(perm[(perm[vertices[v, 0]] + vertices[v, 1]) & 0xFF] + vertices[v, 2]) & 0xFF]
        for i in range(3):
            out[v, i] = _GRADIENTS3[index + i]


def kernel_tables(tables: NoiseTables) -> tuple:
    """``tables`` as the reset kernels take them: its arrays in `_ARRAYS` order (`table_args` puts a
    world's vertex gradients in place of ``vertices``)."""
    return tuple(getattr(tables, name) for name in _ARRAYS)


NO_TABLES = (
    np.zeros((1, 1), np.uint32),
    np.zeros((0, 4)),
    np.zeros(0, np.uint16),
    np.zeros((0, 3), np.int64),
    np.zeros((0, 4), np.int32),
    np.zeros((0, 4)),
    np.zeros(_N_OCTAVES + 1, np.int64),
    np.zeros(_N_OCTAVES),
    np.zeros(_N_OCTAVES),
    np.zeros(2),
)
"""`kernel_tables` of no tables, for kernels that read the noise point by point."""


def table_args(tables: NoiseTables, perm: np.ndarray, grad: np.ndarray) -> tuple:
    """The ``tab`` argument of the table kernels for the world whose simplex tables are ``perm``, ``grad``."""
    gradients = np.empty((len(tables.vertices), 3))
    _vertex_gradients(tables.vertices, perm, grad, gradients)
    static = kernel_tables(tables)
    return static[:3] + (gradients,) + static[4:]


@njit(cache=True, inline="always")
def _table_noise(o, t, tab):  # pragma: no cover - compiled
    """opensimplex's ``_noise3`` at octave ``o``'s input for tile ``t``: its terms, re-summed in order
    (``value += attn4 * (g1 * dx + g2 * dy + g3 * dz)``, then ``/ NORM_CONSTANT3``)."""
    offsets, coef, vertex, gradient = tab[0], tab[1], tab[2], tab[3]
    value = 0.0
    # Unsigned indices (and unsigned vertex ids): numba then leaves out its negative-index wrap-around on
    # every read, a quarter of this loop's time.
    for j in range(np.uint64(offsets[o, t]), np.uint64(offsets[o, t + 1])):
        v = vertex[j]
        ext = gradient[v, 0] * coef[j, 1] + gradient[v, 1] * coef[j, 2] + gradient[v, 2] * coef[j, 3]
        value += coef[j, 0] * ext
    return value / _NORM3


@njit(cache=True, fastmath=True)
def _approximate_octaves(tab, out):  # pragma: no cover - compiled
    """The `_APPROXIMATED` octaves at every tile to within the tables' bound, each into its plane of ``out``
    (`_PLANES`): each row adds one vertex's ``attn**4 * (g . d)`` over its tiles, ``attn = max(2 - |d|**2,
    0)``, with ``d`` from the row's geometry (`NoiseTables`). The lane loop has no reduction and no gather,
    so it runs on vector registers; the order of the sum is free here, as only the bound matters."""
    gradient, rows, row_coef, row_start, row_step = tab[3], tab[4], tab[5], tab[6], tab[7]
    _, width, height = out.shape
    for i in range(len(_APPROXIMATED)):
        o = _APPROXIMATED[i]
        plane = out[_PLANES[i]]
        for x in range(width):
            for y in range(height):
                plane[x, y] = 0.0
        step = row_step[o]
        for r in range(row_start[o], row_start[o + 1]):
            v, x, y0, lanes = rows[r, 0], rows[r, 1], rows[r, 2], rows[r, 3]
            a, c, base, b0 = row_coef[r, 0], row_coef[r, 1], row_coef[r, 2], row_coef[r, 3]
            across = gradient[v, 0] * a + gradient[v, 2] * c
            along = gradient[v, 1]
            run = plane[x, y0 : y0 + lanes]
            for lane in range(lanes):
                b = b0 + lane * step
                attn = max(base - b * b, 0.0)
                attn *= attn
                run[lane] += attn * attn * (across + along * b)
        for x in range(width):
            for y in range(height):
                plane[x, y] /= _NORM3


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


@njit(cache=True, inline="always")
def _exceeds(o, value, bound, threshold, x, y, height, tab, simplex):  # pragma: no cover - compiled
    """crafter's ``noise > threshold`` for an `_APPROXIMATED` lazy octave ``o`` at tile (x, y): decided by
    its approximation ``value`` where that is further than ``bound`` from the threshold, else by the exact
    value (`_noise_exceeds`, as it is point by point)."""
    if simplex is None:
        if value - bound > threshold:
            return True
        if value + bound <= threshold:
            return False
    return _noise_exceeds(o, x, y, threshold, height, tab, simplex)


# The exact evaluations behind an approximation are separate calls, not inlined like `_noise_at` in `_tiles`:
# they run at a few tiles a world, and inlined, their code made the whole tile loop half again as slow.


@njit(cache=True)
def _noise_exceeds(o, x, y, threshold, height, tab, simplex):  # pragma: no cover - compiled
    """``_noise_at(...) > threshold``, for `_exceeds`."""
    return _noise_at(o, x, y, height, tab, simplex) > threshold


@njit(cache=True)
def _exact_water_mountain(s, x, y, height, tab, simplex):  # pragma: no cover - compiled
    """`_water_mountain` at tile (x, y) on the exact octaves 1-4 (`_noise_at`)."""
    n1 = _noise_at(1, x, y, height, tab, simplex)
    n2 = _noise_at(2, x, y, height, tab, simplex)
    n3 = _noise_at(3, x, y, height, tab, simplex)
    n4 = _noise_at(4, x, y, height, tab, simplex)
    return _water_mountain(s, n1, n2, n3, n4)


@njit(cache=True)
def _smooth_noise(tab, simplex, out):  # pragma: no cover - compiled
    """The noise octaves of the start, water and mountain fields at every tile, into ``out[:5]`` (``out``:
    ``[_N_PLANES, width, height]``): read point by point (``simplex``, `_noise_at`), opensimplex's doubles;
    or from the tables, the start octave exactly and the others approximately, with the approximated lazy
    octaves in ``out[5:]`` (`_approximate_octaves`), to within ``tab``'s bound, which `_tiles` takes into
    account."""
    _, width, height = out.shape
    if simplex is None:
        for x in range(width):
            for y in range(height):
                out[0, x, y] = _table_noise(0, x * height + y, tab)
        _approximate_octaves(tab, out)
    else:
        for o in range(_N_SMOOTH):
            for x in range(width):
                for y in range(height):
                    out[o, x, y] = _point_noise(o, x, y, simplex[0], simplex[1])


@njit(cache=True)
def _tiles(
    tab, simplex, noise, exp_minus_start, px, py, key, pos, row, ids, material, tunnels, placed
):  # pragma: no cover - compiled
    """crafter's per-tile branches (``_set_material``, then ``_set_object``) in crafter's loop order, with
    the player at (px, py).

    The smooth fields come from `_smooth_noise`'s octaves ``noise`` and ``np.exp`` of
    `_minus_start_logits` (where water or mountain come out too close to a threshold for the tables'
    approximation to decide, from the exact octaves), the other octaves from `_noise_at` where a branch
    reads them.
    Random draws come from the MT19937 state ``key[row]``, ``pos[row]`` (`rlgpt.envs.mt19937`), one
    per ``uniform()`` crafter calls, so the state ends where crafter's leaves ``world.random``. Writes
    crafter's material ids (``ids[code]``) into ``material`` and the creatures placed, as rows (kind, x, y)
    in placement order, into ``placed`` (room for one per tile); ``tunnels`` is scratch (bool, one per
    tile). Returns the number of creatures.
    """
    width, height = material.shape
    # Scalars out of the tuple once: an array taken from it in the loop is reference-counted at every tile.
    margin_w, margin_m = tab[9][0], tab[9][1]
    bound_tunnel, bound_tree = tab[8][_HTUNNEL], tab[8][_TREE_N]
    p = pos[row]
    for x in range(width):
        for y in range(height):
            s = 1 / (1 + exp_minus_start[x, y])
            w, m = _water_mountain(s, noise[1, x, y], noise[2, x, y], noise[3, x, y], noise[4, x, y])
            if s <= 0.5 and _undecided(w, m, margin_w, margin_m):
                w, m = _exact_water_mountain(s, x, y, height, tab, simplex)
            tunnels[x, y] = False
            if s > 0.5:
                code = _GRASS
            elif m > 0.15:
                # crafter tests the cave noise first; it has no side effect, so it is only read where
                # the mountain test leaves the outcome open.
                if m > 0.3 and _noise_at(_CAVE, x, y, height, tab, simplex) > 0.15:  # cave
                    code = _PATH
                elif _exceeds(
                    _HTUNNEL, noise[_HTUNNEL_PLANE, x, y], bound_tunnel, 0.4, x, y, height, tab, simplex
                ):
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
                if _exceeds(_TREE_N, noise[_TREE_PLANE, x, y], bound_tree, 0, x, y, height, tab, simplex):
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
    noise = np.empty((_N_PLANES, width, height))
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
