"""The learners on the Crafter benchmark at one step budget: Crafter score against wall time.

Each learner is a config (`LEARNERS`): the ``small`` encoder with the throughput recipe (configs/main.yaml,
on the benchmark task with crafter's 10000-step episodes, as `bench.crafter_score` runs it), the ``resnet``
encoder with the published PPO recipe (configs/crafter_resnet.yaml) and Achievement Distillation on it
(configs/crafter_ad.yaml). Each trains ``--steps`` with ``rlgpt train`` (its wall time and whole-run env
steps/s), then plays ``--episodes`` test-seed episodes (`rlgpt.rl.evaluate.evaluate`) for the Crafter score.
``--quick`` shrinks the presets' 4096-decision batches (rollout 64, minibatches of 128) so that a few
thousand steps train several batches and AD runs its auxiliary phase (every 2 batches, 1 epoch).

    OMP_NUM_THREADS=1 nice -n 15 python -m bench.learners --steps 50000 --episodes 10 --out /tmp/learners

``--seeds 0,1,2`` trains one learner's seeds side by side instead (`run_seeds`; a machine with a GPU and
cores to spare: ``--set device=cuda``), ``--deadline`` seconds at most: a training still running then is
stopped the way a SIGTERM stops ``rlgpt train`` (a last checkpoint) and evaluated at the steps it reached,
which the table reports. Each seed's evaluation plays the test episodes of its own seed.

    python -m bench.learners --learners ad-resnet --seeds 0,1,2 --steps 1000000 --episodes 50 \
        --deadline 420 --set device=cuda --out /tmp/learners
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from rlgpt import layout
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
    seed: int = 0
    mean_episode_steps: float = 0.0
    """Mean length of the evaluation episodes (crafter's episodes end at death or 10000 steps)."""
    resumed_from: int = 0
    """Env steps the run directory's checkpoint held before this training resumed it (0: a new run)."""

    @property
    def steps_per_s(self) -> float:
        """Env steps trained by this call per wall second of it."""
        return (self.steps - self.resumed_from) / self.train_s


def steps_so_far(run_dir: Path) -> int:
    """Env steps of the newest checkpoint in `run_dir` (0 where there is none): where a training resumes."""
    from rlgpt.rl.checkpoint import CheckpointError, latest_checkpoint, load_checkpoint

    try:
        return int(load_checkpoint(latest_checkpoint(run_dir)).get("env_steps", 0))
    except CheckpointError:
        return 0


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
    resumed_from = steps_so_far(run_dir)
    start = time.monotonic()
    subprocess.run(cmd, check=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    train_s = time.monotonic() - start
    report = evaluate(run_dir, episodes=episodes, seed=seed, split="test")
    return LearnerRun(learner, report.env_steps, train_s, report.crafter_score, report.episodes,
                      report.achievement_success, " ".join(cmd[2:]), seed, report.mean_episode_steps,
                      resumed_from)


def run_all(steps: int, episodes: int, seed: int, out: Path, quick: bool = False,
            learners: tuple[str, ...] = tuple(LEARNERS), extra: tuple[str, ...] = ()) -> list[LearnerRun]:
    out.mkdir(parents=True, exist_ok=True)
    runs = []
    for learner in learners:
        runs.append(run_learner(learner, steps, episodes, seed, out, quick, extra))
        (out / "learners.json").write_text(json.dumps([asdict(r) | {"steps_per_s": r.steps_per_s}
                                                       for r in runs], indent=1))
    return runs


def _stop(procs: dict[int, subprocess.Popen], grace_s: float) -> None:
    """SIGTERM every process still running (``rlgpt train`` checkpoints and stops), SIGKILL after
    ``grace_s``."""
    for proc in procs.values():
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    end = time.monotonic() + grace_s
    for proc in procs.values():
        try:
            proc.wait(timeout=max(0.0, end - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def run_seeds(learner: str, seeds: tuple[int, ...], steps: int, episodes: int, out: Path,
              deadline_s: float | None = None, quick: bool = False, extra: tuple[str, ...] = (),
              grace_s: float = 90.0, eval_timeout_s: float | None = None) -> list[LearnerRun]:
    """Train `learner` once per seed, all at the same time, for `steps` or until `deadline_s` wall seconds,
    then evaluate each on `episodes` test-seed episodes of its seed (side by side too, the machine's cores
    shared among them; one still playing after `eval_timeout_s` is stopped). A run whose evaluation did
    not finish is left out of the result and named on stderr with its logs' paths.

    Side by side, every training lets the OS place its learner (``learner_core=shared``): the batch
    backend's ``auto`` would pin each run's learner to the same last core.
    """
    out.mkdir(parents=True, exist_ok=True)
    extra = ("learner_core=shared", *extra) if len(seeds) > 1 else extra
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    procs, starts, logs, train_s, resumed, cmds = {}, {}, {}, {}, {}, {}
    for seed in seeds:
        run_dir = out / f"{learner}-seed{seed}"
        resumed[seed] = steps_so_far(run_dir)
        logs[seed] = out / f"{learner}-seed{seed}.train.log"
        cmds[seed] = train_command(learner, run_dir, steps, seed, quick, extra)
        starts[seed] = time.monotonic()
        with logs[seed].open("w") as log:
            procs[seed] = subprocess.Popen(cmds[seed], env=env, stdout=log, stderr=subprocess.STDOUT)
    begin = time.monotonic()
    while any(p.poll() is None for p in procs.values()):
        if deadline_s is not None and time.monotonic() - begin > deadline_s:
            print(f"deadline {deadline_s:.0f} s: stopping the trainings still running", file=sys.stderr)
            _stop(procs, grace_s)
            break
        for seed, proc in procs.items():
            if proc.poll() is not None and seed not in train_s:
                train_s[seed] = time.monotonic() - starts[seed]
        time.sleep(1.0)
    for seed in procs:
        train_s.setdefault(seed, time.monotonic() - starts[seed])
    evals = {}
    threads = str(max(1, (os.cpu_count() or 1) // len(seeds)))
    for seed in seeds:
        run_dir = out / f"{learner}-seed{seed}"
        code = ("from rlgpt.rl.evaluate import evaluate; "
                f"evaluate({str(run_dir)!r}, episodes={episodes}, seed={seed}, split='test')")
        with (out / f"{learner}-seed{seed}.eval.log").open("w") as log:
            evals[seed] = subprocess.Popen([sys.executable, "-c", code], stdout=log, stderr=subprocess.STDOUT,
                                           env={**env, "OMP_NUM_THREADS": threads})
    runs = []
    end = None if eval_timeout_s is None else time.monotonic() + eval_timeout_s
    for seed in seeds:
        run_dir = out / f"{learner}-seed{seed}"
        try:
            evals[seed].wait(timeout=None if end is None else max(0.0, end - time.monotonic()))
        except subprocess.TimeoutExpired:
            evals[seed].kill()
            evals[seed].wait()
        if evals[seed].returncode != 0:
            print(f"{learner} seed {seed}: training exit {procs[seed].returncode}, evaluation failed; see "
                  f"{logs[seed]} and {out / f'{learner}-seed{seed}.eval.log'}", file=sys.stderr)
            continue
        report = json.loads((run_dir / layout.EVAL_DIR / layout.EVAL_JSON).read_text())
        runs.append(LearnerRun(learner, report["env_steps"], train_s[seed], report["crafter_score"],
                               report["episodes"], report["achievement_success"], " ".join(cmds[seed][2:]),
                               seed,
                               report["mean_episode_steps"], resumed[seed]))
    (out / "learners.json").write_text(json.dumps([asdict(r) | {"steps_per_s": r.steps_per_s}
                                                   for r in runs], indent=1))
    return runs


def seeds_line(runs: list[LearnerRun]) -> str:
    """Mean and range of the Crafter score over the runs (seeds) given."""
    scores = [r.crafter_score for r in runs]
    if not scores:
        return "no run finished its evaluation"
    return (f"Crafter score over {len(scores)} seed(s): mean {statistics.mean(scores):.2f}, "
            f"range {min(scores):.2f}-{max(scores):.2f}")


def markdown(runs: list[LearnerRun]) -> str:
    lines = ["| learner | seed | env steps (resumed from) | train wall s | env steps/s | wall h per 1M "
             "(extrapolated) | episodes | Crafter score | mean episode steps |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in runs:
        per_1m = f"{1e6 / r.steps_per_s / 3600:.1f}" if r.steps_per_s > 0 else "-"
        lines.append(f"| {r.learner} | {r.seed} | {r.steps:,} ({r.resumed_from:,}) | {r.train_s:.0f} | "
                     f"{r.steps_per_s:.0f} | {per_1m} | {r.episodes} | {r.crafter_score:.2f} | "
                     f"{r.mean_episode_steps:.0f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.learners", description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=50_000)
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--seeds", default=None,
                        help="comma-separated seeds of one learner, trained side by side (run_seeds)")
    parser.add_argument("--deadline", type=float, default=None,
                        help="with --seeds: stop the trainings after this many wall seconds")
    parser.add_argument("--eval-timeout", type=float, default=None,
                        help="with --seeds: stop evaluations still playing after this many wall seconds")
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
    if args.seeds is not None:
        if len(learners) != 1:
            parser.error("--seeds trains one learner: name it with --learners")
        seeds = tuple(int(s) for s in args.seeds.split(","))
        runs = run_seeds(learners[0], seeds, args.steps, args.episodes, args.out, args.deadline, args.quick,
                         tuple(args.set), eval_timeout_s=args.eval_timeout)
        print(markdown(runs))
        print(seeds_line(runs))
        return 0 if len(runs) == len(seeds) else 1
    if args.deadline is not None or args.eval_timeout is not None:
        parser.error("--deadline and --eval-timeout apply to --seeds")
    print(markdown(run_all(args.steps, args.episodes, args.seed, args.out, args.quick, learners,
                           tuple(args.set))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
