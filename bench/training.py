"""Training throughput and sample efficiency: rlgpt vs Sample Factory's defaults vs a synchronous PPO.

Six trainers on the same task env (``configs/main.yaml``: ``collect_wood``, symbolic observation, episode
length 1000), the same network (`rlgpt.rl.model`'s encoder + Sample Factory's heads), the same budget and
seed, run one after the other, each in a fresh child process:

- ``rlgpt``: `rlgpt.rl.train.train` with ``configs/main.yaml``, what
  ``rlgpt train --config configs/main.yaml`` runs (without its evaluation afterwards): the batch env
  backend (`rlgpt.rl.sf_batch`, games stepped by the compiled engine).
- ``rlgpt_fp32``: the same with ``ppo.encoder_precision=fp32`` (what ``auto`` picks on a CPU without
  native bfloat16): the encoder precision's share of the speed-up, and its effect on sample efficiency.
- ``rlgpt_gym``: the same with the per-env backend, 2 rollout workers x 8 envs in two splits and a float32
  encoder: the design ``configs/main.yaml`` ran before the batch backend (one Python task env per game).
- ``sf_default``: the same trainer with every Sample Factory flag rlgpt sets put back to Sample Factory's
  own default (workers, envs per worker, rollout, batch, epochs, learning rate, clipping, entropy, policy
  lag, CPU affinity, ...), except what running this env and this network needs: the env and its
  ``rlgpt_*`` flags, ``use_rnn=False`` (rlgpt's network has no RNN), ``normalize_input=False`` (the view
  holds category ids the encoder embeds), the device, seed, budget, and the summary cadence and rolling
  window every trainer logs with (`SF_KEEP`). (rlgpt's learner is Sample Factory's with a per-transition
  discount, identical without macros.)
- ``sync_ppo``: `bench.sync_ppo`, a CleanRL-style single-process synchronous PPO with ``configs/main.yaml``'s
  hyperparameters and encoder precision, stepping one task env per game (the baseline of the ratios).
- ``sync_ppo_batch``: the same stepping all games in one call of the compiled engine (``--env batch``), as
  rlgpt's batch backend does: what the synchronous design gets from the faster env alone.

Each trainer writes ``metrics.csv`` (`rlgpt.tracking.MetricsLog`, a row every ``summaries_every_sec``).
Throughput is the env steps between the first row with steps and the last row over the wall time between
them (start-up and the first partial interval left out; the whole run's rate where there is one row).
Peak RSS is the largest sum of proportional set sizes (PSS: resident memory, each page shared by n
processes counted 1/n per process) over the child and all its descendants (Sample Factory's workers),
sampled every `SAMPLE_S` seconds: the whole tree's resident footprint.

    OMP_NUM_THREADS=1 python -m bench --sample-efficiency --seeds 0,1,2
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

from rlgpt.config import builtin_config_path
from rlgpt.tracking import SUCCESS_WINDOW, read_curve, read_metrics

TRAINERS = ("rlgpt", "rlgpt_fp32", "rlgpt_gym", "sf_default", "sync_ppo_batch", "sync_ppo")
"""The trainers compared; ``sync_ppo`` is the baseline of the ratios."""
MACRO_FILE = str(builtin_config_path("macros/go_to_tree.yaml"))
"""The macro of ``rlgpt_macros`` (collect_wood_macros.yaml's): walk to the nearest tree and face it."""
MACRO_TRAINERS = ("rlgpt_macros", "rlgpt_macros_gym")
"""Trainers of the macro-training comparison (`bench.__main__`'s ``macro_training`` section), each against
``rlgpt``: not in `TRAINERS`, whose sample-efficiency table compares plain PPO trainers."""
TRAINER_OVERRIDES = {
    "rlgpt": [],
    # configs/main.yaml's job with the go_to_tree macro beside the primitives, on the batch backend (auto):
    # games running a macro are stepped by the compiled engine, the others wait for them.
    "rlgpt_macros": [f"macros.file={MACRO_FILE}", "macros.max_steps=32"],
    # The same on the per-env backend, the only one that ran macros before (as collect_wood_macros.yaml
    # ran them: 2 workers x 8 envs in two splits).
    "rlgpt_macros_gym": [f"macros.file={MACRO_FILE}", "macros.max_steps=32", "env.backend=gym",
                         "env.num_workers=2", "env.num_envs_per_worker=8", "env.worker_num_splits=2"],
    "rlgpt_fp32": ["ppo.encoder_precision=fp32"],
    # What `rlgpt train --config configs/main.yaml` ran before the batch backend.
    "rlgpt_gym": [
        "env.backend=gym",
        "env.num_workers=2",
        "env.num_envs_per_worker=8",
        "env.worker_num_splits=2",
        "ppo.encoder_precision=fp32",
    ],
    # Sample Factory's defaults include its default sampling (one Python env per SF env: the gym backend)
    # and float32 arithmetic.
    "sf_default": ["env.backend=gym", "ppo.encoder_precision=fp32"],
}
"""``--set`` overrides of configs/main.yaml per Sample Factory trainer (``sync_ppo`` is its own script)."""
LABELS = {
    "rlgpt": "rlgpt train (configs/main.yaml)",
    "rlgpt_fp32": "rlgpt train, float32 encoder",
    "rlgpt_gym": "rlgpt train, before: per-env backend, 2 workers x 8 envs, fp32",
    "sf_default": "Sample Factory defaults",
    "sync_ppo_batch": "sync PPO on the compiled engine (--env batch)",
    "sync_ppo": "sync PPO (bench/sync_ppo.py)",
    "rlgpt_macros": "rlgpt train + go_to_tree macro (batch backend)",
    "rlgpt_macros_gym": "rlgpt train + go_to_tree macro (per-env backend, 2 workers x 8)",
}
SF_KEEP = {
    "env",
    "experiment",
    "train_dir",
    "device",
    "seed",
    "train_for_env_steps",
    "use_rnn",
    "normalize_input",
    "experiment_summaries_interval",
    "flush_summaries_interval",
    "stats_avg",
    "with_wandb",
    "wandb_project",
}
"""Sample Factory flags of ``rlgpt train`` the ``sf_default`` trainer keeps (and every ``rlgpt_*`` flag)."""
CONFIG = str(builtin_config_path("main.yaml"))


@dataclass
class TrainingRun:
    """One trainer's run as measured from outside."""

    trainer: str
    """One of `TRAINERS`."""
    seed: int
    """Run seed."""
    env_steps: int
    """Env (primitive) steps trained."""
    wall_s: float
    """Wall time of the child process, start-up included."""
    steps_per_s: float
    """Env steps per second of training (see the module docstring)."""
    peak_rss_mb: float
    """Peak resident memory (PSS sum) of the child's whole process tree, MiB."""
    reached: int | None
    """Env steps at the first metrics row whose full rolling window (32 episodes) has success >= the
    threshold (None: not reached)."""
    wall_to_threshold: float | None
    """The trainer's own clock (``wall_time``, start-up included) at that row, seconds (None: not reached)."""
    final_success: float | None
    """Rolling success of the last metrics row."""
    cpu_ms_per_1k: dict[str, float]
    """CPU time (user + system) per 1,000 env steps of each process role over the same rows as
    ``steps_per_s``: ``main`` (the trainer process), and for Sample Factory ``learner``, ``inference``,
    ``rollout`` (all rollout workers). Unlike wall time it hardly moves with other jobs on the machine, so
    ``sum / cores`` bounds what an idle box could do."""
    load: tuple[float, float]
    """1-minute load average when the run started and when it ended."""


def sf_default_argv(config: str = CONFIG, overrides: list[str] | tuple[str, ...] = ()) -> list[str]:
    """Flags resetting each Sample Factory flag ``rlgpt train`` sets, except `SF_KEEP`, to SF's default."""
    from sample_factory.cfg.arguments import parse_sf_args

    from rlgpt.config import load_config
    from rlgpt.rl.sf_config import env_backend, sf_flags

    cfg = load_config(config, list(overrides))
    parser, _ = parse_sf_args(argv=["--env=x"], evaluation=False)
    defaults = vars(parser.parse_args(["--env=x"]))
    names = list(sf_flags(cfg, Path("x"), "x", env_backend(cfg)))
    kept = [n for n in names if n in SF_KEEP or n.startswith("rlgpt_") or defaults.get(n) is None]
    return [f"--{n}={defaults[n]}" for n in names if n not in kept] + [
        "--use_rnn=False",
        "--normalize_input=False",
    ]


def _train_in_process(
    trainer: str,
    config: str,
    steps: int,
    seed: int,
    run_dir: Path,
    overrides: list[str],
    stop_at_success: float | None,
) -> None:
    """Child side of `run_trainer` for the two Sample Factory trainers."""
    from rlgpt.config import load_config
    from rlgpt.rl.train import train

    own = TRAINER_OVERRIDES[trainer]
    stop = [f"stop_at_success={stop_at_success}"] if stop_at_success is not None else []
    run = [f"steps={steps}", f"seed={seed}", f"run_dir={run_dir}"]
    cfg = load_config(config, [*overrides, *own, *stop, *run])
    extra = sf_default_argv(config, overrides) if trainer == "sf_default" else []
    result = train(cfg, extra_sf_argv=extra)
    if result.status != 0:
        raise SystemExit(f"{trainer}: Sample Factory exited with status {result.status}")


def _tree_rss(proc: psutil.Process) -> int:
    total = 0
    for p in [proc, *proc.children(recursive=True)]:
        try:
            total += p.memory_full_info().pss
        except psutil.Error:  # a worker that just exited
            pass
    return total


def steady_rate(rows: list[dict[str, str]]) -> float | None:
    """Env steps/s between the first metrics row with steps and the last one (None: fewer than two)."""
    rows = [r for r in rows if int(r["env_steps"]) > 0]
    if len(rows) < 2 or float(rows[-1]["wall_time"]) <= float(rows[0]["wall_time"]):
        return None
    steps = int(rows[-1]["env_steps"]) - int(rows[0]["env_steps"])
    return steps / (float(rows[-1]["wall_time"]) - float(rows[0]["wall_time"]))


SAMPLE_S = 0.5
"""Interval of the measurements taken from outside (PSS, CPU times, new metrics rows). Reading every
process's smaps is not free: at 0.1 s it took ~15% of a core on the 2-core box, more for the five-process
Sample Factory trainers than for the one-process baseline."""


def threshold_row(rows: list[dict[str, str]], threshold: float) -> dict[str, str] | None:
    """The first metrics row whose rolling success over a full window is >= ``threshold`` (early rows
    average the few episodes that have ended, which random play can put above it); None: not reached."""
    return next(
        (
            r
            for r in rows
            if r["success"]
            and float(r["success"]) >= threshold
            and int(r.get("success_episodes") or 0) >= SUCCESS_WINDOW
        ),
        None,
    )


def steps_to_threshold(rows: list[dict[str, str]], threshold: float) -> int | None:
    """Env steps at `threshold_row` (None: not reached)."""
    row = threshold_row(rows, threshold)
    return None if row is None else int(row["env_steps"])


def wall_to_threshold(rows: list[dict[str, str]], threshold: float) -> float | None:
    """The trainer's own clock (``wall_time``, seconds since it started) at `threshold_row` (None: not
    reached): time to a success level, start-up included, as a user waits for it."""
    row = threshold_row(rows, threshold)
    return None if row is None else float(row["wall_time"])


def sf_roles(sf_log: Path) -> dict[int, str]:
    """pid -> role (``learner``, ``inference``, ``rollout``) of a Sample Factory run's child processes,
    from the lines each process writes to ``sf_log.txt`` (every line carries its pid)."""
    # Lines only that process writes: the learner's start, the inference worker's weight updates, a
    # rollout worker's env runner (batched sampling) or its stop.
    markers = {
        "LearnerWorker_p": "learner",
        "Updated weights for policy": "inference",
        "EnvRunner ": "rollout",
        "Stopping RolloutWorker_w": "rollout",  # the per-env (gym) runner logs no EnvRunner line
    }
    roles: dict[int, str] = {}
    if not sf_log.exists():
        return roles
    for line in sf_log.read_text(errors="replace").splitlines():
        if not line.startswith("[") or "][" not in line:
            continue
        pid_text, _, message = line.split("][", 1)[1].partition("] ")
        for marker, role in markers.items():
            if message.startswith(marker) and pid_text.isdigit():
                roles.setdefault(int(pid_text), role)
    return roles


def _cpu_times(proc: psutil.Process) -> dict[int, float]:
    """pid -> CPU seconds (user + system) of ``proc`` and all its descendants."""
    out = {}
    for p in [proc, *proc.children(recursive=True)]:
        try:
            t = p.cpu_times()
            out[p.pid] = t.user + t.system
        except psutil.Error:
            pass
    return out


def run_trainer(
    trainer: str,
    steps: int,
    seed: int,
    *,
    config: str = CONFIG,
    overrides: list[str] = (),
    stop_at_success: float | None = None,
    threshold: float = 0.9,
    keep_dir: Path | None = None,
) -> TrainingRun:
    """Train ``trainer`` in a fresh child process and measure it (throughput, peak tree RSS, success)."""
    if trainer not in TRAINERS + MACRO_TRAINERS:
        raise ValueError(f"unknown trainer {trainer!r}; expected one of {TRAINERS + MACRO_TRAINERS}")
    with tempfile.TemporaryDirectory(prefix=f"bench-{trainer}-") as tmp:
        run_dir = (keep_dir or Path(tmp)) / f"{trainer}-seed{seed}"
        sync = trainer.startswith("sync_ppo")
        argv = [sys.executable, "-m", "bench.sync_ppo" if sync else "bench.training"]
        argv += ["--env", "batch" if trainer == "sync_ppo_batch" else "gym"] if sync else ["--child", trainer]
        argv += ["--config", config, "--steps", str(steps), "--seed", str(seed), "--run-dir", str(run_dir)]
        argv += [f"--set={o}" for o in overrides]
        argv += ["--stop-at-success", str(stop_at_success)] if stop_at_success is not None else []
        start, load_before = time.perf_counter(), os.getloadavg()[0]
        child = psutil.Popen(
            argv,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            cwd=Path(__file__).resolve().parents[1],
        )
        peak = 0
        # CPU times of every process (the last reading of one that has exited) when the first and the last
        # metrics row with steps appeared: the rows the rate is taken between.
        metrics, seen_rows, latest, first_cpu, last_cpu = run_dir / "metrics.csv", 0, {}, None, None
        while child.poll() is None:
            peak = max(peak, _tree_rss(child))
            latest.update(_cpu_times(child))
            rows = _steps_rows(metrics)
            if len(rows) != seen_rows:
                seen_rows, last_cpu = len(rows), dict(latest)
                first_cpu = first_cpu or dict(latest)
            time.sleep(SAMPLE_S)
        wall = time.perf_counter() - start
        stderr = child.stderr.read()
        if child.returncode != 0:
            raise RuntimeError(f"{trainer} exited with {child.returncode}:\n{stderr[-3000:]}")
        rows = read_curve(metrics)
        roles = sf_roles(run_dir / "sf_log.txt")
    if not rows:
        raise RuntimeError(f"{trainer} wrote no metrics rows")
    cpu_ms: dict[str, float] = {}
    steady = [r for r in rows if int(r["env_steps"]) > 0]
    window_steps = int(steady[-1]["env_steps"]) - int(steady[0]["env_steps"]) if steady else 0
    if first_cpu and last_cpu and window_steps > 0:
        for pid, seconds in last_cpu.items():
            role = "main" if pid == child.pid else roles.get(pid, "other")
            used = seconds - first_cpu.get(pid, 0.0)
            cpu_ms[role] = round(cpu_ms.get(role, 0.0) + used * 1e3 * 1000 / window_steps, 1)
    env_steps = int(rows[-1]["env_steps"])
    last = rows[-1]["success"]
    return TrainingRun(
        trainer=trainer,
        seed=seed,
        env_steps=env_steps,
        wall_s=round(wall, 2),
        steps_per_s=steady_rate(rows) or env_steps / float(rows[-1]["wall_time"]),
        peak_rss_mb=round(peak / 2**20, 1),
        reached=steps_to_threshold(rows, threshold),
        wall_to_threshold=wall_to_threshold(rows, threshold),
        final_success=float(last) if last else None,
        cpu_ms_per_1k=cpu_ms,
        load=(round(load_before, 2), round(os.getloadavg()[0], 2)),
    )


def _steps_rows(metrics: Path) -> list[dict[str, str]]:
    """Metrics rows with env steps so far (none while the file is not there yet)."""
    try:
        return [r for r in read_metrics(metrics) if r.get("env_steps") and int(r["env_steps"]) > 0]
    except (OSError, ValueError):
        return []


def _child_main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--child", choices=tuple(TRAINER_OVERRIDES), required=True)
    parser.add_argument("--config", default=CONFIG)
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--run-dir", type=Path, required=True)
    parser.add_argument("--set", action="append", default=[])
    parser.add_argument("--stop-at-success", type=float, default=None)
    a = parser.parse_args(argv)
    _train_in_process(a.child, a.config, a.steps, a.seed, a.run_dir, a.set, a.stop_at_success)


if __name__ == "__main__":
    _child_main(sys.argv[1:])
