"""Time budget of macros and the dense reward (issue 13): code that stays under every per-call limit but
takes nearly all of the step time is switched off with a ``disabled`` diagnostic; ordinary code is not."""

from __future__ import annotations

import time

import numpy as np
import pytest

from rlgpt.envs.crafter import CrafterEnv
from rlgpt.envs.engine import CompiledBatch
from rlgpt.envs.tasks import TaskSpec
from rlgpt.macro.api import GameAPI
from rlgpt.macro.budget import TimeBudget
from rlgpt.macro.compiler import MacroSource
from rlgpt.macro.reward import DenseRewardWrapper
from rlgpt.macro.runtime import MacroActionWrapper
from rlgpt.rl.sf_batch import BatchTaskEnv

SLOW_STEP = "for _ in range(10):\n        x = list(range(99999))"
"""Legal per step (15,600 fuel, well under max_seconds), ~10 ms: about 200x a Crafter step."""


def test_budget_arithmetic() -> None:
    budget = TimeBudget("macro 'm'", max_share=0.5, grace_seconds=1.0)
    assert budget.charge(0.9, 0.9) is None  # all code, but within the grace
    assert budget.charge(0.05, 1.0) is None  # 0.95 of 1.9 s: share 0.5, not above it
    diagnostic = budget.charge(0.2, 0.2)
    assert diagnostic is not None and diagnostic.kind == "disabled" and budget.disabled is diagnostic
    assert "macro 'm' took" in diagnostic.message and "switched off" in diagnostic.message
    assert budget.charge(1.0, 1.0) is None and budget.calls == 4  # reported once
    with pytest.raises(ValueError):
        TimeBudget("x", max_share=0.0)


def test_a_macro_that_takes_the_step_time_is_disabled_and_counted() -> None:
    """Calls "slow macro, then walk 4 left" until the slow macro has been disabled 5 times and called again
    in a later episode than the one it was switched off in. The budget lasts for the whole process, so an
    episode end is met with a reset and the loop goes on: "it stays off" is checked across episodes."""
    slow = MacroSource("slow", "def slow(game):\n    while True:\n        for _ in range(10):\n"
                               "            x = list(range(99999))\n        yield 'noop'\n")
    walk = MacroSource("walk", "def walk(game):\n    for _ in range(4):\n        yield 'move_left'\n")
    # keep_diagnostics: every diagnostic of the run (at most 2 per round below), not just the last 32.
    env = MacroActionWrapper(CrafterEnv(length=None), [slow, walk], max_macro_steps=4, seed=0,
                             max_time_share=0.5, budget_grace_seconds=0.2, keep_diagnostics=2000)
    episodes = 0
    env.reset(seed=episodes)
    outcomes, lengths, reset_after = [], [], []  # per call of the slow macro
    for _ in range(1000):  # a bound: the budget disables it within ~15 calls; an episode lasts ~40
        if outcomes.count("disabled") >= 5 and any(reset_after[outcomes.index("disabled"):-1]):
            break
        _, _, terminated, truncated, info = env.step(env.n_primitive)
        outcomes.append(info["macro"]["outcome"])
        lengths.append(info["macro_steps"])
        if not (terminated or truncated):
            _, _, terminated, truncated, _ = env.step(env.n_primitive + 1)
        reset_after.append(terminated or truncated)
        if terminated or truncated:
            episodes += 1
            env.reset(seed=episodes)
    assert "disabled" in outcomes, "never disabled"
    first = outcomes.index("disabled")
    assert any(reset_after[first:-1]), "no call in an episode after the one it was disabled in"
    assert first > 0 and set(outcomes[first:]) == {"disabled"}  # it stays off, also in later episodes
    # A disabled call still moves the game on one step (also the calls that ended an episode).
    assert set(lengths[first:]) == {1}
    assert env.budgets["walk"].disabled is None  # the ordinary macro beside it runs on
    assert [d.kind for name, d in env.diagnostics if name == "slow"].count("disabled") == 1
    # macro/slow/fail_disabled: what the critic reads
    assert env.stats["slow"].failures["disabled"] == outcomes.count("disabled")


def test_a_slow_reward_is_switched_off_with_a_diagnostic() -> None:
    code = f"def reward(game, prev):\n    {SLOW_STEP}\n    return 1.0\n"
    env = DenseRewardWrapper(CrafterEnv(length=None), code, seed=0, max_time_share=0.5,
                             budget_grace_seconds=0.2, episode_cap=None)  # every value seen, not capped
    env.reset(seed=0)
    values = []
    for _ in range(200):
        _, _, _, _, info = env.step(0)
        values.append(info["dense_reward"])
        if env.budget.disabled is not None and len(values) > 30:
            break
    assert env.budget.disabled is not None
    assert [d.kind for d in env.diagnostics] == ["disabled"]
    first_off = values.index(0.0)
    assert first_off > 0 and set(values[first_off:]) == {0.0} and set(values[:first_off]) == {1.0}


def test_ordinary_code_is_not_disabled() -> None:
    """A control-primitive macro and a reward of changes, at the default share, over several episodes."""
    reward = 'def reward(game, prev):\n    return 0.5 * (game.inventory["wood"] - prev.inventory["wood"])\n'
    base = DenseRewardWrapper(CrafterEnv(length=300), reward, seed=0)
    wood = MacroSource("wood", 'def wood(game):\n    ok = yield from game.collect("wood")\n')
    env = MacroActionWrapper(base, [wood], max_macro_steps=100, seed=0)
    for episode in range(3):
        env.reset(seed=episode)
        done = False
        while not done:
            _, _, terminated, truncated, info = env.step(env.n_primitive)
            done = terminated or truncated
        # The episode's seconds of macro code reach the statistics (and, through them, the critic).
        assert 0 < info["episode_extra_stats"]["macro/wood/code_seconds"] <= env.budgets["wood"].code_seconds
    assert env.budgets["wood"].calls > 3 and env.budgets["wood"].disabled is None
    assert base.budget.disabled is None and base.budget.calls > 300


LOOK = MacroSource("look", "def look(game):\n    for _ in range(4):\n        game.nearest('tree')\n"
                           "        yield 'noop'\n")
"""Cheap code: one tile query per step."""


@pytest.fixture
def descheduled(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every tile query waits 5 ms off the CPU, as code does on a loaded machine while other processes run:
    a wall clock charges those seconds to the code (about 25x a batch step, 50x a Crafter step)."""
    original = GameAPI.nearest

    def nearest(self: GameAPI, kind: str):
        time.sleep(0.005)
        return original(self, kind)

    monkeypatch.setattr(GameAPI, "nearest", nearest)


def test_time_off_the_cpu_is_not_charged_to_a_macro_on_the_per_env_path(descheduled: None) -> None:
    env = MacroActionWrapper(CrafterEnv(length=None), [LOOK], max_macro_steps=4, seed=0,
                             max_time_share=0.5, budget_grace_seconds=0.05)
    env.reset(seed=0)
    outcomes = [env.step(env.n_primitive)[4]["macro"]["outcome"] for _ in range(30)]  # 0.6 s asleep
    assert env.budgets["look"].disabled is None and "disabled" not in outcomes, outcomes


def test_time_off_the_cpu_is_not_charged_to_a_macro_on_the_batch_backend(descheduled: None) -> None:
    env = BatchTaskEnv(CompiledBatch(2), TaskSpec.from_name("collect_diamond"), run_seed=0, macros=[LOOK],
                       max_time_share=0.5, budget_grace_seconds=0.05)
    env.reset(seed=0)
    look = np.full(2, env.macros.n_primitive)
    for _ in range(15):  # 2 games x 15 calls x 4 steps: 0.6 s asleep
        env.step(look)
    assert env.macros.budgets["look"].disabled is None
    assert env.macros.budgets["look"].calls == 30


def test_a_garbage_collection_is_not_charged_to_the_code_it_interrupts() -> None:
    # A collection walks the whole process's heap: in a long-lived process one can take a large share of a
    # second, and it runs inside whatever code allocated when the thresholds were crossed.
    import gc

    from rlgpt.macro.budget import cpu_seconds

    heap = []
    for i in range(300_000):
        cell: list = [i]
        cell.append(cell)  # a cycle: the collector must visit it
        heap.append(cell)
    raw, charged = time.thread_time(), cpu_seconds()
    gc.collect()
    raw, charged = time.thread_time() - raw, cpu_seconds() - charged
    assert raw > 0.005 and charged < 0.2 * raw, (raw, charged)
    del heap
