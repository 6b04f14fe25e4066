"""Time budget of generated code that runs inside the game loop (macros, the dense reward).

The sandbox bounds one call (`MacroLimits.max_seconds`), but code that always stays just under that bound
would slow training down 100x without a single failure. A `TimeBudget` keeps, per macro or reward, the
seconds its own code took and the seconds of the steps it ran in (its code plus the game's steps), in
total and for the current episode. Once the code has used `grace_seconds` and its share of that time is
above `max_share`, it is disabled for the rest of the process with a ``disabled`` diagnostic, which the
caller records where the critic reads failures (``macro/<name>/fail_disabled``, the reward's diagnostics).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rlgpt.macro.diagnostics import Diagnostic

DEFAULT_MAX_SHARE = 0.9
"""Default `TimeBudget.max_share` (`rlgpt.config.MacroConfig.max_time_share`)."""
DEFAULT_GRACE_SECONDS = 2.0
"""Default `TimeBudget.grace_seconds` (`rlgpt.config.MacroConfig.budget_grace_seconds`)."""


@dataclass
class TimeBudget:
    """Where one macro's (or the reward's) time goes, and whether it has been switched off."""

    what: str
    """What is timed, for the diagnostic ("macro 'go_to_tree'", "the dense reward")."""
    max_share: float = DEFAULT_MAX_SHARE
    """Largest share of the time of its steps the code may take (1: never disabled)."""
    grace_seconds: float = DEFAULT_GRACE_SECONDS
    """Code seconds before the share is enforced (start-up, a short run's noise)."""
    code_seconds: float = 0.0
    """Seconds in the code itself, over the process."""
    total_seconds: float = 0.0
    """Seconds of the calls it ran in (code + game steps), over the process."""
    calls: int = 0
    """Calls timed."""
    episode_code_seconds: float = 0.0
    """`code_seconds` of the current episode (`new_episode` resets it)."""
    disabled: Diagnostic | None = field(default=None)
    """Why it was switched off, or None while it runs."""

    def __post_init__(self) -> None:
        if not 0 < self.max_share <= 1:
            raise ValueError(f"TimeBudget.max_share must be in (0, 1], got {self.max_share}")
        if self.grace_seconds < 0:
            raise ValueError(f"TimeBudget.grace_seconds must be >= 0, got {self.grace_seconds}")

    def new_episode(self) -> None:
        """Start the per-episode count."""
        self.episode_code_seconds = 0.0

    def charge(self, code_seconds: float, total_seconds: float) -> Diagnostic | None:
        """Record one call (``code_seconds`` of its ``total_seconds`` were the code's); returns the
        ``disabled`` diagnostic on the call that disables it, None otherwise."""
        self.calls += 1
        self.code_seconds += code_seconds
        self.total_seconds += total_seconds
        self.episode_code_seconds += code_seconds
        if (self.disabled is None and self.max_share < 1 and self.code_seconds > self.grace_seconds
                and self.code_seconds > self.max_share * self.total_seconds):
            share = self.code_seconds / self.total_seconds
            per_call = self.code_seconds / self.calls
            self.disabled = Diagnostic(
                "disabled", f"{self.what} took {share:.0%} of the time of its steps "
                f"({per_call * 1000:.1f} ms of code per call over {self.calls} calls; limit "
                f"{self.max_share:.0%}); it was switched off for the rest of the run: do less work per step")
            return self.disabled
        return None
