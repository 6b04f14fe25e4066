"""bench/loop_matrix.py's readers of run directories: phase times and the fast agent's macro shares."""

from __future__ import annotations

import json
from pathlib import Path

from bench.loop_matrix import llm_seconds, macro_shares


def candidate(first_try: bool | None, goal_rate: float | None) -> dict:
    """A fast.json candidate: None first_try = never compiled."""
    if first_try is None:
        return {"code": None, "first_try": False, "probe": None}
    return {"code": "def m(game): ...", "first_try": first_try, "probe": {"goal_rate": goal_rate}}


def test_macro_shares_count_every_iteration_and_planner_subtask(tmp_path: Path) -> None:
    it0 = tmp_path / "run" / "iter_000"
    sub = tmp_path / "run" / "sub_00_collect_wood" / "iter_000"
    for d in (it0, sub):
        d.mkdir(parents=True)
    revision = {**candidate(True, 1.0), "index": 2, "revises": 1}
    worse = {**candidate(True, 0.0), "index": 2, "revises": 1}
    (it0 / "fast.json").write_text(json.dumps({"macros": [
        {"candidates": [candidate(True, 1.0), candidate(False, 0.5)]},
        {"best": 2, "candidates": [candidate(None, None), candidate(True, 0.0), revision]}]}))
    (sub / "fast.json").write_text(json.dumps({"macros": [
        {"best": 0, "candidates": [candidate(True, None), candidate(True, 0.0), worse]}]}))
    assert macro_shares([tmp_path / "run"]) == {
        "candidates": 6, "compiled_first_try": 4, "compiled_after_repair": 5, "goal_in_some_probe": 2,
        "goal_in_every_probe": 1, "revisions": 2, "revisions_better": 1, "revisions_kept": 1}


def test_llm_seconds_sum_one_iterations_llm_phases(tmp_path: Path) -> None:
    lines = [{"iteration": 0, "phase": p, "wall_s": s, "task": "t"} for p, s in
             [("slow", 2.0), ("fast", 3.0), ("probe", 0.5), ("fast", 1.0), ("train", 100.0), ("critic", 4.0)]]
    lines.append({"iteration": 1, "phase": "slow", "wall_s": 7.0, "task": "t"})
    path = tmp_path / "phases.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))
    assert llm_seconds(path) == 10.5 and llm_seconds(path, 1) == 7.0
