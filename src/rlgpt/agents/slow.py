"""The slow agent: decomposes a task into sub-actions, each coded (a macro) or learned (RL)."""

from __future__ import annotations

from rlgpt import prompts
from rlgpt.agents.common import describe_task, documentation
from rlgpt.agents.replies import Decomposition
from rlgpt.config import AgentConfig
from rlgpt.llm.client import LLMClient
from rlgpt.llm.types import Message, SamplingParams

ROLE = "slow"


class SlowAgent:
    """Task (+ the critic's feedback) in, typed `Decomposition` out."""

    def __init__(self, client: LLMClient, config: AgentConfig | None = None) -> None:
        self.client = client
        self.config = config or AgentConfig()

    def messages(self, task: str, feedback: str = "none") -> list[Message]:
        """The prompt: crafter's rules, the macro API, the task and earlier feedback."""
        return prompts.render(ROLE, **documentation(), task=describe_task(task), feedback=feedback or "none")

    def decompose(self, task: str, feedback: str = "none") -> Decomposition:
        """Ask for the decomposition (greedy; schema-checked and re-asked by the client).

        Raises:
            rlgpt.llm.SchemaValidationError: no schema-valid reply within the client's retries.
            rlgpt.agents.replies.ReplyValidationError: the reply repeats a sub-action name.
        """
        data = self.client.structured(ROLE, self.messages(task, feedback), prompts.schema_for_role(ROLE),
                                      sampling=SamplingParams(temperature=0.0,
                                                              max_tokens=self.config.json_max_tokens,
                                                              seed=self.config.seed))
        return Decomposition.from_dict(data)
