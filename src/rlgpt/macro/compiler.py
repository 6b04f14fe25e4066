"""Compile LLM-written macro source into a sandboxed generator: parse -> validate -> instrument -> compile.

The phases live in their own modules: `rlgpt.macro.validate` (the allow-list over the AST) and
`rlgpt.macro.instrument` (routing execution through the `Guard` hooks of `rlgpt.macro.sandbox`). This module
is the pipeline and what it produces. Any input, of any size or nesting, yields a `CompiledMacro` (or
`CompiledFunction`) or a `MacroCompileError`; never another exception.
"""

from __future__ import annotations

import ast
import functools
import types
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rlgpt.macro.budget import MacroLimits
from rlgpt.macro.diagnostics import Diagnostic, MacroCompileError, describe_value, make_diagnostic
from rlgpt.macro.goal import Goal
from rlgpt.macro.instrument import Instrumenter
from rlgpt.macro.sandbox import Guard
from rlgpt.macro.validate import FunctionValidator, Validator, unparsable, yields


@dataclass(frozen=True)
class MacroSource:
    """Macro source code as the fast agent wrote it; shipped as text and compiled where it runs."""

    name: str
    """Macro name (an identifier); also the name of the generator function that is its entry point."""
    code: str
    """Python source defining ``def <name>(game): ... yield "<action>" ...``."""
    description: str = ""
    """What the macro does, for prompts and reports."""
    goal: str = ""
    """The sub-action's goal (`rlgpt.macro.goal.Goal`: an item or achievement): a call ends as soon as its
    counter goes up, the option's termination condition; "" = the call runs until the code returns."""

    def __post_init__(self) -> None:
        if type(self.name) is not str or not self.name.isidentifier() or self.name.startswith("_"):
            raise ValueError(
                f"macro name must be an identifier not starting with '_', got {describe_value(self.name, 60)}"
            )
        if type(self.goal) is not str:
            raise ValueError(f"macro goal must be a str, got {describe_value(self.goal, 60)}")
        if self.goal:
            Goal.parse(self.goal)  # ValueError naming the goal

    def to_dict(self) -> dict[str, str]:
        """JSON-ready form (the goal only when set, so files written before goals read the same)."""
        out = {"name": self.name, "description": self.description, "code": self.code}
        return {**out, "goal": self.goal} if self.goal else out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MacroSource:
        """Inverse of `to_dict` (KeyError/TypeError/ValueError on a malformed entry)."""
        return cls(data["name"], data["code"], str(data.get("description", "")), str(data.get("goal", "")))

    @classmethod
    def from_code(cls, code: str, description: str = "", limits: MacroLimits | None = None) -> MacroSource:
        """Wrap bare source; the name is the one top-level generator function it defines."""
        problem = unparsable(code, limits or MacroLimits())
        if problem is not None:
            raise MacroCompileError("<unnamed>", (problem,))
        tree = ast.parse(code)
        names = [n.name for n in tree.body if isinstance(n, ast.FunctionDef) and yields(n)]
        if len(names) != 1:
            raise MacroCompileError(
                "<unnamed>",
                (
                    make_diagnostic(
                        "signature",
                        f"source must define exactly one top-level generator function, found {len(names)}; "
                        "pass MacroSource(name=..., code=...) to pick the entry point",
                        code,
                        None,
                        None,
                    ),
                ),
            )
        return cls(names[0], code, description)


@dataclass(frozen=True)
class CompiledMacro:
    """A validated, instrumented macro ready to run in a sandbox namespace."""

    source: MacroSource
    """The source it was compiled from."""
    code: types.CodeType = field(repr=False)
    """Instrumented module code object (defines the entry generator function)."""
    limits: MacroLimits
    """Resource bounds applied to every invocation."""

    @property
    def name(self) -> str:
        """The macro's name."""
        return self.source.name

    @property
    def goal(self) -> Goal | None:
        """The goal whose counter going up ends a call (`MacroSource.goal`), None without one."""
        return Goal.parse(self.source.goal) if self.source.goal else None

    @property
    def filename(self) -> str:
        """Pseudo file name of the code, used to locate runtime failures in tracebacks."""
        return f"<macro:{self.source.name}>"

    def new_guard(self) -> Guard:
        """A fresh guard (fuel, depth, failure state) for one invocation."""
        return Guard(self.limits, self.filename, self.source.code)

    def start(self, game: Any, guard: Guard) -> types.GeneratorType:
        """Execute the module in a fresh namespace and create the macro's generator over ``game``.

        Raises whatever the module body raises (the runtime converts that into a diagnostic).
        """
        namespace = guard.namespace()
        exec(self.code, namespace)
        gen = namespace[self.source.name](game)
        if not isinstance(gen, types.GeneratorType):
            raise TypeError(f"{self.source.name}() must be a generator function (use yield)")
        return gen


def check_macro(source: MacroSource, limits: MacroLimits | None = None, api: str = "expert"
                ) -> tuple[Diagnostic, ...]:
    """Every reason ``source`` would be rejected at API level `api` (empty when it compiles)."""
    limits = limits or MacroLimits()
    problem = unparsable(source.code, limits)
    if problem is not None:
        return (problem,)
    tree = ast.parse(source.code, filename=f"<macro:{source.name}>")
    return tuple(Validator(source.code, source.name, api).run(tree))


def compile_macro(source: MacroSource | str, limits: MacroLimits | None = None, api: str = "expert"
                  ) -> CompiledMacro:
    """Validate and instrument macro source; raises `MacroCompileError` listing every problem. `api`: the
    API level (`rlgpt.macro.api.API_LEVELS`) whose game members the code may use; a call above it is an
    ``api_level`` diagnostic. The fast agent compiles the model's code at its configured level; trusted
    code and recompiles of accepted macros (workers) at ``expert``, which allows every member.

    Any input, of any size or nesting, gives a `CompiledMacro` or a `MacroCompileError`; never another
    exception.
    """
    limits = limits or MacroLimits()
    if not isinstance(source, MacroSource):
        source = MacroSource.from_code(source, limits=limits)
    try:
        hash((source, limits, api))
    except TypeError:  # a source whose fields are not text (hostile input): compiled uncached, rejected
        return _compiled.__wrapped__(source, limits, api)
    return _compiled(source, limits, api)


@functools.lru_cache(maxsize=256)
def _compiled(source: MacroSource, limits: MacroLimits, api: str) -> CompiledMacro:
    """One compilation per source and limits in a process: the trainer's check, each env of a worker, the
    probe and the evaluation share it (a `CompiledMacro` is immutable; each call gets its own namespace and
    guard). A rejected source raises every time (exceptions are not cached)."""
    problems = check_macro(source, limits, api)
    if problems:
        raise MacroCompileError(source.name, problems)
    code = _instrumented(source.name, source.code, f"<macro:{source.name}>")
    return CompiledMacro(source, code, limits)


def _instrumented(name: str, code: str, filename: str) -> types.CodeType:
    """Phase 2 and the bytecode compiler over validated `code`; what only the bytecode compiler checks (a
    repeated keyword argument, ...) or cannot handle (too complex) is a `MacroCompileError`."""
    try:
        tree = ast.fix_missing_locations(Instrumenter().visit(ast.parse(code, filename=filename)))
        return compile(tree, filename, "exec")
    except SyntaxError as exc:
        diagnostic = make_diagnostic("syntax", exc.msg, code, exc.lineno, exc.offset)
        raise MacroCompileError(name, (diagnostic,)) from None
    except (ValueError, RecursionError, MemoryError, SystemError) as exc:
        diagnostic = make_diagnostic(
            "too_deep", f"the code is too complex to compile ({type(exc).__name__})", code, None, None
        )
        raise MacroCompileError(name, (diagnostic,)) from None


# ---------------------------------------------------------------------------------------------------------
# Plain (non-generator) functions, e.g. LLM-written dense reward code: the same allow-list, instrumentation
# and limits as macros; only the entry point's shape differs.


@dataclass(frozen=True)
class CompiledFunction:
    """A validated, instrumented plain function (not a generator), e.g. a dense reward."""

    entry: str
    """Name of the entry function."""
    source: str
    """Python source as written."""
    code: types.CodeType = field(repr=False)
    """Instrumented module code object (defines the entry function)."""
    limits: MacroLimits
    """Resource bounds applied to every call."""

    @property
    def filename(self) -> str:
        """Pseudo file name of the code, used to locate runtime failures in tracebacks."""
        return f"<function:{self.entry}>"

    def load(self, guard: Guard) -> Any:
        """Execute the module in ``guard``'s namespace and return the entry function (raises what the body
        raises; callers convert that into a diagnostic)."""
        namespace = guard.namespace()
        exec(self.code, namespace)
        return namespace[self.entry]

    def new_guard(self) -> Guard:
        """A fresh guard (fuel, depth, failure state)."""
        return Guard(self.limits, self.filename, self.source)


def compile_function(
    source: str, entry: str, arity: int, limits: MacroLimits | None = None
) -> CompiledFunction:
    """Validate and instrument a plain function ``entry`` taking ``arity`` arguments; raises
    `MacroCompileError` listing every problem (same allow-list and limits as `compile_macro`)."""
    limits = limits or MacroLimits()
    problem = unparsable(source, limits)
    if problem is not None:
        raise MacroCompileError(str(entry), (problem,))
    problems = tuple(FunctionValidator(source, entry, arity).run(ast.parse(source)))
    if problems:
        raise MacroCompileError(entry, problems)
    return CompiledFunction(entry, source, _instrumented(entry, source, f"<function:{entry}>"), limits)
