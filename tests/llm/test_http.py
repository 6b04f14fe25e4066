"""HTTP backend against a real llama.cpp server (json_object dialect) and a vLLM-shaped front
(json_schema / structured_outputs dialects) backed by the real model; every failure mode's error."""

from __future__ import annotations

import json
import time
import urllib.request

import jsonschema
import pytest

from rlgpt.llm import (
    ContextOverflowError,
    HTTPStatusError,
    LLMClient,
    NonJSONResponseError,
    SamplingParams,
    SchemaValidationError,
    ServerUnavailableError,
)
from rlgpt.llm.http import OpenAIHTTPBackend, cached_tokens
from rlgpt.llm.llama_server import translate_response_format
from rlgpt.llm.serve import ManagedServer, free_port

SCHEMA = {
    "type": "object",
    "properties": {"resource": {"type": "string", "enum": ["wood", "stone", "water"]},
                   "count": {"type": "integer"}},
    "required": ["resource", "count"],
    "additionalProperties": False,
}
MESSAGES = [{"role": "user", "content": "Trees give which resource? Answer as JSON with a count of 3."}]
SAMPLING = SamplingParams(max_tokens=40)


def _check(data: dict) -> None:
    assert data["resource"] in ("wood", "stone", "water") and isinstance(data["count"], int)


# -- real llama.cpp server ---------------------------------------------------------------------------------

def test_llama_server_json_object_dialect(llama_server: ManagedServer) -> None:
    backend = OpenAIHTTPBackend(llama_server.base_url)
    assert backend.dialect == "json_object"
    assert backend.model == "qwen-0.5b"
    client = LLMClient(backend, default_sampling=SAMPLING)
    _check(client.structured("slow", MESSAGES, SCHEMA))
    assert client.metrics()["llm/slow/prompt_tokens"] > 10


def test_llama_server_accepts_openai_json_schema_format(llama_server: ManagedServer) -> None:
    # Exactly what the official `openai` client's structured-output helpers send; llama-cpp-python's own
    # server answers it with HTTP 500 (its response_format type allows only text/json_object).
    body = {"model": "qwen-0.5b", "messages": MESSAGES, "max_tokens": 40, "temperature": 0,
            "response_format": {"type": "json_schema",
                                "json_schema": {"name": "reply", "schema": SCHEMA, "strict": True}}}
    request = urllib.request.Request(llama_server.base_url + "/chat/completions",
                                     data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=300) as response:
        assert response.status == 200
        reply = json.loads(response.read())
    data = json.loads(reply["choices"][0]["message"]["content"])
    jsonschema.validate(data, SCHEMA)
    _check(data)
    backend = OpenAIHTTPBackend(llama_server.base_url, dialect="json_schema", max_retries=0)
    _check(LLMClient(backend, default_sampling=SAMPLING).structured("slow", MESSAGES, SCHEMA))


def test_llama_server_reports_the_prompt_tokens_served_from_kept_state(llama_server: ManagedServer) -> None:
    client = LLMClient(OpenAIHTTPBackend(llama_server.base_url),
                       default_sampling=SamplingParams(max_tokens=1))
    # A system prompt no other test sends: the first request computes all of it.
    system = {"role": "system", "content": "Rules: " + ", ".join(f"rule {i} is kept" for i in range(60))}
    client.chat("fast", [system, {"role": "user", "content": "Which rule is first?"}])
    cold = client.metrics()
    # At most the chat template's first tokens were kept from another test's request.
    assert cold["llm/cached_tokens"] < 10 and cold["llm/prefill_tokens"] > 300
    client.chat("fast", [system, {"role": "user", "content": "Which rule is last?"}])
    warm = client.metrics()
    # Only the new question was computed; the server said so in usage.prompt_tokens_details.
    assert warm["llm/cached_tokens"] - cold["llm/cached_tokens"] > 300
    assert warm["llm/prefill_tokens"] - cold["llm/prefill_tokens"] < 20


@pytest.mark.parametrize("usage, cached", [
    ({"prompt_tokens": 9}, 0), ({"prompt_tokens_details": None}, 0),
    ({"prompt_tokens_details": {"cached_tokens": 7}}, 7),
    ({"prompt_tokens_details": {"cached_tokens": -3}}, 0),
    ({"prompt_tokens_details": {"cached_tokens": "7"}}, 0), ({"prompt_tokens_details": [7]}, 0)])
def test_cached_tokens_are_read_from_openai_usage_details(usage: dict, cached: int) -> None:
    assert cached_tokens(usage) == cached


def test_json_schema_translation_leaves_other_requests_alone() -> None:
    fmt = {"type": "json_schema", "json_schema": {"name": "r", "schema": SCHEMA, "strict": True}}
    out = translate_response_format({"model": "m", "response_format": fmt})
    assert out == {"model": "m", "response_format": {"type": "json_object", "schema": SCHEMA}}
    for body in ({"model": "m"}, {"response_format": {"type": "json_object", "schema": SCHEMA}},
                 {"response_format": {"type": "text"}}):
        assert translate_response_format(body) is body


def test_llama_server_context_overflow(llama_server: ManagedServer) -> None:
    backend = OpenAIHTTPBackend(llama_server.base_url, max_retries=0)
    with pytest.raises(ContextOverflowError, match="exceed the model's context"):
        backend.complete([{"role": "user", "content": "wood stone " * 1500}], None, SAMPLING)


# -- vLLM-shaped front ---------------------------------------------------------------------------------

@pytest.mark.parametrize("dialect", ["auto", "structured_outputs"])
def test_vllm_dialects(front, dialect: str) -> None:
    backend = OpenAIHTTPBackend(front.base_url, dialect=dialect)
    assert backend.dialect == ("json_schema" if dialect == "auto" else dialect)
    _check(LLMClient(backend, default_sampling=SAMPLING).structured("fast", MESSAGES, SCHEMA))
    sent = front.requests[-1]
    if dialect == "auto":
        assert sent["response_format"]["json_schema"]["schema"] == SCHEMA
    else:
        assert sent["structured_outputs"] == {"json": SCHEMA}


def test_vllm_rejects_llama_dialect(front) -> None:
    backend = OpenAIHTTPBackend(front.base_url, dialect="json_object", max_retries=0)
    with pytest.raises(HTTPStatusError, match="HTTP 400: response_format json_object takes no schema"):
        backend.complete(MESSAGES, SCHEMA, SAMPLING)


def test_schema_failure_reasks_with_the_validation_error(front) -> None:
    content = '{"resource": "gold", "count": 1}'
    wrong = {"choices": [{"message": {"content": content}, "finish_reason": "stop"}],
             "usage": {"prompt_tokens": 5, "completion_tokens": 5}}
    front.script.append((200, json.dumps(wrong).encode()))
    client = LLMClient(OpenAIHTTPBackend(front.base_url), default_sampling=SAMPLING, schema_retries=2)
    _check(client.structured("critic", MESSAGES, SCHEMA))
    assert len(front.requests) == 2
    repair = front.requests[1]["messages"][-1]["content"]
    assert "does not match the JSON schema at resource: 'gold' is not one of" in repair
    assert client.metrics()["llm/critic/calls"] == 2


def test_schema_failure_gives_up_after_n_reasks(front) -> None:
    for content in ('{"resource": "wood"}', "not json at all", '{"resource": "wood", "count": "3"}'):
        body = {"choices": [{"message": {"content": content}, "finish_reason": "stop"}], "usage": {}}
        front.script.append((200, json.dumps(body).encode()))
    client = LLMClient(OpenAIHTTPBackend(front.base_url), default_sampling=SAMPLING, schema_retries=2)
    with pytest.raises(SchemaValidationError, match="no schema-valid reply after 3 attempts") as info:
        client.structured("critic", MESSAGES, SCHEMA)
    assert "'count' is a required property" in info.value.errors[0]
    assert "not valid JSON" in info.value.errors[1]
    assert "'3' is not of type 'integer'" in info.value.errors[2]


def test_a_reply_or_body_nested_past_the_parser_is_refused_not_raised(front) -> None:
    # json.loads raises RecursionError (not ValueError) on "[[[...]]]" 20,000 deep: as a reply's content it
    # is one invalid attempt, as the response body a NonJSONResponseError; it crashed a whole run before.
    bomb = "[" * 20000 + "]" * 20000
    body = {"choices": [{"message": {"content": bomb}, "finish_reason": "stop"}], "usage": {}}
    front.script.append((200, json.dumps(body).encode()))
    client = LLMClient(OpenAIHTTPBackend(front.base_url), default_sampling=SAMPLING, schema_retries=0)
    with pytest.raises(SchemaValidationError) as info:
        client.structured("critic", MESSAGES, SCHEMA)
    assert "nests arrays or objects far too deeply" in info.value.errors[0]
    front.script.append((200, bomb.encode()))
    with pytest.raises(NonJSONResponseError, match="non-JSON body"):
        OpenAIHTTPBackend(front.base_url, max_retries=0).complete(MESSAGES, None, SAMPLING)


def test_server_down() -> None:
    backend = OpenAIHTTPBackend(f"http://127.0.0.1:{free_port()}/v1", model="m", dialect="json_schema",
                                max_retries=2, backoff_s=0.01)
    with pytest.raises(ServerUnavailableError, match="cannot reach the LLM server .* after 3 attempts"):
        backend.complete(MESSAGES, None, SAMPLING)


def test_5xx_is_retried_with_backoff_then_succeeds(front) -> None:
    front.script += [(503, b'{"error": {"message": "busy"}}'), (502, b"bad gateway")]
    backend = OpenAIHTTPBackend(front.base_url, max_retries=3, backoff_s=0.01)
    _check(LLMClient(backend, default_sampling=SAMPLING).structured("slow", MESSAGES, SCHEMA))
    assert len(front.requests) == 3


def test_persistent_5xx_and_4xx_errors(front) -> None:
    front.script += [(500, b'{"error": {"message": "boom"}}')] * 2
    backend = OpenAIHTTPBackend(front.base_url, max_retries=1, backoff_s=0.01)
    with pytest.raises(HTTPStatusError, match="HTTP 500 on all 2 attempts") as info:
        backend.complete(MESSAGES, SCHEMA, SAMPLING)
    assert info.value.status == 500
    front.requests.clear()
    front.script.append((401, b'{"error": {"message": "bad key"}}'))
    with pytest.raises(HTTPStatusError, match="HTTP 401: bad key; check the API key"):
        backend.complete(MESSAGES, SCHEMA, SAMPLING)
    assert len(front.requests) == 1  # a 4xx is not retried


def test_non_json_body(front) -> None:
    front.script.append((200, b"<html>proxy login</html>"))
    backend = OpenAIHTTPBackend(front.base_url, max_retries=0)
    with pytest.raises(NonJSONResponseError, match="non-JSON body .*proxy login"):
        backend.complete(MESSAGES, SCHEMA, SAMPLING)


def test_vllm_context_overflow_message(front) -> None:
    message = ("This model's maximum context length is 2048 tokens. However, you requested 4000 tokens "
               "(3960 in the messages, 40 in the completion).")
    front.script.append((400, json.dumps({"object": "error", "message": message, "code": 400}).encode()))
    with pytest.raises(ContextOverflowError, match="maximum context length is 2048"):
        OpenAIHTTPBackend(front.base_url, max_retries=0).complete(MESSAGES, SCHEMA, SAMPLING)


def test_timeout_counts_as_unavailable(front) -> None:
    front.delay_s = 1.0
    # The late replies are scripted so the abandoned requests do not keep the model busy.
    front.script += [(503, b'{"error": {"message": "late"}}')] * 2
    backend = OpenAIHTTPBackend(front.base_url, model="m", dialect="json_schema", timeout_s=0.2,
                                max_retries=1, backoff_s=0.01)
    with pytest.raises(ServerUnavailableError, match="after 2 attempts"):
        backend.complete(MESSAGES, None, SAMPLING)
    # The abandoned requests are still being handled; wait until both took their late reply, or they would
    # outlive the test and take (or, with the script cleared, generate with the shared model for) the next
    # test's requests.
    deadline = time.monotonic() + 60
    while front.script and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not front.script and len(front.requests) == 2
