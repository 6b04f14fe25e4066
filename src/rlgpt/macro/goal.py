"""What a sub-action should achieve: one Crafter inventory item or achievement counter going up.

A goal judges a macro's probe calls (`rlgpt.macro.probe`) and ends its calls in training (the option's
termination condition, `rlgpt.macro.runtime.MacroCall`): both count the same thing, so a macro that probes
well behaves the same way when the policy calls it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from crafter import constants


class Counts(Protocol):
    """Anything holding the two counter tables: a `ProbeState`, a `GameAPI`."""

    @property
    def inventory(self) -> Mapping[str, int]: ...

    @property
    def achievements(self) -> Mapping[str, int]: ...


@dataclass(frozen=True)
class Goal:
    """One inventory item or achievement counter that should go up."""

    kind: str
    """"item" or "achievement"."""
    name: str
    """The inventory item (e.g. "wood") or achievement (e.g. "place_table")."""

    @classmethod
    def parse(cls, text: str) -> Goal:
        """An achievement name ("collect_wood") or an inventory item name ("wood")."""
        if text in constants.achievements:
            return cls("achievement", text)
        if text in constants.items:
            return cls("item", text)
        raise ValueError(f"goal {text!r} is neither a Crafter achievement nor an inventory item")

    @property
    def item(self) -> str | None:
        """The inventory item whose count goes up with the goal: the item itself, or what a ``collect_`` or
        ``make_`` achievement adds (``collect_wood`` -> wood); None for the others (placing, eating, ...)."""
        if self.kind == "item":
            return self.name
        kind, _, item = self.name.partition("_")
        return item if kind in ("collect", "make") and item in constants.items else None

    def count(self, state: Counts | Any) -> int:
        """The goal's counter in `state` (0 when absent)."""
        table = state.inventory if self.kind == "item" else state.achievements
        return int(table.get(self.name, 0))

    def counter(self, game: Any) -> Callable[[], int]:
        """A reader of the goal's counter in `game` (a `GameAPI`), for the runtime's every step: it reads
        the one count instead of copying the whole inventory or achievement table (~15x less time)."""
        # The game's view (`rlgpt.macro.views.GameView`), package-internal: macro code reads the copies.
        view, name = game._view, self.name
        return (lambda: view.item(name)) if self.kind == "item" else (lambda: view.achievement(name))

    def reached(self, before: Counts, after: Counts) -> bool:
        """Whether the counter went up between the two states."""
        return self.count(after) > self.count(before)

    def __str__(self) -> str:
        return self.name
