"""Compiled engine throughput: `CompiledBatch` vs `ReferenceBatch` (a loop over symbolic `CrafterEnv`s).

The ``engine`` rows of ``python -m bench``. Like for like: both play the same N games with the same random
actions and reset every game whose player died (``reset_done``, the next episode of its seed), so steps/s
counts resets too; a second column leaves resets out and a third gives the mean cost of one reset. Both
produce the same observations (tests/envs/test_engine.py), so this is purely the cost of one step. Alone,
with the full per-variant table:
``OMP_NUM_THREADS=1 python -m bench.engine_throughput [--envs 16,64] [--steps N] [--seed S] [--results FILE]``

The variants take turns in blocks of steps so that load from other processes falls on both alike; the
engine is warmed up (numba loads its compiled code from the on-disk cache, or compiles it) before timing.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench.env_throughput import write_section
from rlgpt.envs.batch import BatchObs, ReferenceBatch
from rlgpt.envs.crafter import ACTION_NAMES
from rlgpt.envs.engine import CompiledBatch

SECTION = "### Compiled engine throughput, per variant"
"""Heading of the table ``--results`` writes: a subsection, so that the notes above it in RESULTS.md stay."""
ENGINE = "CompiledBatch"
REFERENCE = "ReferenceBatch (CrafterEnv symbolic)"


@dataclass(frozen=True)
class Measurement:
    """Throughput of one batch implementation."""

    name: str
    """Variant label as printed in the table."""
    num_envs: int
    """Games in the batch."""
    steps: int
    """Game steps taken (batch steps x games)."""
    resets: int
    """Games reset after their player died."""
    seconds: float
    """Wall-clock time of all steps and resets."""
    reset_seconds: float
    """Part of ``seconds`` spent in ``reset_done``."""

    @property
    def steps_per_s(self) -> float:
        """Game steps per second, resets included."""
        return self.steps / self.seconds

    @property
    def us_per_step(self) -> float:
        """Microseconds per game step with reset time left out."""
        return 1e6 * (self.seconds - self.reset_seconds) / self.steps

    @property
    def ms_per_reset(self) -> float:
        """Mean wall-clock milliseconds of one game's reset."""
        return 1000 * self.reset_seconds / max(self.resets, 1)


class _Runner:
    def __init__(self, name: str, batch: CompiledBatch | ReferenceBatch, seed: int) -> None:
        self.name, self.batch = name, batch
        self.obs: BatchObs = batch.reset([seed + i for i in range(batch.num_envs)])
        self.steps = self.resets = 0
        self.seconds = self.reset_seconds = 0.0

    def run(self, actions: np.ndarray) -> None:
        """Take the batch steps of ``actions`` (``[steps, num_envs]``), resetting dead games."""
        start = time.perf_counter()
        for a in actions:
            out = self.batch.step(a)
            if out.dead.any():
                t0 = time.perf_counter()
                self.batch.reset_done(out.dead, out)
                self.reset_seconds += time.perf_counter() - t0
                self.resets += int(out.dead.sum())
            self.obs = out
        self.seconds += time.perf_counter() - start
        self.steps += actions.size

    def result(self) -> Measurement:
        return Measurement(
            self.name, self.batch.num_envs, self.steps, self.resets, self.seconds, self.reset_seconds
        )


def measure(num_envs: int, steps: int, seed: int = 0, block: int = 100) -> tuple[Measurement, Measurement]:
    """(engine, reference) over ``steps`` batch steps of ``num_envs`` games with the same random actions."""
    actions = np.random.default_rng(seed).integers(len(ACTION_NAMES), size=(steps, num_envs))
    engine = _Runner(ENGINE, CompiledBatch(num_envs), seed)
    engine.batch.step(actions[0])  # warm-up: numba's compiled code is loaded (or compiled) on first use
    engine = _Runner(ENGINE, engine.batch, seed)
    reference = _Runner(REFERENCE, ReferenceBatch(num_envs), seed)
    for begin in range(0, steps, block):
        for runner in (engine, reference):
            runner.run(actions[begin : begin + block])
    return engine.result(), reference.result()


def table(results: list[tuple[Measurement, Measurement]], steps: int, seed: int) -> str:
    """Markdown section with the results, the command and the machine."""
    envs = ",".join(str(e.num_envs) for e, _ in results)
    lines = [
        SECTION,
        "",
        f"Command: `OMP_NUM_THREADS=1 python -m bench.engine_throughput --envs {envs} --steps {steps} "
        f"--seed {seed}`",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} "
        f"at the end, Python {platform.python_version()}, one process.",
        "",
        "| variant | games | game steps | resets | game steps/s (with resets) | us per game step (resets "
        "excluded) | ms per reset |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for pair in results:
        for r in pair:
            lines.append(
                f"| {r.name} | {r.num_envs} | {r.steps} | {r.resets} | {r.steps_per_s:,.0f} | "
                f"{r.us_per_step:.1f} | {r.ms_per_reset:.2f} |"
            )
    lines.append("")
    for e, r in results:
        lines.append(
            f"{e.num_envs} games: engine / reference {e.steps_per_s / r.steps_per_s:.1f}x with resets, "
            f"{r.us_per_step / e.us_per_step:.1f}x per step, "
            f"{r.ms_per_reset / e.ms_per_reset:.2f}x per reset."
        )
    lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", default="16,64", help="comma-separated batch sizes")
    parser.add_argument("--steps", type=int, default=1000, help="batch steps per size")
    parser.add_argument("--seed", type=int, default=0, help="first world seed and seed of the actions")
    parser.add_argument("--results", type=Path, default=None, help="markdown file to write the section into")
    args = parser.parse_args(argv)
    sizes = [int(n) for n in args.envs.split(",")]
    if args.steps <= 0 or min(sizes) <= 0:
        parser.error("--steps and every --envs size must be positive")
    section = table([measure(n, args.steps, args.seed) for n in sizes], args.steps, args.seed)
    print(section)
    if args.results is not None:
        write_section(args.results, section, SECTION)
    return 0


if __name__ == "__main__":
    sys.exit(main())
