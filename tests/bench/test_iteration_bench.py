"""bench.iteration: what one measured loop iteration runs and how its phases are read (the live runs
themselves are minutes of LLM time: `python -m bench --only iteration`, recorded in bench/RESULTS.md)."""

from __future__ import annotations

import json
from pathlib import Path

from bench import iteration
from rlgpt.cli import build_parser, run_config


def test_the_measured_run_is_one_iteration_whose_critic_is_always_asked(tmp_path: Path) -> None:
    argv = iteration.command("make_wood_pickaxe", 70_000, "configs/run.yaml", tmp_path / "run", 1, [])
    cfg = run_config(build_parser().parse_args(argv[3:]))  # after `python -m rlgpt.cli`
    assert (cfg.max_outer, cfg.max_inner) == (1, 1) and cfg.success_threshold > 1  # no evaluation reaches it
    assert cfg.task == "make_wood_pickaxe" and cfg.steps == 70_000 and cfg.seed == 1
    assert cfg.run_dir == str(tmp_path / "run")


def test_phases_are_summed_per_phase_and_tabled(tmp_path: Path) -> None:
    lines = [{"task": "t", "iteration": 0, "phase": p, "wall_s": s}
             for p, s in (("slow", 10.0), ("fast", 3.0), ("probe", 0.5), ("fast", 4.0), ("train", 20.0),
                          ("critic", 6.0))]
    (tmp_path / "phases.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    phases = iteration.phase_seconds(tmp_path / "phases.jsonl")
    assert phases == {"slow": 10.0, "fast": 7.0, "probe": 0.5, "train": 20.0, "critic": 6.0}
    llm = {"llm/prefill_tokens": 4200, "llm/cached_tokens": 9000}
    run = iteration.IterationRun("cold", 50.0, phases, llm)
    row = iteration.table((run,)).splitlines()[-1]
    assert row == "| cold | 10.0 | 7.0 | 0.5 | 20.0 | 6.0 | 0.0 | 50.0 | 4,200 / 9,000 | - |"
    run.warm_s = 61.25
    assert iteration.table((run,)).splitlines()[-1].endswith("| 50.0 | 4,200 / 9,000 | 61.2 |")


def test_the_warm_step_reads_the_measured_runs_config(tmp_path: Path) -> None:
    from rlgpt.config import load_run_config

    argv = iteration.warm_command("configs/run.yaml", ["agents.examples=false"])
    args = build_parser().parse_args(argv[3:])
    assert args.func.__name__ == "_warm"
    assert not load_run_config(args.config, args.set).agents.examples
