"""OpenAI-compatible HTTP backend (vLLM, llama.cpp's server, others) with both structured-output dialects.

Dialects (how a JSON schema is sent):
- "json_schema": OpenAI/vLLM `response_format={"type": "json_schema", "json_schema": {name, schema, strict}}`.
- "structured_outputs": vLLM's extra field `structured_outputs={"json": schema}` (vLLM >= 0.10.2).
- "json_object": llama.cpp's `response_format={"type": "json_object", "schema": schema}`; llama.cpp's
  server rejects "json_schema" with 422.
- "auto": ask GET /models once; `owned_by == "vllm"` means json_schema, anything else json_object.
"""

from __future__ import annotations

import concurrent.futures
import json
import re
import time
import urllib.error
import urllib.request
from typing import Any

from rlgpt.llm.errors import (
    ConfigError,
    ContextOverflowError,
    HTTPStatusError,
    NonJSONResponseError,
    ServerUnavailableError,
)
from rlgpt.llm.types import Completion, Message, SamplingParams

DIALECTS = ("auto", "json_schema", "structured_outputs", "json_object")
# Statuses worth retrying: the server is overloaded or restarting, the request itself is fine.
_RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
# vLLM: "This model's maximum context length is N tokens"; llama.cpp server: the same OpenAI wording
# with code "context_length_exceeded"; others say "context window"/"context length".
_OVERFLOW_RE = re.compile(r"maximum context length|context_length_exceeded|context window|context length",
                          re.IGNORECASE)


def schema_payload(dialect: str, schema: dict[str, Any], name: str = "reply") -> dict[str, Any]:
    """Return the request-body fields that ask for JSON matching `schema` in `dialect`."""
    if dialect == "json_schema":
        return {"response_format": {"type": "json_schema",
                                    "json_schema": {"name": name, "schema": schema, "strict": True}}}
    if dialect == "structured_outputs":
        return {"structured_outputs": {"json": schema}}
    if dialect == "json_object":
        return {"response_format": {"type": "json_object", "schema": schema}}
    raise ConfigError(f"unknown structured-output dialect {dialect!r}; use one of {DIALECTS[1:]}")


def cached_tokens(usage: dict[str, Any]) -> int:
    """Prompt tokens a server served from its prefix cache, from OpenAI's
    ``usage.prompt_tokens_details.cached_tokens`` (vLLM with ``--enable-prompt-tokens-details``, our llama.cpp
    server); 0 when the server does not say (or says nonsense)."""
    details = usage.get("prompt_tokens_details")
    value = details.get("cached_tokens") if isinstance(details, dict) else None
    return value if type(value) is int and value >= 0 else 0


class OpenAIHTTPBackend:
    """Chat completions from an OpenAI-compatible server, with timeouts, retries and clear errors."""

    def __init__(self, base_url: str, *, model: str | None = None, api_key: str | None = None,
                 dialect: str = "auto", timeout_s: float = 120.0, max_retries: int = 3,
                 backoff_s: float = 0.5, backoff_max_s: float = 8.0) -> None:
        """Configure the backend; nothing is sent until the first request.

        Args:
            base_url: the API root, e.g. "http://127.0.0.1:8000/v1".
            model: served model name; None = the first one GET /models lists.
            api_key: sent as a Bearer token when given.
            dialect: one of DIALECTS.
            timeout_s: per-request socket timeout.
            max_retries: retries after the first attempt on connection errors and 408/429/5xx.
            backoff_s: first retry delay; doubles per retry up to `backoff_max_s`.
            backoff_max_s: cap on one retry delay.
        """
        if not base_url.startswith(("http://", "https://")):
            raise ConfigError(f"base_url must start with http:// or https://, got {base_url!r}")
        if dialect not in DIALECTS:
            raise ConfigError(f"unknown structured-output dialect {dialect!r}; use one of {DIALECTS}")
        if timeout_s <= 0 or max_retries < 0 or backoff_s < 0:
            raise ConfigError("timeout_s must be > 0, max_retries and backoff_s >= 0")
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.backoff_max_s = backoff_max_s
        self._model = model
        self._dialect = dialect
        self._owned_by: str | None = None

    # -- discovery -------------------------------------------------------------------------------------

    def _discover(self) -> None:
        body = self._request("GET", "/models", None)
        models = body.get("data") if isinstance(body, dict) else None
        if not models:
            raise NonJSONResponseError(f"{self.base_url}/models returned no models: {str(body)[:200]}")
        entry = next((m for m in models if m.get("id") == self._model), models[0])
        if self._model is None:
            self._model = str(entry["id"])
        self._owned_by = str(entry.get("owned_by", ""))

    @property
    def model(self) -> str:
        """The served model name (asked from the server when not configured)."""
        if self._model is None:
            self._discover()
        assert self._model is not None
        return self._model

    @property
    def dialect(self) -> str:
        """The structured-output dialect in use (detected once when configured as "auto")."""
        if self._dialect == "auto":
            if self._owned_by is None:
                self._discover()
            self._dialect = "json_schema" if self._owned_by == "vllm" else "json_object"
        return self._dialect

    @property
    def model_id(self) -> str:
        """Cache identity: the served model name (the same weights replay alike on any server)."""
        return f"http:{self.model}"

    # -- requests --------------------------------------------------------------------------------------

    def complete(self, messages: list[Message], schema: dict[str, Any] | None,
                 sampling: SamplingParams) -> Completion:
        """POST /chat/completions; with `schema`, in this backend's structured-output dialect."""
        body: dict[str, Any] = {
            "model": self.model, "messages": messages, "temperature": sampling.temperature,
            "top_p": sampling.top_p, "max_tokens": sampling.max_tokens, "seed": sampling.seed,
            "stream": False,
        }
        if schema is not None:
            body.update(schema_payload(self.dialect, schema))
        out = self._request("POST", "/chat/completions", body)
        try:
            choice = out["choices"][0]
            text = choice["message"]["content"] or ""
            usage = out.get("usage") or {}
            return Completion(
                text=text, prompt_tokens=int(usage.get("prompt_tokens", 0)),
                completion_tokens=int(usage.get("completion_tokens", 0)),
                finish_reason=str(choice.get("finish_reason") or "stop"),
                model=str(out.get("model", self.model)),
                cached_tokens=cached_tokens(usage),
            )
        except (KeyError, IndexError, TypeError) as exc:
            raise NonJSONResponseError(
                f"{self.base_url}/chat/completions returned JSON without choices[0].message.content "
                f"({exc!r}): {json.dumps(out)[:200]}"
            ) from None

    def complete_many(self, messages: list[Message], samplings: list[SamplingParams]) -> list[Completion]:
        """One reply per entry of `samplings`, sent as concurrent requests: vLLM and llama.cpp's server
        batch the requests they have in flight (continuous batching), so N samples cost about one."""
        _ = self.model, self.dialect  # discover the served model once, before the threads
        with concurrent.futures.ThreadPoolExecutor(max_workers=len(samplings)) as pool:
            return list(pool.map(lambda s: self.complete(messages, None, s), samplings))

    def _request(self, method: str, path: str, body: dict[str, Any] | None) -> Any:
        return self.request_url(method, self.base_url + path, body)

    def request_url(self, method: str, url: str, body: dict[str, Any] | None) -> Any:
        """The JSON answer of `url` (on this server, beside the OpenAI API: e.g. `rlgpt.llm.llama_server`'s
        batched endpoint) to `body`, with this backend's key, timeout, retries and errors."""
        data = json.dumps(body).encode("utf-8") if body is not None else None
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        last_failure = ""
        last_status: int | None = None
        for attempt in range(self.max_retries + 1):
            if attempt:
                time.sleep(min(self.backoff_s * 2 ** (attempt - 1), self.backoff_max_s))
            request = urllib.request.Request(url, data=data, headers=headers, method=method)
            try:
                with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                    raw = response.read()
            except urllib.error.HTTPError as exc:
                text = exc.read().decode("utf-8", "replace")
                # llama.cpp's server answers a dialect it rejects with 500; retrying cannot help.
                if exc.code in _RETRY_STATUSES and "response_format" not in text:
                    last_status, last_failure = exc.code, text
                    continue
                self._raise_for_status(method, url, exc.code, text)
            except (urllib.error.URLError, ConnectionError, TimeoutError) as exc:
                reason = getattr(exc, "reason", exc)
                last_status, last_failure = None, f"{type(reason).__name__}: {reason}"
                continue
            try:
                return json.loads(raw)
            except (ValueError, RecursionError):  # RecursionError: a body nested past the parser's limit
                raise NonJSONResponseError(
                    f"{method} {url} returned a non-JSON body (is this an OpenAI-compatible API root?): "
                    f"{raw[:200]!r}"
                ) from None
        attempts = self.max_retries + 1
        if last_status is not None:
            raise HTTPStatusError(
                f"{method} {url} -> HTTP {last_status} on all {attempts} attempts: {last_failure[:300]}",
                last_status, last_failure[:2000],
            )
        raise ServerUnavailableError(
            f"cannot reach the LLM server at {url} after {attempts} attempts ({last_failure}); "
            f"start it with `rlgpt llm serve` or fix base_url"
        )

    def _raise_for_status(self, method: str, url: str, status: int, text: str) -> None:
        message = text
        try:
            err = json.loads(text)
            inner = err.get("error", err) if isinstance(err, dict) else err
            message = inner.get("message", text) if isinstance(inner, dict) else str(inner)
        except ValueError:
            pass
        if status in (400, 413) and _OVERFLOW_RE.search(text):
            raise ContextOverflowError(
                f"{method} {url}: prompt + max_tokens exceed the model's context ({message[:300]}); "
                f"shorten the prompt or lower max_tokens"
            )
        hint = ""
        if status in (400, 422, 500) and "response_format" in text:
            hint = "; the server rejects this structured-output dialect, use dialect='json_object'"
        elif status == 404:
            hint = "; check base_url (it usually ends in /v1) and the model name"
        elif status in (401, 403):
            hint = "; check the API key"
        raise HTTPStatusError(f"{method} {url} -> HTTP {status}: {message[:300]}{hint}", status, text[:2000])
