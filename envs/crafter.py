"""Crafter as a Gymnasium env, with a symbolic observation that skips rendering.

`crafter.Env.step` renders the pixel observation (about three quarters of a step) and builds the semantic
map of the whole world for ``info["semantic"]`` on every step. `CrafterEnv` keeps a real `crafter.Env` as
``self.crafter`` and re-implements only the step/reset glue so that, in symbolic mode, neither runs; the game
logic itself (objects, chunk balancing, daylight, achievements, health reward) is crafter's own code. World
generation, which dominates a reset, is crafter's generator compiled (`rlgpt.envs.worldgen`): same worlds.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import crafter
import gymnasium
import numpy as np
from crafter import constants, objects

from .worldgen import generate_world

ACTION_NAMES: tuple[str, ...] = tuple(constants.actions)
"""Crafter's 17 primitive actions; index = action id."""
MATERIALS: tuple[str, ...] = tuple(constants.materials)
"""Material names a tile can have, in crafter's order (its semantic ids are 1 + index)."""
ITEMS: tuple[str, ...] = tuple(constants.items)
"""Inventory item names, in crafter's order (the first entries of the symbolic ``"vector"``)."""
VITALS: tuple[str, ...] = tuple(name for name in ITEMS if name in ("health", "food", "drink", "energy"))
"""The inventory entries that are the player's vital levels (survival stats), not items."""

# Same object order as crafter.Env's SemanticView, so our ids equal crafter's semantic ids.
_OBJECT_TYPES: tuple[type, ...] = (
    objects.Player,
    objects.Cow,
    objects.Zombie,
    objects.Skeleton,
    objects.Arrow,
    objects.Plant,
)

ID_NAMES: tuple[str, ...] = (
    ("outside",) + MATERIALS + tuple(cls.__name__.lower() for cls in _OBJECT_TYPES)
)
"""Names of the symbolic view ids: 0 = outside the world, then materials, then objects."""

N_IDS: int = len(ID_NAMES)
"""Number of distinct ids in the symbolic ``"view"`` observation."""

_OBJECT_IDS: dict[type, int] = {cls: 1 + len(MATERIALS) + i for i, cls in enumerate(_OBJECT_TYPES)}

DIRECTIONS: tuple[tuple[tuple[int, int], str], ...] = (
    ((-1, 0), "left"),
    ((1, 0), "right"),
    ((0, -1), "up"),
    ((0, 1), "down"),
)
"""The four (dx, dy) steps with their names, in the order crafter's ``Object.all_dirs`` lists them; the move
actions are ``move_<name>`` and the facing entries of the vector ``facing_<name>``."""
MOVES: dict[tuple[int, int], str] = {step: f"move_{name}" for step, name in DIRECTIONS}
"""The move action that steps each (dx, dy), in `DIRECTIONS` order."""
_FACING_INDEX: dict[tuple[int, int], int] = {d: i for i, (d, _) in enumerate(DIRECTIONS)}

VECTOR_FIELDS: tuple[str, ...] = (
    ITEMS + tuple(f"facing_{name}" for _, name in DIRECTIONS) + ("daylight", "sleeping")
)
"""Names of the entries of the symbolic ``"vector"`` observation, in order."""

_N_ITEMS = len(ITEMS)
OBS_MODES: tuple[str, ...] = ("symbolic", "pixels")
"""Accepted values of ``CrafterEnv(obs_mode=...)``."""


def in_world_order(world: Any, objs: Any) -> list[Any]:
    """The objects of one crafter chunk, ordered by when they were added to the world.

    crafter keeps a chunk's objects in a ``set`` of identity-hashed objects, and its despawn step picks
    ``creatures[random.randint(n)]`` from that set's order, which follows memory addresses: two
    ``crafter.Env`` with the same seed and actions diverge (danijar/crafter#31, #36). Handing the chunk
    over in insertion order makes that one choice reproducible; every random draw stays the same.
    """
    obj_map = world._obj_map
    return sorted(objs, key=lambda obj: int(obj_map[int(obj.pos[0]), int(obj.pos[1])]))


class _NoiseReplay:
    """Stands in for the world RNG during an on-demand render: returns the noise already drawn."""

    def __init__(self, noise: np.ndarray) -> None:
        self._noise = noise

    def uniform(self, low: float, high: float, size: tuple[int, ...]) -> np.ndarray:
        """Return the stored noise; crafter's LocalView asks for exactly this shape."""
        if tuple(size) != self._noise.shape:
            raise RuntimeError(f"crafter asked for night noise of shape {size}, expected {self._noise.shape}")
        return self._noise


@dataclasses.dataclass(frozen=True)
class GameState:
    """A saved moment of one `CrafterEnv` game (`CrafterEnv.snapshot`); opaque to callers."""

    world: Any
    """A standalone deep copy of crafter's World (materials, objects, chunks, RNG, daylight)."""
    player: Any
    """The player object of that copy."""
    step: int
    """crafter's step counter."""
    episode: int
    """crafter's episode counter."""
    seed: Any
    """crafter's seed."""
    last_health: int
    """Health at the previous step (crafter's health reward)."""
    unlocked: frozenset[str]
    """Achievements already rewarded this episode."""
    night_noise: np.ndarray | None
    """The night noise drawn for that step (render replays it)."""
    last_frame: np.ndarray | None
    """The pixel observation of that step (pixel mode)."""


class CrafterEnv(gymnasium.Env):
    """Crafter (``crafter.Env``) as a Gymnasium env with a symbolic or a pixel observation.

    The symbolic observation is a dict with ``"view"`` (semantic ids of the local view, row = y, col = x)
    and ``"vector"`` (inventory, facing one-hot, daylight, sleeping; see `VECTOR_FIELDS`). The pixel
    observation is exactly crafter's rendered frame. The wrapped game is ``self.crafter``; its world and
    player are ``self.crafter._world`` and ``self.crafter._player``.

    Dynamics are crafter's, with one difference: the creature a chunk despawns is picked from the chunk's
    objects in insertion order (see `in_world_order`) instead of crafter's address-dependent set order, so
    that a seed and an action sequence always give the same trajectory.
    """

    # 5 fps is the frame rate of crafter's own GUI (crafter.run_gui --fps default).
    metadata = {"render_modes": ["rgb_array"], "render_fps": 5}

    def __init__(
        self,
        obs_mode: str = "symbolic",
        area: tuple[int, int] = (64, 64),
        view: tuple[int, int] = (9, 9),
        size: tuple[int, int] = (64, 64),
        length: int | None = 10000,
        seed: int | None = None,
    ) -> None:
        if obs_mode not in OBS_MODES:
            raise ValueError(f"obs_mode must be one of {OBS_MODES}, got {obs_mode!r}")
        if length is not None and length <= 0:
            raise ValueError(f"length must be a positive number of steps or None (no limit), got {length}")
        self.obs_mode = obs_mode
        self.render_mode = "rgb_array"
        self.crafter = crafter.Env(area=area, view=view, size=size, reward=True, length=length, seed=seed)
        grid = np.asarray(self.crafter._local_view._grid)
        self._view_w, self._view_h = int(grid[0]), int(grid[1])
        self._offset_x, self._offset_y = int(grid[0] // 2), int(grid[1] // 2)
        # Shape of the noise crafter's LocalView draws from the world's RNG at night (see _night_rng).
        unit = np.asarray(self.crafter._size) // np.asarray(self.crafter._view)
        self._noise_shape = tuple(int(v) for v in grid * unit)
        self._update_radius = 2 * int(max(self.crafter._view))
        # Night noise drawn for the current step, kept so that render() can show this step's exact frame.
        self._night_noise: np.ndarray | None = None
        self._last_frame: np.ndarray | None = None
        self.action_space = gymnasium.spaces.Discrete(len(ACTION_NAMES))
        if obs_mode == "symbolic":
            self.observation_space = gymnasium.spaces.Dict(
                {
                    "view": gymnasium.spaces.Box(
                        0, N_IDS - 1, shape=(self._view_h, self._view_w), dtype=np.uint8
                    ),
                    "vector": gymnasium.spaces.Box(
                        0.0, np.inf, shape=(len(VECTOR_FIELDS),), dtype=np.float32
                    ),
                }
            )
        else:
            height, width = int(self.crafter._size[1]), int(self.crafter._size[0])
            self.observation_space = gymnasium.spaces.Box(0, 255, shape=(height, width, 3), dtype=np.uint8)

    # ---------------------------------------------------------------- gymnasium API

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Start a new episode; a given ``seed`` makes the episode (world and trajectory) reproducible.

        With ``seed=None`` crafter's episode counter goes on, so each reset yields a new world.
        """
        super().reset(seed=seed)
        game = self.crafter
        if seed is not None:
            # crafter seeds each world with hash((seed, episode)); restarting the counter replays episode 1.
            game._seed = int(seed)
            game._episode = 0
        # Same statements as crafter.Env.reset, minus the render.
        center = (game._world.area[0] // 2, game._world.area[1] // 2)
        game._episode += 1
        game._step = 0
        game._world.reset(seed=hash((game._seed, game._episode)) % (2**31 - 1))
        game._update_time()
        game._player = objects.Player(game._world, center)
        game._last_health = game._player.health
        game._world.add(game._player)
        game._unlocked = set()
        generate_world(game._world, game._player)
        obs = self._observe()
        return obs, self._info(dead=False)

    def step(self, action: int) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """Advance one primitive step; returns ``(obs, reward, terminated, truncated, info)``.

        ``reward`` is crafter's (health change / 10 plus 1 per newly unlocked achievement); ``terminated``
        means the player died, ``truncated`` that the episode length was reached.
        """
        game = self.crafter
        if game._player is None:
            raise RuntimeError("CrafterEnv.step called before reset(); call env.reset() first")
        if not 0 <= int(action) < len(ACTION_NAMES):
            raise ValueError(f"action must be in [0, {len(ACTION_NAMES)}), got {action}")
        world, player = game._world, game._player
        game._step += 1
        game._update_time()
        player.action = ACTION_NAMES[int(action)]
        radius = self._update_radius
        # Same update set as crafter.Env.step (L1 distance to the player, measured when the object's
        # turn comes, over a snapshot of the object list); plain ints instead of numpy for speed.
        for obj in world.objects:
            ppos, opos = player.pos, obj.pos
            if abs(int(opos[0]) - int(ppos[0])) + abs(int(opos[1]) - int(ppos[1])) < radius:
                obj.update()
        if game._step % 10 == 0:
            for chunk, objs in world.chunks.items():
                game._balance_chunk(chunk, in_world_order(world, objs))
        obs = self._observe()
        reward = (player.health - game._last_health) / 10
        game._last_health = player.health
        unlocked = {
            name for name, count in player.achievements.items() if count > 0 and name not in game._unlocked
        }
        if unlocked:
            game._unlocked |= unlocked
            reward += 1.0
        dead = player.health <= 0
        over = bool(game._length) and game._step >= game._length
        return obs, float(reward), bool(dead), bool(over and not dead), self._info(dead)

    def render(self) -> np.ndarray:
        """Return the RGB frame crafter would show for the current step (for videos), in any obs_mode.

        Rendering on demand draws nothing from the world's RNG, so it does not change the game.
        """
        game = self.crafter
        if game._player is None:
            raise RuntimeError("CrafterEnv.render called before reset(); call env.reset() first")
        if self.obs_mode == "pixels" and self._last_frame is not None:
            return self._last_frame.copy()
        world = game._world
        rng = world.random
        if self._night_noise is not None:
            # The renderer reads world.random at call time; hand it this step's noise instead of new draws.
            world.random = _NoiseReplay(self._night_noise)
        try:
            return game.render()
        finally:
            world.random = rng

    # ---------------------------------------------------------------- saved states

    def snapshot(self) -> GameState:
        """The game as it is now (world, creatures, player, counters, RNG, this step's night noise), for
        `restore`: restoring it, here or in another `CrafterEnv` of the same sizes, continues exactly as
        this game would (the same observations, rewards and world for the same actions)."""
        game = self.crafter
        if game._player is None:
            raise RuntimeError("CrafterEnv.snapshot called before reset(); call env.reset() first")
        # One deep copy of the world and the player together keeps every shared reference shared (each
        # creature's world, its RNG (the world's), a zombie's player) inside the copy.
        world, player = copy.deepcopy((game._world, game._player))
        return GameState(world, player, game._step, game._episode, game._seed, game._last_health,
                         frozenset(game._unlocked),
                         None if self._night_noise is None else self._night_noise.copy(),
                         None if self._last_frame is None else self._last_frame.copy())

    def restore(self, state: GameState) -> tuple[Any, dict[str, Any]]:
        """Continue from `state` (see `snapshot`); returns the observation and info of that moment, like
        ``reset``. The state itself is not modified, so it can be restored again and again."""
        if state.world.area != self.crafter._world.area:
            raise ValueError(f"a state of a {state.world.area} world cannot be restored into a "
                             f"{self.crafter._world.area} one")
        game, world = self.crafter, self.crafter._world
        # The renderer's views hold this env's World object: copy the saved world's contents into it, with
        # every reference to the saved world (creatures') mapped to it.
        contents, player = copy.deepcopy((state.world.__dict__, state.player), {id(state.world): world})
        world.__dict__.clear()
        world.__dict__.update(contents)
        game._player, game._step, game._episode, game._seed = player, state.step, state.episode, state.seed
        game._last_health, game._unlocked = state.last_health, set(state.unlocked)
        self._night_noise = None if state.night_noise is None else state.night_noise.copy()
        self._last_frame = None if state.last_frame is None else state.last_frame.copy()
        if self.obs_mode == "pixels":
            obs = self._last_frame.copy() if self._last_frame is not None else self.render()
        else:
            obs = {"view": self.local_view(), "vector": self.vector()}
        return obs, self._info(dead=player.health <= 0)

    # ---------------------------------------------------------------- observation helpers

    def _observe(self) -> Any:
        """Build the observation; at night keeps the world RNG in step with crafter's render."""
        game = self.crafter
        if self.obs_mode == "pixels":
            self._last_frame = game.render()
            return self._last_frame
        self._night_rng()
        return {"view": self.local_view(), "vector": self.vector()}

    def _night_rng(self) -> None:
        """Draw the night noise crafter's render draws, so that skipping the render keeps dynamics equal.

        crafter's LocalView draws ``world.random.uniform(32, 127, shape)`` whenever daylight < 0.5; the
        creatures and chunk balancing use the same RNG, so without this draw the worlds drift apart.
        """
        world = self.crafter._world
        if world.daylight < 0.5:
            self._night_noise = world.random.uniform(32, 127, self._noise_shape)
        else:
            self._night_noise = None

    def local_view(self) -> np.ndarray:
        """Semantic ids of the cells crafter's local pixel view shows, shape (view_h, view_w), row = y."""
        world, player = self.crafter._world, self.crafter._player
        area_w, area_h = world.area
        x0 = int(player.pos[0]) - self._offset_x
        y0 = int(player.pos[1]) - self._offset_y
        xa, xb = max(x0, 0), min(x0 + self._view_w, area_w)
        ya, yb = max(y0, 0), min(y0 + self._view_h, area_h)
        out = np.zeros((self._view_h, self._view_w), np.uint8)
        if xa >= xb or ya >= yb:
            return out
        rows, cols = slice(ya - y0, yb - y0), slice(xa - x0, xb - x0)
        out[rows, cols] = world._mat_map[xa:xb, ya:yb].T
        window = world._obj_map[xa:xb, ya:yb]
        xs, ys = np.nonzero(window)
        if len(xs):
            objs = world._objects
            for x, y in zip(xs.tolist(), ys.tolist(), strict=True):
                out[ya - y0 + y, xa - x0 + x] = _OBJECT_IDS[type(objs[window[x, y]])]
        return out

    def vector(self) -> np.ndarray:
        """Inventory counts, facing one-hot, daylight and sleeping flag, in `VECTOR_FIELDS` order."""
        game = self.crafter
        player = game._player
        vec = np.zeros(len(VECTOR_FIELDS), np.float32)
        inventory = player.inventory
        vec[:_N_ITEMS] = [inventory[name] for name in ITEMS]
        vec[_N_ITEMS + _FACING_INDEX[(int(player.facing[0]), int(player.facing[1]))]] = 1.0
        vec[-2] = game._world.daylight
        vec[-1] = float(player.sleeping)
        return vec

    def _info(self, dead: bool) -> dict[str, Any]:
        """crafter's step info without the whole-map ``"semantic"`` array."""
        player = self.crafter._player
        return {
            "inventory": player.inventory.copy(),
            "achievements": player.achievements.copy(),
            "discount": 1.0 - float(dead),
            "player_pos": player.pos.copy(),
        }
