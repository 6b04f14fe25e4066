"""Wall time of one small `rlgpt sweep` on a local Ray cluster of 1 vs 2 worker CPUs (jobs ask for 1 CPU each:
one training at a time vs two side by side), and how much of it the driver's LLM work takes.

    OMP_NUM_THREADS=1 .venv/bin/python -m bench.ray_sweep --out /tmp/ray_sweep

Each cluster size runs the same sweep from scratch (``--tasks``, ``--modes``, ``--seeds`` on
``configs/run_smoke.yaml`` at ``--steps``; the embedded 0.5B model for the ``rlgpt`` cells) with
``--executor ray``. Ray probes cloud metadata addresses when it starts, so the script runs itself again
inside a private network namespace (``unshare -n``, loopback up; needs root). Prints one JSON line: each
size's wall time, the ratio, and the seconds the cells' LLM phases took in the driver (``phases.jsonl``),
which do not run any faster with more workers.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.loop_matrix import LLM_PHASES

IN_NETNS = "RLGPT_BENCH_IN_NETNS"
PORT = 6391
BIN = Path(sys.executable).parent


def llm_seconds(sweep_dir: Path) -> float:
    """Seconds every cell's LLM phases took (model load included: the driver's share of the sweep)."""
    total = 0.0
    for phases in sweep_dir.glob("*/phases.jsonl"):
        for line in phases.read_text().splitlines():
            record = json.loads(line)
            if record["phase"] in LLM_PHASES:
                total += record["wall_s"]
    return total


def timed_sweep(workers: int, out: Path, args: argparse.Namespace) -> dict:
    """One sweep from scratch on a fresh `workers`-CPU head node."""
    shutil.rmtree(out, ignore_errors=True)
    temp = tempfile.mkdtemp(prefix="rb", dir="/tmp")
    subprocess.run([str(BIN / "ray"), "start", "--head", f"--port={PORT}", f"--num-cpus={workers}",
                    "--include-dashboard=false", "--disable-usage-stats", f"--temp-dir={temp}"], check=True,
                   capture_output=True)
    try:
        config = str(Path(__file__).resolve().parents[1] / "configs" / "run_smoke.yaml")
        cmd = [str(BIN / "rlgpt"), "sweep", "--tasks", args.tasks, "--modes", args.modes,
               "--seeds", args.seeds, "--out", str(out), "--config", config, "--steps", str(args.steps),
               "--executor", "ray",
               "--ray-address", f"127.0.0.1:{PORT}", "--set", "ray.num_cpus=1"]
        start = time.monotonic()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        wall = time.monotonic() - start
        if proc.returncode != 0:
            raise SystemExit(f"sweep failed ({proc.returncode}): {proc.stderr[-3000:]}")
    finally:
        subprocess.run([str(BIN / "ray"), "stop", "--force"], capture_output=True)
        shutil.rmtree(temp, ignore_errors=True)
    return {"workers": workers, "wall_s": round(wall, 1), "llm_s": round(llm_seconds(out), 1),
            "table": proc.stdout.strip().splitlines()[:6]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="/tmp/ray_sweep")
    parser.add_argument("--tasks", default="collect_wood")
    parser.add_argument("--modes", default="ppo,rlgpt")
    parser.add_argument("--seeds", default="0,1")
    parser.add_argument("--steps", type=int, default=2048)
    args = parser.parse_args()
    if os.environ.get(IN_NETNS) != "1":
        env = dict(os.environ, **{IN_NETNS: "1"})
        script = 'ip link set lo up && exec "$0" -m bench.ray_sweep "$@"'
        sys.exit(subprocess.run(["unshare", "-n", "sh", "-c", script, sys.executable, *sys.argv[1:]],
                                env=env).returncode)
    runs = [timed_sweep(w, Path(args.out) / f"workers{w}", args) for w in (1, 2)]
    print(json.dumps({"cells": f"{args.tasks} x {args.modes} x seeds {args.seeds}", "steps": args.steps,
                      "runs": runs, "speedup": round(runs[0]["wall_s"] / runs[1]["wall_s"], 2)}))


if __name__ == "__main__":
    main()
