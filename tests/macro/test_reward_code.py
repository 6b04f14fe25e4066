"""LLM-written dense reward code: compiled by the macro compiler, shaped on real Crafter, never raising."""

from __future__ import annotations

import pytest

from rlgpt.envs.crafter import ACTION_NAMES
from rlgpt.envs.tasks import make_task_env
from rlgpt.macro.compiler import MacroSource
from rlgpt.macro.diagnostics import MacroCompileError
from rlgpt.macro.reward import DenseRewardWrapper, compile_reward
from rlgpt.macro.runtime import MacroActionWrapper

WOOD = """
def reward(game, prev):
    gained = game.inventory["wood"] - prev.inventory["wood"]
    tree = game.nearest("tree")
    near = 0.01 if tree is not None and game.distance(tree) <= 1 else 0.0
    return 1.0 * gained + near
"""

CHOP = """
def chop(game):
    while game.inventory["wood"] < 1:
        tree = game.nearest("tree")
        if tree is None:
            yield game.random_move()
        elif game.is_facing(tree):
            yield "do"
        else:
            yield game.step_toward(tree)
"""


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
    env = DenseRewardWrapper(make_task_env("collect_wood", seed=0, episode_length=200), WOOD, seed=0)
    macros = MacroActionWrapper(env, [MacroSource("chop", CHOP)], max_macro_steps=64, seed=0)
    macros.reset(seed=3)
    _, reward, terminated, _, info = macros.step(macros.n_primitive)  # the macro
    assert info["macro"]["outcome"] in ("success", "episode_end")
    assert env.calls == info["macro_steps"] and env.errors == 0
    assert info["achievements"]["collect_wood"] and terminated
    # The discounted sparse success (1.0) plus the wood gain (1.0) from the reward code at the last step;
    # without the shaping the macro's return would be below 1.
    assert reward > 1.8


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
