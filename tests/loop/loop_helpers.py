"""Helpers for the loop tests (a uniquely named module, not a conftest, whose name the test directories
would share): the smoke RunConfig, recorded replies in the run's response cache (served through the real
client's cache path, `llm.replay_only`), step files, the CLI in a child process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from rlgpt import prompts, rundir
from rlgpt.config import RunConfig, builtin_config_path, load_run_config
from rlgpt.llm.cache import ResponseCache, request_key
from rlgpt.llm.config import _replay_model_id
from rlgpt.llm.types import Completion, Message, SamplingParams

SMOKE = str(builtin_config_path("run_smoke.yaml"))


def smoke_config(run_dir: Path, *overrides: str) -> RunConfig:
    """The smoke run in `run_dir`, replaying recorded replies only (no model is loaded)."""
    return load_run_config(SMOKE, [f"run_dir={run_dir}", f"llm.cache_dir={run_dir / 'llm_cache'}",
                                   "llm.replay_only=true", *overrides])


def record(cfg: RunConfig, messages: list[Message], reply: str | dict[str, Any], sampling: SamplingParams,
           schema: dict[str, Any] | None = None) -> None:
    """Store `reply` as the cached answer to exactly this request in the run's response cache."""
    text = reply if isinstance(reply, str) else json.dumps(reply)
    model_id = _replay_model_id(cfg.llm)
    key = request_key(model_id, messages, schema, sampling.to_dict())
    ResponseCache(cfg.llm.cache_dir).put(key, Completion(text, 0, 0, "stop", model_id),
                                         {"model": model_id, "role": "recorded", "messages": messages,
                                          "schema": schema, "sampling": sampling.to_dict()})


def json_sampling(cfg: RunConfig) -> SamplingParams:
    """The sampling the critic and the planner use."""
    return SamplingParams(temperature=0.0, max_tokens=cfg.agents.json_max_tokens, seed=cfg.agents.seed)


def slow_sampling(cfg: RunConfig) -> SamplingParams:
    """The sampling of the slow agent's decomposition (its own reply budget, `slow_max_tokens`)."""
    from rlgpt.agents.slow import slow_max_tokens

    return SamplingParams(temperature=0.0, max_tokens=slow_max_tokens(cfg.agents), seed=cfg.agents.seed)


def role_schema(role: str) -> dict[str, Any]:
    return prompts.schema_for_role(role)


def write_step(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    rundir.write_json(path, data)


def cli(*args: str, timeout: float = 1800) -> subprocess.CompletedProcess:
    env = dict(os.environ, OMP_NUM_THREADS="1")
    return subprocess.run([sys.executable, "-m", "rlgpt.cli", *args], capture_output=True, text=True, env=env,
                          timeout=timeout)


def assert_error_line(proc: subprocess.CompletedProcess, *fragments: str) -> str:
    """Exit status 2 and the output ends with exactly one `rlgpt: error:` line holding `fragments`."""
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("rlgpt: error: ")]
    assert len(errors) == 1 and lines[-1] == errors[0], proc.stderr
    for fragment in fragments:
        assert fragment in errors[0], errors[0]
    assert "Traceback" not in proc.stderr
    return errors[0]


WAIT_S = 3600
"""A bound for a hung run, not a timing assumption: a wait ends as soon as its condition holds."""


def wait_for(condition, what: str, proc: subprocess.Popen | None = None) -> None:
    """Poll `condition` until it holds; fail when `proc` exits first or after `WAIT_S`."""
    deadline = time.monotonic() + WAIT_S
    while not condition():
        if proc is not None and proc.poll() is not None:
            stderr = proc.stderr.read() if proc.stderr else ""
            raise AssertionError(f"the process exited ({proc.returncode}) before {what}: {stderr}")
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)
