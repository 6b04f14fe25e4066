"""`rlgpt report` over real summary.json files (written with the real result record, plus the keys the
budget-mark evaluations and the step accounting add): Table 2's statistics, a run without the budget's mark
shown as missing, steps to success, steps by kind, the curves, ablation labels, old summaries, W&B."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from loop_helpers import cli

from rlgpt import layout
from rlgpt.config import load_run_config
from rlgpt.run.records import result_record
from rlgpt.run.report import mark_curve, result_table, steps_to_success_table, table2, write_report

TASK, OTHER = "make_wood_pickaxe", "collect_wood"


def summary(task: str, mode: str, seed: int, final: float, marks: dict[int, float] | None = None,
            *overrides: str, **keys: Any) -> dict[str, Any]:
    """A run's record as `result_record` writes it; `marks` (steps -> test success) as the budget-mark
    evaluations record them, with steps_to_success computed from them the way a reader would."""
    cfg = load_run_config(None, [f"task={task}", f"mode={mode}", f"seed={seed}", *overrides])
    record = result_record(cfg, task, mode, 100_000, {"train": 100_000},
                           {"success_rate": final, "episodes": 20, "split": "test",
                            "achievement_success": {task: final}}, [])
    record.pop("steps_by_kind")  # as an older run wrote it; the tests that show the kinds set them
    if marks is not None:
        record["marks"] = [{"steps": m, "success_rate": r, "achievement_success": {task: r}, "episodes": 20,
                            "split": "test", "source": "checkpoint"} for m, r in sorted(marks.items())]
    return {**record, **keys}


def write_runs(root: Path, records: list[dict[str, Any]]) -> list[Path]:
    dirs = []
    for i, record in enumerate(records):
        d = root / f"run{i}"
        d.mkdir(parents=True)
        (d / layout.SUMMARY_JSON).write_text(json.dumps(record))
        dirs.append(d)
    return dirs


def row(markdown: str, first: str, section: str = "") -> list[str]:
    """The cells of the first table row starting with `first` (in the ``## `section`...`` part)."""
    if section:
        markdown = next(part for part in markdown.split("\n## ") if part.startswith(section))
    line = next(x for x in markdown.splitlines() if x.startswith(f"| {first} |"))
    return [c.strip() for c in line.strip("|").split("|")]


def three_seeds() -> list[dict[str, Any]]:
    return [summary(TASK, "rlgpt", 0, 0.6, {50_000: 0.2, 100_000: 0.5}),
            summary(TASK, "rlgpt", 1, 0.8, {50_000: 0.4, 100_000: 0.7}),
            summary(TASK, "rlgpt", 2, 0.9, {50_000: 0.6, 100_000: 0.9})]


def test_table2_is_mean_std_and_range_over_seeds_at_the_budget(tmp_path: Path) -> None:
    runs = three_seeds()
    # Final results 0.6, 0.8, 0.9: mean 0.767, sample std sqrt(0.07/3) = 0.153.
    assert row(result_table(runs), TASK) == [TASK, "0.77 ± 0.15 (n=3, 0.60-0.90)"]
    # At 100k: the marks 0.5, 0.7, 0.9: mean 0.7, std 0.2; at 50k: 0.2, 0.4, 0.6.
    assert row(result_table(runs, 100_000), TASK) == [TASK, "0.70 ± 0.20 (n=3, 0.50-0.90)"]
    assert row(result_table(runs, 50_000), TASK) == [TASK, "0.40 ± 0.20 (n=3, 0.20-0.60)"]
    # One seed: no std.
    assert row(result_table(runs[:1]), TASK) == [TASK, "0.60 (n=1)"]

    written = write_report(write_runs(tmp_path / "runs", runs), tmp_path / "report", budget=100_000)
    text = written["markdown"].read_text()
    assert "# Results at 100,000 primitive steps" in text
    assert "| make_wood_pickaxe | 0.70 ± 0.20 (n=3, 0.50-0.90) |" in text
    for name in ("table", "marks", "curves"):
        assert written[name].stat().st_size > 5000, name


def test_a_run_without_the_budgets_mark_is_missing_not_substituted(tmp_path: Path) -> None:
    runs = three_seeds()
    runs[2]["marks"] = runs[2]["marks"][:1]  # stopped before 100k: its marks end at 50k
    old = summary(OTHER, "rlgpt", 0, 0.9)  # an older run: no marks at all
    table = table2([*runs, old], 100_000)
    # Only the two seeds with a mark at 100k: 0.5 and 0.7 (not the third seed's 50k mark, nor its final 0.9).
    assert table.rows[0] == [TASK, "0.60 ± 0.14 (n=2, 0.50-0.70) [1]"]
    assert table.rows[1] == [OTHER, "missing [2]"]
    assert "seed 2" in table.notes[0] and "no mark at 100,000 steps (its marks: 50,000)" in table.notes[0]
    assert "no budget-mark evaluations" in table.notes[1]
    markdown = table.markdown()
    assert "[1] make_wood_pickaxe / rlgpt / seed 2" in markdown
    assert "[2] collect_wood / rlgpt / seed 0" in markdown
    # A code-as-policy run (no training, no marks) is missing at a budget too, with its final result said.
    code = table2([summary(TASK, "code", 0, 0.35)], 100_000)
    assert code.rows == [[TASK, "missing [1]"]]
    assert "trains nothing" in code.notes[0] and "0.35" in code.notes[0]
    # A mark not evaluated on test episodes is not reported either.
    runs[0]["marks"][1]["split"] = "validation"
    assert table2(runs[:2], 100_000).rows[0] == [TASK, "0.70 (n=1) [1]"]


def test_steps_to_success_median_over_seeds_and_how_many_reached(tmp_path: Path) -> None:
    runs = three_seeds()
    table = steps_to_success_table(runs)
    # From the marks: 0.5 first at 100k, 100k, 50k -> median 100k (3 of 3); 0.8 and 0.9: only seed 2, at
    # 100k -> the median is "never" (1 of 3).
    assert table.rows == [[TASK, "rlgpt", "100k (3/3)", "never (1/3)", "never (1/3)"]]
    # A recorded steps_to_success is used as it is (seed 2 still from its marks: 50k, 100k, 100k).
    runs[0]["steps_to_success"] = {"0.5": 250_000, "0.8": 500_000, "0.9": None}
    runs[1]["steps_to_success"] = {"0.5": 250_000, "0.8": 1_000_000, "0.9": None}
    assert steps_to_success_table(runs).rows[0][2:] == ["250k (3/3)", "500k (3/3)", "never (1/3)"]
    # An old run without marks is left out and said so.
    old = steps_to_success_table([summary(OTHER, "ppo", 0, 0.1)])
    assert old.rows == [[OTHER, "ppo", "n/a", "n/a", "n/a [1]"]] and "no budget-mark" in old.notes[0]


def test_steps_by_kind_and_curves_from_real_files(tmp_path: Path) -> None:
    runs = three_seeds()
    for i, run in enumerate(runs):
        run["steps_by_kind"] = {"train": 90_000 + i * 3_000, "probe": 600, "reward_check": 60, "prefix": 0,
                                "eval": 4_000, "test_eval": 8_000}
        run["steps_used"] = 94_660 + i * 3_000
    old = summary(OTHER, "ppo", 0, 0.3)
    written = write_report(write_runs(tmp_path / "runs", [*runs, old]), tmp_path / "report")
    text = written["markdown"].read_text()
    kinds = "Env steps by kind"
    assert row(text, TASK, kinds) == [TASK, "rlgpt", "3", "93,000", "600", "60", "0", "4,000", "8,000",
                                      "97,660"]
    assert row(text, OTHER, kinds)[:4] == [OTHER, "ppo", "1", "n/a"] and "no `steps_by_kind`" in text
    # The curve: each mark's mean and min-max over the seeds that have it.
    assert mark_curve(runs) == [(50_000, pytest.approx(0.4), 0.2, 0.6, 3),
                                (100_000, pytest.approx(0.7), 0.5, 0.9, 3)]
    assert written["marks"].stat().st_size > 5000
    # Without marks anywhere there is no curve to draw, and the report says so (an old file is removed).
    again = write_report(write_runs(tmp_path / "old", [old]), tmp_path / "report")
    assert "marks" not in again and not (tmp_path / "report" / layout.MARKS_PNG).exists()
    assert "No run has budget-mark evaluations" in again["markdown"].read_text()


def test_an_old_summary_without_the_new_keys_still_reports(tmp_path: Path) -> None:
    old = {"task": OTHER, "mode": "ppo", "seed": 0, "steps_budget": 4096, "steps_used": 4096,
           "success_rate": 0.25, "achievement_success": {}, "eval_episodes": 4, "iterations": []}
    written = write_report(write_runs(tmp_path / "runs", [old]), tmp_path / "report")
    text = written["markdown"].read_text()
    assert "| collect_wood | 0.25 (n=1) [1] |" in text
    assert "evaluated on unrecorded episodes, not test" in text  # it predates the test split
    assert written["table"].stat().st_size > 1000


def test_ablation_runs_get_their_own_column(tmp_path: Path) -> None:
    runs = [summary(TASK, "rlgpt", 0, 0.9), summary(TASK, "rlgpt", 0, 0.1, None, "agents.env_doc=none"),
            summary(TASK, "rlgpt", 0, 0.4, None, "agents.env_doc=rules", "agents.examples=false"),
            summary(TASK, "code", 0, 0.3, None, "agents.examples=false"),
            summary(TASK, "ppo", 0, 0.2, None, "agents.env_doc=none")]  # ppo has no prompts: no label
    assert runs[1]["prompt_knowledge"] == {"env_doc": "none", "examples": True, "api": "primitives",
                                           "goal_fallback": False}
    table = table2(runs)
    assert table.columns == ["task", "ppo", "code[examples=off]", "rlgpt", "rlgpt[env_doc=none]",
                             "rlgpt[env_doc=rules,examples=off]"]
    assert table.rows[0][1:] == ["0.20 (n=1)", "0.30 (n=1)", "0.90 (n=1)", "0.10 (n=1)", "0.40 (n=1)"]


def test_columns_are_labelled_against_the_agents_defaults_of_today(monkeypatch) -> None:
    # Were examples off by default, a run with them on would be the ablation, and plain runs of today
    # with examples off the plain column.
    from rlgpt.config import AgentConfig
    from rlgpt.run import report

    monkeypatch.setattr(report, "AgentConfig", lambda: AgentConfig(examples=False, env_doc="rules"))
    runs = [summary(TASK, "rlgpt", 0, 0.9), summary(TASK, "rlgpt", 0, 0.5, None, "agents.examples=false",
                                                   "agents.env_doc=rules")]
    assert table2(runs).columns == ["task", "rlgpt", "rlgpt[env_doc=full,examples=on]"]


def test_the_api_ablation_gets_its_own_column_and_basic_ignores_the_fallback(tmp_path: Path) -> None:
    basic = ("agents.api=basic", "agents.goal_fallback=false")
    expert = ("agents.api=expert", "agents.goal_fallback=true")
    runs = [summary(TASK, "rlgpt", 0, 0.9), summary(TASK, "rlgpt", 1, 0.7),
            summary(TASK, "rlgpt", 0, 0.2, None, *basic),
            summary(TASK, "rlgpt", 1, 0.4, None, "agents.api=basic", "agents.goal_fallback=true"),  # no
            # fallback at basic either way
            summary(TASK, "rlgpt", 0, 0.5, None, *expert),
            summary(TASK, "code", 0, 1.0), summary(TASK, "code", 0, 0.0, None, *basic)]
    assert runs[2]["prompt_knowledge"] == {"env_doc": "full", "examples": True, "api": "basic",
                                           "goal_fallback": False}
    # Today's defaults (primitives, no fallback) are the plain column.
    assert runs[0]["prompt_knowledge"] == {"env_doc": "full", "examples": True, "api": "primitives",
                                           "goal_fallback": False}
    table = table2(runs)
    assert table.columns == ["task", "code", "code[api=basic]", "rlgpt", "rlgpt[api=basic]",
                             "rlgpt[api=expert,goal_fallback=on]"]
    assert table.rows[0][1:3] == ["1.00 (n=1)", "0.00 (n=1)"]
    assert table.rows[0][4].startswith("0.30 ± 0.14 (n=2")
    # A summary from before these keys had that time's defaults (expert, fallback on): the expert column;
    # one that names the old level ``skills`` too.
    old = summary(TASK, "rlgpt", 2, 0.5)
    old["prompt_knowledge"] = {"env_doc": "full", "examples": True}
    older = summary(TASK, "rlgpt", 3, 0.5)
    older["prompt_knowledge"] = {"env_doc": "full", "examples": True, "api": "skills", "goal_fallback": True}
    table = table2([*runs[:2], runs[4], old, older])
    assert table.columns == ["task", "rlgpt", "rlgpt[api=expert,goal_fallback=on]"]
    assert table.rows[0][2].startswith("0.50 ± 0.00 (n=3")
    # Each knob alone away from the defaults.
    one = [summary(TASK, "rlgpt", 0, 0.6, None, "agents.api=expert"),
           summary(TASK, "rlgpt", 0, 0.5, None, "agents.goal_fallback=true")]
    assert table2(one).columns == ["task", "rlgpt[api=expert]", "rlgpt[goal_fallback=on]"]


def test_code_that_never_compiled_is_reported_as_unplayed_not_as_unrecorded(tmp_path: Path) -> None:
    cfg = load_run_config(None, [f"task={TASK}", "mode=code", "seed=0"])
    error = "the model's policy code never compiled"
    # What `run_code` writes for a policy that never compiled: an empty report, marks without a split.
    record = result_record(cfg, TASK, "code", 100_000, {}, {}, [], error=error,
                           marks=[{"steps": 50_000, "success_rate": 0.0, "achievement_success": {},
                                   "episodes": 0, "split": None, "source": "final",
                                   "error": "the final policy has no test evaluation"}])
    text = write_report(write_runs(tmp_path / "runs", [record]), tmp_path / "final")["markdown"].read_text()
    assert f"no evaluation episode was played ({error})" in text and "unrecorded" not in text
    text = write_report(write_runs(tmp_path / "runs2", [record]), tmp_path / "mark",
                        budget=50_000)["markdown"].read_text()
    assert "its mark at 50,000 steps has no evaluation (the final policy has no test evaluation)" in text
    assert "None" not in text


def test_crafter_section_at_a_budget_uses_the_marks_achievements(tmp_path: Path) -> None:
    from rlgpt.envs.tasks import ACHIEVEMENTS
    from rlgpt.rl.score import crafter_score

    def crafter_run(seed: int, wood: float) -> dict[str, Any]:
        run = summary("crafter", "ppo", seed, 0.0, {250_000: 0.0})
        run["marks"][0]["achievement_success"] = {**dict.fromkeys(ACHIEVEMENTS, 0.0), "collect_wood": wood}
        return run

    runs = [crafter_run(0, 0.5), crafter_run(1, 0.9), summary("crafter", "ppo", 2, 0.0)]  # the last: no marks
    written = write_report(write_runs(tmp_path / "runs", runs), tmp_path / "report", budget=250_000)
    text = written["markdown"].read_text()
    scores = [crafter_score({**dict.fromkeys(ACHIEVEMENTS, 0.0), "collect_wood": w}) for w in (50.0, 90.0)]
    assert (f"| ppo | {sum(scores) / 2:.2f} | {scores[0]:.2f}-{scores[1]:.2f} | 2 | 250,000 |") in text
    assert "| collect_wood | 70.0% |" in text  # the seeds' mean at the mark, not the final result (0)
    assert "Left out (no result at this budget)" in text and "seed 2" in text
    assert written["crafter"].stat().st_size > 5000


def test_report_cli_budget_and_wandb_tables_offline(tmp_path: Path, monkeypatch) -> None:
    runs = write_runs(tmp_path / "runs", three_seeds())
    monkeypatch.setenv("WANDB_MODE", "offline")
    proc = cli("report", *map(str, runs), "--out", str(tmp_path / "report"), "--budget", "100k", "--wandb",
               "--wandb-project", "rlgpt-test", timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "| make_wood_pickaxe | 0.70 ± 0.20 (n=3, 0.50-0.90) |" in proc.stdout
    offline = list((tmp_path / "report" / "wandb").glob("offline-run-*"))
    assert len(offline) == 1
    media = offline[0] / "files" / "media"
    logged = {p.name.split("_")[0]: json.loads(p.read_text()) for p in media.rglob("*.table.json")}
    assert set(logged) == {"table2", "steps", "writers"}  # table2, steps_to_success, steps_by_kind, writers
    tables = [json.loads(p.read_text()) for p in media.rglob("*.table.json")]
    table2_logged = next(t for t in tables if t["columns"] == ["task", "rlgpt"])
    assert table2_logged["data"] == [[TASK, "0.70 ± 0.20 (n=3, 0.50-0.90)"]]
    assert any(t["columns"][:3] == ["task", "variant", "seeds"] for t in tables)
    images = list(media.rglob("*.png"))
    assert len(images) == 3 and all(p.stat().st_size > 1000 for p in images)  # table, curves, iterations

    bad = cli("report", str(runs[0]), "--out", str(tmp_path / "r2"), "--budget", "lots")
    assert bad.returncode == 2 and "--budget" in bad.stderr
