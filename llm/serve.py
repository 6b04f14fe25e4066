"""Start OpenAI-compatible servers: llama.cpp's (embedded model, CPU) or vLLM's (GPU), and wait for them."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import ipaddress
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from rlgpt.llm.embedded import prompt_state_folder, quiet_openmp
from rlgpt.llm.errors import BackendUnavailableError, ConfigError, ServerUnavailableError
from rlgpt.llm.llama_server import API_KEY_ENV, STATE_DIR_FLAG
from rlgpt.procs import die_with_parent

"""The environment variable holding the served model's API key: read by `rlgpt llm serve` (when
``--api-key`` is not given), handed to the server in its environment (never on its command line, where
every local user could read it with ``ps``), and the default of ``llm.api_key_env`` on the client side."""


def is_loopback(host: str) -> bool:
    """Whether `host` is reachable from this machine only (``localhost``, 127.0.0.0/8, ::1)."""
    if host.strip("[]").lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:  # a host name: it may resolve to any address
        return False


def check_exposure(host: str, api_key: str | None) -> None:
    """Refuse to serve on an address other machines can reach without an API key."""
    if not api_key and not is_loopback(host):
        raise ConfigError(f"--host {host} serves the model to every machine that can reach it: give it an "
                          f"API key (--api-key KEY or ${API_KEY_ENV}), or listen on 127.0.0.1")


def free_port(host: str = "127.0.0.1") -> int:
    """Return a TCP port that is free on `host` right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def llama_server_command(model_path: Path, *, host: str = "127.0.0.1", port: int = 8000, n_ctx: int = 4096,
                         n_threads: int | None = None, model_alias: str | None = None,
                         prompt_cache_mb: int = 0, prompt_cache_dir: str | os.PathLike[str] | None = None
                         ) -> list[str]:
    """Return the argv that runs llama-cpp-python's OpenAI server on `model_path`; with `prompt_cache_mb`,
    the server keeps prompt states (in RAM, or on disk under `prompt_cache_dir`: `prompt_state_folder`)."""
    if importlib.util.find_spec("llama_cpp") is None:
        raise BackendUnavailableError(
            "llama-cpp-python is not installed; run `pip install 'rlgpt[llm,server]'`"
        )
    for module in ("uvicorn", "fastapi", "sse_starlette", "starlette_context", "pydantic_settings"):
        if importlib.util.find_spec(module) is None:
            raise BackendUnavailableError(
                f"llama.cpp's server needs {module!r}; run `pip install 'llama-cpp-python[server]==0.3.36'`"
            )
    threads = n_threads or os.cpu_count() or 1
    # Our wrapper of llama_cpp.server: the same server, also accepting OpenAI's json_schema response_format.
    cmd = [sys.executable, "-m", "rlgpt.llm.llama_server", "--model", str(model_path), "--host", host,
           "--port", str(port), "--n_ctx", str(n_ctx), "--n_threads", str(threads),
           "--n_threads_batch", str(threads),
           # The server's default keeps every prompt token's logits (a 151k-float row each on Qwen, ~2.4 GB
           # for a 4k-token prompt, written per request and copied into every kept prompt state); a
           # completion needs only the last row (a 3.7k-token fast-agent call: 69 s -> 52 s here).
           "--logits_all", "false"]
    if model_alias:
        cmd += ["--model_alias", model_alias]
    if prompt_cache_mb > 0:  # llama.cpp states of earlier prompts, reused for a request sharing their prefix
        kind = "disk" if prompt_cache_dir else "ram"
        cmd += ["--cache", "true", "--cache_type", kind, "--cache_size", str(prompt_cache_mb << 20)]
        if prompt_cache_dir:  # read (and removed) by rlgpt.llm.llama_server before llama_cpp's parser
            folder = prompt_state_folder(prompt_cache_dir, model_path, n_ctx)
            cmd += [STATE_DIR_FLAG, str(folder)]
    return cmd


def vllm_unavailable_reason() -> str | None:
    """Return why `vllm serve` cannot run on this machine, or None when vllm and a CUDA GPU are present."""
    if importlib.util.find_spec("vllm") is None or shutil.which("vllm") is None:
        return "vllm is not installed (pip install vllm on a Linux host with an NVIDIA GPU)"
    if shutil.which("nvidia-smi") is None:
        return "no NVIDIA driver found (nvidia-smi is not on PATH); vLLM needs a CUDA GPU"
    probe = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, check=False)
    if probe.returncode != 0 or "GPU" not in probe.stdout:
        return f"nvidia-smi lists no GPU ({(probe.stderr or probe.stdout).strip()[:200]})"
    return None


def vllm_command(model: str, *, host: str = "127.0.0.1", port: int = 8000,
                 extra_args: list[str] | None = None) -> list[str]:
    """Return the argv for `vllm serve MODEL` with the xgrammar structured-outputs backend."""
    version = importlib.metadata.version("vllm")
    major_minor = tuple(int(x) for x in version.split(".")[:2] if x.isdigit())
    # vLLM 0.10.2 renamed guided decoding to structured outputs (and 0.12 removed the old flag).
    backend_flag = ["--structured-outputs-config", json.dumps({"backend": "xgrammar"})] \
        if major_minor >= (0, 11) else ["--guided-decoding-backend", "xgrammar"]
    return ["vllm", "serve", model, "--host", host, "--port", str(port), *backend_flag, *(extra_args or [])]


VLLM_API_KEY_ENV = "VLLM_API_KEY"
"""Where `vllm serve` reads its API key from when ``--api-key`` is not on its command line."""


def server_env(threads: int | None = None, api_key: str | None = None) -> dict[str, str]:
    """The environment of a server process: ours, with llama.cpp's OpenMP threads made to sleep when idle
    (on a small shared box they otherwise spin), when given the OpenMP thread count, and the API key in
    `API_KEY_ENV` (our llama.cpp server reads it) and `VLLM_API_KEY_ENV` (vLLM reads it), or neither."""
    env = dict(os.environ)
    quiet_openmp(env)
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
    env.pop(API_KEY_ENV, None)
    env.pop(VLLM_API_KEY_ENV, None)
    if api_key:
        env[API_KEY_ENV] = env[VLLM_API_KEY_ENV] = api_key
    return env


def wait_until_ready(base_url: str, *, timeout_s: float = 120.0,
                     process: subprocess.Popen[bytes] | None = None, log_path: Path | None = None,
                     api_key: str | None = None) -> None:
    """Poll GET {base_url}/models (with `api_key` as a Bearer token) until it answers 200; fail early if
    `process` exits."""
    deadline = time.monotonic() + timeout_s
    url = base_url.rstrip("/") + "/models"
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            tail = log_path.read_text(errors="replace")[-1500:] if log_path and log_path.exists() else ""
            raise ServerUnavailableError(f"server exited with code {process.returncode} before it was ready: "
                                         f"{tail}")
        try:
            with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.25)
    raise ServerUnavailableError(f"server at {base_url} not ready after {timeout_s:.0f}s")


class ManagedServer:
    """A server subprocess started on enter, checked ready, and terminated on exit."""

    def __init__(self, command: list[str], *, host: str, port: int, log_path: Path | None = None,
                 threads: int | None = None, ready_timeout_s: float = 120.0) -> None:
        """Describe the server; it starts in `start()` / `__enter__`.

        Args:
            command: argv, e.g. from llama_server_command.
            host: where it listens (for base_url).
            port: where it listens (for base_url).
            log_path: file receiving its stdout+stderr; None discards them.
            threads: OMP thread count for the child (its OpenMP runtime reads it at start).
            ready_timeout_s: how long to wait for GET /v1/models.
        """
        if not command:
            raise ConfigError("server command is empty")
        self.command = command
        self.base_url = f"http://{host}:{port}/v1"
        self.log_path = log_path
        self.threads = threads
        self.ready_timeout_s = ready_timeout_s
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> ManagedServer:
        """Start the process and block until it serves requests."""
        env = server_env(self.threads)
        if self.log_path is not None:
            # The child keeps its own copy of the descriptor; ours can close right away.
            with open(self.log_path, "wb") as log:
                self.process = subprocess.Popen(self.command, stdout=log, stderr=subprocess.STDOUT, env=env,
                                                preexec_fn=die_with_parent)
        else:
            self.process = subprocess.Popen(self.command, stdout=subprocess.DEVNULL,
                                            stderr=subprocess.STDOUT, env=env, preexec_fn=die_with_parent)
        try:
            wait_until_ready(self.base_url, timeout_s=self.ready_timeout_s, process=self.process,
                             log_path=self.log_path)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Terminate the process (SIGTERM, then SIGKILL after 10 s)."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def __enter__(self) -> ManagedServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
