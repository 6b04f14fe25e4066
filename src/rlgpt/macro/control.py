"""Control primitives: trusted, bounded building blocks that generated macros call with ``yield from``.

The embedded 1.5B writes walking-to-X loops well and placing and crafting badly (measured; README). So the
game object offers what a player does in Crafter as ready generators, in the spirit of Voyager's control
primitives: explore until something is in view, walk to it, collect N of a material, place an item,
craft at a station, attack a creature, drink, eat, rest. Generated code composes them::

    def make_pickaxe(game):
        ok = yield from game.gather("wood", 3)
        if ok:
            ok = yield from game.place_item("table")
        if ok:
            ok = yield from game.craft_item("wood_pickaxe")

Two sets (`PRIMITIVES`, `EXPERT`; the API level says which macro code may call, `rlgpt.macro.api`): the
primitives do one thing each and fail at once, saying why (`GameAPI.last_failure`), when a prerequisite is
missing; the expert calls (collect, place, craft) solve their prerequisites first.

Each primitive is a generator of primitive action names that stops after at most ``max_steps`` actions
and returns whether it reached its goal. Goals are counted on crafter's own counters (achievements and
inventory), so a primitive never claims what the game did not record. Every rule (what a material gives
and needs, where an item can be placed, which stations a recipe needs) is read from crafter's data, not
restated here. This is trusted code: it is not instrumented, so it must stay bounded by itself (a
generator ends within ``max_steps`` yields, and each action is decided by searches over the local view, at
most its 63 tiles, and over the tiles seen earlier in the call, a route search stopping at `_ROUTE_MAX` steps
of cost).
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable, Collection, Generator
from typing import TYPE_CHECKING

import numpy as np
from crafter import constants

from rlgpt.envs.crafter import MATERIALS, MOVES

if TYPE_CHECKING:  # the game API imports this module; the type is for readers only
    from rlgpt.macro.api import GameAPI

Actions = Generator[str, None, bool]
"""What every primitive is: yields action names, returns whether its goal was reached."""

MAX_STEPS_CAP = 10_000
"""Largest ``max_steps`` a primitive accepts (the macro's own step bound still applies on top)."""
DEFAULT_STEPS = 100
"""Default step bound of one primitive call."""

_COLLECT = {name: info for name, info in constants.collect.items()}
_ITEM_SOURCE = {item: material for material, info in _COLLECT.items() for item in info["receive"]}
"""Item -> the material that gives it (wood -> tree, drink -> water, sapling -> grass): callers often name
what they want rather than where it comes from."""
_CREATURE_ACHIEVEMENTS = {"cow": "eat_cow", "zombie": "defeat_zombie", "skeleton": "defeat_skeleton",
                          "plant": "eat_plant"}
"""Creature -> the achievement crafter counts when the player's ``do`` finishes it."""
_ENERGY_MAX = constants.items["energy"]["max"]
_WALKABLE = frozenset(constants.walkable)
_HOSTILE = ("zombie", "skeleton")
_LOW = 3
"""Drink or food at which a walk stops to drink or eat (of 9)."""
_FULL = constants.items["drink"]["max"]
_MINED = frozenset(m for m, info in _COLLECT.items() if info["require"])
"""Materials that need a tool to collect (stone, coal, iron, diamond)."""
_MOUNTAIN = _MINED | {"path"}
"""What mountains are made of in crafter's world: the mined materials and the tunnels and caves in them."""
_NIGHT = 0.5
"""Daylight below which zombies crowd the grass (crafter keeps up to 3.5 - 3 * daylight per grassy chunk)."""
_ZOMBIE_GROUND = ("grass",)
"""Where crafter spawns zombies."""
_THREAT = 5
"""Distance within which a zombie or skeleton makes an explorer weigh its heading again every step (a
skeleton shoots from 5 tiles, a zombie walks toward the player from 8)."""
_HEADING_STEPS = 6
"""Steps an explorer keeps a chosen heading before weighing the directions again."""
_LOOKAHEAD = 4
"""Depth (tiles) of the band beyond the view's edge whose unseen tiles make a heading worth taking."""
_STATIONS = tuple(sorted({s for info in constants.make.values() for s in info["nearby"]}))
"""What a recipe needs nearby (table, furnace): `craft_item` walks back to one seen earlier."""
_ROUTE_MAX = 80
"""Dearest way (steps) a route is searched for (bounds the search over the tiles seen in a call)."""


class _Clock:
    """Steps left to one top-level primitive call; nested primitives draw on the same budget."""

    __slots__ = ("left", "start")

    def __init__(self, max_steps: int) -> None:
        if type(max_steps) is not int or not 1 <= max_steps <= MAX_STEPS_CAP:
            raise ValueError(f"max_steps must be an int in [1, {MAX_STEPS_CAP}], got {max_steps!r}")
        self.left = self.start = max_steps

    def tick(self) -> None:
        self.left -= 1


def collect_source(name: str) -> str:
    """The material that gives `name` when collected: a material name is itself; an item name (wood,
    drink, sapling, ...) maps to its source material. Raises ValueError for anything else."""
    if type(name) is not str:
        raise TypeError(f"collect() takes a material or item name, got {type(name).__name__}")
    if name in _COLLECT:
        return name
    if name in _ITEM_SOURCE:
        return _ITEM_SOURCE[name]
    raise ValueError(f"nothing gives {name!r} when collected{_meant(name)}; collectable: "
                     f"{', '.join(sorted({*_COLLECT, *_ITEM_SOURCE}))}")


def goal_sources(goal: str) -> tuple[str, ...]:
    """What the player must reach for `goal` (an achievement or an inventory item), from crafter's data: the
    material collected for it (collect_wood, wood -> tree), the creature finished for it (eat_cow -> cow)
    or the stations its recipe needs nearby (make_stone_pickaxe -> table); () when nothing in particular
    has to be in view (placing, waking up, an unknown name)."""
    creatures = {achievement: creature for creature, achievement in _CREATURE_ACHIEVEMENTS.items()}
    if goal in creatures:
        return (creatures[goal],)
    kind, _, name = goal.partition("_")
    if goal in constants.achievements and kind in ("collect", "make"):
        goal = name
    if goal in _COLLECT or goal in _ITEM_SOURCE:
        return (collect_source(goal),)
    if goal in constants.make:
        return tuple(constants.make[goal]["nearby"])
    return ()


def recipe_action(goal: object) -> str:
    """The make_ or place_ achievement a goal names (``make_wood_pickaxe``, or its item ``wood_pickaxe``);
    "" for a goal that is collected, eaten, ... (``stone`` is collected: its place_ is named so)."""
    if not isinstance(goal, str):
        return ""
    if goal in constants.achievements and goal.partition("_")[0] in ("make", "place"):
        return goal
    return f"make_{goal}" if goal in constants.make else ""


def recipe_gap(goal: str, inventory: dict[str, int]) -> tuple[str, dict[str, int]]:
    """For a goal crafter's recipes make or place (`recipe_action`): its action and what `inventory` lacks of
    what that action uses; ("", {}) for any other goal."""
    action = recipe_action(goal)
    if not action:
        return "", {}
    kind, _, item = action.partition("_")
    uses = (constants.make if kind == "make" else constants.place)[item]["uses"]
    return action, shortfall(lambda k: inventory.get(k, 0), uses)


def link_gap(goal: str, inventory: dict[str, int]) -> dict[str, int]:
    """What `inventory` lacks for a call toward `goal` to reach it: what its recipe uses (`recipe_gap`), or
    the tool that collecting its material requires (stone, coal: a wood_pickaxe); {} for any other goal. A
    chain's earlier links give these (`rlgpt.macro.links.TopUp`)."""
    if recipe_action(goal):
        return recipe_gap(goal, inventory)[1]
    kind, _, name = goal.partition("_")
    item = name if goal in constants.achievements and kind == "collect" else goal
    if item not in _COLLECT and item not in _ITEM_SOURCE:
        return {}
    return shortfall(lambda k: inventory.get(k, 0), _COLLECT[collect_source(item)]["require"])


def placed_only(kind: str) -> bool:
    """Whether tiles of `kind` exist only once the player places them (a table, a furnace: crafter's worlds
    start with none), so no amount of exploring finds one."""
    return kind in constants.place and kind not in constants.collect


def spent_source(goal: str, material: str) -> str | None:
    """The material collected for the goal, or for an item its recipe uses (the wood of a table), that
    collecting turns into `material` (tree for grass, stone for path): a player acting at `material` faces
    a spent tile; None when none does. A call ends at its goal, so a macro spinning at a spent tile is one
    gathering a recipe's input (a place_table macro hitting the grass its first tree became)."""
    _, uses = recipe_gap(goal, {})
    inputs = tuple(collect_source(item) for item in uses if item in _ITEM_SOURCE or item in _COLLECT)
    for source in (*goal_sources(goal), *inputs):
        info = _COLLECT.get(source)
        if info is not None and info["leaves"] == material != source:
            return source
    return None


def _meant(name: str) -> str:
    """The primitive call that does get `name`, for the error of a call that cannot (" (it is collected:
    game.gather('coal'))"); "" for a name nothing gets. The 1.5B crafts or places coal, gathers tables."""
    if name in _COLLECT or name in _ITEM_SOURCE:
        return f" (it is collected: game.gather({name!r}))"
    if name in constants.place:
        return f" (it is placed: game.place_item({name!r}))"
    if name in constants.make:
        return f" (it is crafted: game.craft_item({name!r}))"
    return ""


def not_a_kind(name: str) -> str:
    """Why `name` is no tile material or object kind (the queries' error), and for an item, the material
    that gives it. The 1.5B writes ``game.nearest("wood")`` for the tree it wants."""
    source = _ITEM_SOURCE.get(name)
    hint = (f": {name} is an inventory item, counted by game.item({name!r}); {source!r} is the tile that "
            f"gives it" if source and source != name else "")
    return f"unknown kind {name!r}; use one of game.materials or game.object_kinds{hint}"


def not_an_item(name: str) -> str:
    """Why `name` is no inventory item and what to count instead, from crafter's data (`GameAPI.item`'s
    error): a material names what collecting it gives, a station where it is, an achievement its table."""
    if name in _COLLECT:
        gives = next(iter(_COLLECT[name]["receive"]), "")
        return (f"{name!r} is a material, not an inventory item: collecting {name} gives {gives}, counted "
                f"by game.item({gives!r})")
    if name in constants.place:
        return (f"{name!r} is placed in the world, never held: game.nearest({name!r}) finds one in view")
    if name in constants.achievements:
        return f"{name!r} is an achievement, not an item: game.achievements[{name!r}] counts it"
    return f"{name!r} is no inventory item; items: {', '.join(constants.items)}"


def missing(game: GameAPI, needs: dict[str, int]) -> dict[str, int]:
    """Items of `needs` the player lacks, with how many more it needs."""
    return shortfall(game.item, needs)


def shortfall(count: Callable[[str], int], needs: dict[str, int]) -> dict[str, int]:
    """Items of `needs` that `count` (an item's count) falls short of, with how many more each needs."""
    return {k: v - count(k) for k, v in needs.items() if count(k) < v}


def refusal(game: GameAPI, action: str) -> str:
    """Why crafter refuses the ``make_<item>`` or ``place_<item>`` `action` in `game`'s state, by its
    recipes: what the inventory lacks, the station not nearby, the faced tile it cannot go on ("" for other
    actions, or when crafter would do it). Probe traces show it beside such an action, so that a repair
    prompt says why ``make_wood_pickaxe`` did nothing instead of only that it was pressed."""
    kind, _, item = action.partition("_")
    reasons = []
    if kind == "make" and item in constants.make:
        info = constants.make[item]
        if lacking := missing(game, info["uses"]):
            reasons.append(f"lacks {_listed(lacking)}")
        if away := _stations_away(game, item):
            reasons.append(f"no {' and no '.join(away)} nearby")
    elif kind == "place" and item in constants.place:
        info = constants.place[item]
        if lacking := missing(game, info["uses"]):
            reasons.append(f"lacks {_listed(lacking)}")
        faced = game.target_object or game.target_material or "the world's edge"
        if not _free_for(game, game.target, info["where"]):
            reasons.append(f"faces {faced}, not {' or '.join(info['where'])}")
    return "; ".join(reasons)


def _count(game: GameAPI, achievement: str) -> int:
    return int(game.achievements.get(achievement, 0))


def _fail(game: GameAPI, reason: str) -> bool:
    """Record why a primitive call returns False (`GameAPI.last_failure`, which probes report); False."""
    game._failure = reason
    return False


def _listed(items: dict[str, int]) -> str:
    """``1 wood, 1 stone``."""
    return ", ".join(f"{n} {name}" for name, n in items.items())


def recall_stations(game: GameAPI) -> None:
    """Start the game object's station memory for an episode: forget the last episode's, and note the
    nearest table and furnace the world already holds. Crafter's world generation makes none, so each was
    placed by this player earlier in the episode; a game object that starts mid-episode (a chain's start
    state, restored after the prefix's skills played) then remembers what the prefix built, as one that
    played the whole episode would. Measured: make_stone_pickaxe's skill probed from such states failed
    wherever the prefix's table was out of view (`craft_item` knew of no table and never builds one)."""
    game._stations = {}
    px, py = game._view.pos()
    # The whole world, whatever its size: one read of its material map (4,096 tiles in crafter's default).
    w, h = game._view.area()
    mat, obj = np.zeros((w, h), np.uint8), np.zeros((w, h), np.uint8)
    game._view.window(0, 0, mat, obj)
    for station in _STATIONS:
        # The view arrays hold crafter's material ids: 1 + the index in MATERIALS.
        found = np.argwhere(mat == MATERIALS.index(station) + 1)
        if len(found):
            i, j = min(found.tolist(), key=lambda t: abs(t[0] - px) + abs(t[1] - py))
            game._stations[station] = (i, j)


def _remember_stations(game: GameAPI) -> None:
    """Note where each station (table, furnace) in view is, on the game object, for a later walk back to it
    (`craft_item` never builds one; the memory lasts the episode, as the game object does)."""
    for station in _STATIONS:
        tile = game.nearest(station)
        if tile is not None:
            game._stations[station] = tile


# ------------------------------------------------------------------------------------------ moving around


class _Explorer:
    """Exploring moves that do not wander in circles: it remembers the tiles it has had in view during the
    call and heads (for a few steps at a time) where the most unseen tiles lie just beyond the view, around
    water and lava. Looking for a material that needs a tool (stone, coal, iron, diamond: crafter makes
    them in mountains, with their tunnels and caves) it also leans toward the mountain tiles in view and
    digs through stone when it can. Measured: a heading kept until blocked walked the same meadow for 200
    steps while iron lay 30 steps away, and died there to the night's zombies."""

    __slots__ = ("heading", "seen", "mountain", "left")

    def __init__(self, game: GameAPI, kind: str | None = None) -> None:
        moves = list(MOVES)
        self.heading = moves[int(game.random() * 4) % 4]
        self.seen: dict[tuple[int, int], str | None] = {}
        """Material of every tile had in view during the call (as last seen)."""
        self.mountain = kind in _MINED
        self.left = 0

    def look(self, game: GameAPI) -> None:
        """Remember the tiles in view."""
        self.seen.update((t, game.material_at(t)) for t in _tiles(game))
        _remember_stations(game)

    def step(self, game: GameAPI) -> str:
        self.look(game)
        if self.left <= 0 or self._go(game, self.heading) is None or _hostile_near(game):
            self.heading = self._choose(game)
            self.left = _HEADING_STEPS
        self.left -= 1
        return self._go(game, self.heading) or game.random_move()

    def _choose(self, game: GameAPI) -> tuple[int, int]:
        (x0, y0), (x1, y1) = game.view_bounds
        px, py = game.pos
        mountain = [t for t in _tiles(game) if self.mountain and game.material_at(t) in _MOUNTAIN]
        night = self.mountain and game.daylight < _NIGHT
        hostile = [t for kind in _HOSTILE for t in game.find(kind)]
        best, best_score = self.heading, None
        for dx, dy in MOVES:
            if self._go(game, (dx, dy)) is None:
                continue
            # The band beyond the view's edge; a line whose edge tile lies off the map (no material) is
            # off the map too, never to be seen (seen: a player in a corner of the world went back and
            # forth toward it for 100+ steps).
            if dx:
                ex = x1 if dx > 0 else x0
                xs = range(x1 + 1, x1 + 1 + _LOOKAHEAD) if dx > 0 else range(x0 - _LOOKAHEAD, x0)
                band = [(x, y) for x in xs for y in range(y0, y1 + 1) if game.material_at((ex, y))]
            else:
                ey = y1 if dy > 0 else y0
                ys = range(y1 + 1, y1 + 1 + _LOOKAHEAD) if dy > 0 else range(y0 - _LOOKAHEAD, y0)
                band = [(x, y) for x in range(x0, x1 + 1) for y in ys if game.material_at((x, ey))]
            width = x1 - x0 + 1 if dy else y1 - y0 + 1
            unseen = sum(t not in self.seen for t in band) / (_LOOKAHEAD * width)
            ahead = sum((tx - px) * dx + (ty - py) * dy > 0 for tx, ty in mountain) / 16
            if night:  # zombies spawn and walk on grass: the mountain is where the night is survived
                ahead *= 3
                ahead -= 0.5 * (game.material_at((px + dx, py + dy)) in _ZOMBIE_GROUND)
            toward = sum((tx - px) * dx + (ty - py) * dy > 0 for tx, ty in hostile)
            keep = 0.2 if (dx, dy) == self.heading else 0.0
            score = unseen + ahead - 0.5 * toward + 0.3 * game.random() + keep
            if best_score is None or score > best_score:
                best, best_score = (dx, dy), score
        return best

    def _go(self, game: GameAPI, d: tuple[int, int]) -> str | None:
        """The action that makes progress along `d`: step, dig (mountain mode), or the first move of a walk
        to a visible tile at least two tiles further along `d`; None when none does."""
        (x, y), (dx, dy) = game.pos, d
        nxt, beyond = (x + dx, y + dy), (x + 2 * dx, y + 2 * dy)
        walk = game.is_walkable(nxt)
        # A step onto a tile the heading cannot go on from (water beyond) is not taken while a walk gets
        # further: the walk's first move led back off it, the heading onto it again (seen: 100+ steps).
        if walk and (game.is_walkable(beyond) or not game.is_visible(beyond)
                     or self.mountain and _diggable(game, beyond)):
            return MOVES[d]
        if self.mountain and _diggable(game, nxt):
            return "do" if game.is_facing(nxt) else MOVES[d]
        step = _stand_step(game, lambda t: (t[0] - x) * dx + (t[1] - y) * dy >= 2)
        return step or (MOVES[d] if walk else None)


def _hostile_near(game: GameAPI) -> bool:
    return any(game.distance(t) <= _THREAT for kind in _HOSTILE for t in game.find(kind)[:1])


def _tiles(game: GameAPI) -> list[tuple[int, int]]:
    (x0, y0), (x1, y1) = game.view_bounds
    return [(x, y) for x in range(x0, x1 + 1) for y in range(y0, y1 + 1)]


def _diggable(game: GameAPI, tile: tuple[int, int]) -> bool:
    """Whether ``do`` on `tile` would leave a walkable tile there (stone with a pickaxe, ...)."""
    return _digs(game, game.material_at(tile)) and game.object_at(tile) is None


def _digs(game: GameAPI, material: str | None) -> bool:
    """Whether ``do`` on `material`, which blocks the way, would leave a walkable tile (the player holding
    the tool it needs): stone, coal, iron, diamond (grass, walkable already, is no way through)."""
    info = _COLLECT.get(material or "")
    return (info is not None and material not in _WALKABLE and info["leaves"] in _WALKABLE
            and not missing(game, info["require"]))


def _defend(game: GameAPI) -> str | None:
    """Hit an adjacent zombie or skeleton (turning to it first): walking on while one attacks is how a
    primitive that ignored them died in measurement (a zombie hits for 2 of 9 health every few steps)."""
    for kind in _HOSTILE:
        for tile in game.find(kind)[:3]:
            if game.distance(tile) == 1:
                return "do" if game.is_facing(tile) else game.face(tile)
    return None


def _upkeep(game: GameAPI, need: list[str | None]) -> str | None:
    """An action that sees to thirst or hunger before going on, or None. Drinking starts when drink is at
    most `_LOW` with water in view and goes on until drink is full (`need` holds what is being seen to
    across steps); eating likewise with a cow. Measured: walks of 200+ steps died of thirst and then of
    the zombies of the night, not of what they were walking to."""
    if need[0] is None:
        if game.drink <= _LOW and game.nearest("water") is not None:
            need[0] = "water"
        elif game.food <= _LOW and game.nearest("cow") is not None:
            need[0] = "cow"
    kind = need[0]
    if kind is None:
        return None
    if (game.drink if kind == "water" else game.food) >= _FULL or game.nearest(kind) is None:
        need[0] = None
        return None
    tile, action = _approach(game, kind)
    if tile is None:
        need[0] = None
        return None
    return action or "do"


def _explore(game: GameAPI, kind: str, clock: _Clock) -> Actions:
    _remember_stations(game)
    seen = game._stations.get(kind)
    if seen is not None and game.nearest(kind) is None:
        # A station placed earlier in the episode: exploring for one heads back to it (measured: a model's
        # make_wood_pickaxe that explored for the table first wandered 35 steps a call in training).
        yield from _head_back(game, seen, clock)
    explorer, need = _Explorer(game, kind), [None]
    while clock.left > 0:
        if game.nearest(kind) is not None:
            return True
        clock.tick()
        yield _defend(game) or _upkeep(game, need) or explorer.step(game)
    return game.nearest(kind) is not None


def _approach(game: GameAPI, kind: str, keep: tuple[int, int] | None = None, free: bool = False,
              seen: dict[tuple[int, int], str | None] | None = None
              ) -> tuple[tuple[int, int] | None, str | None]:
    """The nearest visible tile of `kind` and the first action toward facing it, along the cheapest way
    that walks and digs (`_dig_step`; ores sit inside stone). (None, None) when nothing of `kind` is in
    view or no way reaches it. `keep`, the tile aimed at last step, goes first while it still holds `kind`:
    switching between equally near tiles made the player oscillate. `free`: only tiles no creature or
    plant stands on (``do`` on such a tile hits what stands there). `seen`: as `_dig_step`'s (one planner
    for a target in view and out of it: a walk over the view that went round a wall took the target out
    of view, the way over what was seen led back, and the player went back and forth)."""
    found = [t for t in game.find(kind) if not free or game.object_at(t) is None][:8]
    if keep in found:
        found.remove(keep)
        found.insert(0, keep)
    for tile in found:
        if game.is_facing(tile):
            return tile, None
        action = _dig_step(game, tile, seen)
        if action is not None:
            return tile, action
    return None, None


def _dig_step(game: GameAPI, tile: tuple[int, int],
              seen: dict[tuple[int, int], str | None] | None = None) -> str | None:
    """First action of the cheapest way over visible tiles to face `tile`, walking (1 step a tile) and
    digging through what the player can mine and that leaves a walkable tile (2 steps: ``do``, then the
    move; stone with a pickaxe). Water, lava, trees and stations are gone around. None when no such way
    reaches a tile next to `tile`. Measured: digging straight at a seen ore stopped at the first pool or
    lava on the line, and ran out of steps two tiles from the iron. `seen` (tile -> material seen earlier
    in the call) extends the way beyond the view (what stands there now is unknown)."""
    start = game.pos
    night = game.daylight < _NIGHT  # a tunnel through stone over a walk across the zombies' grass
    goals = {(tile[0] + dx, tile[1] + dy) for dx, dy in MOVES}
    cost = {start: 0}
    first: dict[tuple[int, int], str] = {start: ""}
    heap = [(0, 0, start)]
    order = 0
    while heap:
        c, _, (x, y) = heapq.heappop(heap)
        if c > cost[(x, y)] or c > _ROUTE_MAX:
            continue
        if (x, y) in goals:
            if (x, y) == start:
                return game.face(tile)
            return first[(x, y)]
        for (dx, dy), move in MOVES.items():
            nxt = (x + dx, y + dy)
            material = game.material_at(nxt)
            if material is None and seen is not None:
                material = seen.get(nxt)
                walkable, diggable = material in _WALKABLE, _digs(game, material)
            else:
                walkable, diggable = game.is_walkable(nxt), _diggable(game, nxt)
            if walkable:
                step = 3 if night and material in _ZOMBIE_GROUND else 1
            elif diggable:
                step = 2
            else:
                continue
            if c + step < cost.get(nxt, 1 << 30):
                cost[nxt] = c + step
                if (x, y) == start:
                    first[nxt] = ("do" if game.is_facing(nxt) else move) if step == 2 else move
                else:
                    first[nxt] = first[(x, y)]
                order += 1
                heapq.heappush(heap, (c + step, order, nxt))
    return None


def _stand_step(game: GameAPI, good: Callable[[tuple[int, int]], bool]) -> str | None:
    """First move of a shortest walk over visible walkable tiles to a tile where `good` holds; "" when the
    player stands on one already; None when no visible tile is both reachable and good."""
    start = game.pos
    if good(start):
        return ""
    first = {start: ""}
    queue = deque([start])
    while queue:
        x, y = queue.popleft()
        for (dx, dy), action in MOVES.items():
            nxt = (x + dx, y + dy)
            if nxt in first or not game.is_walkable(nxt):
                continue
            first[nxt] = first[(x, y)] or action
            if good(nxt):
                return first[nxt]
            queue.append(nxt)
    return None


def _walk_to(game: GameAPI, kind: str, clock: _Clock, free: bool = False) -> Actions:
    explorer, need = _Explorer(game, kind), [None]
    tile: tuple[int, int] | None = None
    while clock.left > 0:
        explorer.look(game)
        care = _defend(game) or _upkeep(game, need)
        if care is None:
            last = tile
            tile, action = _approach(game, kind, tile, free, explorer.seen)
            if tile is not None and action is None:
                return True  # facing it
            if tile is None and last is not None and not game.is_visible(last):
                # The way to it left the view (around a wall or pool): go on to it over the tiles seen.
                # Measured: dropping it walked back until it was in view again, then turned back, for up
                # to 200 steps (the back-and-forth of most failed iron and diamond calls).
                action = _dig_step(game, last, explorer.seen)
                tile = last if action is not None else None
        clock.tick()
        yield care or action or explorer.step(game)
    tile, action = _approach(game, kind, free=free)
    return tile is not None and action is None


def _head_back(game: GameAPI, tile: tuple[int, int], clock: _Clock) -> Actions:
    """Walk toward a tile seen earlier until it is in view; True when it is. Greedy on the larger offset
    first, side-stepping what blocks it; bounded by the clock."""
    explorer = _Explorer(game)
    while clock.left > 0 and not game.is_visible(tile):
        (x, y), (tx, ty) = game.pos, tile
        ways = sorted(MOVES, key=lambda d: -((tx - x) * d[0] + (ty - y) * d[1]))
        action = next((a for a in (explorer._go(game, d) for d in ways[:2]) if a), None)
        clock.tick()
        yield action or game.random_move()
    return game.is_visible(tile)


def _return_to(game: GameAPI, tile: tuple[int, int], clock: _Clock) -> Actions:
    """Walk back to a tile seen earlier until it is in view, and then on to face it; True when facing it."""
    if not (yield from _head_back(game, tile, clock)):
        return False
    kind = game.material_at(tile)
    if kind is None:
        return False
    found = yield from _walk_to(game, kind, clock)
    return found


class _Spin:
    """Guards a loop that walks to something and then acts on it: a walk that found its target at once
    (no step taken) twice in a row while the loop's goal is unmet would repeat forever without a step, the
    clock never running down (seen: grass faced under a cow hung an env worker). ``stuck`` says so."""

    __slots__ = ("clock", "left", "idle")

    def __init__(self, clock: _Clock) -> None:
        self.clock, self.left, self.idle = clock, clock.left, False

    def stuck(self) -> bool:
        """Call after each walk: True on the second walk in a row that took no step."""
        still = self.clock.left == self.left
        stuck, self.idle, self.left = still and self.idle, still, self.clock.left
        return stuck


# ------------------------------------------------------------------------------------------ acting


def _collect(game: GameAPI, material: str, n: int, clock: _Clock, solve: bool = True) -> Actions:
    info = _COLLECT[material]
    tools = dict(info["require"])
    if not solve:
        lacking = missing(game, tools)
        if lacking:
            return _fail(game, f"cannot collect {material}: it needs {_listed(lacking)} in the inventory "
                               f"(craft {'it' if len(lacking) == 1 else 'them'} first)")
    elif material in _MINED:
        # Ores sit inside stone, and crafter digs stone only with its own tool (the wood pickaxe): a player
        # holding just the stone or iron pickaxe cannot dig toward the ore, into the mountain or out of the
        # night's zombies. Measured: iron 0.58 -> 0.82, diamond 0.36 -> 0.69 (bench/RESULTS.md).
        tools.update(_COLLECT["stone"]["require"])
    for tool in missing(game, tools):
        # crafter ignores `do` on the material without its tool: make the tool first (the tech tree is
        # acyclic, so this recursion ends: iron needs a stone pickaxe, whose stone needs a wood pickaxe).
        if tool not in constants.make:
            return False
        made = yield from _craft(game, tool, clock)
        if not made:
            return False
    counters = [f"collect_{item}" for item in info["receive"]]
    target = sum(_count(game, c) for c in counters) + n
    spin = _Spin(clock)
    while clock.left > 0 and sum(_count(game, c) for c in counters) < target:
        if game.target_material == material and game.target_object is None:
            clock.tick()
            yield _defend(game) or "do"
        else:
            found = yield from _walk_to(game, material, clock, free=True)
            if not found or spin.stuck():
                break
    done = sum(_count(game, c) for c in counters) >= target
    if not done and clock.left > 0 and missing(game, tools):
        return _fail(game, f"cannot collect {material}: it needs {_listed(missing(game, tools))}")
    return done


def _gather_needs(game: GameAPI, needs: dict[str, int], clock: _Clock) -> Actions:
    """Collect what the inventory lacks of `needs` (each item from its source material, making the tool it
    needs first); False as soon as something missing cannot be collected or was not found. Rounds repeat
    because a tool made on the way can use up what was gathered before it (stone pickaxe from nothing:
    its wood went into the wood pickaxe that its stone needed)."""
    for _ in range(_GATHER_ROUNDS):
        if not missing(game, needs):
            return True
        for item, count in needs.items():
            material = _ITEM_SOURCE.get(item)
            if material is None:
                return False
            if game.item(item) < count:
                ok = yield from _collect(game, material, count - game.item(item), clock)
                if not ok:
                    return False
    return not missing(game, needs)


def _stations_away(game: GameAPI, item: str) -> list[str]:
    """The stations crafting `item` needs that are not nearby (crafter's rule: within 1 tile, 8-way)."""
    return [s for s in constants.make[item]["nearby"] if not game.nearby(s, 1)]


def _free_for(game: GameAPI, tile: tuple[int, int], where: Collection[str]) -> bool:
    """Whether an item placed on `tile` would stay (crafter's rule: one of `where`, no creature on it)."""
    return game.material_at(tile) in where and game.object_at(tile) is None


def _place_spot(game: GameAPI, where: tuple[str, ...]) -> tuple[int, int] | None:
    """An adjacent tile the item can be placed on: the faced one first."""
    x, y = game.pos
    tiles = [game.target] + [(x + dx, y + dy) for dx, dy in MOVES]
    return next((tile for tile in tiles if _free_for(game, tile, where)), None)


def _place(game: GameAPI, item: str, clock: _Clock, solve: bool = True) -> Actions:
    info = constants.place[item]
    if not solve and missing(game, info["uses"]):
        return _fail(game, f"cannot place {item}: it uses {_listed(info['uses'])}, the inventory lacks "
                           f"{_listed(missing(game, info['uses']))} (collect it first)")
    if missing(game, info["uses"]):
        gathered = yield from _gather_needs(game, info["uses"], clock)
        if not gathered:
            return False
    achievement = f"place_{item}"
    before = _count(game, achievement)
    where = tuple(info["where"])
    explorer = _Explorer(game)
    while clock.left > 0 and _count(game, achievement) == before:
        spot = _place_spot(game, where)
        clock.tick()
        if spot is None:
            yield explorer.step(game)
        elif game.is_facing(spot):
            yield f"place_{item}"
            if _count(game, achievement) == before and missing(game, info["uses"]):
                lacking = _listed(missing(game, info["uses"]))
                return _fail(game, f"cannot place {item}: the inventory lacks {lacking}")
        else:
            # Turning toward a free tile walks onto it; then the tile beyond is faced, and tried next.
            yield game.face(spot)
    placed = _count(game, achievement) > before
    if placed:
        _remember_stations(game)
    elif spot is None and clock.left <= 0:
        return _fail(game, f"cannot place {item}: no free {' or '.join(where)} tile next to the player "
                           "within max_steps")
    return placed


def _craft(game: GameAPI, item: str, clock: _Clock, solve: bool = True) -> Actions:
    info = constants.make[item]
    if not solve and missing(game, info["uses"]):
        return _fail(game, f"cannot craft {item}: it uses {_listed(info['uses'])}, the inventory lacks "
                           f"{_listed(missing(game, info['uses']))} (collect it first)")
    if missing(game, info["uses"]):
        gathered = yield from _gather_needs(game, info["uses"], clock)
        if not gathered:
            return False
    achievement = f"make_{item}"
    before = _count(game, achievement)
    stations = tuple(info["nearby"])

    def beside_all(tile: tuple[int, int]) -> bool:  # crafter's rule: every station within 1 tile (8-way)
        return all(any(max(abs(sx - tile[0]), abs(sy - tile[1])) <= 1 for sx, sy in game.find(s))
                   for s in stations)

    spin = _Spin(clock)
    while clock.left > 0 and _count(game, achievement) == before:
        away = _stations_away(game, item)
        if not away:
            clock.tick()
            yield f"make_{item}"
            if _count(game, achievement) == before:  # the recipe's rule refused it (no step changes that)
                return _fail(game, f"cannot craft {item}: crafter refused make_{item} (it needs "
                                   f"{_listed(info['uses'])} and {' and '.join(stations)} nearby)")
            break
        step = _stand_step(game, beside_all) if all(game.nearest(s) for s in stations) else None
        if step:
            clock.tick()
            yield step
            continue
        station = away[0]
        _remember_stations(game)
        if not solve and game.nearest(station) is None:
            # A station out of view: go back to where one was seen (never build one).
            seen = game._stations.get(station)
            if seen is None:
                return _fail(game, f"cannot craft {item}: it needs a {station} nearby, and none is in view "
                                   f"or was seen (place one first: game.place_item({station!r}))")
            found = yield from _return_to(game, seen, clock)
        elif game.nearest(station) is None and station in constants.place:
            # Out of view: a player builds a new one (gathering what it takes beyond the recipe) rather
            # than searching for the old one.
            both = _combined(constants.place[station]["uses"], info["uses"])
            found = yield from _gather_needs(game, both, clock)
            if found:
                found = yield from _place(game, station, clock)
        else:
            found = yield from _walk_to(game, station, clock)
        if not found or spin.stuck():
            break
    return _count(game, achievement) > before


def _combined(a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
    """What two recipes use together."""
    return {k: a.get(k, 0) + b.get(k, 0) for k in {*a, *b}}


def _attack(game: GameAPI, kind: str, clock: _Clock) -> Actions:
    achievement = _CREATURE_ACHIEVEMENTS[kind]
    before = _count(game, achievement)
    spin = _Spin(clock)
    while clock.left > 0 and _count(game, achievement) == before:
        if game.target_object == kind:
            clock.tick()
            yield "do"
        else:
            found = yield from _walk_to(game, kind, clock)
            if not found or spin.stuck():
                break
    return _count(game, achievement) > before


def _rest(game: GameAPI, clock: _Clock) -> Actions:
    if not game.sleeping and game.energy >= _ENERGY_MAX:
        # crafter ignores `sleep` at full energy: nothing would happen, and a wake_up skill calling rest()
        # first thing in an episode "succeeded" without a step (every probe call of the measured ones).
        return _fail(game, f"cannot rest: energy is full ({_ENERGY_MAX} of {_ENERGY_MAX}); crafter lets the "
                           "player sleep only below that (energy drops by 1 about every 30 steps awake)")
    woke = _count(game, "wake_up")
    while clock.left > 0 and _count(game, "wake_up") == woke:
        if not game.sleeping and game.energy >= _ENERGY_MAX:
            return True
        clock.tick()
        yield "sleep"
    return _count(game, "wake_up") > woke or game.energy >= _ENERGY_MAX


# ------------------------------------------------------------------------------------------ public entries
# Each validates its arguments before the first step (a bad call fails at the call, with a clear message),
# and says why it returned False in `GameAPI.last_failure` ("" after a call that reached its goal).
# Two sets: the primitives (API level ``primitives``: each does one thing and fails with a reason when a
# prerequisite is missing) and the expert calls (level ``expert``: collect/place/craft solve their own
# prerequisites, making tools, gathering ingredients and building stations on the way).


def _reported(game: GameAPI, what: str, clock: _Clock, actions: Actions) -> Actions:
    """`actions` with its outcome explained: `_fail`'s reason, or why it stopped (steps or nothing found)."""
    game._failure = ""
    ok = yield from actions
    if ok:
        game._failure = ""
    elif not game._failure:
        game._failure = (f"{what}: ran out of its {clock.start} steps" if clock.left <= 0
                         else f"{what}: found none within reach")
    return ok


def _material(name: str, n: int) -> str:
    material = collect_source(name)
    # n <= 0 is "nothing more to collect": the model writes gather("wood", n=3 - game.item("wood")).
    if type(n) is not int or not -99 <= n <= 99:
        raise ValueError(f"n must be an int in [-99, 99] (at most 0: nothing to collect), got {n!r}")
    return material


def _done() -> Actions:
    """A primitive call with nothing to do: True at once, no step."""
    return True
    yield  # a generator, as every primitive is (for `yield from`)


def _item_name(item: str, action: str) -> str:
    """`item`, or the item an action name names: the model writes craft_item("make_wood_pickaxe") and
    place_item("place_table") as often as the item."""
    return item.removeprefix(f"{action}_") if type(item) is str else item


def _placeable(item: str) -> str:
    item = _item_name(item, "place")
    if item not in constants.place:
        raise ValueError(f"cannot place {item!r}{_meant(item)}; placeable: {', '.join(constants.place)}")
    return item


def _craftable(item: str) -> str:
    item = _item_name(item, "make")
    if item not in constants.make:
        raise ValueError(f"cannot craft {item!r}{_meant(item)}; craftable: {', '.join(constants.make)}")
    return item


def explore(game: GameAPI, kind: str, max_steps: int = DEFAULT_STEPS) -> Actions:
    """Walk (avoiding water and lava) until a tile of `kind` (a material or object kind, checked by the
    caller) is in view."""
    clock = _Clock(max_steps)
    return _reported(game, f"explore {kind}", clock, _explore(game, kind, clock))


def walk_to(game: GameAPI, kind: str, max_steps: int = DEFAULT_STEPS) -> Actions:
    """Explore until `kind` (checked by the caller) is in view, then walk until the player faces the nearest
    reachable one."""
    clock = _Clock(max_steps)
    return _reported(game, f"walk to {kind}", clock, _walk_to(game, kind, clock))


def gather(game: GameAPI, name: str, n: int = 1, max_steps: int = DEFAULT_STEPS) -> Actions:
    """Collect `n` of a material the player can already collect (tree, stone, coal, iron, diamond, water,
    grass) or the item it gives (wood, stone, ...): walk to it and ``do`` until crafter counted `n`
    collections. False at once, with the reason, when the tool it needs is not in the inventory."""
    material, clock = _material(name, n), _Clock(max_steps)
    if n <= 0:
        return _done()
    return _reported(game, f"gather {material}", clock, _collect(game, material, n, clock, solve=False))


def place_item(game: GameAPI, item: str, max_steps: int = DEFAULT_STEPS // 4) -> Actions:
    """Place `item` (stone, table, furnace, plant), which the inventory holds, on an adjacent tile where
    crafter allows it. False at once, with the reason, when the inventory lacks what it uses."""
    item, clock = _placeable(item), _Clock(max_steps)
    return _reported(game, f"place {item}", clock, _place(game, item, clock, solve=False))


def craft_item(game: GameAPI, item: str, max_steps: int = DEFAULT_STEPS) -> Actions:
    """Make `item` whose ingredients the inventory holds, next to the station(s) its recipe needs: walk to
    one in view, or back to one seen earlier in the episode; never builds one. False at once, with the
    reason, when an ingredient is missing or no station was seen."""
    item, clock = _craftable(item), _Clock(max_steps)
    return _reported(game, f"craft {item}", clock, _craft(game, item, clock, solve=False))


def attack(game: GameAPI, kind: str, max_steps: int = DEFAULT_STEPS) -> Actions:
    """Walk to the nearest `kind` creature (cow, zombie, skeleton) or plant and hit it until crafter counts
    it (eat_cow, defeat_zombie, defeat_skeleton, eat_plant)."""
    if kind not in _CREATURE_ACHIEVEMENTS:
        raise ValueError(f"cannot attack {kind!r}; use one of {', '.join(_CREATURE_ACHIEVEMENTS)}")
    clock = _Clock(max_steps)
    return _reported(game, f"attack {kind}", clock, _attack(game, kind, clock))


def drink_water(game: GameAPI, max_steps: int = DEFAULT_STEPS) -> Actions:
    """Walk to water and drink once."""
    clock = _Clock(max_steps)
    return _reported(game, "drink water", clock, _collect(game, "water", 1, clock))


def eat(game: GameAPI, max_steps: int = DEFAULT_STEPS) -> Actions:
    """Hunt the nearest cow and eat it."""
    clock = _Clock(max_steps)
    return _reported(game, "eat a cow", clock, _attack(game, "cow", clock))


def rest(game: GameAPI, max_steps: int = DEFAULT_STEPS) -> Actions:
    """Sleep until energy is full (crafter wakes the player then) or it is woken; True once rested."""
    clock = _Clock(max_steps)
    return _reported(game, "rest", clock, _rest(game, clock))


def collect(game: GameAPI, name: str, n: int = 1, max_steps: int = DEFAULT_STEPS) -> Actions:
    """Collect `n` of a material (tree, stone, coal, iron, diamond, water, grass) or the item it gives
    (wood, stone, coal, iron, diamond, drink, sapling): walk to it and ``do`` until crafter counted `n`
    collections. A missing tool (the pickaxe stone, coal, iron or diamond needs, and for an ore the wood
    pickaxe that digs the stone around it) is crafted first."""
    material, clock = _material(name, n), _Clock(max_steps)
    if n <= 0:
        return _done()
    return _reported(game, f"collect {material}", clock, _collect(game, material, n, clock))


def place(game: GameAPI, item: str, max_steps: int = DEFAULT_STEPS // 4) -> Actions:
    """Place `item` (stone, table, furnace, plant) on an adjacent tile where crafter allows it, collecting
    first what the inventory lacks of what it uses (False when that cannot be collected)."""
    item, clock = _placeable(item), _Clock(max_steps)
    return _reported(game, f"place {item}", clock, _place(game, item, clock))


def craft(game: GameAPI, item: str, max_steps: int = DEFAULT_STEPS) -> Actions:
    """Make `item` (wood_pickaxe, stone_pickaxe, iron_pickaxe, wood_sword, ...): collect what the inventory
    lacks of its ingredients, stand next to the stations its recipe needs (table; table and furnace for
    iron tools; a station out of view is built anew), then make it; an ingredient that needs a tool gets the
    tool made first. False when it ran out of steps or found nothing."""
    item, clock = _craftable(item), _Clock(max_steps)
    return _reported(game, f"craft {item}", clock, _craft(game, item, clock))


PRIMITIVES: tuple[str, ...] = ("explore", "walk_to", "gather", "place_item", "craft_item", "attack",
                               "drink_water", "eat", "rest")
"""The control primitives (API level ``primitives``), as `GameAPI` methods (``yield from game.<name>(...)``):
each does one thing and returns False with `GameAPI.last_failure` set when a prerequisite is missing."""
EXPERT: tuple[str, ...] = ("collect", "place", "craft")
"""The expert calls (API level ``expert`` adds them): each solves its own prerequisites, so one call can be
a whole chain of sub-actions. The trusted goal macro (`goal_macro_code`) is made of them."""
GENERATORS: tuple[str, ...] = PRIMITIVES + EXPERT
"""Every `GameAPI` method that is a generator of actions (called with ``yield from``)."""


def goal_call(goal: str) -> str | None:
    """The primitive call that raises `goal`'s counter by one step of the recipe graph, as macro code
    (``game.collect("stone")`` for collect_stone or stone, ``game.craft("wood_pickaxe")`` for
    make_wood_pickaxe, ``game.rest()`` for wake_up, ...), or None when no primitive does (health).

    One step only: ingredients and stations are the earlier sub-actions' job, as in a decomposition. Used
    for a sub-action whose generated macros all failed their probes: a fallback the run records as such.
    """
    if goal in _COLLECT_ACHIEVEMENT:
        return f'game.collect("{_COLLECT_ACHIEVEMENT[goal]}")'
    for prefix, primitive, table in (("place_", "place", constants.place),
                                     ("make_", "craft", constants.make)):
        if goal.startswith(prefix) and goal[len(prefix):] in table:
            return f'game.{primitive}("{goal[len(prefix):]}")'
    if goal in _ITEM_SOURCE:
        return f'game.collect("{goal}")'
    if goal in constants.make:
        return f'game.craft("{goal}")'
    by_goal = {"eat_cow": "game.eat()", "food": "game.eat()", "defeat_zombie": 'game.attack("zombie")',
               "defeat_skeleton": 'game.attack("skeleton")', "eat_plant": 'game.attack("plant")',
               "wake_up": "game.rest()", "energy": "game.rest()", "collect_drink": "game.drink_water()",
               "drink": "game.drink_water()"}
    return by_goal.get(goal)


def goal_macro_code(name: str, goal: str, max_steps: int = DEFAULT_STEPS) -> str | None:
    """Source of ``def <name>(game)`` that makes the `goal_call` for `goal` (None when there is none)."""
    call = goal_call(goal)
    if call is None:
        return None
    call = call[:-1] + (f"max_steps={max_steps})" if call.endswith("()") else f", max_steps={max_steps})")
    return f"def {name}(game):\n    ok = yield from {call}\n"


_GATHER_ROUNDS = 4
"""Bound on `_gather_needs`'s rounds (each tool level can use up one round's gathering; the tech tree has
three)."""

_COLLECT_ACHIEVEMENT = {f"collect_{item}": item for item in _ITEM_SOURCE}
"""collect_<item> achievement -> the item (crafter counts one per collection of that item)."""
