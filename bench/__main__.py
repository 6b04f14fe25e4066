"""rlgpt's benchmark suite: one table of ratios, each measured against its baseline in the same run.

    OMP_NUM_THREADS=1 python -m bench                     # every row (minutes)
    OMP_NUM_THREADS=1 python -m bench --quick             # tiny budgets, < 2 min: CI keeps the suite alive
    OMP_NUM_THREADS=1 python -m bench --only env,training --json out.json
    OMP_NUM_THREADS=1 python -m bench --sample-efficiency --seeds 0,1,2 --steps 300000
    OMP_NUM_THREADS=1 python -m bench --sample-efficiency --whole-run --trainers rlgpt,sync_ppo

Sections (``--only`` takes their names): ``env`` (env steps/s, symbolic vs the reference without
rendering, pixels vs the reference with it), ``engine`` (the compiled batched engine vs the same games on
symbolic CrafterEnvs, dead games reset; `bench.engine_throughput`), ``training`` (training env steps/s of
rlgpt (batch backend; the full run adds it with a float32 encoder and on its per-env backend, and the
synchronous PPO on the compiled engine) and of Sample Factory's defaults vs a synchronous PPO, with each
process tree's peak RSS; `bench.training`), ``kernels`` (fused ops vs eager vs ``torch.compile`` at the
learner's shapes), ``macro`` (primitive steps/s through a macro vs direct), ``macro_training`` (training
env steps/s of configs/main.yaml's job with the go_to_tree macro in its action space vs without it, both on
the batch backend, over a whole training: 300k steps, 10k quick; the full run adds the macro job on the
per-env backend, the only one that ran macros before; `bench.training`),
``llm`` (embedded LLM tokens/s), ``envpool`` (Sample Factory training vs raw stepping on envpool),
``iteration`` (one live RL-GPT loop iteration with its critic, wall time by phase, the model's prompt states
warm and after `rlgpt warm` vs cold; `bench.iteration`), ``learners`` (Crafter score and env steps/s of
the small-encoder PPO, the ResNet PPO recipe and Achievement Distillation at one budget;
`bench.learners`); `FULL_ONLY` sections run under ``--quick`` only
when ``--only`` names them. Every row names the machine it ran on.
Timings are printed, never asserted; on a loaded machine only the same-run ratios mean something.
``--sample-efficiency`` is a separate, longer comparison: the trainers over several seeds until rolling
success 0.9 (or the budget), reporting env steps/s and the env steps and wall time it took; with
``--whole-run`` every run trains its whole budget, so that the rate covers the solved part too (episodes
shrink as a task gets solved and world generation at resets becomes the cost).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from bench import (
    engine_throughput,
    env_throughput,
    envpool_throughput,
    iteration,
    kernels,
    learners,
    llm_throughput,
    macro_overhead,
    training,
)


@dataclass
class Row:
    """One line of the table: a candidate measured against its baseline in the same run."""

    name: str
    """What is measured."""
    candidate: str
    """The thing being measured."""
    baseline: str
    """What it is compared with."""
    value: float
    """The candidate's measurement, in ``unit``."""
    baseline_value: float
    """The baseline's measurement, in ``unit``."""
    unit: str
    """Unit of both values (higher is better for every row)."""
    peak_rss: str = ""
    """Training rows: peak RSS of the candidate's / the baseline's whole process tree."""
    machine: str = ""
    """CPU model, cores, GPU (filled in by the suite)."""

    @property
    def ratio(self) -> float:
        """Candidate / baseline; NaN for a baseline of 0 (the Crafter score of a policy that unlocked
        nothing)."""
        return self.value / self.baseline_value if self.baseline_value else float("nan")


def machine() -> str:
    """CPU model, core count and GPU name (or "no GPU") of this machine."""
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            model = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "no GPU"
    return f"{model}, {os.cpu_count()} cores, {gpu}"


def env_rows(quick: bool) -> list[Row]:
    steps = 1_000 if quick else 5_000
    results = {m.name: m for m in env_throughput.measure(steps, seed=0)}
    unit = "env steps/s"
    ref, ref_no_render = results[env_throughput.REFERENCE], results[env_throughput.REFERENCE_NO_RENDER]
    sym, pix = results[env_throughput.SYMBOLIC], results[env_throughput.PIXELS]
    return [
        Row(
            "env step (no render)",
            sym.name,
            ref_no_render.name,
            sym.steps_per_s,
            ref_no_render.steps_per_s,
            unit,
        ),
        Row("env step (render)", pix.name, ref.name, pix.steps_per_s, ref.steps_per_s, unit),
    ]


def engine_rows(quick: bool) -> list[Row]:
    sizes, steps = ((16,), 300) if quick else ((16, 64), 1_000)
    rows = []
    for n in sizes:
        engine, reference = engine_throughput.measure(n, steps, seed=0)
        rows.append(
            Row(
                f"engine step ({n} games, auto-reset)",
                engine.name,
                reference.name,
                engine.steps_per_s,
                reference.steps_per_s,
                "game steps/s",
            )
        )
    return rows


QUICK_SKIPS = ("rlgpt_gym", "rlgpt_fp32", "sync_ppo_batch")
"""Trainers ``--quick`` leaves out (more start-ups than its 2 minutes hold): variants of rows it keeps."""


def training_rows(quick: bool) -> list[Row]:
    steps = 10_000 if quick else 100_000
    # Two-second summaries give a short run a few metrics rows to take its rate between.
    overrides = ["summaries_every_sec=2"] if quick else []
    trainers = [t for t in training.TRAINERS if not (quick and t in QUICK_SKIPS)]
    runs = {t: training.run_trainer(t, steps, seed=0, overrides=overrides) for t in trainers}
    base = runs["sync_ppo"]
    return [
        Row(
            f"training ({steps:,} steps)",
            training.LABELS[t],
            training.LABELS[base.trainer],
            runs[t].steps_per_s,
            base.steps_per_s,
            "env steps/s",
            f"{runs[t].peak_rss_mb:,.0f} / {base.peak_rss_mb:,.0f} MiB",
        )
        for t in trainers
        if t != base.trainer
    ]


def kernel_rows(quick: bool) -> list[Row]:
    rows = []
    for r in kernels.suite_measurements(batch=1024, rounds=3 if quick else 15, compile=not quick):
        rows.append(
            Row(
                f"kernel {r.op} (batch {r.batch})",
                r.candidate,
                r.baseline,
                1 / r.seconds,
                1 / r.baseline_seconds,
                "calls/s",
            )
        )
    return rows


def macro_rows(quick: bool) -> list[Row]:
    steps = 2_000 if quick else 20_000
    rates = macro_overhead.measure(steps, seed=0)
    return [
        Row("macro overhead", mode, "direct", rates[mode], rates["direct"], "primitive steps/s")
        for mode in rates
        if mode != "direct"
    ]


def macro_training_rows(quick: bool) -> list[Row]:
    steps = 10_000 if quick else 300_000
    overrides = ["summaries_every_sec=2"] if quick else []
    trainers = ("rlgpt_macros",) if quick else training.MACRO_TRAINERS
    plain = training.run_trainer("rlgpt", steps, seed=0, overrides=overrides)
    runs = {t: training.run_trainer(t, steps, seed=0, overrides=overrides) for t in trainers}
    return [
        Row(
            f"macro training ({steps:,} steps)",
            training.LABELS[t],
            training.LABELS[plain.trainer],
            runs[t].steps_per_s,
            plain.steps_per_s,
            "env steps/s",
            f"{runs[t].peak_rss_mb:,.0f} / {plain.peak_rss_mb:,.0f} MiB",
        )
        for t in trainers
    ]


def llm_rows(quick: bool) -> list[Row]:
    models = llm_throughput.available_models(quick)
    results = {
        m: llm_throughput.measure(
            m,
            threads=1 if quick else os.cpu_count() or 1,
            gen_tokens=16 if quick else 64,
            repeats=1 if quick else 3,
            prompt_tokens=128 if quick else None,
        )
        for m in models
    }
    rows = []
    for model, r in results.items():
        rows.append(
            Row(
                "LLM tokens/s",
                f"{model} generation",
                f"{model} prompt",
                r["gen_tps"],
                r["prompt_tps"],
                "tokens/s",
            )
        )
    first, *others = models
    for model in others:
        rows.append(
            Row(
                "LLM tokens/s",
                f"{model} generation",
                f"{first} generation",
                results[model]["gen_tps"],
                results[first]["gen_tps"],
                "tokens/s",
            )
        )
    return rows


def envpool_rows(quick: bool) -> list[Row]:
    raw_steps, train_steps = (20_000, 20_000) if quick else (200_000, 200_000)
    raw = envpool_throughput.raw_env_fps("CartPole-v1", 32, raw_steps)
    trained = envpool_throughput.train_fps("CartPole-v1", train_steps)
    return [
        Row("envpool CartPole-v1", "SF APPO training", "raw envpool stepping", trained, raw, "env steps/s")
    ]


def iteration_rows(quick: bool) -> list[Row]:
    # One live loop iteration on the embedded default model (the quick run: the smoke config's 0.5B).
    config, steps = ("configs/run_smoke.yaml", 4_096) if quick else ("configs/run.yaml", 70_000)
    with tempfile.TemporaryDirectory() as tmp:
        cold, warmed, warm = iteration.measure("make_wood_pickaxe", steps, config, Path(tmp))
    print(iteration.table((cold, warmed, warm)))
    return [Row("loop iteration, critic asked (make_wood_pickaxe)", "warm prompt states",
                "cold prompt states", 3600 / warm.wall_s, 3600 / cold.wall_s, "iterations/h"),
            Row("loop iteration, critic asked (make_wood_pickaxe)", "after `rlgpt warm`",
                "cold prompt states", 3600 / warmed.wall_s, 3600 / cold.wall_s, "iterations/h")]


def learner_rows(quick: bool) -> list[Row]:
    # The learners on the Crafter benchmark: Crafter score and whole-run env steps/s at one step budget
    # (`bench.learners`; --quick: smoke-sized batches, seconds of training, 2 evaluation episodes).
    steps, episodes = (2_048, 2) if quick else (100_000, 20)
    with tempfile.TemporaryDirectory() as tmp:
        runs = {r.learner: r for r in learners.run_all(steps, episodes, 0, Path(tmp), quick)}
    print(learners.markdown(list(runs.values())))
    base = runs[learners.BASELINE]
    rows = []
    for name, run in runs.items():
        if name == learners.BASELINE:
            continue
        rows += [Row(f"Crafter score at {run.steps:,} steps ({run.train_s:.0f} s vs {base.train_s:.0f} s)",
                     name, base.learner, run.crafter_score, base.crafter_score, "Crafter score"),
                 Row("Crafter training, whole run", name, base.learner, run.steps_per_s, base.steps_per_s,
                     "env steps/s")]
    return rows


SECTIONS: dict[str, Callable[[bool], list[Row]]] = {
    "env": env_rows,
    "engine": engine_rows,
    "training": training_rows,
    "kernels": kernel_rows,
    "macro": macro_rows,
    "macro_training": macro_training_rows,
    "llm": llm_rows,
    "envpool": envpool_rows,
    "iteration": iteration_rows,
    "learners": learner_rows,
}
"""Section name (``--only``) -> function returning its rows (``quick`` picks the tiny budgets)."""
FULL_ONLY = ("envpool", "iteration", "learners")
"""Sections ``--quick`` leaves out unless ``--only`` names them (envpool: Sample Factory's start-up alone
would take much of the quick run's time, and ``tests/envs`` run Sample Factory on envpool anyway;
iteration: two live loop runs take minutes even on the smoke config; learners: three trainings, the
ResNet ones ~20x slower per step than the small encoder on a CPU)."""


def _num(x: float) -> str:
    return f"{x:,.0f}" if x >= 100 else f"{x:,.3g}"


def table(rows: list[Row]) -> str:
    """The Markdown table of ``rows``."""
    lines = [
        "| row | candidate | baseline | value | baseline value | ratio | unit | peak RSS (cand. / base) "
        "| machine |",
        "|---|---|---|---:|---:|---:|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r.name} | {r.candidate} | {r.baseline} | {_num(r.value)} | {_num(r.baseline_value)} | "
            f"{r.ratio:.2f} | {r.unit} | {r.peak_rss or '-'} | {r.machine} |"
        )
    return "\n".join(lines)


def sample_efficiency_table(runs: list[dict], threshold: float) -> str:
    """Markdown summary of `sample_efficiency`'s runs, one line per trainer."""
    lines = [
        f"| trainer | env steps/s: median [min - max] | ratio vs sync | steps to {threshold} per seed "
        "| steps to it: median | wall s to it: median | CPU ms per 1k steps: median | peak RSS MiB "
        "| load avg |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    sync_rate = statistics.median(r["steps_per_s"] for r in runs if r["trainer"] == "sync_ppo")
    for trainer in training.TRAINERS:
        mine = [r for r in runs if r["trainer"] == trainer]
        if not mine:
            continue
        rates = [r["steps_per_s"] for r in mine]
        reached = [r["reached"] for r in mine]
        reached_s = "; ".join("not reached" if x is None else f"{x:,}" for x in reached)
        median = statistics.median(float("inf") if x is None else x for x in reached)
        # Older JSON files have no wall_to_threshold; a run that did not get there counts as never.
        walls = [r.get("wall_to_threshold") for r in mine]
        wall = statistics.median(float("inf") if x is None else x for x in walls)
        loads = [r["load_before"] for r in mine] + [r["load_after"] for r in mine]
        cpu = [sum(r["cpu_ms_per_1k"].values()) for r in mine if r.get("cpu_ms_per_1k")]
        cpu_s = f"{statistics.median(cpu):,.0f}" if cpu else "-"
        lines.append(
            f"| {training.LABELS[trainer]} | {statistics.median(rates):,.0f} [{min(rates):,.0f} - "
            f"{max(rates):,.0f}] | {statistics.median(rates) / sync_rate:.2f} | {reached_s} | "
            f"{'not reached' if median == float('inf') else f'{median:,.0f}'} | "
            f"{'not reached' if wall == float('inf') else f'{wall:,.0f}'} | {cpu_s} | "
            f"{max(r['peak_rss_mb'] for r in mine):,.0f} | {min(loads):.1f}-{max(loads):.1f} |"
        )
    return "\n".join(lines)


def sample_efficiency(
    seeds: list[int],
    steps: int,
    threshold: float,
    json_out: str | None,
    trainers: tuple[str, ...] = training.TRAINERS,
    whole_run: bool = False,
) -> None:
    """The ``trainers``, seed by seed, each until rolling success ``threshold`` (or ``steps``); with
    ``whole_run`` each trains all ``steps``, so that the rate is over the whole run, solved part included
    (episodes shrink as a task gets solved and resets become the cost), and the threshold is only read."""
    stop = None if whole_run else threshold
    print(f"machine: {machine()}; {steps:,} steps per run " + (
        f"(whole runs; time to rolling success {threshold} read)" if whole_run
        else f"at most, stop at rolling success {threshold}"))
    runs: list[dict] = []
    for seed in seeds:
        for trainer in trainers:
            load = os.getloadavg()[0]
            run = training.run_trainer(trainer, steps, seed, stop_at_success=stop, threshold=threshold)
            runs.append(
                asdict(run) | {"load_before": round(load, 2), "load_after": round(os.getloadavg()[0], 2)}
            )
            print(json.dumps(runs[-1]), flush=True)
            if json_out:
                with open(json_out, "w") as f:
                    json.dump(
                        dict(machine=machine(), steps=steps, threshold=threshold, whole_run=whole_run,
                             runs=runs),
                        f,
                        indent=1,
                    )
    print()
    print(sample_efficiency_table(runs, threshold))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny budgets (< 2 min); timings are noise")
    parser.add_argument("--only", default=None, help=f"comma-separated sections of {', '.join(SECTIONS)}")
    parser.add_argument("--json", default=None, help="also write the rows (or runs) to this file")
    parser.add_argument(
        "--sample-efficiency",
        action="store_true",
        help="instead of the table: every trainer to rolling success 0.9 over --seeds",
    )
    parser.add_argument(
        "--whole-run",
        action="store_true",
        help="--sample-efficiency: train every run's whole --steps (throughput over the solved part too)",
    )
    parser.add_argument("--seeds", default="0,1,2", help="--sample-efficiency seeds")
    parser.add_argument("--steps", type=int, default=300_000, help="--sample-efficiency budget per run")
    parser.add_argument("--threshold", type=float, default=0.9, help="--sample-efficiency success target")
    parser.add_argument(
        "--trainers",
        default=",".join(training.TRAINERS),
        help=f"--sample-efficiency trainers, comma-separated (default: {', '.join(training.TRAINERS)})",
    )
    args = parser.parse_args(argv)
    if args.sample_efficiency:
        trainers = tuple(args.trainers.split(","))
        unknown = [t for t in trainers if t not in training.TRAINERS]
        if unknown or "sync_ppo" not in trainers:
            parser.error(
                f"--trainers: choose from {', '.join(training.TRAINERS)}, sync_ppo (the baseline) "
                f"included; got {args.trainers!r}"
            )
        seeds = [int(s) for s in args.seeds.split(",")]
        sample_efficiency(seeds, args.steps, args.threshold, args.json, trainers, args.whole_run)
        return 0
    names = (
        args.only.split(",") if args.only else [n for n in SECTIONS if not args.quick or n not in FULL_ONLY]
    )
    unknown = [n for n in names if n not in SECTIONS]
    if unknown:
        parser.error(f"unknown section(s) {unknown}; choose from {', '.join(SECTIONS)}")
    where = machine()
    print(f"machine: {where}; load average at start {os.getloadavg()[0]:.1f}", flush=True)
    rows: list[Row] = []
    start = time.perf_counter()
    for name in names:
        t0 = time.perf_counter()
        section = SECTIONS[name](args.quick)
        for row in section:
            row.machine = where
        rows += section
        print(f"[{name}: {time.perf_counter() - t0:.0f} s]", file=sys.stderr, flush=True)
    print(table(rows))
    print(
        f"\n{len(rows)} rows in {time.perf_counter() - start:.0f} s; load average at end "
        f"{os.getloadavg()[0]:.1f}"
    )
    if args.json:
        with open(args.json, "w") as f:
            json.dump([asdict(r) | {"ratio": r.ratio} for r in rows], f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
