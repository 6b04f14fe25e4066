"""Phase 2 of compiling generated code: instrument a validated AST.

Statements, loops, calls, comparisons, subscript keys, operators, f-strings and allocations are routed
through the `Guard` hooks (`rlgpt.macro.sandbox`), which charge fuel and bound time, memory and recursion
at run time.
"""

from __future__ import annotations

import ast
from typing import Any


def _hook(name: str, args: list[ast.expr], like: ast.AST) -> ast.Call:
    call = ast.Call(func=ast.Name(id=name, ctx=ast.Load()), args=args, keywords=[])
    return ast.copy_location(call, like)


_CONVERSIONS = {-1: "", ord("s"): "s", ord("r"): "r", ord("a"): "a"}


class Instrumenter(ast.NodeTransformer):
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
                    # A return also says where it returns (`InvocationBudget.returning`).
                    returns = isinstance(stmt, ast.Return)
                    hook = (_hook("_rt_return", [ast.Constant(stmt.lineno)], stmt) if returns
                            else _hook("_rt_stmt", [], stmt))
                    guarded += [ast.copy_location(ast.Expr(hook), stmt), stmt]
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
