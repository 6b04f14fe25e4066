"""The fast agent on generic sub-goals: time per call, compile rate first time / after repair, probe
success.

Usage: OMP_NUM_THREADS=1 python bench/llm_agents.py [--model qwen2.5-coder-1.5b] [--samples 3]
       [--repairs 2] [--probe-repairs 1] [--threads 2] [--seeds 5] [--out bench/llm_agents.json]
For each sub-goal (collect wood, place a table, collect a sapling; each stated generically, no solution
given) the agent samples `--samples` macros at temperature 0.7 with distinct seeds, sends compiler
diagnostics back up to `--repairs` times, and probes every macro that compiles in `--seeds` seeded Crafter
episodes (64 primitive steps per call; 150 for the table, which needs wood first); while the best misses
its goal on some seed, it goes back with its probes for up to `--probe-repairs` revisions. No response
cache: every call is a real model call. The summary's rates are over the samples; ``kept_goal_rate``
compares, per sub-goal, the best sample with the macro kept after revisions.
"""

from __future__ import annotations

import argparse
import json
import time

from rlgpt.agents.fast import FastAgent
from rlgpt.agents.replies import SubAction
from rlgpt.config import AgentConfig
from rlgpt.llm.client import LLMClient
from rlgpt.llm.embedded import EmbeddedBackend
from rlgpt.llm.model_store import DEFAULT_MODEL, MODELS, ensure_model

SUBGOALS = (
    (SubAction("get_wood", "walk to a tree, face it and collect one wood", "code", "wood", "recipe"), 64),
    (SubAction("put_table", "collect the wood a table needs, then place a table next to the player", "code",
               "place_table", "recipe"), 150),
    (SubAction("get_sapling", "collect one sapling from grass", "code", "sapling", "recipe"), 64),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default=DEFAULT_MODEL, choices=sorted(MODELS))
    parser.add_argument("--samples", type=int, default=3)
    parser.add_argument("--repairs", type=int, default=2)
    parser.add_argument("--probe-repairs", type=int, default=1)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--out", default="bench/llm_agents.json")
    parser.add_argument("--subgoals", nargs="*", default=[s.name for s, _ in SUBGOALS],
                        help="which sub-goals to run (default all)")
    args = parser.parse_args()
    backend = EmbeddedBackend(ensure_model(MODELS[args.model]), n_ctx=6144, n_threads=args.threads)
    client = LLMClient(backend)
    rows: list[dict] = []
    kept: dict[str, dict] = {}
    for sub, max_steps in SUBGOALS:
        if sub.name not in args.subgoals:
            continue
        config = AgentConfig(samples=args.samples, repair_retries=args.repairs,
                             probe_repair_retries=args.probe_repairs, code_max_tokens=512,
                             probe_seeds=tuple(range(args.seeds)), probe_max_steps=max_steps)
        start = time.perf_counter()
        task = sub.goal if "_" in sub.goal else f"collect_{sub.goal}"
        choice = FastAgent(client, config).write_macro(task, sub)
        elapsed = time.perf_counter() - start
        samples = [c for c in choice.candidates if c.revises is None]
        kept[sub.name] = {
            "best_sample": max(((c.probe.goal_rate or 0.0) for c in samples if c.probe), default=None),
            "kept": None if choice.best is None or choice.best.probe is None else choice.best.probe.goal_rate,
            "seconds": round(elapsed, 1)}
        for cand in choice.candidates:
            rows.append({
                "subgoal": sub.name, "sample": cand.index, "revises": cand.revises,
                "attempts": len(cand.code.attempts),
                "compiled_first_try": cand.code.first_try, "compiled": cand.code.code is not None,
                "goal_rate": None if cand.probe is None else cand.probe.goal_rate,
                "diagnostics": [str(d) for a in cand.code.attempts for d in a.diagnostics][:6],
                "code": cand.code.code,
            })
        with open(args.out, "w") as f:  # partial results survive an interrupted run
            json.dump({"candidates": rows}, f, indent=1)
        print(f"{sub.name}: {elapsed:.0f}s, " + "; ".join(
            f"sample {r['sample']}: attempts {r['attempts']}, compiled {r['compiled']}, goal {r['goal_rate']}"
            for r in rows if r["subgoal"] == sub.name), flush=True)
    usage = client.usage["fast"]
    revisions = [r for r in rows if r["revises"] is not None]
    rows = [r for r in rows if r["revises"] is None]
    n = len(rows)
    summary = {
        "model": args.model, "threads": args.threads, "samples_per_subgoal": args.samples,
        "repair_retries": args.repairs, "probe_seeds": args.seeds, "calls": usage.calls,
        "seconds_per_call": usage.latency_s / max(usage.calls, 1),
        "completion_tokens_per_call": usage.completion_tokens / max(usage.calls, 1),
        "compiled_first_try": sum(r["compiled_first_try"] for r in rows) / n,
        "compiled_after_repair": sum(r["compiled"] for r in rows) / n,
        "goal_on_all_seeds": sum(r["goal_rate"] == 1.0 for r in rows) / n,
        "goal_on_some_seed": sum((r["goal_rate"] or 0) > 0 for r in rows) / n,
        "probe_repair_retries": args.probe_repairs, "revisions": len(revisions),
        "kept_goal_rate": kept,
    }
    print(json.dumps(summary, indent=1))
    with open(args.out, "w") as f:
        json.dump({"summary": summary, "candidates": rows, "revisions": revisions}, f, indent=1)


if __name__ == "__main__":
    main()
