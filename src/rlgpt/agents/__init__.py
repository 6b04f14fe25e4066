"""The LLM agents of the RL-GPT loop: prompt in, typed reply out.

- `SlowAgent.decompose(task)` -> `Decomposition` (sub-actions, each "code" or "rl", with a goal).
- `FastAgent.run(task, decomposition)` -> `FastResult` (a `FastReply` for training: compiled-clean macros,
  dense reward code, observation, horizon; plus every candidate, repair and probe behind it).
- `Critic.review(...)` -> `Feedback` (target "fast" | "slow" | "done").
- `Planner.plan(task)` -> `PlanResult` (a chain of achievements valid under crafter's recipes).
Knobs: `rlgpt.config.AgentConfig`. Environment documentation: `envdoc.crafter_rules()`.
"""

from rlgpt.agents.critic import Critic
from rlgpt.agents.envdoc import achievement_requirements, crafter_rules, prerequisite_chain
from rlgpt.agents.fast import FastAgent, FastResult, MacroCandidate, MacroChoice
from rlgpt.agents.planner import Planner, PlanResult
from rlgpt.agents.replies import Decomposition, FastReply, FastSetup, Feedback, Plan, SubAction, Subtask
from rlgpt.agents.slow import SlowAgent

__all__ = [
    "Critic",
    "Decomposition",
    "FastAgent",
    "FastReply",
    "FastResult",
    "FastSetup",
    "Feedback",
    "MacroCandidate",
    "MacroChoice",
    "Plan",
    "PlanResult",
    "Planner",
    "SlowAgent",
    "SubAction",
    "Subtask",
    "achievement_requirements",
    "crafter_rules",
    "prerequisite_chain",
]
