"""Chain-prefix starts: a subtask's episodes begin where the links before it in the chain leave the player.

A long-horizon task is a chain of subtasks (wood -> table -> pickaxe -> stone -> ...). Training "collect
stone" from a fresh world would make the policy relearn wood, table and pickaxe first. `PrefixStart` plays
the chain's earlier links (compiled macros, e.g. stored skills) at reset instead, so that the subtask's
episode starts in a state they reach. Playing the prefix every episode would cost its steps every time, so
the first `pool_size` successful starts are saved (`CrafterEnv.snapshot`, exact) and later episodes restore
one of them. Every primitive step the prefix plays is reported in ``info["prefix_steps"]`` of the reset, so
that a run's budget can count it; restored starts cost none.

A pool can also be built elsewhere (the planner plays the chain's stored skills, trained policies included,
`rlgpt.run.chain.chain_start_pool`) and handed over as a file (`save_pool`/`load_pool`): then every episode
restores one of its states and the steps that built it are counted where it was built.

A start whose prefix missed a link's goal (or died) is not used: the prefix is played again on a new world,
at most `attempts` times; after that the episode starts where the last attempt left off (alive) or from a
fresh world, and ``info["prefix_ok"]`` says so.
"""

from __future__ import annotations

import pickle
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium

from rlgpt.envs.crafter import VITALS, CrafterEnv, GameState
from rlgpt.envs.tasks import TaskEnv
from rlgpt.macro.api import GameAPI
from rlgpt.macro.compiler import CompiledMacro
from rlgpt.macro.goal import Goal
from rlgpt.macro.links import TopUp
from rlgpt.macro.probe import ProbeState
from rlgpt.macro.runtime import run_macro


@dataclass(frozen=True)
class PrefixLink:
    """One earlier link of the chain, played at reset."""

    macro: CompiledMacro
    """The link's policy, as a compiled macro."""
    goal: str = ""
    """Achievement or inventory item whose count must rise for the link to count as done ("" = any end)."""


class PrefixStart(gymnasium.Wrapper):
    """Starts each episode of a `TaskEnv` after the chain prefix `links` (see the module docstring)."""

    def __init__(self, env: TaskEnv, links: Sequence[PrefixLink] = (), *, max_steps: int = 300,
                 pool_size: int = 8, attempts: int = 3, pool: Sequence[GameState] = ()) -> None:
        """Args:
            env: the subtask's env (a `TaskEnv` directly over a `CrafterEnv`).
            links: the chain's earlier links, in order.
            max_steps: primitive step bound of each link's macro call.
            pool_size: start states saved and reused (0: play the prefix every episode).
            attempts: worlds tried per fresh start before giving up on the prefix.
            pool: start states built beforehand; with no `links`, every episode restores one of them.
        """
        if not isinstance(env, TaskEnv) or not isinstance(env.env, CrafterEnv):
            raise TypeError("PrefixStart wraps a TaskEnv over a CrafterEnv")
        if max_steps < 1 or pool_size < 0 or attempts < 1:
            raise ValueError("max_steps and attempts must be >= 1, pool_size >= 0")
        if not links and not pool:
            raise ValueError("PrefixStart needs links to play or a pool of start states")
        super().__init__(env)
        self.links = tuple(links)
        self.max_steps = max_steps
        self.pool_size = pool_size
        self.attempts = attempts
        self.pool: list[GameState] = list(pool)
        """Saved start states (after a prefix that reached every link's goal, or handed over)."""
        self._rng: random.Random | None = None

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[Any, dict[str, Any]]:
        if self._rng is None or seed is not None:
            self._rng = random.Random(seed)
        task_env: TaskEnv = self.env  # type: ignore[assignment]
        if self.pool and (not self.links or (self.pool_size and len(self.pool) >= self.pool_size)):
            obs, info = task_env.restore(self.pool[self._rng.randrange(len(self.pool))])
            return obs, {**info, "prefix_steps": 0, "prefix_ok": True}
        spent, ok, state = 0, not self.links, None
        for attempt in range(self.attempts if self.links else 1):
            obs, info = task_env.reset(seed=seed if attempt == 0 else None, options=options)
            if not self.links:
                break
            ok, steps, alive = self._play_prefix(self._rng.randrange(2**31))
            spent += steps
            if alive:
                state = task_env.env.snapshot()
            if ok:
                if len(self.pool) < self.pool_size:
                    self.pool.append(state)
                break
        if state is not None:
            obs, info = task_env.restore(state)
        elif self.links:  # every attempt died: a fresh world, without the prefix
            obs, info = task_env.reset(seed=None, options=options)
        return obs, {**info, "prefix_steps": spent, "prefix_ok": ok}

    def _play_prefix(self, seed: int) -> tuple[bool, int, bool]:
        """Play every link on the freshly reset game: (every goal reached, steps played, player alive)."""
        crafter_env: CrafterEnv = self.env.env  # type: ignore[attr-defined]
        game = GameAPI(crafter_env.crafter, random.Random(seed))
        steps = 0
        top_up = TopUp()
        earlier = [link.macro for link in self.links]
        for i, link in enumerate(self.links):
            end = link.goal and top_up.before(crafter_env, game, earlier[:i], link.goal, self.max_steps)
            if end:
                return False, steps + top_up.steps, not end.terminated
            before = ProbeState.of(game)
            result = run_macro(crafter_env, link.macro, game, gamma=1.0, max_steps=self.max_steps)
            steps += result.steps
            if result.terminated or result.truncated:
                return False, steps + top_up.steps, not result.terminated
            if link.goal and not Goal.parse(link.goal).reached(before, ProbeState.of(game)):
                return False, steps + top_up.steps, True
        return True, steps + top_up.steps, True


@dataclass(frozen=True)
class StartSummary:
    """What every state of a start pool has: the agents of a chain's later subtask are told where its
    episodes begin, so that they plan and write code for what is still missing instead of the chain's
    prefix again (the planner's subtask after ``make_wood_pickaxe`` starts with the pickaxe in hand)."""

    unlocked: tuple[str, ...]
    """Achievements unlocked in every start state, sorted."""
    inventory: tuple[tuple[str, int], ...]
    """Items (not vitals) every start state holds, with the smallest count among the states, sorted."""

    @classmethod
    def of(cls, states: Sequence[GameState]) -> StartSummary:
        """The summary of `states` (ValueError when there are none)."""
        if not states:
            raise ValueError("a start summary needs at least one start state")
        unlocked = set.intersection(*({k for k, v in s.player.achievements.items() if v > 0} for s in states))
        items = set.intersection(*({k for k, v in s.player.inventory.items() if v > 0 and k not in VITALS}
                                   for s in states))
        counts = {k: min(int(s.player.inventory[k]) for s in states) for k in items}
        return cls(tuple(sorted(unlocked)), tuple(sorted(counts.items())))

    def describe(self) -> str:
        """One paragraph for prompts: what the episode starts with."""
        unlocked = ", ".join(self.unlocked) or "none"
        items = ", ".join(f"{n} {k}" for k, n in self.inventory) or "nothing"
        return (f"Every episode of this task starts where the skills before it left off, not in a fresh "
                f"world: achievements already unlocked: {unlocked}; inventory at the start: {items}. "
                f"Stations placed earlier stand where they were placed (maybe out of view). Do not plan or "
                f"code those steps again; only what is still missing.")

    def to_dict(self) -> dict[str, Any]:
        return {"unlocked": list(self.unlocked), "inventory": dict(self.inventory)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> StartSummary:
        return cls(tuple(data["unlocked"]), tuple(sorted((k, int(v)) for k, v in data["inventory"].items())))


POOL_FORMAT = 1
"""Version of `save_pool`'s file layout."""


def save_pool(path: str | Path, states: Sequence[GameState]) -> None:
    """Write start states for `load_pool` (pickled: the run's own file, written and read by rlgpt only)."""
    path = Path(path)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_bytes(pickle.dumps({"format": POOL_FORMAT, "states": list(states)}))
    tmp.replace(path)  # whole or absent: a crash never leaves half a pool


def load_pool(path: str | Path) -> list[GameState]:
    """The start states `save_pool` wrote to `path` (ValueError when the file is not such a pool)."""
    try:
        data = pickle.loads(Path(path).read_bytes())
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError) as exc:
        raise ValueError(f"cannot read the start-state pool {path}: {exc}") from None
    if not isinstance(data, dict) or data.get("format") != POOL_FORMAT or not data.get("states"):
        raise ValueError(f"{path} is not a start-state pool of format {POOL_FORMAT} with states")
    return list(data["states"])
