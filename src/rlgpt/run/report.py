"""`rlgpt report RUN_DIR...`: what a paper reports, from the ``summary.json`` every `rlgpt run` writes.

- **Table 2** (the RL-GPT paper's shape): one row per task, one column per mode (and prompt-knowledge
  ablation, `variant`), each cell the test success mean ± standard deviation over seeds with the number of
  seeds and their range, at a step budget: ``budget=None`` takes each run's final result (``success_rate``,
  on test episodes), ``budget=N`` each run's budget-mark evaluation at exactly N primitive steps (``marks``).
  A run without a mark at N is left out of its cell and named in a footnote with the reason; nothing stands
  in for it.
- **Steps to success**: per task and variant, the primitive steps at which a run's budget-mark evaluations
  first reached 0.5, 0.8 and 0.9 (``steps_to_success``, else computed from ``marks``), the median over seeds
  (a seed that never reached it counts as never, so the median is a number only when more than half did)
  and how many seeds reached it.
- **Steps by kind**: the mean over seeds of every kind of env step a run took (``steps_by_kind``: train,
  probe, reward check, chain prefix, evaluation, test evaluation) and ``steps_used``.
- **Success vs steps** (PNG): per task, one line per variant through its budget marks, the mean over
  seeds with the min-max band.
- For runs of the Crafter benchmark task, the Crafter score per variant and the Crafter paper's
  per-achievement chart (`crafter_section`), at the same budget.

Summaries written before these keys existed are read as they are: no ``marks`` (shown as missing at a
budget, absent from the curves), no ``steps_by_kind`` ("n/a"), no ``prompt_knowledge`` (the full prompts).
With ``wandb_project`` the same tables go to one W&B run as ``wandb.Table`` and the PNGs as images
(`rlgpt.tracking.log_report_to_wandb`).
"""

from __future__ import annotations

import json
import math
import re
import statistics
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlgpt import layout, rundir
from rlgpt.config import AgentConfig
from rlgpt.errors import RlgptError
from rlgpt.macro.api import DEPRECATED_LEVELS
from rlgpt.run.ledger import STEP_KINDS  # the order the steps table shows them (others a run reports follow)
from rlgpt.run.records import WRITERS, RunSummary, kept_writers, writer_counts

MODES_ORDER = ("ppo", "code", "rlgpt")
THRESHOLDS = ("0.5", "0.8", "0.9")
"""The success levels of the steps-to-success table (keys of ``steps_to_success``)."""
LLM_MODES = ("rlgpt", "code")
"""Modes whose results depend on the prompts (the prompt-knowledge label applies to them only)."""


Summaries = Sequence[RunSummary | Mapping[str, Any]]
"""Runs' summaries as the report's tables take them: records, or ``summary.json``'s dicts (`typed`)."""


class ReportError(RlgptError, ValueError):
    """A directory given to `rlgpt report` holds no finished run."""


def typed(summaries: Summaries) -> list[RunSummary]:
    """`summaries` as records (a dict read as `RunSummary.from_dict`)."""
    return [s if isinstance(s, RunSummary) else RunSummary.from_dict(s) for s in summaries]


def load_summaries(run_dirs: Sequence[str | Path]) -> list[RunSummary]:
    """The ``summary.json`` of each run directory (``run_dir`` set to the directory when it lacks one)."""
    out = []
    for d in run_dirs:
        path = Path(d) / layout.SUMMARY_JSON
        if not path.is_file():
            raise ReportError(f"{str(d)!r} holds no summary.json (not a finished `rlgpt run` directory)")
        try:
            summary = RunSummary.read(path)
        except json.JSONDecodeError as exc:
            raise ReportError(f"{str(path)!r} is not valid JSON: {exc}") from None
        if summary.run_dir is None:
            summary.run_dir = str(d)
        out.append(summary)
    return out


# -- grouping -------------------------------------------------------------------------------------------

LEGACY_KNOWLEDGE = {"api": "expert", "goal_fallback": True}
"""What a summary recorded before ``api`` / ``goal_fallback`` were in its ``prompt_knowledge`` had: the
defaults of that time (expert code offered)."""


def variant(summary: RunSummary) -> str:
    """A run's column: its mode, with the agents' ablation knobs that differ from today's defaults
    (`rlgpt.config.AgentConfig`: ``rlgpt[env_doc=none,examples=off]``, ``code[api=basic]``,
    ``rlgpt[api=expert,goal_fallback=on]``); a summary without ``api``/``goal_fallback`` (they came later)
    had `LEGACY_KNOWLEDGE`, and ``ppo`` has no agents. ``goal_fallback`` is not labelled at ``api: basic``:
    there is no fallback there either way, so those runs share one column. ``skills``, the old name of
    ``expert``, reads as ``expert``."""
    mode = summary.mode
    knowledge = {**LEGACY_KNOWLEDGE, **(summary.prompt_knowledge or {})}
    defaults = AgentConfig()
    parts = []
    if mode in LLM_MODES:
        env_doc = knowledge.get("env_doc", defaults.env_doc)
        if env_doc != defaults.env_doc:
            parts.append(f"env_doc={env_doc}")
        examples = bool(knowledge.get("examples", defaults.examples))
        if examples != defaults.examples:
            parts.append(f"examples={'on' if examples else 'off'}")
        api = DEPRECATED_LEVELS.get(knowledge["api"], knowledge["api"])
        if api != defaults.api:
            parts.append(f"api={api}")
        fallback = bool(knowledge["goal_fallback"])
        if api != "basic" and fallback != defaults.goal_fallback:
            parts.append(f"goal_fallback={'on' if fallback else 'off'}")
    return f"{mode}[{','.join(parts)}]" if parts else mode


def _order(summaries: list[RunSummary]) -> tuple[list[str], list[str]]:
    """Tasks in first-seen order; variants by `MODES_ORDER`, plain mode before its ablations."""
    tasks = list(dict.fromkeys(s.task for s in summaries))
    names = list(dict.fromkeys(variant(s) for s in summaries))

    def key(name: str) -> tuple[int, int, int]:
        mode = name.split("[", 1)[0]
        rank = MODES_ORDER.index(mode) if mode in MODES_ORDER else len(MODES_ORDER)
        return rank, "[" in name, names.index(name)

    return tasks, sorted(names, key=key)


def _groups(summaries: list[RunSummary]) -> dict[tuple[str, str], list[RunSummary]]:
    groups: dict[tuple[str, str], list[RunSummary]] = {}
    for s in sorted(summaries, key=lambda s: s.seed or 0):
        groups.setdefault((s.task, variant(s)), []).append(s)
    return groups


def _cells(summaries: list[RunSummary]) -> Iterator[tuple[str, str, list[RunSummary]]]:
    """(task, variant, its runs by seed) for every pair that has runs, tasks then variants in `_order`."""
    tasks, variants = _order(summaries)
    groups = _groups(summaries)
    for task in tasks:
        for v in variants:
            if groups.get((task, v)):
                yield task, v, groups[(task, v)]


def _who(s: RunSummary) -> str:
    where = f" ({s.run_dir})" if s.run_dir else ""
    return f"{s.task} / {variant(s)} / seed {_seed(s)}{where}"


def _seed(s: RunSummary) -> int | str:
    return "?" if s.seed is None else s.seed


# -- who wrote the code ---------------------------------------------------------------------------------

def run_writers(summary: RunSummary) -> tuple[dict[str, int], bool] | None:
    """(who wrote the reported policy's kept macros, counted by `WRITERS`; whether any iteration kept
    expert code) of one run: from its summary, or for a run recorded before the summary said so, from its
    iterations' ``fast.json``; None when neither tells (or the mode writes no code)."""
    if summary.mode not in LLM_MODES:
        return None
    if isinstance(summary.written_by, dict):
        return {w: int(summary.written_by.get(w, 0)) for w in WRITERS}, bool(summary.expert_code)
    run_dir = summary.run_dir
    per_iteration: dict[str, dict[str, str]] = {}
    for it in summary.iterations:
        path = Path(run_dir or ".") / it.dir / layout.FAST_JSON
        if run_dir and path.is_file():
            per_iteration[it.dir] = kept_writers(json.loads(path.read_text()))
    if not per_iteration:
        return None
    selected = per_iteration.get(summary.best or "") or list(per_iteration.values())[-1]
    return writer_counts(selected), any("expert" in w.values() for w in per_iteration.values())


def writers_table(summaries: Summaries) -> Table:
    """Per task x variant of the modes that write code: who wrote the kept macros of the reported policies
    (summed over seeds), the model's and the library's share, and how many runs kept expert code at all."""
    summaries = typed(summaries)
    rows, notes = [], []
    for task, v, runs in _cells(summaries):
        if v.split("[", 1)[0] not in LLM_MODES:
            continue
        known = [(s, w) for s in runs if (w := run_writers(s)) is not None]
        counts = {w: sum(c[w] for _, (c, _) in known) for w in WRITERS}
        total = sum(counts.values())
        expert_runs = sum(1 for _, (_, e) in known if e)
        share = f"{(counts['model'] + counts['library']) / total:.2f}" if total else "n/a"
        rewards = Counter("+".join(s.rewards) if s.rewards else "not recorded" for s in runs)
        row = [task, v, str(len(runs)), *(str(counts[w]) for w in WRITERS), share,
               ", ".join(f"{k} {n}" for k, n in sorted(rewards.items())),
               f"{expert_runs}/{len(known)}" + (" EXPERT CODE" if expert_runs else "")]
        if len(known) < len(runs):
            notes.append("no record of who wrote its macros: "
                         + "; ".join(_who(s) for s in runs if all(s is not k for k, _ in known)))
            row[-1] += f" [{len(notes)}]"
        rows.append(row)
    title = ("Who wrote the kept macros of the reported policies (summed over seeds): the model in the run, "
             "the library (the model earlier, verified) or expert code; the rewards their trainings added up "
             "(task: the task's own, plan: the progress reward on the slow agent's goals, model: the fast "
             "agent's reward code; runs per combination); runs that kept expert code anywhere")
    return Table(title, ["task", "variant", "seeds", *WRITERS, "model+library share", "trained on",
                         "runs with expert"], rows, notes)


# -- a run's result at a budget -------------------------------------------------------------------------

@dataclass(frozen=True)
class Point:
    """One run's evaluation at the report's budget."""

    success: float
    """Test success rate."""
    achievement_success: dict[str, float]
    """Per-achievement success (0-1)."""
    steps: int
    """Primitive steps the result stands for (the mark, or the run's ``steps_used`` at its end)."""


def at_budget(summary: RunSummary, budget: int | None) -> tuple[Point | None, str]:
    """`summary`'s result at `budget` (None: its final result) and, when it has none there, why ("" else).

    Only a test-split evaluation at exactly `budget` counts: a run whose marks stop short of it (it stopped
    early, or its budget was smaller) or that has no marks at all (older runs) has no result there.
    """
    if budget is None:
        return Point(float(summary.success_rate), dict(summary.achievement_success or {}),
                     int(summary.steps_used)), ""
    marks = summary.marks or []
    if not marks:
        if summary.mode == "code":
            return None, (f"a --mode code run trains nothing, so it has no budget marks (its final result, "
                          f"{float(summary.success_rate):.2f}, is the same at any budget)")
        return None, "no budget-mark evaluations (`marks`) in its summary.json"
    for mark in marks:
        if mark.steps == budget:
            split = mark.split
            if split is None and mark.error:  # no evaluation at all (e.g. code that never compiled)
                return None, f"its mark at {budget:,} steps has no evaluation ({mark.error})"
            if split != "test":
                return None, f"its mark at {budget:,} steps was evaluated on {split!r} episodes, not test"
            return Point(mark.success_rate, dict(mark.achievement_success or {}), budget), ""
    have = ", ".join(f"{m.steps:,}" for m in marks)
    return None, f"no mark at {budget:,} steps (its marks: {have})"


@dataclass(frozen=True)
class Cell:
    """Table 2's cell: the success of a task x variant's runs at the budget."""

    values: tuple[float, ...]
    """Each run's success that has a result at the budget."""
    missing: tuple[str, ...]
    """Each run without one: who and why."""
    notes: tuple[str, ...] = ()
    """Other things a reader must know (a final result not on test episodes, expert code used)."""
    expert_runs: int = 0
    """Runs of the cell that kept expert code (the trusted goal macro) in some iteration."""

    @property
    def n(self) -> int:
        return len(self.values)

    @property
    def mean(self) -> float | None:
        return statistics.fmean(self.values) if self.values else None

    @property
    def std(self) -> float | None:
        """Sample standard deviation over seeds (n - 1); None below two seeds."""
        return statistics.stdev(self.values) if len(self.values) > 1 else None

    def text(self) -> str:
        return self._text() + (f" EXPERT CODE in {self.expert_runs}" if self.expert_runs else "")

    def _text(self) -> str:
        if not self.values:
            return "missing"
        mean, std = self.mean, self.std
        if std is None:
            return f"{mean:.2f} (n=1)"
        return f"{mean:.2f} ± {std:.2f} (n={self.n}, {min(self.values):.2f}-{max(self.values):.2f})"


def table2_cells(summaries: Summaries, budget: int | None = None) -> dict[tuple[str, str], Cell]:
    """Table 2's cells by (task, variant)."""
    summaries = typed(summaries)
    cells = {}
    for key, runs in _groups(summaries).items():
        values, missing, notes = [], [], []
        for s in runs:
            point, why = at_budget(s, budget)
            if point is None:
                missing.append(f"{_who(s)}: {why}")
                continue
            values.append(point.success)
            if budget is None and s.eval_split != "test":
                if not s.eval_episodes and s.error:  # nothing was played: say why
                    notes.append(f"{_who(s)}: no evaluation episode was played ({s.error})")
                else:
                    notes.append(f"{_who(s)}: its final result was evaluated on "
                                 f"{s.eval_split or 'unrecorded'} episodes, not test")
            writers = run_writers(s)
            if writers is not None and writers[1]:
                notes.append(f"{_who(s)}: used expert code (kept macros of the reported policy: "
                             + ", ".join(f"{w} {n}" for w, n in writers[0].items() if n) + ")")
        expert = sum(1 for s in runs if (w := run_writers(s)) is not None and w[1])
        cells[key] = Cell(tuple(values), tuple(missing), tuple(notes), expert)
    return cells


# -- tables ---------------------------------------------------------------------------------------------

@dataclass
class Table:
    """A report table: Markdown, the PNG and W&B are all drawn from these rows."""

    title: str
    columns: list[str]
    rows: list[list[str]]
    notes: list[str]
    """Footnotes (numbered as ``[k]`` in the cells that refer to them)."""

    def markdown(self) -> str:
        lines = [f"## {self.title}", "", "| " + " | ".join(self.columns) + " |",
                 "|" + "---|" * len(self.columns)]
        lines += ["| " + " | ".join(row) + " |" for row in self.rows]
        if self.notes:
            lines += [""] + [f"[{i}] {note}" for i, note in enumerate(self.notes, 1)]
        return "\n".join(lines)


def budget_words(budget: int | None) -> str:
    return "each run's final result" if budget is None else f"{budget:,} primitive steps (budget marks)"


def table2(summaries: Summaries, budget: int | None = None) -> Table:
    """Table 2: rows tasks, columns variants; cells "mean ± std (n=seeds, min-max)" of test success."""
    summaries = typed(summaries)
    tasks, variants = _order(summaries)
    cells = table2_cells(summaries, budget)
    notes: list[str] = []
    rows = []
    for task in tasks:
        row = [task]
        for v in variants:
            cell = cells.get((task, v))
            if cell is None:
                row.append("-")
                continue
            text = cell.text()
            said = list(cell.missing) + list(cell.notes)
            if said:
                notes.append("; ".join(said))
                text += f" [{len(notes)}]"
            row.append(text)
        rows.append(row)
    title = f"Test success at {budget_words(budget)}: mean ± std over seeds (n seeds, min-max)"
    return Table(title, ["task", *variants], rows, notes)


def result_table(summaries: Summaries, budget: int | None = None) -> str:
    """Table 2 as Markdown (without its heading): one row per task, one column per variant."""
    return table2(summaries, budget).markdown().split("\n", 2)[2]


def run_steps_to(summary: RunSummary, threshold: str) -> tuple[bool, int | None]:
    """(known, steps): the primitive steps at which `summary`'s budget-mark evaluations first reached
    `threshold` (None: never); known is False when the run has neither ``steps_to_success`` nor marks."""
    recorded = summary.steps_to_success
    if isinstance(recorded, dict) and threshold in recorded:
        value = recorded[threshold]
        return True, None if value is None else int(value)
    marks = [m for m in summary.marks or [] if m.split == "test"]
    if not marks:
        return False, None
    level = float(threshold)
    reached = [m.steps for m in marks if m.success_rate >= level]
    return True, min(reached) if reached else None


def median_steps(values: list[int | None]) -> float | None:
    """The median of `values` with None (never reached) as infinitely many steps; None when it is that."""
    ordered = sorted(math.inf if v is None else v for v in values)
    mid = statistics.median(ordered) if ordered else math.inf
    return None if math.isinf(mid) else mid


def human_steps(steps: float) -> str:
    """50000 -> "50k", 1250000 -> "1.25M", 512 -> "512"."""
    for unit, size in (("M", 1_000_000), ("k", 1_000)):
        if steps >= size:
            return f"{steps / size:.3g}{unit}"
    return f"{steps:.0f}"


def steps_to_success_table(summaries: Summaries) -> Table:
    """Per task x variant: for each threshold, the median steps to reach it over seeds and how many did."""
    summaries = typed(summaries)
    rows, notes = [], []
    for task, v, runs in _cells(summaries):
        row = [task, v]
        unknown = [s for s in runs if not run_steps_to(s, THRESHOLDS[0])[0]]
        for threshold in THRESHOLDS:
            values = [run_steps_to(s, threshold)[1] for s in runs if run_steps_to(s, threshold)[0]]
            if not values:
                row.append("n/a")
                continue
            mid = median_steps(values)
            reached = sum(x is not None for x in values)
            row.append(f"{'never' if mid is None else human_steps(mid)} ({reached}/{len(values)})")
        if unknown:
            notes.append("no budget-mark evaluations, left out: " + "; ".join(_who(s) for s in unknown))
            row[-1] += f" [{len(notes)}]"
        rows.append(row)
    title = ("Primitive steps to test success 0.5 / 0.8 / 0.9 from the budget marks: median over seeds "
             "(seeds that reached it / seeds; never: more than half did not)")
    return Table(title, ["task", "variant", *THRESHOLDS], rows, notes)


def steps_by_kind_table(summaries: Summaries) -> Table:
    """Per task x variant: the mean over seeds of each kind of env step and of ``steps_used``."""
    summaries = typed(summaries)
    kinds = list(STEP_KINDS)
    for s in summaries:
        kinds += [k for k in (s.steps_by_kind or {}) if k not in kinds]
    rows, notes = [], []
    for task, v, runs in _cells(summaries):
        known = [s for s in runs if isinstance(s.steps_by_kind, dict)]
        row = [task, v, str(len(runs))]
        for kind in kinds:
            row.append(f"{statistics.fmean(int(s.steps_by_kind.get(kind, 0)) for s in known):,.0f}"  # type: ignore[union-attr]
                       if known else "n/a")
        row.append(f"{statistics.fmean(int(s.steps_used) for s in runs):,.0f}")
        if len(known) < len(runs):
            notes.append("no `steps_by_kind` in its summary.json (an older run: steps_used is what it "
                         "counted then): " + "; ".join(_who(s) for s in runs if s not in known))
            row[-1] += f" [{len(notes)}]"
        rows.append(row)
    title = "Env steps by kind, mean over seeds (steps_used: all but the test evaluation)"
    return Table(title, ["task", "variant", "seeds", *kinds, "steps_used"], rows, notes)


# -- the report -----------------------------------------------------------------------------------------

def write_report(run_dirs: Sequence[str | Path], out_dir: str | Path, budget: int | None = None,
                 wandb_project: str | None = None, replays: bool = True) -> dict[str, Path]:
    """Write the Markdown (`layout.TABLE_MD`), Table 2 as a PNG, the success-vs-steps curves from the
    budget marks, the per-iteration curves, for Crafter benchmark runs the per-achievement chart and, with
    `replays`, one replay GIF per mode (`replay_section`) into `out_dir`; with `wandb_project`, log the
    same tables and images to one W&B run there.

    Returns:
        name -> path of every file written.
    """
    import matplotlib

    matplotlib.use("Agg")

    summaries = load_summaries(run_dirs)
    out = rundir.prepare_run_dir(out_dir)
    tables = {"table2": table2(summaries, budget), "steps_to_success": steps_to_success_table(summaries),
              "steps_by_kind": steps_by_kind_table(summaries), "writers": writers_table(summaries)}
    written = {"markdown": out / layout.TABLE_MD, "table": out / layout.TABLE_PNG}
    _table_png(tables["table2"], out / layout.TABLE_PNG)
    sections = [tables["table2"].markdown()]
    if _marks_png(summaries, out / layout.MARKS_PNG):
        written["marks"] = out / layout.MARKS_PNG
        sections.append(f"## Test success vs primitive steps\n\n![success vs steps]({layout.MARKS_PNG})\n\n"
                        "Mean over seeds of the budget-mark evaluations, min-max band.")
    else:
        sections.append("## Test success vs primitive steps\n\nNo run has budget-mark evaluations (`marks`): "
                        "no curves.")
    sections += [tables["steps_to_success"].markdown(), tables["steps_by_kind"].markdown(),
                 tables["writers"].markdown()]
    if _iterations_png(summaries, out / layout.CURVES_PNG):
        written["curves"] = out / layout.CURVES_PNG
    crafter = crafter_section(summaries, out / layout.CRAFTER_PNG, budget)
    if crafter:
        sections.append(crafter)
        if (out / layout.CRAFTER_PNG).is_file():
            written["crafter"] = out / layout.CRAFTER_PNG
    for stale in (layout.MARKS_PNG, layout.CRAFTER_PNG):  # an earlier report's, not this one's
        if stale not in {p.name for p in written.values()}:
            (out / stale).unlink(missing_ok=True)
    if replays:
        section, gifs = replay_section(run_dirs, summaries, out)
        sections.append(section)
        written.update(gifs)
    runs = "\n".join(f"- {_who(s)}" for s in summaries)
    text = (f"# Results at {budget_words(budget)}\n\n" + "\n\n".join(sections)
            + f"\n\n## Runs\n\n{runs}\n")
    rundir.atomic_write_text(out / layout.TABLE_MD, text)
    if wandb_project:
        from rlgpt.tracking import log_report_to_wandb

        images = {k: v for k, v in written.items() if v.suffix == ".png"}
        videos = {k: v for k, v in written.items() if v.suffix == ".gif"}
        log_report_to_wandb(wandb_project, out, {k: (t.columns, t.rows) for k, t in tables.items()}, images,
                            {"budget": budget, "runs": [s.run_dir for s in summaries]}, videos)
    return written


def replay_section(run_dirs: Sequence[str | Path], summaries: list[RunSummary], out: Path
                   ) -> tuple[str, dict[str, Path]]:
    """One replay per mode (`rlgpt.run.replay`: test episode 0 of the first run of that mode, at most
    `rlgpt.run.replay.PREVIEW_STEPS` steps) as ``replay_<mode>.gif`` in `out`, and the Markdown embedding
    them; a run that cannot be replayed (no policy, a missing checkpoint) is named with the reason instead."""
    from rlgpt.run.replay import preview

    lines, written = [], {}
    first: dict[str, tuple[Path, RunSummary]] = {}
    for run_dir, summary in zip(run_dirs, summaries, strict=True):
        first.setdefault(variant(summary), (Path(run_dir), summary))
    for name, (run_dir, summary) in first.items():
        gif = out / f"replay_{re.sub(r'[^A-Za-z0-9_.-]+', '_', name).strip('_')}.gif"
        done, why = preview(run_dir, gif)
        if done is None:
            lines.append(f"- {_who(summary)}: no replay ({why})")
            continue
        written[gif.stem] = gif
        lines.append(f"### {name}: {summary.task}, seed {_seed(summary)}\n\n"
                     f"![{name}]({gif.name})\n\nTest episode 0 (env seed {done.seed}), {done.steps} steps, "
                     f"{'success' if done.success else 'no success'}; played by {done.policy}.")
    return "## Replays\n\n" + "\n\n".join(lines), written


def _table_png(table: Table, path: Path) -> None:
    import textwrap

    import matplotlib.pyplot as plt

    columns = table.columns[1:]
    width = 2.2 + 2.6 * len(columns)
    notes = [textwrap.shorten(f"[{i}] {note}", 60 + int(14 * width)) for i, note in enumerate(table.notes, 1)]
    fig, ax = plt.subplots(figsize=(width, 1.0 + 0.45 * len(table.rows) + 0.2 * len(notes)))
    ax.axis("off")
    if table.rows:
        drawn = ax.table(cellText=[row[1:] for row in table.rows], rowLabels=[row[0] for row in table.rows],
                         colLabels=columns, loc="center", cellLoc="center")
        drawn.auto_set_font_size(False)
        drawn.set_fontsize(8)
        drawn.scale(1, 1.4)
    ax.set_title(table.title, fontsize=9)
    if notes:
        fig.text(0.01, 0.01, "\n".join(notes), fontsize=7, va="bottom")
    fig.tight_layout(rect=(0, 0.2 * len(notes) / fig.get_figheight(), 1, 1))
    fig.savefig(path, dpi=100)
    plt.close(fig)


def mark_curve(runs: Summaries) -> list[tuple[int, float, float, float, int]]:
    """(steps, mean, min, max, seeds) of `runs`' test budget marks at every step any of them has."""
    at: dict[int, list[float]] = {}
    for s in typed(runs):
        for mark in s.marks or []:
            if mark.split == "test":
                at.setdefault(mark.steps, []).append(mark.success_rate)
    return [(m, statistics.fmean(v), min(v), max(v), len(v)) for m, v in sorted(at.items())]


def _marks_png(summaries: list[RunSummary], path: Path) -> bool:
    """Success vs steps, one panel per task with marks, one line per variant; False (nothing written)
    when no run has marks."""
    import matplotlib.pyplot as plt

    tasks, variants = _order(summaries)
    groups = _groups(summaries)
    panels = [t for t in tasks if any(mark_curve(groups.get((t, v), [])) for v in variants)]
    if not panels:
        return False
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 3.8), squeeze=False)
    for ax, task in zip(axes[0], panels, strict=True):
        for v in variants:
            curve = mark_curve(groups.get((task, v), []))
            if not curve:
                continue
            steps = [c[0] for c in curve]
            seeds = max(c[4] for c in curve)
            line = ax.plot(steps, [c[1] for c in curve], marker="o", label=f"{v} ({seeds} seeds)")[0]
            ax.fill_between(steps, [c[2] for c in curve], [c[3] for c in curve], color=line.get_color(),
                            alpha=0.2)
            for m, mean, _, _, n in curve:  # a mark fewer seeds reached: say how many the point averages
                if n < seeds:
                    ax.annotate(f"n={n}", (m, mean), textcoords="offset points", xytext=(4, 4), fontsize=7,
                                color=line.get_color())
        ax.set_title(task)
        _success_axes(ax, "primitive steps", "test success")
    _save(fig, path)
    return True


def _iterations_png(summaries: list[RunSummary], path: Path) -> bool:
    """Each run's validation success per loop iteration (how the loop went, not a reported result)."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for s in summaries:
        its = s.iterations
        ax.plot([it.index + 1 for it in its], [it.success_rate for it in its], marker="o",
                label=f"{s.task} / {variant(s)} / seed {_seed(s)}")
    _success_axes(ax, "iteration", "evaluation success (validation)")
    _save(fig, path)
    return True


def _success_axes(ax: Any, xlabel: str, ylabel: str) -> None:
    """A success-rate panel's axes: labels, the 0-1 range with a margin, a light grid and the legend."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_ylim(-0.05, 1.05)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)


def _save(fig: Any, path: Path) -> None:
    """Write `fig` to `path` as the report's PNGs are (tight, 100 dpi) and free it."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def crafter_section(summaries: Summaries, png: Path, budget: int | None = None) -> str:
    """For the runs of the Crafter benchmark task: Markdown with the Crafter score per variant (mean and
    range over seeds, from each run's per-achievement success at `budget`) and per-achievement success,
    and the paper's per-achievement chart at `png` (achievement rates averaged over seeds per variant).
    "" when no run is one. Runs without a result at `budget` are named and left out."""
    from rlgpt.envs.tasks import ACHIEVEMENTS, BENCHMARK_TASK
    from rlgpt.rl.evaluate import plot_crafter_achievements
    from rlgpt.rl.score import PAPER_SCORES_1M, crafter_score, percent_rates

    summaries = typed(summaries)
    points: dict[str, list[Point]] = {}
    missing = []
    for s in summaries:
        if s.task != BENCHMARK_TASK:
            continue
        point, why = at_budget(s, budget)
        if point is None or not point.achievement_success:
            missing.append(f"{_who(s)}: {why or 'no per-achievement success'}")
            continue
        points.setdefault(variant(s), []).append(point)
    if not points:
        return "" if not missing else "# Crafter benchmark\n\nNo run has a result here:\n" + "\n".join(
            f"- {m}" for m in missing)
    _, order = _order([s for s in summaries if variant(s) in points])
    mean_rates = {v: {a: sum(p.achievement_success.get(a, 0.0) for p in points[v]) / len(points[v])
                      for a in ACHIEVEMENTS} for v in order}
    lines = [f"# Crafter benchmark at {budget_words(budget)}", "",
             "| mode | Crafter score (mean over seeds) | range | seeds | primitive steps |",
             "|---|---|---|---|---|"]
    for v in order:
        scores = [crafter_score(percent_rates({a: p.achievement_success.get(a, 0.0) for a in ACHIEVEMENTS}))
                  for p in points[v]]
        steps = max(p.steps for p in points[v])
        lines.append(f"| {v} | {sum(scores) / len(scores):.2f} | {min(scores):.2f}-{max(scores):.2f} | "
                     f"{len(scores)} | {steps:,d} |")
    anchors = ", ".join(f"{k} {v}" for k, v in PAPER_SCORES_1M.items())
    lines += ["", f"Paper anchors at 1M steps: {anchors}", "", f"![per-achievement success]({png.name})", "",
              "| achievement | " + " | ".join(order) + " |", "|---|" + "---|" * len(order)]
    for a in ACHIEVEMENTS:
        lines.append(f"| {a} | " + " | ".join(f"{100 * mean_rates[v][a]:.1f}%" for v in order) + " |")
    if missing:
        lines += ["", "Left out (no result at this budget):", *(f"- {m}" for m in missing)]
    plot_crafter_achievements(mean_rates, png, f"success per achievement at {budget_words(budget)}, "
                              "mean over seeds")
    return "\n".join(lines)
