"""Several samples of one prompt decoded together on the real embedded 0.5B (llama.cpp's batched API through
llama-cpp-python's low-level bindings), and the client's batched call over it."""

from __future__ import annotations

from pathlib import Path

from rlgpt.agents.code import extract_function
from rlgpt.llm.cache import ResponseCache
from rlgpt.llm.client import LLMClient
from rlgpt.llm.embedded import EmbeddedBackend
from rlgpt.llm.types import SamplingParams

MESSAGES = [{"role": "system", "content": "You write short Python functions."},
            {"role": "user", "content": "Write `def score(word)` that returns a score for a word, by any "
                                        "rule you invent. Reply with only one ```python block, no "
                                        "explanation."}]
GREEDY = SamplingParams(temperature=0.0, max_tokens=128, seed=0)
SAMPLED = [SamplingParams(temperature=0.7, top_p=0.95, max_tokens=128, seed=seed) for seed in (1, 2, 3, 4)]


def test_batched_sampling_gives_distinct_well_formed_replies_and_one_greedy_sequence_equals_complete(
        embedded: EmbeddedBackend) -> None:
    many = embedded.complete_many(MESSAGES, SAMPLED)
    # Each sequence samples with its own seed. (Not bit for bit the one-sequence sample of that seed: a step
    # over several sequences rounds a little differently, enough to flip a close draw.)
    assert len({c.text for c in many}) == len(SAMPLED)
    for completion in many:  # each a whole reply: ended by the model, a function in it, no special token
        assert completion.finish_reason == "stop" and "<|" not in completion.text, completion.text
        assert extract_function(completion.text, "score") is not None, completion.text
    assert many[0].prompt_tokens == many[1].prompt_tokens
    assert all(c.cached_tokens == c.prompt_tokens for c in many[1:])  # they share the first's prompt cells
    # One greedy sequence through the batched path is token for token what `complete` returns.
    alone = embedded.complete_many(MESSAGES, [GREEDY])[0]
    single = embedded.complete(MESSAGES, None, GREEDY)
    assert (alone.text, alone.completion_tokens, alone.finish_reason) == \
        (single.text, single.completion_tokens, single.finish_reason)


def test_the_clients_batched_call_shares_the_cache_with_single_calls(embedded: EmbeddedBackend,
                                                                     tmp_path: Path) -> None:
    client = LLMClient(embedded, cache=ResponseCache(tmp_path / "cache"))
    first = client.chat("fast", MESSAGES, sampling=SAMPLED[0])
    many = client.chat_many("fast", MESSAGES, [SAMPLED[0], SAMPLED[1]])
    # The first was a cache hit (the model made one new reply); each batched reply replays as a single call.
    assert many[0] == first and client.cache_hits == 1 and client.usage["fast"].calls == 2
    assert client.chat("fast", MESSAGES, sampling=SAMPLED[1]) == many[1] and client.cache_hits == 2
