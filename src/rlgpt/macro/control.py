"""Control primitives: trusted, bounded building blocks that generated macros call with ``yield from``.

The embedded 1.5B writes walking-to-X loops well and placing and crafting badly (measured; README). So the
game object offers what a player does in Crafter as ready generators, in the spirit of Voyager's control
primitives: explore until something is in view, walk to it, collect N of a material, place an item,
craft at a station, attack a creature, drink, eat, rest. Generated code composes them::

    def make_pickaxe(game):
        ok = yield from game.collect("wood", 3)
        if ok:
            ok = yield from game.place("table")
        if ok:
            yield from game.craft("wood_pickaxe")

Each primitive is a generator of primitive action names that stops after at most ``max_steps`` actions
and returns whether it reached its goal. Goals are counted on crafter's own counters (achievements and
inventory), so a primitive never claims what the game did not record. Every rule (what a material gives
and needs, where an item can be placed, which stations a recipe needs) is read from crafter's data, not
restated here. This is trusted code: it is not instrumented, so it must stay bounded by itself (a
generator ends within ``max_steps`` yields, and each action is decided by a breadth-first search over the
local view, at most its 63 tiles).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Generator
from typing import TYPE_CHECKING

from crafter import constants

if TYPE_CHECKING:  # the game API imports this module; the type is for readers only
    from rlgpt.macro.api import GameAPI

Actions = Generator[str, None, bool]
"""What every primitive is: yields action names, returns whether its goal was reached."""

MAX_STEPS_CAP = 10_000
"""Largest ``max_steps`` a primitive accepts (the macro's own step bound still applies on top)."""
DEFAULT_STEPS = 100
"""Default step bound of one primitive call."""

_MOVES = {(-1, 0): "move_left", (1, 0): "move_right", (0, -1): "move_up", (0, 1): "move_down"}
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


class _Clock:
    """Steps left to one top-level primitive call; nested primitives draw on the same budget."""

    __slots__ = ("left",)

    def __init__(self, max_steps: int) -> None:
        if type(max_steps) is not int or not 1 <= max_steps <= MAX_STEPS_CAP:
            raise ValueError(f"max_steps must be an int in [1, {MAX_STEPS_CAP}], got {max_steps!r}")
        self.left = max_steps

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
    raise ValueError(f"nothing gives {name!r} when collected; collectable: "
                     f"{', '.join(sorted({*_COLLECT, *_ITEM_SOURCE}))}")


def missing(game: GameAPI, needs: dict[str, int]) -> dict[str, int]:
    """Items of `needs` the player lacks, with how many more it needs."""
    return {k: v - game.item(k) for k, v in needs.items() if game.item(k) < v}


def _count(game: GameAPI, achievement: str) -> int:
    return int(game.achievements.get(achievement, 0))


# ------------------------------------------------------------------------------------------ moving around


def _explore_step(game: GameAPI, heading: list[tuple[int, int]]) -> str:
    """One exploring move: keep the current heading while its next tile is free, else turn to a random
    free direction (never onto lava or water: `is_walkable` excludes them), else any random move."""
    x, y = game.pos
    dx, dy = heading[0]
    if game.is_walkable((x + dx, y + dy)) and game.random() > 0.05:
        return _MOVES[heading[0]]
    free = [d for d in _MOVES if game.is_walkable((x + d[0], y + d[1])) and d != (-dx, -dy)]
    if not free:
        free = [d for d in _MOVES if game.is_walkable((x + d[0], y + d[1]))]
    if free:
        heading[0] = free[int(game.random() * len(free)) % len(free)]
        return _MOVES[heading[0]]
    return game.random_move()


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


def _first_heading(game: GameAPI) -> list[tuple[int, int]]:
    moves = list(_MOVES)
    return [moves[int(game.random() * 4) % 4]]


def _explore(game: GameAPI, kind: str, clock: _Clock) -> Actions:
    heading, need = _first_heading(game), [None]
    while clock.left > 0:
        if game.nearest(kind) is not None:
            return True
        clock.tick()
        yield _defend(game) or _upkeep(game, need) or _explore_step(game, heading)
    return game.nearest(kind) is not None


def _approach(game: GameAPI, kind: str, keep: tuple[int, int] | None = None
              ) -> tuple[tuple[int, int] | None, str | None]:
    """The nearest visible tile of `kind` and the first action toward facing it: a walk over visible tiles
    when one reaches it, else digging straight at it (`_dig_step`; ores sit inside stone). (None, None)
    when nothing of `kind` is in view or nothing gets closer. `keep`, the tile aimed at last step, goes
    first while it still holds `kind`: switching between equally near tiles made the player oscillate."""
    found = list(game.find(kind)[:8])
    if keep in found:
        found.remove(keep)
        found.insert(0, keep)
    for tile in found:
        if game.is_facing(tile):
            return tile, None
        action = game.step_toward(tile)
        if action is not None:
            return tile, action
    for tile in found:
        action = _dig_step(game, tile)
        if action is not None:
            return tile, action
    return None, None


def _dig_step(game: GameAPI, tile: tuple[int, int]) -> str | None:
    """One step straight toward `tile` through what the player can mine: move where the next tile is
    free, face it and ``do`` where it holds a material the player can collect and that leaves a walkable
    tile (stone with a pickaxe, a tree). None when neither works along any closer direction."""
    (x, y), (tx, ty) = game.pos, tile
    sx, sy = (tx > x) - (tx < x), (ty > y) - (ty < y)
    ways = [(sx, 0), (0, sy)] if abs(tx - x) >= abs(ty - y) else [(0, sy), (sx, 0)]  # longer axis first
    ways = [d for d in ways if d != (0, 0)]
    for dx, dy in ways:
        nxt = (x + dx, y + dy)
        if game.is_walkable(nxt):
            return _MOVES[(dx, dy)]
        info = _COLLECT.get(game.material_at(nxt) or "")
        if info is not None and info["leaves"] in _WALKABLE and not missing(game, info["require"]) \
                and game.object_at(nxt) is None:
            return "do" if game.is_facing(nxt) else _MOVES[(dx, dy)]
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
        for (dx, dy), action in _MOVES.items():
            nxt = (x + dx, y + dy)
            if nxt in first or not game.is_walkable(nxt):
                continue
            first[nxt] = first[(x, y)] or action
            if good(nxt):
                return first[nxt]
            queue.append(nxt)
    return None


def _walk_to(game: GameAPI, kind: str, clock: _Clock) -> Actions:
    heading, need = _first_heading(game), [None]
    tile: tuple[int, int] | None = None
    while clock.left > 0:
        care = _defend(game) or _upkeep(game, need)
        if care is None:
            tile, action = _approach(game, kind, tile)
            if tile is not None and action is None:
                return True  # facing it
        clock.tick()
        yield care or action or _explore_step(game, heading)
    tile, action = _approach(game, kind)
    return tile is not None and action is None


# ------------------------------------------------------------------------------------------ acting


def _collect(game: GameAPI, material: str, n: int, clock: _Clock) -> Actions:
    info = _COLLECT[material]
    if missing(game, info["require"]):
        return False  # crafter ignores `do` on it without the tool: no step would help
    counters = [f"collect_{item}" for item in info["receive"]]
    target = sum(_count(game, c) for c in counters) + n
    while clock.left > 0 and sum(_count(game, c) for c in counters) < target:
        if game.target_material == material and game.target_object is None:
            clock.tick()
            yield _defend(game) or "do"
        else:
            found = yield from _walk_to(game, material, clock)
            if not found:
                break
    return sum(_count(game, c) for c in counters) >= target


def _gather(game: GameAPI, needs: dict[str, int], clock: _Clock) -> Actions:
    """Collect what the inventory lacks of `needs` (each item from its source material); False as soon as
    something missing cannot be collected (no source, or a tool it needs is missing) or was not found."""
    for item, count in missing(game, needs).items():
        material = _ITEM_SOURCE.get(item)
        if material is None or missing(game, _COLLECT[material]["require"]):
            return False
        ok = yield from _collect(game, material, count, clock)
        if not ok:
            return False
    return True


def _place_spot(game: GameAPI, where: tuple[str, ...]) -> tuple[int, int] | None:
    """An adjacent tile the item can be placed on: the faced one first."""
    x, y = game.pos
    tiles = [game.target] + [(x + dx, y + dy) for dx, dy in _MOVES]
    for tile in tiles:
        if game.material_at(tile) in where and game.object_at(tile) is None:
            return tile
    return None


def _place(game: GameAPI, item: str, clock: _Clock) -> Actions:
    info = constants.place[item]
    if missing(game, info["uses"]):
        gathered = yield from _gather(game, info["uses"], clock)
        if not gathered:
            return False
    achievement = f"place_{item}"
    before = _count(game, achievement)
    where = tuple(info["where"])
    heading = _first_heading(game)
    while clock.left > 0 and _count(game, achievement) == before:
        spot = _place_spot(game, where)
        clock.tick()
        if spot is None:
            yield _explore_step(game, heading)
        elif game.is_facing(spot):
            yield f"place_{item}"
            if _count(game, achievement) == before and missing(game, info["uses"]):
                return False
        else:
            # Turning toward a free tile walks onto it; then the tile beyond is faced, and tried next.
            yield game.face(spot)
    return _count(game, achievement) > before


def _craft(game: GameAPI, item: str, clock: _Clock) -> Actions:
    info = constants.make[item]
    if missing(game, info["uses"]):
        gathered = yield from _gather(game, info["uses"], clock)
        if not gathered:
            return False
    achievement = f"make_{item}"
    before = _count(game, achievement)
    stations = tuple(info["nearby"])

    def beside_all(tile: tuple[int, int]) -> bool:  # crafter's rule: every station within 1 tile (8-way)
        return all(any(max(abs(sx - tile[0]), abs(sy - tile[1])) <= 1 for sx, sy in game.find(s))
                   for s in stations)

    while clock.left > 0 and _count(game, achievement) == before:
        away = [s for s in stations if not game.nearby(s, 1)]
        if not away:
            clock.tick()
            yield f"make_{item}"
            if _count(game, achievement) == before:
                return False  # the recipe's rule refused it (nothing a further step changes)
            break
        step = _stand_step(game, beside_all) if all(game.nearest(s) for s in stations) else None
        if step:
            clock.tick()
            yield step
            continue
        station = away[0]
        if game.nearest(station) is None and station in constants.place:
            # Out of view: a player builds a new one (gathering what it takes beyond the recipe) rather
            # than searching for the old one.
            both = _combined(constants.place[station]["uses"], info["uses"])
            found = yield from _gather(game, both, clock)
            if found:
                found = yield from _place(game, station, clock)
        else:
            found = yield from _walk_to(game, station, clock)
        if not found:
            break
    return _count(game, achievement) > before


def _combined(a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
    """What two recipes use together."""
    return {k: a.get(k, 0) + b.get(k, 0) for k in {*a, *b}}


def _attack(game: GameAPI, kind: str, clock: _Clock) -> Actions:
    achievement = _CREATURE_ACHIEVEMENTS[kind]
    before = _count(game, achievement)
    while clock.left > 0 and _count(game, achievement) == before:
        if game.target_object == kind:
            clock.tick()
            yield "do"
        else:
            found = yield from _walk_to(game, kind, clock)
            if not found:
                break
    return _count(game, achievement) > before


def _rest(game: GameAPI, clock: _Clock) -> Actions:
    woke = _count(game, "wake_up")
    while clock.left > 0 and _count(game, "wake_up") == woke:
        if not game.sleeping and game.energy >= _ENERGY_MAX:
            return True
        clock.tick()
        yield "sleep"
    return _count(game, "wake_up") > woke or game.energy >= _ENERGY_MAX


# ------------------------------------------------------------------------------------------ public entries
# Each validates its arguments before the first step (a bad call fails at the call, with a clear message).


def explore(game: GameAPI, kind: str, max_steps: int = DEFAULT_STEPS) -> Actions:
    """Walk (avoiding water and lava) until a tile of `kind` (a material or object kind, checked by the
    caller) is in view."""
    return _explore(game, kind, _Clock(max_steps))


def walk_to(game: GameAPI, kind: str, max_steps: int = DEFAULT_STEPS) -> Actions:
    """Explore until `kind` (checked by the caller) is in view, then walk until the player faces the nearest
    reachable one."""
    return _walk_to(game, kind, _Clock(max_steps))


def collect(game: GameAPI, name: str, n: int = 1, max_steps: int = DEFAULT_STEPS) -> Actions:
    """Collect `n` of a material (tree, stone, coal, iron, diamond, water, grass) or the item it gives
    (wood, stone, coal, iron, diamond, drink, sapling): walk to it and ``do`` until crafter counted `n`
    collections. Returns False at once when a required tool is missing."""
    material = collect_source(name)
    if type(n) is not int or not 1 <= n <= 99:
        raise ValueError(f"n must be an int in [1, 99], got {n!r}")
    return _collect(game, material, n, _Clock(max_steps))


def place(game: GameAPI, item: str, max_steps: int = DEFAULT_STEPS // 4) -> Actions:
    """Place `item` (stone, table, furnace, plant) on an adjacent tile where crafter allows it, collecting
    first what the inventory lacks of what it uses (False when that cannot be collected)."""
    if item not in constants.place:
        raise ValueError(f"cannot place {item!r}; placeable: {', '.join(constants.place)}")
    return _place(game, item, _Clock(max_steps))


def craft(game: GameAPI, item: str, max_steps: int = DEFAULT_STEPS) -> Actions:
    """Make `item` (wood_pickaxe, stone_pickaxe, iron_pickaxe, wood_sword, ...): collect what the inventory
    lacks of its ingredients, stand next to the stations its recipe needs (table; table and furnace for
    iron tools; a station out of view is built anew), then make it. False when an ingredient cannot be
    collected with the tools at hand."""
    if item not in constants.make:
        raise ValueError(f"cannot craft {item!r}; craftable: {', '.join(constants.make)}")
    return _craft(game, item, _Clock(max_steps))


def attack(game: GameAPI, kind: str, max_steps: int = DEFAULT_STEPS) -> Actions:
    """Walk to the nearest `kind` creature (cow, zombie, skeleton) or plant and hit it until crafter counts
    it (eat_cow, defeat_zombie, defeat_skeleton, eat_plant)."""
    if kind not in _CREATURE_ACHIEVEMENTS:
        raise ValueError(f"cannot attack {kind!r}; use one of {', '.join(_CREATURE_ACHIEVEMENTS)}")
    return _attack(game, kind, _Clock(max_steps))


def drink_water(game: GameAPI, max_steps: int = DEFAULT_STEPS) -> Actions:
    """Walk to water and drink once."""
    return _collect(game, "water", 1, _Clock(max_steps))


def eat(game: GameAPI, max_steps: int = DEFAULT_STEPS) -> Actions:
    """Hunt the nearest cow and eat it."""
    return _attack(game, "cow", _Clock(max_steps))


def rest(game: GameAPI, max_steps: int = DEFAULT_STEPS) -> Actions:
    """Sleep until energy is full (crafter wakes the player then) or it is woken; True once rested."""
    return _rest(game, _Clock(max_steps))


PRIMITIVES: tuple[str, ...] = ("explore", "walk_to", "collect", "place", "craft", "attack", "drink_water",
                               "eat", "rest")
"""Names of the primitives, as `GameAPI` methods (``yield from game.<name>(...)``)."""


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


_COLLECT_ACHIEVEMENT = {f"collect_{item}": item for item in _ITEM_SOURCE}
"""collect_<item> achievement -> the item (crafter counts one per collection of that item)."""
