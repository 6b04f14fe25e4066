"""Prompts that fit the model's context by construction.

A role's prompt is a `RolePrompt`: its template values, each with a cut priority. `fit` renders it and,
while prompt + completion exceed the context (``n_ctx - max_tokens`` left for the prompt), halves the part
that is cut first (highest priority number; 0 = never cut), ending the part with a visible ``[cut: ...]``
marker so the model (and a human reading the run) knows something was left out. Tokens are counted with
the model's own tokenizer when the client has one (embedded), else estimated conservatively from
characters (HTTP, the isolated server). A server that still reports an overflow gets the same prompt
fitted to a smaller budget (`ask_fitted`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from rlgpt.llm.errors import ContextOverflowError
from rlgpt.llm.types import Message

DEFAULT_N_CTX = 8192
"""The context window `rlgpt run` assumes without a config: the critic's prompt with a full evaluation
report needs ~4.5k tokens plus its completion (4096 overflowed); configs/run.yaml sets the same."""

CHARS_PER_TOKEN = 3.0
"""Characters per token when no tokenizer is at hand (HTTP): below what Qwen's tokenizer averages on the
prompts (~4.5), so the estimate over-counts and an estimated prompt fits."""

MESSAGE_OVERHEAD_TOKENS = 8
"""Chat-template tokens around each message (role markers, separators)."""

SHRINK_RETRIES = 3
"""Times a prompt a server refused as too long is fitted again to 3/4 of the budget."""

CUT_ORDER = ("traces", "probes", "diagnostics", "eval_report", "feedback", "skills", "examples",
             "decomposition", "macros")
"""What is cut first, first: old traces, probe details, diagnostics, the evaluation, feedback history,
stored skills, examples, then the decomposition. Template values not listed are never cut (the rules,
the API, the task: without them the reply is worthless)."""


def priority(name: str) -> int:
    """Cut priority of template value `name` (higher is cut first; 0 = never)."""
    return len(CUT_ORDER) - CUT_ORDER.index(name) if name in CUT_ORDER else 0


def estimate_tokens(text: str) -> int:
    """A conservative token count of `text` from its length."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def cut_text(text: str, keep: int, name: str) -> str:
    """`text` cut to about `keep` characters (its start), ending with a ``[cut: ...]`` marker."""
    if len(text) <= keep:
        return text
    dropped = len(text) - keep
    return f"{text[:keep].rstrip()}\n[cut: {dropped} characters of {name} to fit the context]"


@dataclass
class RolePrompt:
    """One role's prompt as template values with cut priorities (see `CUT_ORDER`)."""

    template: str
    """The prompt template name (rlgpt.prompts)."""
    values: dict[str, str]
    """Template values."""
    cuts: list[str] = field(default_factory=list)
    """Values cut by `fit` so far (for the run record)."""

    def render(self) -> list[Message]:
        """The messages with the current values."""
        from rlgpt import prompts

        return prompts.render(self.template, **self.values)


def prompt_tokens(client: Any, messages: list[Message]) -> int:
    """Tokens of `messages` as `client` counts them (its tokenizer if it has one, else the estimate)."""
    count: Callable[[str], int] = getattr(client, "count_tokens", None) or estimate_tokens
    return sum(count(m["content"]) + MESSAGE_OVERHEAD_TOKENS for m in messages)


def fit(prompt: RolePrompt, client: Any, max_tokens: int, budget: int | None = None) -> list[Message]:
    """`prompt`'s messages cut (in priority order) until they fit `budget` tokens (default the client's
    ``n_ctx - max_tokens``; a client without ``n_ctx`` gets the messages as they are).

    Raises:
        ContextOverflowError: even with every cuttable value cut, the prompt does not fit (by the model's
            tokenizer; an estimate that says so sends the prompt and lets the server judge).
    """
    if budget is None:
        n_ctx = getattr(client, "n_ctx", None)
        if not n_ctx:
            return prompt.render()
        budget = n_ctx - max_tokens
    while True:
        messages = prompt.render()
        used = prompt_tokens(client, messages)
        if used <= budget:
            return messages
        cuttable = [(priority(k), k) for k, v in prompt.values.items() if priority(k) and len(v) > 40]
        if not cuttable:
            if getattr(client, "count_tokens", None) is None or not getattr(client, "exact_tokens", True):
                return messages
            raise ContextOverflowError(
                f"prompt {prompt.template!r} needs {used} tokens with every cuttable part cut; the context "
                f"leaves {budget} after the completion's {max_tokens}: raise llm.n_ctx")
        _, name = max(cuttable)
        text = prompt.values[name]
        # Cut by the share of the overshoot this part can cover, at least half of what it has left.
        over_chars = int((used - budget) * CHARS_PER_TOKEN) + 64
        keep = max(0, min(len(text) // 2, len(text) - over_chars))
        prompt.values[name] = cut_text(text, keep, name) if keep > 0 else f"[cut: all of {name}]"
        if name not in prompt.cuts:
            prompt.cuts.append(name)


T = TypeVar("T")


def ask_fitted(prompt: RolePrompt, client: Any, max_tokens: int,
               ask: Callable[[list[Message]], T]) -> T:
    """`ask` with `prompt` fitted to the client's context; a server that still reports an overflow (its
    tokenizer counts more than the estimate) gets the prompt fitted to 3/4 of the budget, `SHRINK_RETRIES`
    times."""
    n_ctx = getattr(client, "n_ctx", None)
    budget = n_ctx - max_tokens if n_ctx else None
    for attempt in range(SHRINK_RETRIES + 1):
        messages = fit(prompt, client, max_tokens, budget)
        try:
            return ask(messages)
        except ContextOverflowError:
            if attempt == SHRINK_RETRIES:
                raise
            used = prompt_tokens(client, messages)
            budget = int(min(budget or used, used) * 0.75)
    raise AssertionError("unreachable")

