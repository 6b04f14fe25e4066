"""Hostile macro corpus: every program is rejected at compile time or contained at run time, with the right
diagnostic and no effect on the game, the API or the interpreter."""

from __future__ import annotations

import builtins
import os
import textwrap

import pytest

from rlgpt.envs.crafter import CrafterEnv
from rlgpt.macro.api import ACTION_NAMES, API_MEMBERS, GameAPI
from rlgpt.macro.compiler import MacroSource, check_macro, compile_macro
from rlgpt.macro.diagnostics import MacroCompileError
from rlgpt.macro.sandbox import MacroLimits


def m(body: str) -> str:
    """Wrap statements into the entry generator ``m(game)``."""
    return (
        "def m(game):\n" + textwrap.indent(textwrap.dedent(body).strip("\n"), "    ") + "\n    yield 'noop'\n"
    )


# (id, source, diagnostic kind) - rejected by the compiler.
COMPILE_CORPUS = [
    ("subclasses_walk", m("x = ().__class__.__base__.__subclasses__()"), "forbidden_attribute"),
    ("api_class", m("c = game.__class__"), "forbidden_attribute"),
    ("api_private", m("g = game._game"), "forbidden_attribute"),
    ("gen_frame_walk", m("g = m(game)\nx = g.gi_frame.f_globals"), "forbidden_attribute"),
    ("gen_code", m("x = m.gi_code"), "forbidden_attribute"),
    ("str_format_traversal", m("s = '{0.__class__.__base__}'.format(game)"), "forbidden_attribute"),
    ("str_format_plain", m("s = '{0}'.format(1)"), "forbidden_attribute"),
    ("format_map", m("s = '{x}'.format_map({})"), "forbidden_attribute"),
    ("fstring_attr", m("s = f'{game.__class__}'"), "forbidden_attribute"),
    ("fstring_nested_spec", m("w = 5\ns = f'{1:{w}}'"), "forbidden_node"),
    ("fstring_huge_width", m("s = f'{1:999999999}'"), "forbidden_node"),
    ("getattr_built", m("f = getattr(game, '_' + 'game')"), "forbidden_name"),
    ("getattr_chr", m("f = getattr(game, chr(95) * 2 + 'class' + chr(95) * 2)"), "forbidden_name"),
    ("setattr", m("setattr(game, 'pos', (0, 0))"), "forbidden_name"),
    ("hasattr_probe", m("b = hasattr(game, 'x')"), "forbidden_name"),
    ("import", "import os\n" + m("pass"), "forbidden_node"),
    ("import_in_function", m("import os"), "forbidden_node"),
    ("import_from", m("from os import system"), "forbidden_node"),
    ("import_as", m("import subprocess as sp"), "forbidden_node"),
    ("dunder_import", m("os = __import__('os')"), "forbidden_name"),
    ("builtins_dict", m("b = __builtins__"), "forbidden_name"),
    ("exec", m("exec('import os')"), "forbidden_name"),
    ("eval", m("x = eval('1+1')"), "forbidden_name"),
    ("compile", m("c = compile('1', 'f', 'eval')"), "forbidden_name"),
    ("open", m("f = open('/etc/passwd')"), "forbidden_name"),
    ("globals", m("g = globals()"), "forbidden_name"),
    ("locals", m("g = locals()"), "forbidden_name"),
    ("vars", m("g = vars(game)"), "forbidden_name"),
    ("type", m("t = type(game)"), "forbidden_name"),
    ("type_new_class", m("T = type('T', (), {})"), "forbidden_name"),
    ("print", m("print('hi')"), "forbidden_name"),
    ("unknown_name", m("x = os.system"), "forbidden_name"),
    ("global", "X = 1\n" + m("global X\nX = 2"), "forbidden_node"),
    ("nonlocal", m("x = 1\ndef f():\n    nonlocal x\n    x = 2"), "forbidden_node"),
    ("with", m("with game:\n    pass"), "forbidden_node"),
    ("class", m("class A:\n    pass"), "forbidden_node"),
    ("escaping_lambda", m("f = lambda: game"), "forbidden_node"),
    ("returned_lambda", "def h():\n    return lambda: 1\n" + m("pass"), "forbidden_node"),
    ("assign_api_attr", m("game.pos = (0, 0)"), "mutation"),
    ("delete_api_attr", m("del game.inventory"), "mutation"),
    ("augassign_api_attr", m("game.steps += 1"), "mutation"),
    ("bare_except", m("try:\n    pass\nexcept:\n    pass"), "forbidden_node"),
    ("except_base", m("try:\n    pass\nexcept BaseException:\n    pass"), "forbidden_name"),
    ("except_computed", m("try:\n    pass\nexcept game.actions:\n    pass"), "forbidden_node"),
    ("starred", m("a = [1]\nb = [*a, *a]"), "forbidden_node"),
    ("double_star", m("d = {**{}}"), "forbidden_node"),
    ("async_def", "async def h():\n    pass\n" + m("pass"), "forbidden_node"),
    ("await_like_match", m("match game:\n    case _:\n        pass"), "forbidden_node"),
    ("decorator", "def d(f):\n    return f\n@d\n" + m("pass"), "forbidden_node"),
    ("dunder_local", m("__x = 1"), "forbidden_name"),
    ("underscore_param", "def h(_g):\n    return 1\n" + m("pass"), "forbidden_name"),
    ("underscore_kwarg", m("x = sorted([], _key=1)"), "forbidden_name"),
    (
        "traceback_walk",
        m("try:\n    1 / 0\nexcept ValueError as e:\n    f = e.__traceback__.tb_frame"),
        "forbidden_attribute",
    ),
    ("with_traceback", m("e = ValueError()\nx = e.with_traceback"), "forbidden_attribute"),
    ("mro", m("x = game.mro"), "forbidden_attribute"),
    ("iter_sentinel", m("it = iter(int, 1)"), "forbidden_name"),
    ("breakpoint", m("breakpoint()"), "forbidden_name"),
    ("bytes_constant", m("b = b'x'"), "forbidden_node"),
    ("ellipsis", m("x = ..."), "forbidden_node"),
    ("raise_stop_iteration", m("raise StopIteration"), "forbidden_name"),
    ("top_level_loop", "while True:\n    pass\n" + m("pass"), "forbidden_node"),
    ("syntax", "def m(game):\n    yield (", "syntax"),
    ("not_generator", "def m(game):\n    return 'noop'\n", "signature"),
    ("missing_entry", "def other(game):\n    yield 'noop'\n", "signature"),
    ("two_params", "def m(game, extra):\n    yield 'noop'\n", "signature"),
    ("too_long", m("x = 1\n" * 5000), "too_long"),
]


@pytest.mark.parametrize(
    ("source", "kind"), [c[1:] for c in COMPILE_CORPUS], ids=[c[0] for c in COMPILE_CORPUS]
)
def test_compile_corpus_rejected(source: str, kind: str) -> None:
    problems = check_macro(MacroSource("m", source))
    assert kind in {p.kind for p in problems}, [str(p) for p in problems]
    with pytest.raises(MacroCompileError) as info:
        compile_macro(MacroSource("m", source))
    assert info.value.diagnostics == problems
    for p in problems:
        assert p.message and "\n" not in str(p)


def test_compile_diagnostic_points_at_the_line() -> None:
    source = "def m(game):\n    a = 1\n    b = game.__dict__\n    yield 'noop'\n"
    (problem,) = check_macro(MacroSource("m", source))
    assert (problem.kind, problem.line, problem.col) == ("forbidden_attribute", 3, 9)
    assert problem.source_line == "b = game.__dict__"
    assert problem.to_dict()["line"] == 3


def test_every_violation_is_reported() -> None:
    source = m("import os\nx = open('f')\ny = game._game")
    kinds = [p.kind for p in check_macro(MacroSource("m", source))]
    assert kinds.count("forbidden_node") == 1 and "forbidden_name" in kinds and "forbidden_attribute" in kinds


def test_clean_source_has_no_diagnostics() -> None:
    assert (
        check_macro(MacroSource("m", m("x = sorted(game.find('tree'), key=lambda p: game.distance(p))")))
        == ()
    )


BIG = "big = list(range(90000))\n"
# (id, source, diagnostic kind, limits) - compiled, then contained while running.
RUNTIME_CORPUS = [
    ("infinite_loop", m("while True:\n    pass"), "fuel", None),
    ("infinite_yield", "def m(game):\n    while True:\n        yield 'noop'\n", "max_steps", None),
    ("deep_recursion", "def f(n):\n    return f(n + 1)\n" + m("f(0)"), "recursion", None),
    ("generator_recursion", "def g():\n    yield from g()\n" + m("yield from g()"), "recursion", None),
    ("list_times_huge", m("a = [0] * 10**9"), "memory", None),
    ("str_times_huge", m("a = 'a' * 10**9"), "memory", None),
    ("list_range_huge", m("a = list(range(10**9))"), "memory", None),
    ("range_overflow", m("a = range(10**30)"), "memory", None),
    ("pow_huge", m("a = 2 ** 10**8"), "memory", None),
    ("shift_huge", m("a = 1 << 10**9"), "memory", None),
    ("int_squaring", m("x = 3\nwhile True:\n    x = x * x"), "memory", None),
    ("extend_doubling", m("a = [0]\nwhile True:\n    a.extend(a)"), "memory", None),
    ("concat_doubling", m("s = 'ab'\nwhile True:\n    s += s"), "memory", None),
    ("many_big_copies", m(BIG + "keep = [big[:] for i in range(1000)]"), "fuel", None),
    ("many_big_lists", m("keep = [[0] * 99999 for i in range(99999)]"), "fuel", None),
    ("sorted_key_copies", m(BIG + "x = sorted([big] * 1000, key=list)"), "fuel", None),
    ("map_copies", m(BIG + "x = list(map(list, [big] * 1000))"), "fuel", None),
    ("set_union_copies", m("s = set(range(90000))\nkeep = [s | s for i in range(1000)]"), "fuel", None),
    ("deep_tuple_literal", m("t = ()\nwhile True:\n    t = ((((((((t,),),),),),),),)"), "memory", None),
    ("deep_tuple_zip", m("t = ()\nd = {}\nwhile True:\n    t = next(zip([t]))\n    d[t] = 1"), "fuel", None),
    ("percent_width", m("s = '%999999999d' % 1"), "memory", None),
    ("percent_star", m("s = '%*d' % (10**9, 1)"), "memory", None),
    ("sum_concat", m("x = sum([[1] * 1000] * 1000, [])"), "exception", None),
    ("str_of_container", m("x = str([[0] * 1000] * 1000)"), "exception", None),
    ("fstring_container", m("x = f'{[0] * 10}'"), "exception", None),
    ("round_huge", m("x = round(10, -10**9)"), "exception", None),
    ("int_digits", m("x = int('9' * 5000)"), "exception", None),
    (
        "catch_fuel",
        m(
            "while True:\n    try:\n        while True:\n            pass\n    except Exception:\n"
            + "        pass"
        ),
        "fuel",
        None,
    ),
    (
        "finally_return",
        "def m(game):\n    try:\n        while True:\n            pass\n    finally:\n        return\n"
        "    yield 'noop'\n",
        "fuel",
        None,
    ),
    (
        "finally_yield",
        "def m(game):\n    try:\n        while True:\n            pass\n    finally:\n"
        "        while True:\n            yield 'do'\n",
        "fuel",
        None,
    ),
    ("raise_value_error", m("raise ValueError('boom')"), "exception", None),
    ("raise_non_exception", m("raise 5"), "exception", None),
    ("zero_division", m("x = 1 / 0"), "exception", None),
    ("huge_exception_arg", m("d = {}\nx = d[tuple(range(90000))]"), "exception", None),
    ("mutate_inventory", m("inv = game.inventory\ninv['wood'] = 9"), "mutation", None),
    ("mutate_actions", m("game.actions.append('x')"), "exception", None),
    ("mutate_view", m("v = game.view()\nv[0] = 1"), "mutation", None),
    ("bad_action_name", "def m(game):\n    yield 'self_destruct'\n", "bad_action", None),
    ("bad_action_index", "def m(game):\n    yield 999\n", "bad_action", None),
    ("bad_action_object", "def m(game):\n    yield game\n", "bad_action", None),
    ("bad_api_argument", m("x = game.step_toward('tree')"), "exception", None),
    ("bad_api_kind", m("x = game.find('__class__')"), "exception", None),
    ("next_empty", m("x = next(i for i in [])"), "exception", None),
    ("module_level_alloc", "X = [0] * 10**9\n" + m("pass"), "memory", None),
    (
        "slow_loop_timeout",
        m("while True:\n    x = sorted(range(2000))"),
        "timeout",
        MacroLimits(fuel=50_000, max_seconds=0.005),
    ),
]


@pytest.mark.parametrize(
    ("source", "kind", "limits"), [c[1:] for c in RUNTIME_CORPUS], ids=[c[0] for c in RUNTIME_CORPUS]
)
def test_runtime_corpus_contained(
    run, initial_state: dict, source: str, kind: str, limits: MacroLimits | None
) -> None:
    builtins_before = dict(vars(builtins))
    environ_before = dict(os.environ)
    result, env = run(source, limits=limits)
    assert result.outcome == kind, (result.outcome, result.diagnostic)
    diagnostic = result.diagnostic
    assert diagnostic is not None and diagnostic.kind == kind
    assert len(diagnostic.message) < 400 and "\n" not in diagnostic.message
    if kind != "max_steps":
        assert diagnostic.line is not None and diagnostic.source_line
    # Contained: the game saw only the macro's own primitive steps (noops here), nothing else changed.
    assert result.steps == (16 if kind == "max_steps" else 1)
    player = env.crafter._player
    assert player.inventory == initial_state["inventory"]
    assert tuple(player.pos) == initial_state["pos"] and env.crafter._step == result.steps
    assert ACTION_NAMES[:2] == ("noop", "move_left") and len(ACTION_NAMES) == 17
    assert {n for n in dir(GameAPI) if not n.startswith("_")} == API_MEMBERS
    assert dict(vars(builtins)) == builtins_before and dict(os.environ) == environ_before


@pytest.fixture(scope="module")
def initial_state() -> dict:
    """Inventory and position of the player right after ``reset(seed=0)``."""
    env = CrafterEnv(seed=0)
    env.reset(seed=0)
    player = env.crafter._player
    return {"inventory": dict(player.inventory), "pos": tuple(player.pos)}


def test_corpus_size() -> None:
    assert len(COMPILE_CORPUS) + len(RUNTIME_CORPUS) >= 40


def test_runtime_diagnostic_location(run) -> None:
    source = "def m(game):\n    yield 'noop'\n    x = [1, 2]\n    y = x[5]\n"
    result, _ = run(source)
    d = result.diagnostic
    assert (d.kind, d.line, d.source_line) == ("exception", 4, "y = x[5]")
    assert d.message.startswith("IndexError") and result.steps == 1
