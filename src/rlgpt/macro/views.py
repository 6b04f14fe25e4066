"""Where `rlgpt.macro.api.GameAPI` reads the game: a small `GameView` interface and its two implementations.

`GameAPI` is defined once, over this interface: `CrafterView` reads crafter's Python objects (a
`crafter.Env`, as `CrafterEnv` plays it), `EngineView` reads one row of the compiled engine's state arrays
(`rlgpt.envs.engine.CompiledBatch`). Both answer in the same terms (ints, names, the local view as two
arrays, `rlgpt.macro.queries`), so every query of the API, and every control primitive built on it, gives
the same answer on a game and on the engine row that plays it (tests/macro/test_views.py checks it over
many states).
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any, Protocol

import crafter
import numpy as np

from rlgpt.envs.crafter import ITEMS
from rlgpt.envs.engine import CompiledBatch, kernels
from rlgpt.envs.tasks import ACHIEVEMENTS
from rlgpt.macro.queries import engine_window

OBJECT_KINDS: tuple[str, ...] = ("player", "cow", "zombie", "skeleton", "arrow", "plant", "fence")
"""Kinds of creatures/objects that can stand on a tile (crafter's object classes, in its semantic order)."""
_KIND_CODES = {kind: i + 1 for i, kind in enumerate(OBJECT_KINDS)}
_ITEM_COLUMNS = {name: kernels.INV + i for i, name in enumerate(ITEMS)}
_ACHIEVEMENT_COLUMNS = {name: kernels.ACH + i for i, name in enumerate(ACHIEVEMENTS)}


class GameView(Protocol):
    """What `GameAPI` reads of one game; every value is a plain-Python copy."""

    view_size: tuple[int, int]
    """``(width, height)`` of the local view, in tiles."""

    def version(self) -> Hashable:
        """A value that changes whenever the game may have changed (a step, a reset)."""
        ...

    def pos(self) -> tuple[int, int]:
        """The player's position."""
        ...

    def facing(self) -> tuple[int, int]:
        """The player's facing direction."""
        ...

    def inventory(self) -> dict[str, int]:
        """Inventory counts (health, food, drink, energy included), in crafter's item order."""
        ...

    def item(self, name: str) -> int:
        """One inventory count, 0 for names that are no item."""
        ...

    def achievements(self) -> dict[str, int]:
        """Achievement counts, in crafter's order."""
        ...

    def achievement(self, name: str) -> int:
        """One achievement count, 0 for names that are no achievement."""
        ...

    def sleeping(self) -> bool:
        """Whether the player sleeps."""
        ...

    def daylight(self) -> float:
        """crafter's daylight."""
        ...

    def area(self) -> tuple[int, int]:
        """``(width, height)`` of the whole world, in tiles."""
        ...

    def window(self, x0: int, y0: int, mat: np.ndarray, obj: np.ndarray) -> None:
        """Fill the view arrays (`rlgpt.macro.queries`) of the tiles from ``(x0, y0)`` on."""
        ...


class CrafterView:
    """A `crafter.Env`'s game, read from crafter's objects."""

    __slots__ = ("game", "view_size")

    def __init__(self, game: crafter.Env) -> None:
        self.game = game
        grid = game._local_view._grid
        self.view_size = (int(grid[0]), int(grid[1]))

    def version(self) -> Hashable:
        game = self.game
        # crafter's step counter restarts at 0 every episode (and a seeded reset repeats its episode number),
        # so the step alone would serve the previous episode's view; each reset creates a new player object.
        # Holding the player keeps it alive, so a new episode's player can never be mistaken for it (objects
        # compare by identity).
        return game._player, game._step

    def pos(self) -> tuple[int, int]:
        p = self.game._player.pos
        return int(p[0]), int(p[1])

    def facing(self) -> tuple[int, int]:
        f = self.game._player.facing
        return int(f[0]), int(f[1])

    def inventory(self) -> dict[str, int]:
        return {k: int(v) for k, v in self.game._player.inventory.items()}

    def item(self, name: str) -> int:
        return int(self.game._player.inventory.get(name, 0))

    def achievements(self) -> dict[str, int]:
        return {k: int(v) for k, v in self.game._player.achievements.items()}

    def achievement(self, name: str) -> int:
        return int(self.game._player.achievements.get(name, 0))

    def sleeping(self) -> bool:
        return bool(self.game._player.sleeping)

    def daylight(self) -> float:
        return float(self.game._world.daylight)

    def area(self) -> tuple[int, int]:
        w, h = self.game._world.area
        return int(w), int(h)

    def window(self, x0: int, y0: int, mat: np.ndarray, obj: np.ndarray) -> None:
        world = self.game._world
        w, h = mat.shape
        area_w, area_h = world.area
        mat[:] = 0
        obj[:] = 0
        xa, xb, ya, yb = max(x0, 0), min(x0 + w, area_w), max(y0, 0), min(y0 + h, area_h)
        if xa >= xb or ya >= yb:
            return
        # crafter's material ids are 1 + the index in MATERIALS, as the view arrays hold them.
        mat[xa - x0 : xb - x0, ya - y0 : yb - y0] = world._mat_map[xa:xb, ya:yb]
        window = world._obj_map[xa:xb, ya:yb]
        for ix, iy in zip(*window.nonzero(), strict=True):
            kind = type(world._objects[window[ix, iy]]).__name__.lower()
            obj[xa - x0 + ix, ya - y0 + iy] = _KIND_CODES[kind]


class EngineView:
    """Row ``row`` of a `CompiledBatch`, read from its state arrays."""

    __slots__ = ("batch", "row", "view_size", "_game", "_objs")

    def __init__(self, batch: CompiledBatch, row: int) -> None:
        if not 0 <= row < batch.num_envs:
            raise ValueError(f"row must be in [0, {batch.num_envs}), got {row}")
        self.batch, self.row = batch, int(row)
        self.view_size = (batch.geometry.view_w, batch.geometry.view_h)
        self._game = batch.state.game[self.row]  # views of the row's records (the arrays never move)
        self._objs = batch.state.objs[self.row]

    def version(self) -> Hashable:
        return self.batch.row_version(self.row)

    def pos(self) -> tuple[int, int]:
        player = self._objs[0]  # the player is record 0, never removed
        return int(player[kernels.X]), int(player[kernels.Y])

    def facing(self) -> tuple[int, int]:
        return int(self._game[kernels.FACE_X]), int(self._game[kernels.FACE_Y])

    def inventory(self) -> dict[str, int]:
        return dict(zip(ITEMS, self._game[kernels.INV : kernels.INV + len(ITEMS)].tolist(), strict=True))

    def item(self, name: str) -> int:
        column = _ITEM_COLUMNS.get(name)
        return 0 if column is None else int(self._game[column])

    def achievements(self) -> dict[str, int]:
        counts = self._game[kernels.ACH : kernels.ACH + len(ACHIEVEMENTS)].tolist()
        return dict(zip(ACHIEVEMENTS, counts, strict=True))

    def achievement(self, name: str) -> int:
        column = _ACHIEVEMENT_COLUMNS.get(name)
        return 0 if column is None else int(self._game[column])

    def sleeping(self) -> bool:
        return bool(self._game[kernels.SLEEPING])

    def daylight(self) -> float:
        return float(self.batch.state.flt[self.row, kernels.DAYLIGHT])

    def area(self) -> tuple[int, int]:
        _, w, h = self.batch.state.mat.shape
        return int(w), int(h)

    def window(self, x0: int, y0: int, mat: np.ndarray, obj: np.ndarray) -> None:
        S = self.batch.state
        engine_window(S.mat, S.omap, S.objs, self.row, x0, y0, kernels.KIND, mat, obj)


def as_view(game: Any) -> GameView:
    """``game`` as a `GameView`: a `crafter.Env` gets a `CrafterView`; a view is itself."""
    if isinstance(game, crafter.Env):
        return CrafterView(game)
    if isinstance(game, CrafterView | EngineView):
        return game
    raise TypeError(f"GameAPI reads a crafter.Env or a GameView, got {type(game).__name__}")


def batch_views(batch: Any) -> list[GameView]:
    """One view per row of a `rlgpt.envs.batch.CrafterBatch`: an `EngineView` of a `CompiledBatch`'s rows, a
    `CrafterView` of each game of a batch of `CrafterEnv`s (``batch.envs``, `ReferenceBatch`)."""
    if isinstance(batch, CompiledBatch):
        return [EngineView(batch, row) for row in range(batch.num_envs)]
    envs = getattr(batch, "envs", None)
    if envs is None:
        raise TypeError(f"macros cannot read the games of a {type(batch).__name__}")
    return [CrafterView(env.crafter) for env in envs]
