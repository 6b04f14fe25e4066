"""Does a compiled macro make PPO learn faster? Two real Sample Factory runs in one command.

Trains the same task, seed and PPO settings twice - primitives only, then primitives + the macros of a
macro file - and prints, for each, the primitive (game) steps until the rolling success first reaches
``--threshold``, plus the final rolling success, and the ratio of the two step counts.

    OMP_NUM_THREADS=1 python bench/macro_learning.py --steps 100000
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

from rlgpt.config import builtin_config_path, load_config
from rlgpt.rl.train import train
from rlgpt.tracking import read_metrics


def steps_to_threshold(run_dir: Path, threshold: float) -> tuple[int | None, float | None]:
    """(primitive steps when rolling success first reached ``threshold``, last rolling success)."""
    rows = [r for r in read_metrics(run_dir / "metrics.csv") if r["success"] not in ("", None)]
    reached = next((int(r["primitive_steps"]) for r in rows if float(r["success"]) >= threshold), None)
    return reached, (float(rows[-1]["success"]) if rows else None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="collect_wood")
    parser.add_argument("--macros", default=str(builtin_config_path("macros/go_to_tree.yaml")))
    parser.add_argument("--steps", type=int, default=100_000, help="SF env steps (decisions) per run")
    parser.add_argument("--episode-length", type=int, default=200)
    parser.add_argument("--threshold", type=float, default=0.9)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", help="keep the run dirs under this folder")
    args = parser.parse_args()

    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="macro-bench-"))
    common = [
        f"task={args.task}",
        f"steps={args.steps}",
        f"seed={args.seed}",
        f"env.episode_length={args.episode_length}",
        "eval_episodes=0",
    ]
    results = {}
    for label, extra in (("primitives", []), ("primitives+macros", [f"macros.file={args.macros}"])):
        run_dir = root / label
        shutil.rmtree(run_dir, ignore_errors=True)
        cfg = load_config(builtin_config_path("main.yaml"), [*common, f"run_dir={run_dir}", *extra])
        t0 = time.time()
        result = train(cfg)
        reached, final = steps_to_threshold(result.run_dir, args.threshold)
        results[label] = (reached, final, time.time() - t0)

    print(
        f"\ntask {args.task}, episode length {args.episode_length}, {args.steps:,} decisions per run, "
        f"seed {args.seed}"
    )
    print(
        f"{'action space':<20} {'prim. steps to success>=' + str(args.threshold):>30} {'final success':>14} "
        f"{'wall s':>8}"
    )
    for label, (reached, final, wall) in results.items():
        reached_s = f"{reached:,}" if reached is not None else "not reached"
        final_s = f"{final:.2f}" if final is not None else "n/a"
        print(f"{label:<20} {reached_s:>30} {final_s:>14} {wall:>8.0f}")
    base, macro = results["primitives"][0], results["primitives+macros"][0]
    if base and macro:
        print(f"ratio (primitives / with macros): {base / macro:.2f}x fewer primitive steps with macros")
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
