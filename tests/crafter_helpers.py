"""Shared helpers for the tests that play Crafter (plain functions, no fixtures with global effects).

Every test folder imports it as ``crafter_helpers``: pytest puts tests/ on ``sys.path`` for tests/conftest.py.
"""

from __future__ import annotations

import crafter
import numpy as np
from crafter import constants

from rlgpt.envs.crafter import DIRECTIONS, CrafterEnv, in_world_order

_CHOP_BODY = """
        tree = game.nearest("tree")
        if tree is None:
            yield game.random_move()
        elif game.is_facing(tree):
            yield "do"
        else:
            step = game.step_toward(tree)
            yield step if step is not None else game.random_move()
"""


def chop_source(name: str = "chop", steps: int | None = None) -> str:
    """Source of macro ``name`` in the style the fast agent writes (the public `GameAPI` only): walk to the
    nearest visible tree and hit it, moving at random while none is visible or no path reaches it.

    It ends once the inventory holds one more wood, or with ``steps``, after that many actions."""
    loop = (f"for attempt in range({steps}):" if steps is not None
            else 'start = game.inventory["wood"]\n    while game.inventory["wood"] <= start:')
    return f"\ndef {name}(game):\n    {loop}{_CHOP_BODY}"


def fenced(code: str) -> str:
    """``code`` as a model's reply: one fenced python block."""
    return f"```python\n{code.strip()}\n```"


_DIRECTIONS: tuple[tuple[int, int], ...] = tuple(step for step, _ in DIRECTIONS)


class PinnedCrafter(crafter.Env):
    """The reference ``crafter.Env`` with its one address-dependent choice pinned to insertion order.

    Stock crafter picks the creature to despawn from a set ordered by memory address, so two stock envs with
    the same seed diverge; everything else (every random draw, render included) is crafter's own code.
    """

    def _balance_chunk(self, chunk: tuple[int, int, int, int], objs: set) -> None:
        super()._balance_chunk(chunk, in_world_order(self._world, objs))


def semantic_window(semantic: np.ndarray, pos: np.ndarray, width: int = 9, height: int = 7) -> np.ndarray:
    """The (height, width) window of crafter's whole-map semantic array around ``pos``, 0 outside, row = y."""
    out = np.zeros((height, width), np.uint8)
    x0, y0 = int(pos[0]) - width // 2, int(pos[1]) - height // 2
    for row in range(height):
        for col in range(width):
            x, y = x0 + col, y0 + row
            if 0 <= x < semantic.shape[0] and 0 <= y < semantic.shape[1]:
                out[row, col] = semantic[x, y]
    return out


def stand_facing(env: CrafterEnv, material: str) -> tuple[int, int]:
    """Teleport the player onto a free walkable cell next to the nearest free ``material`` cell, facing it.

    Uses crafter's own ``World.move``; returns the target cell. Raises LookupError if the world has none.
    """
    world, player = env.crafter._world, env.crafter._player
    xs, ys = np.nonzero(world._mat_map == world._mat_ids[material])
    order = np.argsort(np.abs(xs - player.pos[0]) + np.abs(ys - player.pos[1]))
    for i in order:
        target = (int(xs[i]), int(ys[i]))
        if world[target][1] is not None:
            continue
        for dx, dy in _DIRECTIONS:
            stand = (target[0] - dx, target[1] - dy)
            mat, obj = world[stand]
            if mat in constants.walkable and (obj is None or obj is player):
                if obj is None:
                    world.move(player, stand)
                player.facing = (dx, dy)
                return target
    raise LookupError(f"no reachable {material} cell in this world")


def played_starts(links, seeds=(3, 4), task: str = "make_wood_pickaxe") -> list:
    """Start states after the chain prefix `links` (`rlgpt.macro.prefix.PrefixLink`s), one per seed, played
    on real worlds by `PrefixStart` (each reaching every link's goal)."""
    from rlgpt.envs.tasks import make_task_env
    from rlgpt.macro.prefix import PrefixStart

    env = PrefixStart(make_task_env(task), links, pool_size=len(seeds))
    for seed in seeds:
        _, info = env.reset(seed=seed)
        assert info["prefix_ok"], f"the prefix missed a goal on seed {seed}"
    return env.pool


def gif_frames(path) -> list[np.ndarray]:
    """Every frame of an animated GIF as RGB."""
    from PIL import Image, ImageSequence

    with Image.open(path) as gif:
        return [np.asarray(frame.convert("RGB")) for frame in ImageSequence.Iterator(gif)]


def assert_replay(path, steps: int) -> None:
    """A replay GIF (`rlgpt.run.replay`): one frame per primitive step of the episode, every frame different
    (each is its own step), and the game itself moving (not only the panel's text)."""
    from rlgpt.run.replay import SCALE

    frames = gif_frames(path)
    assert len(frames) == steps > 1
    assert len({f.tobytes() for f in frames}) == len(frames)
    game = 64 * SCALE  # crafter's 64x64 frame, left of the panel
    assert len({f[:game, :game].tobytes() for f in frames}) > 1
