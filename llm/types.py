"""Plain values shared by every LLM backend: messages, sampling parameters, completions, the protocol."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Protocol

Message = dict[str, str]
"""An OpenAI chat message: {"role": "system"|"user"|"assistant", "content": str}."""


@dataclass(frozen=True)
class SamplingParams:
    """Decoding settings; part of the cache key, so equal params replay equal outputs."""

    temperature: float = 0.0
    """0 means greedy decoding (reproducible on one backend)."""
    top_p: float = 1.0
    """Nucleus sampling mass."""
    max_tokens: int = 1024
    """Upper bound on completion tokens; a reply cut here usually fails its schema and is re-asked."""
    seed: int = 0
    """Sampling seed passed to the backend."""

    def to_dict(self) -> dict[str, Any]:
        """Return the params as a plain dict (for cache keys and request bodies)."""
        return asdict(self)


@dataclass(frozen=True)
class Completion:
    """One chat completion as returned by a backend."""

    text: str
    """The assistant message content, exactly as generated."""
    prompt_tokens: int
    """Tokens in the prompt, as counted by the backend."""
    completion_tokens: int
    """Tokens generated."""
    finish_reason: str
    """Why generation stopped: "stop", "length", ..."""
    model: str
    """Model identifier reported by the backend."""
    cached_tokens: int = 0
    """Prompt tokens served from kept model state (a shared prefix) instead of computed; 0 when unknown."""

    def to_dict(self) -> dict[str, Any]:
        """Return the completion as a plain dict (for the cache)."""
        return asdict(self)


class Backend(Protocol):
    """What LLMClient needs from a model: one chat completion, optionally constrained by a JSON schema.

    A backend may also have ``complete_many(messages, samplings) -> list[Completion]``: one reply (no
    schema) per sampling, decoded together (`LLMClient.chat_many` uses it; the embedded model, in process or
    isolated, and the HTTP backend have it)."""

    @property
    def model_id(self) -> str:
        """Stable identity of the weights served; part of the cache key."""
        ...

    def complete(self, messages: list[Message], schema: dict[str, Any] | None,
                 sampling: SamplingParams) -> Completion:
        """Generate one assistant reply; with `schema`, constrain it to JSON matching the schema."""
        ...

