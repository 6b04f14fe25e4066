"""The embedded model behind a process boundary: llama.cpp's OpenAI server in a child process on
127.0.0.1, spoken to over HTTP, restarted when it dies.

llama.cpp is native code: a grammar it cannot handle or any other native fault kills the process that runs
it (the issue measured exit 139 from a JSON schema). In-process that is a dead run; here it is a
`BackendCrashedError` naming the signal, and the next request starts a fresh server. A crash while a
request is in flight is retried `crash_retries` times before the error is raised.
"""

from __future__ import annotations

import os
import signal
import tempfile
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from rlgpt.llm.errors import BackendCrashedError, ConfigError, NonJSONResponseError, ServerUnavailableError
from rlgpt.llm.http import OpenAIHTTPBackend
from rlgpt.llm.llama_server import BATCHED_PATH
from rlgpt.llm.serve import ManagedServer, free_port, llama_server_command
from rlgpt.llm.types import Completion, Message, SamplingParams
from rlgpt.procs import stderr_to

_ALIAS = "embedded"
T = TypeVar("T")


def describe_exit(returncode: int | None) -> str:
    """'killed by SIGSEGV (native crash)' / 'exited with status 1'."""
    if returncode is None:
        return "is still running"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        fatal = name in ("SIGSEGV", "SIGABRT", "SIGBUS", "SIGILL")
        native = " (a native crash in llama.cpp)" if fatal else ""
        return f"was killed by {name}{native}"
    return f"exited with status {returncode}"


def completions_of(out: Any, n: int, url: str) -> list[Completion]:
    """The `n` completions of a `BATCHED_PATH` answer `out` (from `url`, for the error message).

    Raises:
        NonJSONResponseError: `out` is not such an answer.
    """
    try:
        made = [Completion(text=str(c["text"]), prompt_tokens=int(c["prompt_tokens"]),
                           completion_tokens=int(c["completion_tokens"]),
                           finish_reason=str(c["finish_reason"]), model=str(out["model"]),
                           cached_tokens=int(c["cached_tokens"]))
                for c in out["completions"]]
    except (KeyError, TypeError, ValueError) as exc:
        raise NonJSONResponseError(
            f"{url} answered without its completions ({exc!r}): {str(out)[:200]}") from None
    if len(made) != n:
        raise NonJSONResponseError(f"{url} answered {len(made)} completions for {n} samplings")
    return made


class IsolatedBackend:
    """A GGUF model served by llama.cpp in a child process; same interface and cache identity as
    `EmbeddedBackend` (the same weights give the same cache entries)."""

    def __init__(self, model_path: str | os.PathLike[str], *, n_ctx: int = 4096, n_threads: int | None = None,
                 crash_retries: int = 1, ready_timeout_s: float = 300.0, timeout_s: float = 600.0,
                 log_dir: str | os.PathLike[str] | None = None, model_id: str | None = None,
                 prompt_cache_mb: int = 0, prompt_cache_dir: str | os.PathLike[str] | None = None) -> None:
        """Describe the server; it starts on the first request (or `start()`).

        Args:
            model_path: a GGUF file.
            n_ctx: context window in tokens.
            n_threads: CPU threads of the server (None = all cores).
            crash_retries: times a request is re-sent to a restarted server after the server died under it.
            ready_timeout_s: how long a (re)start may take to load the model.
            timeout_s: per-request timeout.
            log_dir: where the server's log goes (server-<n>.log per start); default a temporary directory.
            model_id: cache identity; defaults to "embedded:<file name>" like EmbeddedBackend.
            prompt_cache_mb: the server's cache of prompt states (shared prefixes; 0 = none).
            prompt_cache_dir: keep them on disk here (as `EmbeddedBackend` does; None = in the server's RAM),
                so a restarted server or a new run starts warm.
        """
        path = Path(model_path)
        if not path.is_file():
            raise ConfigError(f"model file {path} does not exist")
        if crash_retries < 0:
            raise ConfigError(f"crash_retries must be >= 0, got {crash_retries}")
        self.path = path
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        self.crash_retries = crash_retries
        self.ready_timeout_s = ready_timeout_s
        self.timeout_s = timeout_s
        self.log_dir = Path(log_dir) if log_dir else Path(tempfile.mkdtemp(prefix="rlgpt-llm-"))
        self._model_id = model_id or f"embedded:{path.name}"
        self.server: ManagedServer | None = None
        self._http: OpenAIHTTPBackend | None = None
        self.starts = 0
        """Server processes started so far."""
        self.crashes = 0
        """Server deaths seen so far."""
        self.in_flight = threading.Event()
        """Set while a request is being answered (for monitoring, and for tests that kill the server)."""
        self._lock = threading.Lock()
        self._vocab: Any = None
        self.prompt_cache_mb = prompt_cache_mb
        self.prompt_cache_dir = prompt_cache_dir

    @property
    def model_id(self) -> str:
        """Stable identity of the served weights (for cache keys)."""
        return self._model_id

    @property
    def pid(self) -> int | None:
        """Process id of the running server, if any."""
        proc = self.server.process if self.server is not None else None
        return proc.pid if proc is not None and proc.poll() is None else None

    def count_tokens(self, text: str) -> int:
        """Tokens of `text` by the model's tokenizer, loaded here without the weights (``vocab_only``: the
        server process holds the model)."""
        if self._vocab is None:
            from rlgpt.llm.embedded import _import_llama

            self.log_dir.mkdir(parents=True, exist_ok=True)
            # llama.cpp warns on stderr about the context of a model without weights (n_ctx_train 0).
            with stderr_to(self.log_dir / "tokenizer.log"):
                self._vocab = _import_llama().Llama(model_path=str(self.path), vocab_only=True, verbose=False)
        return len(self._vocab.tokenize(text.encode("utf-8"), add_bos=False, special=True))

    def start(self) -> IsolatedBackend:
        """Start the server unless it is running; block until it answers."""
        if self.pid is not None:
            return self
        self.starts += 1
        port = free_port()
        command = llama_server_command(self.path, port=port, n_ctx=self.n_ctx, n_threads=self.n_threads,
                                       model_alias=_ALIAS, prompt_cache_mb=self.prompt_cache_mb,
                                       prompt_cache_dir=self.prompt_cache_dir)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.server = ManagedServer(command, host="127.0.0.1", port=port,
                                    log_path=self.log_dir / f"server-{self.starts}.log",
                                    threads=self.n_threads, ready_timeout_s=self.ready_timeout_s).start()
        self._http = OpenAIHTTPBackend(self.server.base_url, model=_ALIAS, dialect="json_object",
                                       timeout_s=self.timeout_s, max_retries=0)
        return self

    def _died(self) -> int | None:
        """The server's exit status if it died (waiting briefly: a reset connection can beat the exit)."""
        proc = self.server.process if self.server is not None else None
        if proc is None:
            return None
        try:
            return proc.wait(timeout=5)
        except Exception:  # still running: the failure was not a crash
            return None

    def _log_tail(self) -> str:
        log = self.server.log_path if self.server is not None else None
        if log is None or not log.exists():
            return ""
        return log.read_text(errors="replace")[-600:]

    def _call(self, request: Callable[[OpenAIHTTPBackend], T]) -> T:
        """`request` on the child server's HTTP client; a crash restarts the server and retries (see
        `crash_retries`)."""
        with self._lock:
            failure = ""
            returncode: int | None = None
            for _ in range(self.crash_retries + 1):
                self.start()
                assert self._http is not None
                self.in_flight.set()
                try:
                    return request(self._http)
                except ServerUnavailableError:
                    returncode = self._died()
                    if returncode is None:
                        raise
                finally:
                    self.in_flight.clear()
                self.crashes += 1
                failure = f"the llama.cpp server {describe_exit(returncode)}; log tail: {self._log_tail()}"
            raise BackendCrashedError(
                f"model {self.path.name}: {failure.strip()} (restarted; gave up on this request after "
                f"{self.crash_retries + 1} attempts)", returncode)

    def complete(self, messages: list[Message], schema: dict[str, Any] | None,
                 sampling: SamplingParams) -> Completion:
        """One reply from the child server; a crash restarts it and retries (see `crash_retries`)."""
        return self._call(lambda http: http.complete(messages, schema, sampling))

    def complete_many(self, messages: list[Message], samplings: Sequence[SamplingParams]) -> list[Completion]:
        """One reply per entry of `samplings` to the same prompt (no schema: code replies), decoded together
        in the child server (`rlgpt.llm.llama_server.BatchedCompletions`, one request: llama-cpp-python's
        server answers concurrent requests one after another), with `complete`'s crash handling.

        Raises:
            ContextOverflowError: the prompt does not fit the model's context.
        """
        if not samplings:
            return []
        body = {"model": _ALIAS, "messages": messages, "samplings": [s.to_dict() for s in samplings]}

        def request(http: OpenAIHTTPBackend) -> Any:
            url = http.base_url.removesuffix("/v1") + BATCHED_PATH
            return completions_of(http.request_url("POST", url, body), len(samplings), url)

        return self._call(request)

    def close(self) -> None:
        """Stop the server."""
        if self.server is not None:
            self.server.stop()
