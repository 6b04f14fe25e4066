"""Crafter's rules as documentation for the LLM roles, generated from crafter's own data (data.yaml).

The prompts must tell a small model what it cannot know (which material needs which pickaxe, what a
table costs, what must be nearby to craft), and must not drift from the game: every recipe line below is
built from `crafter.constants` (crafter's data.yaml), and the few rules that live in crafter's code rather
than its data (creature health, survival counters) are stated next to the code they describe. The text
documents the game; it is not a plan for any task.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from functools import cache
from typing import Any

from crafter import constants

from rlgpt.envs.crafter import VITALS

_ACTION_DOCS = {
    "noop": "do nothing for one step",
    "do": "interact with the faced tile: collect its material, hit the creature standing there, eat a "
          "ripe plant, or drink from water",
    "sleep": "fall asleep (only when energy is below its maximum); the player wakes up when energy is "
             "full again (achievement wake_up) or when hurt",
}


def _items(mapping: dict[str, Any]) -> str:
    return ", ".join(f"{n} {name}" for name, n in mapping.items())


_FAMILY_DOCS = {
    "move_": "face that way and step one tile if it is walkable and free (otherwise only turn)",
    "place_": "put that item on the faced tile (see Placing)",
    "make_": "craft that item (see Crafting)",
}


def collect_line(material: str, info: dict[str, Any]) -> str:
    """One line of the Collecting section: what `do` on `material` needs and gives."""
    need = f"needs {_items(info['require'])} in the inventory" if info["require"] else "needs no tool"
    chance = f" with probability {info['probability']}" if "probability" in info else ""
    left = "stays" if info["leaves"] == material else f"becomes {info['leaves']}"
    return f"- {material}: {need}; gives {_items(info['receive'])}{chance}; the tile {left}."


def place_line(name: str, info: dict[str, Any]) -> str:
    """One line of the Placing section: what `place_<name>` consumes and where it can go."""
    return (f"- place_{name}: uses {_items(info['uses'])} from the inventory; the faced tile must be one of "
            f"{', '.join(info['where'])} with no creature on it.")


NEARBY = "within 1 tile, diagonals included"
"""What crafter's ``nearby`` means for a station (`rlgpt.macro.api.GameAPI.nearby` tests the same)."""


def make_line(name: str, info: dict[str, Any], *, explain_nearby: bool = True) -> str:
    """One line of the Crafting section: what `make_<name>` consumes and what must be nearby (`NEARBY`
    spelt out unless the section's header says it once for every line)."""
    nearby = f" ({NEARBY})" if explain_nearby else ""
    return (f"- make_{name}: uses {_items(info['uses'])} from the inventory; needs "
            f"{' and '.join(info['nearby'])} nearby{nearby}; gives {info['gives']} {name}.")


def _action_lines(actions: Iterable[str]) -> list[str]:
    """The Actions section: one line per action, except that the moves, the ``place_*`` and the ``make_*``
    actions share a line per family (their costs are in Placing and Crafting: one place for each fact)."""
    families: dict[str, list[str]] = {}
    for action in actions:
        family = next((f for f in _FAMILY_DOCS if action.startswith(f)), action)
        families.setdefault(family, []).append(action)
    return [f"- {', '.join(members)}: "
            f"{_FAMILY_DOCS.get(family) or _ACTION_DOCS.get(family, 'see crafter documentation')}"
            for family, members in families.items()]


def _grouped(names: Iterable[str], key: Callable[[str], str]) -> str:
    """``a, b (key); c (other key)``: names that share a description listed once before it."""
    groups: dict[str, list[str]] = {}
    for name in names:
        groups.setdefault(key(name), []).append(name)
    return "; ".join(f"{', '.join(members)} ({text})" for text, members in groups.items())


@cache
def crafter_rules() -> str:
    """Crafter's rules, actions, recipes, requirements and survival stats as plain-text documentation."""
    items = constants.items
    stats = list(VITALS)
    lines = [
        "The world is a 2D grid of tiles. Each tile has a material; creatures (cow, zombie, skeleton) and "
        "plants stand on tiles. The player sees a 9x7 window around itself and always faces one of the "
        "four neighbouring tiles; `do`, `place_*` act on that faced tile.",
        f"Walkable materials: {', '.join(constants.walkable)} (lava is walkable too but kills the player).",
        "",
        "Actions (one per step):",
        *_action_lines(constants.actions),
        "",
        "Collecting (`do` while facing a tile of that material):",
        *(collect_line(m, info) for m, info in constants.collect.items()),
        "",
        "Placing (`place_<name>` while facing a suitable tile):",
        *(place_line(n, info) for n, info in constants.place.items()),
        "",
        f"Crafting (`make_<name>`; nearby = {NEARBY}: the player need not face the table or furnace):",
        *(make_line(n, info, explain_nearby=False) for n, info in constants.make.items()),
        "",
        "Inventory: " + _grouped((n for n in items if n not in stats),
                                 lambda n: f"max {items[n]['max']} each, start at {items[n]['initial']}")
        + ".",
        "Survival: " + _grouped(stats, lambda n: f"0-{items[n]['max']} each, start at {items[n]['initial']}")
        + ". "
        "Food, drink and energy slowly decrease over time; food rises by eating a cow (hit it until it "
        "dies: +6 food) or a ripe plant (+4 food), drink by `do` facing water (+1), energy by sleeping. "
        "Health slowly recovers while food, drink and energy are all above 0 and decreases while any is 0; "
        "at 0 health the episode ends. Zombies (on grass, more at night) and skeletons (in dark tunnels) "
        "attack; a hit with `do` damages them (more with a better sword).",
        "",
        "Achievements (each unlocked the first time it happens in an episode): "
        + ", ".join(constants.achievements) + ".",
        "collect_<item> is unlocked by collecting that item, place_<name> by placing it, make_<name> by "
        "crafting it, eat_cow/eat_plant by eating, defeat_zombie/defeat_skeleton by killing one, "
        "collect_drink by drinking water, wake_up by waking up after sleeping.",
    ]
    return "\n".join(lines)


@cache
def actions_only() -> str:
    """The ``env_rules`` of `AgentConfig.env_doc` ``none``: the game's name and its action list, nothing of
    its rules (the prompt-knowledge ablation)."""
    return ("The game is Crafter; its rules are not documented here.\n"
            f"Actions (one per step): {', '.join(constants.actions)}.")


SURVIVAL_LINES = {
    "collect_drink": "`do` facing water",
    "eat_cow": "hit a cow with `do` until it dies (+6 food)",
    "eat_plant": "`do` facing a ripe plant: a sapling placed with place_plant ripens after about 300 steps",
    "defeat_zombie": "hit a zombie with `do` until it dies (zombies walk on grass, more at night)",
    "defeat_skeleton": "hit a skeleton with `do` until it dies (skeletons live in dark tunnels)",
    "wake_up": "the `sleep` action while energy is below its maximum (energy starts full and drops by 1 "
               "about every 30 steps awake; `sleep` at full energy does nothing); waking up when energy is "
               "full again unlocks it",
}
"""How each achievement no recipe gives is unlocked (crafter's ``Player._do_object``, ``_do_material``,
``Plant.ripe``: ``grown > 300``, and ``Player.update``/``_fatigue``: energy -1 after 30 steps awake, sleep
only below the maximum), for `requirement_lines` and the fallbacks' sub-action descriptions. The 1.5B's
wake_up skills slept (or called `rest()`) first thing in a fresh world, where nothing happens."""


def achievement_requirements() -> dict[str, frozenset[str]]:
    """Achievements that must come first for each achievement, from crafter's recipes.

    An item needed by a recipe (a tool to collect, a material to place or craft, a placed table/furnace
    nearby) maps to the achievement that first provides it (``collect_x``, ``make_x``, ``place_x``).
    Survival achievements (eat, drink, sleep, fight) have no item prerequisites.
    """
    source: dict[str, str] = {}
    for info in constants.collect.values():
        for item in info["receive"]:
            if f"collect_{item}" in constants.achievements:
                source.setdefault(item, f"collect_{item}")
    for name in constants.make:
        source.setdefault(name, f"make_{name}")
    for name in constants.place:
        source.setdefault(name, f"place_{name}")
    needs: dict[str, frozenset[str]] = {}
    for achievement in constants.achievements:
        kind, _, name = achievement.partition("_")
        items: set[str] = set()
        if kind == "collect":
            for info in constants.collect.values():
                if name in info["receive"]:
                    items |= set(info["require"])
        elif kind == "place" and name in constants.place:
            items |= set(constants.place[name]["uses"])
        elif kind == "make" and name in constants.make:
            items |= set(constants.make[name]["uses"]) | set(constants.make[name]["nearby"])
        elif achievement == "eat_plant":
            items.add("plant")  # a placed sapling that has ripened
        needs[achievement] = frozenset(source[i] for i in items if i in source and source[i] != achievement)
    return needs


def prerequisite_chain(goals: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """Every achievement `goals` depend on, then the goals, in an order where prerequisites come first."""
    needs = achievement_requirements()
    order: list[str] = []

    def visit(achievement: str, path: tuple[str, ...]) -> None:
        if achievement in order:
            return
        if achievement in path:
            raise ValueError(f"cyclic requirements through {achievement!r}")
        for pre in sorted(needs[achievement]):
            visit(pre, (*path, achievement))
        order.append(achievement)

    for goal in goals:
        if goal not in needs:
            raise ValueError(f"unknown achievement {goal!r}; known: {', '.join(constants.achievements)}")
        visit(goal, ())
    return tuple(order)


def _consumed(chain: Iterable[str]) -> dict[str, int]:
    """How much of each item the place/make achievements of `chain` use up."""
    consumed: dict[str, int] = {}
    for achievement in chain:
        kind, _, name = achievement.partition("_")
        recipe = {"place": constants.place, "make": constants.make}.get(kind, {}).get(name, {})
        for item, n in recipe.get("uses", {}).items():
            consumed[item] = consumed.get(item, 0) + n
    return consumed


def remaining_chain(goals: list[str] | tuple[str, ...], unlocked: Iterable[str] = (),
                    inventory: Mapping[str, int] | None = None) -> tuple[str, ...]:
    """`prerequisite_chain(goals)` for an episode that starts with achievements `unlocked` and items in
    `inventory` (a chain's later subtask): an unlocked achievement is left out, except a goal itself and a
    collecting step whose material the rest of the chain still uses beyond what the inventory holds."""
    done, held = set(unlocked), dict(inventory or {})
    chain = prerequisite_chain(goals)
    consumed = _consumed(a for a in chain if a not in done)

    def needed(achievement: str) -> bool:
        kind, _, name = achievement.partition("_")
        return (achievement not in done or achievement in goals
                or (kind == "collect" and consumed.get(name, 0) > held.get(name, 0)))

    return tuple(a for a in chain if needed(a))


def requirement_lines(goals: list[str] | tuple[str, ...], unlocked: Iterable[str] = (),
                      inventory: Mapping[str, int] | None = None) -> str:
    """What unlocking `goals` takes, from crafter's recipes: every prerequisite achievement in an order
    that works, each with its recipe line, and how much of each collected material the chain consumes. The
    same text for any achievement: it restates the rules for the task at hand, which a small model does not
    derive from the full rules on its own.

    An episode that starts with achievements `unlocked` and items in `inventory` (a chain's later subtask)
    lists only `remaining_chain`; otherwise the inventory starts empty."""
    held = dict(inventory or {})
    chain = remaining_chain(goals, unlocked, held)
    consumed = _consumed(chain)
    lines = []
    for i, achievement in enumerate(chain, 1):
        kind, _, name = achievement.partition("_")
        if kind == "place" and name in constants.place:
            line = place_line(name, constants.place[name])[2:]
        elif kind == "make" and name in constants.make:
            line = make_line(name, constants.make[name])[2:]
        elif kind == "collect":
            sources = [m for m, c in constants.collect.items() if name in c["receive"]]
            need = ""
            if name in consumed:
                have = f"; the inventory starts with {held[name]}" if held.get(name) else ""
                need = (f" ({consumed[name]} {name} needed in total: collect until the inventory holds that "
                        f"many{have})")
            line = f"{achievement}{need}: " + "; ".join(
                f"`do` facing {collect_line(m, constants.collect[m])[2:]}" for m in sources)
        else:
            line = f"{achievement}: {SURVIVAL_LINES.get(achievement, 'see the rules above')}"
        lines.append(f"{i}. {line}")
    return "\n".join(lines)


def benchmark_plan(unlocked: Iterable[str] = ()) -> tuple[str, ...]:
    """The Crafter benchmark's plan over the achievement graph (what the recipe-graph fallbacks give the
    benchmark task, which has no single goal to chain to): every achievement not yet `unlocked`, the recipe
    graph's first (those that need another or that another needs: the tech tree), shallowest first (fewest
    prerequisites, ties in crafter's order), then the survival ones no recipe involves. Every prerequisite
    comes before what needs it, so any prefix of the plan is a chain an episode can follow."""
    needs = achievement_requirements()
    needed = set().union(*needs.values())
    order = list(constants.achievements)
    done = set(unlocked)

    def rank(achievement: str) -> tuple[bool, int, int]:
        in_graph = bool(needs[achievement]) or achievement in needed
        return (not in_graph, len(prerequisite_chain([achievement])), order.index(achievement))

    return tuple(a for a in sorted(order, key=rank) if a not in done)
