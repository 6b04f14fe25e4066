"""`rlgpt report RUN_DIR...`: the paper's Table 2 shape (success per task per mode at a step budget) as
Markdown and PNG, plus per-iteration success curves, from the ``summary.json`` every `rlgpt run` writes;
for runs of the Crafter benchmark task, the Crafter score per mode and the Crafter paper's per-achievement
chart (`crafter_section`)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rlgpt.errors import RlgptError
from rlgpt.run import layout, rundir

MODES_ORDER = ("ppo", "code", "rlgpt")


class ReportError(RlgptError, ValueError):
    """A directory given to `rlgpt report` holds no finished run."""


def load_summaries(run_dirs: Sequence[str | Path]) -> list[dict[str, Any]]:
    """The ``summary.json`` of each run directory."""
    out = []
    for d in run_dirs:
        path = Path(d) / layout.SUMMARY_JSON
        if not path.is_file():
            raise ReportError(f"{str(d)!r} holds no summary.json (not a finished `rlgpt run` directory)")
        out.append(json.loads(path.read_text()))
    return out


def _cells(summaries: list[dict[str, Any]]) -> tuple[list[str], list[str], dict[tuple[str, str], str]]:
    tasks = list(dict.fromkeys(s["task"] for s in summaries))
    modes = [m for m in MODES_ORDER if any(s["mode"] == m for s in summaries)]
    modes += [m for m in dict.fromkeys(s["mode"] for s in summaries) if m not in modes]
    cells: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for s in summaries:
        cells.setdefault((s["task"], s["mode"]), []).append(s)
    text = {}
    for key, runs in cells.items():
        rate = sum(r["success_rate"] for r in runs) / len(runs)
        steps = max(r["steps_used"] for r in runs)
        seeds = f", {len(runs)} seeds" if len(runs) > 1 else ""
        text[key] = f"{rate:.2f} ({steps:,d} steps{seeds})"
    return tasks, modes, text


def result_table(summaries: list[dict[str, Any]]) -> str:
    """Markdown: one row per task, one column per mode, cells "success (primitive RL steps used)"."""
    tasks, modes, cells = _cells(summaries)
    lines = ["| task | " + " | ".join(modes) + " |", "|---|" + "---|" * len(modes)]
    for task in tasks:
        lines.append(f"| {task} | " + " | ".join(cells.get((task, m), "-") for m in modes) + " |")
    return "\n".join(lines)


def write_report(run_dirs: Sequence[str | Path], out_dir: str | Path) -> dict[str, Path]:
    """Write the Markdown table, its PNG and the per-iteration curves into `out_dir`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    summaries = load_summaries(run_dirs)
    out = rundir.prepare_run_dir(out_dir)
    tasks, modes, cells = _cells(summaries)
    markdown = result_table(summaries)
    rundir.atomic_write_text(out / layout.TABLE_MD, "# Success per task per mode\n\n" + markdown + "\n")

    fig, ax = plt.subplots(figsize=(2.2 + 2.2 * len(modes), 0.8 + 0.45 * len(tasks)))
    ax.axis("off")
    table = ax.table(cellText=[[cells.get((t, m), "-") for m in modes] for t in tasks], rowLabels=tasks,
                     colLabels=modes, loc="center", cellLoc="center")
    table.scale(1, 1.4)
    ax.set_title("success rate (primitive RL steps used)")
    fig.tight_layout()
    fig.savefig(out / layout.TABLE_PNG, dpi=100)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(6, 4))
    for s in summaries:
        its = s["iterations"]
        ax.plot([it["index"] + 1 for it in its], [it["success_rate"] for it in its], marker="o",
                label=f"{s['task']} / {s['mode']} / seed {s['seed']}")
    ax.set_xlabel("iteration")
    ax.set_ylabel("evaluation success")
    ax.set_ylim(-0.05, 1.05)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / layout.CURVES_PNG, dpi=100)
    plt.close(fig)
    written = {"markdown": out / layout.TABLE_MD, "table": out / layout.TABLE_PNG,
               "curves": out / layout.CURVES_PNG}
    crafter = crafter_section(summaries, out / layout.CRAFTER_PNG)
    if crafter:
        with open(out / layout.TABLE_MD, "a") as f:
            f.write("\n" + crafter + "\n")
        written["crafter"] = out / layout.CRAFTER_PNG
    return written


def crafter_section(summaries: list[dict[str, Any]], png: Path) -> str:
    """For the runs of the Crafter benchmark task: Markdown with the Crafter score per mode (mean and range
    over seeds, from each run's per-achievement success) and per-achievement success, and the paper's
    per-achievement chart at `png` (achievement rates averaged over seeds per mode). "" when no run is one."""
    from rlgpt.envs.tasks import ACHIEVEMENTS, BENCHMARK_TASK
    from rlgpt.rl.evaluate import plot_crafter_achievements
    from rlgpt.rl.score import PAPER_SCORES_1M, crafter_score, percent_rates

    runs: dict[str, list[dict[str, Any]]] = {}
    for s in summaries:
        if s["task"] == BENCHMARK_TASK and s.get("achievement_success"):
            runs.setdefault(s["mode"], []).append(s)
    if not runs:
        return ""
    modes = [m for m in MODES_ORDER if m in runs] + [m for m in runs if m not in MODES_ORDER]
    mean_rates = {m: {a: sum(r["achievement_success"].get(a, 0.0) for r in runs[m]) / len(runs[m])
                      for a in ACHIEVEMENTS} for m in modes}
    lines = ["# Crafter benchmark", "",
             "| mode | Crafter score (mean over seeds) | range | seeds | primitive steps |",
             "|---|---|---|---|---|"]
    for m in modes:
        scores = [crafter_score(percent_rates(r["achievement_success"])) for r in runs[m]]
        steps = max(r["steps_used"] for r in runs[m])
        lines.append(f"| {m} | {sum(scores) / len(scores):.2f} | {min(scores):.2f}-{max(scores):.2f} | "
                     f"{len(scores)} | {steps:,d} |")
    anchors = ", ".join(f"{k} {v}" for k, v in PAPER_SCORES_1M.items())
    lines += ["", f"Paper anchors at 1M steps: {anchors}", "",
              "| achievement | " + " | ".join(modes) + " |", "|---|" + "---|" * len(modes)]
    for a in ACHIEVEMENTS:
        lines.append(f"| {a} | " + " | ".join(f"{100 * mean_rates[m][a]:.1f}%" for m in modes) + " |")
    plot_crafter_achievements(mean_rates, png, "success per achievement, mean over seeds")
    return "\n".join(lines)
