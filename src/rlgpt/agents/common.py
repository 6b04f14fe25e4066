"""What every agent shares: the documentation put into prompts, task wording, bounded text."""

from __future__ import annotations

from functools import cache

from rlgpt.agents.api_doc import api_reference
from rlgpt.agents.envdoc import crafter_rules, requirement_lines
from rlgpt.agents.replies import Decomposition


@cache
def documentation(api: str = "skills") -> dict[str, str]:
    """The prompt values every role shares: ``env_rules`` (crafter's rules) and ``macro_api`` (at API level
    `api`, one of `rlgpt.agents.api_doc.API_LEVELS`).

    Every template starts with these (rules first, then the API), so consecutive calls of different roles
    share a long prompt prefix that llama.cpp does not evaluate again.
    """
    return {"env_rules": crafter_rules(), "macro_api": api_reference(api)}


def describe_task(task: str) -> str:
    """A task name ("collect_wood", "a+b") as an instruction, followed by what it takes from the recipes
    (`requirement_lines`: prerequisites in order, materials consumed). The Crafter benchmark task
    (`rlgpt.envs.tasks.BENCHMARK_TASK`) is "unlock as many achievements as you can"."""
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
    return f"{goal}\nWhat it takes, from the recipes above:\n{requirement_lines(targets)}"


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
