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
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import crafter
import numpy as np
from crafter import constants

from rlgpt.envs.crafter import ACTION_NAMES, MATERIALS, MOVES  # a macro yields an action per step
from rlgpt.macro import control
from rlgpt.macro.diagnostics import describe_value
from rlgpt.macro.queries import find_tiles, first_step, warm_up
from rlgpt.macro.views import OBJECT_KINDS, GameView, as_view

WALKABLE: frozenset[str] = frozenset(constants.walkable)
"""Materials the player can walk on (when no object stands there)."""

_MOVE_ACTIONS: tuple[str, ...] = tuple(MOVES.values())
_NAMES: tuple[str | None, ...] = (None, *MATERIALS)
"""Material name of each id of the view arrays (0: outside the world)."""
_CODES = {name: i + 1 for names in (MATERIALS, OBJECT_KINDS) for i, name in enumerate(names)}
"""Id of each material and object kind in the view arrays (`rlgpt.macro.queries`)."""
_WALKABLE_NAMES: tuple[bool, ...] = tuple(name in WALKABLE for name in _NAMES)
"""Whether each material id of the view arrays is walkable."""
_WALKABLE_IDS = np.array(_WALKABLE_NAMES, np.bool_)
_EVERY_TILE = 1 << 30
"""`find_tiles`'s limit when every match is wanted."""

_ITEMS = frozenset(constants.items)
"""Every inventory item name (`GameAPI.item`), vitals included."""


def _pos(value: Any, what: str = "position") -> tuple[int, int]:
    """Validate an (x, y) pair of ints coming from macro code."""
    if type(value) in (tuple, list) and len(value) == 2 and type(value[0]) is int and type(value[1]) is int:
        return value[0], value[1]
    raise TypeError(f"{what} must be an (x, y) pair of ints, got {describe_value(value, 40)}")


def _kinds(value: Any) -> tuple[str, ...] | None:
    """The kinds a position argument names instead of a tile: ``"tree"`` or ``("grass", "sand")`` (each
    checked by `_kind`); None when `value` is not a name or a sequence of names (then it is a position).

    Small models write ``game.is_facing("stone")`` and ``game.step_toward(("grass", "path"))`` as often as
    the documented position form; the name says what they mean, so the queries that take a tile take it too.
    """
    if type(value) is str:
        return (_kind(value),)
    if type(value) in (tuple, list) and value and all(type(v) is str for v in value):
        # Each distinct kind once: a query searches the view per kind, and a macro's 100,000-item list of
        # one name must cost one search, not a second of them.
        return tuple(dict.fromkeys(_kind(v) for v in value))
    return None


def kind_error(name: str) -> str:
    """Why the queries refuse `name` as a tile material or object kind ("" when they take it); the compiler
    checks a written name with the same words (`rlgpt.macro.validate`)."""
    return "" if name in MATERIALS or name in OBJECT_KINDS else control.not_a_kind(name[:40])


def item_error(name: str) -> str:
    """Why `GameAPI.item` refuses `name` ("" when it is an inventory item); the compiler checks a written
    name with the same words."""
    return "" if name in _ITEMS else control.not_an_item(name)


def _kind(value: Any) -> str:
    if type(value) is not str:
        raise ValueError(
            f"unknown kind {describe_value(value, 40)}; use one of game.materials or game.object_kinds"
        )
    if error := kind_error(value):
        raise ValueError(error)
    return value


class GameAPI:
    """Read-only view of the game for macro code (see the module docstring for the conventions)."""

    __slots__ = (
        "_view",
        "_rng",
        "_cache_key",
        "_mat",
        "_obj",
        "_found",
        "_lists",
        "_origin",
        "_size",
        "_work",
        "_failure",
        "_stations",
        "steps",
        "last_reward",
    )

    actions: tuple[str, ...] = ACTION_NAMES
    """Primitive action names a macro may yield."""
    materials: tuple[str, ...] = MATERIALS
    """Names of tile materials."""
    object_kinds: tuple[str, ...] = OBJECT_KINDS
    """Names of object kinds."""

    def __init__(self, game: crafter.Env | GameView, rng: random.Random) -> None:
        """``game``: a `crafter.Env` (as `CrafterEnv` plays it) or a `rlgpt.macro.views.GameView` (a row of
        the compiled engine): the API answers the same for both."""
        warm_up()  # compiled queries are ready before any macro code runs (its clock must not pay for it)
        self._view = as_view(game)
        self._rng = rng
        self._cache_key: Any = None
        self._size = self._view.view_size
        self._mat = np.zeros(self._size, np.uint8)
        self._obj = np.zeros(self._size, np.uint8)
        self._found = np.zeros((self._size[0] * self._size[1], 2), np.int64)
        self._lists: tuple[list[list[int]], list[list[int]]] | None = None
        self._origin = (0, 0)
        # Element work (tiles looked at) of the searches: the sandbox charges macro code for it.
        self._work = 0
        self._failure = ""
        # Where a station (table, furnace) was last seen in the episode (`control.craft_item` walks back).
        self._stations: dict[str, tuple[int, int]] = {}
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

    def _new_episode(self) -> None:
        """The game started an episode (a reset, or a restored start state): the last episode's station
        memory is forgotten and the world's stations recalled (`control.recall_stations`). Whoever resets
        the game calls it; a game object lives across the episodes of its env."""
        control.recall_stations(self)

    def _refresh(self) -> None:
        key = self._view.version()
        if key == self._cache_key:
            return
        px, py = self._view.pos()
        w, h = self._size
        x0, y0 = px - w // 2, py - h // 2
        self._view.window(x0, y0, self._mat, self._obj)
        self._lists = None
        self._origin = (x0, y0)
        self._cache_key = key

    def _grids(self) -> tuple[list[list[int]], list[list[int]]]:
        """The view arrays as nested lists, made on first use after a refresh: the searches read the arrays,
        per-tile lookups from Python (the control primitives make hundreds a step) are faster on lists."""
        if self._lists is None:
            self._lists = (self._mat.tolist(), self._obj.tolist())
        return self._lists

    def _visible(self, x: int, y: int) -> bool:
        ox, oy = self._origin
        return 0 <= x - ox < self._size[0] and 0 <= y - oy < self._size[1]

    def _material(self, x: int, y: int) -> str | None:
        if not self._visible(x, y):
            return None
        return _NAMES[self._grids()[0][x - self._origin[0]][y - self._origin[1]]]

    def _object(self, x: int, y: int) -> str | None:
        if not self._visible(x, y):
            return None
        kind = self._grids()[1][x - self._origin[0]][y - self._origin[1]]
        return OBJECT_KINDS[kind - 1] if kind else None

    def _free(self, x: int, y: int) -> bool:
        if not self._visible(x, y):
            return False
        mat, obj = self._grids()
        i, j = x - self._origin[0], y - self._origin[1]
        return _WALKABLE_NAMES[mat[i][j]] and not obj[i][j]

    # ------------------------------------------------------------------ player state

    @property
    def pos(self) -> tuple[int, int]:
        """Player position (x, y)."""
        return self._view.pos()

    @property
    def facing(self) -> tuple[int, int]:
        """Direction the player faces, one of (-1,0) (0,1) (1,0) (0,-1)."""
        return self._view.facing()

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
        return MappingProxyType(self._view.inventory())

    @property
    def achievements(self) -> Mapping[str, int]:
        """Read-only copy of achievement counts."""
        return MappingProxyType(self._view.achievements())

    def item(self, name: str) -> int:
        """Count of one inventory item (ValueError for any other name)."""
        if type(name) is not str:
            raise TypeError(f"item name must be a str, got {type(name).__name__}")
        if name not in _ITEMS:
            # Measured: `while game.item("tree") < 1` (always 0) kept the 1.5B's get_wood collecting until
            # the step bound, every call; an error names the line and the item the tree gives.
            raise ValueError(control.not_an_item(name))
        return self._view.item(name)

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
        return self._view.sleeping()

    @property
    def daylight(self) -> float:
        """Daylight in [0, 1]."""
        return self._view.daylight()

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
        w, h = self._size
        self._work += w * h
        mat, obj = self._grids()
        return tuple(
            tuple(OBJECT_KINDS[obj[i][j] - 1] if obj[i][j] else _NAMES[mat[i][j]] for i in range(w))
            for j in range(h)
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
        return self._object(*_pos(pos))

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

    def _find(
        self, kind: str, include_own_tile: bool, limit: int = _EVERY_TILE
    ) -> tuple[tuple[int, int], ...]:
        self._refresh()
        kind = _kind(kind)
        (x0, y0), (px, py) = self._origin, self.pos
        is_object = kind in OBJECT_KINDS
        grid = self._obj if is_object else self._mat
        # Only a material of the player's own tile is left out: the player object stands there.
        skip_own = not include_own_tile and not is_object
        n, work = find_tiles(grid, _CODES[kind], px - x0, py - y0, skip_own, limit, self._found)
        self._work += work
        return tuple([(x0 + i, y0 + j) for i, j in self._found[:n].tolist()])

    def nearest(self, kind: str) -> tuple[int, int] | None:
        """Nearest visible tile holding ``kind`` (material or object), or None if none is visible."""
        found = self._find(kind, include_own_tile=False, limit=1)
        return found[0] if found else None

    def distance(self, pos: tuple[int, int]) -> int:
        """Manhattan distance from the player to a tile."""
        (x, y), (px, py) = _pos(pos), self.pos
        return abs(x - px) + abs(y - py)

    def _holds(self, tile: tuple[int, int], kinds: tuple[str, ...]) -> bool:
        return self.material_at(tile) in kinds or self.object_at(tile) in kinds

    def _next_to(self, kinds: tuple[str, ...]) -> tuple[int, int] | None:
        """The first of the player's four neighbours (in `MOVES` order) holding one of `kinds`."""
        px, py = self.pos
        return next(((px + dx, py + dy) for dx, dy in MOVES if self._holds((px + dx, py + dy), kinds)), None)

    def is_adjacent(self, pos: tuple[int, int] | str) -> bool:
        """Whether ``pos`` is one step (up/down/left/right) away; ``pos`` may be a kind or tuple of kinds.

        Given a kind (``"tree"``) or a tuple of kinds instead of a tile: whether one of the four neighbouring
        tiles holds it."""
        kinds = _kinds(pos)
        if kinds is not None:
            return self._next_to(kinds) is not None
        return self.distance(pos) == 1

    def is_facing(self, pos: tuple[int, int] | str) -> bool:
        """Whether the player faces ``pos`` (so ``do`` acts on it); ``pos`` may be a kind or tuple of kinds.

        Given a kind (``"stone"``) or a tuple of kinds instead of a tile: whether the faced tile holds it."""
        kinds = _kinds(pos)
        if kinds is not None:
            return self._holds(self.target, kinds)
        return self.target == _pos(pos)

    def nearby(self, kind: str, distance: int = 1) -> bool:
        """Whether ``kind`` is within ``distance`` tiles in both axes (crafter's rule for ``make_*``)."""
        if type(distance) is not int or not 0 <= distance <= 4:
            raise ValueError("distance must be an int in [0, 4]")
        (px, py) = self.pos
        # Crafter's own rule counts the area around the player including its tile.
        found = self._find(kind, include_own_tile=True)
        return any(abs(x - px) <= distance and abs(y - py) <= distance for x, y in found)

    def face(self, pos: tuple[int, int] | str) -> str:
        """The move turning the player toward an adjacent ``pos`` (onto it if free); ``pos`` may be a kind.

        Given a kind or a tuple of kinds instead of a tile: toward a neighbouring tile that holds it
        (ValueError when none does)."""
        kinds = _kinds(pos)
        if kinds is not None:
            tile = self._next_to(kinds)
            if tile is None:
                raise ValueError(f"face() found no {' or '.join(kinds)} next to the player")
            pos = tile
        (x, y), (px, py) = _pos(pos), self.pos
        step = (x - px, y - py)
        if step not in MOVES:
            raise ValueError(f"face() needs an adjacent tile, {(x, y)} is {abs(step[0]) + abs(step[1])} away")
        return MOVES[step]

    def step_toward(self, pos: tuple[int, int] | str) -> str | None:
        """First action of a shortest walk through visible walkable tiles to face ``pos`` (a tile or a kind).

        Adjacent targets give the turning move (`face`). Returns None when no visible path reaches a
        tile next to the target. Given a kind (``"tree"``) or a tuple of kinds instead of a tile: toward
        the nearest visible tile holding it (None when none is visible).
        """
        self._refresh()
        kinds = _kinds(pos)
        if kinds is not None:
            near = [t for t in (self.nearest(k) for k in kinds) if t is not None]
            if not near:
                return None
            pos = min(near, key=self.distance)
        goal = _pos(pos)
        if self.distance(goal) == 1:
            return self.face(goal)
        (x0, y0), (px, py), (w, h) = self._origin, self.pos, self._size
        gi, gj = goal[0] - x0, goal[1] - y0
        if not (-1 <= gi <= w and -1 <= gj <= h):
            return None  # no tile next to it is in view (and the search takes machine ints)
        move, work = first_step(self._mat, self._obj, _WALKABLE_IDS, px - x0, py - y0, gi, gj)
        self._work += work
        return _MOVE_ACTIONS[move] if move >= 0 else None

    def random_move(self) -> str:
        """A uniformly random move that never steps onto lava (for exploring when nothing useful is visible).

        "noop" when every move would step onto lava.
        """
        # Crafter lets the player walk onto lava and dies there: measured, the model's exploring macros lost
        # whole episodes to it on make_stone_pickaxe. Water and solid tiles only turn the player.
        self._refresh()
        px, py = self.pos
        safe = [action for (dx, dy), action in MOVES.items() if self._material(px + dx, py + dy) != "lava"]
        return self._rng.choice(safe) if safe else "noop"

    def random(self) -> float:
        """A random float in [0, 1) from the macro's own seeded generator."""
        return self._rng.random()

    # ------------------------------------------------------------------ control primitives (yield from)
    # Trusted generators (`rlgpt.macro.control`): each yields actions, stops within max_steps and returns
    # whether it reached its goal. Arguments are checked here, at the call, before any step. Which of them
    # macro code may call is its API level's (`LEVEL_MEMBERS`, enforced by the compiler).

    @property
    def last_failure(self) -> str:
        """Why the last control primitive call returned False ("" when it reached its goal or none ran)."""
        return self._failure

    def gather(self, name: str, n: int = 1, max_steps: int = control.DEFAULT_STEPS) -> control.Actions:
        """Use `yield from`: collect n of a material or item the player can already collect (tree/wood,
        stone, coal, iron, diamond, water/drink, grass/sapling); False if the tool it needs is not held."""
        return control.gather(self, name, n, max_steps)

    def place_item(self, item: str, max_steps: int = control.DEFAULT_STEPS // 4) -> control.Actions:
        """Use `yield from`: place an item the inventory holds (stone, table, furnace, plant) next to the
        player; True if placed, False if the inventory lacks what it uses."""
        return control.place_item(self, item, max_steps)

    def craft_item(self, item: str, max_steps: int = control.DEFAULT_STEPS) -> control.Actions:
        """Use `yield from`: make item (wood_pickaxe, wood_sword, ...) from ingredients the inventory holds,
        next to its station(s), walking to one in view or seen earlier (never building one); True if made."""
        return control.craft_item(self, item, max_steps)

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
        """Use `yield from`: sleep until energy is full or the player is woken; True once rested; False at
        once when energy is already full (crafter lets the player sleep only below that)."""
        return control.rest(self, max_steps)


SLOT_DOCS: dict[str, str] = {  # docs of the members that are plain slots (no docstring of their own)
    "steps": "Primitive steps the running macro has taken so far.",
    "last_reward": "Reward of the last primitive step.",
}

API_MEMBERS: frozenset[str] = frozenset(name for name in dir(GameAPI) if not name.startswith("_"))
"""Public names of `GameAPI` (the attribute allow-list for the game object at the ``expert`` level)."""

API_LEVELS: tuple[str, ...] = ("basic", "primitives", "expert")
"""What macro code may use of the game object (`LEVEL_MEMBERS`), each level a superset of the one before:
``basic``: queries and moves; ``primitives``: also the control primitives (`control.PRIMITIVES`: explore,
walk to, gather what the player can already collect, place what it holds, craft what it has the
ingredients for at a station that exists, attack, drink, eat, rest; each does one thing and says why it
failed in `GameAPI.last_failure`); ``expert``: also `control.EXPERT` (collect/place/craft that solve their
own prerequisites: one call is a whole chain). The prompt documents the level and the compiler enforces it."""
DEPRECATED_LEVELS: dict[str, str] = {"skills": "expert"}
"""Old level names that still load (recorded configs), and the level each means now."""
LEVEL_MEMBERS: dict[str, frozenset[str]] = {
    "basic": API_MEMBERS - {*control.GENERATORS, "last_failure"},
    "primitives": API_MEMBERS - set(control.EXPERT),
    "expert": API_MEMBERS,
}
"""The `GameAPI` members macro code may use at each API level."""


def api_level(name: str) -> str:
    """The API level `name` means (a deprecated name maps to its level); ValueError for an unknown one."""
    level = DEPRECATED_LEVELS.get(name, name)
    if level not in API_LEVELS:
        raise ValueError(f"api level must be one of {', '.join(API_LEVELS)}, got {name!r}")
    return level
