"""One RL-GPT loop iteration's wall time by phase, live (no response cache), with the model's prompt states
cold and then warm.

    OMP_NUM_THREADS=1 python -m bench.iteration [--task make_wood_pickaxe] [--steps 70000]
        [--config configs/run.yaml] [--out DIR] [--set KEY=VALUE ...]

Runs ``rlgpt run`` for one iteration (``max_outer=1``, ``max_inner=1``) with the success threshold out of
reach (``success_threshold=2``), so the critic is always asked: slow agent, fast agent (macros, probes,
reward, setup), training with its validation evaluation, critic, then the budget marks. Three times, each in
a fresh run directory (every LLM call a real model call):

- ``cold``: an empty prompt-state folder (``RLGPT_PROMPT_STATE_DIR``): every prompt is computed, as on a
  machine that never ran the loop;
- ``warmed``: the cold run's seed with another empty folder that ``rlgpt warm --config CONFIG`` filled first
  (every role's system message; timed apart, as ``warm_s``): the first run on a machine after `make run`'s
  warm step, computing only its own user turns;
- ``warm``: the next seed (other LLM samples, the same prompts) with the folder the cold run left: what a
  later run on this machine finds (`rlgpt.llm.embedded.prefix_state_disk_cache`).

Each run's phases come from its ``phases.jsonl`` (`rlgpt.tracking.LoopProgress`), its token counts from
``summary.json``'s ``llm`` metrics; the whole run's wall time includes the model's start. Timings are
printed, never asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

PHASES = ("slow", "fast", "probe", "train", "critic", "marks")
"""The loop's phases in the order an iteration runs them (`rlgpt.run.loop.Loop.run_loop`)."""
ONE_ITERATION = ("max_outer=1", "max_inner=1", "success_threshold=2")
"""One iteration whose critic is always asked (no success rate reaches 2)."""


@dataclass
class IterationRun:
    """One measured ``rlgpt run``."""

    label: str
    """``cold``, ``warmed`` or ``warm``."""
    wall_s: float
    """The whole command's wall time (model start, every phase, the summary)."""
    phases: dict[str, float] = field(default_factory=dict)
    """Wall seconds per phase, summed over the phase's entries."""
    llm: dict[str, float] = field(default_factory=dict)
    """The run's ``llm/*`` metrics (tokens computed and served from kept state, per-role latency)."""
    success_rate: float = 0.0
    """The run's test success."""
    warm_s: float = 0.0
    """``rlgpt warm``'s wall time before the run (``warmed`` only)."""


def phase_seconds(phases_jsonl: Path) -> dict[str, float]:
    """Wall seconds per phase of a run's ``phases.jsonl`` (a phase recorded several times is summed)."""
    totals: dict[str, float] = defaultdict(float)
    for line in phases_jsonl.read_text().splitlines():
        if line.strip():
            entry = json.loads(line)
            totals[entry["phase"]] += float(entry["wall_s"])
    return dict(totals)


def command(task: str, steps: int, config: str, run_dir: Path, seed: int, overrides: list[str]) -> list[str]:
    """The ``rlgpt run`` argv of one measured iteration."""
    argv = [sys.executable, "-m", "rlgpt.cli", "run", "--task", task, "--config", config,
            "--steps", str(steps), "--seed", str(seed), "--run-dir", str(run_dir)]
    for override in (*ONE_ITERATION, *overrides):
        argv += ["--set", override]
    return argv


def run_iteration(label: str, argv: list[str], state_dir: Path, run_dir: Path) -> IterationRun:
    """Run `argv` with prompt states in `state_dir`; its phases and LLM metrics from `run_dir`."""
    env = {**os.environ, "RLGPT_PROMPT_STATE_DIR": str(state_dir)}
    began = time.perf_counter()
    subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - began
    from rlgpt import layout
    from rlgpt.run.records import RunSummary

    summary = RunSummary.read(run_dir / layout.SUMMARY_JSON)
    return IterationRun(label, wall, phase_seconds(run_dir / "phases.jsonl"), dict(summary.llm or {}),
                        float(summary.success_rate))


def warm_command(config: str, overrides: list[str]) -> list[str]:
    """The ``rlgpt warm`` argv computing the prompt states the measured runs' config starts from."""
    argv = [sys.executable, "-m", "rlgpt.cli", "warm", "--config", config]
    for override in overrides:
        argv += ["--set", override]
    return argv


def measure(task: str, steps: int, config: str, out: Path, overrides: list[str] = (),
            seed: int = 0) -> tuple[IterationRun, IterationRun, IterationRun]:
    """The cold, warmed and warm runs of one iteration on `task` (run directories under `out`)."""
    def one(label: str, run_seed: int, states: Path) -> IterationRun:
        run_dir = out / f"{task}-{label}"
        return run_iteration(label, command(task, steps, config, run_dir, run_seed, list(overrides)), states,
                             run_dir)

    cold = one("cold", seed, out / "prompt_states")
    warmed_states = out / "prompt_states_warmed"
    began = time.perf_counter()
    subprocess.run(warm_command(config, list(overrides)), check=True, stdout=subprocess.DEVNULL,
                   env={**os.environ, "RLGPT_PROMPT_STATE_DIR": str(warmed_states)})
    warm_s = time.perf_counter() - began
    warmed = one("warmed", seed, warmed_states)
    warmed.warm_s = warm_s
    warm = one("warm", seed + 1, out / "prompt_states")
    return cold, warmed, warm


def table(runs: tuple[IterationRun, ...]) -> str:
    """Markdown: one row per run, wall seconds per phase, the whole run and the prompt tokens."""
    lines = ["| run | " + " | ".join(PHASES) + " | whole run s | prompt tokens computed / from kept state "
             "| rlgpt warm before, s |", "|---|" + "---:|" * (len(PHASES) + 3)]
    for r in runs:
        cells = [f"{r.phases.get(p, 0.0):.1f}" for p in PHASES]
        tokens = f"{r.llm.get('llm/prefill_tokens', 0):,.0f} / {r.llm.get('llm/cached_tokens', 0):,.0f}"
        before = f"{r.warm_s:.1f}" if r.warm_s else "-"
        lines.append(f"| {r.label} | " + " | ".join(cells) + f" | {r.wall_s:.1f} | {tokens} | {before} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--task", default="make_wood_pickaxe")
    parser.add_argument("--steps", type=int, default=70_000,
                        help="the run's budget: run.yaml's evaluation bound (20 x 1,000) + 50k to train")
    parser.add_argument("--config", default="configs/run.yaml")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None, help="where the run directories go (default: a temporary one)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(args.out or tmp)
        runs = measure(args.task, args.steps, args.config, out, args.overrides, args.seed)
    print(table(runs))


if __name__ == "__main__":
    main()
