"""MT19937 with exactly the draws crafter makes from ``np.random.RandomState``, compiled with numba.

A state is a ``uint32[624]`` key and a position, laid out as ``RandomState.get_state()`` gives them, so a
compiled game and a crafter world can hand their RNG to each other. Only the legacy transforms crafter's
code reaches are here, each written after numpy's C source (``numpy/random/src/mt19937`` and
``distributions.c``): ``uniform()`` (53-bit double from two 32-bit outputs), alone or in a loop,
``randint(0, n)`` (masked rejection on 32-bit outputs; ``n == 1`` draws nothing) and skipping the outputs a
draw of doubles would consume (the night noise crafter's renderer draws and throws away).
tests/envs/test_engine.py checks each against numpy.

Arithmetic is done on int64 values masked to 32 bits: numba promotes ``uint32`` operands with Python ints to
int64 or float64, which would silently change the results.
"""

from __future__ import annotations

import numpy as np
from numba import njit

N = 624
"""Words in the MT19937 state (numpy's ``RK_STATE_LEN``)."""
_M = 397
_MATRIX_A = 0x9908B0DF
_UPPER = 0x80000000
_LOWER = 0x7FFFFFFF
_MASK32 = 0xFFFFFFFF


@njit(cache=True)
def seed(key, pos, row, value):  # pragma: no cover - compiled
    """Seed state ``row`` as ``np.random.RandomState(value)`` does (``mt19937_seed``; 0 <= value < 2**32)."""
    s = value & _MASK32
    for i in range(N):
        key[row, i] = s
        s = (1812433253 * (s ^ (s >> 30)) + i + 1) & _MASK32
    pos[row] = N


@njit(cache=True)
def _twist(key, row):  # pragma: no cover - compiled
    """Regenerate the 624 words of state ``row`` (``mt19937_gen``)."""
    k = key[row]
    for i in range(N - _M):
        y = (np.int64(k[i]) & _UPPER) | (np.int64(k[i + 1]) & _LOWER)
        k[i] = np.int64(k[i + _M]) ^ (y >> 1) ^ (_MATRIX_A if y & 1 else 0)
    for i in range(N - _M, N - 1):
        y = (np.int64(k[i]) & _UPPER) | (np.int64(k[i + 1]) & _LOWER)
        k[i] = np.int64(k[i + _M - N]) ^ (y >> 1) ^ (_MATRIX_A if y & 1 else 0)
    y = (np.int64(k[N - 1]) & _UPPER) | (np.int64(k[0]) & _LOWER)
    k[N - 1] = np.int64(k[_M - 1]) ^ (y >> 1) ^ (_MATRIX_A if y & 1 else 0)


@njit(cache=True)
def next_u32(key, pos, row):  # pragma: no cover - compiled
    """The next 32-bit output (tempered), as an int64 in [0, 2**32)."""
    if pos[row] >= N:
        _twist(key, row)
        pos[row] = 0
    y = np.int64(key[row, pos[row]])
    pos[row] += 1
    y ^= y >> 11
    y ^= (y << 7) & 0x9D2C5680
    y ^= (y << 15) & 0xEFC60000
    y ^= y >> 18
    return y & _MASK32


@njit(cache=True)
def uniform(key, pos, row):  # pragma: no cover - compiled
    """``RandomState.uniform()``: a double in [0, 1) from two outputs (``mt19937_next_double``)."""
    a = next_u32(key, pos, row) >> 5
    b = next_u32(key, pos, row) >> 6
    return (a * 67108864.0 + b) / 9007199254740992.0


@njit(cache=True, inline="always")
def next_uniform(key, row, p):  # pragma: no cover - compiled
    """`uniform` for a loop that keeps state ``row``'s position in a local ``p``: returns the double and
    the new position (the caller writes it back to ``pos[row]`` when done).

    Calling `uniform` once per draw passes (and reference-counts) the state arrays each time; inlined with
    the position in a local, a draw costs a tenth as much, which matters for the thousands a world takes.
    """
    if p >= N:
        _twist(key, row)
        p = 0
    a = np.int64(key[row, p])
    p += 1
    if p >= N:
        _twist(key, row)
        p = 0
    b = np.int64(key[row, p])
    p += 1
    a ^= a >> 11
    a ^= (a << 7) & 0x9D2C5680
    a ^= (a << 15) & 0xEFC60000
    a ^= a >> 18
    b ^= b >> 11
    b ^= (b << 7) & 0x9D2C5680
    b ^= (b << 15) & 0xEFC60000
    b ^= b >> 18
    return (((a & _MASK32) >> 5) * 67108864.0 + ((b & _MASK32) >> 6)) / 9007199254740992.0, p


@njit(cache=True)
def randint(key, pos, row, n):  # pragma: no cover - compiled
    """``RandomState.randint(0, n)`` for 1 <= n <= 2**32: masked rejection sampling on 32-bit outputs.

    numpy's legacy ``_rand_int64`` with ``use_masked=True``; a range of one value returns 0 without a draw.
    """
    rng = n - 1
    if rng == 0:
        return 0
    mask = rng
    mask |= mask >> 1
    mask |= mask >> 2
    mask |= mask >> 4
    mask |= mask >> 8
    mask |= mask >> 16
    while True:
        value = next_u32(key, pos, row) & mask
        if value <= rng:
            return value


@njit(cache=True)
def skip_doubles(key, pos, row, count):  # pragma: no cover - compiled
    """Advance state ``row`` past ``count`` doubles (``uniform(lo, hi, size)`` with ``count`` elements)
    without computing them: two outputs per double, whole blocks by twisting only."""
    left = 2 * count
    while left > 0:
        if pos[row] >= N:
            _twist(key, row)
            pos[row] = 0
        take = min(left, N - pos[row])
        pos[row] += take
        left -= take


def new_states(rows: int) -> tuple[np.ndarray, np.ndarray]:
    """Empty key and position arrays for ``rows`` states (seed them with `seed` before drawing)."""
    return np.zeros((rows, N), np.uint32), np.full(rows, N, np.int64)
