"""Shared helpers for the macro tests: one real Crafter env (re-seeded per use) and a macro runner."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest

from rlgpt.envs.crafter import CrafterEnv
from rlgpt.macro.api import GameAPI
from rlgpt.macro.compiler import MacroSource, compile_macro
from rlgpt.macro.runtime import MacroResult, find_crafter, run_macro
from rlgpt.macro.sandbox import MacroLimits

Runner = Callable[..., tuple[MacroResult, CrafterEnv]]


@pytest.fixture(scope="session")
def crafter_env() -> CrafterEnv:
    """One real Crafter env for the session (building one loads textures, ~0.4 s); tests reset it."""
    return CrafterEnv(seed=0)


@pytest.fixture
def run(crafter_env: CrafterEnv) -> Runner:
    """``run(code, seed=0, max_steps=16, limits=None)``: compile macro ``m`` and run it once after a reset."""

    def run_source(
        code: str, seed: int = 0, max_steps: int = 16, limits: MacroLimits | None = None
    ) -> tuple[MacroResult, CrafterEnv]:
        crafter_env.reset(seed=seed)
        macro = compile_macro(MacroSource("m", code), limits)
        game = GameAPI(find_crafter(crafter_env), random.Random(seed))
        return run_macro(crafter_env, macro, game, gamma=0.99, max_steps=max_steps), crafter_env

    return run_source
