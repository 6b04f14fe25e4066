"""The LLM layer: one client over an embedded llama.cpp model or any OpenAI-compatible server.

`build_client(LLMConfig(...))` gives an LLMClient with response cache, schema-checked structured replies
and per-role token/latency metrics. Backends: `embedded.EmbeddedBackend` (CPU, GGUF assembled from PyPI
parts by `model_store`) and `http.OpenAIHTTPBackend` (vLLM or llama.cpp's server).
"""

from rlgpt.llm.cache import ResponseCache
from rlgpt.llm.client import LLMClient, RoleUsage
from rlgpt.llm.config import LLMConfig, build_backend, build_client
from rlgpt.llm.errors import (
    BackendCrashedError,
    BackendUnavailableError,
    CacheMissError,
    ConfigError,
    ContextOverflowError,
    HTTPStatusError,
    LLMError,
    ModelIntegrityError,
    ModelPartsMissingError,
    NonJSONResponseError,
    SchemaValidationError,
    ServerUnavailableError,
)
from rlgpt.llm.types import Backend, Completion, Message, SamplingParams

__all__ = [
    "Backend",
    "BackendCrashedError",
    "BackendUnavailableError",
    "CacheMissError",
    "Completion",
    "ConfigError",
    "ContextOverflowError",
    "HTTPStatusError",
    "LLMClient",
    "LLMConfig",
    "LLMError",
    "Message",
    "ModelIntegrityError",
    "ModelPartsMissingError",
    "NonJSONResponseError",
    "ResponseCache",
    "RoleUsage",
    "SamplingParams",
    "SchemaValidationError",
    "ServerUnavailableError",
    "build_backend",
    "build_client",
]
