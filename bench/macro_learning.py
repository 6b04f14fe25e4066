"""Does a compiled macro make PPO learn faster? Real Sample Factory runs, several seeds per arm.

Trains the same task and PPO settings with primitives only and with primitives + the macros of a macro
file, for each seed, and prints per arm the primitive (game) steps until the rolling success first reached
``--threshold`` (median and range over seeds); a run stops there unless ``--full`` is given (then the final
rolling success is the last logged one). Budgets and step counts are
primitive steps: a macro call that ran k game steps counts k (`rlgpt.rl.learner.SMDPLearner`), and curves
are read with `rlgpt.tracking.read_curve`.

    OMP_NUM_THREADS=1 python bench/macro_learning.py --task collect_wood --steps 120000 --seeds 0 1 2
    OMP_NUM_THREADS=1 python bench/macro_learning.py --task place_table \\
        --macros configs/macros/collect_wood.yaml --steps 200000 --seeds 0 1 2
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from rlgpt.config import builtin_config_path, load_config
from rlgpt.rl.train import train
from rlgpt.tracking import read_curve


def steps_to_threshold(run_dir: Path, threshold: float) -> tuple[int | None, float | None]:
    """(primitive steps when rolling success first reached ``threshold``, last rolling success)."""
    rows = [r for r in read_curve(run_dir / "metrics.csv") if r["success"] not in ("", None)]
    reached = next((int(r["env_steps"]) for r in rows if float(r["success"]) >= threshold), None)
    return reached, (float(rows[-1]["success"]) if rows else None)


def summarize(reached: list[int | None]) -> str:
    """``median [min - max]`` over seeds; a seed that never reached the threshold counts as infinite."""
    values = sorted(math.inf if r is None else r for r in reached)
    fmt = lambda v: "not reached" if v == math.inf else f"{v:,.0f}"  # noqa: E731
    return f"{fmt(statistics.median(values))} [{fmt(values[0])} - {fmt(values[-1])}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="collect_wood")
    parser.add_argument("--macros", default=str(builtin_config_path("macros/go_to_tree.yaml")))
    parser.add_argument("--steps", type=int, default=120_000, help="primitive (game) steps per run")
    parser.add_argument("--episode-length", type=int, default=200)
    parser.add_argument("--threshold", type=float, default=0.9)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument(
        "--full", action="store_true", help="train the whole budget (default: stop at threshold)"
    )
    parser.add_argument("--keep", help="keep the run dirs under this folder")
    parser.add_argument("--json", help="also write the per-run results here")
    args = parser.parse_args()

    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="macro-bench-"))
    arms = {"primitives": [], "primitives+macros": [f"macros.file={args.macros}"]}
    runs: list[dict] = []
    for seed in args.seeds:  # arms interleaved per seed, so a cut-short bench stays balanced
        for label, extra in arms.items():
            run_dir = root / f"{label}-seed{seed}"
            shutil.rmtree(run_dir, ignore_errors=True)
            common = [
                f"task={args.task}",
                f"steps={args.steps}",
                f"seed={seed}",
                f"env.episode_length={args.episode_length}",
                "eval_episodes=0",
                f"run_dir={run_dir}",
            ]
            cfg = load_config(builtin_config_path("main.yaml"), [*common, *extra])
            t0 = time.time()
            result = train(cfg if args.full else dataclasses.replace(cfg, stop_at_success=args.threshold))
            reached, final = steps_to_threshold(result.run_dir, args.threshold)
            run = dict(arm=label, seed=seed, reached=reached, final=final, wall_s=round(time.time() - t0))
            run["env_steps"] = result.env_steps
            runs.append(run)
            print(json.dumps(run), flush=True)
            if args.json:
                Path(args.json).write_text(json.dumps(dict(vars(args), runs=runs), indent=1))

    print(
        f"\ntask {args.task}, episode length {args.episode_length}, {args.steps:,} primitive steps per run, "
        f"seeds {args.seeds}, macros {Path(args.macros).name}"
    )
    print(
        f"{'action space':<20} {'prim. steps to success>=' + str(args.threshold) + ' (median [range])':>46} "
        f"{'last success (median)':>24} {'wall s':>8}"
    )
    medians = {}
    for label in arms:
        mine = [r for r in runs if r["arm"] == label]
        finals = [r["final"] for r in mine if r["final"] is not None]
        final_s = f"{statistics.median(finals):.2f}" if finals else "n/a"
        wall = sum(r["wall_s"] for r in mine)
        print(f"{label:<20} {summarize([r['reached'] for r in mine]):>46} {final_s:>24} {wall:>8.0f}")
        medians[label] = statistics.median(math.inf if r["reached"] is None else r["reached"] for r in mine)
    base, macro = medians["primitives"], medians["primitives+macros"]
    if math.isfinite(base) and math.isfinite(macro):
        print(f"ratio of medians (primitives / with macros): {base / macro:.2f}x")
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
