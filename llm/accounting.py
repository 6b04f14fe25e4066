"""LLM accounting the agents' client adds on top of `LLMClient`'s own metrics: schema retries per role."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from rlgpt.llm.client import LLMClient


class AccountedClient:
    """The agents' view of an `LLMClient` that also counts schema retries per role
    (``llm/<role>/schema_retries``): each answer a `structured` call needed beyond its first."""

    def __init__(self, inner: LLMClient) -> None:
        self.inner = inner
        self.schema_retries: dict[str, int] = defaultdict(int)

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    @property
    def n_ctx(self) -> int | None:
        return self.inner.n_ctx

    @property
    def exact_tokens(self) -> bool:
        return self.inner.exact_tokens

    @property
    def usage(self) -> dict[str, Any]:
        """The inner client's per-role usage (`rlgpt.llm.client.RoleUsage`: calls, tokens, latency)."""
        return self.inner.usage

    @property
    def in_flight(self) -> str | None:
        """The role of the request the model is answering now (None between requests)."""
        return self.inner.in_flight

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)

    def note_fallback(self, role: str) -> None:
        self.inner.note_fallback(role)

    def _answers(self) -> int:
        return sum(u.calls for u in self.inner.usage.values()) + self.inner.cache_hits

    def chat(self, role: str, messages: list, **kwargs: Any):
        return self.inner.chat(role, messages, **kwargs)

    def chat_many(self, role: str, messages: list, samplings: list, **kwargs: Any):
        return self.inner.chat_many(role, messages, samplings, **kwargs)

    def structured(self, role: str, messages: list, schema: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        before = self._answers()
        try:
            return self.inner.structured(role, messages, schema, **kwargs)
        finally:
            self.schema_retries[role] += max(self._answers() - before - 1, 0)

    def metrics(self) -> dict[str, float]:
        """The client's ``llm/*`` metrics plus schema retries per role."""
        out = self.inner.metrics()
        out.update({f"llm/{role}/schema_retries": float(n) for role, n in self.schema_retries.items()})
        return out
