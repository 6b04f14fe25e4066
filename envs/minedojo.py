"""MineDojo (Minecraft) adapter for RL-GPT's own tasks, behind the same task interface as Crafter.

MineDojo needs the ``minedojo`` package and a JDK 8, and downloads Gradle/Forge/Minecraft on the first reset.
:class:`MineDojoTaskEnv` checks those prerequisites, in that order and before anything slow, and raises
one :class:`MineDojoUnavailable` naming what is missing. Everything that does not need Minecraft - the task
table, the discrete action set and its mapping to MineDojo's 8-dim ``MultiDiscrete`` action, observation
conversion and success detection - is pure and importable everywhere.

MineDojo's native action (``minedojo.make`` wraps every task in ``ARNNWrapper``)::

    [0] 0 noop, 1 forward, 2 back          [4] camera yaw bin (cam_interval degrees each, noop = centre bin)
    [1] 0 noop, 1 left, 2 right            [5] 0 noop, 1 use, 2 drop, 3 attack, 4 craft/smelt, 5 equip,
    [2] 0 noop, 1 jump, 2 sneak, 3 sprint       6 place, 7 destroy
    [3] camera pitch bin                   [6] craft argument: index into mc.ALL_CRAFT_SMELT_ITEMS
                                           [7] inventory slot argument for equip/place/destroy (0..35)
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np

from rlgpt.errors import RlgptError

CAMERA_INTERVAL_DEG = 15
"""Degrees per camera bin; MineDojo's default ``cam_interval``."""

CAMERA_NOOP_BIN = 360 // CAMERA_INTERVAL_DEG // 2
"""Centre camera bin (no rotation): bins span -180..+180 degrees, so ``n_bins = 360 / interval + 1``."""

N_INVENTORY_SLOTS = 36
"""Slots in MineDojo's ``inventory`` observation (hotbar + main inventory)."""

FN_NOOP, FN_USE, FN_DROP, FN_ATTACK, FN_CRAFT, FN_EQUIP, FN_PLACE, FN_DESTROY = range(8)
"""Values of MineDojo's functional action dimension (index 5)."""


class MineDojoUnavailable(RlgptError, RuntimeError):
    """MineDojo cannot run here: the package or Java 8 is missing; the message says which and the fix."""


# ----------------------------------------------------------------------------------------------- tasks


@dataclass(frozen=True)
class MineDojoTask:
    """One RL-GPT MineDojo task: a MineDojo meta task plus the items that must end up in the inventory."""

    name: str
    """Our task name (same naming role as ``rlgpt.envs.tasks.TaskSpec.name``)."""
    targets: tuple[tuple[str, int], ...]
    """(MineDojo item name, quantity) pairs; success when every item gained at least its quantity."""
    episode_length: int
    """Primitive-step budget; the episode is truncated after this many steps."""
    description: str
    """One-line natural-language goal, handed to the LLM agents."""
    task_id: str = "harvest"
    """MineDojo meta task passed as ``minedojo.make(task_id=...)``."""
    specified_biome: str | None = None
    """Biome to generate (``minedojo.make(specified_biome=...)``), or None for MineDojo's default world."""
    initial_inventory: tuple[tuple[str, int], ...] = ()
    """(item, quantity) the agent starts with, placed in slots 0, 1, ..."""

    def make_kwargs(self) -> dict[str, Any]:
        """Task-specific keyword arguments for ``minedojo.make`` (without ``initial_inventory``)."""
        kwargs: dict[str, Any] = {
            "task_id": self.task_id,
            "target_names": [name for name, _ in self.targets],
            "target_quantities": [qty for _, qty in self.targets],
        }
        if self.specified_biome is not None:
            kwargs["specified_biome"] = self.specified_biome
        return kwargs


def _task(name: str, item: str, qty: int, steps: int, description: str, **kw: Any) -> MineDojoTask:
    return MineDojoTask(
        name=name, targets=((item, qty),), episode_length=steps, description=description, **kw
    )


MINEDOJO_TASKS: dict[str, MineDojoTask] = {
    t.name: t
    for t in (
        # The RL-GPT tech tree (paper Table 2 / ObtainDiamond); step budgets grow with the sub-goal count.
        _task("harvest_log", "log", 1, 2000, "Harvest a log from a tree.", specified_biome="forest"),
        _task("stick", "stick", 1, 3000, "Obtain a stick (log -> planks -> stick)."),
        _task("crafting_table", "crafting_table", 1, 3000, "Craft a crafting table from planks."),
        _task("wooden_pickaxe", "wooden_pickaxe", 1, 5000, "Craft a wooden pickaxe at a crafting table."),
        _task("cobblestone", "cobblestone", 1, 6000, "Mine a cobblestone block with a wooden pickaxe."),
        _task(
            "stone_pickaxe", "stone_pickaxe", 1, 8000, "Craft a stone pickaxe from cobblestone and sticks."
        ),
        _task("furnace", "furnace", 1, 8000, "Craft a furnace from eight cobblestone."),
        _task(
            "iron_pickaxe",
            "iron_pickaxe",
            1,
            12000,
            "Mine iron ore, smelt iron ingots, craft an iron pickaxe.",
        ),
        _task("diamond", "diamond", 1, 18000, "Obtain a diamond by mining diamond ore with an iron pickaxe."),
    )
}
"""Our MineDojo task names -> task specs."""


def get_task(name: str) -> MineDojoTask:
    """Look up a MineDojo task by our name; unknown names raise ``KeyError`` listing the valid ones."""
    try:
        return MINEDOJO_TASKS[name]
    except KeyError:
        raise KeyError(f"unknown MineDojo task {name!r}; choose one of {', '.join(MINEDOJO_TASKS)}") from None


# --------------------------------------------------------------------------------------------- actions


@dataclass(frozen=True)
class MineDojoAction:
    """One entry of our compact discrete action set and the MineDojo action vector it stands for."""

    name: str
    """Action name shown to the LLM agents."""
    move: int = 0
    """Dimension 0: 0 noop, 1 forward, 2 back."""
    strafe: int = 0
    """Dimension 1: 0 noop, 1 left, 2 right."""
    jump: int = 0
    """Dimension 2: 0 noop, 1 jump, 2 sneak, 3 sprint."""
    pitch: int = 0
    """Camera pitch in bins relative to no rotation; +1 = look down ``CAMERA_INTERVAL_DEG`` degrees."""
    yaw: int = 0
    """Camera yaw in bins relative to no rotation; +1 = turn right ``CAMERA_INTERVAL_DEG`` degrees."""
    functional: int = FN_NOOP
    """Dimension 5 (``FN_*``)."""
    craft_item: str | None = None
    """Item to craft or smelt (for ``FN_CRAFT``)."""
    slot_item: str | None = None
    """Inventory item whose slot is the argument of ``FN_EQUIP`` / ``FN_PLACE``."""


def _craft(item: str, verb: str = "craft") -> MineDojoAction:
    return MineDojoAction(f"{verb}_{item}", functional=FN_CRAFT, craft_item=item)


ACTIONS: tuple[MineDojoAction, ...] = (
    MineDojoAction("noop"),
    MineDojoAction("forward", move=1),
    MineDojoAction("back", move=2),
    MineDojoAction("left", strafe=1),
    MineDojoAction("right", strafe=2),
    MineDojoAction("jump_forward", move=1, jump=1),
    MineDojoAction("look_up", pitch=-1),
    MineDojoAction("look_down", pitch=1),
    MineDojoAction("turn_left", yaw=-1),
    MineDojoAction("turn_right", yaw=1),
    MineDojoAction("attack", functional=FN_ATTACK),
    MineDojoAction("use", functional=FN_USE),
    _craft("planks"),
    _craft("stick"),
    _craft("crafting_table"),
    _craft("wooden_pickaxe"),
    _craft("stone_pickaxe"),
    _craft("furnace"),
    _craft("iron_ingot", verb="smelt"),
    _craft("iron_pickaxe"),
    MineDojoAction("place_crafting_table", functional=FN_PLACE, slot_item="crafting_table"),
    MineDojoAction("place_furnace", functional=FN_PLACE, slot_item="furnace"),
    MineDojoAction("equip_wooden_pickaxe", functional=FN_EQUIP, slot_item="wooden_pickaxe"),
    MineDojoAction("equip_stone_pickaxe", functional=FN_EQUIP, slot_item="stone_pickaxe"),
    MineDojoAction("equip_iron_pickaxe", functional=FN_EQUIP, slot_item="iron_pickaxe"),
)
"""The compact discrete action set (RL-GPT / MineAgent style): movement, 15-degree camera turns, attack/use,
and one action per craft/smelt/place/equip step of the pickaxe tech tree."""

ACTION_NAMES: tuple[str, ...] = tuple(a.name for a in ACTIONS)
"""Names of :data:`ACTIONS`, index-aligned."""


def normalize_item_name(name: str) -> str:
    """MineDojo's inventory observation writes ``crafting table``; its task specs write ``crafting_table``."""
    return str(name).strip().replace(" ", "_")


def noop_vector() -> np.ndarray:
    """MineDojo's no-op action vector (centre camera bins)."""
    return np.array([0, 0, 0, CAMERA_NOOP_BIN, CAMERA_NOOP_BIN, FN_NOOP, 0, 0], dtype=np.int64)


def find_slot(inventory_names: Sequence[str], item: str) -> int | None:
    """First inventory slot holding ``item`` (either name spelling), or None."""
    wanted = normalize_item_name(item)
    for slot, name in enumerate(inventory_names):
        if normalize_item_name(name) == wanted:
            return slot
    return None


def to_minedojo_action(
    index: int,
    inventory_names: Sequence[str],
    craft_items: Sequence[str],
    actions: Sequence[MineDojoAction] = ACTIONS,
) -> np.ndarray:
    """Map our discrete action ``index`` to MineDojo's 8-dim action vector.

    Args:
        index: index into ``actions``.
        inventory_names: current ``obs["inventory"]["name"]`` (slot -> item name), for equip/place.
        craft_items: MineDojo's craft argument vocabulary, ``minedojo.sim.mc_meta.mc.ALL_CRAFT_SMELT_ITEMS``.
        actions: the discrete action set.

    Equip/place of an item that is not in the inventory becomes a no-op: MineDojo's strict check would raise
    on the resulting "air" slot, and a policy must be able to try it harmlessly.
    """
    if not 0 <= int(index) < len(actions):
        raise IndexError(f"action index {index} out of range for {len(actions)} MineDojo actions")
    action = actions[int(index)]
    vec = noop_vector()
    vec[0], vec[1], vec[2] = action.move, action.strafe, action.jump
    vec[3] += action.pitch
    vec[4] += action.yaw
    vec[5] = action.functional
    if action.craft_item is not None:
        try:
            vec[6] = list(craft_items).index(action.craft_item)
        except ValueError:
            raise ValueError(
                f"action {action.name!r}: {action.craft_item!r} is not in MineDojo's craft vocabulary"
            ) from None
    if action.slot_item is not None:
        slot = find_slot(inventory_names, action.slot_item)
        if slot is None:
            return noop_vector()
        vec[7] = slot
    return vec


# ---------------------------------------------------------------------------------------- observations

TRACKED_ITEMS: tuple[str, ...] = (
    "log",
    "planks",
    "stick",
    "crafting_table",
    "wooden_pickaxe",
    "cobblestone",
    "stone_pickaxe",
    "furnace",
    "coal",
    "iron_ore",
    "iron_ingot",
    "iron_pickaxe",
    "diamond",
)
"""Items whose counts form the ``inventory`` observation vector (the pickaxe tech tree)."""


def inventory_counts(inventory: Mapping[str, Any]) -> dict[str, int]:
    """Total quantity per item (underscore names) in MineDojo's ``obs["inventory"]``; empty slots dropped."""
    names = inventory["name"]
    quantities = np.asarray(inventory["quantity"]).reshape(-1)
    if len(names) != len(quantities):
        raise ValueError(f"inventory has {len(names)} names but {len(quantities)} quantities")
    counts: dict[str, int] = {}
    for name, qty in zip(names, quantities, strict=True):
        item = normalize_item_name(name)
        if item == "air" or qty <= 0:
            continue
        counts[item] = counts.get(item, 0) + int(qty)
    return counts


def _scalar(x: Any) -> float:
    return float(np.asarray(x, dtype=np.float64).reshape(-1)[0])


def convert_observation(
    obs: Mapping[str, Any], tracked_items: Sequence[str] = TRACKED_ITEMS, include_rgb: bool = True
) -> dict[str, np.ndarray]:
    """MineDojo observation dict -> our observation dict (see :func:`observation_space`)."""
    counts = inventory_counts(obs["inventory"])
    loc, life, nearby = obs["location_stats"], obs["life_stats"], obs["nearby_tools"]
    out = {
        "inventory": np.array([counts.get(i, 0) for i in tracked_items], dtype=np.float32),
        "pos": np.asarray(loc["pos"], dtype=np.float32).reshape(3),
        "facing": np.array([_scalar(loc["yaw"]), _scalar(loc["pitch"])], dtype=np.float32),
        "life": np.array([_scalar(life["life"]), _scalar(life["food"])], dtype=np.float32),
        "nearby": np.array([_scalar(nearby["table"]), _scalar(nearby["furnace"])], dtype=np.float32),
    }
    if include_rgb:
        out["rgb"] = np.asarray(obs["rgb"], dtype=np.uint8)
    return out


def observation_space(
    image_size: tuple[int, int], tracked_items: Sequence[str] = TRACKED_ITEMS, include_rgb: bool = True
) -> gym.spaces.Dict:
    """Space of :func:`convert_observation`: inventory counts, xyz, (yaw, pitch), (health, food),
    (crafting table nearby, furnace nearby) and, optionally, the channel-first RGB frame."""
    inf = np.float32(np.inf)
    spaces: dict[str, gym.Space] = {
        "inventory": gym.spaces.Box(0.0, inf, (len(tracked_items),), np.float32),
        "pos": gym.spaces.Box(-inf, inf, (3,), np.float32),
        "facing": gym.spaces.Box(-180.0, 180.0, (2,), np.float32),
        "life": gym.spaces.Box(0.0, inf, (2,), np.float32),
        "nearby": gym.spaces.Box(0.0, 1.0, (2,), np.float32),
    }
    if include_rgb:
        spaces["rgb"] = gym.spaces.Box(0, 255, (3, *image_size), np.uint8)
    return gym.spaces.Dict(spaces)


def items_gained(initial: Mapping[str, int], current: Mapping[str, int]) -> dict[str, int]:
    """Per-item increase since ``initial`` (items that did not increase are left out)."""
    return {k: v - initial.get(k, 0) for k, v in current.items() if v > initial.get(k, 0)}


def task_success(task: MineDojoTask, initial: Mapping[str, int], current: Mapping[str, int]) -> bool:
    """True when every target item gained at least its quantity since the episode start.

    Same quantity rule as MineDojo's ``simple_inventory_based_check`` (current minus initial inventory), so
    starting items do not count.
    """
    gained = items_gained(initial, current)
    return all(gained.get(normalize_item_name(name), 0) >= qty for name, qty in task.targets)


# ------------------------------------------------------------------------------------- prerequisites

_JAVA_VERSION_RE = re.compile(r'version "(\d+)(?:\.(\d+))?')


def parse_java_major_version(version_output: str) -> int | None:
    """Major version from ``java -version`` output (``1.8.0_292`` -> 8, ``17.0.2`` -> 17), or None."""
    m = _JAVA_VERSION_RE.search(version_output)
    if m is None:
        return None
    major = int(m.group(1))
    return int(m.group(2)) if major == 1 and m.group(2) is not None else major


def find_java() -> str | None:
    """The java MineDojo would launch: ``$JAVA_HOME/bin/java`` when set, else ``java`` on PATH."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        candidate = os.path.join(java_home, "bin", "java")
        if os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("java")


def check_minedojo_prerequisites() -> int:
    """Raise :class:`MineDojoUnavailable` unless MineDojo is installed and Java 8 is available.

    The package check runs first and spawns nothing; only then is ``java -version`` run. Returns the Java
    major version found (8).
    """
    if importlib.util.find_spec("minedojo") is None:
        raise MineDojoUnavailable(
            "MineDojo is not installed (pip install minedojo; it also needs JDK 8 and downloads "
            "Minecraft/Forge on first reset) - MineDojo tasks cannot run here, use the Crafter tasks instead"
        )
    java = find_java()
    if java is None:
        raise MineDojoUnavailable(
            "MineDojo requires Java 8 (found: none) - install a JDK 8 (e.g. openjdk-8-jdk) and set JAVA_HOME"
        )
    try:
        proc = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise MineDojoUnavailable(
            f"MineDojo requires Java 8 (found: {java} but `java -version` failed: {exc})"
        ) from exc
    major = parse_java_major_version(proc.stderr + proc.stdout)
    if major != 8:
        found = "unknown version" if major is None else f"java {major}"
        raise MineDojoUnavailable(
            f"MineDojo requires Java 8 (found: {found} at {java}) - install a JDK 8 (e.g. openjdk-8-jdk) "
            "and point JAVA_HOME at it"
        )
    return major


# ------------------------------------------------------------------------------------------------ env


@dataclass
class _EpisodeState:
    """Per-episode bookkeeping of :class:`MineDojoTaskEnv`."""

    initial: dict[str, int] = field(default_factory=dict)
    """Inventory counts at reset; success and achievements are measured against them."""
    best_gain: dict[str, int] = field(default_factory=dict)
    """Largest gain seen per tracked item (crafting may consume items later)."""
    steps: int = 0
    """Primitive steps taken this episode."""
    inventory_names: list[str] = field(default_factory=list)
    """Slot -> item name from the latest observation, for equip/place slot arguments."""


class MineDojoTaskEnv(gym.Env):
    """A RL-GPT MineDojo task as a gymnasium env with our discrete actions and observation dict.

    ``info`` carries ``success`` (bool), ``achievements`` (tracked item -> most gained this episode) and
    ``inventory`` (item -> count), like the Crafter ``TaskEnv``. The reward is MineDojo's own task reward;
    RL-GPT's generated reward code is applied on top by the training code.
    """

    metadata = {"render_modes": []}

    def __init__(
        self,
        task: str | MineDojoTask,
        image_size: tuple[int, int] = (160, 256),
        include_rgb: bool = True,
        seed: int | None = None,
        world_seed: int | None = None,
        tracked_items: Sequence[str] = TRACKED_ITEMS,
    ):
        """Check prerequisites, then create the MineDojo task (Minecraft itself starts on the first reset).

        Raises:
            KeyError: unknown task name.
            MineDojoUnavailable: MineDojo or Java 8 is missing.
        """
        self.task = get_task(task) if isinstance(task, str) else task
        check_minedojo_prerequisites()

        import minedojo
        from minedojo.sim import InventoryItem
        from minedojo.sim.mc_meta import mc

        self._craft_items: list[str] = list(mc.ALL_CRAFT_SMELT_ITEMS)
        missing = sorted({a.craft_item for a in ACTIONS if a.craft_item} - set(self._craft_items))
        if missing:
            raise MineDojoUnavailable(
                f"this MineDojo version cannot craft {missing}; the action set needs them"
            )
        kwargs = self.task.make_kwargs()
        if self.task.initial_inventory:
            kwargs["initial_inventory"] = [
                InventoryItem(slot=slot, name=name, variant=None, quantity=qty)
                for slot, (name, qty) in enumerate(self.task.initial_inventory)
            ]
        self._env = minedojo.make(
            image_size=image_size,
            seed=seed,
            world_seed=world_seed,
            cam_interval=CAMERA_INTERVAL_DEG,
            **kwargs,
        )
        self._tracked = tuple(tracked_items)
        self._include_rgb = include_rgb
        self.observation_space = observation_space(image_size, self._tracked, include_rgb)
        self.action_space = gym.spaces.Discrete(len(ACTIONS))
        self._state = _EpisodeState()

    def _observe(self, raw_obs: Mapping[str, Any]) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        counts = inventory_counts(raw_obs["inventory"])
        self._state.inventory_names = [str(n) for n in raw_obs["inventory"]["name"]]
        for item, gain in items_gained(self._state.initial, counts).items():
            if item in self._tracked:
                self._state.best_gain[item] = max(gain, self._state.best_gain.get(item, 0))
        info = {
            "success": task_success(self.task, self._state.initial, counts),
            "achievements": dict(self._state.best_gain),
            "inventory": counts,
        }
        return convert_observation(raw_obs, self._tracked, self._include_rgb), info

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Start an episode. MineDojo fixes its seeds at construction: ``seed`` seeds only ``np_random``."""
        super().reset(seed=seed)
        raw_obs = self._env.reset()
        self._state = _EpisodeState(initial=inventory_counts(raw_obs["inventory"]))
        return self._observe(raw_obs)

    def step(self, action: int) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        """Apply one discrete action; terminates on success or when MineDojo ends the episode (death)."""
        vec = to_minedojo_action(int(action), self._state.inventory_names, self._craft_items)
        raw_obs, reward, done, _ = self._env.step(vec)
        self._state.steps += 1
        obs, info = self._observe(raw_obs)
        terminated = bool(done) or info["success"]
        truncated = not terminated and self._state.steps >= self.task.episode_length
        return obs, float(reward), terminated, truncated, info

    def close(self) -> None:
        """Shut the Minecraft instance down."""
        self._env.close()
