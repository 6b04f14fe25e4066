"""Prompt-processing and generation tokens/s of the embedded models (llama.cpp, CPU).

The ``llm`` rows of ``python -m bench``. Alone:
OMP_NUM_THREADS=1 python -m bench.llm_throughput [--models qwen2.5-coder-0.5b qwen2.5-coder-1.5b]
       [--threads 2] [--gen-tokens 64] [--repeats 3]
Prompt speed: a ~480-token role prompt evaluated from an empty KV cache; generation speed: decoding
`--gen-tokens` tokens after it. Both from llama.cpp's own per-phase timers (llama_perf_context).
The best of `--repeats` runs is reported, since other jobs on a shared box only ever slow a run down.
"""

from __future__ import annotations

import argparse
import time

import llama_cpp

from rlgpt import prompts
from rlgpt.agents.common import knowledge_values
from rlgpt.llm.embedded import EmbeddedBackend
from rlgpt.llm.errors import ModelPartsMissingError
from rlgpt.llm.model_store import MODELS, QWEN_CODER_0_5B, QWEN_CODER_1_5B, ensure_model


def _run(backend: EmbeddedBackend, prompt: str, max_tokens: int) -> tuple[float, float, int, int]:
    """Return (prompt tok/s, generation tok/s, prompt tokens, generated tokens) from llama.cpp's counters."""
    llama = backend.llama
    # A cleared KV cache makes every run pay for the whole prompt (no prefix reuse).
    llama.reset()
    llama_cpp.llama_perf_context_reset(llama.ctx)
    llama.create_completion(prompt, max_tokens=max_tokens, temperature=0.0)
    perf = llama_cpp.llama_perf_context(llama.ctx)
    return (1000 * perf.n_p_eval / perf.t_p_eval_ms, 1000 * perf.n_eval / max(perf.t_eval_ms, 1e-6),
            perf.n_p_eval, perf.n_eval)


def measure(
    model: str, threads: int, gen_tokens: int, repeats: int, prompt_tokens: int | None = None
) -> dict[str, float]:
    """Return load seconds, prompt tokens/s and generation tokens/s for one model (``prompt_tokens``: only
    the first that many tokens of the prompt, for a quick run)."""
    path = ensure_model(MODELS[model])
    start = time.perf_counter()
    backend = EmbeddedBackend(path, n_ctx=2048, n_threads=threads)
    load_s = time.perf_counter() - start
    messages = prompts.render("slow", task="collect wood, then place a crafting table",
                              env_rules="Crafter: a 2D survival game with 17 actions.",
                              macro_api="(not shown)", feedback="none", **knowledge_values("slow"))
    prompt = "\n\n".join(m["content"] for m in messages) + "\n\nDecomposition as JSON:\n"
    if prompt_tokens is not None:
        tokens = backend.llama.tokenize(prompt.encode(), add_bos=False)[:prompt_tokens]
        prompt = backend.llama.detokenize(tokens).decode(errors="ignore")
    best_prompt = best_gen = 0.0
    n_prompt = n_gen = 0
    for _ in range(repeats):
        prompt_tps, gen_tps, n_prompt, n_gen = _run(backend, prompt, gen_tokens)
        best_prompt = max(best_prompt, prompt_tps)
        best_gen = max(best_gen, gen_tps)
    backend.close()
    return {"load_s": load_s, "prompt_tokens": n_prompt, "prompt_tps": best_prompt, "gen_tokens": n_gen,
            "gen_tps": best_gen}


def available_models(quick: bool) -> list[str]:
    """The models to measure: the small one (what ``make test`` installs), and unless ``quick`` also the
    1.5B default where its parts are installed (``make run`` adds them)."""
    models = [QWEN_CODER_0_5B.name]
    if not quick:
        try:
            ensure_model(QWEN_CODER_1_5B)
            models.append(QWEN_CODER_1_5B.name)
        except ModelPartsMissingError:
            pass
    return models


def main() -> None:
    """Print one table row per model."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=[QWEN_CODER_0_5B.name, QWEN_CODER_1_5B.name],
                        choices=sorted(MODELS))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--gen-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print("| model | threads | load s | prompt tokens | prompt tok/s | generated tokens | generation tok/s |")
    print("|---|---|---|---|---|---|---|")
    rows = {}
    for model in args.models:
        r = rows[model] = measure(model, args.threads, args.gen_tokens, args.repeats)
        print(f"| {model} Q4_K_M | {args.threads} | {r['load_s']:.1f} | {r['prompt_tokens']} | "
              f"{r['prompt_tps']:.0f} | {r['gen_tokens']} | {r['gen_tps']:.1f} |", flush=True)
    base, *others = args.models
    for model in others:
        print(f"{model} / {base}: {rows[model]['prompt_tps'] / rows[base]['prompt_tps']:.2f}x prompt speed, "
              f"{rows[model]['gen_tps'] / rows[base]['gen_tps']:.2f}x generation speed")


if __name__ == "__main__":
    main()
