"""LLM-written dense reward code: compiled by the macro compiler, shaped on real Crafter, never raising."""

from __future__ import annotations

import math
import types

import numpy as np
import pytest
from crafter_helpers import chop_source

from rlgpt.envs.crafter import ACTION_NAMES, CrafterEnv
from rlgpt.envs.tasks import make_task_env
from rlgpt.macro.compiler import MacroSource
from rlgpt.macro.diagnostics import MacroCompileError
from rlgpt.macro.reward import DenseReward, DenseRewardWrapper, compile_reward, reward_value
from rlgpt.macro.runtime import MacroActionWrapper

WOOD = """
def reward(game, prev):
    gained = game.inventory["wood"] - prev.inventory["wood"]
    tree = game.nearest("tree")
    near = 0.01 if tree is not None and game.distance(tree) <= 1 else 0.0
    return 1.0 * gained + near
"""

CHOP = chop_source()


@pytest.mark.parametrize(("code", "message"), [
    ("def reward(game, prev):\n    yield 1\n", "must return a value, not yield"),
    ("def reward(game):\n    return 1\n", "exactly 2 positional arguments"),
    ("import os\ndef reward(game, prev):\n    return 1\n", "imports are not allowed"),
    ("def reward(game, prev):\n    return game._game\n", "starting with '_'"),
    ("def score(game, prev):\n    return 1\n", "no top-level function named 'reward'"),
    ("def reward(game, prev)\n    return 1\n", "syntax error"),
])
def test_bad_reward_code_is_rejected_with_a_diagnostic(code: str, message: str) -> None:
    with pytest.raises(MacroCompileError, match=message):
        compile_reward(code)


def test_working_reward_shapes_every_primitive_step_inside_a_macro() -> None:
    env = DenseRewardWrapper(make_task_env("collect_wood", seed=0, episode_length=200), WOOD, seed=0,
                             episode_cap=None)
    macros = MacroActionWrapper(env, [MacroSource("chop", CHOP)], max_macro_steps=64, seed=0)
    macros.reset(seed=3)
    _, reward, terminated, _, info = macros.step(macros.n_primitive)  # the macro
    assert info["macro"]["outcome"] in ("success", "episode_end")
    assert env.calls == info["macro_steps"] and env.errors == 0
    assert info["achievements"]["collect_wood"] and terminated
    # The discounted sparse success (1.0) plus the wood gain (1.0) from the reward code at the last step;
    # without the shaping the macro's return would be below 1.
    assert reward > 1.8


@pytest.mark.parametrize("value", [0.3, -0.3])
def test_an_episodes_shaping_stays_between_zero_and_its_cap(value: float) -> None:
    # Shaping that pays on every step (+0.5 a stone mined, again and again) must not out-earn the task's
    # success reward: the episode's total stops at the cap, a penalty never takes it below 0, and the next
    # episode starts from 0 again.
    env = DenseRewardWrapper(make_task_env("collect_wood", seed=0, episode_length=10),
                             f"def reward(game, prev):\n    return {value}\n", seed=0, episode_cap=0.5)
    for _ in range(2):
        env.reset(seed=1)
        added, total, done = [], 0.0, False
        while not done:
            _, reward, terminated, truncated, info = env.step(ACTION_NAMES.index("noop"))
            added.append(info["dense_reward"])
            total += reward
            done = terminated or truncated
        assert len(added) == 10
        if value > 0:
            assert added[:2] == [value, pytest.approx(0.2)] and all(a == 0.0 for a in added[2:])
            assert total == pytest.approx(0.5) and env.episode_total == pytest.approx(0.5)
        else:
            assert all(a == 0.0 for a in added) and total == 0.0 and env.episode_total == 0.0
    uncapped = DenseRewardWrapper(make_task_env("collect_wood", seed=0, episode_length=10),
                                  f"def reward(game, prev):\n    return {value}\n", seed=0, episode_cap=None)
    uncapped.reset(seed=1)
    assert sum(uncapped.step(ACTION_NAMES.index("noop"))[1] for _ in range(10)) == pytest.approx(10 * value)


def test_spending_what_the_shaping_paid_for_never_makes_stopping_short_worth_more_than_the_goal() -> None:
    # The 1.5B's make_wood_pickaxe reward: +0.5 a wood gained, -0.5 a wood spent (table, pickaxe). Within
    # +-0.5, "collect wood, stop" earned 0.5 and "collect, place, craft" -0.5 + 1; within [0, 0.5] the goal
    # is worth more than any prefix of the episode that reaches it.
    shaping = DenseReward("def reward(game, prev):\n    gained = game.item('wood') - prev.item('wood')\n"
                          "    return 0.5 * gained\n", episode_cap=0.5)
    totals, total = [], 0.0
    for wood_change in (+1, +1, -1, -1):  # two wood collected, one for the table, one for the pickaxe
        prev, game = types.SimpleNamespace(item=lambda name: 5), types.SimpleNamespace(
            item=lambda name, change=wood_change: 5 + change)
        _, total, diagnostic = shaping.step(game, prev, total, 0.001)  # type: ignore[arg-type]
        assert diagnostic is None
        totals.append(total)
    assert totals == [0.5, 0.5, 0.0, 0.0]
    assert max(totals) < totals[-1] + 1.0  # reaching the goal (success reward 1) beats stopping anywhere


@pytest.mark.parametrize("cap, total", [(0.25, 0.25), (0.0, 3.0)])
def test_a_trainings_cap_reaches_the_wrapper_its_env_workers_build(cap: float, total: float) -> None:
    from rlgpt.config import EnvSetup, TrainConfig
    from rlgpt.rl.sf_config import resolve_worker_config
    from rlgpt.rl.worker_config import FLAG
    from rlgpt.rl.wrappers import wrap_task_env

    # What a Sample Factory env worker reads: the training's one rlgpt flag (0 = no cap).
    setup = EnvSetup("def reward(game, prev):\n    return 0.3\n")
    flag = resolve_worker_config(TrainConfig(dense_reward_cap=cap), setup).to_json()
    env = wrap_task_env(make_task_env("collect_wood", seed=0, episode_length=10), {FLAG: flag})
    env.reset(seed=1)
    assert sum(env.step(ACTION_NAMES.index("noop"))[1] for _ in range(10)) == pytest.approx(total)
    with pytest.raises(ValueError, match="episode_cap"):
        DenseRewardWrapper(CrafterEnv(length=None), WOOD, episode_cap=-1.0)


def test_failing_reward_gives_zero_and_a_diagnostic_never_an_exception() -> None:
    code = "def reward(game, prev):\n    n = 0\n    while True:\n        n += 1\n"
    env = DenseRewardWrapper(make_task_env("collect_wood", seed=0, episode_length=50), code, seed=0)
    env.reset(seed=1)
    _, reward, _, _, info = env.step(ACTION_NAMES.index("noop"))
    assert info["dense_reward"] == 0.0 and reward == 0.0
    assert info["dense_reward_diagnostic"]["kind"] == "fuel"
    assert info["dense_reward_diagnostic"]["line"] is not None
    for bad, kind in (("return 1 / 0", "ZeroDivisionError"), ("return 'a lot'", "return a finite number"),
                      ("return prev.inventory['gold']", "KeyError"), ("return float('inf')", "finite")):
        env = DenseRewardWrapper(make_task_env("collect_wood", seed=0, episode_length=50),
                                 f"def reward(game, prev):\n    {bad}\n", seed=0)
        env.reset(seed=1)
        for _ in range(3):
            _, reward, _, _, info = env.step(ACTION_NAMES.index("move_left"))
            assert reward == 0.0 and kind in info["dense_reward_diagnostic"]["message"]
        assert env.errors == 3


def test_reward_cannot_change_the_game_or_the_snapshot() -> None:
    code = "def reward(game, prev):\n    prev.inventory['wood'] = 9\n    return 0\n"
    env = DenseRewardWrapper(make_task_env("collect_wood", seed=0, episode_length=50), code, seed=0)
    env.reset(seed=1)
    _, _, _, _, info = env.step(0)
    assert info["dense_reward_diagnostic"]["kind"] == "exception"
    assert env.game.inventory["wood"] == 0


class _Floaty:
    """An object whose __float__ would run code: never called."""

    def __float__(self) -> float:
        raise AssertionError("__float__ was called")


@pytest.mark.parametrize("value", [10**400, 2**70, -(10**30), float("nan"), float("inf"), -float("inf"), 1e7,
                                   "1.0", None, True, [1.0], {"a": 1}, _Floaty(), np.float64("nan"),
                                   object()])
def test_reward_value_any_type_any_size(value: object) -> None:
    """Anything reward code returns is a finite float or a reason (issue 13): a huge int never reaches
    float() (OverflowError), NaN/inf/out-of-range/non-numbers are refused, nothing of the value is called."""
    number, problem = reward_value(value)
    assert number == 0.0 and problem is not None and "reward() returned" in problem


@pytest.mark.parametrize(("value", "expected"), [(3, 3.0), (-0.5, -0.5), (np.int64(2), 2.0),
                                                 (np.float32(0.25), 0.25), (10**6, 1e6)])
def test_reward_value_numbers(value: object, expected: float) -> None:
    assert reward_value(value) == (expected, None)


@pytest.mark.parametrize("body", ["return 10 ** 400 if False else 2 ** 4000", "return 0.0 * 10 ** 300",
                                  "x = [0]\n    x.extend(enumerate(x))\n    return len(x) * 1e300 * 10"])
def test_dense_reward_wrapper_survives_hostile_values(body: str) -> None:
    """Through the real wrapper on real Crafter: every step gives a finite reward, never an exception."""
    env = DenseRewardWrapper(CrafterEnv(length=None), f"def reward(game, prev):\n    {body}\n", seed=0)
    env.reset(seed=0)
    for _ in range(3):
        _, reward, _, _, info = env.step(0)
        assert math.isfinite(reward)
    assert env.calls == 3


@pytest.mark.parametrize("code", [
    "def reward(game, prev):\n    return " + "(" * 5000 + "1" + ")" * 5000 + "\n",  # past the parser's depth
    "def reward(game, prev):\n    return " + "-" * 300 + "1\n",  # deep, yet parsable: bounded by the compiler
    "def reward(game, prev):\n    return round(1.0, ndigits=1, ndigits=2)\n",  # a repeated keyword
    "def reward(game, prev):\n    return 0\x00\n",
    b"def reward(game, prev): return 0",
])
def test_reward_code_of_any_shape_is_a_diagnostic(code) -> None:
    with pytest.raises(MacroCompileError) as caught:
        compile_reward(code)
    assert caught.value.diagnostics[0].kind in ("syntax", "too_deep")
