"""`CompiledBatch`: the `CrafterBatch` interface over the compiled engine (`rlgpt.envs.engine.kernels`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any, NamedTuple

import crafter
import numpy as np
from opensimplex.constants import GRADIENTS3

from .. import worldgen
from ..batch import BatchObs, BatchStep, check_actions, check_rows, check_seeds
from ..crafter import ACTION_NAMES, ITEMS, MATERIALS, VECTOR_FIELDS
from ..tasks import ACHIEVEMENTS
from . import kernels
from .rules import CHUNK, KINDS, RULES, Geometry, make_geometry


class _DaylightClock:
    """crafter's daylight for each step number, computed by crafter's own ``Env._update_time``.

    The daylight is a cosine of the step count evaluated by numpy; a compiled cosine may differ in the last
    bit, which would show in the ``daylight`` observation and could flip a ``daylight < 0.5`` test (the
    night noise draw) or a spawn target. It is not periodic either (``(step / 300) % 1`` rounds differently
    as the step grows). So the kernels read a table, grown here as games get older.
    """

    def __init__(self) -> None:
        self.table = np.zeros(0)
        # A stand-in for crafter.Env with just what _update_time reads and writes.
        self._game = SimpleNamespace(_step=0, _world=SimpleNamespace(daylight=0.0))

    def cover(self, step: int) -> np.ndarray:
        """The table, long enough to index ``step``."""
        if step >= len(self.table):
            size = max(2 * len(self.table), step + 1, 4096)
            game, update_time = self._game, crafter.Env._update_time
            extra = np.empty(size - len(self.table))
            for i, s in enumerate(range(len(self.table), size)):
                game._step = s
                update_time(game)
                extra[i] = game._world.daylight
            self.table = np.concatenate([self.table, extra])
        return self.table


_CLOCK = _DaylightClock()
# The worldgen material codes, as crafter material ids.
_WORLDGEN_IDS = np.array([MATERIALS.index(name) + 1 for name in worldgen._MATERIALS], np.uint8)
_GRAD_LEN = len(GRADIENTS3)
# Rows a reset takes at a time: their smooth noise (160 kB a row at 64x64) is still in cache when the tiles
# read it.
_RESET_CHUNK = 4


class _ResetScratch(NamedTuple):
    """Arrays `CompiledBatch._reset_rows` hands its kernels, made once per batch (see there)."""

    noise: np.ndarray
    minus_start: np.ndarray
    exp_minus_start: np.ndarray
    perms: np.ndarray
    grads: np.ndarray
    gradients: np.ndarray
    tunnels: np.ndarray
    placed: np.ndarray


def world_seed(seed: int, episode: int) -> int:
    """The seed crafter gives episode ``episode`` of env seed ``seed`` (``crafter.Env.reset``)."""
    return hash((seed, episode)) % (2**31 - 1)


class CompiledBatch:
    """`CrafterBatch` whose games are arrays stepped by numba-compiled code, equal to `ReferenceBatch`.

    Each row is, step for step, the game one `CrafterEnv` plays for the same seed and actions (crafter's
    dynamics with `CrafterEnv`'s despawn order): the same observations, rewards, deaths and achievements,
    and the same hidden state (`row_state`), world RNG included. Bad input raises the errors `ReferenceBatch`
    raises, before any game moves. The first use compiles the kernels (~11 s of CPU; numba caches them on
    disk, so later processes load them in about a second).
    """

    num_envs: int
    """Number of games."""
    view_shape: tuple[int, int]
    """``(view_h, view_w)`` of the symbolic view."""
    area: tuple[int, int]
    """World size ``(width, height)``."""
    geometry: Geometry
    """Sizes the kernels need (chunks, update radius, view, night-noise draws) for this area and view."""
    state: kernels.State
    """Every game's state as arrays (row = game); `row_state` reads one game in crafter's terms."""
    noise_tables: worldgen.NoiseTables | None
    """The traced noise of this area's worlds (`worldgen.noise_tables`, built once per process and area);
    None for ``noise="direct"``."""

    def __init__(
        self,
        num_envs: int,
        area: tuple[int, int] = (64, 64),
        view: tuple[int, int] = (9, 9),
        noise: str = "tables",
    ):
        """``noise``: how resets evaluate the world's simplex noise, both giving crafter's worlds bit for bit:
        ``"tables"`` (default) from `worldgen.noise_tables`, traced once per machine and area (1-5 s, then
        loaded from disk), ~6x cheaper per reset; ``"direct"`` with opensimplex's ``_noise3`` per point (the
        reference the benchmark `bench.worldgen` compares against)."""
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        self.num_envs = int(num_envs)
        self.area = (int(area[0]), int(area[1]))
        if kernels.compiled_digest() != kernels.RULES_DIGEST:
            raise RuntimeError(
                "numba's cached engine was compiled from other crafter rules; delete its cache "
                f"({Path(kernels.__file__).parent / '__pycache__'}, or under NUMBA_CACHE_DIR) and try again"
            )
        self.geometry = make_geometry(self.area, (int(view[0]), int(view[1])))
        self.view_shape = (self.geometry.view_h, self.geometry.view_w)
        self.state = kernels.new_state(self.num_envs, self.area, self.geometry.chunks)
        if noise not in ("tables", "direct"):
            raise ValueError(f"noise must be 'tables' or 'direct', got {noise!r}")
        self.noise_tables = worldgen.noise_tables(*self.area) if noise == "tables" else None
        t = self.noise_tables
        self._tables = worldgen.kernel_tables(t) if t is not None else worldgen.NO_TABLES
        # The resets' temporaries, made once (allocating them per reset cost a tenth of a table reset),
        # for up to _RESET_CHUNK rows at a time.
        k, (w, h) = min(self.num_envs, _RESET_CHUNK), self.area
        self._reset_scratch = _ResetScratch(
            noise=np.empty((k, worldgen._N_PLANES, w, h)),
            minus_start=np.empty((k, w, h)),
            exp_minus_start=np.empty((k, w, h)),
            perms=np.empty((k, 256), np.int64),
            grads=np.empty((k, 256), np.int64),
            gradients=np.empty((k, len(self._tables[3]), 3)),
            tunnels=np.empty((w, h), np.bool_),
            placed=np.empty((w * h, 3), np.int64),
        )
        self._seeds: list[int] = [0] * self.num_envs
        self._episodes = np.zeros(self.num_envs, np.int64)
        self._resets = 0  # calls of `reset`: with a row's episode and step, when its game may have changed
        self._started = False

    # ---------------------------------------------------------------- CrafterBatch

    def reset(self, seeds: Sequence[int]) -> BatchObs:
        """Start every game: row i plays episode 1 of ``seeds[i]``."""
        check_seeds(seeds, self.num_envs)
        seeds = [int(s) for s in seeds]
        if min(seeds) < 0:
            raise ValueError(f"seeds must be non-negative integers, got {min(seeds)}")
        self._seeds = seeds
        self._episodes[:] = 0
        self._resets += 1
        obs = BatchObs.zeros(self.num_envs, self.view_shape)
        self._reset_rows(np.arange(self.num_envs), obs)
        self._started = True
        return obs

    def step(self, actions: np.ndarray) -> BatchStep:
        """Advance every game one primitive step (``actions``: int ``[num_envs]`` in ``[0, 17)``)."""
        actions = check_actions(actions, self.num_envs, self._started)
        n = self.num_envs
        out = BatchStep(
            # The kernel writes every entry.
            np.empty((n, *self.view_shape), np.uint8),
            np.empty((n, len(VECTOR_FIELDS)), np.float32),
            np.empty(n, np.float32),
            np.empty(n, bool),
            np.empty((n, len(ACHIEVEMENTS)), np.int32),
        )
        self._step(np.arange(n), actions, out)
        return out

    def step_rows(self, rows: np.ndarray, actions: np.ndarray, out: BatchStep) -> None:
        """Advance only the games ``rows`` (increasing row indices) one primitive step, game ``rows[j]``
        taking ``actions[j]``, each exactly as if it were stepped alone; their observation, reward, death and
        achievements go into those rows of ``out``, whose other rows are left as they are."""
        rows, actions = check_rows(rows, actions, self.num_envs, self._started)
        self._step(rows, actions, out)

    def _step(self, rows: np.ndarray, actions: np.ndarray, out: BatchStep) -> None:
        if actions.dtype.kind not in "iu":
            raise ValueError(f"actions must be integers, got dtype {actions.dtype}")
        args = (self.geometry.radius, self.geometry.noise, out.view, out.vector, out.reward, out.dead)
        args += (out.achievements,)
        rows, actions = rows.astype(np.int64, copy=False), actions.astype(np.int64, copy=False)
        bad = kernels.step_rows(self.state, rows, actions, _CLOCK.table, *args)
        if bad == kernels.DAYLIGHT_TABLE_SHORT:
            daylight = _CLOCK.cover(int(self.state.game[rows, kernels.STEP].max()) + 1)
            bad = kernels.step_rows(self.state, rows, actions, daylight, *args)
        if bad >= 0:
            raise ValueError(f"action must be in [0, {len(ACTION_NAMES)}), got {actions[bad]}")

    def reset_done(self, done: np.ndarray, obs: BatchObs) -> None:
        """Start the next episode of the games where ``done`` is set, writing their first observation into
        those rows of ``obs``."""
        if not self._started:
            raise RuntimeError("reset_done called before reset(); call reset(seeds) first")
        done = np.asarray(done)
        if done.shape != (self.num_envs,):
            raise ValueError(f"done must have shape ({self.num_envs},), got {done.shape}")
        rows = np.flatnonzero(done)
        if len(rows):
            self._reset_rows(rows, obs)

    def row_version(self, row: int) -> tuple[int, int, int]:
        """A value that changes whenever game ``row`` may have changed (a step, a reset), for readers that
        cache what they read of it (`rlgpt.macro.views.EngineView`)."""
        return self._resets, int(self._episodes[row]), int(self.state.game[row, kernels.STEP])

    # ---------------------------------------------------------------- internals

    def _reset_rows(self, rows: np.ndarray, obs: BatchObs) -> None:
        """``CrafterEnv.reset`` (each row's seed's next episode) of ``rows``; observations into ``obs``."""
        rows = rows.astype(np.int64)
        self._episodes[rows] += 1
        seeds = np.array([world_seed(self._seeds[i], int(self._episodes[i])) for i in rows], np.int64)
        S, tables, r = self.state, self._tables, self._reset_scratch
        daylight0 = _CLOCK.cover(0)[0]
        for lo in range(0, len(rows), _RESET_CHUNK):
            part, k = rows[lo : lo + _RESET_CHUNK], len(rows[lo : lo + _RESET_CHUNK])
            kernels.reset_noise(
                S.key, S.pos, part, seeds[lo : lo + _RESET_CHUNK], _GRAD_LEN, tables, r.noise, r.minus_start,
                r.perms, r.grads, r.gradients,
            )  # fmt: skip
            # crafter's generator applies numpy's exp (numba's differs in the last bit now and then).
            np.exp(r.minus_start[:k], out=r.exp_minus_start[:k])
            kernels.reset_world(
                S, part, r.perms, r.grads, tables, r.gradients, r.noise, r.exp_minus_start, _WORLDGEN_IDS,
                r.tunnels, r.placed, daylight0, self.geometry.noise, obs.view, obs.vector,
            )  # fmt: skip

    def row_state(self, row: int) -> dict[str, Any]:
        """The hidden state of game ``row`` in crafter's terms, for checking it against a crafter world.

        ``materials`` (crafter's ``_mat_map``), ``objects`` (live objects in crafter's order: kind, x, y,
        health, then the zombie's cooldown / skeleton's reload / plant's growth / arrow's facing),
        ``inventory`` and ``achievements`` (dicts), the player's ``facing``, ``sleeping`` and counters,
        ``step``, ``daylight``, ``chunks`` (chunk keys in the order of crafter's chunk dict) and ``rng``
        (key, position) as ``RandomState.get_state()`` gives them.
        """
        S, e = self.state, int(row)
        game = S.game[e]
        objects = []
        for rec in S.objs[e, : game[kernels.NOBJ]].tolist():
            if rec[kernels.REMOVED]:
                continue
            kind = KINDS[rec[kernels.KIND]]
            extra: tuple[int, ...] = ()
            if kind in ("zombie", "skeleton", "plant"):
                extra = (rec[kernels.COUNTER],)
            elif kind == "arrow":
                extra = (rec[kernels.FX], rec[kernels.FY])
            health = int(game[kernels.INV + RULES.health]) if kind == "player" else rec[kernels.HEALTH]
            objects.append((kind, rec[kernels.X], rec[kernels.Y], health, *extra))
        chunks = []
        order = game[kernels.CHUNK_SEEN + self.geometry.chunks :]
        for cid in order[: game[kernels.NCHUNKS]]:
            xmin = int(cid // self.geometry.chunks_y) * CHUNK[0]
            ymin = int(cid % self.geometry.chunks_y) * CHUNK[1]
            xmax, ymax = min(xmin + CHUNK[0], self.area[0]), min(ymin + CHUNK[1], self.area[1])
            chunks.append((xmin, xmax, ymin, ymax))
        inventory = game[kernels.INV : kernels.INV + len(ITEMS)]
        achievements = game[kernels.ACH : kernels.ACH + len(ACHIEVEMENTS)]
        flt = S.flt[e]
        return {
            "materials": S.mat[e].copy(),
            "objects": objects,
            "inventory": {name: int(v) for name, v in zip(ITEMS, inventory, strict=True)},
            "achievements": {name: int(v) for name, v in zip(ACHIEVEMENTS, achievements, strict=True)},
            "facing": (int(game[kernels.FACE_X]), int(game[kernels.FACE_Y])),
            "sleeping": bool(game[kernels.SLEEPING]),
            "last_health": int(game[kernels.LAST_HEALTH]),
            "hunger": float(flt[kernels.HUNGER]),
            "thirst": float(flt[kernels.THIRST]),
            "fatigue": int(game[kernels.FATIGUE]),
            "recover": float(flt[kernels.RECOVER]),
            "step": int(game[kernels.STEP]),
            "daylight": float(flt[kernels.DAYLIGHT]),
            "chunks": chunks,
            "rng": (S.key[e].copy(), int(S.pos[e])),
        }
