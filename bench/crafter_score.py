"""The Crafter benchmark at a small budget: plain PPO (``rlgpt train --task crafter``), its Crafter score and
per-achievement success, next to the Crafter paper's anchors at 1M steps.

The run is exactly what ``rlgpt train`` runs (a child process of the CLI, `configs/main.yaml`'s PPO and
batch backend) on the benchmark task: crafter's own reward and crafter's 10,000-step episodes; then
`rlgpt.rl.evaluate.evaluate` plays ``--episodes`` evaluation episodes of the same length and the score is
`rlgpt.rl.score.crafter_score` of their per-achievement success. The budget is far below the paper's 1M
steps on a shared 2-core CPU, so the anchors are a reference, not a like-for-like comparison.

    OMP_NUM_THREADS=1 python -m bench.crafter_score --steps 200000 --episodes 20 --out /tmp/crafter_ppo
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from rlgpt.config import builtin_config_path
from rlgpt.envs.tasks import ACHIEVEMENTS, BENCHMARK_TASK, DEFAULT_EPISODE_LENGTH
from rlgpt.rl.score import PAPER_SCORES_1M


def train_command(run_dir: Path, steps: int, seed: int) -> list[str]:
    """The ``rlgpt train`` command line this benchmark runs (evaluation afterwards is done here)."""
    return [sys.executable, "-m", "rlgpt.cli", "train", "--config", str(builtin_config_path("main.yaml")),
            "--task", BENCHMARK_TASK, "--steps", str(steps), "--seed", str(seed), "--run-dir", str(run_dir),
            "--set", f"env.episode_length={DEFAULT_EPISODE_LENGTH}", "--set", "eval_episodes=0"]


def run(steps: int, episodes: int, seed: int, out: Path) -> dict:
    """Train, evaluate, and return (and write to ``out/crafter_score.json``) the result."""
    from rlgpt.rl.evaluate import evaluate

    out.mkdir(parents=True, exist_ok=True)
    run_dir = out / f"crafter-ppo-seed{seed}"
    cmd = train_command(run_dir, steps, seed)
    start = time.monotonic()
    subprocess.run(cmd, check=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    train_s = time.monotonic() - start
    start = time.monotonic()
    report = evaluate(run_dir, episodes=episodes, seed=seed, split="test")  # reported: the test seeds
    result = {"steps": report.env_steps, "episodes": report.episodes, "crafter_score": report.crafter_score,
              "achievement_success": report.achievement_success, "mean_return": report.mean_return,
              "mean_episode_steps": report.mean_episode_steps, "train_s": train_s,
              "eval_s": time.monotonic() - start, "command": " ".join(cmd[2:])}
    (out / "crafter_score.json").write_text(json.dumps(result, indent=1))
    return result


def markdown(result: dict) -> str:
    """The result as the Markdown bench/RESULTS.md holds."""
    r = result
    lines = [f"PPO (`rlgpt train --task crafter`), **{r['steps']:,} env steps** (the paper's anchors are "
             f"at 1M): **Crafter score {r['crafter_score']:.2f}** over {r['episodes']} evaluation "
             f"episodes (mean return {r['mean_return']:.2f}, mean length {r['mean_episode_steps']:.0f} "
             f"steps; training {r['train_s']:.0f} s, evaluation {r['eval_s']:.0f} s).", "",
             "| achievement | success (%) |", "|---|---:|"]
    for name in ACHIEVEMENTS:
        lines.append(f"| {name} | {100 * r['achievement_success'][name]:.1f} |")
    lines += ["", "| method (Crafter paper and successors, 1M steps) | score |", "|---|---:|"]
    lines += [f"| {name} | {score} |" for name, score in PAPER_SCORES_1M.items()]
    lines.append(f"| **rlgpt PPO, {r['steps']:,} steps (this run)** | **{r['crafter_score']:.2f}** |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=200_000)
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("/tmp/crafter_ppo"))
    args = parser.parse_args(argv)
    print(markdown(run(args.steps, args.episodes, args.seed, args.out)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
