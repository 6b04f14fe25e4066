"""Role prompt templates and the JSON schemas of their replies, loaded from package data.

Each template has `<name>.system.md` and `<name>.user.md` (string.Template syntax, `$name` placeholders;
`$$` is a literal dollar). Every system message starts with the same preamble (`preamble.md`: the game's
rules, then the game API), so the calls of every role share one long prompt prefix that the model keeps
evaluated (`rlgpt.llm.embedded`'s prompt states): a role's first call computes only its own instructions.
Templates whose reply is JSON have a reply schema `<schema>.schema.json`, and
`$schema` is filled in automatically with it so the model sees the shape even on servers that cannot
enforce it. The fast agent's code templates ("fast" for macros, "fast_reward" for the dense reward) have
no schema: code comes back in ```python blocks, never inside JSON strings.

Parts of a template that the prompt-knowledge ablation (`rlgpt.config.AgentConfig.env_doc`, ``examples``)
leaves out are kept in `<template>.<part>.part.md` and filled in by the agents (`part`).
"""

from __future__ import annotations

import json
import string
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from rlgpt.errors import RlgptError

ROLES = ("planner", "slow", "fast", "critic")
"""The LLM roles (also the names their calls are accounted under in `llm/<role>/*`)."""
TEMPLATES = ("planner", "slow", "fast", "fast_reward", "fast_setup", "critic")
"""Every prompt template; the fast role uses three (macro code, reward code, RL setup JSON)."""
SCHEMA_FOR_ROLE = {
    "planner": "plan", "slow": "decomposition", "fast_setup": "fast_setup", "critic": "feedback",
}
"""Template -> reply schema, for the templates whose reply is JSON."""


class PromptError(RlgptError, ValueError):
    """A prompt template or schema is unknown, or a template is missing a value."""


@dataclass(frozen=True)
class RoleTemplate:
    """The two message templates of one role."""

    role: str
    """Role name, one of ROLES."""
    system: string.Template
    """System message template."""
    user: string.Template
    """User message template."""

    @property
    def fields(self) -> frozenset[str]:
        """Placeholder names the caller must supply (everything but `schema`)."""
        names = set(self.system.get_identifiers()) | set(self.user.get_identifiers())
        return frozenset(names - {"schema"})


def _read(name: str) -> str:
    try:
        return resources.files(__name__).joinpath(name).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PromptError(f"prompt file {name!r} is missing from package rlgpt.prompts") from None


@cache
def _load_schema_text(name: str) -> str:
    return _read(f"{name}.schema.json")


def load_schema(name: str) -> dict[str, Any]:
    """Return a fresh copy of the JSON schema `name` (e.g. "decomposition")."""
    if name not in SCHEMA_FOR_ROLE.values():
        raise PromptError(f"unknown schema {name!r}; known: {sorted(SCHEMA_FOR_ROLE.values())}")
    return json.loads(_load_schema_text(name))


def schema_for_role(role: str) -> dict[str, Any]:
    """Return the JSON schema of template `role`'s reply."""
    _check_role(role)
    if role not in SCHEMA_FOR_ROLE:
        raise PromptError(f"template {role!r} replies with code, not JSON; it has no schema")
    return load_schema(SCHEMA_FOR_ROLE[role])


def schema_text(role: str) -> str:
    """Template `role`'s reply schema as its prompt shows it: compact JSON on one line (the decomposition's
    is 332 tokens instead of 532 indented; the server enforces the schema anyway, the model only needs to
    read its shape)."""
    return json.dumps(schema_for_role(role), separators=(",", ":"))


def _check_role(role: str) -> None:
    if role not in TEMPLATES:
        raise PromptError(f"unknown role {role!r}; known roles: {TEMPLATES}")


PREAMBLE = "preamble.md"
"""The start of every role's system message (``$env_rules``, ``$macro_api``): one text, so that every role's
prompt begins with the same tokens."""


@cache
def load_template(role: str) -> RoleTemplate:
    """Return the system and user templates of `role` (the system one with the shared preamble first)."""
    _check_role(role)
    system = _read(PREAMBLE) + _read(f"{role}.system.md")
    return RoleTemplate(role, string.Template(system), string.Template(_read(f"{role}.user.md")))


@cache
def _part_text(name: str) -> str:
    return _read(f"{name}.part.md").rstrip("\n")


def part(name: str, **values: str) -> str:
    """The optional prompt part `name` (e.g. ``"slow.examples"``: file ``slow.examples.part.md``, without
    its final newline), its ``$name`` placeholders filled from `values`."""
    text = _part_text(name)
    return string.Template(text).substitute(values) if values else text


def render(role: str, **values: str) -> list[dict[str, str]]:
    """Fill `role`'s templates and return the chat messages [system, user].

    Raises:
        PromptError: a placeholder has no value, or a value is given that no placeholder uses.
    """
    template = load_template(role)
    missing = sorted(template.fields - set(values))
    unused = sorted(set(values) - template.fields)
    if missing or unused:
        raise PromptError(
            f"role {role!r} template needs values {sorted(template.fields)}; "
            f"missing {missing}, unexpected {unused}"
        )
    filled = _with_schema(role, values)
    return [
        {"role": "system", "content": template.system.substitute(filled).strip()},
        {"role": "user", "content": template.user.substitute(filled).strip()},
    ]


def render_system(role: str, **values: str) -> str:
    """`role`'s system message alone, from the values its system template uses: the same text `render`
    puts first, whatever the user message (the task) will be.

    Raises:
        PromptError: a placeholder of the system template has no value.
    """
    template = load_template(role)
    try:
        return template.system.substitute(_with_schema(role, values)).strip()
    except KeyError as exc:
        raise PromptError(f"role {role!r} system template needs a value for {exc}") from None


def _with_schema(role: str, values: dict[str, str]) -> dict[str, str]:
    return {**values, "schema": schema_text(role)} if role in SCHEMA_FOR_ROLE else dict(values)
