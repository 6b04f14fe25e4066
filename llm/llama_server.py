"""llama-cpp-python's OpenAI server, also accepting OpenAI's standard structured-output request.

llama-cpp-python 0.3.36's server types `response_format.type` as "text" | "json_object" (with llama.cpp's
own `schema` key), so the standard `{"type": "json_schema", "json_schema": {"name", "schema", "strict"}}`
that the official `openai` client's structured-output helpers send is refused before it reaches the model.
`JsonSchemaFormat` is an ASGI middleware that rewrites that shape into llama.cpp's
`{"type": "json_object", "schema": ...}` (the same grammar-constrained decoding) and passes everything
else through untouched. `CachedTokensReport` adds what llama_cpp.server leaves out of a completion's usage:
the prompt tokens served from kept state (OpenAI's ``usage.prompt_tokens_details.cached_tokens``). Run as
``python -m rlgpt.llm.llama_server`` with llama_cpp.server's arguments.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hmac
import json
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any

from rlgpt.llm.errors import ContextOverflowError
from rlgpt.llm.types import Message, SamplingParams

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_REWRITTEN_PATHS = ("/v1/chat/completions", "/v1/completions")


def translate_response_format(body: dict[str, Any]) -> dict[str, Any]:
    """`body` with an OpenAI ``json_schema`` response_format turned into llama.cpp's ``json_object`` +
    ``schema`` (unchanged when there is nothing to translate)."""
    fmt = body.get("response_format")
    if not isinstance(fmt, dict) or fmt.get("type") != "json_schema":
        return body
    spec = fmt.get("json_schema")
    schema = spec.get("schema") if isinstance(spec, dict) else None
    translated: dict[str, Any] = {"type": "json_object"}
    if isinstance(schema, dict):
        translated["schema"] = schema
    return {**body, "response_format": translated}


async def read_body(receive: Receive, limit: int | None = None) -> bytes | None:
    """The whole request body; None when the client went away.

    Raises:
        ValueError: the body is longer than `limit` bytes (None = no limit).
    """
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None
        chunk = message.get("body", b"")
        size += len(chunk)
        if limit is not None and size > limit:
            raise ValueError(f"the request body is over {limit} bytes")
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


class JsonSchemaFormat:
    """ASGI middleware applying `translate_response_format` to completion requests."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") != "http" or scope.get("method") != "POST" or scope.get("path") not in \
                _REWRITTEN_PATHS:
            await self.app(scope, receive, send)
            return
        raw = await read_body(receive)
        if raw is None:  # client went away
            await self.app(scope, receive, send)
            return
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        if isinstance(body, dict):
            translated = translate_response_format(body)
            if translated is not body:
                raw = json.dumps(translated).encode("utf-8")
                headers = [(k, v) for k, v in scope.get("headers", []) if k.lower() != b"content-length"]
                scope = {**scope, "headers": [*headers, (b"content-length", str(len(raw)).encode())]}
        sent = False

        async def replay() -> MutableMapping[str, Any]:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": raw, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


STATE_DIR_FLAG = "--rlgpt_state_dir"
"""Our one argument beyond llama_cpp.server's: the folder of ``--cache_type disk`` (which llama_cpp.server
cannot name: its disk cache lands in ``./.cache``)."""

API_KEY_ENV = "RLGPT_API_KEY"
"""The environment variable that holds the server's API key (`rlgpt llm serve --api-key`): the key reaches
the server here, never on its command line."""


def pop_state_dir(argv: list[str]) -> str | None:
    """Remove ``STATE_DIR_FLAG DIR`` from `argv` (in place) and return DIR (None when absent)."""
    if STATE_DIR_FLAG not in argv:
        return None
    i = argv.index(STATE_DIR_FLAG)
    folder = argv[i + 1] if i + 1 < len(argv) else None
    del argv[i:i + 2]
    return folder


_CACHED_BY_ID: dict[str, int] = {}
"""Completion id -> its prompt tokens served from kept state, from the model call to the response's way out
(`CachedTokensReport` pops it): llama_cpp.server's response model drops fields its usage type lacks."""


def report_cached_tokens(llama_cls: Any) -> None:
    """Record, for every chat completion of `llama_cls`, how many of its prompt tokens were served from kept
    state (`rlgpt.llm.embedded.count_computed`), for `CachedTokensReport` to put into the response."""
    from rlgpt.llm.embedded import count_computed

    create = llama_cls.create_chat_completion

    def create_chat_completion(self: Any, *args: Any, **kwargs: Any) -> Any:
        out, computed = count_computed(self, lambda: create(self, *args, **kwargs))
        if isinstance(out, dict) and isinstance(out.get("usage"), dict):  # not a stream
            _CACHED_BY_ID[str(out.get("id"))] = max(int(out["usage"].get("prompt_tokens", 0)) - computed, 0)
        return out

    llama_cls.create_chat_completion = create_chat_completion


def with_cached_tokens(body: bytes) -> bytes:
    """A JSON completion response with OpenAI's ``usage.prompt_tokens_details.cached_tokens`` added from
    `_CACHED_BY_ID` (what vLLM reports too; `rlgpt.llm.http.cached_tokens` reads it); other bodies as they
    are."""
    try:
        out = json.loads(body)
    except ValueError:
        return body
    if not isinstance(out, dict) or not isinstance(out.get("usage"), dict):
        return body
    cached = _CACHED_BY_ID.pop(str(out.get("id")), None)
    if cached is None:
        return body
    out["usage"]["prompt_tokens_details"] = {"cached_tokens": cached}
    return json.dumps(out).encode("utf-8")


class CachedTokensReport:
    """ASGI middleware applying `with_cached_tokens` to completion responses of type application/json."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") != "http" or scope.get("path") not in _REWRITTEN_PATHS:
            await self.app(scope, receive, send)
            return
        start: MutableMapping[str, Any] | None = None
        chunks: list[bytes] = []

        async def rewrite(message: MutableMapping[str, Any]) -> None:
            nonlocal start
            if message["type"] == "http.response.start":
                headers = dict(message.get("headers", []))
                if headers.get(b"content-type", b"").startswith(b"application/json"):
                    start = message  # held until the whole body is in: its length changes
                    return
            elif message["type"] == "http.response.body" and start is not None:
                chunks.append(message.get("body", b""))
                if message.get("more_body", False):
                    return
                body = with_cached_tokens(b"".join(chunks))
                headers = [(k, v) for k, v in start.get("headers", []) if k.lower() != b"content-length"]
                await send({**start, "headers": [*headers, (b"content-length", str(len(body)).encode())]})
                await send({"type": "http.response.body", "body": body, "more_body": False})
                return
            await send(message)

        await self.app(scope, receive, rewrite)


BATCHED_PATH = "/rlgpt/v1/complete_many"
"""`BatchedCompletions`' endpoint: POST ``{"messages": [...], "samplings": [{"temperature", "top_p",
"max_tokens", "seed"}, ...], "model": optional}`` -> ``{"model": ..., "completions": [{"text",
"prompt_tokens", "completion_tokens", "finish_reason", "cached_tokens"}, ...]}``, one per sampling, in
order."""

MAX_SEQUENCES = 16
"""Samplings one batched request may ask for (each holds its own KV cells and sampler while it runs)."""

MAX_BATCHED_BODY = 8 << 20
"""Bytes a batched request's body may have (a fast-agent prompt is ~20 kB)."""

_SAMPLING_KEYS = frozenset(f.name for f in dataclasses.fields(SamplingParams))


def _number(item: dict[str, Any], key: str, where: str) -> float | None:
    value = item.get(key)
    if value is None:
        return None
    if type(value) not in (int, float) or value != value:  # bool is not a number here, nor NaN
        raise ValueError(f"{where}.{key} must be a number, got {value!r}")
    return float(value)


def parse_sampling(item: Any, where: str) -> SamplingParams:
    """One entry of a batched request's ``samplings`` as `SamplingParams` (missing keys take its defaults).

    Raises:
        ValueError: what is wrong, naming `where` (e.g. "samplings[2]").
    """
    if not isinstance(item, dict):
        raise ValueError(f"{where} must be an object with {sorted(_SAMPLING_KEYS)}, got {item!r}")
    unknown = sorted(set(item) - _SAMPLING_KEYS)
    if unknown:
        raise ValueError(f"{where} has unknown keys {unknown}; use {sorted(_SAMPLING_KEYS)}")
    values: dict[str, Any] = {}
    temperature, top_p = _number(item, "temperature", where), _number(item, "top_p", where)
    if temperature is not None:
        if temperature < 0:
            raise ValueError(f"{where}.temperature must be >= 0, got {temperature}")
        values["temperature"] = temperature
    if top_p is not None:
        if not 0 < top_p <= 1:
            raise ValueError(f"{where}.top_p must be in (0, 1], got {top_p}")
        values["top_p"] = top_p
    for key, low in (("max_tokens", 1), ("seed", None)):
        value = item.get(key)
        if value is None:
            continue
        if type(value) is not int or (low is not None and value < low):
            bound = f" >= {low}" if low is not None else ""
            raise ValueError(f"{where}.{key} must be an integer{bound}, got {value!r}")
        values[key] = value
    return SamplingParams(**values)


def parse_batched_request(raw: bytes) -> tuple[list[Message], list[SamplingParams], str | None]:
    """The messages, samplings and model name of a `BATCHED_PATH` request body.

    Raises:
        ValueError: the body is not such a request; the message says what is wrong.
    """
    from rlgpt.llm.client import check_messages

    try:
        body = json.loads(raw)
    except (ValueError, RecursionError):
        raise ValueError("the request body is not JSON") from None
    if not isinstance(body, dict):
        raise ValueError("the request body must be a JSON object with messages and samplings")
    unknown = sorted(set(body) - {"messages", "samplings", "model"})
    if unknown:
        raise ValueError(f"unknown keys {unknown}; a batched request has messages, samplings and model")
    messages = body.get("messages")
    if not isinstance(messages, list):
        raise ValueError("messages must be a list of {'role': ..., 'content': ...} objects")
    check_messages(messages)  # a ConfigError, which is a ValueError
    samplings = body.get("samplings")
    if not isinstance(samplings, list) or not 1 <= len(samplings) <= MAX_SEQUENCES:
        raise ValueError(f"samplings must be a list of 1 to {MAX_SEQUENCES} objects, got "
                         f"{len(samplings) if isinstance(samplings, list) else repr(samplings)[:80]}")
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise ValueError(f"model must be a string, got {model!r}")
    return messages, [parse_sampling(s, f"samplings[{i}]") for i, s in enumerate(samplings)], model


def chat_route_sampler_settings() -> dict[str, Any]:
    """The sampler settings llama_cpp.server's chat route uses when a request leaves them out (its request
    model's defaults: repeat_penalty 1.1 where `Llama` says 1.0), beyond temperature and top_p, which a
    batched request gives."""
    import inspect

    import llama_cpp
    from llama_cpp.server.types import CreateChatCompletionRequest

    takes = set(inspect.signature(llama_cpp.Llama._init_sampler).parameters)
    takes -= {"self", "temp", "top_p", "grammar"}
    return {name: field.default for name, field in CreateChatCompletionRequest.model_fields.items()
            if name in takes}


def bearer_ok(scope: Scope, api_key: str | None) -> bool:
    """Whether the request may pass when the server requires `api_key` (None = no key needed): an
    ``Authorization: Bearer <api_key>`` header, as llama_cpp.server's own routes check it."""
    if api_key is None:
        return True
    header = dict(scope.get("headers", [])).get(b"authorization", b"").decode("latin-1")
    scheme, _, credentials = header.partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(credentials.strip().encode(), api_key.encode())


async def send_json(send: Send, status: int, payload: dict[str, Any]) -> None:
    """One whole JSON response."""
    body = json.dumps(payload).encode("utf-8")
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


def _error(message: str, kind: str, code: str | None = None) -> dict[str, Any]:
    """An OpenAI-shaped error body (what `rlgpt.llm.http` reads)."""
    return {"error": {"message": message, "type": kind, "code": code}}


class BatchedCompletions:
    """ASGI middleware answering `BATCHED_PATH` with several samples of one prompt decoded together
    (`rlgpt.llm.batched.BatchedSampler`) on the server's own loaded model; every other request passes
    through.

    The model is taken under the server's own model locks (llama_cpp.server's `get_llama_proxy`), so a
    batched decode never runs beside a normal completion, and the decode runs in a worker thread, so the
    server keeps answering (health checks, queued requests) meanwhile. Bad input is a 400 that says what is
    wrong; a prompt that does not fit the context is a 400 with code ``context_length_exceeded`` (what
    llama.cpp's own routes answer); the server's API key, if it has one, is required as on its own routes.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self._sampler: Any = None  # a BatchedSampler over the served Llama (made on first request)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") != "http" or scope.get("path") != BATCHED_PATH:
            await self.app(scope, receive, send)
            return
        from llama_cpp.server import app as server_app

        settings = next(server_app.get_server_settings())
        if not bearer_ok(scope, getattr(settings, "api_key", None)):
            await send_json(send, 401, {"detail": "Invalid API key"})  # llama_cpp.server's own answer
            return
        if scope.get("method") != "POST":
            await send_json(send, 405, _error(f"use POST for {BATCHED_PATH}", "invalid_request_error"))
            return
        try:
            raw = await read_body(receive, MAX_BATCHED_BODY)
            if raw is None:  # client went away
                return
            messages, samplings, model = parse_batched_request(raw)
        except ValueError as exc:
            await send_json(send, 400, _error(str(exc), "invalid_request_error"))
            return
        status, payload = await self._complete(server_app, messages, samplings, model)
        await send_json(send, status, payload)

    async def _complete(self, server_app: Any, messages: list[Message], samplings: list[SamplingParams],
                        model: str | None) -> tuple[int, dict[str, Any]]:
        from starlette.concurrency import run_in_threadpool

        from rlgpt.llm.batched import BatchedSampler

        async with contextlib.asynccontextmanager(server_app.get_llama_proxy)() as proxy:
            llama = proxy(None)  # the served model (this server has one)
            if self._sampler is None or self._sampler.llama is not llama:
                self._sampler = BatchedSampler(llama, name=Path(llama.model_path).name,
                                               sampler_settings=chat_route_sampler_settings())
            name = model if model is not None else llama.model_path
            try:
                made = await run_in_threadpool(self._sampler.complete_many, messages, samplings, model=name)
            except ContextOverflowError as exc:
                return 400, _error(str(exc), "invalid_request_error", "context_length_exceeded")
            except Exception as exc:  # a failed decode answers this request; the server stays up
                return 500, _error(f"batched decoding failed: {type(exc).__name__}: {exc}", "server_error")
        return 200, {"model": name, "completions": [
            {key: value for key, value in c.to_dict().items() if key != "model"} for c in made]}


def main() -> None:
    """llama_cpp.server's own entry point, with its app wrapped in `BatchedCompletions`, `JsonSchemaFormat`
    and `CachedTokensReport`."""
    import os
    import sys

    import llama_cpp
    from llama_cpp.server import __main__ as llama_main

    from rlgpt.llm.embedded import prefix_state_cache, prefix_state_disk_cache

    report_cached_tokens(llama_cpp.Llama)
    # The server builds its --cache from these names: states bounded by what they hold, on disk in our folder.
    llama_cpp.LlamaRAMCache = prefix_state_cache()  # type: ignore[misc]
    folder = pop_state_dir(sys.argv)
    api_key = os.environ.get(API_KEY_ENV)
    if api_key:  # in this process's argv only: the key stays off the command line other users can read
        sys.argv += ["--api_key", api_key]
    if folder:
        disk_cache = prefix_state_disk_cache()
        llama_cpp.LlamaDiskCache = lambda capacity_bytes: disk_cache(folder, capacity_bytes=capacity_bytes)  # type: ignore[misc]
    create_app = llama_main.create_app
    llama_main.create_app = lambda **kwargs: BatchedCompletions(  # type: ignore[assignment]
        JsonSchemaFormat(CachedTokensReport(create_app(**kwargs))))
    llama_main.main()


if __name__ == "__main__":
    main()
