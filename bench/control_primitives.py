"""Success rates of the control primitives (`rlgpt.macro.control`) over seeded starts.

Each scenario starts a fresh Crafter world per seed, gives the player what the primitive needs (tools,
materials, a station placed nearby) by editing crafter's own state, and runs a one-line macro that calls the
primitive through the real compiler, sandbox and macro runtime. A start counts only where the goal is
reachable: the target lies within `REACH` walking steps of the player over crafter's walkable tiles (a
breadth-first search over the whole world map, which the primitive itself cannot see). The rate is the
share of those starts in which the primitive returned True and crafter's counter agrees.

    OMP_NUM_THREADS=1 .venv/bin/python bench/control_primitives.py --seeds 100
"""

from __future__ import annotations

import argparse
import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from crafter import objects

from rlgpt.envs.crafter import CrafterEnv
from rlgpt.macro.api import GameAPI
from rlgpt.macro.compiler import MacroSource, compile_macro
from rlgpt.macro.runtime import run_macro

REACH = 30
"""Walking steps within which a target counts as reachable."""
MAX_STEPS = 300
"""Step bound of the macro (and of the primitive call inside it)."""
_WALKABLE = ("grass", "sand", "path")


@dataclass(frozen=True)
class Scenario:
    """One primitive call from a prepared start."""

    name: str
    """Row name."""
    call: str
    """The call as macro code writes it, e.g. ``game.collect("stone")``."""
    counter: str
    """Achievement whose count must rise for the call to count as reached."""
    target: str | None = None
    """Material or creature that must be reachable for the start to count (None: every start counts)."""
    give: dict[str, int] = field(default_factory=dict)
    """Inventory handed to the player before the call."""
    stations: tuple[tuple[str, tuple[int, int]], ...] = ()
    """(material, offset from the player) tiles set before the call (a table two steps away, ...)."""
    prepare: Callable[[CrafterEnv], None] | None = None
    """Further set-up on the crafter env (e.g. a zombie next to the player)."""


def _zombie_nearby(env: CrafterEnv) -> None:
    world, player = env.crafter._world, env.crafter._player
    x, y = (int(v) for v in player.pos)
    for dx, dy in ((3, 0), (-3, 0), (0, 3), (0, -3), (2, 2), (-2, -2)):
        pos = (x + dx, y + dy)
        material, obj = world[pos]
        if material in _WALKABLE and obj is None:
            world.add(objects.Zombie(world, pos, player))
            return


def _tired(env: CrafterEnv) -> None:
    env.crafter._player.inventory["energy"] = 3


SCENARIOS: tuple[Scenario, ...] = (
    Scenario("explore tree", 'game.explore("tree")', "", "tree"),
    Scenario("walk_to water", 'game.walk_to("water")', "", "water"),
    Scenario("collect wood", 'game.collect("wood")', "collect_wood", "tree"),
    Scenario("collect wood x3", 'game.collect("wood", 3)', "collect_wood", "tree"),
    Scenario("collect stone", 'game.collect("stone")', "collect_stone", "stone", {"wood_pickaxe": 1}),
    Scenario("collect coal", 'game.collect("coal")', "collect_coal", "coal", {"wood_pickaxe": 1}),
    Scenario("collect iron", 'game.collect("iron")', "collect_iron", "iron", {"stone_pickaxe": 1}),
    Scenario("collect diamond", 'game.collect("diamond")', "collect_diamond", "diamond", {"iron_pickaxe": 1}),
    # As a chain reaches them: the earlier pickaxes kept (crafter mines stone only with a wood pickaxe, so a
    # player given the stone or iron one alone cannot dig toward an ore or into the mountain at night).
    Scenario("collect iron (wood and stone pickaxes)", 'game.collect("iron")', "collect_iron", "iron",
             {"wood_pickaxe": 1, "stone_pickaxe": 1}),
    Scenario("collect diamond (all pickaxes)", 'game.collect("diamond")', "collect_diamond", "diamond",
             {"wood_pickaxe": 1, "stone_pickaxe": 1, "iron_pickaxe": 1}),
    Scenario("drink_water", "game.drink_water()", "collect_drink", "water"),
    Scenario("collect sapling", 'game.collect("sapling")', "collect_sapling", "grass"),
    Scenario("place table", 'game.place("table")', "place_table", None, {"wood": 2}),
    Scenario("place table (gathering the wood)", 'game.place("table")', "place_table", "tree"),
    Scenario("place stone", 'game.place("stone")', "place_stone", None, {"stone": 1}),
    Scenario("place furnace", 'game.place("furnace")', "place_furnace", None, {"stone": 4}),
    Scenario("place plant", 'game.place("plant")', "place_plant", "grass", {"sapling": 1}),
    Scenario("craft wood_pickaxe (table 2 away)", 'game.craft("wood_pickaxe")', "make_wood_pickaxe", None,
             {"wood": 1}, (("table", (2, 0)),)),
    Scenario("craft wood_pickaxe (no table, wood for one)", 'game.craft("wood_pickaxe")', "make_wood_pickaxe",
             None, {"wood": 3}),
    Scenario("craft wood_pickaxe (from nothing)", 'game.craft("wood_pickaxe")', "make_wood_pickaxe", "tree"),
    Scenario("craft stone_pickaxe (wood pickaxe only)", 'game.craft("stone_pickaxe")', "make_stone_pickaxe",
             "stone", {"wood_pickaxe": 1}),
    Scenario("collect stone (from nothing)", 'game.collect("stone")', "collect_stone",
             "stone"),
    Scenario("craft stone_pickaxe (from nothing)", 'game.craft("stone_pickaxe")',
             "make_stone_pickaxe", "stone"),
    Scenario("craft stone_pickaxe", 'game.craft("stone_pickaxe")', "make_stone_pickaxe", None,
             {"wood": 1, "stone": 1}, (("table", (0, 2)),)),
    Scenario("craft iron_pickaxe", 'game.craft("iron_pickaxe")', "make_iron_pickaxe", None,
             {"wood": 1, "coal": 1, "iron": 1}, (("table", (2, 0)), ("furnace", (2, 2)))),
    Scenario("craft stone_sword", 'game.craft("stone_sword")', "make_stone_sword", None,
             {"wood": 1, "stone": 1}, (("table", (1, 1)),)),
    Scenario("attack cow (eat)", "game.eat()", "eat_cow", "cow"),
    Scenario("attack zombie", 'game.attack("zombie")', "defeat_zombie", "zombie", prepare=_zombie_nearby),
    Scenario("rest", "game.rest()", "wake_up", None, prepare=_tired),
    # The primitives level (`agents.api=primitives`): the same goals with their prerequisites held.
    Scenario("gather wood x2", 'game.gather("wood", 2)', "collect_wood", "tree"),
    Scenario("gather stone (wood pickaxe held)", 'game.gather("stone")', "collect_stone", "stone",
             {"wood_pickaxe": 1}),
    Scenario("gather coal (wood pickaxe held)", 'game.gather("coal")', "collect_coal", "coal",
             {"wood_pickaxe": 1}),
    Scenario("place_item table", 'game.place_item("table")', "place_table", None, {"wood": 2}),
    Scenario("place_item furnace", 'game.place_item("furnace")', "place_furnace", None, {"stone": 4}),
    Scenario("craft_item wood_pickaxe (table 2 away)", 'game.craft_item("wood_pickaxe")', "make_wood_pickaxe",
             None, {"wood": 1}, (("table", (2, 0)),)),
    Scenario("craft_item stone_pickaxe (table 2 away)", 'game.craft_item("stone_pickaxe")',
             "make_stone_pickaxe", None, {"wood": 1, "stone": 1}, (("table", (0, 2)),)),
)


def reachable(env: CrafterEnv, target: str, limit: int = REACH) -> bool:
    """Whether a tile holding `target` (material or creature) is next to a tile the player can walk to in
    at most `limit` steps (crafter's whole map, not the player's view)."""
    world = env.crafter._world
    names = world._mat_names
    mat = world._mat_map
    width, height = mat.shape
    if target in ("cow", "zombie", "skeleton"):
        goals = {tuple(int(v) for v in obj.pos) for obj in world.objects
                 if type(obj).__name__.lower() == target}
    else:
        ids = [i for i, n in names.items() if n == target]
        goals = {(int(x), int(y)) for x, y in zip(*np.nonzero(np.isin(mat, ids)), strict=True)}
    if not goals:
        return False
    start = tuple(int(v) for v in env.crafter._player.pos)
    seen = {start: 0}
    queue = deque([start])
    while queue:
        x, y = queue.popleft()
        for dx, dy in ((1, 0), (-1, 0), (0, 1), (0, -1)):
            nxt = (x + dx, y + dy)
            if nxt in goals and nxt != start:
                return True
            if (0 <= nxt[0] < width and 0 <= nxt[1] < height and nxt not in seen
                    and seen[(x, y)] < limit and names[mat[nxt]] in _WALKABLE):
                seen[nxt] = seen[(x, y)] + 1
                queue.append(nxt)
    return False


def run_scenario(scenario: Scenario, seeds: range, env: CrafterEnv | None = None) -> tuple[int, int]:
    """(reached, counted starts) of `scenario` over `seeds`."""
    env = env or CrafterEnv(length=None)
    call = scenario.call[:-1] + _steps_arg(scenario.call) + ")"
    macro = compile_macro(MacroSource("call", f"def call(game):\n    ok = yield from {call}\n"))
    reached = counted = 0
    for seed in seeds:
        env.reset(seed=seed)
        player, world = env.crafter._player, env.crafter._world
        for item, n in scenario.give.items():
            player.inventory[item] = n
        x, y = (int(v) for v in player.pos)
        for material, (dx, dy) in scenario.stations:
            world[(x + dx, y + dy)] = material
        if scenario.prepare is not None:
            scenario.prepare(env)
        if scenario.target is not None and not reachable(env, scenario.target):
            continue
        counted += 1
        game = GameAPI(env.crafter, random.Random(seed))
        before = dict(player.achievements)
        result = run_macro(env, macro, game, gamma=1.0, max_steps=MAX_STEPS + 1)
        if result.diagnostic is not None:
            raise AssertionError(f"{scenario.name} seed {seed}: {result.diagnostic}")
        if scenario.counter:
            ok = player.achievements[scenario.counter] > before[scenario.counter]
        else:
            ok = game.nearest(scenario.target) is not None  # explore / walk_to: in view (walk_to: facing)
            if "walk_to" in scenario.call:
                ok = any(game.is_facing(t) for t in game.find(scenario.target))
        reached += ok
    return reached, counted


def _steps_arg(call: str) -> str:
    """``, max_steps=MAX_STEPS`` for a call that already has arguments, else ``max_steps=MAX_STEPS``."""
    return f"max_steps={MAX_STEPS}" if call.endswith("()") else f", max_steps={MAX_STEPS}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=100)
    args = parser.parse_args(argv)
    env = CrafterEnv(length=None)
    print(f"| scenario | call | reached / reachable starts (of {args.seeds} seeds) | rate |")
    print("|---|---|---|---|")
    for scenario in SCENARIOS:
        reached, counted = run_scenario(scenario, range(args.seeds), env)
        rate = f"{reached / counted:.2f}" if counted else "-"
        print(f"| {scenario.name} | `{scenario.call}` | {reached} / {counted} | {rate} |")


if __name__ == "__main__":
    main()
