"""What every agent shares: the documentation put into prompts, task wording, bounded text."""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

from rlgpt.agents.api_doc import api_reference
from rlgpt.agents.envdoc import actions_only, crafter_rules, requirement_lines
from rlgpt.agents.replies import Decomposition
from rlgpt.config import ENV_DOC_LEVELS, AgentConfig
from rlgpt.macro.api import api_level

if TYPE_CHECKING:
    from rlgpt.llm.client import LLMClient
    from rlgpt.macro.prefix import StartSummary


class StartedRole:
    """A role whose prompts state where the task's episodes start (the slow agent, the critic)."""

    def __init__(self, client: LLMClient, config: AgentConfig | None = None, *,
                 start: StartSummary | None = None) -> None:
        """Args: client: the LLM; config: agent knobs; start: the attribute (default: fresh worlds)."""
        self.client = client
        self.config = config or AgentConfig()
        self.start: StartSummary | None = start
        """Where the task's episodes start when not in a fresh world (a chain's later subtask: the summary
        of its start states, `rlgpt.macro.prefix.StartSummary`); the task's description says so. The loop
        builds its agents per subtask with it (`rlgpt.run.loop.Agents.starting_from`)."""


def check_env_doc(env_doc: str) -> None:
    """Raise ValueError for an `AgentConfig.env_doc` level that does not exist (the config says so first;
    this guards direct callers)."""
    if env_doc not in ENV_DOC_LEVELS:
        raise ValueError(f"env_doc must be one of {ENV_DOC_LEVELS}, got {env_doc!r}")


@cache
def documentation(api: str = "expert", env_doc: str = "full") -> dict[str, str]:
    """The prompt values every role shares: ``env_rules`` (crafter's rules; at `env_doc` ``none`` only the
    action list, `actions_only`) and ``macro_api`` (at API level `api`, one of
    `rlgpt.agents.api_doc.API_LEVELS`).

    Every role's system message starts with these (`rlgpt.prompts.PREAMBLE`: rules first, then the API), so
    the calls of different roles share a long prompt prefix that llama.cpp does not evaluate again: every
    role takes the same `api` and `env_doc`.
    """
    check_env_doc(env_doc)
    rules = actions_only() if env_doc == "none" else crafter_rules()
    return {"env_rules": rules, "macro_api": api_reference(api)}


SLOW_EXAMPLE_CHAIN = " (1. collect_sapling (1 sapling needed in total),\n2. place_plant)"
"""The slow example's task with its prerequisite chain, as `describe_task` states it at ``full``."""


def knowledge_values(template: str, env_doc: str = "full", examples: bool = True,
                     api: str = "expert") -> dict[str, str]:
    """The values of `template`'s optional parts at a prompt-knowledge level (`AgentConfig.env_doc`,
    `AgentConfig.examples`): "" for a part left out. At ``full`` with examples the prompts are what they
    were before these knobs existed (the same text, so recorded replies still answer them).

    - ``slow``: ``world_note`` (a rule: stations do not exist until placed; not at ``none``),
      ``chain_guide`` (follow the task's computed prerequisite chain; ``full`` only) and ``examples`` (the
      example decomposition; its task's chain is shown at ``full`` only);
    - ``fast`` and ``fast_reward``: ``examples`` (the example macros; the example reward). At API level
      ``primitives`` the example macros call the control primitives (``fast.examples_primitives``): the
      other levels' examples walk and act step by step, and the small model copies an example's style.
    """
    from rlgpt import prompts

    check_env_doc(env_doc)
    if template == "slow":
        chain = SLOW_EXAMPLE_CHAIN if env_doc == "full" else ""
        return {"world_note": prompts.part("slow.world_note") + " " if env_doc != "none" else "",
                "chain_guide": "\n\n" + prompts.part("slow.chain_guide") if env_doc == "full" else "",
                "examples": "\n\n" + prompts.part("slow.examples", chain=chain) if examples else ""}
    if template == "fast":
        part = "fast.examples_primitives" if api_level(api) == "primitives" else "fast.examples"
        return {"examples": "\n\n" + prompts.part(part) if examples else ""}
    if template == "fast_reward":
        return {"examples": " Example:\n" + prompts.part("fast_reward.examples") if examples else ""}
    return {}


def system_messages(config: AgentConfig) -> dict[str, str]:
    """Every prompt template's system message at `config`'s API and prompt-knowledge levels
    (`rlgpt.prompts.TEMPLATES`; the fast role has three): what each call of that template starts with,
    whatever the task, so its prompt state can be computed ahead of a run (`rlgpt warm`)."""
    from rlgpt import prompts

    docs = documentation(config.api, config.env_doc)
    return {template: prompts.render_system(template, **docs,
                                            **knowledge_values(template, config.env_doc, config.examples,
                                                              config.api))
            for template in prompts.TEMPLATES}


def describe_task(task: str, env_doc: str = "full", start: StartSummary | None = None) -> str:
    """A task name ("collect_wood", "a+b") as an instruction, followed (at `env_doc` ``full`` only) by what
    it takes from the recipes (`requirement_lines`: prerequisites in order, materials consumed). The
    Crafter benchmark task (`rlgpt.envs.tasks.BENCHMARK_TASK`) is "unlock as many achievements as you
    can" with the achievements' names (its definition, at every level).

    A chain's later subtask starts where the skills before it left off (`start`, the summary of its start
    states): the instruction says what the episode starts with (at every level: it is the episode, not
    recipe knowledge), and the recipe lines leave out what is already done."""
    from rlgpt.envs.tasks import ACHIEVEMENTS, BENCHMARK_TASK

    if task.strip() == BENCHMARK_TASK:
        return ("unlock as many different achievements as you can in one episode (the Crafter benchmark: "
                "reward +1 the first time each achievement is unlocked, plus the health change / 10; the "
                "episode ends when the player dies or at the step limit; the measure is the Crafter score "
                "over all 22 achievements, so rare achievements count most)\nThe achievements: "
                + ", ".join(ACHIEVEMENTS))
    targets = [t.strip() for t in task.split("+") if t.strip()]
    if len(targets) == 1:
        goal = f"unlock the achievement {targets[0]} (in one episode)"
    else:
        goal = f"unlock all of these achievements in one episode: {', '.join(targets)}"
    check_env_doc(env_doc)
    if start is not None:
        goal = f"{goal}\n{start.describe()}"
    if env_doc != "full":
        return goal
    unlocked, inventory = (start.unlocked, dict(start.inventory)) if start is not None else ((), None)
    lines = requirement_lines(targets, unlocked, inventory)
    return f"{goal}\nWhat it takes, from the recipes above:\n{lines}"


def render_decomposition(decomposition: Decomposition | None) -> str:
    """One line per sub-action, for prompts."""
    if decomposition is None:
        return "(none yet)"
    return "\n".join(f"- {s.name} [{s.how}]: {s.description}" + (f" (goal: {s.goal})" if s.goal else "")
                     for s in decomposition.subactions)


def bounded(text: str, limit: int) -> str:
    """`text` cut to at most `limit` characters, saying how much was cut."""
    if len(text) <= limit:
        return text
    note = f"\n[... {len(text) - limit} more characters cut]"
    return text[: max(0, limit - len(note))] + note


def degradable(exc: BaseException) -> bool:
    """Whether an LLM call's failure falls back to the role's default instead of ending the run: any LLM
    fault (no valid reply, overflow, a dead server) or reply of the wrong shape; never a replay-only cache
    miss (an offline replay must not silently diverge from the recorded run)."""
    from rlgpt.agents.replies import ReplyValidationError
    from rlgpt.llm.errors import CacheMissError, LLMError

    return isinstance(exc, LLMError | ReplyValidationError) and not isinstance(exc, CacheMissError)


def note_fallback(client: object, role: str) -> None:
    """Count a fallback of `role` in the client's ``llm/fallbacks`` metric (clients without one: nothing)."""
    note = getattr(client, "note_fallback", None)
    if note is not None:
        note(role)
