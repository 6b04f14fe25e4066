"""Play a chain's earlier links again where a later link needs more of what they give.

A macro's call ends as soon as its goal goes up (`rlgpt.macro.compiler.MacroSource.goal`): one call of a
wood-collecting link yields one wood, while the table after it takes two. A policy over these macros calls
the wood link again; a probe or a chain prefix, which plays each earlier link once, does the same here:
before a link, every earlier link whose goal gives an item it still lacks (`control.link_gap`: what its
recipe uses, or the tool collecting its material requires) is called again while it keeps adding to that
item, within `TOP_UP_CALLS` extra calls per episode. Measured: a stone link probed after a pickaxe link
that missed once was judged in worlds where no code could mine stone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import gymnasium

from rlgpt.macro.api import GameAPI
from rlgpt.macro.compiler import CompiledMacro
from rlgpt.macro.control import link_gap
from rlgpt.macro.runtime import MacroResult, run_macro

TOP_UP_CALLS = 8
"""Most extra calls of earlier links per episode (`TopUp`); `rlgpt.macro.probe.probe_step_bound` counts
them."""


@dataclass
class TopUp:
    """One episode's top-ups: the extra calls left, and the steps they played."""

    calls_left: int = TOP_UP_CALLS
    """Extra calls this episode may still make."""
    steps: int = 0
    """Primitive steps the extra calls played."""

    def before(self, env: gymnasium.Env, game: GameAPI, earlier: Sequence[CompiledMacro], goal: str,
               max_steps: int) -> MacroResult | None:
        """Call the `earlier` links that give what a call toward `goal` lacks in `game` until it is held
        (each while its calls add to its item); returns the call during which the episode ended, if one
        did."""
        lacking = link_gap(goal, dict(game.inventory))
        for macro in earlier:
            item = macro.goal.item if macro.goal is not None else None
            while item in lacking and self.calls_left:
                have = game.item(item)
                self.calls_left -= 1
                result = run_macro(env, macro, game, gamma=1.0, max_steps=max_steps)
                self.steps += result.steps
                if result.terminated or result.truncated:
                    return result
                if game.item(item) <= have:
                    break
                lacking = link_gap(goal, dict(game.inventory))
        return None
