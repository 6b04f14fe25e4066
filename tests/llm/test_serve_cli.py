"""`rlgpt llm serve` and `rlgpt llm fetch` as a user runs them: a real llama.cpp server on 127.0.0.1, and
the exact reason `--vllm` cannot start where vLLM or a GPU is missing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rlgpt.llm.http import OpenAIHTTPBackend
from rlgpt.llm.llama_server import BATCHED_PATH
from rlgpt.llm.serve import free_port, vllm_command, wait_until_ready
from rlgpt.llm.types import SamplingParams


def _env(**extra: str) -> dict[str, str]:
    return dict(os.environ, OMP_NUM_THREADS="1", **extra)


def _rlgpt(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rlgpt.cli", *args],
        capture_output=True,
        text=True,
        env=env or _env(),
        timeout=120,
    )


def test_serve_runs_the_llama_server_until_terminated(small_model_path: Path, tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "serve.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "rlgpt.cli",
                "llm",
                "serve",
                "--model",
                str(small_model_path),
                "--port",
                str(port),
                "--n-ctx",
                "512",
                "--threads",
                "1",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=_env(),
        )
    try:
        base_url = f"http://127.0.0.1:{port}/v1"
        wait_until_ready(base_url, timeout_s=120, process=proc, log_path=log)
        backend = OpenAIHTTPBackend(base_url, max_retries=0)
        assert backend.model == small_model_path.stem
        assert backend.dialect == "json_object"
        reply = backend.complete(
            [{"role": "user", "content": "Say yes."}], None, SamplingParams(max_tokens=2)
        )
        assert 1 <= reply.completion_tokens <= 2
    finally:
        proc.terminate()
        code = proc.wait(timeout=30)
    # The launcher became the server (exec), so terminating it leaves no server behind on the port.
    assert code is not None
    assert "serving on http://127.0.0.1:" in log.read_text()


def test_serve_refuses_a_missing_model_file(tmp_path: Path) -> None:
    proc = _rlgpt("llm", "serve", "--model", str(tmp_path / "nope.gguf"))
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"rlgpt: error: model file {tmp_path / 'nope.gguf'} does not exist"
    ]


def _fake_tool(bin_dir: Path, name: str, script: str) -> None:
    path = bin_dir / name
    path.write_text("#!/bin/sh\n" + script + "\n")
    path.chmod(0o755)


@pytest.mark.parametrize(
    ("has_vllm", "nvidia_smi", "reason"),
    [
        (False, None, "vllm is not installed"),
        (True, None, "no NVIDIA driver found (nvidia-smi is not on PATH)"),
        (True, "echo 'No devices were found' >&2; exit 6", "nvidia-smi lists no GPU (No devices were found)"),
    ],
)
def test_serve_vllm_says_exactly_why_it_cannot_start(
    tmp_path: Path, has_vllm: bool, nvidia_smi: str | None, reason: str
) -> None:
    """vLLM and GPUs are the boundary this box lacks: a stand-in `vllm` package/executable and `nvidia-smi`
    on PATH reach each branch of the real check."""
    bin_dir, site = tmp_path / "bin", tmp_path / "site"
    bin_dir.mkdir()
    site.mkdir()
    if has_vllm:
        (site / "vllm").mkdir()
        (site / "vllm" / "__init__.py").write_text("")
        _fake_tool(bin_dir, "vllm", "exit 0")
    if nvidia_smi is not None:
        _fake_tool(bin_dir, "nvidia-smi", nvidia_smi)
    env = _env(PATH=f"{bin_dir}:/usr/bin:/bin", PYTHONPATH=str(site))
    proc = _rlgpt("llm", "serve", "--vllm", env=env)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rlgpt: error: cannot launch vLLM: "), proc.stderr
    assert reason in lines[0]


def test_vllm_command_uses_xgrammar(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.metadata

    for version, flag in (("0.10.1", "--guided-decoding-backend"), ("0.11.2", "--structured-outputs-config")):
        monkeypatch.setattr(importlib.metadata, "version", lambda _name, v=version: v)
        cmd = vllm_command(
            "Qwen/Qwen2.5-Coder-1.5B-Instruct", port=8123, extra_args=["--max-model-len", "4096"]
        )
        assert cmd[:3] == ["vllm", "serve", "Qwen/Qwen2.5-Coder-1.5B-Instruct"]
        assert cmd[cmd.index(flag) + 1] in ("xgrammar", '{"backend": "xgrammar"}')
        assert cmd[-2:] == ["--max-model-len", "4096"] and "127.0.0.1" in cmd


def test_fetch_prints_the_verified_model_path(small_model_path: Path) -> None:
    proc = _rlgpt(
        "llm", "fetch", "--model", "qwen2.5-coder-0.5b", "--model-dir", str(small_model_path.parent)
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str(small_model_path)


def test_llama_server_keeps_only_the_last_logits_row(tmp_path: Path) -> None:
    """The server's argv, read by llama_cpp.server's own parser: every setting we pass arrives, and the
    server does not keep a logits row per prompt token (its default; gigabytes per long prompt)."""
    import argparse

    pytest.importorskip("llama_cpp.server.settings")
    from llama_cpp.server.cli import add_args_from_model, parse_model_from_args
    from llama_cpp.server.settings import ModelSettings, Settings

    from rlgpt.llm.llama_server import pop_state_dir
    from rlgpt.llm.serve import llama_server_command

    model = tmp_path / "m.gguf"
    model.write_bytes(b"")
    argv = llama_server_command(model, port=8123, n_ctx=8192, n_threads=2, prompt_cache_mb=64,
                                prompt_cache_dir=tmp_path)
    args = argv[argv.index("rlgpt.llm.llama_server") + 1:]
    assert pop_state_dir(args) is not None  # our own flag, removed before llama_cpp's parser
    parser = argparse.ArgumentParser()
    add_args_from_model(parser, Settings)
    settings = parse_model_from_args(ModelSettings, parser.parse_args(args))
    assert settings.logits_all is False
    assert (settings.n_ctx, settings.n_threads, settings.n_threads_batch) == (8192, 2, 2)
    assert settings.cache and settings.cache_type == "disk"


def test_serve_refuses_an_exposed_host_without_a_key() -> None:
    """A listen address other machines can reach needs a key: refused before any model is loaded."""
    env = {k: v for k, v in _env().items() if k != "RLGPT_API_KEY"}
    proc = _rlgpt("llm", "serve", "--host", "0.0.0.0", env=env)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("rlgpt: error: --host 0.0.0.0 serves the model"), proc.stderr
    assert "--api-key" in lines[0]


def test_served_key_is_required_and_sent_by_the_client(small_model_path: Path, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """`rlgpt llm serve` with its key in $RLGPT_API_KEY: the real llama.cpp server answers 401 to a request
    without it, the key is not on any command line, and the HTTP client built from the LLM config (which
    reads the same variable) sends it and is answered."""
    import json
    import urllib.error
    import urllib.request

    from rlgpt.llm.config import LLMConfig, build_backend

    key = "test-key-31"
    port = free_port()
    log = tmp_path / "serve.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "rlgpt.cli", "llm", "serve", "--model", str(small_model_path),
             "--port", str(port), "--n-ctx", "512", "--threads", "1"],
            stdout=out, stderr=subprocess.STDOUT, env=_env(RLGPT_API_KEY=key),
        )
    try:
        base_url = f"http://127.0.0.1:{port}/v1"
        wait_until_ready(base_url, timeout_s=120, process=proc, log_path=log, api_key=key)
        assert key.encode() not in Path(f"/proc/{proc.pid}/cmdline").read_bytes()
        request = urllib.request.Request(
            base_url + "/chat/completions", method="POST", headers={"Content-Type": "application/json"},
            data=json.dumps({"messages": [{"role": "user", "content": "Say yes."}],
                             "max_tokens": 2}).encode())
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=30)
        assert refused.value.code == 401
        with pytest.raises(urllib.error.HTTPError) as models:
            urllib.request.urlopen(base_url + "/models", timeout=30)
        assert models.value.code == 401
        batched_url = f"http://127.0.0.1:{port}{BATCHED_PATH}"
        batched = {"messages": [{"role": "user", "content": "Say yes."}],
                   "samplings": [{"max_tokens": 2}] * 2}
        with pytest.raises(urllib.error.HTTPError) as refused_batch:
            urllib.request.urlopen(urllib.request.Request(
                batched_url, method="POST", headers={"Content-Type": "application/json"},
                data=json.dumps(batched).encode()), timeout=30)
        assert refused_batch.value.code == 401

        monkeypatch.setenv("RLGPT_API_KEY", key)
        backend = build_backend(LLMConfig(backend="http", base_url=base_url, model="", max_retries=0))
        assert backend.api_key == key
        reply = backend.complete([{"role": "user", "content": "Say yes."}], None,
                                 SamplingParams(max_tokens=2))
        assert 1 <= reply.completion_tokens <= 2
        answer = backend.request_url("POST", batched_url, batched)  # with the key: decoded
        assert [1 <= c["completion_tokens"] <= 2 for c in answer["completions"]] == [True, True]
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert "(API key required)" in log.read_text()


def test_serve_hands_vllm_its_key_in_the_environment(tmp_path: Path) -> None:
    """With a key, `--host 0.0.0.0` is allowed and vLLM (a stand-in `vllm` executable past the real GPU
    check, which records what it was started with) gets the key as VLLM_API_KEY, not on its command line."""
    bin_dir, site = tmp_path / "bin", tmp_path / "site"
    bin_dir.mkdir()
    (site / "vllm").mkdir(parents=True)
    (site / "vllm" / "__init__.py").write_text("")
    dist = site / "vllm-0.11.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 0.11.0\n")
    seen = tmp_path / "seen.txt"
    _fake_tool(bin_dir, "vllm", f'echo "key=$VLLM_API_KEY argv=$*" > {seen}')
    _fake_tool(bin_dir, "nvidia-smi", "echo 'GPU 0: NVIDIA H100 (UUID: GPU-0)'")
    env = {k: v for k, v in _env(PATH=f"{bin_dir}:/usr/bin:/bin", PYTHONPATH=str(site)).items()
           if k != "RLGPT_API_KEY"}
    proc = _rlgpt("llm", "serve", "--vllm", "--host", "0.0.0.0", "--api-key", "k-31", env=env)
    assert proc.returncode == 0, proc.stderr
    started = seen.read_text().strip()
    assert started.startswith("key=k-31 argv=serve Qwen/") and "--host 0.0.0.0" in started
    assert "k-31" not in started.split("argv=", 1)[1] and "k-31" not in proc.stderr
    assert "(API key required)" in proc.stderr
