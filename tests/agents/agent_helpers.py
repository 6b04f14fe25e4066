"""Helpers for the agent tests (a uniquely named module: every test folder has its own conftest)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rlgpt.llm.cache import request_key
from rlgpt.llm.client import LLMClient
from rlgpt.llm.embedded import EmbeddedBackend
from rlgpt.llm.types import Completion, Message, SamplingParams


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


def record_reply(client: LLMClient, messages: list[Message], text: str, sampling: SamplingParams,
                 schema: dict[str, Any] | None = None) -> None:
    """Store `text` as the cached reply to exactly this request (a recorded reply for a case the real
    model cannot be made to produce on demand); the client then serves it through its real cache path."""
    assert client.cache is not None
    key = request_key(client.model_id, messages, schema, sampling.to_dict())
    client.cache.put(key, Completion(text, 0, 0, "stop", client.model_id),
                     {"model": client.model_id, "role": "recorded", "messages": messages, "schema": schema,
                      "sampling": sampling.to_dict()})
