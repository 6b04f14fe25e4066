"""Macro execution overhead: primitive steps/s through a compiled macro vs stepping the env directly.

The ``macro`` rows of ``python -m bench``; alone,
``OMP_NUM_THREADS=1 python -m bench.macro_overhead [--steps N] [--clock cpu]`` prints one line per mode and
the ratios; ``--clock cpu`` times by process CPU time instead of wall time, for a loaded machine.
``direct`` steps CrafterEnv (symbolic) with a fixed action cycle; ``macro_replay`` yields the same
cycle from a macro through `MacroActionWrapper` (pure sandbox overhead: guard hooks, generator resume, stats);
``macro_api`` runs a tree-seeking macro that queries the `GameAPI` (view, nearest, BFS path step) every step.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from rlgpt.envs.crafter import ACTION_NAMES, CrafterEnv
from rlgpt.macro.runtime import MacroActionWrapper

CYCLE = ("move_left", "move_up", "move_right", "move_down", "do", "noop")

REPLAY = f"""
def replay(game):
    while True:
        for action in {CYCLE!r}:
            yield action
"""

SEEK = """
def seek(game):
    while True:
        tree = game.nearest("tree")
        if tree is None:
            yield game.random_move()
        elif game.is_facing(tree):
            yield "do"
        else:
            step = game.step_toward(tree)
            yield step if step is not None else game.random_move()
"""


def direct(steps: int, seed: int, clock: Callable[[], float] = time.perf_counter) -> float:
    """Steps/s of CrafterEnv stepped directly with the action cycle."""
    env = CrafterEnv(seed=seed)
    env.reset(seed=seed)
    ids = [ACTION_NAMES.index(a) for a in CYCLE]
    start = clock()
    for i in range(steps):
        _, _, terminated, truncated, _ = env.step(ids[i % len(ids)])
        if terminated or truncated:
            env.reset()
    return steps / (clock() - start)


def through_macro(
    source: str, steps: int, seed: int, max_macro_steps: int, clock: Callable[[], float] = time.perf_counter
) -> float:
    """Steps/s of primitive steps taken inside a macro chosen over and over."""
    env = MacroActionWrapper(CrafterEnv(seed=seed), [source], max_macro_steps=max_macro_steps, seed=seed)
    env.reset(seed=seed)
    done = 0
    start = clock()
    while done < steps:
        _, _, terminated, truncated, info = env.step(env.n_primitive)
        done += info["macro_steps"]
        if terminated or truncated:
            env.reset()
    return done / (clock() - start)


def measure(
    steps: int, seed: int, max_macro_steps: int = 64, clock: Callable[[], float] = time.perf_counter
) -> dict[str, float]:
    """Primitive steps/s of the three modes (``direct`` first), timed with ``clock``."""
    return {
        "direct": direct(steps, seed, clock),
        "macro_replay": through_macro(REPLAY, steps, seed, max_macro_steps, clock),
        "macro_api": through_macro(SEEK, steps, seed, max_macro_steps, clock),
    }


def main() -> None:
    """Measure and print the three modes and the overhead ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20_000, help="primitive steps per mode")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-macro-steps", type=int, default=64)
    parser.add_argument(
        "--clock", choices=("wall", "cpu"), default="wall", help="wall time or process CPU time"
    )
    args = parser.parse_args()
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    rates = measure(args.steps, args.seed, args.max_macro_steps, clock)
    for name, rate in rates.items():
        print(f"{name:13s} {rate:10.0f} primitive steps/s   ratio vs direct {rate / rates['direct']:.3f}")


if __name__ == "__main__":
    main()
