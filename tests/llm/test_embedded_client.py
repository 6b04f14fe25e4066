"""The real embedded 0.5B model under a schema, through LLMClient: typed reply, metrics, cache replay."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlgpt import prompts
from rlgpt.agents.critic import critic_schema
from rlgpt.agents.replies import Feedback, parse_reply
from rlgpt.llm import (
    CacheMissError,
    ConfigError,
    ContextOverflowError,
    LLMClient,
    LLMConfig,
    ResponseCache,
    SamplingParams,
    build_client,
)
from rlgpt.llm.embedded import EmbeddedBackend
from rlgpt.tracking import SummarySink

SAMPLING = SamplingParams(max_tokens=320)
CRITIC_SCHEMA = critic_schema(None)
"""What the critic sends: short strings, two items a list, so a reply fits `SAMPLING`'s token limit."""


def _critic_messages() -> list[dict[str, str]]:
    return prompts.render("critic", task="collect wood", iteration="3",
                          eval_report="collect_wood success 0.97; macro chop used 40%, failed 2%",
                          diagnostics="none", env_rules="Crafter: a 2D survival game with 17 actions.",
                          macro_api="(not needed)", decomposition="chop: collect wood (code)",
                          probes="chop: goal reached 3 of 3",
                          subactions="chop (code, goal collect_wood): goal reached in 3 of 3 probe calls")


def test_structured_reply_cached_and_replayed_offline(embedded: EmbeddedBackend, tmp_path: Path) -> None:
    recorded: list[dict[str, float]] = []
    client = LLMClient(embedded, cache=ResponseCache(tmp_path / "cache"), default_sampling=SAMPLING,
                       metrics_sink=recorded.append)
    data = client.structured("critic", _critic_messages(), CRITIC_SCHEMA)
    feedback = parse_reply("critic", data)
    assert isinstance(feedback, Feedback)
    assert feedback.target in ("fast", "slow", "done")

    metrics = client.metrics()
    assert metrics["llm/critic/prompt_tokens"] > 300
    assert metrics["llm/critic/completion_tokens"] > 5
    assert metrics["llm/critic/latency_s"] > 0
    assert metrics["llm/cache_hits"] == 0
    assert recorded[-1] == metrics
    calls = metrics["llm/critic/calls"]

    # Same client: a hit, the model is not called again.
    again = client.structured("critic", _critic_messages(), CRITIC_SCHEMA)
    assert again == data
    assert client.metrics()["llm/critic/calls"] == calls
    assert client.metrics()["llm/cache_hits"] == 1

    # A replay-only client has no model at all and returns byte-identical text from disk.
    live = client.chat("critic", _critic_messages(), schema=CRITIC_SCHEMA)
    replay = build_client(LLMConfig(model=str(embedded.path), cache_dir=str(tmp_path / "cache"),
                                    replay_only=True, max_tokens=SAMPLING.max_tokens))
    assert replay.backend is None
    offline = replay.chat("critic", _critic_messages(), schema=CRITIC_SCHEMA)
    assert offline.text.encode() == live.text.encode()
    assert replay.metrics()["llm/cache_hits"] == 1

    # Different sampling params are a different key: a miss, which replay-only refuses clearly.
    with pytest.raises(CacheMissError, match="no cached response for role 'critic'"):
        replay.chat("critic", _critic_messages(), schema=CRITIC_SCHEMA,
                    sampling=SamplingParams(max_tokens=161))


def test_llm_metrics_reach_the_run_summaries(embedded: EmbeddedBackend, tmp_path: Path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    sink = SummarySink(tmp_path)
    client = LLMClient(embedded, default_sampling=SamplingParams(max_tokens=4), metrics_sink=sink)
    client.chat("slow", [{"role": "user", "content": "Reply with the single word: yes"}])
    client.chat("critic", [{"role": "user", "content": "Reply with the single word: no"}])
    sink.close()
    events = EventAccumulator(str(tmp_path / ".summary" / "0"))
    events.Reload()
    tags = set(events.Tags()["scalars"])
    for role in ("slow", "critic"):
        counters = ("prompt_tokens", "completion_tokens", "latency_s", "calls")
        assert {f"llm/{role}/{k}" for k in counters} <= tags
    assert [e.value for e in events.Scalars("llm/slow/calls")] == [1.0, 1.0]
    assert events.Scalars("llm/critic/prompt_tokens")[-1].value > 5


def test_unconstrained_chat_and_determinism(embedded: EmbeddedBackend) -> None:
    client = LLMClient(embedded)
    messages = [{"role": "user", "content": "Reply with the single word: yes"}]
    first = client.chat("slow", messages, sampling=SamplingParams(max_tokens=4))
    second = client.chat("slow", messages, sampling=SamplingParams(max_tokens=4))
    assert first.text == second.text and first.text.strip()
    assert 1 <= first.completion_tokens <= 4


def test_context_overflow_is_a_clear_error(embedded: EmbeddedBackend) -> None:
    long_text = "wood stone " * 1500
    assert embedded.count_tokens(long_text) > embedded.n_ctx
    with pytest.raises(ContextOverflowError, match="2048-token context"):
        LLMClient(embedded).chat("fast", [{"role": "user", "content": long_text}],
                                 sampling=SamplingParams(max_tokens=8))


def test_bad_inputs_are_refused(embedded: EmbeddedBackend, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="messages is empty"):
        LLMClient(embedded).chat("slow", [])
    with pytest.raises(ConfigError, match="role 'robot'"):
        LLMClient(embedded).chat("slow", [{"role": "robot", "content": "x"}])
    with pytest.raises(ConfigError, match="needs a backend"):
        LLMClient(None)
    with pytest.raises(ConfigError, match="unknown llm config keys \\['temp'\\]"):
        LLMConfig.from_dict({"temp": 1})
    with pytest.raises(ConfigError, match="replay_only needs llm.cache_dir"):
        LLMConfig(replay_only=True)
    with pytest.raises(ConfigError, match="does not exist"):
        EmbeddedBackend(tmp_path / "missing.gguf")
    assert json.loads(json.dumps(LLMConfig().sampling.to_dict()))["max_tokens"] == 1024


def test_the_client_names_the_role_the_model_is_answering(embedded: EmbeddedBackend) -> None:
    """`LLMClient.in_flight` (what `rlgpt run`'s progress line shows while a request runs): the role while
    the real model computes, None once it answered."""
    seen = []

    class Watching:
        model_id = embedded.model_id

        def complete(self, *args, **kwargs):
            seen.append(client.in_flight)
            return embedded.complete(*args, **kwargs)

    client = LLMClient(Watching())
    client.chat("critic", [{"role": "user", "content": "Say yes."}], sampling=SamplingParams(max_tokens=1))
    assert seen == ["critic"] and client.in_flight is None
