"""`--mode ppo` (real training, no LLM) and `--mode code` (the model's policy code, replayed from a recorded
reply, played with no RL) write comparable result records, and `rlgpt report` renders them."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from crafter_helpers import assert_replay, chop_source, fenced
from loop_helpers import assert_error_line, cli, record, smoke_config

from rlgpt.agents.fast import FastAgent
from rlgpt.llm.config import build_client
from rlgpt.run.baselines import chain_goals, policy_subaction
from rlgpt.run.ledger import STEP_KINDS
from rlgpt.run.report import result_table
from rlgpt.run.runner import run

CHOP = fenced(chop_source("policy", steps=200))
RECORD_FIELDS = {"task", "mode", "seed", "steps_budget", "steps_used", "success_rate", "achievement_success",
                 "eval_episodes", "iterations", "best", "run_dir"}


@pytest.mark.slow
def test_ppo_and_code_records_are_comparable_and_reported(tmp_path: Path) -> None:
    ppo_dir, code_dir = tmp_path / "ppo", tmp_path / "code"
    ppo = run(smoke_config(ppo_dir, "mode=ppo"))
    assert ppo["mode"] == "ppo" and ppo["steps_used"] >= ppo["steps_budget"] == 4096
    assert (ppo_dir / "ppo" / "train" / "checkpoint_p0").is_dir()
    assert not (ppo_dir / "llm_cache").exists()  # no LLM in the PPO baseline

    cfg = smoke_config(code_dir, "mode=code")
    fast = FastAgent(build_client(cfg.llm), cfg.agents)
    record(cfg, fast.macro_messages(cfg.task, policy_subaction(cfg.task)), CHOP, fast._sampling(0))
    code = run(cfg)
    written = json.loads((code_dir / "code" / "fast.json").read_text())
    assert "yield \"do\"" in written["source"] and written["candidates"][0]["probe"]["calls"]
    played = json.loads((code_dir / "code" / "training.json").read_text())
    assert played["report"]["episodes"] == cfg.eval_episodes
    assert played["report"]["macro_stats"]["policy"]["calls"] >= cfg.eval_episodes
    # A macro that walks to trees and hits them collects wood in these worlds.
    assert code["success_rate"] > 0 and code["played_steps"] > 0
    # The code baseline trains nothing: its charged steps are its probes; its played episodes are the test.
    probes = sum(c["probe"]["env_steps"] for c in written["candidates"] if c["probe"])
    assert code["steps_by_kind"] == {**dict.fromkeys(STEP_KINDS, 0), "probe": probes,
                                     "test_eval": code["played_steps"]}
    assert code["steps_used"] == probes > 0
    assert ppo["steps_by_kind"]["train"] == ppo["steps_used"] and ppo["steps_by_kind"]["test_eval"] > 0

    for record_ in (ppo, code):
        assert RECORD_FIELDS <= set(record_)
        assert record_["eval_split"] == "test"  # no selection in a baseline: its one policy, on test
        assert set(record_["achievement_success"]) == set(ppo["achievement_success"])
    table = result_table([ppo, code])
    assert table.splitlines()[0] == "| task | ppo | code |"
    assert f"| collect_wood | {ppo['success_rate']:.2f} (n=1) | {code['success_rate']:.2f} (n=1) |" in table

    proc = cli("report", str(ppo_dir), str(code_dir), "--out", str(tmp_path / "report"), "--wandb",
               "--wandb-project", "rlgpt-test", timeout=600)
    assert proc.returncode == 0, proc.stderr
    markdown = (tmp_path / "report" / "results.md").read_text()
    assert "| collect_wood |" in markdown and "ppo" in markdown and "code" in markdown
    for png in ("results.png", "iterations.png"):
        assert (tmp_path / "report" / png).stat().st_size > 1000
    # One replay per mode embedded: the ppo run's network (found through its summary), the code run's macro.
    for mode, policy in (("ppo", str(ppo_dir / "ppo" / "train")), ("code", "code: policy")):
        embedded = re.search(rf"!\[{mode}\]\(replay_{mode}.gif\)\n\nTest episode 0 \(env seed \d+\), "
                             rf"(\d+) steps, (?:no )?success; played by {re.escape(policy)}\.", markdown)
        assert embedded, markdown
        assert_replay(tmp_path / "report" / f"replay_{mode}.gif", int(embedded.group(1)))
    # W&B (offline) got each replay as a video.
    offline = list((tmp_path / "report" / "wandb").glob("offline-run-*"))
    assert len(offline) == 1
    videos = sorted(p.name.split("_")[1] for p in (offline[0] / "files" / "media").rglob("replay_*.gif"))
    assert videos == ["code", "ppo"], videos

    proc = cli("replay", str(code_dir), "--episode", "2", "--out", str(tmp_path / "code.gif"), timeout=300)
    assert proc.returncode == 0, proc.stderr
    steps = int(re.search(r"of code: policy: (\d+) steps \(policy \1\)", proc.stdout).group(1))
    assert f"replay: {tmp_path / 'code.gif'} ({steps} frames)" in proc.stdout
    assert_replay(tmp_path / "code.gif", steps)


def test_report_of_a_directory_without_a_run_is_one_error_line(tmp_path: Path) -> None:
    assert_error_line(cli("report", str(tmp_path)), "summary.json")


def test_ppo_progress_pays_the_task_s_recipe_chain(tmp_path: Path) -> None:
    # The baseline that gets what rlgpt's plan progress reward gets, from crafter's recipes instead of the
    # slow agent: the prerequisites in order, never the task's own target (its reward pays that), none for
    # the benchmark (crafter's reward pays every achievement already).
    assert chain_goals("make_stone_pickaxe") == ("collect_wood", "place_table", "make_wood_pickaxe",
                                                 "collect_stone")
    assert chain_goals("place_table+make_wood_pickaxe") == ("collect_wood",)
    assert chain_goals("collect_wood") == () and chain_goals("crafter") == ()
    plain = run(smoke_config(tmp_path / "plain", "mode=ppo", "task=place_table", "steps=2048"))
    shaped = run(smoke_config(tmp_path / "chain", "mode=ppo", "task=place_table", "steps=2048",
                              "ppo_progress=true"))
    assert plain["rewards"] == ["task"] and shaped["rewards"] == ["task", "chain"]
    jobs = [json.loads((tmp_path / name / "ppo" / "train" / "job.json").read_text())
            for name in ("plain", "chain")]
    assert "progress_goals" not in jobs[0] and jobs[1]["progress_goals"] == ["collect_wood"]
