"""Phase 1 of compiling generated code: parse and validate against an allow-list over the AST.

Only the node types, builtin names and attribute names listed here pass; everything else (imports,
``_``-prefixed names and attributes (the bare ``_`` is an ordinary local), ``getattr``/``eval``/``open``...,
classes, ``global``/``nonlocal``, ``with``, bare ``except``, escaping lambdas, attribute writes, slice stores
other than ``x[a:b] = value``, ``*``/``**`` unpacking, computed f-string format specs) is rejected with one
`Diagnostic` per violation. Any input, of any size or nesting, gives diagnostics, never an exception.
"""

from __future__ import annotations

import ast
import difflib
import functools
import inspect

from crafter import constants

from rlgpt.macro import control
from rlgpt.macro.api import (
    ACTION_NAMES,
    API_MEMBERS,
    LEVEL_MEMBERS,
    GameAPI,
    api_level,
    item_error,
    kind_error,
)
from rlgpt.macro.budget import MacroLimits
from rlgpt.macro.code_skills import SKILLS_NAME
from rlgpt.macro.diagnostics import Diagnostic, make_diagnostic
from rlgpt.macro.safe_builtins import ALLOWED_BUILTIN_NAMES, ALLOWED_EXCEPTIONS

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


def yields(func: ast.FunctionDef) -> bool:
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


def syntax_diagnostic(exc: SyntaxError, code: str) -> Diagnostic:
    message = exc.msg if type(exc.msg) is str else "invalid syntax"
    line = exc.lineno if type(exc.lineno) is int else None
    col = exc.offset if type(exc.offset) is int else None
    return make_diagnostic("syntax", f"syntax error: {message}", code, line, col)


MAX_NESTING = 100
"""Deepest syntax-tree nesting a macro may have (typical macros stay under 30); deeper trees could
overflow the recursive instrumentation or CPython's compiler."""


def unparsable(code: object, limits: MacroLimits) -> Diagnostic | None:
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
        return syntax_diagnostic(exc, code)
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


_LEVEL_HINTS = {"collect": "game.gather", "place": "game.place_item", "craft": "game.craft_item"}
"""The primitive that does one step of what an expert call does (for the diagnostic of a call above the
level)."""
_ACHIEVEMENT_PRIMITIVES = {"collect": "gather", "place": "place_item", "make": "craft_item",
                           "defeat": "attack"}
"""Achievement kind -> the control primitive that unlocks one of that kind, given its prerequisites."""


def achievement_primitive(attr: str, members: frozenset[str]) -> str:
    """The control-primitive call that does what a method named after an achievement or an action means
    (``game.place_table()`` -> ``yield from game.place_item('table')``), where the API level `members` have
    it; "" otherwise. The small model calls achievements as game methods (recorded: `.place_table`,
    `.make_wood_pickaxe`, `.collect_coal`); the diagnostic names the call it meant."""
    kind, _, name = attr.partition("_")
    primitive = _ACHIEVEMENT_PRIMITIVES.get(kind)
    if primitive is None or not name or f"{kind}_{name}" not in constants.achievements \
            or primitive not in members:
        return ""
    return f"yield from game.{primitive}({name!r})"


class Validator:
    """Collects every allow-list violation of one module; `api` is the API level whose `GameAPI` members the
    code may use (`rlgpt.macro.api.LEVEL_MEMBERS`)."""

    def __init__(self, code: str, entry: str, api: str = "expert") -> None:
        self.code = code
        self.entry = entry
        self.api = api_level(api)
        self.denied = API_MEMBERS - LEVEL_MEMBERS[self.api] - SAFE_METHODS
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
        if not yields(entry):
            self.add("signature", f"{self.entry}() must be a generator that yields action names", entry)

    def _check_node(self, node: ast.AST, parents: dict[ast.AST, ast.AST], defined: set[str]) -> bool:
        """Report what is wrong with one node; False when the node type itself is forbidden."""
        if not isinstance(node, _ALLOWED_NODES):
            self.add("forbidden_node", _node_message(node), node)
            return False
        if isinstance(node, ast.Call) and (name := _game_member(node.func)) and name not in self.denied:
            wrong = _unbound_arguments(name, node)
            if wrong:
                self.add("bad_arguments", wrong, node)
            elif (node.args and isinstance(first := node.args[0], ast.Constant)
                  and isinstance(first.value, str)):
                wrong = _unknown_name(name, first.value)
                if wrong:
                    self.add("bad_arguments", wrong, first)
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
              and node.func.attr in control.GENERATORS
              and isinstance(parents.get(node), ast.Expr | ast.Yield)):
            # Called as a statement it does nothing; yielded, it is not an action: both are the mistake of
            # forgetting that a control primitive is a generator of actions.
            name = node.func.attr
            self.add("primitive_call", f"game.{name}(...) is a generator of actions: write `yield from "
                     f"game.{name}(...)` (it returns True when it reached its goal)", node)
        elif (isinstance(node, ast.YieldFrom) and isinstance(node.value, ast.Call)
              and (name := _game_member(node.value.func)) and name not in control.GENERATORS):
            # The reverse slip: `yield from game.step_toward(t)` iterates the action's letters (or None).
            self.add("primitive_call", f"game.{name}(...) is a query, not a generator: write `yield "
                     f"game.{name}(...)` for an action it returns, or use its value", node)
        elif isinstance(node, ast.Yield) and node.value is not None:
            for constant in _yielded_strings(node.value):
                if constant.value not in ACTION_NAMES:
                    self.add("bad_action", _not_an_action(constant.value), constant)
        elif isinstance(node, ast.YieldFrom) and (name := _game_member(node.value)):
            # `yield from game.sleeping` (measured, a wake_up skill): iterating a value fails at run time on
            # every call; `yield from game.gather` without the call likewise.
            fix = (f"call it: `yield from game.{name}(...)`" if name in control.GENERATORS else
                   f"read its value (`if game.{name}:`) or `yield from` a control primitive's call")
            self.add("primitive_call", f"game.{name} is not a generator: {fix}", node)
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
            call = achievement_primitive(node.attr, LEVEL_MEMBERS[self.api])
            also = f" (one step, where it can act), or to walk there and do it: {call}" if call else ""
            self.add("forbidden_attribute", f".{node.attr} is not a game method; actions are yielded as "
                     f"strings: yield {node.attr!r}{also}", node)
        elif node.attr in self.denied:
            hint = (f"; at this level use {_LEVEL_HINTS[node.attr]}(...), which needs its prerequisites held"
                    if node.attr in _LEVEL_HINTS and self.api == "primitives" else "")
            self.add("api_level", f"game.{node.attr} is not part of the {self.api!r} API level "
                     f"(agents.api={self.api}){hint}", node)
        elif node.attr not in ALLOWED_ATTRIBUTES:
            call = achievement_primitive(node.attr, LEVEL_MEMBERS[self.api])
            self.add(
                "forbidden_attribute",
                f".{node.attr} is not a game method; to unlock {node.attr}: {call}" if call else
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


def _game_member(node: ast.AST) -> str | None:
    """The member name of ``<name>.<member>`` when the member is one of the game API's (`API_MEMBERS`),
    else None. ``skills.<name>`` is a stored macro, not the game's."""
    if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id != SKILLS_NAME
            and node.attr in API_MEMBERS):
        return node.attr
    return None


@functools.cache
def _method_params(name: str) -> tuple[inspect.Parameter, ...] | None:
    """The parameters of `GameAPI` method `name` as macro code calls it (no ``self``); None for a property
    or constant."""
    member = inspect.getattr_static(GameAPI, name, None)
    if not inspect.isfunction(member):
        return None
    return tuple(inspect.signature(member).parameters.values())[1:]


def _unbound_arguments(name: str, call: ast.Call) -> str:
    """Why the arguments written in `call` of game method `name` cannot bind to it ("" when they can, or
    when a ``*`` argument hides how many there are). Measured: the 1.5B wrote
    ``game.craft_item("stone_pickaxe", nearby=table)`` in 3 of the 5 make_stone_pickaxe macros one search
    tried, each an exception at run time in every probe call, and its repairs kept the keyword."""
    params = _method_params(name)
    if params is None or any(isinstance(a, ast.Starred) for a in call.args):
        return ""
    signature = inspect.Signature([p.replace(annotation=inspect.Parameter.empty) for p in params])
    try:
        signature.bind(*call.args, **{k.arg: k.value for k in call.keywords if k.arg is not None})
    except TypeError as exc:
        return f"game.{name}{signature}: {exc}"
    return ""


def _takes_kind(name: str) -> bool:
    """Whether `GameAPI` method `name`'s first argument may be a tile material or object kind's name."""
    first = (_method_params(name) or (None,))[0]
    return first is not None and first.name in ("kind", "pos") and "str" in str(first.annotation)


def _unknown_name(name: str, value: str) -> str:
    """Why the name constant `value`, written as game method `name`'s first argument, is one the method
    refuses at run time ("" when it takes it): the same words as the run-time error, before any probe.
    Measured in one make_stone_pickaxe run: ``game.item("collect_stone")``, ``game.item("table")``,
    ``game.nearest("wood")``, each an exception in every probe call."""
    if name == "item":
        return item_error(value[:40])
    return kind_error(value) if _takes_kind(name) else ""


def _yielded_strings(value: ast.expr) -> list[ast.Constant]:
    """The string constants a ``yield`` can hand to the runtime as they are written: the value itself, or
    either branch of a conditional expression (``yield "do" if near else game.random_move()``)."""
    stack, found = [value], []
    while stack:
        node = stack.pop()
        if isinstance(node, ast.IfExp):
            stack.extend((node.body, node.orelse))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            found.append(node)
    return found


def _not_an_action(text: str) -> str:
    """Why a yielded string constant is refused, and the action it most likely meant. Recorded: the small
    model copies the probe trace's notation into code (`yield "make_wood_pickaxe@grass"`, where ``@grass``
    says what the action faced), which otherwise fails at run time on every call."""
    shown = text if len(text) <= 60 else text[:57] + "..."
    head = text.split("@", 1)[0].split("(", 1)[0].strip()
    if head in ACTION_NAMES:
        hint = (f"; traces write `action@target` and `action(why)` to say what it faced and what happened: "
                f"yield only the action name, {head!r}")
    else:
        close = difflib.get_close_matches(head, ACTION_NAMES, n=1, cutoff=0.75)
        hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"yield {shown!r}: not an action name (game.actions lists them){hint}"


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


class FunctionValidator(Validator):
    """`Validator` whose entry point must be a plain function of ``arity`` positional arguments."""

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
        if yields(entry):
            self.add("signature", f"{self.entry}() must return a value, not yield", entry)


def unnamed_goal(code: str, goal: str, api: str = "expert") -> Diagnostic | None:
    """Why `code`, a macro for a crafting `goal` (``make_stone_pickaxe``, or the item ``stone_pickaxe``),
    cannot reach it: it never names the item it should make, so whatever it crafts is something else (None
    when it names it, calls a stored skill, does not parse, or the goal is no crafting goal).

    Measured: the 1.5B shifts a chain's steps, and 4 of the 5 make_stone_pickaxe macros one search tried
    crafted ``wood_pickaxe``, the previous link's item; each ran and returned without its goal, and the
    repair round read "it returned without reaching its goal". This names the mistake before any probe."""
    kind, _, item = goal.partition("_")
    if kind != "make" or goal not in constants.achievements:
        item = goal if f"make_{goal}" in constants.achievements else ""
    if not item:
        return None
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None  # the compiler's own diagnostics say what is wrong
    others: list[ast.Constant] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id == SKILLS_NAME:
            return None  # a stored skill may make it under its own name
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if item in node.value:
                return None
            if node.value in constants.make or node.value.startswith("make_"):
                others.append(node)
    wrong = min(others, key=lambda n: (n.lineno, n.col_offset), default=None)
    call = achievement_primitive(f"make_{item}", LEVEL_MEMBERS[api_level(api)]) or f"yield 'make_{item}'"
    made = f" It crafts {wrong.value!r} instead." if wrong is not None else ""
    return make_diagnostic(
        "goal_unnamed",
        f"this macro's goal is {goal!r}, and it never names {item!r}, so nothing in it can make one.{made} "
        f"Make it with `{call}` (once its ingredients are held, next to its station).",
        code, getattr(wrong, "lineno", None), getattr(wrong, "col_offset", None))
