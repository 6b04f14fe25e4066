"""The embedded model behind a process boundary: a real crash of the llama.cpp server process mid-request
is a typed error (or a transparent retry), and the next call works."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rlgpt.llm import BackendCrashedError, LLMClient, LLMConfig, build_backend
from rlgpt.llm.isolated import IsolatedBackend, describe_exit
from rlgpt.llm.types import SamplingParams

ASK = [{"role": "user", "content": "Count from 1 to 50, separated by spaces."}]
SHORT = SamplingParams(max_tokens=48)


def _crash_mid_request(backend: IsolatedBackend, sig: signal.Signals,
                       call: Callable[[], Any] | None = None) -> dict[str, Any]:
    """Send a request (`call`, default one completion) in a thread, kill the server with `sig` once the
    request is in flight."""
    outcome: dict[str, Any] = {}

    def ask() -> None:
        try:
            outcome["completion"] = call() if call is not None else backend.complete(ASK, None, SHORT)
        except Exception as exc:  # the test inspects it
            outcome["error"] = exc

    backend.start()
    pid = backend.pid
    assert pid is not None
    thread = threading.Thread(target=ask)
    thread.start()
    assert backend.in_flight.wait(timeout=60)
    os.kill(pid, sig)
    thread.join(timeout=600)
    assert not thread.is_alive()
    return outcome


@pytest.mark.slow
def test_segfault_mid_request_is_a_typed_error_and_the_next_call_works(small_model_path: Path,
                                                                        tmp_path: Path) -> None:
    backend = IsolatedBackend(small_model_path, n_ctx=512, n_threads=2, crash_retries=0, log_dir=tmp_path)
    try:
        client = LLMClient(backend)
        outcome = _crash_mid_request(backend, signal.SIGSEGV)
        error = outcome.get("error")
        assert isinstance(error, BackendCrashedError), outcome
        assert error.returncode == -signal.SIGSEGV and "SIGSEGV (a native crash in llama.cpp)" in str(error)
        assert backend.crashes == 1 and backend.pid is None
        reply = client.chat("slow", ASK, sampling=SHORT)  # restarts the server
        assert reply.completion_tokens > 0 and backend.starts == 2 and backend.pid is not None
    finally:
        backend.close()


@pytest.mark.slow
def test_a_crash_is_retried_on_a_restarted_server(small_model_path: Path, tmp_path: Path) -> None:
    backend = IsolatedBackend(small_model_path, n_ctx=512, n_threads=2, crash_retries=1, log_dir=tmp_path)
    try:
        outcome = _crash_mid_request(backend, signal.SIGKILL)
        assert "error" not in outcome, outcome
        assert outcome["completion"].completion_tokens > 0
        assert backend.crashes == 1 and backend.starts == 2
        assert (tmp_path / "server-1.log").exists() and (tmp_path / "server-2.log").exists()
    finally:
        backend.close()


@pytest.mark.slow
def test_a_crash_under_a_batched_request_is_retried_on_a_restarted_server(small_model_path: Path,
                                                                          tmp_path: Path) -> None:
    backend = IsolatedBackend(small_model_path, n_ctx=512, n_threads=2, crash_retries=1, log_dir=tmp_path)
    samplings = [SHORT, SamplingParams(temperature=0.8, max_tokens=48, seed=1)]
    try:
        outcome = _crash_mid_request(backend, signal.SIGKILL, lambda: backend.complete_many(ASK, samplings))
        assert "error" not in outcome, outcome
        assert [c.completion_tokens > 0 for c in outcome["completion"]] == [True, True]
        assert backend.crashes == 1 and backend.starts == 2
    finally:
        backend.close()


def test_config_builds_the_isolated_backend_by_default(small_model_path: Path) -> None:
    backend = build_backend(LLMConfig(model=str(small_model_path)))
    assert isinstance(backend, IsolatedBackend) and backend.pid is None  # nothing started yet
    assert backend.model_id == f"embedded:{small_model_path.name}"
    assert describe_exit(-11) == "was killed by SIGSEGV (a native crash in llama.cpp)"
    assert describe_exit(1) == "exited with status 1"
