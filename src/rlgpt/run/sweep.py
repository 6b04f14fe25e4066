"""`rlgpt sweep`: every (task, mode, seed) cell of an experiment matrix as an ordinary `rlgpt run` directory
under one sweep directory, then the report table over them.

Cells run in threads of this process (``parallel`` at a time), all over one executor: with ``--executor ray``
their trainings fan out over the cluster while every LLM call stays here, on the one model this process
loaded (the embedded backend serialises its calls; an HTTP backend is one server every cell reaches).

Resume is the runs' own: a cell whose ``summary.json`` exists is read, not run again; any other cell is
`rlgpt.run.runner.run` on its directory, which continues from its last finished step. So a sweep killed at
any point (SIGKILL included) continues with the same command, and nothing a finished cell computed is redone.
A cell that fails (a user error, a bad config for that mode) is recorded in ``sweep.json`` with its error
and the others go on.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlgpt import layout, rundir
from rlgpt.config import RunConfig
from rlgpt.errors import RlgptError
from rlgpt.llm.types import Backend
from rlgpt.run.executor import Executor
from rlgpt.run.report import result_table, write_report


@dataclass(frozen=True)
class Cell:
    """One run of the matrix."""

    task: str
    """The run's task."""
    mode: str
    """The run's mode (``rlgpt``, ``ppo``, ``code``)."""
    seed: int
    """The run's seed."""

    @property
    def name(self) -> str:
        """The cell's run directory name inside the sweep directory."""
        return f"{self.task.replace('+', '_')}-{self.mode}-s{self.seed}"


def cells(tasks: Sequence[str], modes: Sequence[str], seeds: Sequence[int]) -> list[Cell]:
    """The matrix, task-major (the report's row order)."""
    return [Cell(t, m, s) for t in tasks for m in modes for s in seeds]


def run_sweep(out: str | Path, matrix: Sequence[Cell], make_config: Callable[[Cell, Path], RunConfig],
              executor: Executor, parallel: int = 1, backend: Backend | None = None,
              make_backend: Callable[[RunConfig], Backend | None] | None = None) -> dict[str, Any]:
    """Run (or resume) every cell of `matrix` under `out`; write ``sweep.json`` and the report.

    Args:
        out: the sweep directory (cells' run directories, ``sweep.json``, ``report/``).
        matrix: the cells.
        make_config: a cell's validated RunConfig, given the cell and its run directory.
        executor: runs every cell's trainings (shared; jobs of different cells may run at once).
        parallel: cells in flight at once.
        backend: an LLM backend every cell shares; when None and a cell needs one, `make_backend` builds it
            (once, in this process) from that cell's config.
    Returns:
        ``sweep.json``'s record: each cell's state, the Markdown table and the report's files.
    """
    from rlgpt.run.runner import run

    out = rundir.prepare_run_dir(out).resolve()
    configs = {cell: make_config(cell, out / cell.name) for cell in matrix}  # bad configs fail before any run
    with rundir.locked_run_dir(out, layout.SWEEP_LOCK):
        states: dict[Cell, dict[str, Any]] = {}
        todo = []
        for cell in matrix:
            if (out / cell.name / layout.SUMMARY_JSON).is_file():
                states[cell] = {"state": "done", "resumed": False}  # finished earlier: read, not redone
            else:
                todo.append(cell)
        if backend is None and make_backend is not None:
            needs_llm = [c for c in todo if c.mode != "ppo"]
            if needs_llm:  # one model for every cell, loaded once here
                backend = make_backend(configs[needs_llm[0]])
        _write_state(out, matrix, states, None)

        def run_cell(cell: Cell) -> None:
            states[cell] = {"state": "running"}
            _write_state(out, matrix, states, None)
            try:
                run(configs[cell], executor, backend)
                states[cell] = {"state": "done", "resumed": True}
            except RlgptError as exc:  # this cell's problem, not the sweep's
                states[cell] = {"state": "failed", "error": f"{type(exc).__name__}: {exc}"}
            _write_state(out, matrix, states, None)

        if parallel <= 1:
            # In this thread: Ctrl-C or SIGTERM (`rlgpt.procs.Terminated`) stops the running cell the way
            # it stops `rlgpt run` (its training checkpoints), and the same command resumes. Waiting on a
            # pool's future instead left the cell running in its thread, and the pool's exit waited for
            # every cell still queued: a stopped sweep went on for hours.
            for cell in todo:
                run_cell(cell)
        else:
            pool = ThreadPoolExecutor(max_workers=parallel, thread_name_prefix="cell")
            try:
                for future in [pool.submit(run_cell, cell) for cell in todo]:
                    future.result()
            except KeyboardInterrupt:
                pool.shutdown(wait=False, cancel_futures=True)  # no queued cell starts; running ones end
                raise
            pool.shutdown()

        done = [out / c.name for c in matrix if states[c]["state"] == "done"]
        report = None
        table = ""
        if done:
            paths = write_report(done, out / layout.REPORT_DIR)
            report = {k: str(v) for k, v in paths.items()}
            from rlgpt.run.report import load_summaries

            table = result_table(load_summaries(done))
        return _write_state(out, matrix, states, report, table)


_STATE_LOCK = threading.Lock()
"""Cells' threads write ``sweep.json`` one at a time, so the newest write holds every cell's newest state."""


def _write_state(out: Path, matrix: Sequence[Cell], states: dict[Cell, dict[str, Any]],
                 report: dict[str, str] | None, table: str = "") -> dict[str, Any]:
    with _STATE_LOCK:
        return _write_state_locked(out, matrix, states, report, table)


def _write_state_locked(out: Path, matrix: Sequence[Cell], states: dict[Cell, dict[str, Any]],
                        report: dict[str, str] | None, table: str) -> dict[str, Any]:
    record = {"cells": [{"task": c.task, "mode": c.mode, "seed": c.seed, "run_dir": str(out / c.name),
                         **states.get(c, {"state": "pending"})} for c in matrix],
              "report": report, "table": table}
    rundir.write_json(out / layout.SWEEP_JSON, record)
    return record


def read_sweep(out: str | Path) -> dict[str, Any]:
    """A sweep directory's ``sweep.json``."""
    return json.loads((Path(out) / layout.SWEEP_JSON).read_text())
