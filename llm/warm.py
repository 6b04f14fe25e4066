"""Compute the model's prompt states for the prompts' constant prefixes before any run asks for them.

Every call of a role starts with that role's system message (the shared rules + API preamble, then the
role's instructions), whatever the task. With prompt states kept on disk (`rlgpt.llm.embedded`), a call
computes only what follows the longest prefix some earlier call left; the first run on a machine finds
nothing kept and computes every system message once, ~60 prompt tokens/s for the 1.5B on 2 cores. `warm`
asks for one token after each system message, so those states are kept before the first run (`rlgpt warm`,
which `make run` calls once per machine). On an OpenAI-compatible server it fills the server's own prefix
cache, where it has one (vLLM's automatic prefix caching).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from rlgpt.llm.types import Backend, SamplingParams

ONE_TOKEN = SamplingParams(temperature=0.0, max_tokens=1)
"""A warming call needs the prompt computed, not a reply."""


@dataclass(frozen=True)
class Warmed:
    """One system message's warming call."""

    name: str
    """The prompt template it belongs to."""
    prompt_tokens: int
    """Tokens of the warming prompt (the system message and an empty user turn)."""
    computed_tokens: int
    """Of those, computed now; the rest were already kept (an earlier warm or run)."""
    seconds: float
    """Wall time of the call."""


def warm(backend: Backend, systems: Mapping[str, str],
         on_start: Callable[[int, int, str], None] | None = None,
         on_done: Callable[[Warmed], None] | None = None) -> list[Warmed]:
    """Ask `backend` for one token after each of `systems` (name -> system message), in order, so the model
    keeps each one's state; return what each call computed. Messages sharing a prefix (the preamble) compute
    it once. `on_start(i, n, name)` is called before message i (1-based) of n, `on_done` after it."""
    done = []
    for i, (name, text) in enumerate(systems.items(), 1):
        if on_start is not None:
            on_start(i, len(systems), name)
        start = time.perf_counter()
        completion = backend.complete([{"role": "system", "content": text}, {"role": "user", "content": ""}],
                                      None, ONE_TOKEN)
        done.append(Warmed(name, completion.prompt_tokens,
                           max(completion.prompt_tokens - completion.cached_tokens, 0),
                           time.perf_counter() - start))
        if on_done is not None:
            on_done(done[-1])
    return done
