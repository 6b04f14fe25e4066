"""`GameAPI`: the only object macro code sees - a read-only view of the Crafter game around the player.

Coordinates are absolute world tiles ``(x, y)``: x grows to the right, y grows downwards ("up" is
``(0, -1)``). Queries only see the player's local view (the tiles crafter draws, 9x7 by default), as a
player would; tiles outside it read as ``None``. Every value returned is a fresh plain-Python copy (ints,
strings, tuples, read-only mappings), never a live game object, so macro code cannot change the game
except by yielding actions.

A macro is a generator function taking this object::

    def collect_wood(game):
        while game.inventory["wood"] < 1:
            tree = game.nearest("tree")
            if tree is None:
                yield game.random_move()
            elif game.is_facing(tree):
                yield "do"
            else:
                yield game.step_toward(tree)
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import crafter
from crafter import constants

from rlgpt.envs.crafter import ACTION_NAMES, MATERIALS, MOVES  # a macro yields an action per step
from rlgpt.macro import control
from rlgpt.macro.diagnostics import describe_value

OBJECT_KINDS: tuple[str, ...] = ("player", "cow", "zombie", "skeleton", "arrow", "plant", "fence")
"""Kinds of creatures/objects that can stand on a tile."""
WALKABLE: frozenset[str] = frozenset(constants.walkable)
"""Materials the player can walk on (when no object stands there)."""

_MOVE_ACTIONS: tuple[str, ...] = tuple(MOVES.values())


def _pos(value: Any, what: str = "position") -> tuple[int, int]:
    """Validate an (x, y) pair of ints coming from macro code."""
    if type(value) in (tuple, list) and len(value) == 2 and type(value[0]) is int and type(value[1]) is int:
        return value[0], value[1]
    raise TypeError(f"{what} must be an (x, y) pair of ints, got {describe_value(value, 40)}")


def _kind(value: Any) -> str:
    if type(value) is not str or (value not in MATERIALS and value not in OBJECT_KINDS):
        raise ValueError(
            f"unknown kind {describe_value(value, 40)}; use one of game.materials or game.object_kinds"
        )
    return value


class GameAPI:
    """Read-only view of the game for macro code (see the module docstring for the conventions)."""

    __slots__ = (
        "_game",
        "_rng",
        "_cache_key",
        "_tiles",
        "_objects",
        "_origin",
        "_size",
        "steps",
        "last_reward",
    )

    actions: tuple[str, ...] = ACTION_NAMES
    """Primitive action names a macro may yield."""
    materials: tuple[str, ...] = MATERIALS
    """Names of tile materials."""
    object_kinds: tuple[str, ...] = OBJECT_KINDS
    """Names of object kinds."""

    def __init__(self, game: crafter.Env, rng: random.Random) -> None:
        self._game = game
        self._rng = rng
        self._cache_key: tuple[Any, int] | None = None
        self._tiles: list[list[int]] = []
        self._objects: dict[tuple[int, int], str] = {}
        self._origin = (0, 0)
        grid = game._local_view._grid
        self._size = (int(grid[0]), int(grid[1]))
        self.steps = 0
        self.last_reward = 0.0

    def __setattr__(self, name: str, value: Any) -> None:
        if name.startswith("_") or name in ("steps", "last_reward"):
            object.__setattr__(self, name, value)
            return
        raise AttributeError(f"GameAPI is read-only; cannot set {name!r}")

    def __repr__(self) -> str:
        return "<GameAPI>"

    # ------------------------------------------------------------------ internals (not visible to macros)

    def _refresh(self) -> None:
        game = self._game
        # crafter's step counter restarts at 0 every episode (and a seeded reset repeats its episode number),
        # so the step alone would serve the previous episode's view; each reset creates a new player object.
        # Holding the player keeps it alive, so a new episode's player can never be mistaken for it.
        key = (game._player, game._step)
        if self._cache_key is not None and self._cache_key[0] is key[0] and self._cache_key[1] == key[1]:
            return
        world = game._world
        px, py = (int(v) for v in game._player.pos)
        w, h = self._size
        x0, y0 = px - w // 2, py - h // 2
        area_w, area_h = world.area
        names = world._mat_names
        tiles = [[None] * h for _ in range(w)]
        xa, xb, ya, yb = max(x0, 0), min(x0 + w, area_w), max(y0, 0), min(y0 + h, area_h)
        if xa < xb and ya < yb:
            block = world._mat_map[xa:xb, ya:yb].tolist()
            for i, column in enumerate(block):
                tiles[xa - x0 + i][ya - y0 : yb - y0] = [names[m] for m in column]
            objs: dict[tuple[int, int], str] = {}
            window = world._obj_map[xa:xb, ya:yb]
            for ix, iy in zip(*window.nonzero(), strict=True):
                obj = world._objects[window[ix, iy]]
                objs[(xa + int(ix), ya + int(iy))] = type(obj).__name__.lower()
            self._objects = objs
        else:
            self._objects = {}
        self._tiles = tiles
        self._origin = (x0, y0)
        self._cache_key = key

    def _visible(self, x: int, y: int) -> bool:
        ox, oy = self._origin
        return 0 <= x - ox < self._size[0] and 0 <= y - oy < self._size[1]

    def _material(self, x: int, y: int) -> str | None:
        if not self._visible(x, y):
            return None
        return self._tiles[x - self._origin[0]][y - self._origin[1]]

    def _free(self, x: int, y: int) -> bool:
        return self._material(x, y) in WALKABLE and (x, y) not in self._objects

    # ------------------------------------------------------------------ player state

    @property
    def pos(self) -> tuple[int, int]:
        """Player position (x, y)."""
        p = self._game._player.pos
        return int(p[0]), int(p[1])

    @property
    def facing(self) -> tuple[int, int]:
        """Direction the player faces, one of (-1,0) (0,1) (1,0) (0,-1)."""
        f = self._game._player.facing
        return int(f[0]), int(f[1])

    @property
    def target(self) -> tuple[int, int]:
        """The tile the player faces (what ``do``/``place_*`` act on)."""
        (x, y), (dx, dy) = self.pos, self.facing
        return x + dx, y + dy

    @property
    def target_material(self) -> str | None:
        """Material of the faced tile."""
        return self.material_at(self.target)

    @property
    def target_object(self) -> str | None:
        """Kind of object on the faced tile, or None."""
        return self.object_at(self.target)

    @property
    def inventory(self) -> Mapping[str, int]:
        """Read-only copy of the inventory (item name -> count), incl. health/food/drink/energy."""
        return MappingProxyType({k: int(v) for k, v in self._game._player.inventory.items()})

    @property
    def achievements(self) -> Mapping[str, int]:
        """Read-only copy of achievement counts."""
        return MappingProxyType({k: int(v) for k, v in self._game._player.achievements.items()})

    def item(self, name: str) -> int:
        """Count of one inventory item (0 for unknown names)."""
        if type(name) is not str:
            raise TypeError(f"item name must be a str, got {type(name).__name__}")
        return int(self._game._player.inventory.get(name, 0))

    @property
    def health(self) -> int:
        """Health points (0-9)."""
        return self.item("health")

    @property
    def food(self) -> int:
        """Food points (0-9)."""
        return self.item("food")

    @property
    def drink(self) -> int:
        """Drink points (0-9)."""
        return self.item("drink")

    @property
    def energy(self) -> int:
        """Energy points (0-9)."""
        return self.item("energy")

    @property
    def sleeping(self) -> bool:
        """Whether the player sleeps."""
        return bool(self._game._player.sleeping)

    @property
    def daylight(self) -> float:
        """Daylight in [0, 1]."""
        return float(self._game._world.daylight)

    # ------------------------------------------------------------------ local view queries

    @property
    def view_bounds(self) -> tuple[tuple[int, int], tuple[int, int]]:
        """((xmin, ymin), (xmax, ymax)) of the visible tiles, inclusive."""
        self._refresh()
        (x0, y0), (w, h) = self._origin, self._size
        return (x0, y0), (x0 + w - 1, y0 + h - 1)

    def view(self) -> tuple[tuple[str | None, ...], ...]:
        """Visible tiles as rows (top to bottom) of names: object kind if any, else material."""
        self._refresh()
        (x0, y0), (w, h) = self._origin, self._size
        return tuple(
            tuple(self._objects.get((x0 + i, y0 + j), self._tiles[i][j]) for i in range(w)) for j in range(h)
        )

    def is_visible(self, pos: tuple[int, int]) -> bool:
        """Whether a tile is inside the local view."""
        self._refresh()
        return self._visible(*_pos(pos))

    def material_at(self, pos: tuple[int, int]) -> str | None:
        """Material of a visible tile (None when not visible)."""
        self._refresh()
        return self._material(*_pos(pos))

    def object_at(self, pos: tuple[int, int]) -> str | None:
        """Kind of the object on a visible tile, or None."""
        self._refresh()
        x, y = _pos(pos)
        return self._objects.get((x, y)) if self._visible(x, y) else None

    def is_walkable(self, pos: tuple[int, int]) -> bool:
        """Whether the player could step onto a visible tile now."""
        self._refresh()
        return self._free(*_pos(pos))

    def find(self, kind: str) -> tuple[tuple[int, int], ...]:
        """Visible tiles holding a material or object of ``kind``, nearest (Manhattan) first.

        The material under the player is left out: the player cannot face, walk to or act on its own tile,
        so "the nearest grass" is a tile next to the player, never the one it stands on.
        """
        return self._find(kind, include_own_tile=False)

    def _find(self, kind: str, include_own_tile: bool) -> tuple[tuple[int, int], ...]:
        self._refresh()
        kind = _kind(kind)
        (x0, y0), (w, h) = self._origin, self._size
        px, py = self.pos
        if kind in OBJECT_KINDS:
            found = [p for p, k in self._objects.items() if k == kind]
        else:
            found = [(x0 + i, y0 + j) for i in range(w) for j in range(h) if self._tiles[i][j] == kind]
            if not include_own_tile:
                found = [p for p in found if p != (px, py)]
        found.sort(key=lambda p: (abs(p[0] - px) + abs(p[1] - py), p[1], p[0]))
        return tuple(found)

    def nearest(self, kind: str) -> tuple[int, int] | None:
        """Nearest visible tile holding ``kind`` (material or object), or None if none is visible."""
        found = self.find(kind)
        return found[0] if found else None

    def distance(self, pos: tuple[int, int]) -> int:
        """Manhattan distance from the player to a tile."""
        (x, y), (px, py) = _pos(pos), self.pos
        return abs(x - px) + abs(y - py)

    def is_adjacent(self, pos: tuple[int, int]) -> bool:
        """Whether a tile is one step (up/down/left/right) from the player."""
        return self.distance(pos) == 1

    def is_facing(self, pos: tuple[int, int]) -> bool:
        """Whether the player faces the tile (so ``do`` acts on it)."""
        return self.target == _pos(pos)

    def nearby(self, kind: str, distance: int = 1) -> bool:
        """Whether ``kind`` is within ``distance`` tiles in both axes (crafter's rule for ``make_*``)."""
        if type(distance) is not int or not 0 <= distance <= 4:
            raise ValueError("distance must be an int in [0, 4]")
        (px, py) = self.pos
        # Crafter's own rule counts the area around the player including its tile.
        found = self._find(kind, include_own_tile=True)
        return any(abs(x - px) <= distance and abs(y - py) <= distance for x, y in found)

    def face(self, pos: tuple[int, int]) -> str:
        """The move action that turns the player toward an adjacent tile (moves onto it if walkable)."""
        (x, y), (px, py) = _pos(pos), self.pos
        step = (x - px, y - py)
        if step not in MOVES:
            raise ValueError(f"face() needs an adjacent tile, {(x, y)} is {abs(step[0]) + abs(step[1])} away")
        return MOVES[step]

    def step_toward(self, pos: tuple[int, int]) -> str | None:
        """First action of a shortest walk through visible walkable tiles to face ``pos``.

        Adjacent targets give the turning move (`face`). Returns None when no visible path reaches a
        tile next to the target.
        """
        self._refresh()
        goal = _pos(pos)
        start = self.pos
        if self.distance(goal) == 1:
            return self.face(goal)
        gx, gy = goal
        goals = {(gx + dx, gy + dy) for dx, dy in MOVES if self._free(gx + dx, gy + dy)}
        if not goals:
            return None
        first: dict[tuple[int, int], str] = {start: ""}
        queue = deque([start])
        while queue:
            x, y = queue.popleft()
            for (dx, dy), action in MOVES.items():
                nxt = (x + dx, y + dy)
                if nxt in first or not self._free(*nxt):
                    continue
                first[nxt] = first[(x, y)] or action
                if nxt in goals:
                    return first[nxt]
                queue.append(nxt)
        return None

    def random_move(self) -> str:
        """A uniformly random move action (for exploring when nothing useful is visible)."""
        return self._rng.choice(_MOVE_ACTIONS)

    def random(self) -> float:
        """A random float in [0, 1) from the macro's own seeded generator."""
        return self._rng.random()

    # ------------------------------------------------------------------ control primitives (yield from)
    # Trusted generators (`rlgpt.macro.control`): each yields actions, stops within max_steps and returns
    # whether it reached its goal. Arguments are checked here, at the call, before any step.

    def explore(self, kind: str, max_steps: int = control.DEFAULT_STEPS) -> control.Actions:
        """Use `yield from`: walk (avoiding water and lava) until `kind` is in view; returns True if it is."""
        return control.explore(self, _kind(kind), max_steps)

    def walk_to(self, kind: str, max_steps: int = control.DEFAULT_STEPS) -> control.Actions:
        """Use `yield from`: explore, then walk until facing the nearest reachable `kind`; True if facing."""
        return control.walk_to(self, _kind(kind), max_steps)

    def collect(self, name: str, n: int = 1, max_steps: int = control.DEFAULT_STEPS) -> control.Actions:
        """Use `yield from`: collect n of a material or item (tree/wood, stone, coal, iron, diamond,
        water/drink, grass/sapling), making the pickaxe it needs (and the wood one, which digs stone)
        first."""
        return control.collect(self, name, n, max_steps)

    def place(self, item: str, max_steps: int = control.DEFAULT_STEPS // 4) -> control.Actions:
        """Use `yield from`: place item (stone, table, furnace, plant) next to the player, collecting what it
        uses first if needed; True if placed."""
        return control.place(self, item, max_steps)

    def craft(self, item: str, max_steps: int = control.DEFAULT_STEPS) -> control.Actions:
        """Use `yield from`: collect missing ingredients, go next to (or build) the station(s) the recipe
        needs, then make item (wood_pickaxe, stone_pickaxe, iron_pickaxe, wood_sword, ...); True if made."""
        return control.craft(self, item, max_steps)

    def attack(self, kind: str, max_steps: int = control.DEFAULT_STEPS) -> control.Actions:
        """Use `yield from`: hit the nearest cow, zombie or skeleton until crafter counts it; True if so."""
        return control.attack(self, kind, max_steps)

    def drink_water(self, max_steps: int = control.DEFAULT_STEPS) -> control.Actions:
        """Use `yield from`: walk to water and drink once; True if the player drank."""
        return control.drink_water(self, max_steps)

    def eat(self, max_steps: int = control.DEFAULT_STEPS) -> control.Actions:
        """Use `yield from`: hunt the nearest cow and eat it; True if eaten."""
        return control.eat(self, max_steps)

    def rest(self, max_steps: int = control.DEFAULT_STEPS) -> control.Actions:
        """Use `yield from`: sleep until energy is full or the player is woken; True once rested."""
        return control.rest(self, max_steps)


SLOT_DOCS: dict[str, str] = {  # docs of the members that are plain slots (no docstring of their own)
    "steps": "Primitive steps the running macro has taken so far.",
    "last_reward": "Reward of the last primitive step.",
}

API_MEMBERS: frozenset[str] = frozenset(name for name in dir(GameAPI) if not name.startswith("_"))
"""Public names of `GameAPI` (the attribute allow-list for the game object)."""
