"""LLMConfig: every knob of the LLM layer in one place, and `build_client` that turns it into an LLMClient."""

from __future__ import annotations

import os
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from rlgpt.llm.cache import ResponseCache
from rlgpt.llm.client import LLMClient, MetricsSink
from rlgpt.llm.context import DEFAULT_N_CTX
from rlgpt.llm.errors import ConfigError
from rlgpt.llm.http import DIALECTS
from rlgpt.llm.model_store import DEFAULT_MODEL
from rlgpt.llm.types import Backend, SamplingParams

BACKENDS = ("embedded", "http")
ISOLATIONS = ("process", "none")


@dataclass
class LLMConfig:
    """How to reach the model and how to decode."""

    backend: str = "embedded"
    """"embedded" (llama.cpp in-process, CPU) or "http" (an OpenAI-compatible server such as vLLM)."""
    model: str = DEFAULT_MODEL
    """Embedded: a known model name or a .gguf path. HTTP: the served model name ("" = the server's first)."""
    base_url: str = "http://127.0.0.1:8000/v1"
    """HTTP backend: API root."""
    api_key_env: str = "RLGPT_API_KEY"
    """HTTP backend: environment variable holding the API key, sent as ``Authorization: Bearer KEY``
    (unset = no key). The default is the variable `rlgpt llm serve` reads its key from, so one exported
    key serves both sides; OpenAI's hosted API: ``OPENAI_API_KEY``."""
    dialect: str = "auto"
    """HTTP backend: structured-output dialect, one of auto, json_schema, structured_outputs, json_object."""
    model_dir: str | None = None
    """Embedded: where assembled models are cached (None = $RLGPT_MODEL_DIR or the XDG cache)."""
    n_ctx: int = DEFAULT_N_CTX
    """The model's context window in tokens: the embedded model is loaded with it, and every role's prompt
    is fitted to ``n_ctx - max_tokens`` (rlgpt.llm.context), for HTTP servers too (set it to the served
    model's window)."""
    prompt_cache_mb: int = 1024
    """Embedded: MiB of llama.cpp prompt states kept so a prompt sharing a prefix with an earlier one (each
    role's rules + API come first) computes only the rest (``llm/cached_tokens``); 0 = off."""
    prompt_cache_dir: str | None = None
    """Embedded: keep those states on disk here (`rlgpt.llm.embedded.prompt_state_folder`: a folder per
    model file, window and llama.cpp build, shared safely by processes) so a new run starts warm. None = the
    default folder (`rlgpt.llm.embedded.default_prompt_state_dir`: $RLGPT_PROMPT_STATE_DIR, else the XDG
    cache's rlgpt/prompt_states); "" = in memory only (each process starts cold)."""
    threads: int | None = None
    """Embedded: CPU threads (None = all cores)."""
    isolation: str = "process"
    """Embedded: "process" runs llama.cpp in a child server process that is restarted when it crashes (a
    native fault is a BackendCrashedError and a retry, not a dead run); "none" loads it in this process."""
    crash_retries: int = 1
    """Embedded with isolation "process": times a request is re-sent after the server died under it."""
    timeout_s: float = 300.0
    """HTTP: per-request timeout in seconds."""
    max_retries: int = 3
    """HTTP: retries on connection errors and 408/429/5xx, with exponential backoff."""
    backoff_s: float = 0.5
    """HTTP: first retry delay in seconds (doubles per retry)."""
    schema_retries: int = 2
    """Times a reply failing its JSON schema is re-asked with the validation error."""
    cache_dir: str | None = None
    """Response cache directory (None = no cache)."""
    replay_only: bool = False
    """Serve only from the cache; a miss is an error (offline replay of a recorded run)."""
    temperature: float = 0.0
    """Sampling temperature (0 = greedy)."""
    top_p: float = 1.0
    """Nucleus sampling mass."""
    max_tokens: int = 1024
    """Completion token limit per call."""
    seed: int = 0
    """Sampling seed."""

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ConfigError(f"llm.backend must be one of {BACKENDS}, got {self.backend!r}")
        if self.dialect not in DIALECTS:
            raise ConfigError(f"llm.dialect must be one of {DIALECTS}, got {self.dialect!r}")
        if self.isolation not in ISOLATIONS:
            raise ConfigError(f"llm.isolation must be one of {ISOLATIONS}, got {self.isolation!r}")
        if self.max_tokens < 1:
            raise ConfigError(f"llm.max_tokens must be >= 1, got {self.max_tokens}")
        if self.replay_only and not self.cache_dir:
            raise ConfigError("llm.replay_only needs llm.cache_dir (the cache to replay from)")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LLMConfig:
        """Build from a mapping (e.g. a YAML section), rejecting unknown keys by name."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"unknown llm config keys {unknown}; known keys: {sorted(known)}")
        return cls(**data)

    @property
    def sampling(self) -> SamplingParams:
        """The default sampling parameters for calls."""
        return SamplingParams(temperature=self.temperature, top_p=self.top_p, max_tokens=self.max_tokens,
                              seed=self.seed)


def build_backend(config: LLMConfig, log_dir: str | os.PathLike[str] | None = None) -> Backend:
    """Create the backend `config` describes (loading the embedded model, if that is the backend); the
    embedded model's server writes its llama.cpp log into `log_dir` (default: a temporary directory)."""
    if config.backend == "http":
        from rlgpt.llm.http import OpenAIHTTPBackend

        return OpenAIHTTPBackend(config.base_url, model=config.model or None,
                                 api_key=os.environ.get(config.api_key_env) or None, dialect=config.dialect,
                                 timeout_s=config.timeout_s, max_retries=config.max_retries,
                                 backoff_s=config.backoff_s)
    from rlgpt.llm.embedded import EmbeddedBackend
    from rlgpt.llm.model_store import resolve_model_path

    path = resolve_model_path(config.model, Path(config.model_dir) if config.model_dir else None)
    state_dir = prompt_state_dir(config)
    if config.isolation == "process":
        from rlgpt.llm.isolated import IsolatedBackend

        return IsolatedBackend(path, n_ctx=config.n_ctx, n_threads=config.threads, log_dir=log_dir,
                               crash_retries=config.crash_retries, timeout_s=config.timeout_s,
                               prompt_cache_mb=config.prompt_cache_mb, prompt_cache_dir=state_dir)
    return EmbeddedBackend(path, n_ctx=config.n_ctx, n_threads=config.threads,
                           prompt_cache_mb=config.prompt_cache_mb, prompt_cache_dir=state_dir)


def prompt_state_dir(config: LLMConfig) -> Path | None:
    """Where the embedded model keeps prompt states on disk (``llm.prompt_cache_dir``; None = in memory)."""
    if config.prompt_cache_dir == "" or config.prompt_cache_mb <= 0:
        return None
    if config.prompt_cache_dir is None:
        from rlgpt.llm.embedded import default_prompt_state_dir

        return default_prompt_state_dir()
    return Path(config.prompt_cache_dir).expanduser()


def build_client(config: LLMConfig, *, metrics_sink: MetricsSink | None = None,
                 backend: Backend | None = None, log_dir: str | os.PathLike[str] | None = None) -> LLMClient:
    """Create the LLMClient `config` describes; pass `backend` to share one loaded model between clients
    (else one is built, its logs in `log_dir`: `build_backend`)."""
    cache = ResponseCache(config.cache_dir) if config.cache_dir else None
    if config.replay_only:
        model_id = backend.model_id if backend is not None else _replay_model_id(config)
        return LLMClient(backend, cache=cache, replay_only=True, model_id=model_id,
                         schema_retries=config.schema_retries, default_sampling=config.sampling,
                         metrics_sink=metrics_sink, n_ctx=config.n_ctx)
    backend = backend or build_backend(config, log_dir)
    # A shared backend loaded with its own window is fitted to the smaller of the two.
    n_ctx = min(config.n_ctx, getattr(backend, "n_ctx", None) or config.n_ctx)
    return LLMClient(backend, cache=cache, schema_retries=config.schema_retries,
                     default_sampling=config.sampling, metrics_sink=metrics_sink, n_ctx=n_ctx)


def _replay_model_id(config: LLMConfig) -> str:
    # Must equal the id the live backend used when recording, without loading or contacting it.
    if config.backend == "http":
        if not config.model:
            raise ConfigError("replay_only with the http backend needs llm.model (the served model name)")
        return f"http:{config.model}"
    from rlgpt.llm.model_store import MODELS

    filename = MODELS[config.model].filename if config.model in MODELS else Path(config.model).name
    return f"embedded:{filename}"
