"""Cost of the running-macro marker (`rlgpt.rl.macro_marker.MarkRunningMacro`) per macro call.

Run: ``OMP_NUM_THREADS=1 python bench/worker_marker.py [--calls N]``. Baseline: a one-step macro called
through `MacroActionWrapper` on CrafterEnv (the cheapest real macro call). Measured: the same through
`MarkRunningMacro`, the wrapper's own cost around an env whose step does nothing (what the marker adds
to every call, free of Crafter's noise), and the marker's set+clear alone. Modes alternate in rounds and
the best round counts, so load from other processes affects both alike.
"""

from __future__ import annotations

import argparse
import tempfile
import time
import timeit
from pathlib import Path
from types import SimpleNamespace

import gymnasium

from rlgpt.envs.crafter import CrafterEnv
from rlgpt.macro.runtime import MacroActionWrapper
from rlgpt.rl.macro_marker import MacroMarker, MarkRunningMacro

ONE_STEP = """
def one_step(game):
    yield "noop"
"""


class NullMacroEnv(gymnasium.Env):
    """Looks like a MacroActionWrapper with one macro; its step costs (almost) nothing."""

    action_space = gymnasium.spaces.Discrete(18)
    observation_space = gymnasium.spaces.Discrete(1)
    n_primitive = 17
    compiled = (SimpleNamespace(name="go_to_tree"),)
    result = (0, 0.0, False, False, {})

    def step(self, action):
        return self.result


def per_call_us(env, calls: int) -> float:
    """Microseconds per macro call (one primitive step each)."""
    macro = env.get_wrapper_attr("n_primitive")
    start = time.perf_counter()
    for _ in range(calls):
        _, _, terminated, truncated, _ = env.step(macro)
        if terminated or truncated:
            env.reset()
    return (time.perf_counter() - start) / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=5_000, help="macro calls per round")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        marker = MacroMarker(Path(tmp) / "marker")
        plain = MacroActionWrapper(CrafterEnv(seed=0), [ONE_STEP], seed=0)
        marked = MarkRunningMacro(MacroActionWrapper(CrafterEnv(seed=0), [ONE_STEP], seed=0), marker)
        plain.reset(seed=0)
        marked.reset(seed=0)
        best = {"plain": float("inf"), "marked": float("inf")}
        for _ in range(args.rounds):
            best["plain"] = min(best["plain"], per_call_us(plain, args.calls))
            best["marked"] = min(best["marked"], per_call_us(marked, args.calls))
        null, wrapped = NullMacroEnv(), MarkRunningMacro(NullMacroEnv(), marker)
        n = 200_000
        bare_us = min(timeit.repeat(lambda: null.step(17), number=n, repeat=5)) / n * 1e6
        wrapped_us = min(timeit.repeat(lambda: wrapped.step(17), number=n, repeat=5)) / n * 1e6
        name = MacroMarker.encode("go_to_tree")
        ops = min(timeit.repeat(lambda: (marker.running(name), marker.idle()), number=n, repeat=5)) / n * 1e6
    print(f"macro call, plain                {best['plain']:8.2f} us")
    print(f"macro call, with marker          {best['marked']:8.2f} us")
    print(f"MarkRunningMacro's own cost      {wrapped_us - bare_us:8.3f} us per macro call")
    print(f"marker set+clear alone           {ops:8.3f} us")
    print(f"ratio marked / plain             {best['marked'] / best['plain']:8.3f}")


if __name__ == "__main__":
    main()
