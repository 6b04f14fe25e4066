"""Typed replies of the LLM roles, parsed from JSON that is validated against the role's schema.

The server constrains generation with the same schema, but every reply is validated again here: a
server may ignore the schema (or only support part of it), and a cached reply may predate a schema change.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

from rlgpt.llm.client import validation_error
from rlgpt.macro.compiler import MacroSource
from rlgpt.prompts import load_schema


class ReplyValidationError(ValueError):
    """A role's JSON reply does not have the required shape."""


def _validate(schema_name: str, data: Any) -> None:
    problem = validation_error(data, load_schema(schema_name))
    if problem is not None:
        raise ReplyValidationError(f"{schema_name} reply invalid {problem}")


def _unique(kind: str, names: list[str]) -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise ReplyValidationError(f"{kind} name {name!r} appears twice; names must be unique")
        seen.add(name)


@dataclass(frozen=True)
class SubAction:
    """One step of a decomposition."""

    name: str
    """snake_case identifier, unique within the decomposition."""
    description: str
    """What the sub-action achieves."""
    how: Literal["code", "rl"]
    """"code": the fast agent writes a macro-action; "rl": the policy learns it."""
    why: str
    """The slow agent's reason for the choice (kept for the critic and for reports)."""


@dataclass(frozen=True)
class Decomposition:
    """The slow agent's reply: the task split into sub-actions."""

    subactions: tuple[SubAction, ...]
    """Sub-actions in execution order."""

    @classmethod
    def from_dict(cls, data: Any) -> Decomposition:
        """Validate `data` against decomposition.schema.json and build the reply."""
        _validate("decomposition", data)
        subactions = tuple(SubAction(**s) for s in data["subactions"])
        _unique("sub-action", [s.name for s in subactions])
        return cls(subactions)

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON-ready form (inverse of from_dict)."""
        return {"subactions": [asdict(s) for s in self.subactions]}


@dataclass(frozen=True)
class FastReply:
    """The fast agent's reply: macro sources plus the RL setup."""

    macros: tuple[MacroSource, ...]
    """Macro-actions to add to the action space."""
    reward_code: str
    """Python source of the shaped reward ("" = the environment's reward only)."""
    observation: tuple[str, ...]
    """Observation keys the policy should see."""
    horizon: int
    """Episode length in primitive steps."""

    @classmethod
    def from_dict(cls, data: Any) -> FastReply:
        """Validate `data` against fast_reply.schema.json and build the reply."""
        _validate("fast_reply", data)
        macros = tuple(MacroSource(**m) for m in data["macros"])
        _unique("macro", [m.name for m in macros])
        return cls(macros, data["reward_code"], tuple(data["observation"]), int(data["horizon"]))

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON-ready form (inverse of from_dict)."""
        return {
            "macros": [asdict(m) for m in self.macros],
            "reward_code": self.reward_code,
            "observation": list(self.observation),
            "horizon": self.horizon,
        }


@dataclass(frozen=True)
class Feedback:
    """The critic's reply."""

    target: Literal["fast", "slow", "done"]
    """Who must change: the fast agent (code/reward), the slow agent (decomposition), or nobody."""
    problems: tuple[str, ...]
    """Observed problems."""
    suggestions: tuple[str, ...]
    """Concrete changes to try next iteration."""

    @classmethod
    def from_dict(cls, data: Any) -> Feedback:
        """Validate `data` against feedback.schema.json and build the reply."""
        _validate("feedback", data)
        return cls(data["target"], tuple(data["problems"]), tuple(data["suggestions"]))

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON-ready form (inverse of from_dict)."""
        return {"target": self.target, "problems": list(self.problems), "suggestions": list(self.suggestions)}


@dataclass(frozen=True)
class Subtask:
    """One step of a long-horizon plan."""

    name: str
    """snake_case identifier, unique within the plan."""
    description: str
    """What must be achieved."""
    reuse_skill: str
    """Name of a skill-library entry that already solves it, or "" to learn it."""


@dataclass(frozen=True)
class Plan:
    """The planner's reply: ordered subtasks."""

    subtasks: tuple[Subtask, ...]
    """Subtasks in the order they must be achieved."""

    @classmethod
    def from_dict(cls, data: Any) -> Plan:
        """Validate `data` against plan.schema.json and build the reply."""
        _validate("plan", data)
        subtasks = tuple(Subtask(**s) for s in data["subtasks"])
        _unique("subtask", [s.name for s in subtasks])
        return cls(subtasks)

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON-ready form (inverse of from_dict)."""
        return {"subtasks": [asdict(s) for s in self.subtasks]}


REPLY_TYPES: dict[str, type[Decomposition] | type[FastReply] | type[Feedback] | type[Plan]] = {
    "planner": Plan,
    "slow": Decomposition,
    "fast": FastReply,
    "critic": Feedback,
}


def parse_reply(role: str, data: Any) -> Decomposition | FastReply | Feedback | Plan:
    """Validate and convert `role`'s JSON reply into its typed object."""
    try:
        reply_type = REPLY_TYPES[role]
    except KeyError:
        raise ReplyValidationError(f"unknown role {role!r}; known roles: {sorted(REPLY_TYPES)}") from None
    return reply_type.from_dict(data)
