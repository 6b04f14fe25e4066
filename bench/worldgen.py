"""Reset cost on the compiled engine: world noise from traced tables vs opensimplex point by point.

Both variants of `CompiledBatch` (``noise="tables"``, the default, and ``noise="direct"``) build crafter's
worlds bit for bit (tests/envs/test_worldgen.py); this measures what one reset (``reset_done`` of one game:
world generation, fresh player, first observation) costs with each, in the same process, taking turns in
blocks so that load from other processes falls on both alike, in wall time and in the process's CPU time
(which, on a loaded box, leaves out the time other processes hold the core). It also reports the one-off
costs a worker pays before its first reset: tracing the noise tables (once per process and world size)
and loading (or, with ``--cold``, compiling) the numba kernels, each measured in a fresh subprocess.

    OMP_NUM_THREADS=1 python -m bench.worldgen [--resets 400] [--blocks 8] [--cold]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

from rlgpt.envs.engine import CompiledBatch

VARIANTS = ("direct", "tables")

_FIRST_RESET = """
import json, time
t0 = time.perf_counter()
from rlgpt.envs.engine import CompiledBatch
t1 = time.perf_counter()
batch = CompiledBatch(1, noise={noise!r})
t2 = time.perf_counter()
batch.reset([0])
t3 = time.perf_counter()
tables = batch.noise_tables.seconds if batch.noise_tables is not None else 0.0
print(json.dumps({{"import": t1 - t0, "construct": t2 - t1, "tables": tables, "first_reset": t3 - t2}}))
"""


def reset_ms(batch: CompiledBatch, resets: int) -> tuple[float, float]:
    """Mean milliseconds of one ``reset_done`` of a one-game batch: wall time, and this process's CPU time
    (which leaves out the time other processes on a loaded box take the core from it)."""
    obs = batch.reset([0]) if not batch._started else batch._obs
    done = np.ones(1, bool)
    began, began_cpu = time.perf_counter(), time.process_time()
    for _ in range(resets):
        batch.reset_done(done, obs)
    wall, cpu = time.perf_counter() - began, time.process_time() - began_cpu
    return 1e3 * wall / resets, 1e3 * cpu / resets


def measure(resets: int, blocks: int) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Per-block mean reset milliseconds of each variant, wall and CPU, the variants taking turns."""
    batches = {}
    for noise in VARIANTS:
        batch = CompiledBatch(1, noise=noise)
        batch._obs = batch.reset([0])
        reset_ms(batch, 5)  # warm: numba loads (or compiles) every kernel a reset runs
        batches[noise] = batch
    wall: dict[str, list[float]] = {noise: [] for noise in VARIANTS}
    cpu: dict[str, list[float]] = {noise: [] for noise in VARIANTS}
    for _ in range(blocks):
        for noise in VARIANTS:
            w, c = reset_ms(batches[noise], resets)
            wall[noise].append(w)
            cpu[noise].append(c)
    return wall, cpu


def first_reset(noise: str, cold: bool) -> dict[str, float]:
    """One-off costs in a fresh process: import, construction (tracing the tables), first reset (loading
    the kernels from numba's on-disk cache, or compiling them when ``cold``)."""
    env = dict(os.environ)
    with tempfile.TemporaryDirectory() as cache:
        if cold:
            env["NUMBA_CACHE_DIR"] = cache
        out = subprocess.run(
            [sys.executable, "-c", _FIRST_RESET.format(noise=noise)],
            env=env, capture_output=True, text=True, check=True,
        )  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--resets", type=int, default=400, help="resets per block and variant")
    parser.add_argument("--blocks", type=int, default=8, help="blocks per variant (they take turns)")
    parser.add_argument(
        "--cold", action="store_true", help="also time the first reset with an empty numba cache"
    )
    args = parser.parse_args(argv)
    wall, cpu = measure(args.resets, args.blocks)
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    print(f"reset_done of one 64x64 game, {args.blocks} blocks x {args.resets} resets per variant")
    print("| noise | clock | mean ms/reset | median of blocks | best block |")
    print("|---|---|---|---|---|")
    for clock, times in (("wall", wall), ("cpu", cpu)):
        for noise in VARIANTS:
            t = times[noise]
            mean, median, best = statistics.mean(t), statistics.median(t), min(t)
            print(f"| {noise} | {clock} | {mean:.3f} | {median:.3f} | {best:.3f} |")
    for clock, times in (("wall", wall), ("cpu", cpu)):
        mean = {noise: statistics.mean(t) for noise, t in times.items()}
        ratios = [d / t for d, t in zip(times["direct"], times["tables"], strict=True)]
        print(
            f"speed-up direct/tables ({clock}): of the means {mean['direct'] / mean['tables']:.2f}x, "
            f"per block median {statistics.median(ratios):.2f}x "
            f"(min {min(ratios):.2f}x, max {max(ratios):.2f}x)"
        )
    print("one-off costs in a fresh process (s):")
    for cold in (False, True) if args.cold else (False,):
        for noise in VARIANTS:
            costs = first_reset(noise, cold)
            label = "empty numba cache" if cold else "numba cache warm"
            print(f"  {noise:7s} {label}: " + ", ".join(f"{k} {v:.2f}" for k, v in costs.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
