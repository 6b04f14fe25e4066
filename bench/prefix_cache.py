"""One fast-agent-shaped call cold vs warm (same role prefix: crafter's rules as the system prompt) on the
embedded model with the prompt-state cache (issue 17), in one process and in a new process reading the
states from disk. Prints prompt tokens, tokens served from kept state and seconds per call.

    OMP_NUM_THREADS=1 python -m bench.prefix_cache [--model qwen2.5-coder-0.5b] [--threads 2]
"""

from __future__ import annotations

import argparse
import tempfile
import time

from rlgpt.agents.common import documentation
from rlgpt.llm.embedded import EmbeddedBackend
from rlgpt.llm.model_store import resolve_model_path
from rlgpt.llm.types import SamplingParams


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default="qwen2.5-coder-0.5b", help="a known model name or a .gguf path")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--cache-mb", type=int, default=1024)
    args = parser.parse_args()
    rules = documentation()["env_rules"]
    folder = tempfile.mkdtemp(prefix="rlgpt-prefix-")
    one = SamplingParams(max_tokens=1)  # prefill is what the cache saves; decoding is the same either way

    def backend() -> EmbeddedBackend:
        return EmbeddedBackend(resolve_model_path(args.model), n_ctx=4096, n_threads=args.threads,
                               prompt_cache_mb=args.cache_mb, prompt_cache_dir=folder)

    def call(b: EmbeddedBackend, label: str, question: str) -> float:
        start = time.perf_counter()
        messages = [{"role": "system", "content": rules}, {"role": "user", "content": question}]
        c = b.complete(messages, None, one)
        elapsed = time.perf_counter() - start
        print(f"{label}: prompt {c.prompt_tokens} tokens, {c.cached_tokens} from kept state, {elapsed:.2f} s")
        return elapsed

    b = backend()
    cold = call(b, "cold", "Write a macro that collects wood.")
    warm = call(b, "warm (same process)", "Write a macro that collects stone.")
    b.close()
    fresh = call(backend(), "warm (new process, states on disk)", "Write a macro that collects coal.")
    print(f"cold/warm {cold / warm:.1f}x; cold/new-process-warm {cold / fresh:.1f}x")


if __name__ == "__main__":
    main()
