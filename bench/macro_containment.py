"""Containment of the hostile macro corpus: counts per outcome and the wall clock of the worst macro step.

Run: ``OMP_NUM_THREADS=1 python bench/macro_containment.py [--repeat N]``. Compiles every program of
tests/macro/hostile_corpus.py; runs each one that compiles on a real Crafter env (`run_macro`, in this
process) and times each resume of the macro (one ``next_action``: the macro's own code between two
primitive steps, what `MacroLimits.max_seconds` bounds). Prints the counts, the slowest programs and the
worst step against its program's ``max_seconds``.
"""

from __future__ import annotations

import argparse
import importlib.util
import random
import time
from pathlib import Path

from rlgpt.envs.crafter import CrafterEnv
from rlgpt.macro import runtime
from rlgpt.macro.api import GameAPI
from rlgpt.macro.compiler import MacroSource, compile_macro
from rlgpt.macro.diagnostics import MacroCompileError
from rlgpt.macro.sandbox import MacroLimits

CORPUS = Path(__file__).resolve().parents[1] / "tests" / "macro" / "hostile_corpus.py"


def load_corpus():
    """The corpus module (it lives with the tests)."""
    spec = importlib.util.spec_from_file_location("hostile_corpus", CORPUS)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class TimedSession(runtime._Session):
    """`_Session` that records the wall clock of every resume of the macro."""

    steps: list[float] = []

    def next_action(self) -> int | None:
        start = time.perf_counter()
        try:
            return super().next_action()
        finally:
            TimedSession.steps.append(time.perf_counter() - start)


def main() -> None:
    """Run the corpus and print counts and timings."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1, help="runs per program (worst step over all)")
    args = parser.parse_args()
    corpus = load_corpus()
    env = CrafterEnv(seed=0)
    rejected = sum(1 for _, source, _ in corpus.COMPILE_CORPUS if _rejected(source))
    runtime._Session = TimedSession  # type: ignore[misc]
    rows, outcomes = [], {}
    for name, source, kind, limits in corpus.RUNTIME_CORPUS:
        macro = compile_macro(MacroSource("m", source), limits)
        worst = 0.0
        for _ in range(args.repeat):
            env.reset(seed=0)
            TimedSession.steps = []
            game = GameAPI(runtime.find_crafter(env), random.Random(0))
            result = runtime.run_macro(env, macro, game, gamma=0.99, max_steps=16)
            worst = max(worst, *TimedSession.steps)
            outcomes[result.outcome] = outcomes.get(result.outcome, 0) + 1
            assert result.outcome == kind, (name, result.outcome, kind)
        rows.append((worst, name, kind, (limits or MacroLimits()).max_seconds))
    total = len(corpus.COMPILE_CORPUS) + len(corpus.RUNTIME_CORPUS)
    print(f"corpus: {total} programs; rejected at compile time: {rejected}/{len(corpus.COMPILE_CORPUS)}; ")
    print(
        f"contained at run time: {len(corpus.RUNTIME_CORPUS)} (outcomes over {args.repeat} runs: {outcomes})"
    )
    rows.sort(reverse=True)
    print("slowest macro steps (one resume of the macro's code):")
    for worst, name, kind, limit in rows[:8]:
        print(f"  {worst * 1000:8.1f} ms  {name:28s} {kind:10s} max_seconds={limit}")
    worst_over = max(worst - limit for worst, _, _, limit in rows)
    print(f"worst step past its max_seconds: {worst_over * 1000:.1f} ms")


def _rejected(source: str) -> bool:
    try:
        compile_macro(MacroSource("m", source))
    except MacroCompileError:
        return True
    return False


if __name__ == "__main__":
    main()
