"""Every primitive env step a run takes, by kind: what ``--steps`` caps and ``summary.json`` reports.

A run plays the environment for more than its trainings: the fast agent probes every macro candidate
(setup macros and warm-up moves included) and dry-runs every reward it checks, the planner plays a chain's
skills to build start states, every training is followed by a validation evaluation, and the selected
policy (or a baseline, or a skill chain) is evaluated once on test episodes. Each of these reports the steps
it played in its step file (so that a resumed run, which reads the file instead of playing again, counts
them alike), and the loop adds them to one `StepLedger`.

The rule: ``steps_used`` is the sum of every kind except ``test_eval``. Test episodes cannot change any
decision or result of the run (nothing reads them but the report), so they are reported but not charged;
validation episodes are charged, since they decide the threshold stop, the best iteration and what the
skill library stores.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

STEP_KINDS = ("train", "probe", "reward_check", "prefix", "eval", "test_eval")
"""Every kind of env step a run reports: trainings (primitive steps, a macro call of k steps counting k),
macro probes, reward dry runs, chain-prefix plays (a chain's start states), validation evaluations and the
final test evaluations."""
UNCHARGED_KINDS = frozenset({"test_eval"})
"""Kinds reported but not charged to the budget (they only measure, nothing the run decides reads them)."""


def no_steps() -> dict[str, int]:
    """``{kind: 0}`` for every kind, in `STEP_KINDS` order."""
    return dict.fromkeys(STEP_KINDS, 0)


def charged(by_kind: Mapping[str, int]) -> int:
    """The steps of `by_kind` charged to the budget (every kind but `UNCHARGED_KINDS`)."""
    return sum(int(n) for kind, n in by_kind.items() if kind not in UNCHARGED_KINDS)


def steps_by_kind(record: Mapping[str, Any]) -> dict[str, int]:
    """A record's ``steps_by_kind`` with every kind present; a record written before steps were counted by
    kind (``summary.json``, an iteration) reads as its ``steps_used`` (or ``steps``) of training."""
    found = record.get("steps_by_kind")
    if isinstance(found, Mapping):
        return {**no_steps(), **{k: int(v) for k, v in found.items()}}
    return {**no_steps(), "train": int(record.get("steps_used", record.get("steps", 0)) or 0)}


class StepLedger:
    """A run's env steps so far, per kind. `used` is what the budget is charged (`charged`)."""

    def __init__(self, by_kind: Mapping[str, int] | None = None) -> None:
        self._steps = no_steps()
        self.add_all(by_kind or {})

    def add(self, kind: str, steps: int) -> None:
        """Count `steps` primitive steps of `kind` (one of `STEP_KINDS`)."""
        if kind not in self._steps:
            raise ValueError(f"unknown step kind {kind!r}; one of {', '.join(STEP_KINDS)}")
        self._steps[kind] += int(steps)

    def add_all(self, by_kind: Mapping[str, int]) -> None:
        """Count every kind of `by_kind` (a record's ``steps_by_kind``)."""
        for kind, steps in by_kind.items():
            self.add(kind, steps)

    @property
    def used(self) -> int:
        """Steps charged to the budget so far."""
        return charged(self._steps)

    def by_kind(self) -> dict[str, int]:
        """A copy of the counts, every kind present (0 when none)."""
        return dict(self._steps)

    def since(self, earlier: Mapping[str, int]) -> dict[str, int]:
        """The steps counted since `earlier` (an earlier `by_kind`), per kind."""
        return {kind: n - int(earlier.get(kind, 0)) for kind, n in self._steps.items()}

    def restore(self, earlier: Mapping[str, int]) -> None:
        """Set the counts back to `earlier` (an earlier `by_kind`), in place."""
        self._steps = no_steps()
        self.add_all(earlier)

    def __repr__(self) -> str:
        return f"StepLedger(used={self.used}, {self._steps})"
