"""Fixtures for the agent tests: the real 0.5B model with a context long enough for the agents' prompts
(crafter's rules + the macro API are ~2,700 tokens; the slow agent's at API level `expert`, every cuttable
part cut, ~3,600 with the reply's 1,016 on top), and a recorder of the requests it answers."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from agent_helpers import Recording

from rlgpt.llm.cache import ResponseCache
from rlgpt.llm.client import LLMClient
from rlgpt.llm.embedded import EmbeddedBackend
from rlgpt.llm.model_store import QWEN_CODER_0_5B, ensure_model

AGENT_CTX = 5120
THREADS = 2


@pytest.fixture(scope="session")
def agent_model() -> Iterator[EmbeddedBackend]:
    """The real Qwen2.5-Coder-0.5B, loaded once, with room for the agents' prompts. It keeps the states of
    earlier prompts (as runs do, `llm.prompt_cache_mb`), so each role's rules + API prefix is computed once
    per session rather than once per test."""
    backend = EmbeddedBackend(ensure_model(QWEN_CODER_0_5B), n_ctx=AGENT_CTX, n_threads=THREADS,
                              prompt_cache_mb=1024)
    yield backend
    backend.close()


@pytest.fixture
def recording(agent_model: EmbeddedBackend) -> Recording:
    """The real model behind a request recorder (fresh per test)."""
    return Recording(agent_model)


@pytest.fixture
def client(recording: Recording, tmp_path: Path) -> LLMClient:
    """The project's LLMClient over the recorded real model, with a fresh on-disk cache."""
    return LLMClient(recording, cache=ResponseCache(tmp_path / "llm_cache"))
