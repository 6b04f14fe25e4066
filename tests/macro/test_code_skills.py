"""Code skills: a stored macro that works is called from a later macro (``yield from skills.<name>(game)``),
linked into the same sandboxed module, and runs inside a real Sample Factory training."""

from __future__ import annotations

import random

import pytest
import yaml

from rlgpt.envs.crafter import CrafterEnv
from rlgpt.macro.api import GameAPI
from rlgpt.macro.code_skills import CodeSkill, called_skills, code_skills, link_skills
from rlgpt.macro.compiler import MacroSource, compile_macro
from rlgpt.macro.diagnostics import RUNTIME_FAILURE_KINDS, MacroCompileError
from rlgpt.macro.runtime import run_macro

WOOD = CodeSkill("get_wood", "collect two wood", "wood",
                 'def step_once(game):\n    yield "noop"\n\n'
                 'def get_wood(game):\n    yield from step_once(game)\n'
                 '    ok = yield from game.collect("wood", 2)\n    return ok\n', 1.0)
TABLE = ('def get_table(game):\n    # the stored skill gets the wood, then the table goes down\n'
         '    ok = yield from skills.get_wood(game)\n    yield from game.place("table")\n')


def test_a_macro_calling_a_stored_skill_is_linked_into_one_module_that_runs() -> None:
    linked = link_skills("get_table", TABLE, {"get_wood": WOOD})
    # The skill's functions moved into its own namespace; a helper name of the caller cannot clash.
    assert "def skill_get_wood(game)" in linked and "def skill_get_wood_step_once(game)" in linked
    assert "skills." not in linked
    macro = compile_macro(MacroSource("get_table", linked))
    env = CrafterEnv(length=None)
    env.reset(seed=0)
    game = GameAPI(env.crafter, random.Random(0))
    result = run_macro(env, macro, game, gamma=1.0, max_steps=200)
    assert result.outcome == "success"
    assert env.crafter._player.achievements["collect_wood"] >= 2  # the skill ran inside the macro
    assert env.crafter._player.achievements["place_table"] == 1


def test_unknown_skills_are_diagnostics_and_code_without_skills_is_unchanged() -> None:
    with pytest.raises(MacroCompileError) as caught:
        link_skills("m", "def m(game):\n    yield from skills.get_iron(game)\n", {"get_wood": WOOD})
    assert caught.value.diagnostics[0].kind == "unknown_skill"
    assert "get_wood" in caught.value.diagnostics[0].message
    plain = "def m(game):\n    skills = [1]\n    skills.append(2)\n    yield 'noop'\n"
    assert called_skills(plain) == [] and link_skills("m", plain, {}) == plain
    assert called_skills("def m(game:\n") == []


def test_only_macros_whose_probes_reached_their_goal_become_callable() -> None:
    records = [{"name": "get_wood", "code": WOOD.code, "description": "d", "goal": "wood", "goal_rate": 1.0},
               {"name": "wander", "code": "def wander(game):\n    yield 'noop'\n", "goal": "",
                "goal_rate": None},
               {"name": "get_stone", "code": "x", "goal": "stone", "goal_rate": 0.25}]
    assert list(code_skills(records)) == ["get_wood"]
    assert code_skills(records)["get_wood"].line().startswith("  skills.get_wood(game): d; raises 'wood'")


@pytest.mark.slow
def test_a_composed_skill_runs_inside_a_later_macro_in_sample_factory(tmp_path) -> None:
    from rlgpt.config import builtin_config_path, load_config
    from rlgpt.rl.evaluate import evaluate
    from rlgpt.rl.train import train

    macros = tmp_path / "macros.yaml"
    macros.write_text(yaml.safe_dump([{"name": "get_table", "description": "",
                                       "code": link_skills("get_table", TABLE, {"get_wood": WOOD})}]))
    cfg = load_config(builtin_config_path("smoke.yaml"),
                      [f"run_dir={tmp_path / 'run'}", "steps=3000", "task=place_table",
                       f"macros.file={macros}", "macros.max_steps=200", "eval_episodes=0"])
    result = train(cfg)
    assert result.status == 0
    # The trained policy sampled over its actions (a seconds-trained policy is near uniform) calls the macro
    # in the env its training config builds: it compiled there and ran (a table placed by the macro ends the
    # episode, so its last call may count as interrupted rather than a success) and no call failed on errors.
    stats = evaluate(result.run_dir, episodes=2).macro_stats["get_table"]
    assert stats["calls"] > 0 and stats["mean_length"] > 1
    assert not [kind for kind in RUNTIME_FAILURE_KINDS if kind != "max_steps" and stats.get(f"fail_{kind}")]


def test_a_linked_skill_hands_control_back_at_its_goal() -> None:
    # Verified as a macro whose calls end at its goal, this skill plays on after its first wood (`do` at the
    # grass its tree became): called from another macro, it must still hand control back there.
    spins = CodeSkill("spin_wood", "one wood", "wood",
                      'def spin_wood(game):\n    ok = yield from game.walk_to("tree")\n'
                      '    while True:\n        yield "do"\n', 1.0)
    caller = ('def chop_then_wait(game):\n    ok = yield from skills.spin_wood(game)\n'
              '    if ok:\n        yield "noop"\n        return True\n    return False\n')
    linked = link_skills("chop_then_wait", caller, {"spin_wood": spins})
    assert "def skill_spin_wood_spin_wood(game)" in linked and "def skill_spin_wood(game)" in linked
    macro = compile_macro(MacroSource("chop_then_wait", linked))
    env = CrafterEnv(length=None)
    env.reset(seed=0)
    game = GameAPI(env.crafter, random.Random(0))
    result = run_macro(env, macro, game, gamma=1.0, max_steps=300)
    lines = linked.splitlines()
    start = lines.index("def chop_then_wait(game):")
    returned = next(i for i in range(start, len(lines)) if lines[i].strip() == "return True") + 1
    assert result.outcome == "success" and result.steps < 300 and result.returned_at == returned
    assert env.crafter._player.inventory["wood"] == 1
    # Without a goal it is linked as it is: the caller never gets control back.
    free = CodeSkill("spin_wood", "one wood", "", spins.code, 1.0)
    macro = compile_macro(MacroSource("chop_then_wait", link_skills("chop_then_wait", caller,
                                                                    {"spin_wood": free})))
    env.reset(seed=0)
    game = GameAPI(env.crafter, random.Random(0))
    assert run_macro(env, macro, game, gamma=1.0, max_steps=300).outcome in ("max_steps", "episode_end")
