"""Metrics that outlive a crash: an append-only CSV in the run directory, plus the console progress line.

Sample Factory writes TensorBoard summaries (and W&B mirrors them with ``sync_tensorboard``); this module
adds ``rollout/*`` scalars there and keeps ``metrics.csv`` so that learning curves can be drawn without
TensorBoard and nothing logged before a SIGKILL is lost (each row is flushed as it is written).
"""

from __future__ import annotations

import csv
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

SUCCESS_WINDOW = 32
"""Episodes in a training run's rolling success rate (``success`` in ``metrics.csv``): Sample Factory's
``--stats_avg`` for ``rlgpt train``, the same window for the benchmarks' own trainers."""

METRIC_FIELDS = (
    "env_steps",
    "decisions",
    "wall_time",
    "fps",
    "success",
    "success_episodes",
    "episode_reward",
    "episode_steps",
    "episode_decisions",
    "session",
    "resumed_from",
)
"""``env_steps`` counts primitive (game) steps exactly, a macro call that ran k steps counting k;
``decisions`` counts policy decisions (fewer than ``env_steps`` when macros run); ``fps`` is primitive steps
per second; ``success``, ``episode_reward``, ``episode_steps`` (primitive) and ``episode_decisions`` are means
over the last episodes, ``success_episodes`` of them (the rolling window, `SUCCESS_WINDOW`, once that many
have ended); ``session`` numbers the trainer processes of a resumed run and ``resumed_from`` is the
checkpoint's ``env_steps`` a session started from (rows of earlier sessions past it are superseded)."""


class MetricsLog:
    """Append-only CSV of rollout metrics; a resumed run appends a new ``session``."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        rows = read_metrics(self.path) if self.path.exists() else []
        self.session = (max(int(r["session"]) for r in rows) + 1) if rows else 0
        new = not self.path.exists() or self.path.stat().st_size == 0
        # A file started by an older version keeps its own columns (new ones are dropped) so that it stays
        # one well-formed CSV.
        self.fields = METRIC_FIELDS if new else _header(self.path)
        self._file = open(self.path, "a", newline="")  # noqa: SIM115 (kept open for the run)
        self._writer = csv.DictWriter(self._file, fieldnames=self.fields, extrasaction="ignore")
        if new:
            self._writer.writeheader()
            self._file.flush()

    def write(self, **values: float) -> None:
        """Append one row (missing fields are left empty) and flush it to the OS."""
        row = {k: values.get(k, "") for k in self.fields}
        row["session"] = self.session
        self._writer.writerow(row)
        self._file.flush()

    def close(self) -> None:
        self._file.close()


def read_metrics(path: str | os.PathLike) -> list[dict[str, str]]:
    """Rows of a metrics CSV; a torn last line (from a kill mid-write) is dropped."""
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    return [r for r in rows if r.get("session") not in (None, "")]


def spent_steps(path: str | os.PathLike, final_steps: int = 0) -> int:
    """Primitive steps every session of a run trained, lost ones included: per session, from the checkpoint
    it resumed from to where it got (steps past a killed session's last checkpoint were trained, and
    trained again by the next session; both count). A session got at least to its last logged
    ``env_steps`` and to the checkpoint the next session resumed from; the last one to `final_steps` (its
    trainer's own count, when it returned one). 0 without a metrics file."""
    if not Path(path).is_file():
        return 0
    spans: dict[int, list[int]] = {}
    for row in read_metrics(path):
        steps, start = int(float(row["env_steps"] or 0)), int(float(row.get("resumed_from") or 0))
        span = spans.setdefault(int(row["session"]), [start, steps])
        span[1] = max(span[1], steps)
    order = sorted(spans)
    for session, following in zip(order, order[1:], strict=False):
        spans[session][1] = max(spans[session][1], spans[following][0])
    if order:
        spans[order[-1]][1] = max(spans[order[-1]][1], final_steps)
    return sum(max(end - start, 0) for start, end in spans.values())


def _header(path: Path) -> tuple[str, ...]:
    with open(path, newline="") as f:
        return tuple(next(csv.reader(f), METRIC_FIELDS))


def read_curve(path: str | os.PathLike) -> list[dict[str, str]]:
    """Rows of a metrics CSV with each env step once, in training order: what curves and benchmarks read.

    A trainer killed after its last checkpoint at step S leaves rows past S in the file; the session that
    resumes from S trains those steps again. Its rows supersede them: rows of earlier sessions with
    ``env_steps`` past the resume point (``resumed_from``), or not before the new session's first row, are
    dropped (files without that column are cut at the first row alone). The file itself stays append-only.
    """
    kept: list[dict[str, str]] = []
    session = None
    for row in read_metrics(path):
        if row["session"] != session:
            session = row["session"]
            cut = int(row["env_steps"]) - 1
            if row.get("resumed_from") not in (None, ""):
                cut = min(cut, int(row["resumed_from"]))
            kept = [r for r in kept if int(r["env_steps"]) <= cut]
        if kept and kept[-1]["env_steps"] == row["env_steps"]:
            kept[-1] = row  # a summary before the learner advanced: the later row has more episodes
            continue
        kept.append(row)
    return kept


class ProgressLine:
    """A live one-line status (steps, FPS, success) on stderr; a plain line every few seconds if not a TTY."""

    def __init__(self, total_steps: int, stream=None, every_s: float | None = None):
        self.total = total_steps
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.every_s = every_s if every_s is not None else (0.5 if self.tty else 10.0)
        self._last = 0.0

    def update(self, steps: int, fps: float, success: float | None, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last < self.every_s:
            return
        self._last = now
        pct = 100.0 * min(steps, self.total) / max(self.total, 1)
        succ = "  n/a" if success is None else f"{success:5.2f}"
        line = f"steps {steps:>9,d}/{self.total:,d} ({pct:5.1f}%)  fps {fps:7.0f}  success {succ}"
        if self.tty:
            self.stream.write("\r" + line)
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()


class SummarySink:
    """Appends namespaced scalars (e.g. an LLM client's cumulative ``llm/*`` metrics) to a run's TensorBoard
    summaries, one point per call; pass it as ``LLMClient(metrics_sink=...)``."""

    def __init__(self, run_dir: str | os.PathLike):
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(os.path.join(os.fspath(run_dir), ".summary", "0"))
        self.step = 0

    def __call__(self, scalars: dict[str, float]) -> None:
        self.step += 1
        for key, value in scalars.items():
            self.writer.add_scalar(key, value, self.step)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


def log_scalars(
    run_dir: str | os.PathLike, scalars: dict[str, float], step: int, wandb_run: dict[str, str] | None = None
) -> None:
    """Write scalars (already namespaced, e.g. ``eval/success_rate``) beside the training summaries.

    ``wandb_run`` (``{"id": ..., "project": ...}``) re-attaches to the run's W&B run so that the scalars land
    in the same run as the training curves instead of a new one.
    """
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(os.path.join(os.fspath(run_dir), ".summary", "0"))
    for key, value in scalars.items():
        writer.add_scalar(key, value, step)
    writer.close()
    if wandb_run:
        import wandb

        os.environ.setdefault("WANDB_MODE", "offline")
        os.environ.setdefault("WANDB_DIR", os.fspath(run_dir))
        run = wandb.init(id=wandb_run["id"], project=wandb_run["project"], resume="allow")
        run.log(dict(scalars), step=step)
        run.finish()


def log_to_wandb(config: dict[str, Any], project: str, run_dir: Path,
                 iterations: list[tuple[int, dict[str, float]]], final: dict[str, float],
                 replay_gif: Path | None = None) -> None:
    """One W&B run per `rlgpt run` (offline unless ``WANDB_MODE`` says otherwise; a resumed run continues
    the same W&B run): each iteration's scalars at its index (`rlgpt.run.runner.wandb_scalars`: ``train/``,
    ``eval/``, ``budget/``, ``macro/``), the run's `final` ones (``llm/``, the budget) after them;
    ``replay_gif`` (the caller's replay of test episode 0, `rlgpt.run.replay`) as
    ``replay/test_episode_0``; the generated code as artifacts. ``config`` is the run's config as a dict."""
    import uuid

    import wandb

    from rlgpt import layout, rundir

    os.environ.setdefault("WANDB_MODE", "offline")
    id_path = run_dir / layout.WANDB_ID
    if not id_path.is_file():
        rundir.atomic_write_text(id_path, uuid.uuid4().hex[:12])
    run = wandb.init(id=id_path.read_text().strip(), project=project, dir=str(run_dir),
                     config=config, resume="allow", name=run_dir.name)
    try:
        for index, scalars in iterations:
            run.log(scalars, step=index)
        run.log(final, step=len(iterations))
        if replay_gif is not None:
            run.log({"replay/test_episode_0": wandb.Video(str(replay_gif), format="gif")},
                    step=len(iterations))
        code = wandb.Artifact(f"code-{run_dir.name}", type="code")
        for path in (sorted(run_dir.glob(f"*/{layout.MACROS_YAML}"))
                     + sorted(run_dir.glob(f"*/{layout.REWARD_PY}"))):
            code.add_file(str(path), name=f"{path.parent.name}/{path.name}")
        if code.manifest.entries:
            run.log_artifact(code)
    finally:
        run.finish()
        # finish() can return before W&B's service has written the last records; stopping the service
        # flushes them, so the offline run is complete on disk when `rlgpt run` returns.
        wandb.teardown()


def log_report_to_wandb(project: str, out_dir: Path, tables: dict[str, tuple[list[str], list[list[str]]]],
                        images: dict[str, Path], config: dict[str, Any],
                        videos: dict[str, Path] | None = None) -> str:
    """One W&B run (``job_type`` report, offline unless ``WANDB_MODE`` says otherwise, files under
    ``out_dir/wandb``) holding `rlgpt report`'s tables (name -> (columns, rows)) as ``wandb.Table``, its
    PNGs as images and its replay GIFs as videos; returns the run's id."""
    import wandb

    os.environ.setdefault("WANDB_MODE", "offline")
    run = wandb.init(project=project, dir=str(out_dir), job_type="report", name=f"report-{out_dir.name}",
                     config=config)
    try:
        run.log({**{f"report/{name}": wandb.Table(columns=columns, data=rows)
                    for name, (columns, rows) in tables.items()},
                 **{f"report/{name}": wandb.Image(str(path)) for name, path in images.items()},
                 **{f"report/{name}": wandb.Video(str(path), format="gif")
                    for name, path in (videos or {}).items()}})
        return run.id
    finally:
        run.finish()
        wandb.teardown()  # as in `log_to_wandb`: the offline files are complete when this returns


QUIET_PHASES = ("train", "marks")
"""Phases whose own child process prints a progress line (`ProgressLine`): `LoopProgress` only announces
them; every other phase (the LLM's, probes, evaluations) gets its elapsed time and tokens ticking."""


def llm_tokens(metrics: dict[str, float]) -> tuple[int, int]:
    """(prompt, generated) tokens in an LLM client's cumulative ``llm/<role>/*`` metrics."""
    prompt = sum(v for k, v in metrics.items() if k.endswith("/prompt_tokens"))
    generated = sum(v for k, v in metrics.items() if k.endswith("/completion_tokens"))
    return int(prompt), int(generated)


class LoopProgress:
    """The `rlgpt run` status line: phase (plan/slow/fast/probe/train/critic/...), iteration and the
    primitive-step budget used so far; one line per phase on stderr (trainings print their own
    `ProgressLine` in between). A phase outside `QUIET_PHASES` shows its elapsed seconds and the LLM's
    tokens so far (`tokens`: answered requests' prompt and generated tokens; `waiting`: the role of the
    request in flight), rewritten in place on a
    terminal (every `every_s`, default 1 s) or as a line every 30 s into a log; `close` ends the run with its
    wall time by phase. With `log_path`, every finished phase also appends a JSON line
    ``{"task", "iteration", "phase", "wall_s"}`` there, so a run's time per phase can be read back (a
    resumed run appends the phases it re-runs; a step read from its file takes ~0 s)."""

    def __init__(self, total_steps: int, iterations: int, stream=None,
                 log_path: str | os.PathLike | None = None, every_s: float | None = None):
        self.total = total_steps
        self.iterations = iterations
        self.stream = stream or sys.stderr
        self.log_path = log_path
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.every_s = every_s if every_s is not None else (1.0 if self.tty else 30.0)
        self.steps_used = 0
        """Charged env steps so far (every kind but test evaluation, `rlgpt.run.ledger`)."""
        self.by_kind: dict[str, int] = {}
        """The run's env steps so far per kind."""
        self.tokens: Any = None
        """A callable answering the LLM's (prompt, generated) tokens so far (`llm_tokens` of its client's
        metrics); None: no LLM, no token counts."""
        self.waiting: Any = None
        """A callable answering the role of the LLM request in flight (None between requests); None: not
        shown."""
        self.wall_s: dict[str, float] = {}
        """Seconds spent per phase name so far in this process."""
        self.last = ""
        self.written_by: dict[str, str] = {}
        """Who wrote each kept macro of the iteration (`rlgpt.run.records.kept_writers`)."""
        self._open: tuple[str, int, str, float] | None = None
        self._tokens_at_start = (0, 0)
        self._lock = threading.Lock()
        self._stop: threading.Event | None = None
        self._ticker: threading.Thread | None = None
        self._started = time.monotonic()

    def code(self, written_by: dict[str, str]) -> None:
        """Show who wrote the iteration's kept macros (sub-action -> model, library or expert) from now on."""
        self.written_by = dict(written_by)

    def code_text(self) -> str:
        """``code model 2/3, expert 1/3 (EXPERT CODE)``: the share of the kept macros each writer wrote, and a
        mark when any is expert code; "" before any macro was kept."""
        total = len(self.written_by)
        if not total:
            return ""
        writers = list(dict.fromkeys(self.written_by.values()))
        shares = ", ".join(f"{w} {list(self.written_by.values()).count(w)}/{total}" for w in writers)
        return f"code {shares}" + (" (EXPERT CODE)" if "expert" in writers else "")

    def count(self, ledger: Any) -> None:
        """Show `ledger`'s counts (a `rlgpt.run.ledger.StepLedger`: its ``used`` and ``by_kind()``)."""
        self.steps_used = ledger.used
        self.by_kind = ledger.by_kind()

    def phase(self, phase: str, iteration: int, task: str) -> None:
        """Announce a phase of iteration `iteration` (0-based) of `task` (ends the phase before it)."""
        self._close()
        spent = ", ".join(f"{kind} {n:,d}" for kind, n in self.by_kind.items() if n)
        line = (f"rlgpt run: {task} | iteration {iteration + 1}/{self.iterations} | {phase:<6} | "
                f"budget {self.steps_used:,d}/{self.total:,d} steps" + (f" ({spent})" if spent else "")
                + (f" | {self.code_text()}" if self.written_by else ""))
        self._open = (task, iteration, phase, time.monotonic())
        self._tokens_at_start = self._read_tokens()
        if phase in QUIET_PHASES:
            if line != self.last:
                self._write(line + "\n")
        else:
            self._write(line if self.tty else line + "\n")
            self._stop = threading.Event()
            self._ticker = threading.Thread(target=self._tick, args=(line, self._stop), daemon=True,
                                            name="rlgpt-progress")
            self._ticker.start()
        self.last = line

    def within(self, phase: str) -> None:
        """Announce `phase` of the iteration and task of the phase open now (a step inside it: the fast
        agent's probes, `rlgpt.agents.fast.FastAgent.on_phase`); nothing when no phase is open."""
        if self._open is not None:
            task, iteration, _, _ = self._open
            self.phase(phase, iteration, task)

    def close(self) -> None:
        """End the last phase (its time goes to `log_path`) and print the wall time by phase."""
        self._close()
        if self.wall_s:
            total = time.monotonic() - self._started
            parts = ", ".join(f"{name} {_seconds(s)}" for name, s in
                              sorted(self.wall_s.items(), key=lambda kv: -kv[1]))
            self._write(f"rlgpt run: wall time {_seconds(total)} by phase: {parts}\n")

    def _read_tokens(self) -> tuple[int, int]:
        return self._call(self.tokens, (0, 0))

    @staticmethod
    def _call(source: Any, default: Any) -> Any:
        if source is None:
            return default
        try:
            return source()
        except Exception:  # a progress line never ends a run (the counts change under it, in another thread)
            return default

    def _status(self, start: float) -> str:
        text = f" | {time.monotonic() - start:.0f} s"
        if self.tokens is not None:
            prompt, generated = self._read_tokens()
            text += (f", tokens {prompt - self._tokens_at_start[0]:,d} in / "
                     f"{generated - self._tokens_at_start[1]:,d} out")
        role = self._call(self.waiting, None)
        if role:
            text += f", the model is answering the {role} request"
        return text

    def _tick(self, line: str, stop: threading.Event) -> None:
        start = time.monotonic()
        while not stop.wait(self.every_s):
            with self._lock:
                if stop.is_set():
                    return
                status = self._status(start)
                self._write(f"\r{line}{status}\033[K" if self.tty else f"  ... {line.split('|')[2].strip()}"
                            f"{status}\n", locked=True)

    def _write(self, text: str, locked: bool = False) -> None:
        if not locked:
            with self._lock:
                self._write(text, locked=True)
            return
        self.stream.write(text)
        self.stream.flush()

    def _close(self) -> None:
        if self._stop is not None:
            with self._lock:
                self._stop.set()
            self._ticker.join()
            task, iteration, phase, start = self._open
            status = self._status(start)
            self._write(f"\r{self.last}{status}\033[K\n" if self.tty else f"  done {phase}{status}\n")
            self._stop = self._ticker = None
        if self._open is None:
            return
        task, iteration, phase, start = self._open
        self._open = None
        wall = time.monotonic() - start
        self.wall_s[phase] = self.wall_s.get(phase, 0.0) + wall
        if self.log_path is not None:
            record = {"task": task, "iteration": iteration, "phase": phase, "wall_s": round(wall, 3)}
            with open(self.log_path, "a") as f:
                f.write(json.dumps(record) + "\n")


def _seconds(s: float) -> str:
    """``42 s`` or ``3 min 05 s``."""
    return f"{s:.0f} s" if s < 60 else f"{int(s // 60)} min {int(s % 60):02d} s"
