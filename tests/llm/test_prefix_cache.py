"""Prompt-prefix reuse (issue 17) on the real 0.5B model: a request sharing a prefix with an earlier one
computes only the rest, reported as llm/cached_tokens; kept on disk, a new process starts warm."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlgpt.agents.envdoc import crafter_rules
from rlgpt.llm.client import LLMClient
from rlgpt.llm.embedded import EmbeddedBackend
from rlgpt.llm.types import SamplingParams

PREFIX = crafter_rules()[:1200]  # a role's constant system prompt (a few hundred tokens)
ONE_TOKEN = SamplingParams(max_tokens=1)


def ask(client: LLMClient, question: str) -> None:
    client.chat("fast", [{"role": "system", "content": PREFIX}, {"role": "user", "content": question}],
                sampling=ONE_TOKEN)


@pytest.mark.slow
def test_shared_prefix_is_served_from_kept_state(small_model_path: Path, tmp_path: Path) -> None:
    def backend() -> EmbeddedBackend:
        return EmbeddedBackend(small_model_path, n_ctx=1024, n_threads=2, prompt_cache_mb=512,
                               prompt_cache_dir=tmp_path / "states")

    first = backend()
    client = LLMClient(first)
    ask(client, "Write a macro that collects wood.")
    cold = client.metrics()
    assert cold["llm/cached_tokens"] <= 1 and cold["llm/prefill_tokens"] > 100
    ask(client, "Write a macro that places a table.")
    warm = client.metrics()
    shared = warm["llm/cached_tokens"] - cold["llm/cached_tokens"]
    computed = warm["llm/prefill_tokens"] - cold["llm/prefill_tokens"]
    assert shared > 100 and computed < 20  # only the different question was computed
    first.close()
    # A new process (a new run) with the same state folder starts warm.
    client = LLMClient(backend())
    ask(client, "Write a macro that collects stone.")
    assert client.metrics()["llm/cached_tokens"] > 100


@pytest.mark.slow
def test_kept_states_stay_within_the_cache_capacity(small_model_path: Path) -> None:
    capacity_mb = 64
    backend = EmbeddedBackend(small_model_path, n_ctx=1024, n_threads=2, prompt_cache_mb=capacity_mb)
    client = LLMClient(backend)
    for question in ("Write a macro that collects wood.", "Write a macro that places a table.",
                     "Write a macro that collects stone."):
        ask(client, question)
    cache = backend._llama.cache
    states = list(cache.cache_state.values())
    # Every array a kept state holds counts, and all of them fit: a state of a few hundred tokens keeps
    # only its last logits row (all its rows would be ~0.6 MB per token, past the capacity).
    held = sum(int(s.llama_state_size) + s.scores.nbytes + s.input_ids.nbytes for s in states)
    assert states and held == cache.cache_size <= capacity_mb << 20
    assert all(s.scores.shape[0] <= 1 for s in states)
    # And the kept state still serves the shared prefix.
    assert client.metrics()["llm/cached_tokens"] > 100
