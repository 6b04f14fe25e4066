"""Embedded backend: a GGUF model run in-process by llama-cpp-python on the CPU."""

from __future__ import annotations

import contextlib
import functools
import os
import threading
from collections.abc import Callable, Iterable, MutableMapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from rlgpt.llm.batched import BatchedSampler
from rlgpt.llm.errors import BackendUnavailableError, ConfigError, ContextOverflowError
from rlgpt.llm.types import Completion, Message, SamplingParams
from rlgpt.procs import stderr_to

OPENMP_ENV = {"OMP_WAIT_POLICY": "PASSIVE"}
"""llama.cpp's OpenMP workers busy-wait between ops by default; on a shared 2-core box that steals the CPU
from env workers and other processes. It must be in the environment before the OpenMP runtime loads (the
first llama import), in this process and in every server process (`rlgpt.llm.serve.server_env`); the
Makefile exports the same for the processes `make` starts."""


def quiet_openmp(env: MutableMapping[str, str]) -> None:
    """Add `OPENMP_ENV` to `env` where it does not already say otherwise."""
    for key, value in OPENMP_ENV.items():
        env.setdefault(key, value)


quiet_openmp(os.environ)

_OVERFLOW_MARKERS = ("exceed context window", "context window")
T = TypeVar("T")


def _import_llama() -> Any:
    try:
        import llama_cpp
    except ImportError:
        raise BackendUnavailableError(
            "the embedded LLM needs llama-cpp-python; run `pip install 'rlgpt[llm]'`"
        ) from None
    return llama_cpp


def most_redundant(keys: Iterable[tuple[int, ...]], new: tuple[int, ...]) -> tuple[int, ...] | None:
    """The kept prompt to evict for `new`: the one sharing the longest token prefix with it (the oldest of
    equals), whose state adds least beside `new`'s; None when `new` is the only one.

    Evicting the oldest instead lets one role's repeated calls (six fast-agent prompts of an iteration, the
    same preamble and instructions each) push out every other role's state: measured here, the critic of a
    run's next iteration found only the preamble kept and computed 1,300 prompt tokens again."""
    common_prefix = _import_llama().Llama.longest_token_prefix  # what the caches' own lookup measures
    victim, shared = None, -1
    for key in keys:
        if key != new and (n := common_prefix(key, new)) > shared:
            victim, shared = key, n
    return victim


@functools.cache
def prefix_state_cache() -> type:
    """llama-cpp-python's RAM cache of prompt states, bounded by what the states really hold (a class made
    on first use: llama_cpp is imported lazily).

    A saved state carries the logits of every prompt token (n_tokens x vocab floats: 0.9 GB for a
    1,500-token prompt on Qwen's 152k vocabulary) beside the KV state, and `LlamaRAMCache` counts only the
    KV state against its capacity: a "1 GiB" cache of the 0.5B grew past 10 GiB in a test run. Only the
    last token's logits are ever read back here (`load_state` broadcasts them; continuing a prompt
    evaluates at least one new token; no caller asks for past logits), so states keep that row, and the
    capacity counts every array a state holds.
    """
    llama_cpp = _import_llama()

    class PrefixStateCache(llama_cpp.LlamaRAMCache):
        def __setitem__(self, key: Any, value: Any) -> None:
            value.scores = value.scores[-1:].copy()
            key = tuple(key)
            self.cache_state.pop(key, None)
            self.cache_state[key] = value
            while self.cache_size > self.capacity_bytes and len(self.cache_state) > 1:
                del self.cache_state[most_redundant(self.cache_state, key)]

        @property
        def cache_size(self) -> int:
            return sum(int(s.llama_state_size) + s.scores.nbytes + s.input_ids.nbytes
                       for s in self.cache_state.values())

    return PrefixStateCache


PROMPT_STATE_DIR_ENV = "RLGPT_PROMPT_STATE_DIR"
"""Where prompt states are kept on disk by default (`default_prompt_state_dir`)."""


def default_prompt_state_dir() -> Path:
    """The disk home of kept prompt states: $RLGPT_PROMPT_STATE_DIR, else $XDG_CACHE_HOME/rlgpt/prompt_states,
    else ~/.cache/rlgpt/prompt_states (next to the assembled models, `rlgpt.llm.model_store`)."""
    from rlgpt.llm.model_store import rlgpt_cache_dir

    override = os.environ.get(PROMPT_STATE_DIR_ENV)
    if override:
        return Path(override).expanduser()
    return rlgpt_cache_dir() / "prompt_states"


def prompt_state_folder(base: str | os.PathLike[str], model_path: str | os.PathLike[str], n_ctx: int) -> Path:
    """The folder of one model's kept states under `base`: a state is only loaded into the weights, window
    and llama.cpp build that saved it (the model file's name and size, ``n_ctx``, llama-cpp-python's
    version), so a state from another one is never offered."""
    import importlib.metadata

    path = Path(model_path)
    version = importlib.metadata.version("llama-cpp-python")
    return Path(base) / f"{path.stem}-{path.stat().st_size}-ctx{n_ctx}-llama{version}"


@functools.cache
def prefix_state_disk_cache() -> type:
    """`prefix_state_cache` on disk (llama-cpp-python's `LlamaDiskCache`, a SQLite-indexed folder that
    processes share safely): a new process, or another run, starts from the states earlier ones kept.

    Differs from `LlamaDiskCache` where that one breaks here: a state keeps only its last logits row (as in
    RAM; a full state of a 1,500-token prompt is ~0.9 GB of logits); a read keeps the state instead of
    popping it (another process may want the same prefix); and a state that cannot be read (deleted by
    another process's eviction in between, or a damaged file) is a miss, never a failed request.
    """
    llama_cpp = _import_llama()

    class PrefixStateDiskCache(llama_cpp.LlamaDiskCache):
        def __init__(self, cache_dir: str, capacity_bytes: int) -> None:
            super().__init__(cache_dir, capacity_bytes=capacity_bytes)
            # diskcache culls by its own rule (least recently stored, past its 1 GiB size limit) before ours
            # runs, and then can take the new state too: only `most_redundant` eviction decides here.
            self.cache.reset("size_limit", capacity_bytes)
            self.cache.reset("cull_limit", 0)

        def __getitem__(self, key: Any) -> Any:
            try:
                found = self._find_longest_prefix_key(tuple(key))
                value = None if found is None else self.cache.get(found)
            except Exception:  # sqlite or unpickling errors of a damaged or concurrently evicted entry
                value = None
            if value is None or not hasattr(value, "input_ids"):
                raise KeyError("no kept state shares a prefix with this prompt")
            return value

        def __contains__(self, key: Any) -> bool:
            try:
                return self._find_longest_prefix_key(tuple(key)) is not None
            except Exception:
                return False

        def __setitem__(self, key: Any, value: Any) -> None:
            value.scores = value.scores[-1:].copy()
            key = tuple(key)
            try:
                self.cache.set(key, value)
                while self.cache_size > self.capacity_bytes and len(self.cache) > 1:
                    self.cache.delete(most_redundant(iter(self.cache), key))
            except Exception:  # a full or read-only disk costs the reuse, not the request
                pass

    return PrefixStateDiskCache


def count_computed(llama: Any, call: Callable[[], T]) -> tuple[T, int]:
    """``call()`` (one completion on `llama`) and how many prompt tokens it computed; the rest of the prompt
    was served from kept state (the context's previous prompt or a loaded prompt state).

    `Llama.generate` evaluates what its prefix reuse left of the prompt in one `eval` call, then one call per
    sampled token (with its draft tokens, if any): the first call's length is the prompt part computed.
    llama.cpp's own prompt-eval counter cannot tell them apart once draft tokens are verified in batches.
    """
    evaluated: list[int] = []
    original = llama.eval

    def eval_counted(tokens: Any) -> Any:
        evaluated.append(len(tokens))
        return original(tokens)

    llama.eval = eval_counted  # an instance attribute: shadows the method for this call only
    try:
        result = call()
    finally:
        del llama.eval
    return result, (evaluated[0] if evaluated else 0)


class EmbeddedBackend:
    """A llama.cpp model loaded once; structured output via a grammar compiled from the JSON schema."""

    def __init__(self, model_path: str | os.PathLike[str], *, n_ctx: int = 4096, n_threads: int | None = None,
                 n_batch: int = 512, model_id: str | None = None, verbose: bool = False,
                 prompt_cache_mb: int = 0, prompt_cache_dir: str | os.PathLike[str] | None = None) -> None:
        """Load the model.

        Args:
            model_path: a GGUF file (see model_store.resolve_model_path).
            n_ctx: context window in tokens (prompt + completion).
            n_threads: CPU threads for generation and prompt processing; None = all cores.
            n_batch: prompt tokens processed per batch.
            model_id: cache identity; defaults to "embedded:<file name>".
            verbose: let llama.cpp print its load and timing logs.
            prompt_cache_mb: keep llama.cpp states of earlier prompts (up to this many MiB), so a request
                sharing a prefix with one of them (each role's rules + API) computes only the rest; 0 = only
                the prefix of the previous request is reused (llama.cpp's own behaviour).
            prompt_cache_dir: keep those states on disk here instead (`prompt_state_folder`: one folder
                per model file, window and llama.cpp build), so a new process starts warm.
        """
        path = Path(model_path)
        if not path.is_file():
            raise ConfigError(f"model file {path} does not exist")
        if n_ctx < 64:
            raise ConfigError(f"n_ctx must be >= 64 tokens, got {n_ctx}")
        threads = n_threads or os.cpu_count() or 1
        if threads < 1:
            raise ConfigError(f"n_threads must be >= 1, got {n_threads}")
        llama_cpp = _import_llama()
        self.path = path
        self.n_ctx = n_ctx
        self.n_threads = threads
        self._model_id = model_id or f"embedded:{path.name}"
        # Not verbose: llama.cpp's load warnings (printed whatever `verbose` says) go nowhere.
        with contextlib.nullcontext() if verbose else stderr_to(os.devnull):
            self._llama = llama_cpp.Llama(model_path=str(path), n_ctx=n_ctx, n_threads=threads,
                                          n_threads_batch=threads, n_batch=n_batch, verbose=verbose)
        if prompt_cache_mb > 0:
            capacity = prompt_cache_mb << 20
            if prompt_cache_dir:
                # Keyed by model (file, window, build) and, inside, by the prompt's tokens.
                folder = prompt_state_folder(prompt_cache_dir, path, n_ctx)
                self._llama.set_cache(prefix_state_disk_cache()(str(folder), capacity_bytes=capacity))
            else:
                self._llama.set_cache(prefix_state_cache()(capacity_bytes=capacity))
        # One llama context cannot decode two requests at once.
        self._lock = threading.Lock()
        self._batched = BatchedSampler(self._llama, name=path.name)  # `complete_many`'s decoder

    @property
    def model_id(self) -> str:
        """Stable identity of the loaded weights (for cache keys)."""
        return self._model_id

    @property
    def llama(self) -> Any:
        """The underlying llama_cpp.Llama (for benchmarks and low-level use; not thread-safe)."""
        return self._llama

    def count_tokens(self, text: str) -> int:
        """Return how many tokens `text` takes with this model's tokenizer."""
        return len(self._llama.tokenize(text.encode("utf-8"), add_bos=False, special=True))

    def complete(self, messages: list[Message], schema: dict[str, Any] | None,
                 sampling: SamplingParams) -> Completion:
        """Generate one reply; with `schema`, constrained by llama.cpp's JSON-schema grammar."""
        response_format = {"type": "json_object", "schema": schema} if schema is not None else None
        with self._lock:
            try:
                out, computed = count_computed(self._llama, lambda: self._llama.create_chat_completion(
                    messages=messages, response_format=response_format, temperature=sampling.temperature,
                    top_p=sampling.top_p, max_tokens=sampling.max_tokens, seed=sampling.seed,
                ))
            except ValueError as exc:
                if any(marker in str(exc) for marker in _OVERFLOW_MARKERS):
                    raise ContextOverflowError(
                        f"prompt does not fit the {self.n_ctx}-token context of {self.path.name} ({exc}); "
                        f"shorten the prompt or raise n_ctx"
                    ) from None
                raise
        choice = out["choices"][0]
        usage = out.get("usage") or {}
        prompt_tokens = int(usage.get("prompt_tokens", 0))
        return Completion(
            text=choice["message"]["content"] or "",
            prompt_tokens=prompt_tokens,
            completion_tokens=int(usage.get("completion_tokens", 0)),
            finish_reason=str(choice.get("finish_reason") or "stop"),
            model=self._model_id,
            cached_tokens=max(prompt_tokens - computed, 0),
        )

    def complete_many(self, messages: list[Message], samplings: Sequence[SamplingParams]) -> list[Completion]:
        """One reply per entry of `samplings` to the same prompt (no schema: code replies), decoded together
        (`rlgpt.llm.batched.BatchedSampler.complete_many`: several sequences per llama.cpp step over the
        prompt's shared KV cells). One sequence at temperature 0 is exactly what `complete` returns right
        after it (see there for when rounding differs).

        Raises:
            ContextOverflowError: the prompt does not fit the model's context.
        """
        with self._lock:
            return self._batched.complete_many(messages, samplings, model=self._model_id)

    def close(self) -> None:
        """Free the model's memory now rather than at garbage collection (waits for a running call)."""
        with self._lock:
            self._batched.close()
            self._llama.close()
