"""Env throughput: reference ``crafter.Env`` vs our ``CrafterEnv`` (symbolic and pixels), one process.

The ``env`` rows of ``python -m bench`` (like for like: symbolic vs the reference with its rendering
skipped, pixels vs the reference as it is). Alone, with the full per-variant table:
``OMP_NUM_THREADS=1 python -m bench.env_throughput [--steps N] [--seed S] [--results FILE.md]``

Each variant takes the same random actions (the variants take turns in blocks of 250 steps) and resets
when an episode ends; steps/s counts reset time too, a second column leaves resets out to show the
per-step cost alone, and a third gives the mean cost of a reset (crafter's Python world generator in the
reference, the compiled one of `rlgpt.envs.worldgen` in `CrafterEnv`; both build the same worlds). With
``--results`` the table replaces the "## Env throughput" section of that markdown file (other sections are
kept).
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import crafter
import numpy as np

from rlgpt.envs.crafter import ACTION_NAMES, CrafterEnv

SECTION = "## Env throughput"
REFERENCE = "crafter.Env (reference, renders)"
REFERENCE_NO_RENDER = "crafter.Env (reference, render skipped)"
SYMBOLIC = "CrafterEnv symbolic"
PIXELS = "CrafterEnv pixels"


class _NoRenderEnv(crafter.Env):
    """The reference game with its per-step rendering skipped (a blank image): its cost without pixels."""

    def render(self, size=None):
        size = size or self._size
        return np.zeros((*size, 3), np.uint8)


@dataclass(frozen=True)
class Measurement:
    """Throughput of one env variant."""

    name: str
    """Variant label as printed in the table."""
    steps: int
    """Primitive steps taken."""
    resets: int
    """Episode resets done during the run (not counting the first)."""
    seconds: float
    """Wall-clock time of all steps and resets."""
    reset_seconds: float
    """Part of ``seconds`` spent in resets."""

    @property
    def steps_per_s(self) -> float:
        """Steps per second, resets included."""
        return self.steps / self.seconds

    @property
    def steps_per_s_no_reset(self) -> float:
        """Steps per second with reset time left out."""
        return self.steps / (self.seconds - self.reset_seconds)

    @property
    def ms_per_reset(self) -> float:
        """Mean wall-clock milliseconds of one reset."""
        return 1000 * self.reset_seconds / max(self.resets, 1)


class _Runner:
    """One variant being timed: steps through action blocks, resetting whenever an episode ends."""

    def __init__(self, name: str, reset: Callable[[], object], step: Callable[[int], bool]) -> None:
        self.name, self._reset, self._step = name, reset, step
        self.steps, self.resets, self.seconds, self.reset_seconds = 0, 0, 0.0, 0.0
        self._reset()

    def run(self, actions: list[int]) -> None:
        """Take ``actions``, adding their wall-clock time (and that of resets) to the totals."""
        start = time.perf_counter()
        for action in actions:
            if self._step(action):
                t0 = time.perf_counter()
                self._reset()
                self.reset_seconds += time.perf_counter() - t0
                self.resets += 1
        self.seconds += time.perf_counter() - start
        self.steps += len(actions)

    def result(self) -> Measurement:
        """The totals so far."""
        return Measurement(self.name, self.steps, self.resets, self.seconds, self.reset_seconds)


def _gym_step(env: CrafterEnv) -> Callable[[int], bool]:
    """A step function for ``env`` that reports whether the episode is over."""

    def step(action: int) -> bool:
        _, _, terminated, truncated, _ = env.step(action)
        return terminated or truncated

    return step


def measure(steps: int, seed: int, block: int = 250) -> list[Measurement]:
    """Measure the four variants with the same seed and the same random action sequence.

    The variants take turns in blocks of ``block`` steps so that load from other processes on a shared
    machine falls on all of them alike.
    """
    actions = np.random.default_rng(seed).integers(len(ACTION_NAMES), size=steps).tolist()
    runners = []
    references = ((REFERENCE, crafter.Env(seed=seed)), (REFERENCE_NO_RENDER, _NoRenderEnv(seed=seed)))
    for name, reference in references:
        runners.append(_Runner(name, reference.reset, lambda a, env=reference: env.step(a)[2]))
    for name, mode in ((SYMBOLIC, "symbolic"), (PIXELS, "pixels")):
        env = CrafterEnv(mode, seed=seed)
        runners.append(_Runner(name, env.reset, _gym_step(env)))
    for begin in range(0, steps, block):
        for runner in runners:
            runner.run(actions[begin : begin + block])
    return [runner.result() for runner in runners]


def table(results: list[Measurement], steps: int, seed: int) -> str:
    """Markdown section with the results, the command and the machine."""
    by_name = {r.name: r for r in results}
    lines = [
        SECTION,
        "",
        f"Command: `OMP_NUM_THREADS=1 python -m bench.env_throughput --steps {steps} --seed {seed}`",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} "
        f"at the end, Python {platform.python_version()}, one process.",
        "",
        "| variant | steps | resets | steps/s (with resets) | steps/s (resets excluded) | ms per reset |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        lines.append(
            f"| {r.name} | {r.steps} | {r.resets} | {r.steps_per_s:.0f} | {r.steps_per_s_no_reset:.0f} "
            f"| {r.ms_per_reset:.1f} |"
        )
    lines.append("")
    for cand, base in ((SYMBOLIC, REFERENCE_NO_RENDER), (PIXELS, REFERENCE)):
        c, b = by_name[cand], by_name[base]
        lines.append(
            f"{cand} / {base}: {c.steps_per_s / b.steps_per_s:.2f}x with resets, "
            f"{c.steps_per_s_no_reset / b.steps_per_s_no_reset:.2f}x resets excluded, "
            f"{b.ms_per_reset / c.ms_per_reset:.2f}x faster resets."
        )
    lines.append("")
    return "\n".join(lines)


def write_section(path: Path, section: str, heading: str = SECTION) -> None:
    """Replace (or append) the ``heading`` section (``## Env throughput``) of ``path``, keeping every other
    section."""
    text = path.read_text() if path.exists() else "# Benchmark results\n"
    pattern = re.compile(rf"^{re.escape(heading)}\n.*?(?=^## |\Z)", re.MULTILINE | re.DOTALL)
    if pattern.search(text):
        text = pattern.sub(lambda _: section + "\n", text)
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    path.write_text(text)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=5000, help="primitive steps per variant")
    parser.add_argument("--seed", type=int, default=0, help="seed of the worlds and of the random actions")
    parser.add_argument("--results", type=Path, default=None, help="markdown file to write the section into")
    args = parser.parse_args(argv)
    if args.steps <= 0:
        parser.error(f"--steps must be positive, got {args.steps}")
    section = table(measure(args.steps, args.seed), args.steps, args.seed)
    print(section)
    if args.results is not None:
        write_section(args.results, section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
