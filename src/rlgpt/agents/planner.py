"""The planner: an ordered chain of subtasks (Crafter achievements) for a long-horizon goal, checked
against crafter's recipes and repaired with the dependency graph when the model's chain is invalid.

A reply that never validates (or a failed call: a server error, a timeout) falls back to the graph's chain
(`repair_plan` of nothing, marked ``fallback: recipe_graph`` and counted in ``llm/fallbacks``). The goals of
the Crafter benchmark, which has no single goal, are the first steps of
`rlgpt.agents.envdoc.benchmark_plan` (``rlgpt run`` does not plan it: `rlgpt.run.runner.uses_planner`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rlgpt import prompts
from rlgpt.agents.common import degradable, describe_task, documentation, note_fallback
from rlgpt.agents.envdoc import achievement_requirements, benchmark_plan, prerequisite_chain
from rlgpt.agents.replies import Plan, Subtask
from rlgpt.config import AgentConfig
from rlgpt.llm.client import LLMClient
from rlgpt.llm.types import Message, SamplingParams

ROLE = "planner"
RECIPE_GRAPH = "recipe_graph"
"""The ``fallback`` mark of a plan built from the recipe graph alone (the model gave no valid plan)."""


def plan_goals(task: str) -> tuple[str, ...]:
    """The achievements a plan for `task` must reach: its targets (``a+b`` -> (a, b)), or for the Crafter
    benchmark the first steps of `benchmark_plan` (as many as the plan schema's ``maxItems``).

    Raises:
        ValueError: `task` names an unknown achievement.
    """
    from rlgpt.envs.tasks import BENCHMARK_TASK

    if task.strip() == BENCHMARK_TASK:
        limit = prompts.schema_for_role(ROLE)["properties"]["subtasks"]["maxItems"]
        return benchmark_plan()[:limit]
    goals = tuple(t.strip() for t in task.split("+"))
    prerequisite_chain(goals)  # raises on an unknown achievement
    return goals


@dataclass(frozen=True)
class PlanResult:
    """The plan to follow and how it was obtained."""

    plan: Plan
    """The chain to follow: the model's when valid, otherwise the repaired one."""
    model_plan: Plan | None
    """What the model proposed (None when it gave no schema-valid reply)."""
    problems: tuple[str, ...]
    """Why the model's plan was invalid (empty when it was used as is)."""
    repaired: bool
    """True when `plan` is not the model's plan (built or fixed from crafter's dependency graph)."""

    @property
    def fallback(self) -> str | None:
        """`RECIPE_GRAPH` when the model gave no valid plan at all (the plan is the graph's alone)."""
        return RECIPE_GRAPH if self.model_plan is None else None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"plan": self.plan.to_dict(), "model_plan": None if self.model_plan is None
                else self.model_plan.to_dict(), "problems": list(self.problems), "repaired": self.repaired,
                **({"fallback": self.fallback} if self.fallback else {})}


def plan_problems(plan: Plan, goals: tuple[str, ...]) -> list[str]:
    """Why `plan` cannot reach `goals`: a subtask before its prerequisites, or a goal missing."""
    needs = achievement_requirements()
    problems: list[str] = []
    seen: set[str] = set()
    for step in plan.subtasks:
        missing = sorted(needs[step.name] - seen)
        if missing:
            problems.append(f"{step.name} needs {', '.join(missing)} earlier in the plan")
        seen.add(step.name)
    for goal in goals:
        if goal not in seen:
            problems.append(f"the plan never reaches {goal}")
    return problems


def repair_plan(plan: Plan | None, goals: tuple[str, ...], skills: Mapping[str, str]) -> Plan:
    """A valid chain for `goals`: crafter's prerequisite order, keeping the model's descriptions and skill
    reuse where its steps appear (the model's extra steps that nothing requires are dropped)."""
    known = {s.name: s for s in plan.subtasks} if plan is not None else {}
    steps = []
    for name in prerequisite_chain(goals):
        if name in known:
            step = known[name]
            reuse = step.reuse_skill if step.reuse_skill in skills else ""
            steps.append(Subtask(step.name, step.description, reuse))
        else:
            steps.append(Subtask(name, f"unlock {name}", name if name in skills else ""))
    return Plan(tuple(steps))


class Planner:
    """Long-horizon task in, a valid ordered chain of achievements out (`PlanResult`)."""

    def __init__(self, client: LLMClient, config: AgentConfig | None = None) -> None:
        self.client = client
        self.config = config or AgentConfig()

    def messages(self, task: str, skills: Mapping[str, str]) -> list[Message]:
        """The prompt: crafter's rules, the macro API, the task and the skill library."""
        library = "\n".join(f"{name}: {text}" for name, text in skills.items()) or "(empty)"
        env_doc = self.config.env_doc
        return prompts.render(ROLE, **documentation(self.config.api, env_doc),
                              task=describe_task(task, env_doc), skills=library)

    def plan(self, task: str, skills: Mapping[str, str] | None = None) -> PlanResult:
        """Ask for a plan, validate it against crafter's requirements, repair it when invalid."""
        skills = dict(skills or {})
        goals = plan_goals(task)  # raises on an unknown achievement before asking anything
        model_plan: Plan | None = None
        try:
            data = self.client.structured(ROLE, self.messages(task, skills), prompts.schema_for_role(ROLE),
                                          sampling=SamplingParams(temperature=0.0,
                                                                  max_tokens=self.config.json_max_tokens,
                                                                  seed=self.config.seed))
            model_plan = Plan.from_dict(data)
        except Exception as exc:
            if not degradable(exc):
                raise
            note_fallback(self.client, ROLE)
            problems = [f"no valid plan from the model: {exc}"]
        else:
            problems = plan_problems(model_plan, goals)
            # A reused skill must exist in the library.
            problems += [f"{s.name} reuses unknown skill {s.reuse_skill!r}" for s in model_plan.subtasks
                         if s.reuse_skill and s.reuse_skill not in skills]
        if model_plan is not None and not problems:
            return PlanResult(model_plan, model_plan, (), False)
        return PlanResult(repair_plan(model_plan, goals, skills), model_plan, tuple(problems), True)
