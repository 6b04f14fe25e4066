"""Structured diagnostics for macro code: every rejection and runtime failure is one `Diagnostic`.

Diagnostics are what the critic and the fast agent see, so each names the kind of problem, says what is
wrong in one line, and points at the line/column of the offending code with that source line quoted.
"""

from __future__ import annotations

import itertools
import traceback
from dataclasses import asdict, dataclass
from types import FrameType, TracebackType

from rlgpt.errors import RlgptError

COMPILE_KINDS: tuple[str, ...] = (
    "syntax",
    "too_long",
    "too_deep",
    "forbidden_node",
    "forbidden_name",
    "forbidden_attribute",
    "mutation",
    "signature",
    "primitive_call",
    "api_level",
    "bad_action",
    "reward_level",
)
"""Kinds of compile-time rejections (``bad_action``: a yielded string constant that is not an action name,
the kind the runtime reports for a computed one; ``reward_level``: a dense reward's dry run found it paid on
steps where nothing changed, i.e. a level rather than a change; see
`rlgpt.agents.fast.FastAgent.check_reward`)."""

RUNTIME_FAILURE_KINDS: tuple[str, ...] = (
    "max_steps",
    "fuel",
    "memory",
    "recursion",
    "timeout",
    "exception",
    "mutation",
    "bad_action",
    "crashed",
    "disabled",
)
"""Kinds of runtime failures; each gets a ``macro/<name>/fail_<kind>`` statistic. ``crashed``: the process
running the code died (`rlgpt.macro.contain`); ``disabled``: the code took more than its share of the step
time and was switched off (`rlgpt.macro.budget`)."""

_MAX_SOURCE_LINE = 200
_MAX_DESCRIBED = 160
"""Longest text `describe_value` returns (plus a trailing ``...``)."""
_INT_BITS_SHOWN = 1000
"""Integers wider than this many bits are shown by size."""


@dataclass(frozen=True)
class Diagnostic:
    """One problem found in macro code, at compile time or while it ran."""

    kind: str
    """Category, one of `COMPILE_KINDS` or `RUNTIME_FAILURE_KINDS`."""
    message: str
    """One-line explanation of what is wrong and what to do instead."""
    line: int | None = None
    """1-based line in the macro source, None when the problem has no location."""
    col: int | None = None
    """1-based column in the macro source, None when unknown."""
    source_line: str | None = None
    """The offending source line, stripped (truncated to 200 characters)."""

    def to_dict(self) -> dict[str, object]:
        """Plain-dict form for JSON run files and LLM prompts."""
        return asdict(self)

    def __str__(self) -> str:
        where = ""
        if self.line is not None:
            where = f" at line {self.line}" + (f":{self.col}" if self.col is not None else "")
        quoted = f" | {self.source_line}" if self.source_line else ""
        return f"[{self.kind}]{where}: {self.message}{quoted}"


class MacroCompileError(RlgptError, ValueError):
    """Macro source was rejected; ``.diagnostics`` holds every problem found (at least one)."""

    def __init__(self, name: str, diagnostics: tuple[Diagnostic, ...]) -> None:
        self.name = name
        self.diagnostics = diagnostics
        extra = f" (+{len(diagnostics) - 1} more)" if len(diagnostics) > 1 else ""
        super().__init__(f"macro {name!r} rejected: {diagnostics[0]}{extra}")


def source_line(source: str, line: int | None) -> str | None:
    """The stripped, truncated text of 1-based ``line`` of ``source`` (None when out of range)."""
    if line is None:
        return None
    lines = source.splitlines()
    if not 1 <= line <= len(lines):
        return None
    return lines[line - 1].strip()[:_MAX_SOURCE_LINE]


def make_diagnostic(kind: str, message: str, source: str, line: int | None, col: int | None) -> Diagnostic:
    """Build a diagnostic, quoting the source line it points at."""
    return Diagnostic(kind, message, line, col, source_line(source, line))


def frame_position(frame: FrameType) -> tuple[int | None, int | None]:
    """(1-based line, 1-based column) of the instruction a frame is executing."""
    positions = list(frame.f_code.co_positions())
    index = frame.f_lasti // 2
    if 0 <= index < len(positions):
        line, _, col, _ = positions[index]
        return line, None if col is None else col + 1
    return frame.f_lineno, None


def locate(tb: TracebackType | None, filename: str) -> tuple[int | None, int | None]:
    """Position of the innermost traceback entry that lies in the macro's own code."""
    line: int | None = None
    col: int | None = None
    for summary in traceback.extract_tb(tb):
        if summary.filename == filename:
            line = summary.lineno
            col = None if summary.colno is None else summary.colno + 1
    return line, col


class _Text:
    """A literal piece of output (as opposed to a value still to be described)."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


_BRACKETS: dict[type, tuple[str, str]] = {
    list: ("[", "]"),
    tuple: ("(", ")"),
    set: ("{", "}"),
    dict: ("{", "}"),
}
_COMMA, _COLON, _MORE = _Text(", "), _Text(": "), _Text("...")


def _describe_leaf(value: object, limit: int) -> str | None:
    """Text of a scalar or a non-plain value; None for a plain container (expanded by the caller)."""
    kind = type(value)
    if kind is str:
        return repr(value[: limit + 1])  # type: ignore[index]
    if kind is int:
        bits = value.bit_length()  # type: ignore[attr-defined]
        return repr(value) if bits <= _INT_BITS_SHOWN else f"<int of {bits} bits>"
    if kind is float or kind is bool or value is None:
        return repr(value)
    if kind in _BRACKETS:
        return None
    return f"<{kind.__name__}>"


def describe_value(value: object, limit: int = _MAX_DESCRIBED) -> str:
    """A short one-line description of a value macro code produced; safe for any value.

    Only plain values are formatted: exact ``str``/``int``/``float``/``bool``/``None`` and
    ``list``/``tuple``/``set``/``dict`` of them. Anything else is shown as ``<typename>`` without calling its
    ``__repr__``/``__str__``, and an int wider than 1,000 bits as ``<int of N bits>`` (``repr`` of a
    >4,300-digit int raises). The walk is iterative and stops after ``limit`` characters, so neither size,
    nesting depth nor a cycle can make it slow, deep or endless.
    """
    out: list[str] = []
    length = 0
    stack: list[object] = [value]
    while stack and length <= limit:
        item = stack.pop()
        if type(item) is _Text:
            text = item.text  # type: ignore[attr-defined]
        else:
            text = _describe_leaf(item, limit)
            if text is None:
                stack.extend(reversed(_container_pieces(item, limit)))
                continue
        out.append(text)
        length += len(text)
    text = "".join(out)
    return text if not stack and length <= limit else text[:limit] + "..."


def _container_pieces(value: object, limit: int) -> list[object]:
    """Brackets, separators and (at most ``limit``) elements of a plain container, in output order."""
    kind = type(value)
    opening, closing = _BRACKETS[kind]
    if kind is set and not value:
        return [_Text("set()")]
    shown = limit // 2 + 1  # every element takes at least two characters with its separator
    pieces: list[object] = [_Text(opening)]
    if kind is dict:
        for i, (key, item) in enumerate(itertools.islice(value.items(), shown)):  # type: ignore[attr-defined]
            pieces += [_COMMA, key, _COLON, item] if i else [key, _COLON, item]
    else:
        for i, item in enumerate(itertools.islice(value, shown)):  # type: ignore[call-overload]
            pieces += [_COMMA, item] if i else [item]
    if len(value) > shown:  # type: ignore[arg-type]
        pieces += [_COMMA, _MORE]
    if kind is tuple and len(value) == 1:  # type: ignore[arg-type]
        pieces.append(_Text(","))
    pieces.append(_Text(closing))
    return pieces


def describe_exception(exc: BaseException) -> str:
    """``TypeName: args`` with the arguments shown by `describe_value` (a lone str argument as is)."""
    args = exc.args if type(exc.args) is tuple else ()
    if len(args) == 1 and type(args[0]) is str:
        shown = args[0][:_MAX_DESCRIBED].replace("\n", " ")
    else:
        shown = describe_value(args[0] if len(args) == 1 else args) if args else ""
    return f"{type(exc).__name__}: {shown}" if shown else type(exc).__name__
