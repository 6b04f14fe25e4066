"""`GameAPI` over a compiled-engine row equals `GameAPI` over the `CrafterEnv` game it plays.

Each row of a `CompiledBatch` plays the same game as a `CrafterEnv` of a `ReferenceBatch` (same seeds and
actions). The games are driven by random play and by the control primitives (whose actions must be the
same on both, step for step), and at every step every query of the API is asked of both and must answer
the same. The compiled searches are also checked against the API's former Python definitions.
"""

from __future__ import annotations

import random
from collections import deque

import numpy as np
import pytest

from rlgpt.envs.batch import ReferenceBatch
from rlgpt.envs.crafter import ACTION_NAMES, MATERIALS, MOVES, CrafterEnv
from rlgpt.envs.engine import CompiledBatch
from rlgpt.macro.api import OBJECT_KINDS, WALKABLE, GameAPI
from rlgpt.macro.budget import MacroLimits
from rlgpt.macro.goal import Goal
from rlgpt.macro.views import EngineView, batch_views

KINDS = MATERIALS + OBJECT_KINDS
ITEM_NAMES = ("wood", "stone", "health", "sapling", "iron_sword")
GOALS = tuple(Goal.parse(g) for g in ("wood", "stone", "collect_wood", "place_table", "make_wood_pickaxe",
                                       "collect_stone", "eat_cow", "wake_up", "sapling"))


def answers(game: GameAPI) -> dict:
    """Every query of the API, over every visible tile and a ring around the view."""
    (x0, y0), (x1, y1) = game.view_bounds
    px, py = game.pos
    tiles = [(x, y) for x in range(x0 - 1, x1 + 2) for y in range(y0 - 1, y1 + 2)]
    out = {
        "pos": game.pos, "facing": game.facing, "target": game.target,
        "target_material": game.target_material, "target_object": game.target_object,
        "inventory": dict(game.inventory), "inventory order": list(game.inventory),
        "achievements": dict(game.achievements), "achievements order": list(game.achievements),
        "items": [game.item(name) for name in ITEM_NAMES],
        "vitals": (game.health, game.food, game.drink, game.energy),
        "sleeping": game.sleeping, "daylight": game.daylight, "bounds": game.view_bounds, "view": game.view(),
        "tiles": [(game.is_visible(t), game.material_at(t), game.object_at(t), game.is_walkable(t),
                   game.distance(t), game.is_adjacent(t), game.is_facing(t)) for t in tiles],
        "find": [game.find(kind) for kind in KINDS],
        "nearest": [game.nearest(kind) for kind in KINDS],
        "nearby": [game.nearby(kind, d) for kind in KINDS for d in (0, 1, 2, 4)],
        "step_toward": [game.step_toward(t) for t in tiles + [(px + 30, py), (px, py - 7), (10**12, 3)]],
        "face": [game.face((px + dx, py + dy)) for dx, dy in MOVES],
        "goal counts": [goal.count(game) for goal in GOALS],
    }
    # The runtime's per-step reader of a goal's one count answers what the goal counts in the tables.
    assert [goal.counter(game)() for goal in GOALS] == out["goal counts"]
    return out


def assert_same(engine_game: GameAPI, crafter_game: GameAPI, where: object) -> None:
    want, got = answers(crafter_game), answers(engine_game)
    for key in want:
        assert got[key] == want[key], f"{where}: {key}\nengine  {got[key]}\ncrafter {want[key]}"


# What the rows run now and then: every control primitive, with arguments that reach their goals often.
PRIMITIVES = (
    ("collect", ("wood", 2)), ("place", ("table",)), ("craft", ("wood_pickaxe",)), ("collect", ("stone",)),
    ("explore", ("iron",)), ("walk_to", ("water",)), ("attack", ("cow",)), ("drink_water", ()), ("eat", ()),
    ("craft", ("stone_pickaxe",)), ("place", ("plant",)), ("rest", ()), ("collect", ("coal",)),
)


def test_every_query_and_primitive_answers_the_same_on_an_engine_row_and_its_crafter_game() -> None:
    seeds = [0, 1, 2, 7, 11, 23]
    n, steps = len(seeds), 240
    engine, reference = CompiledBatch(n), ReferenceBatch(n)
    engine.reset(seeds)
    reference.reset(seeds)
    out, want = engine.step(np.zeros(n, int)), reference.step(np.zeros(n, int))
    engine_games = [GameAPI(view, random.Random(e)) for e, view in enumerate(batch_views(engine))]
    crafter_games = [GameAPI(env.crafter, random.Random(e)) for e, env in enumerate(reference.envs)]
    assert all(isinstance(g._view, EngineView) for g in engine_games)
    rng = np.random.default_rng(0)
    running: list = [None] * n  # per row: (engine generator, crafter generator, name) of a primitive
    calls = [0] * n
    seen = {"primitive steps": 0, "primitive returns": set(), "objects": set(), "resets": 0}
    for t in range(steps):
        actions = np.zeros(n, int)
        for e in range(n):
            assert_same(engine_games[e], crafter_games[e], f"step {t} row {e}")
            seen["objects"] |= {tile for row in crafter_games[e].view() for tile in row}
            if running[e] is None and rng.random() < 0.15:
                name, args = PRIMITIVES[calls[e] % len(PRIMITIVES)]
                calls[e] += 1
                running[e] = (getattr(engine_games[e], name)(*args, max_steps=60),
                              getattr(crafter_games[e], name)(*args, max_steps=60), name)
            action = None
            if running[e] is not None:
                mine, theirs, name = running[e]
                try:
                    action = next(theirs)
                except StopIteration as stop:
                    with pytest.raises(StopIteration) as same:
                        next(mine)
                    assert same.value.value == stop.value, (t, e, name)
                    seen["primitive returns"].add((name, stop.value))
                    running[e] = None
                else:
                    assert next(mine) == action, (t, e, name)
                    seen["primitive steps"] += 1
            actions[e] = ACTION_NAMES.index(action) if action else rng.integers(len(ACTION_NAMES))
        rows = np.flatnonzero(rng.random(n) < 0.8)  # some rows wait a step, as rows running no macro do
        engine.step_rows(rows, actions[rows], out)
        reference.step_rows(rows, actions[rows], want)
        if want.dead.any():
            seen["resets"] += int(want.dead.sum())
            running = [None if want.dead[e] else r for e, r in enumerate(running)]
            engine.reset_done(want.dead.copy(), out)
            reference.reset_done(want.dead.copy(), want)
    # The play reached what the comparison is meant to cover.
    assert seen["primitive steps"] >= 500, seen
    assert {ok for _, ok in seen["primitive returns"]} == {True, False}, seen
    assert {"cow", "player"} <= seen["objects"], seen


def reference_find(game: GameAPI, kind: str, include_own_tile: bool = False) -> tuple:
    """`GameAPI.find` as it was written in Python before the search was compiled."""
    (x0, y0), (x1, y1) = game.view_bounds
    px, py = game.pos
    if kind in OBJECT_KINDS:
        found = [(x, y) for x in range(x0, x1 + 1) for y in range(y0, y1 + 1)
                 if game.object_at((x, y)) == kind]
    else:
        found = [(x, y) for x in range(x0, x1 + 1) for y in range(y0, y1 + 1)
                 if game.material_at((x, y)) == kind and (include_own_tile or (x, y) != (px, py))]
    return tuple(sorted(found, key=lambda p: (abs(p[0] - px) + abs(p[1] - py), p[1], p[0])))


def reference_step_toward(game: GameAPI, goal: tuple[int, int]) -> str | None:
    """`GameAPI.step_toward`'s breadth-first search as it was written in Python."""
    start = game.pos
    if game.distance(goal) == 1:
        return game.face(goal)
    goals = {(goal[0] + dx, goal[1] + dy) for dx, dy in MOVES
             if game.is_walkable((goal[0] + dx, goal[1] + dy))}
    if not goals:
        return None
    first = {start: ""}
    queue = deque([start])
    while queue:
        x, y = queue.popleft()
        for (dx, dy), action in MOVES.items():
            nxt = (x + dx, y + dy)
            if nxt in first or not game.is_walkable(nxt):
                continue
            first[nxt] = first[(x, y)] or action
            if nxt in goals:
                return first[nxt]
            queue.append(nxt)
    return None


def test_compiled_searches_equal_their_python_definitions() -> None:
    env = CrafterEnv(seed=0, length=None)
    rng = np.random.default_rng(1)
    checked = {"paths": 0, "none": 0}
    for seed in range(6):
        env.reset(seed=seed)
        game = GameAPI(env.crafter, random.Random(0))
        for _ in range(60):
            (x0, y0), (x1, y1) = game.view_bounds
            for kind in MATERIALS + OBJECT_KINDS:
                assert game.find(kind) == reference_find(game, kind)
                assert game.nearby(kind, 2) == any(
                    max(abs(x - game.pos[0]), abs(y - game.pos[1])) <= 2
                    for x, y in reference_find(game, kind, include_own_tile=True))
            for x in range(x0 - 1, x1 + 2):
                for y in range(y0 - 1, y1 + 2):
                    want = reference_step_toward(game, (x, y))
                    assert game.step_toward((x, y)) == want, (seed, (x, y))
                    checked["paths" if want else "none"] += 1
            env.step(int(rng.integers(1, 5)))  # moves only: the view wanders over the map
    assert checked["paths"] > 1000 and checked["none"] > 1000, checked
    assert set(WALKABLE) == {"grass", "sand", "path"}


SEARCH_LOOP = """
def m(game):
    for _ in range(400):
        x = game.{call}
    yield "noop"
"""


@pytest.mark.parametrize("call, fails", [("step_toward((game.pos[0] - 4, game.pos[1] + 3))", True),
                                         ("find('grass')", True), ("distance((0, 0))", False)])
def test_searches_are_charged_by_the_tiles_they_look_at(run, call, fails) -> None:
    """400 searches of the view cost far more fuel than 400 cheap calls (1 unit each plus the loop: ~800).
    On seed 0's first view (grass all around) the walk to (-4, +3) searches most of the view."""
    result, _ = run(SEARCH_LOOP.format(call=call), limits=MacroLimits(fuel=1500))
    assert result.outcome == ("fuel" if fails else "success"), result.diagnostic


def test_the_compiled_queries_are_ready_before_any_macro_code_runs() -> None:
    # In a fresh process, as in a probe's child or an env worker: building the game API compiles (or loads)
    # every query, so no macro's per-step clock pays for a compilation (seconds on a fresh install: a probe
    # once timed a working macro out on its first `game.nearest`). Playing macros then adds no signature.
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent("""
        import random
        from rlgpt.envs.crafter import CrafterEnv
        from rlgpt.envs.engine import CompiledBatch
        from rlgpt.macro import queries
        from rlgpt.macro.api import GameAPI
        from rlgpt.macro.views import batch_views

        dispatchers = (queries.find_tiles, queries.first_step, queries.engine_window)
        assert not any(d.signatures for d in dispatchers)
        env = CrafterEnv(length=None)
        env.reset(seed=0)
        apis = [GameAPI(env.crafter, random.Random(0))]
        ready = [list(d.signatures) for d in dispatchers]
        assert all(ready), ready
        batch = CompiledBatch(1)
        batch.reset([0])
        apis.append(GameAPI(batch_views(batch)[0], random.Random(0)))
        for api in apis:
            for kind in ("tree", "water", "cow", "stone"):
                tile = api.nearest(kind)
                api.find(kind)
                if tile is not None:
                    api.step_toward(tile)
        assert [list(d.signatures) for d in dispatchers] == ready, "a query compiled while macro code ran"
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]
