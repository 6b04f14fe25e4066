"""The skill library (persistent, locked writes, lookup by task) and the planner path: a plan whose
subtasks are taken from the library and played as one chain (real trained policies, real Crafter)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from loop_helpers import json_sampling, record, role_schema, smoke_config

from rlgpt.agents.planner import Planner
from rlgpt.config import builtin_config_path, load_config
from rlgpt.llm.config import build_client
from rlgpt.rl.train import train
from rlgpt.rl.worker_config import worker_config
from rlgpt.run.chain import run_chain
from rlgpt.run.runner import run, uses_planner
from rlgpt.run.skills import SkillLibrary

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """A real (tiny) trained policy on collect_wood."""
    run_dir = tmp_path_factory.mktemp("skills") / "train"
    cfg = load_config(builtin_config_path("smoke.yaml"), [f"run_dir={run_dir}", "steps=2048"])
    assert train(cfg).status == 0
    return run_dir


def test_library_stores_finds_and_describes_skills(tmp_path: Path, trained: Path) -> None:
    library = SkillLibrary(tmp_path / "lib")
    assert library.best("collect_wood") is None and library.describe() == {}
    weak = library.add("collect_wood", 0.1, 2048, {"run_dir": "a", "iteration": "iter_000"}, trained)
    strong = library.add("collect_wood", 0.6, 4096, {"run_dir": "b", "iteration": "iter_001"}, trained,
                         [{"name": "m", "description": "", "code": "def m(game):\n    yield 'noop'\n"}])
    # A second library object on the same directory (another run) sees both entries.
    again = SkillLibrary(tmp_path / "lib")
    assert {s.success_rate for s in again.entries("collect_wood")} == {0.1, 0.6}
    best = again.best("collect_wood", min_success=0.2)
    assert best is not None and best.path == strong.path and best.provenance["iteration"] == "iter_001"
    assert again.best("collect_wood", min_success=0.7) is None and again.best("place_table") is None
    assert (Path(strong.path) / "policy" / "config.json").is_file()
    assert list((Path(weak.path) / "policy").glob("checkpoint_p0/checkpoint_*.pth"))
    assert again.describe() == {"collect_wood": "trained policy, success 60% (m)"}
    assert not list((tmp_path / "lib").glob("*/.*.tmp"))


def test_readers_skip_staging_and_corrupt_entries(tmp_path: Path, trained: Path, capsys) -> None:
    library = SkillLibrary(tmp_path / "lib")
    good = library.add("collect_wood", 0.5, 2048, {"run_dir": "a", "iteration": "iter_000"}, trained)
    entry = Path(good.path)
    # A writer killed mid-add leaves its staging directory, complete-looking skill.json and all.
    shutil.copytree(entry, entry.parent / ".20990101-000000-deadbeef.tmp")
    damages = {
        "bad_json": lambda d: (d / "skill.json").write_text("{not json"),
        "missing_fields": lambda d: (d / "skill.json").write_text(json.dumps({"task": "collect_wood"})),
        "wrong_types": lambda d: (d / "skill.json").write_text(json.dumps(
            {**json.loads((d / "skill.json").read_text()), "success_rate": "high"})),
        "no_policy": lambda d: shutil.rmtree(d / "policy"),
        "no_checkpoint": lambda d: [p.unlink() for p in (d / "policy").glob("checkpoint_p0/*.pth")],
    }
    for name, damage in damages.items():
        shutil.copytree(entry, entry.parent / name)
        damage(entry.parent / name)
    capsys.readouterr()

    again = SkillLibrary(tmp_path / "lib")
    assert [s.path for s in again.entries()] == [good.path]
    found = again.best("collect_wood")
    assert found is not None and found.path == good.path
    warnings = [line for line in capsys.readouterr().err.splitlines() if line.startswith("rlgpt: warning:")]
    for name in damages:
        assert any(f"/{name}'" in line for line in warnings), (name, warnings)
    assert not any(".tmp" in line for line in warnings)  # unfinished, not corrupt: skipped silently


def test_planner_chain_takes_skills_from_the_library(tmp_path: Path, trained: Path) -> None:
    library = SkillLibrary(tmp_path / "lib")
    for task in ("collect_wood", "place_table"):
        library.add(task, 0.5, 2048, {"run_dir": str(trained), "iteration": "test"}, trained)
    run_dir = tmp_path / "run"
    cfg = smoke_config(run_dir, "task=place_table", "planner_min_chain=2", f"skills_dir={tmp_path / 'lib'}")
    assert uses_planner(cfg)
    planner = Planner(build_client(cfg.llm), cfg.agents)
    plan = {"subtasks": [{"name": "collect_wood", "description": "get wood", "reuse_skill": "collect_wood"},
                         {"name": "place_table", "description": "place it", "reuse_skill": "place_table"}]}
    record(cfg, planner.messages(cfg.task, library.describe(cfg.skill_threshold)), plan, json_sampling(cfg),
           role_schema("planner"))

    summary = run(cfg)

    assert json.loads((run_dir / "plan.json").read_text())["plan"] == plan
    for i, task in enumerate(("collect_wood", "place_table")):
        choice = json.loads((run_dir / f"sub_{i:02d}_{task}" / "skill.json").read_text())
        assert choice["source"] == "library" and choice["skill"]["task"] == task and choice["steps"] == 0
    chain = json.loads((run_dir / "chain.json").read_text())
    assert chain["chain"] == ["collect_wood", "place_table"] and chain["episodes"] == cfg.eval_episodes
    assert 0 <= chain["mean_stages_completed"] <= 2
    assert not list(run_dir.glob("iter_*"))  # nothing was trained: both skills came from the library
    assert summary["best"] == "chain" and summary["steps_used"] == 0 and summary["plan"] == chain["chain"]
    assert summary["success_rate"] == chain["success_rate"]


def test_chain_hands_over_when_a_skill_reaches_its_goal(tmp_path: Path, trained: Path) -> None:
    library = SkillLibrary(tmp_path / "lib")
    wood = library.add("collect_wood", 0.5, 2048, {}, trained)
    result = run_chain([wood, wood], "collect_wood", episodes=3, episode_length=300, seed=0)
    # The first skill's goal is the task: exactly the episodes where wood is collected end after stage 1.
    assert result["mean_stages_completed"] == result["success_rate"] and result["episodes"] == 3
    assert result["success_rate"] == result["achievement_success"]["collect_wood"]


def test_chain_start_pool_keeps_states_where_every_skill_reached_its_goal(tmp_path: Path,
                                                                         trained: Path) -> None:
    import torch

    from rlgpt.run.chain import chain_start_pool

    torch.manual_seed(0)  # the policy samples its actions
    wood = SkillLibrary(tmp_path / "lib").add("collect_wood", 0.5, 2048, {}, trained)
    # A 2,048-step policy is weak and varies run to run (Sample Factory is asynchronous): 10 episodes once
    # found no wood; 40 bound the test without depending on how well this training went.
    found = chain_start_pool([wood], size=2, max_steps=1000, seed=0, max_episodes=40)
    assert 1 <= found["reached"] == len(found["states"]) <= 2 and found["episodes"] <= 40
    assert found["steps"] >= found["episodes"]  # every step played is counted
    for state in found["states"]:
        assert state.player.achievements["collect_wood"] > 0 and state.player.health > 0


def test_a_later_subtask_trains_with_the_earlier_skills_policy_as_an_option(tmp_path: Path,
                                                                            trained: Path) -> None:
    from loop_helpers import write_step

    from rlgpt.agents.replies import Decomposition, SubAction

    library = SkillLibrary(tmp_path / "lib")
    wood = library.add("collect_wood", 0.5, 2048, {"run_dir": str(trained), "iteration": "test"}, trained)
    run_dir = tmp_path / "run"
    cfg = smoke_config(run_dir, "task=place_table", "planner_min_chain=2", f"skills_dir={tmp_path / 'lib'}",
                       "chain_starts=0")
    planner = Planner(build_client(cfg.llm), cfg.agents)
    plan = {"subtasks": [{"name": "collect_wood", "description": "get wood", "reuse_skill": "collect_wood"},
                         {"name": "place_table", "description": "place it", "reuse_skill": ""}]}
    record(cfg, planner.messages(cfg.task, library.describe(cfg.skill_threshold)), plan, json_sampling(cfg),
           role_schema("planner"))
    # The second subtask's LLM steps as a finished iteration left them: only its training runs here.
    it_dir = run_dir / "sub_01_place_table" / "iter_000"
    decomposition = Decomposition((SubAction("table", "get wood, place a table", "rl", "", "learn it"),))
    write_step(it_dir / "slow.json", {"new": True, "feedback": "none",
                                      "decomposition": decomposition.to_dict()})
    setup = {"horizon": 200, "observation": ["view", "vector"]}
    write_step(it_dir / "fast.json", {"feedback": "none", "macros": [],
                                      "reward": {"code": None, "attempts": []},
                                      "setup": {**setup, "macros": []},
                                      "reply": {**setup, "macros": [], "reward_code": ""}})
    write_step(it_dir / "probes.json", [])
    (it_dir / "reward.py").write_text("")
    write_step(it_dir / "critic.json", {"by": "critic", "target": "done", "problems": [], "suggestions": []})

    summary = run(cfg)

    sf_config = json.loads((it_dir / "train" / "config.json").read_text())
    # The wood skill is an action of this training.
    assert worker_config(sf_config).train.options == (str(wood.policy_dir),)
    # The iteration's evaluation sampled the trained policy, option included (chosen all but surely).
    report = json.loads((it_dir / "train" / "result.json").read_text())["eval"]
    assert report["option_stats"]["collect_wood"]["calls"] > 0
    choice = json.loads((run_dir / "sub_01_place_table" / "skill.json").read_text())
    assert choice["source"].startswith("trained") and summary["plan"] == ["collect_wood", "place_table"]
    # The chain's evaluation played the trained table policy, options included, after the wood skill.
    assert json.loads((run_dir / "chain.json").read_text())["episodes"] == cfg.eval_episodes


def test_contained_chain_plays_as_in_process_and_its_failure_is_a_record(tmp_path: Path,
                                                                          trained: Path) -> None:
    """Skill chains run generated macros, so the loop plays them in a contained child (issue 13): the
    same episodes as in process; a child that fails (here: stopped by a 10 ms wall clock, against the
    seconds that loading a policy and playing 400 steps take) is a 0-success record with the error, and
    the loop's process goes on."""
    from rlgpt.macro.contain import ContainLimits
    from rlgpt.run.chain import contained_run_chain, contained_start_pool

    wood = SkillLibrary(tmp_path / "lib").add("collect_wood", 0.5, 2048, {}, trained)
    result = contained_run_chain([wood], "collect_wood", episodes=2, episode_length=200, seed=0)
    assert result["episodes"] == 2 and "error" not in result
    assert result["chain"] == ["collect_wood"] and 0 <= result["success_rate"] <= 1
    starved = ContainLimits(cpu_seconds=0, wall_seconds=0.01)
    failed = contained_run_chain([wood], "collect_wood", episodes=2, episode_length=200, seed=0,
                                 limits=starved)
    assert failed["success_rate"] == 0.0 and failed["episodes"] == 0
    assert "the chain's process failed: [timeout]" in failed["error"]
    pool = contained_start_pool([wood], size=1, max_steps=200, seed=0, max_episodes=2, limits=starved)
    assert pool["states"] == [] and pool["steps"] == 0 and "failed" in pool["error"]
