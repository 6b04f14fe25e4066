"""What an iteration's kept macros carry without RL: each played once, in the decomposition's order, on
the test split's worlds of the run's seed.

    OMP_NUM_THREADS=1 python -m bench.macro_chain RUN_DIR/iter_000 [--episodes 30] [--max-steps 200]

Link k's macro is probed after the macros before it (`rlgpt.macro.probe.probe_macro`'s ``setup``: each
played once, up to ``--max-steps`` steps) with its sub-action's goal, on ``--episodes`` worlds of the
run's test split (`rlgpt.rl.evaluate.eval_seeds`). The table gives, per link, the share of worlds where it
reached its goal with the player alive, and last the share where the task's own achievement was unlocked
by the whole chain. Set beside the iteration's RL success (`training.json`, validation), it says whether
a task lacks working macros or a policy that calls them in order. Every world plays without a time limit;
the chain's steps are printed, not counted against any run's budget.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path

import yaml
from crafter import constants

from rlgpt import layout
from rlgpt.envs.crafter import CrafterEnv
from rlgpt.macro.compiler import compile_macro
from rlgpt.macro.files import load_macro_file
from rlgpt.macro.probe import probe_macro
from rlgpt.rl.evaluate import eval_seeds


@dataclass(frozen=True)
class LinkRate:
    """One link of the chain: its macro, goal, and how often it reached it after the links before it."""

    macro: str
    goal: str
    reached: int
    """Worlds where the link reached its goal with the player alive (`ProbeCall.achieved`)."""
    worlds: int
    mean_steps: float
    """Mean steps of the link's calls (worlds where an earlier link killed the player have none)."""


def chain_rates(iteration: Path, episodes: int = 30, max_steps: int = 200) -> tuple[list[LinkRate], int, int]:
    """Per-link rates of `iteration`'s kept macros played in the decomposition's order, then the number of
    worlds where the last link's call unlocked the run's task achievement, and the worlds played."""
    run = yaml.safe_load((iteration.parent / layout.RUN_YAML).read_text())
    subactions = json.loads((iteration / layout.SLOW_JSON).read_text())["decomposition"]["subactions"]
    kept = {m.name: m for m in load_macro_file(iteration / layout.MACROS_YAML)}
    chain = [(compile_macro(kept[s["name"]]), s.get("goal") or None) for s in subactions if s["name"] in kept]
    if not chain:
        raise SystemExit(f"{iteration}: no kept macro of the decomposition")
    seeds = tuple(eval_seeds("test", int(run["seed"]), episodes))
    env = CrafterEnv(length=None)
    rates, last = [], None
    for k, (macro, goal) in enumerate(chain):
        last = probe_macro(macro, seeds=seeds, goal=goal, env=env, max_steps=max_steps,
                           setup=tuple(m for m, _ in chain[:k]))
        rates.append(LinkRate(macro.name, goal or "-", last.achieved_calls, len(seeds),
                              last.mean_steps))
    task = run["task"]
    done = sum(task in c.unlocked for c in last.calls) if task in constants.achievements else 0
    return rates, done, len(seeds)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("iteration", type=Path, help="an iteration directory of a run (RUN_DIR/iter_000)")
    parser.add_argument("--episodes", type=int, default=30, help="test-split worlds to play (default 30)")
    parser.add_argument("--max-steps", type=int, default=200, help="step bound of each macro call")
    args = parser.parse_args(argv)
    rates, done, worlds = chain_rates(args.iteration, args.episodes, args.max_steps)
    print("| link | macro | goal | reached | mean steps |\n|---|---|---|---|---|")
    for k, r in enumerate(rates):
        print(f"| {k} | {r.macro} | {r.goal} | {r.reached}/{r.worlds} | {r.mean_steps:.0f} |")
    print(f"\nthe whole chain unlocked the task's achievement in {done}/{worlds} worlds")
    training = args.iteration / layout.TRAINING_JSON
    if training.is_file():
        rl = json.loads(training.read_text()).get("success_rate")
        print(f"the iteration's policy over these macros (RL, validation): {rl}")


if __name__ == "__main__":
    main()
