"""Typed replies of the LLM roles, parsed from JSON that is validated against the role's schema.

The server constrains generation with the same schema, but every reply is validated again here: a
server may ignore the schema (or only support part of it), and a cached reply may predate a schema change.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

from rlgpt.errors import RlgptError
from rlgpt.llm.client import validation_error
from rlgpt.macro.compiler import MacroSource
from rlgpt.prompts import load_schema


class ReplyValidationError(RlgptError, ValueError):
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
    goal: str
    """Crafter achievement or inventory item whose counter rises when the sub-action succeeds ("" = none);
    the probe checks macros against it."""
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


DEFAULT_HORIZON = 1000
"""Episode length of `FastSetup.default`: crafter's own default episode length."""


@dataclass(frozen=True)
class FastSetup:
    """The fast agent's structured RL setup (the short JSON part of its work)."""

    horizon: int
    """Episode length in primitive steps."""
    observation: tuple[str, ...]
    """Observation parts the policy sees ("view", "vector"), without repeats."""
    macros: tuple[str, ...]
    """Names of the offered macro-actions to add to the action space, without repeats."""

    @classmethod
    def from_dict(cls, data: Any) -> FastSetup:
        """Validate `data` against fast_setup.schema.json and build the reply."""
        _validate("fast_setup", data)
        return cls(int(data["horizon"]), tuple(dict.fromkeys(data["observation"])),
                   tuple(dict.fromkeys(data["macros"])))

    @classmethod
    def default(cls, macros: list[str] | tuple[str, ...] = ()) -> FastSetup:
        """The setup used when the model gives none: both observation parts, every offered macro, and
        `DEFAULT_HORIZON` (the chain of kept macros can lengthen it)."""
        return cls(DEFAULT_HORIZON, ("view", "vector"), tuple(dict.fromkeys(macros)))

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON-ready form (inverse of from_dict)."""
        return {"horizon": self.horizon, "observation": list(self.observation), "macros": list(self.macros)}


@dataclass(frozen=True)
class FastReply:
    """Everything the fast agent hands to training: compiled-clean macro sources plus the RL setup.

    Assembled by `rlgpt.agents.fast.FastAgent` from code blocks (macros, reward) and the FastSetup JSON;
    every macro and the reward code have passed the compiler when the agent returns it.
    """

    macros: tuple[MacroSource, ...]
    """Macro-actions to add to the action space."""
    reward_code: str
    """Source of ``def reward(game, prev)`` (see rlgpt.macro.reward); "" = the task's reward only."""
    observation: tuple[str, ...]
    """Observation parts the policy sees."""
    horizon: int
    """Episode length in primitive steps."""

    @classmethod
    def from_dict(cls, data: Any) -> FastReply:
        """Build from the JSON form written by to_dict (e.g. a run directory file)."""
        try:
            macros = tuple(MacroSource.from_dict(m) for m in data["macros"])
            reply = cls(macros, str(data["reward_code"]), tuple(str(o) for o in data["observation"]),
                        int(data["horizon"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise ReplyValidationError(f"fast reply invalid: {exc!r}") from None
        _unique("macro", [m.name for m in macros])
        if reply.horizon < 1:
            raise ReplyValidationError(
                f"fast reply invalid: horizon {reply.horizon} is less than the minimum 1")
        return reply

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON-ready form (inverse of from_dict)."""
        return {
            "macros": [m.to_dict() for m in self.macros],
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
    subaction: str = ""
    """The sub-action whose macro failed ("" = none named)."""
    change: str = ""
    """What that sub-action's code must do differently: the next fast-agent prompt for it carries exactly
    this text (`rlgpt.agents.critic.critic_notes`)."""

    @classmethod
    def from_dict(cls, data: Any) -> Feedback:
        """Validate `data` against feedback.schema.json and build the reply."""
        _validate("feedback", data)
        return cls(data["target"], tuple(data["problems"]), tuple(data["suggestions"]),
                   data.get("subaction", ""), data.get("change", ""))

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON-ready form (inverse of from_dict; a sub-action's note only when one is named)."""
        named = {"subaction": self.subaction, "change": self.change} if self.subaction or self.change else {}
        return {"target": self.target, "problems": list(self.problems), "suggestions": list(self.suggestions),
                **named}


@dataclass(frozen=True)
class Subtask:
    """One step of a long-horizon plan."""

    name: str
    """The Crafter achievement this step unlocks; unique within the plan."""
    description: str
    """What must be achieved."""
    reuse_skill: str
    """Name of a skill-library entry that already solves it, or "" to learn it."""
    # `name` is a Crafter achievement (the plan schema enumerates them), so plans can be checked against
    # crafter's recipes (rlgpt.agents.planner).


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


Reply = Decomposition | FastSetup | FastReply | Feedback | Plan
"""Any typed reply."""

REPLY_TYPES: dict[str, type[Reply]] = {
    "planner": Plan,
    "slow": Decomposition,
    "fast_setup": FastSetup,
    "fast": FastReply,
    "critic": Feedback,
}


def parse_reply(role: str, data: Any) -> Reply:
    """Validate and convert `role`'s JSON reply into its typed object."""
    try:
        reply_type = REPLY_TYPES[role]
    except KeyError:
        raise ReplyValidationError(f"unknown role {role!r}; known roles: {sorted(REPLY_TYPES)}") from None
    return reply_type.from_dict(data)
