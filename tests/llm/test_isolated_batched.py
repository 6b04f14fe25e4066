"""Several samples of one prompt decoded together inside the isolated llama.cpp server (its batched endpoint
on the server's own loaded 0.5B), as the default embedded backend of real runs sends them."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rlgpt.llm import ContextOverflowError, LLMClient
from rlgpt.llm.isolated import IsolatedBackend
from rlgpt.llm.llama_server import BATCHED_PATH, MAX_SEQUENCES
from rlgpt.llm.types import SamplingParams

MESSAGES = [{"role": "system", "content": "You write short Python functions."},
            {"role": "user", "content": "Write `def score(word)` that returns a score for a word, by any "
                                        "rule you invent. Reply with only one ```python block."}]
# Greedy replies to this prompt repeat tokens within 48: they differ unless the batched samplers penalize
# repeats as the server's chat route does (repeat_penalty 1.1 there, where `Llama` says 1.0).
REPEATING = [{"role": "user", "content": "Write a Python function that prints a 5x5 grid of '#' characters, "
                                         "then call it three times."}]
GREEDY = SamplingParams(temperature=0.0, max_tokens=48, seed=0)
SAMPLED = [SamplingParams(temperature=1.0, top_p=0.95, max_tokens=24, seed=seed) for seed in (1, 2, 3)]


@pytest.fixture(scope="module")
def isolated(small_model_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[IsolatedBackend]:
    """The real 0.5B in an isolated child server (started on first use), stopped at module end."""
    backend = IsolatedBackend(small_model_path, n_ctx=1024, n_threads=2, crash_retries=0,
                              log_dir=tmp_path_factory.mktemp("isolated_batched"))
    yield backend
    backend.close()


def _post(backend: IsolatedBackend, data: bytes, method: str = "POST") -> tuple[int, dict[str, Any]]:
    """Send `data` to the batched endpoint as it is; the status and the JSON answer."""
    backend.start()
    assert backend.server is not None
    url = backend.server.base_url.removesuffix("/v1") + BATCHED_PATH
    request = urllib.request.Request(url, data=data if method == "POST" else None, method=method,
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def _requests_logged(backend: IsolatedBackend, path: str) -> int:
    """Requests for `path` in the server's access log (uvicorn logs a request as its answer starts, before
    the client can have it)."""
    assert backend.server is not None and backend.server.log_path is not None
    return backend.server.log_path.read_text(errors="replace").count(f'"POST {path} HTTP/1.1"')


def test_one_greedy_sequence_equals_complete_and_several_samples_are_counted_consistently(
        isolated: IsolatedBackend) -> None:
    isolated.complete(REPEATING, None, SamplingParams(max_tokens=1))  # the prompt stays in the context
    # The batched call evaluates the prompt's last token again (alone), and `complete` right after it samples
    # from that very state: the same logits, then the same greedy decode, token for token.
    [alone] = isolated.complete_many(REPEATING, [GREEDY])
    single = isolated.complete(REPEATING, None, GREEDY)
    assert (alone.text, alone.prompt_tokens, alone.completion_tokens, alone.finish_reason) == \
        (single.text, single.prompt_tokens, single.completion_tokens, single.finish_reason)
    assert alone.completion_tokens == GREEDY.max_tokens and alone.cached_tokens == alone.prompt_tokens - 1

    prompt_tokens = isolated.complete_many(MESSAGES, [SamplingParams(max_tokens=1)])[0].prompt_tokens
    many = isolated.complete_many(MESSAGES, SAMPLED)
    assert len(many) == len(SAMPLED)
    assert {c.prompt_tokens for c in many} == {prompt_tokens}
    for completion, sampling in zip(many, SAMPLED, strict=True):
        assert 1 <= completion.completion_tokens <= sampling.max_tokens
        assert completion.finish_reason in ("stop", "length")
        assert (completion.finish_reason == "length") == (completion.completion_tokens == sampling.max_tokens)
        assert "<|" not in completion.text
    # The prompt was computed once (its last token: the rest was still in the context); the others share it.
    assert many[0].cached_tokens == prompt_tokens - 1
    assert all(c.cached_tokens == c.prompt_tokens for c in many[1:])
    assert len({c.text for c in many}) > 1  # distinct seeds at temperature 1
    assert isolated.starts == 1 and isolated.crashes == 0


def test_bad_bodies_are_refused_with_400_and_the_server_keeps_answering(isolated: IsolatedBackend) -> None:
    isolated.start()
    pid = isolated.pid
    good = {"messages": MESSAGES, "samplings": [{"max_tokens": 2}]}

    def body(**changes: Any) -> bytes:
        return json.dumps({**good, **changes}).encode()

    cases = [
        (b"{not json", "not JSON"),
        (b"[1, 2]", "must be a JSON object"),
        (body(messages=[]), "messages is empty"),
        (body(messages=[{"role": "robot", "content": "hi"}]), "has role 'robot'"),
        (body(samplings=[]), "samplings must be a list of 1 to"),
        (body(samplings=[{}] * (MAX_SEQUENCES + 1)), "samplings must be a list"),
        (body(samplings=[{"temperature": -1}]), "samplings[0].temperature must be >= 0"),
        (body(samplings=[{}, {"max_tokens": "9"}]), "samplings[1].max_tokens must be"),
        (body(samplings=[{"top_p": 0}]), "samplings[0].top_p must be in (0, 1]"),
        (body(samplings=[{"n": 2}]), "samplings[0] has unknown keys ['n']"),
        (body(stream=True), "unknown keys ['stream']"),
    ]
    for data, expected in cases:
        status, answer = _post(isolated, data)
        assert status == 400 and expected in answer["error"]["message"], (data[:80], answer)
    assert _post(isolated, b"", method="GET")[0] == 405
    [reply] = isolated.complete_many(MESSAGES, [SamplingParams(max_tokens=2)])
    assert 1 <= reply.completion_tokens <= 2
    assert isolated.pid == pid and isolated.crashes == 0


def test_a_prompt_longer_than_the_context_is_a_context_overflow(isolated: IsolatedBackend) -> None:
    long = [{"role": "user", "content": "word " * 1500}]  # > 1,024 tokens
    with pytest.raises(ContextOverflowError, match="does not fit the 1024-token context"):
        isolated.complete_many(long, [SamplingParams(max_tokens=4)] * 2)
    assert isolated.crashes == 0 and isolated.pid is not None


def test_the_clients_batched_call_is_one_request_to_the_batched_endpoint(isolated: IsolatedBackend) -> None:
    client = LLMClient(isolated)
    isolated.start()
    batched = _requests_logged(isolated, BATCHED_PATH)
    single = _requests_logged(isolated, "/v1/chat/completions")
    replies = client.chat_many("fast", MESSAGES, [SamplingParams(max_tokens=8, seed=s) for s in (5, 6, 7)])
    assert len(replies) == 3 and client.usage["fast"].calls == 3
    assert _requests_logged(isolated, BATCHED_PATH) == batched + 1
    assert _requests_logged(isolated, "/v1/chat/completions") == single
