"""The skill library's code skills (issue 28, part 3): versioned and locked entries shared by runs, retrieval
by goal graph and words, a skill stored by one run composed inside a later run's real training, and the
`rlgpt skills learn` curriculum (easiest unmet achievement first, stored only when probes reach the goal).

The LLM is scripted at the client seam (`ScriptedLLM`, a `rlgpt.llm.types.Backend`): it answers each role
with fixed replies, the macro code chosen by the macro's name, so that what the model writes is known."""

from __future__ import annotations

import json
import multiprocessing
import re
from pathlib import Path
from typing import Any

import pytest
from crafter_helpers import chop_source, fenced
from loop_helpers import assert_error_line, cli, smoke_config

from rlgpt.agents.fast import FastAgent
from rlgpt.agents.replies import SubAction
from rlgpt.config import AgentConfig
from rlgpt.llm.config import build_client
from rlgpt.llm.types import Completion, Message, SamplingParams
from rlgpt.macro.code_skills import CodeSkill, code_hash, goal_key, retrieve
from rlgpt.run.curriculum import achievement_skills, learn, learn_table, next_achievement
from rlgpt.run.skills import SkillLibrary

WOOD = chop_source("collect_wood")
"""A known-good macro: walk to the nearest tree and chop until one more wood is held."""
BAD = "def {name}(game):\n    yield \"noop\"\n"
"""A known-bad macro: one noop, never the goal."""
TABLE_ON_SKILLS = '''
def place_table(game):
    start = game.achievements["place_table"]
    while game.inventory["wood"] < 2:
        ok = yield from skills.collect_wood(game)
    for move in ("move_left", "move_right", "move_up", "move_down", "move_left", "move_up"):
        yield move
        yield "place_table"
        if game.achievements["place_table"] > start:
            return True
    return False
'''
"""A macro composed of a stored skill: wood from ``skills.collect_wood``, then a table beside the player."""


class ScriptedLLM:
    """A Backend answering every role from a script: macro code by macro name (`macros`, a
    ``{name}``-formatted template for unnamed ones), the given decomposition, a zero reward, every offered
    macro in the setup, and "done" from the critic. Requests are kept (``prompts``: the macro prompts)."""

    model_id = "scripted-llm"

    def __init__(self, macros: dict[str, str], decomposition: dict[str, Any] | None = None,
                 default_macro: str = BAD) -> None:
        self.macros = macros
        self.decomposition = decomposition
        self.default_macro = default_macro
        self.prompts: dict[str, list[str]] = {}

    def complete(self, messages: list[Message], schema: dict[str, Any] | None,
                 sampling: SamplingParams) -> Completion:
        return Completion(self._reply(messages, schema), 10, 10, "stop", self.model_id)

    def _reply(self, messages: list[Message], schema: dict[str, Any] | None) -> str:
        text = "\n".join(m["content"] for m in messages if m["role"] == "user")
        if schema is None:
            found = re.search(r"Write the macro `([a-z0-9_]+)\(game\)`", text)
            if found:
                name = found.group(1)
                self.prompts.setdefault(name, []).append(text)
                return fenced(self.macros.get(name, self.default_macro.format(name=name)))
            return fenced("def reward(game, prev):\n    return 0.0\n")
        title = schema.get("title")
        if title == "Decomposition":
            return json.dumps(self.decomposition)
        if title == "FastSetup":
            offered = schema["properties"]["macros"].get("items", {}).get("enum", [])
            return json.dumps({"horizon": 200, "observation": ["view", "vector"], "macros": offered})
        return json.dumps({"target": "done", "problems": [], "suggestions": []})


def skill(name: str, goal: str, description: str = "", rate: float = 1.0,
          code: str | None = None) -> CodeSkill:
    return CodeSkill(name, description or f"unlocks {goal}", goal, code or BAD.format(name=name), rate)


# -- the library: versioned, locked -----------------------------------------------------------------------

def test_code_skills_are_versioned_and_replaced_only_by_better_ones(tmp_path: Path, capsys) -> None:
    library = SkillLibrary(tmp_path / "lib")
    empty = library.code_library()
    assert empty.version == 0 and empty.skills == {}
    entry, stored = library.add_code(skill("collect_wood", "collect_wood", rate=0.67))
    assert stored and entry.version == 1 and entry.hash == code_hash(entry.code)
    first = SkillLibrary(tmp_path / "lib").code_library()  # another run's view of the same directory
    assert first.version == 1 and first.skills["collect_wood"].goal_rate == 0.67

    worse, stored = library.add_code(skill("collect_wood", "collect_wood", rate=0.5, code=WOOD))
    assert not stored and worse.goal_rate == 0.67 and library.code_library().version == 1
    better, stored = library.add_code(skill("collect_wood", "collect_wood", rate=1.0, code=WOOD))
    assert stored and better.version == 2 and better.code == WOOD
    second = library.code_library()
    assert second.version == 2 and second.hash != first.hash
    assert second.ref()["skills"]["collect_wood"] == {"version": 2, "hash": code_hash(WOOD)}

    # An entry whose code no longer matches its hash (edited by hand, damaged) is skipped with a warning.
    path = tmp_path / "lib" / "code_skills.json"
    data = json.loads(path.read_text())
    data["skills"]["collect_wood"]["code"] += "# edited\n"
    path.write_text(json.dumps(data))
    capsys.readouterr()
    assert library.code_library().skills == {}
    assert "does not match its hash" in capsys.readouterr().err


def _add_many(root: str, worker: int, count: int) -> None:
    library = SkillLibrary(root)
    for i in range(count):
        library.add_code(skill(f"s{worker}_{i}", "collect_wood"))


def test_concurrent_writers_never_lose_an_entry(tmp_path: Path) -> None:
    """Eight processes add six skills each to one library at once: every entry and every write is there
    (each add reads, changes and rewrites the file: without the lock, concurrent adds overwrite each
    other)."""
    root = str(tmp_path / "lib")
    SkillLibrary(root)
    context = multiprocessing.get_context("fork")
    workers = [context.Process(target=_add_many, args=(root, w, 6)) for w in range(8)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=120)
        assert w.exitcode == 0
    read = SkillLibrary(root).code_library()
    assert len(read.skills) == 48 and read.version == 48


# -- retrieval ---------------------------------------------------------------------------------------------

def test_retrieval_follows_the_goal_graph_then_words(tmp_path: Path) -> None:
    skills = {s.name: s for s in (
        skill("get_wood", "wood", "chop a tree for wood"), skill("table", "place_table", "place a table"),
        skill("drink", "collect_drink", "drink water at a lake"), skill("sword", "make_wood_sword"),
        skill("walk_to_water", "", "walk next to water"))}
    found = retrieve(skills, "make_wood_pickaxe", "make a wood pickaxe at the table",
                     ("collect_wood", "place_table"))
    # Goals among the prerequisites first (by shared words, then name), then shared words only.
    assert list(found) == ["get_wood", "table", "sword"]
    assert list(retrieve(skills, "collect_drink", "drink some water", ())) == ["drink", "walk_to_water"]
    assert retrieve(skills, "eat_cow", "eat a cow", ()) == {}
    assert len(retrieve({f"w{i}": skill(f"w{i}", "wood") for i in range(9)}, "wood", "", (), limit=3)) == 3

    # The fast agent lists the library's relevant skills in the sub-action's prompt and links any of them.
    client = build_client(smoke_config(tmp_path / "run").llm, backend=ScriptedLLM({}))
    fast = FastAgent(client, AgentConfig(api="basic"),
                     library_skills={"get_wood": skill("get_wood", "wood", code=chop_source("get_wood"))})
    text = fast.skills_text(SubAction("pickaxe", "make a wood pickaxe", "code", "make_wood_pickaxe", ""))
    assert "skills.get_wood(game)" in text
    assert fast.skills_text(SubAction("drink", "drink water", "code", "collect_drink", "")) == ""
    compiled = fast.compile_macro_code("m", "def m(game):\n    ok = yield from skills.get_wood(game)\n")
    assert "def skill_get_wood(game)" in compiled.source.code


# -- a stored skill composed inside a later run's training -------------------------------------------------

def _decomposition(name: str, goal: str) -> dict[str, Any]:
    return {"subactions": [{"name": name, "description": f"{name.replace('_', ' ')}", "how": "code",
                            "goal": goal, "why": "a macro does it"}]}


@pytest.mark.slow
def test_a_skill_stored_by_one_run_is_composed_in_a_later_runs_training(tmp_path: Path) -> None:
    from rlgpt.run.runner import run

    lib = tmp_path / "lib"
    common = ("code_skills=true", f"skills_dir={lib}", "skill_threshold=0.0", "agents.api=basic",
              "agents.goal_fallback=false", "agents.probe_seeds=[0,1,2]", "agents.probe_max_steps=150",
              "llm.replay_only=false", "steps=2048")
    first_llm = ScriptedLLM({"collect_wood": WOOD}, _decomposition("collect_wood", "collect_wood"))
    first = run(smoke_config(tmp_path / "first", "task=collect_wood", *common), backend=first_llm)
    record = first["skill_library"]
    assert record["version"] == 0 and record["skills"] == {}  # it read an empty library
    stored = SkillLibrary(lib).code_library()
    assert record["stored"] == [{"name": "collect_wood", "stored": True, "version": 1,
                                 "hash": stored.skills["collect_wood"].hash}]
    assert stored.version == 1 and stored.skills["collect_wood"].goal_rate >= 0.8
    assert stored.skills["collect_wood"].provenance["run_dir"] == first["run_dir"]

    second_llm = ScriptedLLM({"place_table": TABLE_ON_SKILLS}, _decomposition("place_table", "place_table"))
    second = run(smoke_config(tmp_path / "second", "task=place_table", *common), backend=second_llm)
    # The later run retrieved the stored skill for its sub-action and recorded the library it used.
    assert "skills.collect_wood(game)" in second_llm.prompts["place_table"][0]
    used = second["skill_library"]
    assert (used["path"], used["version"], used["hash"]) == (str(lib), 1, stored.hash)
    assert used["called"] == {"place_table": ["collect_wood"]}
    # The macro Sample Factory's env workers compiled is the linked one, and training called it.
    it_dir = Path(second["run_dir"]) / second["best"]
    trained = (it_dir / "macros.yaml").read_text()
    assert "skill_collect_wood" in trained and "skills." not in trained
    sf_config = json.loads((it_dir / "train" / "config.json").read_text())
    assert "skill_collect_wood" in json.dumps(sf_config)
    probes = json.loads((it_dir / "probes.json").read_text())
    assert probes[0]["macro"] == "place_table" and probes[0]["goal_rate"] > 0
    # Its evaluation sampled the trained policy: the composed macro was chosen (all but surely, over
    # hundreds of decisions) and ran the linked skill's code in the env.
    report = json.loads((it_dir / "train" / "result.json").read_text())["eval"]
    assert report["macro_stats"]["place_table"]["calls"] > 0


# -- the curriculum ----------------------------------------------------------------------------------------

def test_the_curriculum_orders_achievements_easiest_first() -> None:
    assert next_achievement([], []) == "collect_drink"  # no prerequisites; first by name
    assert next_achievement([], ["collect_drink", "collect_sapling"]) == "collect_wood"
    zero = ["collect_drink", "collect_sapling", "collect_wood", "defeat_skeleton", "defeat_zombie",
            "eat_cow", "wake_up"]
    assert next_achievement(["collect_wood"], zero) == "place_table"  # its one prerequisite has a skill
    assert next_achievement([], zero) is None  # everything else needs a skill nothing has yet
    assert next_achievement(["collect_wood", "place_table"], [*zero, "place_table"]) == "make_wood_pickaxe"


def test_a_skill_counts_for_the_achievement_its_goal_reaches_only() -> None:
    # collect_stone's skill ends holding a stone: that is neither placing one nor a table or a plant.
    stored = {s.name: s for s in (skill("collect_stone", "collect_stone"), skill("get_wood", "wood"),
                                  skill("pickaxe", "wood_pickaxe"), skill("table", "place_table"))}
    assert sorted(achievement_skills(stored)) == ["collect_stone", "collect_wood", "make_wood_pickaxe",
                                                  "place_table"]
    tried = ["collect_drink", "collect_sapling", "defeat_skeleton", "defeat_zombie", "eat_cow", "wake_up",
             "collect_coal", "make_wood_sword", "make_stone_pickaxe", "make_stone_sword", "place_furnace"]
    assert next_achievement(sorted(achievement_skills(stored)), tried) == "place_stone"
    assert [goal_key(g) for g in ("collect_stone", "place_stone", "make_wood_pickaxe", "place_table")] == [
        "stone", "place_stone", "wood_pickaxe", "place_table"]
    assert list(retrieve(stored, "place_stone", "place a stone", ("collect_stone",))) == ["collect_stone"]


@pytest.mark.slow
def test_learn_stores_only_skills_whose_probes_reach_the_goal_and_resumes(tmp_path: Path) -> None:
    lib = SkillLibrary(tmp_path / "lib")
    cfg = smoke_config(tmp_path / "learn", f"skills_dir={lib.root}", "agents.api=basic",
                       "agents.probe_seeds=[0,1,2,3,4]", "agents.probe_max_steps=150",
                       "agents.probe_repair_retries=0", "llm.replay_only=false")
    llm = ScriptedLLM({"collect_wood": WOOD, "place_table": TABLE_ON_SKILLS})
    client = build_client(cfg.llm, backend=llm)
    lines: list[str] = []

    attempts = learn(cfg, lib, client, tmp_path / "learn", max_achievements=3, say=lines.append)

    # Easiest first: the three without prerequisites, by name; only the good macro is stored.
    assert [a["achievement"] for a in attempts] == ["collect_drink", "collect_sapling", "collect_wood"]
    by_name = {a["achievement"]: a for a in attempts}
    assert by_name["collect_drink"]["goal_rate"] == 0.0 and not by_name["collect_drink"]["stored"]
    assert by_name["collect_wood"]["goal_rate"] >= 0.8 and by_name["collect_wood"]["stored"]
    assert list(lib.code_library().skills) == ["collect_wood"]
    assert len(lines) == 3 and lines[2].startswith("[3] collect_wood:") and "stored" in lines[2]

    # Asked to, a later run attempts a failed achievement again (once), the easiest first.
    learn(cfg, lib, client, tmp_path / "learn", max_achievements=1, say=lines.append, retry_failed=True)
    assert lines[-1].startswith("[1] collect_drink:")

    # A killed run resumes with what the library holds: the attempts made are not repeated. Here the
    # remaining zero-prerequisite ones are marked attempted, so the next is the table, built on the wood.
    for name in ("defeat_skeleton", "defeat_zombie", "eat_cow", "wake_up"):
        lib.record_attempt(name, {"key": f"{llm.model_id}/basic", "stored": False, "goal_rate": 0.0,
                                  "llm_seconds": 0.0})
    attempts = learn(cfg, lib, client, tmp_path / "learn", max_achievements=1, say=lines.append)
    table = {a["achievement"]: a for a in attempts}["place_table"]
    assert lines[-1].startswith("[1] place_table:")
    assert table["prerequisites"] == ["collect_wood"] and table["start_states"] == 5
    assert table["stored"] and table["goal_rate"] >= 0.8
    # Its probes started where the wood skill left the player, and its prompt offered that skill.
    assert "skills.collect_wood(game)" in llm.prompts["place_table"][0]
    stored = lib.code_library().skills["place_table"]
    assert stored.requires["achievements"] == ["collect_wood"]
    assert stored.provenance["calls"] == ["collect_wood"]
    assert "skill_collect_wood" in stored.code  # self-contained: the called skill is linked in
    assert "| collect_wood | yes |" in learn_table(attempts)


def test_skills_learn_rejects_a_bad_limit_in_one_line(tmp_path: Path) -> None:
    proc = cli("skills", "learn", "--library", str(tmp_path / "lib"), "--max-achievements", "0")
    assert_error_line(proc, "--max-achievements must be >= 1")
    assert not (tmp_path / "lib").exists()  # nothing was created for a command that never started
