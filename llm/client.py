"""LLMClient: the one interface the agents use, over any Backend (embedded llama.cpp or HTTP).

It adds what every backend needs: the on-disk response cache (replayable, offline), structured replies
(JSON parsed and validated against the role's schema on our side, re-asking the model with the validation
error up to N times), and per-role accounting of tokens and latency exposed as `llm/*` metrics.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import jsonschema

from rlgpt.llm.cache import ResponseCache, request_key
from rlgpt.llm.errors import CacheMissError, ConfigError, SchemaValidationError
from rlgpt.llm.types import Backend, Completion, Message, SamplingParams

MetricsSink = Callable[[dict[str, float]], None]
"""Receives the cumulative `llm/*` metrics after every call (e.g. a tracking logger)."""


@dataclass
class RoleUsage:
    """Cumulative accounting for one role (planner, slow, fast, critic, ...)."""

    calls: int = 0
    """Model calls made (cache hits excluded)."""
    prompt_tokens: int = 0
    """Prompt tokens over all model calls."""
    completion_tokens: int = 0
    """Completion tokens over all model calls."""
    latency_s: float = 0.0
    """Wall-clock seconds spent waiting for the model."""
    cached_tokens: int = 0
    """Prompt tokens served from kept model state (shared prefixes) instead of computed."""


def retry_seed(seed: int, attempt: int) -> int:
    """The sampling seed of re-ask `attempt` (0 = the first ask) after invalid replies: a new seed per
    attempt, so a retry is a new request (its own cache entry) rather than a replay of the failure, and
    replaying a finished run still finds every attempt in the cache."""
    return seed if attempt == 0 else seed + 7919 * attempt


def check_messages(messages: list[Message]) -> None:
    """Raise `ConfigError` saying what is wrong unless `messages` is a non-empty list of chat messages."""
    if not messages:
        raise ConfigError("messages is empty; pass at least one {'role': ..., 'content': ...} message")
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or set(m) != {"role", "content"} or not isinstance(m["content"], str):
            raise ConfigError(f"message {i} must be {{'role': str, 'content': str}}, got {m!r}")
        if m["role"] not in ("system", "user", "assistant"):
            raise ConfigError(f"message {i} has role {m['role']!r}; use system, user or assistant")


def validation_error(data: Any, schema: dict[str, Any]) -> str | None:
    """Return a one-line description of the most relevant schema violation, or None if `data` is valid."""
    validator = jsonschema.Draft202012Validator(schema)
    error = jsonschema.exceptions.best_match(validator.iter_errors(data))
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path) or "<root>"
    return f"at {where}: {error.message}"


class LLMClient:
    """Cached, accounted, schema-checked chat completions over one backend."""

    def __init__(
        self,
        backend: Backend | None,
        *,
        cache: ResponseCache | None = None,
        replay_only: bool = False,
        model_id: str | None = None,
        schema_retries: int = 2,
        default_sampling: SamplingParams | None = None,
        metrics_sink: MetricsSink | None = None,
        n_ctx: int | None = None,
    ) -> None:
        """Create a client.

        Args:
            backend: the model; may be None only with `replay_only`.
            cache: where completions are stored and looked up; None disables caching.
            replay_only: never call the model; a cache miss raises CacheMissError.
            model_id: cache identity of the model; defaults to `backend.model_id`.
            schema_retries: how many times a reply failing its schema is re-asked before giving up.
            default_sampling: sampling used when a call passes none.
            metrics_sink: called with the cumulative metrics after each call.
            n_ctx: the model's context window, which prompts are fitted to (`rlgpt.llm.context`);
                default the backend's ``n_ctx``.
        """
        if backend is None and not replay_only:
            raise ConfigError("LLMClient needs a backend unless replay_only=True")
        if replay_only and cache is None:
            raise ConfigError("replay_only=True needs a cache to replay from")
        if schema_retries < 0:
            raise ConfigError(f"schema_retries must be >= 0, got {schema_retries}")
        resolved_id = model_id or (backend.model_id if backend is not None else None)
        if not resolved_id:
            raise ConfigError(
                "replay_only without a backend needs model_id (the id the cache was recorded with)"
            )
        self.backend = backend
        self.cache = cache
        self.replay_only = replay_only
        self.model_id: str = resolved_id
        self.schema_retries = schema_retries
        self.default_sampling = default_sampling or SamplingParams()
        self.metrics_sink = metrics_sink
        self.usage: dict[str, RoleUsage] = {}
        self.cache_hits = 0
        self.n_ctx: int | None = n_ctx or getattr(backend, "n_ctx", None)
        self.fallbacks: dict[str, int] = {}
        """Per role: replies that never validated and were replaced by the role's fallback."""
        self.in_flight: str | None = None
        """The role of the request the backend is answering now (None between requests), for progress
        lines: a request's tokens are counted when its answer arrives."""

    @property
    def exact_tokens(self) -> bool:
        """Whether `count_tokens` is the model's tokenizer (else an estimate)."""
        return getattr(self.backend, "count_tokens", None) is not None

    def count_tokens(self, text: str) -> int:
        """Tokens of `text` by the backend's tokenizer when it has one, else a conservative estimate."""
        counter = getattr(self.backend, "count_tokens", None)
        if counter is not None:
            return int(counter(text))
        from rlgpt.llm.context import estimate_tokens

        return estimate_tokens(text)

    def note_fallback(self, role: str) -> None:
        """Count one fallback of `role` (``llm/fallbacks``, ``llm/<role>/fallbacks``)."""
        self.fallbacks[role] = self.fallbacks.get(role, 0) + 1
        self._emit()

    def chat(self, role: str, messages: list[Message], *, schema: dict[str, Any] | None = None,
             sampling: SamplingParams | None = None) -> Completion:
        """Return one completion for `messages`, from the cache when possible, accounted under `role`."""
        check_messages(messages)
        sampling = sampling or self.default_sampling
        key = request_key(self.model_id, messages, schema, sampling.to_dict())
        if self.cache is not None:
            cached = self.cache.get(key)
            if cached is not None:
                self.cache_hits += 1
                self._emit()
                return cached
        if self.replay_only or self.backend is None:
            raise CacheMissError(
                f"replay-only: no cached response for role {role!r} (key {key[:12]}) in "
                f"{self.cache.root if self.cache else '<no cache>'}; rerun with a live backend to record it"
            )
        start = time.perf_counter()
        self.in_flight = role
        try:
            completion = self.backend.complete(messages, schema, sampling)
        finally:
            self.in_flight = None
        elapsed = time.perf_counter() - start
        usage = self.usage.setdefault(role, RoleUsage())
        usage.calls += 1
        usage.prompt_tokens += completion.prompt_tokens
        usage.completion_tokens += completion.completion_tokens
        usage.cached_tokens += completion.cached_tokens
        usage.latency_s += elapsed
        if self.cache is not None:
            self.cache.put(key, completion, {"model": self.model_id, "role": role, "messages": messages,
                                             "schema": schema, "sampling": sampling.to_dict()})
        self._emit()
        return completion

    def chat_many(self, role: str, messages: list[Message],
                  samplings: Sequence[SamplingParams]) -> list[Completion]:
        """One completion per entry of `samplings` to the same `messages` (no schema: code replies), in
        order; each from the cache when possible (keyed as `chat` keys it, so either replays the other),
        the rest decoded together where the backend can (the backend's ``complete_many``: the embedded model
        decodes several sequences per step, an HTTP server batches concurrent requests), else one by one.

        Accounting: every completion the model made is one call of `role`; the wall time of the shared
        decode is counted once (``llm/<role>/latency_s`` stays the time spent waiting).
        """
        check_messages(messages)
        keys = [request_key(self.model_id, messages, None, s.to_dict()) for s in samplings]
        out: list[Completion | None] = [None] * len(samplings)
        if self.cache is not None:
            for i, key in enumerate(keys):
                out[i] = self.cache.get(key)
            self.cache_hits += sum(c is not None for c in out)
        missing = [i for i, c in enumerate(out) if c is None]
        if missing and (self.replay_only or self.backend is None):
            raise CacheMissError(
                f"replay-only: no cached response for role {role!r} (key {keys[missing[0]][:12]}) in "
                f"{self.cache.root if self.cache else '<no cache>'}; rerun with a live backend to record it")
        if missing:
            assert self.backend is not None
            start = time.perf_counter()
            together = getattr(self.backend, "complete_many", None)
            wanted = [samplings[i] for i in missing]
            made = (together(messages, wanted) if together is not None and len(missing) > 1
                    else [self.backend.complete(messages, None, s) for s in wanted])
            elapsed = time.perf_counter() - start
            usage = self.usage.setdefault(role, RoleUsage())
            usage.latency_s += elapsed
            for i, completion in zip(missing, made, strict=True):
                usage.calls += 1
                usage.prompt_tokens += completion.prompt_tokens
                usage.completion_tokens += completion.completion_tokens
                usage.cached_tokens += completion.cached_tokens
                out[i] = completion
                if self.cache is not None:
                    self.cache.put(keys[i], completion, {
                        "model": self.model_id, "role": role, "messages": messages, "schema": None,
                        "sampling": samplings[i].to_dict()})
        self._emit()
        return [c for c in out if c is not None]

    def structured(self, role: str, messages: list[Message], schema: dict[str, Any], *,
                   sampling: SamplingParams | None = None) -> dict[str, Any]:
        """Return the model's reply as JSON valid under `schema`, re-asking with the error on failure.

        Raises:
            SchemaValidationError: every attempt produced invalid JSON or JSON failing the schema.
        """
        conversation = list(messages)
        errors: list[str] = []
        base = sampling or self.default_sampling
        for attempt in range(self.schema_retries + 1):
            attempt_sampling = dataclasses.replace(base, seed=retry_seed(base.seed, attempt))
            completion = self.chat(role, conversation, schema=schema, sampling=attempt_sampling)
            try:
                # strict=False: raw control characters inside strings (a newline in a code suggestion) are
                # what llama.cpp's JSON grammar lets through; the meaning is unambiguous.
                data = json.loads(completion.text, strict=False)
                found = validation_error(data, schema)
            except ValueError as exc:
                cut = " (the reply was cut off at max_tokens; answer more briefly)" \
                    if completion.finish_reason == "length" else ""
                problem = f"reply is not valid JSON: {exc}{cut}"
            except RecursionError:  # an untrusted reply nested deeper than the parser's recursion limit
                problem = "reply nests arrays or objects far too deeply"
            else:
                if found is None:
                    return data
                problem = f"reply does not match the JSON schema {found}"
            errors.append(problem)
            # Re-ask with the model's own reply and what was wrong with it, the usual repair prompt.
            conversation = [
                *conversation,
                {"role": "assistant", "content": completion.text},
                {"role": "user", "content": f"Your {problem}. Reply again with only a JSON object that "
                                            f"satisfies the schema."},
            ]
        raise SchemaValidationError(
            f"role {role!r}: no schema-valid reply after {len(errors)} attempts; last error: {errors[-1]}",
            errors,
        )

    def metrics(self) -> dict[str, float]:
        """Return the cumulative `llm/<role>/<counter>` metrics and `llm/cache_hits`."""
        out: dict[str, float] = {"llm/cache_hits": float(self.cache_hits),
                                 "llm/fallbacks": float(sum(self.fallbacks.values()))}
        prompt = sum(u.prompt_tokens for u in self.usage.values())
        cached = sum(u.cached_tokens for u in self.usage.values())
        out["llm/prefill_tokens"] = float(prompt - cached)  # computed by the model
        out["llm/cached_tokens"] = float(cached)  # served from kept prefix state
        for role, n in sorted(self.fallbacks.items()):
            out[f"llm/{role}/fallbacks"] = float(n)
        for role, u in sorted(self.usage.items()):
            out[f"llm/{role}/prompt_tokens"] = float(u.prompt_tokens)
            out[f"llm/{role}/completion_tokens"] = float(u.completion_tokens)
            out[f"llm/{role}/latency_s"] = u.latency_s
            out[f"llm/{role}/calls"] = float(u.calls)
        return out

    def _emit(self) -> None:
        if self.metrics_sink is not None:
            self.metrics_sink(self.metrics())

