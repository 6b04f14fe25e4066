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

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

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


class JsonSchemaFormat:
    """ASGI middleware applying `translate_response_format` to completion requests."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") != "http" or scope.get("method") != "POST" or scope.get("path") not in \
                _REWRITTEN_PATHS:
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        while True:
            message = await receive()
            if message["type"] != "http.request":  # client went away
                await self.app(scope, receive, send)
                return
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        raw = b"".join(chunks)
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


def main() -> None:
    """llama_cpp.server's own entry point, with its app wrapped in `JsonSchemaFormat` and
    `CachedTokensReport`."""
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
    llama_main.create_app = lambda **kwargs: JsonSchemaFormat(CachedTokensReport(create_app(**kwargs)))  # type: ignore[assignment]
    llama_main.main()


if __name__ == "__main__":
    main()
