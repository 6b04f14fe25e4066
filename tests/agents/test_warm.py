"""`rlgpt warm`: every role's system message is the same whatever the task, and computing its prompt state
ahead of a run (the real 0.5B model, kept on disk) leaves the run's first call of each role computing only
what follows it."""

from __future__ import annotations

from pathlib import Path

import pytest
from agent_helpers import Recording

from rlgpt import prompts
from rlgpt.agents.common import system_messages
from rlgpt.agents.critic import Critic
from rlgpt.agents.fast import FastAgent
from rlgpt.agents.planner import Planner
from rlgpt.agents.replies import Decomposition, SubAction
from rlgpt.agents.slow import SlowAgent
from rlgpt.cli import main
from rlgpt.config import AgentConfig
from rlgpt.llm.client import LLMClient
from rlgpt.llm.embedded import EmbeddedBackend
from rlgpt.llm.model_store import QWEN_CODER_0_5B, ensure_model
from rlgpt.llm.types import SamplingParams

CHOP = SubAction("chop_tree", "face a tree and collect wood", "code", "wood", "fixed recipe")


def sent_systems(config: AgentConfig, task: str) -> dict[str, str]:
    """The system message each template's real prompt for `task` carries, as the agents build it."""
    fast = FastAgent(None, config)  # type: ignore[arg-type]  # a client-less agent renders without fitting
    decomposition = Decomposition((CHOP,))
    prompts_by_template = {
        "planner": Planner(None, config).messages(task, {}),  # type: ignore[arg-type]
        "slow": SlowAgent(None, config).prompt(task, "a note").render(),  # type: ignore[arg-type]
        "fast": fast.macro_messages(task, CHOP, "a note"),
        "fast_reward": fast.reward_prompt(task, decomposition).render(),
        "fast_setup": fast.setup_prompt(task, decomposition, ["chop_tree"]).render(),
        "critic": Critic(None, config).prompt(task, 2, decomposition).render(),  # type: ignore[arg-type]
    }
    return {template: messages[0]["content"] for template, messages in prompts_by_template.items()}


@pytest.mark.parametrize("config", [
    AgentConfig(),
    AgentConfig(env_doc="rules", examples=False),
    AgentConfig(env_doc="none", api="basic"),
], ids=["full", "rules-no-examples", "none-basic"])
@pytest.mark.parametrize("task", ["make_stone_pickaxe", "collect_sapling+eat_cow", "crafter"])
def test_each_templates_system_message_is_what_its_calls_send_for_any_task(config: AgentConfig,
                                                                          task: str) -> None:
    systems = system_messages(config)
    assert set(systems) == set(prompts.TEMPLATES)
    # `systems` knows no task: every task's calls start with exactly these messages.
    assert systems == sent_systems(config, task)


@pytest.mark.slow
def test_rlgpt_warm_leaves_a_runs_first_calls_computing_only_their_user_turn(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    states = tmp_path / "states"
    monkeypatch.setenv("RLGPT_PROMPT_STATE_DIR", str(states))
    model = ensure_model(QWEN_CODER_0_5B)
    settings = ["--set", f"llm.model={model}", "--set", "llm.n_ctx=4608", "--set", "llm.threads=2"]
    assert main(["warm", *settings]) == 0
    out = capsys.readouterr().out
    assert f"prompt states of {len(prompts.TEMPLATES)} system messages" in out and str(states) in out
    # It says which message it is on before each call (the first one starts the model).
    n = len(prompts.TEMPLATES)
    starts = [line.strip() for line in out.splitlines() if line.strip().startswith("warming ")]
    assert [s.split(":")[0] for s in starts] == [f"warming {i}/{n}" for i in range(1, n + 1)], out
    assert "(the first starts the model)" in starts[0]
    # A second warm finds every state kept: one token computed per message (the turn it asks for).
    assert main(["warm", *settings]) == 0
    again = capsys.readouterr().out
    assert again.count(" 1 computed") == len(prompts.TEMPLATES), again

    # A new process (a run) over the same folder: its first slow call computes only what follows the
    # slow system message, on a task no warm call saw.
    backend = EmbeddedBackend(model, n_ctx=4608, n_threads=2, prompt_cache_mb=1024, prompt_cache_dir=states)
    client = LLMClient(Recording(backend))
    try:
        client.chat("slow", SlowAgent(client).messages("collect_coal"), sampling=SamplingParams(max_tokens=1))
        system = client.backend.requests[0][0][0]["content"]
        assert system == system_messages(AgentConfig())["slow"]
        metrics = client.metrics()
        assert metrics["llm/cached_tokens"] >= backend.count_tokens(system)
        assert metrics["llm/prefill_tokens"] < metrics["llm/cached_tokens"] / 3
    finally:
        backend.close()


@pytest.mark.parametrize("setting, message", [
    (["--set", "llm.replay_only=true", "--set", "llm.cache_dir=somewhere"], "nothing to warm"),
    (["--set", "llm.prompt_cache_mb=0"], "keeps no prompt states on disk"),
    (["--set", "llm.prompt_cache_dir="], "keeps no prompt states on disk"),
])
def test_rlgpt_warm_refuses_what_would_keep_nothing(setting: list[str], message: str,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["warm", *setting]) == 2
    assert message in capsys.readouterr().err
