"""The learners on the Crafter benchmark at one step budget: Crafter score against wall time.

Each learner is a config (`LEARNERS`): the ``small`` encoder with the throughput recipe (configs/main.yaml,
on the benchmark task with crafter's 10000-step episodes, as `bench.crafter_score` runs it), the ``resnet``
encoder with the published PPO recipe (configs/crafter_resnet.yaml) and Achievement Distillation on it
(configs/crafter_ad.yaml). Each trains ``--steps`` with ``rlgpt train`` (its wall time and whole-run env
steps/s), then plays ``--episodes`` test-seed episodes (`rlgpt.rl.evaluate.evaluate`) for the Crafter score.
``--quick`` shrinks the presets' 4096-decision batches (rollout 64, minibatches of 128) so that a few
thousand steps train several batches and AD runs its auxiliary phase (every 2 batches, 1 epoch).

    OMP_NUM_THREADS=1 nice -n 15 python -m bench.learners --steps 50000 --episodes 10 --out /tmp/learners
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from rlgpt.config import builtin_config_path
from rlgpt.envs.tasks import BENCHMARK_TASK, DEFAULT_EPISODE_LENGTH

LEARNERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "ppo-small": ("main.yaml", (f"env.episode_length={DEFAULT_EPISODE_LENGTH}",)),
    "ppo-resnet": ("crafter_resnet.yaml", ()),
    "ad-resnet": ("crafter_ad.yaml", ()),
}
"""Learner name -> (config shipped in configs/, overrides)."""
BASELINE = "ppo-small"
"""The learner the others are compared with."""
QUICK_OVERRIDES = ("ppo.rollout=64", "ppo.batch_size=128", "ppo.ad_aux_every=2", "ppo.ad_aux_epochs=1",
                   "summaries_every_sec=2")
"""``--quick``: batches small enough that a tiny budget trains several and AD's phase runs."""


@dataclass
class LearnerRun:
    """One learner's training and evaluation."""

    learner: str
    steps: int
    """Env steps trained (the learner's count at its end)."""
    train_s: float
    """Wall seconds of the whole ``rlgpt train`` (start-up, training, checkpoints)."""
    crafter_score: float
    episodes: int
    achievement_success: dict[str, float]
    command: str

    @property
    def steps_per_s(self) -> float:
        return self.steps / self.train_s


def train_command(learner: str, run_dir: Path, steps: int, seed: int, quick: bool,
                  extra: tuple[str, ...] = ()) -> list[str]:
    config, overrides = LEARNERS[learner]
    sets = [*overrides, *(QUICK_OVERRIDES if quick else ()), "eval_episodes=0", *extra]
    return [sys.executable, "-m", "rlgpt.cli", "train", "--config", str(builtin_config_path(config)),
            "--task", BENCHMARK_TASK, "--steps", str(steps), "--seed", str(seed), "--run-dir", str(run_dir),
            *(arg for s in sets for arg in ("--set", s))]


def run_learner(learner: str, steps: int, episodes: int, seed: int, out: Path,
                quick: bool = False, extra: tuple[str, ...] = ()) -> LearnerRun:
    """Train `learner` for `steps` (`extra`: more ``--set`` overrides) and evaluate it on `episodes`
    test-seed episodes."""
    from rlgpt.rl.evaluate import evaluate

    run_dir = out / f"{learner}-seed{seed}"
    cmd = train_command(learner, run_dir, steps, seed, quick, extra)
    start = time.monotonic()
    subprocess.run(cmd, check=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    train_s = time.monotonic() - start
    report = evaluate(run_dir, episodes=episodes, seed=seed, split="test")
    return LearnerRun(learner, report.env_steps, train_s, report.crafter_score, report.episodes,
                      report.achievement_success, " ".join(cmd[2:]))


def run_all(steps: int, episodes: int, seed: int, out: Path, quick: bool = False,
            learners: tuple[str, ...] = tuple(LEARNERS), extra: tuple[str, ...] = ()) -> list[LearnerRun]:
    out.mkdir(parents=True, exist_ok=True)
    runs = []
    for learner in learners:
        runs.append(run_learner(learner, steps, episodes, seed, out, quick, extra))
        (out / "learners.json").write_text(json.dumps([asdict(r) | {"steps_per_s": r.steps_per_s}
                                                       for r in runs], indent=1))
    return runs


def markdown(runs: list[LearnerRun]) -> str:
    lines = ["| learner | env steps | train wall s | env steps/s | wall h per 1M (extrapolated) | episodes | "
             "Crafter score |", "|---|---:|---:|---:|---:|---:|---:|"]
    for r in runs:
        lines.append(f"| {r.learner} | {r.steps:,} | {r.train_s:.0f} | {r.steps_per_s:.0f} | "
                     f"{1e6 / r.steps_per_s / 3600:.1f} | {r.episodes} | {r.crafter_score:.2f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.learners", description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=50_000)
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("/tmp/rlgpt_learners"))
    parser.add_argument("--learners", default=",".join(LEARNERS),
                        help=f"comma-separated of {', '.join(LEARNERS)}")
    parser.add_argument("--quick", action="store_true", help="small batches for tiny budgets (tests, CI)")
    parser.add_argument("--set", action="append", default=[], help="an override for every learner's config")
    args = parser.parse_args(argv)
    learners = tuple(args.learners.split(","))
    unknown = [n for n in learners if n not in LEARNERS]
    if unknown:
        parser.error(f"unknown learner(s) {unknown}; choose from {', '.join(LEARNERS)}")
    print(markdown(run_all(args.steps, args.episodes, args.seed, args.out, args.quick, learners,
                           tuple(args.set))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
