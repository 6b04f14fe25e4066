"""The RL-GPT loop against its baselines: `rlgpt run` for every (task, mode, seed) at one primitive-step
budget, one run after the other, then `rlgpt report` over all of them.

Usage (from the repository root; the 1.5B model needs the ``model`` extra, which ``make run`` installs):

    OMP_NUM_THREADS=1 .venv/bin/python bench/loop_matrix.py --out runs/matrix \\
        --tasks collect_wood,place_table,make_wood_pickaxe,make_stone_pickaxe --modes rlgpt,ppo,code

Resumable: a run whose ``summary.json`` exists is skipped and an unfinished one resumes (the same
`rlgpt run` command on the same run directory), so the script can be killed and started again. Each run's
stderr goes to ``OUT/<task>-<mode>-s<seed>.log`` with a wall-clock offset on every line (the loop's phase
lines then give each phase's wall time), and ``OUT/matrix.jsonl`` gets one record per finished run.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml

# The console script beside this interpreter (the venv's `rlgpt`).
RLGPT = str(Path(sys.executable).parent / "rlgpt")


def run_one(out: Path, task: str, mode: str, seed: int, steps: int, config: str, sets: list[str]) -> dict:
    """One `rlgpt run` (or its resumption) with a timestamped log; returns its summary plus wall time."""
    name = f"{task}-{mode}-s{seed}"
    run_dir = out / name
    summary = run_dir / "summary.json"
    if summary.is_file():
        return {"name": name, "skipped": True, **json.loads(summary.read_text())}
    cmd = [RLGPT, "run", "--config", config, "--task", task, "--mode", mode,
           "--seed", str(seed), "--steps", str(steps), "--run-dir", str(run_dir),
           "--set", f"skills_dir={run_dir / 'skills'}"]
    for s in sets:
        cmd += ["--set", s]
    start = time.monotonic()
    with open(out / f"{name}.log", "a") as log:
        log.write(f"# {' '.join(cmd)}\n")
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        assert proc.stdout is not None
        for line in proc.stdout:
            log.write(f"[{time.monotonic() - start:8.1f}s] {line}")
            log.flush()
        rc = proc.wait()
    wall = time.monotonic() - start
    record = {"name": name, "rc": rc, "wall_s": round(wall, 1)}
    if summary.is_file():
        record.update(json.loads(summary.read_text()))
    return record


LLM_PHASES = ("slow", "fast", "probe", "critic")
"""The phases of one LLM iteration (probes run inside the fast agent's step)."""


def llm_seconds(phases_jsonl: Path, iteration: int = 0) -> float:
    """Wall time of iteration `iteration`'s LLM phases, from a run's ``phases.jsonl`` (last run of each)."""
    records = [json.loads(line) for line in phases_jsonl.read_text().splitlines()]
    return sum(r["wall_s"] for r in records if r["iteration"] == iteration and r["phase"] in LLM_PHASES)


def replay_iteration(run_dir: Path, scratch: Path) -> dict:
    """Time iteration 0's LLM phases live (from the run) and replayed: a copy of the run without that
    iteration's slow/fast/critic step files re-runs them with ``llm.replay_only`` (every reply from the
    response cache; compile, repair and probes run again), its training read from ``training.json``."""
    live = llm_seconds(run_dir / "phases.jsonl")
    copy = scratch / run_dir.name
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(run_dir, copy, ignore=shutil.ignore_patterns("checkpoint_*", "wandb"))
    for name in ("slow.json", "fast.json", "critic.json", "summary.json"):
        (copy / "iter_000" / name).unlink(missing_ok=True)
    (copy / "summary.json").unlink(missing_ok=True)
    (copy / "phases.jsonl").unlink()
    cfg = yaml.safe_load((copy / "run.yaml").read_text())
    cmd = [RLGPT, "run", "--config", str(copy / "run.yaml"), "--run-dir", str(copy),
           "--set", "llm.replay_only=true", "--set", f"llm.cache_dir={copy / 'llm_cache'}"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    replayed = llm_seconds(copy / "phases.jsonl") if (copy / "phases.jsonl").is_file() else None
    return {"run": run_dir.name, "task": cfg["task"], "live_llm_s": round(live, 1),
            "replayed_llm_s": None if replayed is None else round(replayed, 1), "rc": proc.returncode,
            "error": proc.stderr.strip().splitlines()[-1] if proc.returncode else ""}


def _goal_rate(candidate: dict | None) -> float:
    return ((candidate or {}).get("probe") or {}).get("goal_rate") or 0.0


def macro_shares(run_dirs: list[Path]) -> dict:
    """Fast-agent macro candidates over every iteration of `run_dirs` (``iter_*/fast.json``, also inside
    planner subtasks): how many compiled at the first try, after repair, and reached their sub-goal in
    probes (on at least one / on every probed call); then the revisions asked for with a candidate's
    probes (``revises``), how many probed better than the candidate they revised and how many were kept.
    Replayed replies count once per iteration asked."""
    total = first = repaired = some = every = revisions = better = kept = 0
    for run_dir in run_dirs:
        for fast in sorted(run_dir.glob("**/iter_*/fast.json")):
            for choice in json.loads(fast.read_text())["macros"]:
                by_index = {c.get("index", i): c for i, c in enumerate(choice["candidates"])}
                for cand in choice["candidates"]:
                    if cand.get("revises") is not None:
                        revisions += 1
                        better += _goal_rate(cand) > _goal_rate(by_index.get(cand["revises"]))
                        kept += choice.get("best") is not None and choice["best"] == cand.get("index")
                        continue
                    total += 1
                    if cand["code"] is None:
                        continue
                    first += bool(cand["first_try"])
                    repaired += not cand["first_try"]
                    rate = (cand["probe"] or {}).get("goal_rate") or 0.0
                    some += rate > 0
                    every += rate == 1.0
    return {"candidates": total, "compiled_first_try": first, "compiled_after_repair": first + repaired,
            "goal_in_some_probe": some, "goal_in_every_probe": every, "revisions": revisions,
            "revisions_better": better, "revisions_kept": kept}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default="runs/matrix", help="directory for the run directories and logs")
    p.add_argument("--tasks", default="collect_wood,place_table,make_wood_pickaxe,make_stone_pickaxe")
    p.add_argument("--modes", default="rlgpt,ppo,code")
    p.add_argument("--seeds", default="0", help="comma-separated seeds")
    p.add_argument("--steps", type=int, default=1_000_000, help="primitive-step budget per run")
    p.add_argument("--config", default="configs/run.yaml")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="passed to every run")
    p.add_argument("--replay", nargs="+", metavar="RUN_DIR",
                   help="instead of running: time iteration 0's LLM phases live vs replayed from the cache")
    p.add_argument("--shares", nargs="+", metavar="RUN_DIR",
                   help="instead of running: compile / repair / probe shares of the fast agent's macros")
    args = p.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.shares:
        print(json.dumps(macro_shares([Path(d) for d in args.shares])))
        return 0
    if args.replay:
        for run_dir in args.replay:
            print(json.dumps(replay_iteration(Path(run_dir), out / "replays")), flush=True)
        return 0
    dirs = []
    for seed in [int(s) for s in args.seeds.split(",")]:
        for task in args.tasks.split(","):
            for mode in args.modes.split(","):
                record = run_one(out, task, mode, seed, args.steps, args.config, args.set)
                dirs.append(out / record["name"])
                if not record.get("skipped"):
                    with open(out / "matrix.jsonl", "a") as f:
                        f.write(json.dumps(record) + "\n")
                print(f"{record['name']}: success {record.get('success_rate')} "
                      f"steps {record.get('steps_used')} wall {record.get('wall_s')} s", flush=True)
    done = [str(d) for d in dirs if (d / "summary.json").is_file()]
    if done:
        subprocess.run([RLGPT, "report", "--out", str(out / "report"), *done],
                       check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
