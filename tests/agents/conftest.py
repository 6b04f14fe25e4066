"""Fixtures for the agent tests: the real 0.5B model with a context long enough for the agents' prompts
(crafter's rules + the macro API are ~2,700 tokens), and a recorder of the requests it answers."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from rlgpt.llm.cache import ResponseCache, request_key
from rlgpt.llm.client import LLMClient
from rlgpt.llm.embedded import EmbeddedBackend
from rlgpt.llm.model_store import QWEN_CODER_0_5B, ensure_model
from rlgpt.llm.types import Completion, Message, SamplingParams

AGENT_CTX = 4608
THREADS = 2


@pytest.fixture(scope="session")
def agent_model() -> Iterator[EmbeddedBackend]:
    """The real Qwen2.5-Coder-0.5B, loaded once, with room for the agents' prompts."""
    backend = EmbeddedBackend(ensure_model(QWEN_CODER_0_5B), n_ctx=AGENT_CTX, n_threads=THREADS)
    yield backend
    backend.close()


@dataclass
class Recording:
    """A Backend that forwards to the real model and records every request it was asked."""

    inner: EmbeddedBackend
    requests: list[tuple[list[Message], dict[str, Any] | None, SamplingParams]] = field(default_factory=list)

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    def complete(self, messages: list[Message], schema: dict[str, Any] | None,
                 sampling: SamplingParams) -> Completion:
        self.requests.append((messages, schema, sampling))
        return self.inner.complete(messages, schema, sampling)


@pytest.fixture
def recording(agent_model: EmbeddedBackend) -> Recording:
    """The real model behind a request recorder (fresh per test)."""
    return Recording(agent_model)


@pytest.fixture
def client(recording: Recording, tmp_path: Path) -> LLMClient:
    """The project's LLMClient over the recorded real model, with a fresh on-disk cache."""
    return LLMClient(recording, cache=ResponseCache(tmp_path / "llm_cache"))


def record_reply(client: LLMClient, messages: list[Message], text: str, sampling: SamplingParams,
                 schema: dict[str, Any] | None = None) -> None:
    """Store `text` as the cached reply to exactly this request (a recorded reply for a case the real
    model cannot be made to produce on demand); the client then serves it through its real cache path."""
    assert client.cache is not None
    key = request_key(client.model_id, messages, schema, sampling.to_dict())
    client.cache.put(key, Completion(text, 0, 0, "stop", client.model_id),
                     {"model": client.model_id, "role": "recorded", "messages": messages, "schema": schema,
                      "sampling": sampling.to_dict()})
