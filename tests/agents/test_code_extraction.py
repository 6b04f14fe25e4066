"""Code comes out of model replies however the model formats them."""

from __future__ import annotations

import pytest

from rlgpt.agents.code import code_blocks, extract_function
from rlgpt.macro.compiler import MacroSource, compile_macro

BODY = "def chop(game):\n    while True:\n        yield 'do'\n"


@pytest.mark.parametrize("reply", [
    f"```python\n{BODY}```",
    f"Here is the macro:\n```python\n{BODY}```\nIt chops trees until the episode ends.",
    f"```\n{BODY}```",
    f"```py\n{BODY}",  # cut off before the closing fence
    f"Sure!\n{BODY}\nThis function yields do forever.",  # no fence at all
    f"```python\nx = 1\n```\nand the macro:\n```python\n{BODY}```",  # the function is in the second block
])
def test_extracts_the_function_however_it_is_fenced(reply: str) -> None:
    code = extract_function(reply, "chop")
    assert code is not None and code.strip() == BODY.strip()
    compile_macro(MacroSource("chop", code))


def test_renames_a_single_function_with_another_name() -> None:
    reply = "```python\ndef cut_tree(game):\n    yield 'do'\n    yield from cut_tree(game)\n```"
    code = extract_function(reply, "chop")
    assert code is not None and code.startswith("def chop(game):") and "from chop(game)" in code


def test_keeps_helpers_and_picks_the_requested_function() -> None:
    reply = "```python\ndef helper(x):\n    return x\n\ndef chop(game):\n    yield helper('do')\n```"
    code = extract_function(reply, "chop")
    assert code is not None and "def helper(x):" in code and "def chop(game):" in code
    compile_macro(MacroSource("chop", code))


def test_no_function_gives_none() -> None:
    assert extract_function("I cannot write this macro.", "chop") is None
    assert extract_function("```python\nprint(1)\n```", "chop") is None
    assert code_blocks("a\n```js\nx\n```\n") == ["x\n"]
