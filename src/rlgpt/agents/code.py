"""Code out of model replies, and the compile-and-repair loop every code-writing call goes through.

Small models write much better code in a fenced ```python block than inside a JSON string, but they do
not always follow the format: the language tag may be missing, prose may come before or after, the reply
may be cut off at max_tokens before the closing fence, or the function may carry a different name.
`extract_function` copes with all of these; `write_code` asks, extracts, compiles and sends compiler
diagnostics back to the model (bounded retries), recording every attempt.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rlgpt.agents.common import degradable
from rlgpt.llm.client import LLMClient
from rlgpt.llm.types import Completion, Message, SamplingParams
from rlgpt.macro.diagnostics import Diagnostic, MacroCompileError

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL)
_DEF = re.compile(r"^def\s+([A-Za-z_][A-Za-z0-9_]*)\s*\(", re.MULTILINE)


def code_blocks(text: str) -> list[str]:
    """Fenced code blocks of `text`, in order (an unterminated last block runs to the end)."""
    return [m.group(2) for m in _FENCE.finditer(text)]


def _unfenced(text: str) -> str | None:
    """From the first top-level `def` to the first following top-level line that is prose, not code."""
    match = _DEF.search(text)
    if match is None:
        return None
    lines = text[match.start():].splitlines()
    kept = [lines[0]]
    for line in lines[1:]:
        if line and not line[0].isspace() and not line.startswith(("def ", "#", "@", ")", "]", "}")):
            break
        kept.append(line)
    return "\n".join(kept).rstrip() + "\n"


def extract_function(text: str, name: str) -> str | None:
    """The source defining function `name` in a model reply, renamed to `name` when the reply's only
    top-level function has another name; None when the reply holds no function definition."""
    candidates = [b for b in code_blocks(text) if _DEF.search(b)]
    if not candidates:
        found = _unfenced(text)
        candidates = [found] if found else []
    if not candidates:
        return None
    exact = [c for c in candidates if re.search(rf"^def\s+{re.escape(name)}\s*\(", c, re.MULTILINE)]
    code = (exact or candidates)[0].strip("\n") + "\n"
    if not exact:
        names = _DEF.findall(code)
        if len(set(names)) == 1:
            # One function under another name: rename its definition and any recursive calls.
            code = re.sub(rf"\b{re.escape(names[0])}\b(?=\s*\()", name, code)
    return code


@dataclass(frozen=True)
class CodeAttempt:
    """One model reply in a compile-and-repair loop."""

    reply: str
    """The model's raw reply."""
    code: str | None
    """The extracted function (None when the reply held none)."""
    diagnostics: tuple[Diagnostic, ...]
    """Why it was rejected (empty when accepted)."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"reply": self.reply, "code": self.code,
                "diagnostics": [d.to_dict() for d in self.diagnostics]}


@dataclass
class CodeResult:
    """The outcome of one `write_code` loop: the accepted code (if any) and every attempt."""

    code: str | None
    """Accepted source, or None when every attempt was rejected."""
    compiled: Any
    """What the compile step returned for the accepted source (None when rejected)."""
    attempts: list[CodeAttempt] = field(default_factory=list)
    """Every reply, oldest first; ``len(attempts) - 1`` repairs were asked for."""
    error: str = ""
    """The LLM fault that ended the loop ("" = none): a call that failed (a server error, a timeout, an
    overflow) has no reply to repair, so the code is missing as when every attempt was rejected."""

    @property
    def first_try(self) -> bool:
        """Accepted without any repair."""
        return self.code is not None and len(self.attempts) == 1

    @property
    def diagnostics(self) -> tuple[Diagnostic, ...]:
        """The last attempt's diagnostics (empty when accepted)."""
        return self.attempts[-1].diagnostics if self.attempts else ()


def program_key(code: str | None) -> str | None:
    """What makes two replies' functions the same program: the syntax tree, so comments, blank lines and
    spacing do not count (the text itself when it does not parse; None for no code)."""
    if code is None:
        return None
    try:
        return ast.dump(ast.parse(code))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return code


def format_diagnostics(diagnostics: tuple[Diagnostic, ...], limit: int = 6) -> str:
    """Diagnostics as bullet lines, at most `limit` of them."""
    lines = [f"- {d}" for d in diagnostics[:limit]]
    if len(diagnostics) > limit:
        lines.append(f"- ... and {len(diagnostics) - limit} more")
    return "\n".join(lines)


Check = Callable[[str], Any]
"""Compiles (and may dry-run) extracted code; raises MacroCompileError with diagnostics to reject it."""


def write_code(client: LLMClient, role: str, messages: list[Message], name: str, check: Check, *,
               sampling: SamplingParams, retries: int, repair_hint: str = "",
               give_up: Callable[[], bool] | None = None, first: Completion | None = None) -> CodeResult:
    """Ask for function `name`, extract it, `check` it; send diagnostics back up to `retries` times,
    followed by `repair_hint` (a reminder of the rules the diagnostics are about). `give_up`, asked before
    each repair, ends the loop when it returns True (the caller has what it needs another way). `first` is
    the first reply when the caller sampled it already (several decoded together: `LLMClient.chat_many`)."""
    conversation = list(messages)
    result = CodeResult(None, None)
    for attempt in range(retries + 1):
        if attempt == 0 and first is not None:
            completion = first
        else:
            try:
                completion = client.chat(role, conversation, sampling=sampling)
            except Exception as exc:
                if not degradable(exc):
                    raise
                result.error = str(exc)
                break
        code = extract_function(completion.text, name)
        if code is None:
            cut = " (the reply was cut off at the token limit; write a shorter function)" \
                if completion.finish_reason == "length" else ""
            problem: tuple[Diagnostic, ...] = (
                Diagnostic("syntax", f"the reply contains no `def {name}(...)` function{cut}"),)
        else:
            try:
                compiled = check(code)
            except MacroCompileError as exc:
                problem = exc.diagnostics
            else:
                result.attempts.append(CodeAttempt(completion.text, code, ()))
                result.code, result.compiled = code, compiled
                return result
        result.attempts.append(CodeAttempt(completion.text, code, problem))
        if attempt == retries or (give_up is not None and give_up()):
            break
        # The usual repair prompt: the model's own reply, then exactly what the compiler said.
        hint = f"{repair_hint}\n" if repair_hint else ""
        conversation = [
            *conversation,
            {"role": "assistant", "content": completion.text},
            {"role": "user", "content": f"The code was rejected:\n{format_diagnostics(problem)}\n"
                                        f"{hint}"
                                        f"Fix these problems. Reply with the corrected `{name}` function in "
                                        f"one ```python block."},
        ]
    return result
