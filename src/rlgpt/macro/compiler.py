"""Compile LLM-written macro source into a sandboxed generator: parse -> validate -> instrument -> compile.

Validation is an allow-list over the AST: only the node types, builtin names and attribute names listed
here pass; everything else (imports, ``_``-prefixed names and attributes (the bare ``_`` is an ordinary
local), ``getattr``/``eval``/``open``..., classes, ``global``/``nonlocal``, ``with``, bare ``except``,
escaping lambdas, attribute writes, slice stores other than ``x[a:b] = value``, ``*``/``**`` unpacking,
computed f-string format specs) is rejected with one `Diagnostic` per violation. Instrumentation then
routes statements, loops, calls, comparisons, subscript keys, operators, f-strings and allocations through
the `Guard` hooks (see `sandbox`). Any input, of any size or nesting, yields a `CompiledMacro` or a
`MacroCompileError`.
"""

from __future__ import annotations

import ast
import types
from dataclasses import dataclass, field
from typing import Any

from rlgpt.macro import control
from rlgpt.macro.api import ACTION_NAMES, API_MEMBERS
from rlgpt.macro.diagnostics import Diagnostic, MacroCompileError, describe_value, make_diagnostic
from rlgpt.macro.sandbox import ALLOWED_BUILTIN_NAMES, ALLOWED_EXCEPTIONS, Guard, MacroLimits

_ALLOWED_NODES: tuple[type[ast.AST], ...] = (
    ast.Module,
    ast.FunctionDef,
    ast.arguments,
    ast.arg,
    ast.Return,
    ast.Assign,
    ast.AugAssign,
    ast.AnnAssign,
    ast.For,
    ast.While,
    ast.If,
    ast.Break,
    ast.Continue,
    ast.Pass,
    ast.Expr,
    ast.Try,
    ast.ExceptHandler,
    ast.Raise,
    ast.Assert,
    ast.Delete,
    ast.BoolOp,
    ast.BinOp,
    ast.UnaryOp,
    ast.Lambda,
    ast.IfExp,
    ast.Dict,
    ast.Set,
    ast.ListComp,
    ast.SetComp,
    ast.DictComp,
    ast.GeneratorExp,
    ast.comprehension,
    ast.Yield,
    ast.YieldFrom,
    ast.Compare,
    ast.Call,
    ast.keyword,
    ast.FormattedValue,
    ast.JoinedStr,
    ast.Constant,
    ast.Attribute,
    ast.Subscript,
    ast.Name,
    ast.List,
    ast.Tuple,
    ast.Slice,
    ast.NamedExpr,
    ast.Load,
    ast.Store,
    ast.Del,
    ast.boolop,
    ast.unaryop,
    ast.cmpop,
    ast.Add,
    ast.Sub,
    ast.Mult,
    ast.Div,
    ast.FloorDiv,
    ast.Mod,
    ast.Pow,
    ast.LShift,
    ast.RShift,
    ast.BitOr,
    ast.BitXor,
    ast.BitAnd,
)

DENIED_NAMES: frozenset[str] = frozenset(
    "exec eval compile open getattr setattr delattr hasattr globals locals vars type dir id help input "
    "breakpoint memoryview bytearray bytes object super classmethod staticmethod property chr ord format "
    "repr print iter aiter anext callable pow hash exit quit issubclass frozenset slice complex ascii bin "
    "hex oct BaseException SystemExit KeyboardInterrupt GeneratorExit StopIteration".split()
)
"""Names refused outright with a specific message (they are also absent from the sandbox builtins)."""

SAFE_METHODS: frozenset[str] = frozenset(
    "append extend insert pop remove index count sort reverse clear get items keys values setdefault "
    "update add discard union intersection difference issubset issuperset isdisjoint startswith "
    "endswith split strip lower upper find isdigit isalpha".split()
)
"""Attribute names allowed on ordinary values (container/str methods that cannot reach internals)."""

ALLOWED_ATTRIBUTES: frozenset[str] = SAFE_METHODS | API_MEMBERS
"""Every attribute name macro code may read: `SAFE_METHODS` plus the `GameAPI` members."""

_CONSTANT_TYPES = (str, int, float, bool, type(None))


@dataclass(frozen=True)
class MacroSource:
    """Macro source code as the fast agent wrote it; shipped as text and compiled where it runs."""

    name: str
    """Macro name (an identifier); also the name of the generator function that is its entry point."""
    code: str
    """Python source defining ``def <name>(game): ... yield "<action>" ...``."""
    description: str = ""
    """What the macro does, for prompts and reports."""

    def __post_init__(self) -> None:
        if type(self.name) is not str or not self.name.isidentifier() or self.name.startswith("_"):
            raise ValueError(
                f"macro name must be an identifier not starting with '_', got {describe_value(self.name, 60)}"
            )

    @classmethod
    def from_code(cls, code: str, description: str = "", limits: MacroLimits | None = None) -> MacroSource:
        """Wrap bare source; the name is the one top-level generator function it defines."""
        problem = _unparsable(code, limits or MacroLimits())
        if problem is not None:
            raise MacroCompileError("<unnamed>", (problem,))
        tree = ast.parse(code)
        names = [n.name for n in tree.body if isinstance(n, ast.FunctionDef) and _yields(n)]
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


def _yields(func: ast.FunctionDef) -> bool:
    """Whether the function itself (not a nested def/lambda) contains yield."""
    stack: list[ast.AST] = list(func.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Yield | ast.YieldFrom):
            return True
        if isinstance(node, ast.FunctionDef | ast.Lambda):
            continue
        stack.extend(ast.iter_child_nodes(node))
    return False


def _syntax_diagnostic(exc: SyntaxError, code: str) -> Diagnostic:
    message = exc.msg if type(exc.msg) is str else "invalid syntax"
    line = exc.lineno if type(exc.lineno) is int else None
    col = exc.offset if type(exc.offset) is int else None
    return make_diagnostic("syntax", f"syntax error: {message}", code, line, col)


MAX_NESTING = 100
"""Deepest syntax-tree nesting a macro may have (typical macros stay under 30); deeper trees could
overflow the recursive instrumentation or CPython's compiler."""


def _unparsable(code: object, limits: MacroLimits) -> Diagnostic | None:
    """Why ``code`` cannot even be parsed (not a str, too long, a syntax error, too deep), or None."""
    if type(code) is not str:
        return Diagnostic("syntax", f"macro code must be a str, got {type(code).__name__}")
    if len(code) > limits.max_source_chars:
        return make_diagnostic(
            "too_long",
            f"source has {len(code)} characters (limit {limits.max_source_chars})",
            code,
            None,
            None,
        )
    try:
        tree = ast.parse(code)
    except SyntaxError as exc:
        return _syntax_diagnostic(exc, code)
    except (ValueError, RecursionError, MemoryError) as exc:  # null bytes, surrogates, deep nesting
        return make_diagnostic("syntax", f"source cannot be parsed: {type(exc).__name__}", code, None, None)
    stack: list[tuple[ast.AST, int]] = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_NESTING:
            return make_diagnostic(
                "too_deep",
                f"code is nested deeper than {MAX_NESTING} levels; split it into smaller expressions",
                code,
                getattr(node, "lineno", None),
                None,
            )
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return None


class _Validator:
    """Collects every allow-list violation of one module."""

    def __init__(self, code: str, entry: str) -> None:
        self.code = code
        self.entry = entry
        self.problems: list[Diagnostic] = []

    def add(self, kind: str, message: str, node: ast.AST | None) -> None:
        line = getattr(node, "lineno", None)
        col = getattr(node, "col_offset", None)
        self.problems.append(
            make_diagnostic(kind, message, self.code, line, None if col is None else col + 1)
        )

    def run(self, tree: ast.Module) -> list[Diagnostic]:
        parents: dict[ast.AST, ast.AST] = {}
        for node in ast.walk(tree):
            for child in ast.iter_child_nodes(node):
                parents[child] = node
        defined = self._defined_names(tree)
        self._check_module(tree)
        # Children of a forbidden node are not examined: one problem per construct is enough.
        stack: list[ast.AST] = [tree]
        while stack:
            node = stack.pop()
            if self._check_node(node, parents, defined):
                stack.extend(reversed(list(ast.iter_child_nodes(node))))
        self.problems.sort(key=lambda d: (d.line or 0, d.col or 0))
        return self.problems

    @staticmethod
    def _defined_names(tree: ast.Module) -> set[str]:
        names: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
                names.add(node.id)
            elif isinstance(node, ast.FunctionDef):
                names.add(node.name)
            elif isinstance(node, ast.arg):
                names.add(node.arg)
            elif isinstance(node, ast.ExceptHandler) and node.name:
                names.add(node.name)
        return names

    def _check_module(self, tree: ast.Module) -> None:
        entry: ast.FunctionDef | None = None
        for stmt in tree.body:
            if isinstance(stmt, ast.FunctionDef):
                if stmt.name == self.entry:
                    entry = stmt
            elif isinstance(stmt, ast.Assign | ast.AnnAssign):
                continue
            elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
                continue
            elif isinstance(stmt, _ALLOWED_NODES):
                self.add(
                    "forbidden_node",
                    f"top level may only define functions and constants, not {type(stmt).__name__}",
                    stmt,
                )
        if entry is None:
            self.add(
                "signature",
                f"no top-level function named {self.entry!r}; define def {self.entry}(game):",
                None,
            )
            return
        args = entry.args
        if len(args.posonlyargs) + len(args.args) != 1 or args.vararg or args.kwarg or args.kwonlyargs:
            self.add("signature", f"{self.entry}() must take exactly one argument (the game API)", entry)
        if not _yields(entry):
            self.add("signature", f"{self.entry}() must be a generator that yields action names", entry)

    def _check_node(self, node: ast.AST, parents: dict[ast.AST, ast.AST], defined: set[str]) -> bool:
        """Report what is wrong with one node; False when the node type itself is forbidden."""
        if not isinstance(node, _ALLOWED_NODES):
            self.add("forbidden_node", _node_message(node), node)
            return False
        if isinstance(node, ast.Name):
            self._check_name(node.id, node, defined)
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store):
            if isinstance(node.slice, ast.Slice):
                parent = parents.get(node)
                if not (isinstance(parent, ast.Assign) and parent.targets == [node]):
                    self.add("mutation", "slice assignment is only allowed as a plain `x[a:b] = value`", node)
        elif isinstance(node, ast.FunctionDef):
            if node.name.startswith("_"):
                self.add("forbidden_name", f"names starting with '_' are not allowed: {node.name!r}", node)
            if node.name in DENIED_NAMES:
                self.add("forbidden_name", f"{node.name!r} is not allowed in macros", node)
            if node.decorator_list:
                self.add("forbidden_node", "decorators are not allowed in macros", node)
        elif isinstance(node, ast.arg) and _private(node.arg):
            self.add("forbidden_name", f"names starting with '_' are not allowed: {node.arg!r}", node)
        elif isinstance(node, ast.keyword):
            if node.arg is None:
                self.add("forbidden_node", "'**' unpacking is not allowed in macros", node)
            elif node.arg.startswith("_"):
                self.add("forbidden_name", f"names starting with '_' are not allowed: {node.arg!r}", node)
        elif isinstance(node, ast.Attribute):
            self._check_attribute(node)
        elif isinstance(node, ast.ExceptHandler):
            self._check_handler(node)
        elif isinstance(node, ast.Lambda):
            parent = parents.get(node)
            as_argument = (isinstance(parent, ast.Call) and node in parent.args) or isinstance(
                parent, ast.keyword
            )
            if not as_argument:
                self.add(
                    "forbidden_node",
                    "lambdas may only be passed directly as call arguments (e.g. key=)",
                    node,
                )
        elif isinstance(node, ast.Constant) and not isinstance(node.value, _CONSTANT_TYPES):
            self.add("forbidden_node", f"constants of type {type(node.value).__name__} are not allowed", node)
        elif isinstance(node, ast.Dict) and any(k is None for k in node.keys):
            self.add("forbidden_node", "'**' unpacking is not allowed in macros", node)
        elif isinstance(node, ast.FormattedValue) and node.format_spec is not None:
            self._check_format_spec(node)
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Subscript):
            if isinstance(node.target.slice, ast.Slice):
                self.add("forbidden_node", "augmented assignment to a slice is not allowed", node)
        elif isinstance(node, ast.Delete):
            for target in node.targets:
                if not isinstance(target, ast.Name | ast.Subscript):
                    self.add("mutation", "only names and items can be deleted", target)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in control.PRIMITIVES
              and isinstance(parents.get(node), ast.Expr | ast.Yield)):
            # Called as a statement it does nothing; yielded, it is not an action: both are the mistake of
            # forgetting that a control primitive is a generator of actions.
            name = node.func.attr
            self.add("primitive_call", f"game.{name}(...) is a generator of actions: write `yield from "
                     f"game.{name}(...)` (it returns True when it reached its goal)", node)
        return True

    def _check_name(self, name: str, node: ast.AST, defined: set[str]) -> None:
        if _private(name):
            self.add("forbidden_name", f"names starting with '_' are not allowed: {name!r}", node)
        elif name in DENIED_NAMES:
            self.add("forbidden_name", f"{name!r} is not allowed in macros", node)
        elif name not in defined and name not in ALLOWED_BUILTIN_NAMES:
            self.add(
                "forbidden_name",
                f"name {name!r} is not defined; macros may use their own names, the game argument and "
                f"these builtins: {', '.join(sorted(ALLOWED_BUILTIN_NAMES))}",
                node,
            )

    def _check_attribute(self, node: ast.Attribute) -> None:
        if not isinstance(node.ctx, ast.Load):
            self.add(
                "mutation", f"attributes are read-only in macros; cannot assign/delete .{node.attr}", node
            )
        elif node.attr.startswith("_"):
            self.add(
                "forbidden_attribute", f"attributes starting with '_' are not allowed: .{node.attr}", node
            )
        elif node.attr in ACTION_NAMES:
            # The most common mistake of small models: calling an action as a method of the game object.
            self.add(
                "forbidden_attribute",
                f".{node.attr} is not a game method; actions are yielded as strings: yield {node.attr!r}",
                node,
            )
        elif node.attr not in ALLOWED_ATTRIBUTES:
            self.add(
                "forbidden_attribute",
                f".{node.attr} is not allowed; use the game API members or basic list/dict/set/str methods",
                node,
            )

    def _check_handler(self, node: ast.ExceptHandler) -> None:
        if node.name is not None and _private(node.name):
            self.add("forbidden_name", f"names starting with '_' are not allowed: {node.name!r}", node)
        if node.type is None:
            self.add(
                "forbidden_node",
                "bare 'except:' is not allowed; name the exception (e.g. except ValueError)",
                node,
            )
            return
        types_ = node.type.elts if isinstance(node.type, ast.Tuple) else [node.type]
        for t in types_:
            if not (isinstance(t, ast.Name) and t.id in ALLOWED_EXCEPTIONS):
                self.add(
                    "forbidden_node",
                    f"except clauses may only name these exceptions: {', '.join(sorted(ALLOWED_EXCEPTIONS))}",
                    t,
                )

    def _check_format_spec(self, node: ast.FormattedValue) -> None:
        spec = node.format_spec
        parts = spec.values if isinstance(spec, ast.JoinedStr) else [spec]
        text = ""
        for part in parts:
            if not (isinstance(part, ast.Constant) and isinstance(part.value, str)):
                self.add("forbidden_node", "f-string format specs must be constant", node)
                return
            text += part.value
        digits = "".join(c if c.isdigit() else " " for c in text).split()
        if any(len(d) > 3 for d in digits):
            self.add("forbidden_node", "f-string widths/precisions above 999 are not allowed", node)


def _private(name: str) -> bool:
    """Names starting with ``_`` are reserved (they reach internals or the ``_rt_*`` hooks); the bare
    ``_`` is allowed as a local variable (``for _ in range(3)``): nothing in the sandbox is called ``_``."""
    return name.startswith("_") and name != "_"


def _node_message(node: ast.AST) -> str:
    messages = {
        ast.Import: "imports are not allowed in macros; use the game API",
        ast.ImportFrom: "imports are not allowed in macros; use the game API",
        ast.ClassDef: "class definitions are not allowed in macros",
        ast.Global: "'global' is not allowed in macros",
        ast.Nonlocal: "'nonlocal' is not allowed in macros",
        ast.With: "'with' is not allowed in macros",
        ast.Starred: "'*' unpacking is not allowed in macros",
    }
    return messages.get(type(node), f"{type(node).__name__} is not allowed in macros")


def _hook(name: str, args: list[ast.expr], like: ast.AST) -> ast.Call:
    call = ast.Call(func=ast.Name(id=name, ctx=ast.Load()), args=args, keywords=[])
    return ast.copy_location(call, like)


_CONVERSIONS = {-1: "", ord("s"): "s", ord("r"): "r", ord("a"): "a"}


class _Instrumenter(ast.NodeTransformer):
    """Rewrites validated code so that every costly operation passes a `Guard` hook."""

    def _tick_stmt(self, like: ast.AST) -> ast.Expr:
        return ast.copy_location(ast.Expr(_hook("_rt_tick", [], like)), like)

    def generic_visit(self, node: ast.AST) -> ast.AST:
        super().generic_visit(node)
        # A clock check before every statement: a straight line of cheap statements is still bounded.
        for name in ("body", "orelse", "finalbody"):
            stmts = getattr(node, name, None)
            if isinstance(stmts, list) and stmts and isinstance(stmts[0], ast.stmt):
                guarded: list[ast.stmt] = []
                for stmt in stmts:
                    guarded += [ast.copy_location(ast.Expr(_hook("_rt_stmt", [], stmt)), stmt), stmt]
                setattr(node, name, guarded)
        return node

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.FunctionDef:
        self.generic_visit(node)
        node.returns = None
        for arg in (
            *node.args.posonlyargs,
            *node.args.args,
            *node.args.kwonlyargs,
            node.args.vararg,
            node.args.kwarg,
        ):
            if arg is not None:
                arg.annotation = None
        guarded = ast.Try(
            body=node.body, handlers=[], orelse=[], finalbody=[ast.Expr(_hook("_rt_exit", [], node))]
        )
        node.body = [ast.Expr(_hook("_rt_enter", [], node)), ast.copy_location(guarded, node)]
        return node

    def visit_Lambda(self, node: ast.Lambda) -> ast.Lambda:
        self.generic_visit(node)
        # tick() returns None, so `tick() or body` evaluates to body after charging.
        node.body = ast.copy_location(
            ast.BoolOp(op=ast.Or(), values=[_hook("_rt_tick", [], node), node.body]), node
        )
        return node

    def visit_For(self, node: ast.For) -> ast.For:
        self.generic_visit(node)
        node.body.insert(0, self._tick_stmt(node))
        return node

    def visit_While(self, node: ast.While) -> ast.While:
        self.generic_visit(node)
        node.body.insert(0, self._tick_stmt(node))
        return node

    def visit_comprehension(self, node: ast.comprehension) -> ast.comprehension:
        self.generic_visit(node)
        node.ifs.insert(0, ast.UnaryOp(op=ast.Not(), operand=_hook("_rt_tick", [], node.iter)))
        return node

    def _post(self, node: ast.expr) -> ast.Call:
        return _hook("_rt_post", [node], node)

    def _key(self, node: ast.expr) -> ast.expr:
        """Hash-checked form of an expression used as a dict key or set element."""
        return node if isinstance(node, ast.Constant) else _hook("_rt_key", [node], node)

    def visit_ListComp(self, node: ast.ListComp) -> ast.Call:
        return self._post(self.generic_visit(node))

    def visit_SetComp(self, node: ast.SetComp) -> ast.Call:
        self.generic_visit(node)
        node.elt = self._key(node.elt)
        return self._post(node)

    def visit_DictComp(self, node: ast.DictComp) -> ast.Call:
        self.generic_visit(node)
        node.key = self._key(node.key)
        return self._post(node)

    def visit_Dict(self, node: ast.Dict) -> ast.Dict:
        self.generic_visit(node)
        node.keys = [None if k is None else self._key(k) for k in node.keys]
        return node

    def visit_Set(self, node: ast.Set) -> ast.Set:
        self.generic_visit(node)
        node.elts = [self._key(e) for e in node.elts]
        return node

    def visit_JoinedStr(self, node: ast.JoinedStr) -> ast.Call:
        # f"a{x!r:>5}" -> _rt_fstring(("a", ("r", ">5")), x): the guard bounds the size before building.
        parts: list[Any] = []
        values: list[ast.expr] = []
        for value in node.values:
            if isinstance(value, ast.FormattedValue):
                spec = value.format_spec
                text = "".join(p.value for p in spec.values) if isinstance(spec, ast.JoinedStr) else ""
                parts.append((_CONVERSIONS[value.conversion], text))
                values.append(self.visit(value.value))
            else:
                assert isinstance(value, ast.Constant)
                parts.append(value.value)
        return _hook("_rt_fstring", [ast.Constant(tuple(parts)), *values], node)

    def visit_Subscript(self, node: ast.Subscript) -> ast.expr:
        self.generic_visit(node)
        if not isinstance(node.slice, ast.Slice):
            node.slice = self._key(node.slice)
        elif isinstance(node.ctx, ast.Load):
            return self._post(node)
        return node

    def visit_Compare(self, node: ast.Compare) -> ast.expr:
        self.generic_visit(node)
        if len(node.ops) == 1:
            op = ast.Constant(type(node.ops[0]).__name__)
            return _hook("_rt_compare", [node.left, op, node.comparators[0]], node)
        # A chain (a < b < c) keeps Python's short-circuit; every operand is charged by its weight.
        node.left = _hook("_rt_operand", [node.left], node.left)
        node.comparators = [_hook("_rt_operand", [c], c) for c in node.comparators]
        return node

    def visit_Tuple(self, node: ast.Tuple) -> ast.expr:
        self.generic_visit(node)
        if isinstance(node.ctx, ast.Load) and node.elts:
            return _hook("_rt_tuple", [node], node)
        return node

    def visit_Call(self, node: ast.Call) -> ast.Call:
        self.generic_visit(node)
        node.args = [node.func, *node.args]
        node.func = ast.copy_location(ast.Name(id="_rt_call", ctx=ast.Load()), node)
        return node

    def visit_BinOp(self, node: ast.BinOp) -> ast.Call:
        self.generic_visit(node)
        op = ast.Constant(type(node.op).__name__)
        return _hook("_rt_binop", [op, node.left, node.right], node)

    @staticmethod
    def _name(ident: str, ctx: ast.expr_context, like: ast.AST) -> ast.Name:
        return ast.copy_location(ast.Name(id=ident, ctx=ctx), like)

    def _assign(self, ident: str, value: ast.expr, like: ast.AST) -> ast.Assign:
        return ast.copy_location(
            ast.Assign(targets=[self._name(ident, ast.Store(), like)], value=value), like
        )

    def visit_Assign(self, node: ast.Assign) -> Any:
        self.generic_visit(node)
        target = node.targets[0]
        if not (isinstance(target, ast.Subscript) and isinstance(target.slice, ast.Slice)):
            return node
        # x[a:b] = value can grow x by len(value): check x afterwards (the validator allows only this form).
        store = ast.Subscript(
            value=self._name("_rt_sliced", ast.Load(), node), slice=target.slice, ctx=ast.Store()
        )
        return [
            self._assign("_rt_value", node.value, node),
            self._assign("_rt_sliced", target.value, node),
            ast.copy_location(
                ast.Assign(
                    targets=[ast.copy_location(store, target)],
                    value=self._name("_rt_value", ast.Load(), node),
                ),
                node,
            ),
            ast.copy_location(
                ast.Expr(_hook("_rt_slice_store", [self._name("_rt_sliced", ast.Load(), node)], node)), node
            ),
        ]

    def visit_AugAssign(self, node: ast.AugAssign) -> Any:
        self.generic_visit(node)
        op = ast.Constant("i" + type(node.op).__name__)
        target = node.target
        if isinstance(target, ast.Name):
            load = ast.copy_location(ast.Name(id=target.id, ctx=ast.Load()), target)
            value = _hook("_rt_binop", [op, load, node.value], node)
            return ast.copy_location(ast.Assign(targets=[target], value=value), node)
        # obj[key] op= value: evaluate obj and key once, like Python does.
        assert isinstance(target, ast.Subscript)

        def item(ctx: ast.expr_context) -> ast.Subscript:
            key = self._name("_rt_aug_key", ast.Load(), node)
            return ast.copy_location(
                ast.Subscript(value=self._name("_rt_aug_obj", ast.Load(), node), slice=key, ctx=ctx), node
            )

        return [
            self._assign("_rt_aug_obj", target.value, node),
            self._assign("_rt_aug_key", target.slice, node),
            ast.copy_location(
                ast.Assign(
                    targets=[item(ast.Store())],
                    value=_hook("_rt_binop", [op, item(ast.Load()), node.value], node),
                ),
                node,
            ),
        ]

    def visit_AnnAssign(self, node: ast.AnnAssign) -> ast.stmt:
        self.generic_visit(node)
        if node.value is None:
            return ast.copy_location(ast.Pass(), node)
        return ast.copy_location(ast.Assign(targets=[node.target], value=node.value), node)


def check_macro(source: MacroSource, limits: MacroLimits | None = None) -> tuple[Diagnostic, ...]:
    """Every reason ``source`` would be rejected (empty when it compiles)."""
    limits = limits or MacroLimits()
    problem = _unparsable(source.code, limits)
    if problem is not None:
        return (problem,)
    tree = ast.parse(source.code, filename=f"<macro:{source.name}>")
    return tuple(_Validator(source.code, source.name).run(tree))


def compile_macro(source: MacroSource | str, limits: MacroLimits | None = None) -> CompiledMacro:
    """Validate and instrument macro source; raises `MacroCompileError` listing every problem.

    Any input, of any size or nesting, gives a `CompiledMacro` or a `MacroCompileError`; never another
    exception.
    """
    limits = limits or MacroLimits()
    if not isinstance(source, MacroSource):
        source = MacroSource.from_code(source, limits=limits)
    problems = check_macro(source, limits)
    if problems:
        raise MacroCompileError(source.name, problems)
    try:
        tree = ast.parse(source.code, filename=f"<macro:{source.name}>")
        tree = ast.fix_missing_locations(_Instrumenter().visit(tree))
        code = compile(tree, f"<macro:{source.name}>", "exec")
    except (SyntaxError, ValueError, RecursionError, MemoryError, SystemError) as exc:
        diagnostic = make_diagnostic(
            "too_deep", f"the code is too complex to compile ({type(exc).__name__})", source.code, None, None
        )
        raise MacroCompileError(source.name, (diagnostic,)) from None
    return CompiledMacro(source, code, limits)


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


class _FunctionValidator(_Validator):
    """`_Validator` whose entry point must be a plain function of ``arity`` positional arguments."""

    def __init__(self, code: str, entry: str, arity: int) -> None:
        super().__init__(code, entry)
        self.arity = arity

    def _check_module(self, tree: ast.Module) -> None:
        before = len(self.problems)
        super()._check_module(tree)
        # Keep the shared top-level checks; replace the generator-specific signature checks.
        self.problems[before:] = [d for d in self.problems[before:] if d.kind != "signature"]
        entry = next((s for s in tree.body if isinstance(s, ast.FunctionDef) and s.name == self.entry), None)
        if entry is None:
            self.add("signature", f"no top-level function named {self.entry!r}", None)
            return
        args = entry.args
        positional = len(args.posonlyargs) + len(args.args)
        if positional != self.arity or args.vararg or args.kwarg or args.kwonlyargs:
            self.add("signature", f"{self.entry}() must take exactly {self.arity} positional arguments",
                     entry)
        if _yields(entry):
            self.add("signature", f"{self.entry}() must return a value, not yield", entry)


def compile_function(
    source: str, entry: str, arity: int, limits: MacroLimits | None = None
) -> CompiledFunction:
    """Validate and instrument a plain function ``entry`` taking ``arity`` arguments; raises
    `MacroCompileError` listing every problem (same allow-list and limits as `compile_macro`)."""
    limits = limits or MacroLimits()
    problems: tuple[Diagnostic, ...]
    if len(source) > limits.max_source_chars:
        problems = (make_diagnostic("too_long", f"source has {len(source)} characters (limit "
                                                f"{limits.max_source_chars})", source, None, None),)
    else:
        try:
            tree = ast.parse(source, filename=f"<function:{entry}>")
        except SyntaxError as exc:
            problems = (_syntax_diagnostic(exc, source),)
        except (ValueError, RecursionError, MemoryError) as exc:
            problems = (make_diagnostic("syntax", f"source cannot be parsed: {type(exc).__name__}", source,
                                        None, None),)
        else:
            problems = tuple(_FunctionValidator(source, entry, arity).run(tree))
    if problems:
        raise MacroCompileError(entry, problems)
    tree = ast.fix_missing_locations(_Instrumenter().visit(ast.parse(source)))
    return CompiledFunction(entry, source, compile(tree, f"<function:{entry}>", "exec"), limits)
