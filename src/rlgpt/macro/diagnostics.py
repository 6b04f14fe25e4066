"""Structured diagnostics for macro code: every rejection and runtime failure is one `Diagnostic`.

Diagnostics are what the critic and the fast agent see, so each names the kind of problem, says what is
wrong in one line, and points at the line/column of the offending code with that source line quoted.
"""

from __future__ import annotations

import reprlib
import traceback
from dataclasses import asdict, dataclass
from types import FrameType, TracebackType

COMPILE_KINDS: tuple[str, ...] = (
    "syntax",
    "too_long",
    "forbidden_node",
    "forbidden_name",
    "forbidden_attribute",
    "mutation",
    "signature",
)
"""Kinds of compile-time rejections."""

RUNTIME_FAILURE_KINDS: tuple[str, ...] = (
    "max_steps",
    "fuel",
    "memory",
    "recursion",
    "timeout",
    "exception",
    "mutation",
    "bad_action",
)
"""Kinds of runtime failures; each gets a ``macro/<name>/fail_<kind>`` statistic."""

_MAX_SOURCE_LINE = 200

# Exception arguments can be huge or deeply nested user values; never call str() on them unbounded.
_REPR = reprlib.Repr()
_REPR.maxstring = 120
_REPR.maxother = 120
_REPR.maxlevel = 3


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


class MacroCompileError(ValueError):
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


def describe_exception(exc: BaseException) -> str:
    """``TypeName: args`` with every argument shown through a size-bounded repr."""
    args = ", ".join(_REPR.repr(a) if not isinstance(a, str) else a[:200] for a in exc.args)
    return f"{type(exc).__name__}: {args}" if args else type(exc).__name__
