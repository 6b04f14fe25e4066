"""Who wrote the kept macros (model, library or expert code) reaches ``summary.json``, the progress line and
`rlgpt report`, through the real loop with recorded replies (loop_helpers), and a ``--mode code`` run
whose kept policy is the trusted goal macro is marked as expert code."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from loop_helpers import record, smoke_config, write_step

from rlgpt import layout
from rlgpt.agents.fast import FastAgent
from rlgpt.agents.replies import Decomposition, SubAction
from rlgpt.config import load_run_config
from rlgpt.llm.config import build_client
from rlgpt.run.baselines import policy_subaction
from rlgpt.run.executor import TrainJob
from rlgpt.run.loop import recorded_rewards
from rlgpt.run.records import IterationRecord, kept_writers, result_record, training_rewards
from rlgpt.run.report import table2, write_report, writers_table
from rlgpt.run.runner import run

TASK = "collect_wood"
PLAN = Decomposition((SubAction("chop", "collect wood", "code", "wood", "fixed"),
                      SubAction("table", "place a table", "code", "place_table", "fixed")))


def choice(name: str, writer: str | None, fallback: bool = False) -> dict:
    """A fast.json macro choice whose kept candidate `writer` wrote (None: a file from before the label,
    with only the ``fallback`` flag)."""
    candidate = {"index": 0, "code": f"def {name}(game):\n    yield 'noop'\n", "fallback": fallback,
                 "attempts": [], "first_try": True, "probe": None, "revises": None}
    if writer is not None:
        candidate["written_by"] = writer
    return {"subaction": name, "best": 0, "candidates": [candidate],
            **({"written_by": writer} if writer is not None else {})}


def prefill(it_dir: Path, success: float, macros: list[dict]) -> None:
    """An iteration whose slow and fast steps and training finished (as a killed run leaves them)."""
    write_step(it_dir / "slow.json", {"new": True, "feedback": "none", "decomposition": PLAN.to_dict()})
    write_step(it_dir / "fast.json", {
        "feedback": "none", "macros": macros, "reward": {"code": None, "attempts": []},
        "setup": {"horizon": 200, "observation": ["view", "vector"], "macros": []},
        "reply": {"macros": [{"name": m["subaction"], "code": m["candidates"][0]["code"], "description": ""}
                             for m in macros if m["best"] is not None],
                  "reward_code": "", "observation": ["view", "vector"], "horizon": 200}})
    write_step(it_dir / "probes.json", [])
    (it_dir / "reward.py").write_text("def reward(game, prev):\n    return 0.0\n")
    report = {"task": TASK, "episodes": 4, "env_steps": 1024, "success_rate": success,
              "achievement_success": {TASK: success}, "mean_episode_steps": 200.0, "mean_return": success,
              "deterministic": False, "macro_stats": {}, "traces": []}
    write_step(it_dir / layout.TRAINING_JSON, {"ok": True, "error": "", "steps": 1024, "wall_time_s": 1.0,
                                               "success_rate": success, "report": report, "run_dir": "x"})


def test_kept_writers_reads_the_label_and_older_files_fallback_flag() -> None:
    fast = {"macros": [choice("a", "model"), choice("b", "library"), choice("c", None, fallback=True),
                       choice("d", None), {"subaction": "e", "best": None, "candidates": []}]}
    assert kept_writers(fast) == {"a": "model", "b": "library", "c": "expert", "d": "model"}
    assert kept_writers(choice("policy", "expert")) == {"policy": "expert"}  # --mode code's one choice
    # An iteration's reply names the macros it trained with: a kept choice it left out carried nothing.
    trained = {**fast, "reply": {"macros": [{"name": "a", "code": "", "description": ""}]}}
    assert kept_writers(trained) == {"a": "model"}


def test_the_summary_the_progress_line_and_the_report_say_who_wrote_the_code(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    mixed, own = tmp_path / "mixed", tmp_path / "own"
    summaries = []
    for run_dir, writers in ((mixed, ("model", "expert")), (own, ("model", "library"))):
        cfg = smoke_config(run_dir, "max_outer=1", "max_inner=1", f"task={TASK}", "success_threshold=0.5")
        prefill(run_dir / "iter_000", 0.75, [choice("chop", writers[0]), choice("table", writers[1])])
        summaries.append(run(cfg))
    err = capsys.readouterr().err

    mixed_summary, own_summary = summaries
    assert mixed_summary["iterations"][0]["written_by"] == {"chop": "model", "table": "expert"}
    assert mixed_summary["written_by"] == {"model": 1, "library": 0, "expert": 1}
    assert mixed_summary["own_code_share"] == 0.5 and mixed_summary["expert_code"] is True
    assert own_summary["written_by"] == {"model": 1, "library": 1, "expert": 0}
    assert own_summary["own_code_share"] == 1.0 and own_summary["expert_code"] is False
    assert json.loads((mixed / layout.SUMMARY_JSON).read_text())["written_by"] == mixed_summary["written_by"]
    # The progress line, from the fast step on.
    assert "code model 1/2, expert 1/2 (EXPERT CODE)" in err and "code model 1/2, library 1/2" in err

    # Different runs of one cell: the cell says that one of them used expert code.
    for s, d in zip(summaries, (mixed, own), strict=True):
        s["run_dir"] = str(d)
    cell = table2(summaries).rows[0][1]
    assert cell.endswith("EXPERT CODE in 1 [1]")
    writers = writers_table(summaries)
    # Prefilled trainings left no train_job.json: what their rewards added up is not recorded.
    assert writers.rows == [[TASK, "rlgpt", "2", "2", "1", "1", "0.75", "not recorded 2", "1/2 EXPERT CODE"]]
    text = write_report([mixed, own], tmp_path / "report")["markdown"].read_text()
    assert "used expert code (kept macros of the reported policy: model 1, expert 1)" in text
    assert "| model+library share |" in text

    # A run recorded before the summary said so: the report reads its iterations' fast.json.
    old = json.loads((own / layout.SUMMARY_JSON).read_text())
    for key in ("written_by", "own_code_share", "expert_code"):
        old.pop(key)
    (own / layout.SUMMARY_JSON).write_text(json.dumps(old))
    assert writers_table([json.loads((own / layout.SUMMARY_JSON).read_text()) | {"run_dir": str(own)}]
                         ).rows[0][3:] == ["1", "1", "0", "1.00", "not recorded 1", "0/1"]


@pytest.mark.parametrize("api", ["expert", "primitives"])
def test_a_code_baseline_whose_policy_is_the_goal_macro_is_marked_expert(tmp_path: Path, api: str) -> None:
    # The model's policy never reaches the goal; the trusted goal macro (expert code at any level) does.
    cfg = smoke_config(tmp_path, "mode=code", f"task={TASK}", f"agents.api={api}",
                       "agents.goal_fallback=true", "eval_episodes=2",
                       "agents.samples=1", "agents.probe_repair_retries=0")
    fast = FastAgent(build_client(cfg.llm), cfg.agents)
    idle = "```python\ndef policy(game):\n    for i in range(3):\n        yield \"noop\"\n```"
    record(cfg, fast.macro_messages(cfg.task, policy_subaction(cfg.task)), idle, fast._sampling(0))
    summary = run(cfg)
    assert summary["written_by"] == {"model": 0, "library": 0, "expert": 1}
    assert summary["expert_code"] is True and summary["own_code_share"] == 0.0
    written = json.loads((tmp_path / layout.CODE_DIR / layout.FAST_JSON).read_text())
    assert written["written_by"] == "expert" and "game.collect(" in written["source"]
    summary["run_dir"] = str(tmp_path)
    assert "EXPERT CODE in 1" in table2([summary]).rows[0][1]


def test_the_summary_and_the_report_say_which_rewards_trained_the_reported_policy(tmp_path: Path) -> None:
    cfg = load_run_config(None, [f"task={TASK}"])
    job = TrainJob(cfg.train, "def reward(game, prev):\n    return 0.0\n", progress_goals=("sapling",))
    assert training_rewards(job.to_dict()) == ["task", "plan", "model"]
    assert training_rewards(dataclasses.replace(job, reward_code="").to_dict()) == ["task", "plan"]
    assert training_rewards(dataclasses.replace(job, progress_goals=()).to_dict()) == ["task", "model"]
    off = dataclasses.replace(job, config=dataclasses.replace(cfg.train, progress_reward=0.0))
    assert training_rewards(off.to_dict()) == ["task", "model"]  # goals named, but the reward switched off
    it_dir = tmp_path / "iter_000"
    assert recorded_rewards(it_dir) is None
    write_step(it_dir / layout.TRAIN_JOB_JSON, job.to_dict())
    assert recorded_rewards(it_dir) == ["task", "plan", "model"]
    iterations = [IterationRecord(index=i, dir=f"iter_00{i}", rewards=r)
                  for i, r in enumerate((["task", "plan"], ["task", "plan", "model"]))]
    summaries = [result_record(cfg, TASK, "rlgpt", 100, {"train": 10}, {}, iterations, best=best)
                 for best in ("iter_000", "iter_001")]
    assert [s["rewards"] for s in summaries] == [["task", "plan"], ["task", "plan", "model"]]
    assert writers_table(summaries).rows[0][-2] == "task+plan 1, task+plan+model 1"
