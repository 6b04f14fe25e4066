"""Wall time of N code candidates decoded together against one, on the embedded model (llama.cpp, CPU).

The fast agent's test-time search samples `agents.samples` candidates per round from one prompt
(`rlgpt.agents.fast.FastAgent.write_macro`); on the embedded model they are decoded together
(`rlgpt.llm.batched.BatchedSampler`: one llama_batch per step, one sequence per candidate, the prompt's KV
cells shared), in process (`--backend embedded`: `EmbeddedBackend.complete_many`) or in the isolated child
server that real runs use by default (`--backend isolated`: `IsolatedBackend.complete_many`, one request to
the server's batched endpoint). This times, on the same real fast-agent prompt, one candidate through
`complete` (the one-sequence path) against N through `complete_many`, back to back and interleaved (the box
is shared: each pair sees about the same load), after a warm-up that leaves the prompt in the model's
context (so both time decoding, not the prompt). CPU seconds are those of the process that decodes (this
one, or the server).

    OMP_NUM_THREADS=1 nice -n 10 python -m bench.llm_candidates [--model qwen2.5-coder-1.5b] [--n 4]
        [--pairs 3] [--max-tokens 256] [--threads 2] [--backend embedded|isolated]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable

from rlgpt.agents.fast import FastAgent
from rlgpt.agents.replies import SubAction
from rlgpt.config import AgentConfig
from rlgpt.llm.client import LLMClient
from rlgpt.llm.embedded import EmbeddedBackend
from rlgpt.llm.isolated import IsolatedBackend
from rlgpt.llm.model_store import resolve_model_path
from rlgpt.llm.types import Completion, SamplingParams

SUB = SubAction("chop_tree", "walk to the nearest visible tree, face it and collect one wood", "code", "wood",
                "a fixed recipe")


def server_cpu_s(backend: IsolatedBackend) -> float:
    """CPU seconds (user + system) the isolated backend's server process has used so far."""
    assert backend.pid is not None
    with open(f"/proc/{backend.pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


def measure(model: str, n: int, pairs: int, max_tokens: int, threads: int, n_ctx: int = 8192,
            backend_kind: str = "embedded") -> dict:
    """Per pair: seconds and completion tokens of one candidate, then of `n` decoded together."""
    path = resolve_model_path(model)
    backend: EmbeddedBackend | IsolatedBackend
    cpu: Callable[[], float]
    if backend_kind == "isolated":
        backend = IsolatedBackend(path, n_ctx=n_ctx, n_threads=threads,
                                  log_dir=tempfile.mkdtemp(prefix="bench-llm-candidates-")).start()
        cpu = lambda: server_cpu_s(backend)  # noqa: E731  (the server decodes)
    else:
        backend = EmbeddedBackend(path, n_ctx=n_ctx, n_threads=threads)
        cpu = time.process_time
    agent = FastAgent(LLMClient(backend), AgentConfig(code_max_tokens=max_tokens))
    messages = agent.macro_messages("collect_wood", SUB)
    backend.complete(messages, None, SamplingParams(temperature=0.0, max_tokens=1))  # the prompt, once

    rows = []
    for pair in range(pairs):
        seeds = [SamplingParams(temperature=0.7, top_p=0.95, max_tokens=max_tokens, seed=100 * pair + k)
                 for k in range(n)]
        start, cpu0 = time.perf_counter(), cpu()
        one: list[Completion] = [backend.complete(messages, None, seeds[0])]
        one_s, one_cpu = time.perf_counter() - start, cpu() - cpu0
        start, cpu0 = time.perf_counter(), cpu()
        many = backend.complete_many(messages, seeds)
        many_s, many_cpu = time.perf_counter() - start, cpu() - cpu0
        rows.append({"one_s": one_s, "one_cpu_s": one_cpu, "one_tokens": one[0].completion_tokens,
                     "many_s": many_s, "many_cpu_s": many_cpu,
                     "many_tokens": [c.completion_tokens for c in many], "ratio": many_s / one_s,
                     "cpu_ratio": many_cpu / one_cpu})
        print(json.dumps(rows[-1]), flush=True)  # each pair as it ends (a long run on a busy box)
    backend.close()
    prompt_tokens = backend.count_tokens("".join(m["content"] for m in messages))
    return {"model": model, "backend": backend_kind, "n": n, "prompt_tokens": prompt_tokens,
            "max_tokens": max_tokens, "threads": threads, "pairs": rows,
            "median_ratio": statistics.median(r["ratio"] for r in rows),
            "median_cpu_ratio": statistics.median(r["cpu_ratio"] for r in rows)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="qwen2.5-coder-1.5b", help="model name or .gguf path")
    parser.add_argument("--n", type=int, default=4, help="candidates decoded together")
    parser.add_argument("--pairs", type=int, default=3, help="(one, N) pairs, interleaved")
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--backend", choices=("embedded", "isolated"), default="embedded",
                        help="in process, or the isolated child server real runs use by default")
    args = parser.parse_args()
    result = measure(args.model, args.n, args.pairs, args.max_tokens, args.threads, backend_kind=args.backend)
    print(f"{result['model']} ({result['backend']}): prompt {result['prompt_tokens']} tokens, "
          f"max {result['max_tokens']} new, "
          f"{result['threads']} threads")
    for i, row in enumerate(result["pairs"]):
        tokens = "/".join(map(str, row["many_tokens"]))
        print(f"pair {i}: 1 candidate {row['one_s']:.1f}s wall {row['one_cpu_s']:.1f}s cpu "
              f"({row['one_tokens']} tokens) | {result['n']} together {row['many_s']:.1f}s wall "
              f"{row['many_cpu_s']:.1f}s cpu ({tokens} tokens) | ratio wall {row['ratio']:.2f} "
              f"cpu {row['cpu_ratio']:.2f}", flush=True)
    print(f"median ratio N={result['n']} / N=1: wall {result['median_ratio']:.2f}, "
          f"cpu {result['median_cpu_ratio']:.2f}")


if __name__ == "__main__":
    main()
