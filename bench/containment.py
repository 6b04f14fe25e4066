"""Containment (issue 13): what running generated code in a contained child costs, and how each path ends
a hostile program.

``OMP_NUM_THREADS=1 python -m bench.containment [--repeats N]`` prints

- the overhead of `run_contained` itself (fork, limits, result back) on a trivial function;
- a real macro's probe (3 seeds, `game.collect("wood")`, up to 200 steps) and a reward's 20-step dry run,
  in process vs contained (median wall seconds over ``--repeats`` runs, and the ratio);
- for one hostile program (``a.extend(enumerate(a))`` in a loop: a single C call per iteration that grows
  the list it iterates) in each path: the outcome and the seconds until it, plus the caller's peak RSS
  growth. Paths: env worker (`MacroActionWrapper.step`, in process as in a Sample Factory worker),
  probe (`FastAgent.probe`), reward dry run (`FastAgent.check_reward`), code mode (`play_macro_policy`,
  contained episodes), evaluation (the episode runner `play_episodes` on the macro's action, in a child
  process under the job child's memory backstop `cap_evaluation_memory` and nothing else), and plain
  Python past the sandbox under the OS backstops (`run_contained`).
"""

from __future__ import annotations

import argparse
import dataclasses
import resource
import statistics
import time
from collections.abc import Callable
from typing import Any

from rlgpt.agents.fast import FastAgent, dry_run_reward
from rlgpt.config import AgentConfig, RunConfig
from rlgpt.envs.crafter import CrafterEnv
from rlgpt.macro.compiler import MacroSource, compile_macro
from rlgpt.macro.contain import ContainLimits, run_contained
from rlgpt.macro.diagnostics import MacroCompileError
from rlgpt.macro.probe import probe_macro
from rlgpt.macro.reward import compile_reward
from rlgpt.macro.runtime import MacroActionWrapper
from rlgpt.rl.evaluate import play_episode
from rlgpt.rl.worker_memory import set_memory_limit
from rlgpt.run.baselines import play_macro_policy

CONFIG = AgentConfig(probe_seeds=(0, 1, 2), probe_max_steps=200, reward_dry_run_steps=20)
COLLECT = 'def collect(game):\n    ok = yield from game.collect("wood")\n'
REWARD = 'def reward(game, prev):\n    return 0.5 * (game.inventory["wood"] - prev.inventory["wood"])\n'
GROW = "a = [0]\n    while True:\n        a.extend(enumerate(a))"


def timed(fn: Callable[[], Any], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _grow_raw() -> int:
    a = [0]
    a.extend(enumerate(a))
    return len(a)


class _AlwaysAction:
    """An episode policy that always takes one action (the evaluated policy's choice of the macro)."""

    def __init__(self, action: int) -> None:
        self.action = action

    def reset(self, slot: int) -> None:
        pass

    def act(self, slots: Any, observations: Any) -> list[int]:
        return [self.action] * len(slots)


def _evaluate_macro(source: str, headroom_mb: int) -> str:
    """What the job child does when it evaluates a policy that picks the macro: the memory backstop, then
    the shared episode runner over a `MacroActionWrapper` env (a 20-step episode)."""
    set_memory_limit(headroom_mb)  # = cap_evaluation_memory with macros.memory_limit_mb = headroom_mb
    env = MacroActionWrapper(CrafterEnv(length=20), [MacroSource("grow", source)], seed=0)
    episode = play_episode(env, _AlwaysAction(env.n_primitive), seed=0)
    return f"episode ok, {int(episode.stats.get('macro/grow/fail_memory', 0))} of " \
           f"{int(episode.stats.get('macro/grow/calls', 0))} calls memory"


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    fast = FastAgent(None, CONFIG)  # type: ignore[arg-type]
    env = fast.env
    macro = compile_macro(MacroSource("collect", COLLECT))
    reward = compile_reward(REWARD)

    print("## overhead (median wall seconds)")
    trivial = timed(lambda: run_contained(len, "abc"), args.repeats * 4)
    print(f"run_contained(len): {trivial * 1000:.1f} ms per call")
    rows = [
        ("probe", lambda: probe_macro(macro, seeds=CONFIG.probe_seeds, max_steps=CONFIG.probe_max_steps,
                                      goal="wood", env=env),
         lambda: fast.probe(macro, "wood")),
        ("reward dry run", lambda: dry_run_reward(env, reward, CONFIG.reward_dry_run_steps, 0),
         lambda: fast.check_reward(REWARD)),
    ]
    for name, direct, contained in rows:
        a, b = timed(direct, args.repeats), timed(contained, args.repeats)
        print(f"{name}: in process {a:.3f} s, contained {b:.3f} s, ratio {b / a:.2f}")

    print("\n## a hostile program by path (a.extend(enumerate(a)) in a loop)")
    before = peak_mb()
    source = f"def grow(game):\n    {GROW}\n    yield 'noop'\n"
    paths: list[tuple[str, Callable[[], str]]] = []

    def worker() -> str:
        wrapper = MacroActionWrapper(CrafterEnv(length=None), [MacroSource("grow", source)], seed=0)
        wrapper.reset(seed=0)
        return wrapper.step(wrapper.n_primitive)[4]["macro"]["outcome"]

    def probe() -> str:
        return ",".join(sorted(fast.probe(compile_macro(MacroSource("grow", source)), "wood").outcomes))

    def reward_path() -> str:
        try:
            fast.check_reward(f"def reward(game, prev):\n    {GROW}\n    return 0.0\n")
        except MacroCompileError as exc:
            return exc.diagnostics[0].kind
        return "passed"

    def code_mode() -> str:
        cfg = RunConfig(task="collect_wood", eval_episodes=1)
        cfg = dataclasses.replace(cfg, train=dataclasses.replace(
            cfg.train, env=dataclasses.replace(cfg.train.env, episode_length=20)))
        out = play_macro_policy(cfg, source.replace("grow", "policy"))
        stats = out["report"]["macro_stats"]["policy"]
        return f"episode ok, {int(stats['fail_memory'])} of {int(stats['calls'])} calls memory"

    def evaluation() -> str:
        # The job child's own limits only: run_contained's are off here.
        out = run_contained(_evaluate_macro, source, 1024, limits=ContainLimits(memory_mb=0, cpu_seconds=0))
        return out.value if out.ok else f"child failed: {out.diagnostic}"

    def raw() -> str:
        out = run_contained(_grow_raw, limits=ContainLimits(memory_mb=1024))
        return out.diagnostic.kind if out.diagnostic else "returned"

    paths = [("env worker (sandbox)", worker), ("probe (contained)", probe), ("reward dry run (contained)",
             reward_path), ("code mode (contained episodes)", code_mode),
             ("evaluation (job child: sandbox + data-segment cap)", evaluation),
             ("plain Python past the sandbox (run_contained, 1 GiB cap)", raw)]
    for name, fn in paths:
        start = time.perf_counter()
        outcome = fn()
        print(f"{name}: {outcome} in {time.perf_counter() - start:.2f} s")
    print(f"caller's peak RSS growth over the hostile runs: {peak_mb() - before:.1f} MiB")


if __name__ == "__main__":
    main()
