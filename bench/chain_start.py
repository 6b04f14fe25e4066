"""What a chain link's slow agent plans when it is told where the link starts, against a fresh world
(issue 16: a planner link starts where the chain before it left off).

    OMP_NUM_THREADS=1 python -m bench.chain_start [--task collect_iron] [--links 3 5] \
        [--model qwen2.5-coder-1.5b] [--seed 0]

For each chosen link k of the task's prerequisite chain, the links before it are played on real worlds by
the trusted goal macros (`rlgpt.macro.control`), and the states where all reached their goals summarise
the link's start (`rlgpt.macro.prefix.StartSummary`). The slow agent then decomposes the link's task twice
with the real model: as a fresh-world task, and told that start. Every coded sub-action costs the fast agent
a macro, its repairs and its probes, so the sub-action counts are what a link's fast phase scales with.
"""

from __future__ import annotations

import argparse
import time

from rlgpt.agents.envdoc import prerequisite_chain
from rlgpt.agents.slow import SlowAgent
from rlgpt.config import AgentConfig
from rlgpt.envs.tasks import make_task_env
from rlgpt.llm.config import LLMConfig, build_client
from rlgpt.macro.compiler import MacroSource, compile_macro
from rlgpt.macro.control import goal_macro_code
from rlgpt.macro.prefix import PrefixLink, PrefixStart, StartSummary


def start_of(chain: tuple[str, ...], k: int, worlds: int, seed: int) -> StartSummary:
    """The summary of the states after `chain[:k]`, played by the goal macros on `worlds` worlds."""
    links = [PrefixLink(compile_macro(MacroSource(f"link_{i}", goal_macro_code(f"link_{i}", goal))), goal)
             for i, goal in enumerate(chain[:k])]
    env = PrefixStart(make_task_env(chain[k]), links, max_steps=1000, pool_size=worlds, attempts=5)
    for i in range(worlds):
        env.reset(seed=seed * 1000 + i)
    if not env.pool:
        raise RuntimeError(f"the goal macros reached {chain[k - 1]} on none of the worlds")
    return StartSummary.of(env.pool)


def decompose(agent: SlowAgent, task: str, start: StartSummary | None) -> dict:
    agent.start = start
    t0 = time.perf_counter()
    result = agent.decompose_or_fallback(task)
    subs = result.decomposition.subactions
    return {"seconds": time.perf_counter() - t0, "subactions": len(subs),
            "coded": sum(s.how == "code" for s in subs), "goals": [s.goal for s in subs],
            "fallback": result.fallback, "repairs": len(result.repairs)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", default="collect_iron")
    parser.add_argument("--links", type=int, nargs="+", default=None,
                        help="chain indices to measure (default: every link after the first)")
    parser.add_argument("--model", default="qwen2.5-coder-1.5b")
    parser.add_argument("--worlds", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    chain = prerequisite_chain([args.task])
    client = build_client(LLMConfig(model=args.model))
    agent = SlowAgent(client, AgentConfig(seed=args.seed))
    print(f"{args.task}: chain {' -> '.join(chain)}; model {args.model}")
    print("| link | start (unlocked; items) | fresh: sub-actions (coded) | told: sub-actions (coded) | "
          "goals told | seconds fresh / told |")
    print("|---|---|---:|---:|---|---:|")
    for k in args.links or range(1, len(chain)):
        start = start_of(chain, k, args.worlds, args.seed)
        fresh, told = decompose(agent, chain[k], None), decompose(agent, chain[k], start)
        items = ", ".join(f"{n} {i}" for i, n in start.inventory) or "-"
        print(f"| {chain[k]} | {', '.join(start.unlocked)}; {items} "
              f"| {fresh['subactions']} ({fresh['coded']}) | {told['subactions']} ({told['coded']}) "
              f"| {', '.join(told['goals'])} "
              f"| {fresh['seconds']:.0f} / {told['seconds']:.0f} |", flush=True)


if __name__ == "__main__":
    main()
