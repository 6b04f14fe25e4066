"""A test double of the `minedojo` package (Minecraft cannot run here): ``minedojo.make`` with MineDojo's
keyword arguments returns an env speaking MineDojo's protocol (gym 0.21 style ``reset() -> obs`` and
``step(action) -> (obs, reward, done, info)``, the 8-dim ``MultiDiscrete`` action, the observation dict
laid out like ``ARNNWrapper`` over ``MineDojoSim``). Its world is a tiny deterministic stand-in: attacking
while looking at a tree (pitch level, yaw a multiple of 90 degrees) for 4 steps yields a log; crafting
follows Minecraft's recipes for planks, sticks and crafting tables. Put this directory on ``PYTHONPATH``
(with a JDK 8, or a stand-in ``java`` reporting version 1.8) to run rlgpt's real MineDojo adapter."""

from __future__ import annotations

import numpy as np

from minedojo.sim.mc_meta import mc

N_SLOTS = 36
RECIPES = {"planks": ({"log": 1}, 4), "stick": ({"planks": 2}, 4), "crafting_table": ({"planks": 4}, 1)}
ACTION_NVEC = (3, 3, 4, 25, 25, 8, len(mc.ALL_CRAFT_SMELT_ITEMS), N_SLOTS)
"""MineDojo's MultiDiscrete action space with cam_interval=15 (25 camera bins)."""

made: list[dict] = []
"""The keyword arguments of every ``make`` call in this process (what the adapter asked MineDojo for)."""


class _Space:
    def __init__(self, nvec):
        self.nvec = np.array(nvec)


class HarvestEnv:
    def __init__(self, image_size, target_names, target_quantities, initial_inventory=None, seed=None):
        self.image_size = tuple(image_size)
        self.targets = dict(zip(target_names, target_quantities, strict=True))
        self.initial_inventory = initial_inventory or []
        self.action_space = _Space(ACTION_NVEC)
        self.rng = np.random.default_rng(seed)
        self.closed = False

    def reset(self):
        self.inventory = {item.name: item.quantity for item in self.initial_inventory}
        self.pos, self.yaw, self.pitch, self.hits = np.array([0.5, 64.0, 0.5]), 0.0, 0.0, 0
        self.start = dict(self.inventory)
        return self._obs()

    def step(self, action):
        action = np.asarray(action)
        if action.shape != (8,) or (action < 0).any() or (action >= self.action_space.nvec).any():
            raise ValueError(f"action {action!r} is outside MineDojo's MultiDiscrete{ACTION_NVEC}")
        move, strafe, _, pitch, yaw, fn, craft, _slot = (int(a) for a in action)
        self.pitch = float(np.clip(self.pitch + (pitch - 12) * 15, -90, 90))
        self.yaw = (self.yaw + (yaw - 12) * 15 + 180) % 360 - 180
        self.pos = self.pos + [(move == 1) - (move == 2), 0.0, (strafe == 2) - (strafe == 1)]
        facing_tree = self.pitch == 0 and self.yaw % 90 == 0
        self.hits = self.hits + 1 if fn == 3 and facing_tree else 0
        if self.hits >= 4:
            self.inventory["log"] = self.inventory.get("log", 0) + 1
            self.hits = 0
        if fn == 4:
            self._craft(mc.ALL_CRAFT_SMELT_ITEMS[craft])
        done = all(self.inventory.get(k, 0) - self.start.get(k, 0) >= q for k, q in self.targets.items())
        return self._obs(), float(done), done, {}

    def _craft(self, item):
        if item not in RECIPES:
            return
        needs, makes = RECIPES[item]
        if all(self.inventory.get(k, 0) >= n for k, n in needs.items()):
            for k, n in needs.items():
                self.inventory[k] -= n
            self.inventory[item] = self.inventory.get(item, 0) + makes

    def _obs(self):
        names = np.array(["air"] * N_SLOTS, dtype=object)
        quantity = np.zeros(N_SLOTS, dtype=np.float32)
        for slot, (name, qty) in enumerate((k, v) for k, v in self.inventory.items() if v > 0):
            names[slot], quantity[slot] = name.replace("_", " "), qty  # MineDojo writes "crafting table"
        return {
            "rgb": np.zeros((3, *self.image_size), dtype=np.uint8),
            "inventory": {"name": names, "quantity": quantity, "variant": np.zeros(N_SLOTS, np.int64),
                          "max_durability": np.full(N_SLOTS, -1.0, np.float32),
                          "cur_durability": np.full(N_SLOTS, -1.0, np.float32)},
            "life_stats": {"life": np.array([20.0], np.float32), "food": np.array([20.0], np.float32),
                           "oxygen": np.array([300.0], np.float32), "armor": np.array([0.0], np.float32),
                           "saturation": np.array([5.0], np.float32), "xp": np.array([0.0], np.float32),
                           "is_sleeping": 0},
            "location_stats": {"pos": self.pos.astype(np.float32), "yaw": np.array([self.yaw], np.float32),
                               "pitch": np.array([self.pitch], np.float32), "biome_id": np.array(4),
                               "rainfall": np.array([0.8], np.float32)},
            "nearby_tools": {"table": np.array(False), "furnace": np.array(False)},
        }

    def close(self):
        self.closed = True


def make(task_id, image_size, seed=None, world_seed=None, cam_interval=15, target_names=(),
         target_quantities=(), specified_biome=None, initial_inventory=None, **kwargs):
    if task_id != "harvest":
        raise ValueError(f"the double knows MineDojo's harvest tasks only, got {task_id!r}")
    if cam_interval != 15:
        raise ValueError("the double's camera has 15-degree bins")
    made.append(dict(task_id=task_id, image_size=image_size, target_names=list(target_names),
                     target_quantities=list(target_quantities), specified_biome=specified_biome))
    return HarvestEnv(image_size, target_names, target_quantities, initial_inventory, seed)
