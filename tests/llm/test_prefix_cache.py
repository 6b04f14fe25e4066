"""Prompt-prefix reuse (issue 17) on the real 0.5B model: a request sharing a prefix with an earlier one
computes only the rest, reported as llm/cached_tokens; kept on disk, a new process starts warm."""

from __future__ import annotations

import os
from pathlib import Path

import diskcache
import pytest

from rlgpt.agents.envdoc import crafter_rules
from rlgpt.llm.client import LLMClient
from rlgpt.llm.embedded import EmbeddedBackend, prompt_state_folder
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


@pytest.mark.slow
def test_the_isolated_server_keeps_states_on_disk_for_the_next_server(small_model_path: Path,
                                                                      tmp_path: Path) -> None:
    from rlgpt.llm.isolated import IsolatedBackend

    def server(name: str) -> IsolatedBackend:
        return IsolatedBackend(small_model_path, n_ctx=1024, n_threads=2, crash_retries=0,
                               log_dir=tmp_path / name, prompt_cache_mb=256,
                               prompt_cache_dir=tmp_path / "states")

    first = server("first")
    ask(LLMClient(first), "Write a macro that collects wood.")
    first.close()
    folder = prompt_state_folder(tmp_path / "states", small_model_path, 1024)
    kept = diskcache.Cache(str(folder))
    states = [kept[key] for key in kept.iterkeys()]
    # The state is on disk, trimmed to its last logits row, in the folder of this model and window.
    assert states and all(s.scores.shape[0] == 1 for s in states)
    assert all(list(s.input_ids[:50]) == list(states[0].input_ids[:50]) for s in states)
    kept.close()
    # A new server (a new run) with the same folder serves the shared prefix from the kept state: llama.cpp
    # says "cache hit" in its log for a request whose prompt starts with a kept state's tokens.
    second = server("second")
    ask(LLMClient(second), "Write a macro that collects stone.")
    second.close()
    log = (tmp_path / "second" / "server-1.log").read_text()
    assert "cache hit" in log
    assert "cache hit" not in (tmp_path / "first" / "server-1.log").read_text()


def test_prompt_state_settings() -> None:
    from rlgpt.llm.config import LLMConfig, prompt_state_dir
    from rlgpt.llm.embedded import PROMPT_STATE_DIR_ENV
    from rlgpt.llm.llama_server import STATE_DIR_FLAG, pop_state_dir

    argv = ["--model", "m.gguf", STATE_DIR_FLAG, "/x/y", "--cache", "true"]
    assert pop_state_dir(argv) == "/x/y" and argv == ["--model", "m.gguf", "--cache", "true"]
    assert pop_state_dir(argv) is None
    # None: the default folder (the test session's, from conftest); "": RAM only; no cache: nothing on disk.
    assert str(prompt_state_dir(LLMConfig())) == os.environ[PROMPT_STATE_DIR_ENV]
    assert prompt_state_dir(LLMConfig(prompt_cache_dir="")) is None
    assert prompt_state_dir(LLMConfig(prompt_cache_mb=0)) is None
    assert prompt_state_dir(LLMConfig(prompt_cache_dir="~/s")) == Path.home() / "s"


@pytest.mark.parametrize("where", ["ram", "disk"])
def test_a_full_cache_evicts_the_state_its_newest_one_makes_redundant(where: str, tmp_path: Path) -> None:
    """Over capacity, the kept prompt sharing the longest prefix with the new one goes (the oldest of equals):
    another fast-agent call replaces the previous one, and the slow agent's and the critic's states stay."""
    import llama_cpp
    import numpy as np

    from rlgpt.llm.embedded import most_redundant, prefix_state_cache, prefix_state_disk_cache

    state_bytes = 1 << 20
    capacity = 3 * state_bytes + (64 << 10)  # three states and their small arrays
    cache = (prefix_state_cache()(capacity_bytes=capacity) if where == "ram"
             else prefix_state_disk_cache()(str(tmp_path / "states"), capacity_bytes=capacity))
    preamble = tuple(range(100))
    prompts = {"slow": preamble + (1,) * 50, "fast1": preamble + (2,) * 40 + (5,),
               "critic": preamble + (3,) * 60, "fast2": preamble + (2,) * 40 + (6,)}
    for tokens in prompts.values():
        state = llama_cpp.LlamaState(input_ids=np.asarray(tokens, dtype=np.intc),
                                     scores=np.zeros((len(tokens), 8), dtype=np.single), n_tokens=len(tokens),
                                     llama_state=bytes(state_bytes), llama_state_size=state_bytes, seed=0)
        cache[tokens] = state
    kept = {name for name, tokens in prompts.items() if cache._find_longest_prefix_key(tokens) == tokens}
    assert kept == {"slow", "critic", "fast2"}
    assert cache.cache_size <= capacity
    assert most_redundant([prompts["slow"], prompts["fast1"]], prompts["fast2"]) == prompts["fast1"]
    assert most_redundant([prompts["fast2"]], prompts["fast2"]) is None
