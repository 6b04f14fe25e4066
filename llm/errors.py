"""Exceptions raised by the LLM layer; each message says what went wrong and what to do."""

from __future__ import annotations

from rlgpt.errors import ConfigError, RlgptError  # noqa: F401  (re-exported: the LLM layer raises it for bad llm config)


class LLMError(RlgptError, RuntimeError):
    """Base class of every error the LLM layer raises."""


class ModelIntegrityError(LLMError):
    """An assembled model file has the wrong size or sha256."""


class ModelPartsMissingError(LLMError):
    """A PyPI package holding part of a model file is not installed."""


class BackendUnavailableError(LLMError):
    """A backend (llama-cpp-python, vllm, a GPU) needed for the request is not available here."""


class ServerUnavailableError(LLMError):
    """The HTTP server could not be reached (refused, DNS, timeout) after all retries."""


class HTTPStatusError(LLMError):
    """The server answered with an HTTP error status.

    Attributes:
        status: the HTTP status code.
        body: the (possibly truncated) response body, for diagnosis.
    """

    def __init__(self, message: str, status: int, body: str) -> None:
        super().__init__(message)
        self.status = status
        self.body = body


class NonJSONResponseError(LLMError):
    """The server's HTTP body, or the model's structured reply, is not valid JSON."""


class SchemaValidationError(LLMError):
    """The model's JSON reply kept failing its JSON schema after every re-ask.

    Attributes:
        errors: one validation message per attempt, oldest first.
    """

    def __init__(self, message: str, errors: list[str]) -> None:
        super().__init__(message)
        self.errors = errors


class ContextOverflowError(LLMError):
    """The prompt plus the requested completion do not fit in the model's context window."""


class CacheMissError(LLMError):
    """Replay-only mode asked for a response that is not in the on-disk cache."""


class BackendCrashedError(LLMError):
    """The model's child process died (e.g. a native crash in llama.cpp) while answering.

    The backend restarts the process, so the next call works; this is raised once the configured retries
    after a crash are used up. Attributes:
        returncode: the child's exit status (negative: killed by that signal number).
    """

    def __init__(self, message: str, returncode: int | None) -> None:
        super().__init__(message)
        self.returncode = returncode
