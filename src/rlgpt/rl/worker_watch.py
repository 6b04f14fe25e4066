"""The trainer's watch over Sample Factory's child processes, for code (macros) no check anticipated.

- **Watch** (:class:`WorkerWatch`): a timer on the trainer's event loop notices a dead Sample Factory child
  (and kills an env worker whose marker, `rlgpt.rl.macro_marker`, says one macro call has run for
  ``macros.hang_seconds``: a hung call, e.g. a loop that takes no game step, would otherwise stall the run
  at 0 FPS for good), stops the run the normal way (the learner saves a checkpoint if it is alive;
  metrics.csv rows are flushed as written) and :func:`rlgpt.rl.train.train` raises
  :class:`WorkerDiedError` naming the worker, how it died and the macro it was running. The same command
  resumes. Sample Factory 2.1.1 alone does not notice: with its only env worker SIGKILLed, training stalls
  at 0 FPS while the learner keeps re-saving the same checkpoint (its heartbeat check stops a run only once
  every component of a kind has been silent for ``heartbeat_reporting_interval``, 600 s here), and with its
  learner dead even a clean stop hangs.
- **Stop deadline** (:class:`StopDeadline`): a thread of the trainer that bounds that stop. Sample Factory's
  processes talk through faster-fifo queues guarded by process-shared mutexes that are not robust: a process
  killed while it holds one (mid-``put`` or mid-``get``) leaves that queue locked for good, and the next
  process to touch it, the trainer's own event loop included, blocks forever in C. If the run has not
  stopped ``stop_grace_sec`` after a death, the thread kills the remaining children, prints the same error
  line and ends the process with status 1; checkpoints already written and metrics.csv rows (flushed as
  written) are kept, and the same command resumes.

The env workers' own defences are the memory backstop (`rlgpt.rl.worker_memory`) and the marker.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from signal_slot.signal_slot import EventLoopObject, Timer

from rlgpt.errors import RlgptError
from rlgpt.rl import sf_private
from rlgpt.rl.macro_marker import clear_markers, markers_dir, read_marker, read_marker_since


class WorkerDiedError(RlgptError, RuntimeError):
    """A Sample Factory child process died during training; the message says which, how and doing what."""


def describe_exit(exitcode: int) -> str:
    """``SIGKILL`` for a process killed by a signal, ``exit status N`` otherwise."""
    if exitcode < 0:
        try:
            return signal.Signals(-exitcode).name
        except ValueError:
            return f"signal {-exitcode}"
    return f"exit status {exitcode}"


@dataclass(frozen=True)
class WorkerDeath:
    """What the trainer knows about a child process that died."""

    process: str
    """Sample Factory's process name, e.g. ``rollout_proc0``, ``inference_proc0-0``, ``learner_proc0``."""
    pid: int
    """Its process id."""
    exitcode: int
    """multiprocessing's exit code (negative: killed by that signal)."""
    macro: str | None
    """The macro it was running, ``""`` when none, None when it kept no marker (no macros configured)."""
    hung_s: float = 0.0
    """When the trainer killed it as hung: how long its macro call had run (seconds); 0 otherwise."""

    def describe(self, run_dir: str | os.PathLike) -> str:
        """The one-line error the run ends with."""
        role = {"rollout": "env worker", "inference": "inference worker", "learner": "learner"}.get(
            self.process.split("_", 1)[0], "worker"
        )
        what = ""
        if self.hung_s:
            what = f": killed as hung, a call of macro {self.macro!r} ran {self.hung_s:.0f} s without ending"
        elif self.macro:
            what = f" while running macro {self.macro!r}"
        elif self.macro == "":
            what = " while no macro was running"
        return (
            f"{role} {self.pid} ({self.process}) died ({describe_exit(self.exitcode)}){what}; "
            f"checkpoints and metrics kept in {os.fspath(run_dir)}, re-run the same command to resume"
        )


class WorkerWatch(EventLoopObject):
    """Checks the runner's child processes every ``period_s`` on its event loop; stops the run on a death."""

    def __init__(self, runner: Any, run_dir: str | os.PathLike, period_s: float = 1.0,
                 hang_s: float = 0.0) -> None:
        super().__init__(runner.event_loop, "rlgpt_worker_watch")
        self.runner = runner
        self.run_dir = Path(run_dir)
        self.hang_s = float(hang_s)
        self.hung: dict[int, float] = {}
        """Pids this watch killed as hung, with how long their macro call had run."""
        self.death: WorkerDeath | None = None
        self.timer = Timer(runner.event_loop, period_s)
        self.timer.timeout.connect(self.check)
        runner.timers.append(self.timer)  # the runner stops its timers when training stops

    def _processes(self) -> list[Any]:
        sampler = getattr(self.runner, "sampler", None)
        return list(getattr(self.runner, "processes", [])) + list(getattr(sampler, "processes", []))

    def check(self) -> None:
        """Record the first dead child and stop training (the learner saves a last checkpoint if alive)."""
        if self.death is not None or self.runner.stopped:
            return
        for proc in self._processes():
            exitcode = proc.exitcode if not proc.is_alive() else None
            if exitcode is None:  # alive or not started yet
                self._kill_if_hung(proc)
                continue
            macro = read_marker(markers_dir(self.run_dir) / str(proc.pid))
            self.death = WorkerDeath(proc.name, proc.pid, exitcode, macro, self.hung.get(proc.pid, 0.0))
            from sample_factory.utils.utils import log

            log.info("rlgpt: %s", self.death.describe(self.run_dir))  # the console gets it once, from the CLI
            self._stop_sending_to(proc)
            sf_private.stop_training(self.runner, failed=True)
            self._release_batchers_of(proc)
            return

    def _kill_if_hung(self, proc: Any) -> None:
        """SIGKILL a live worker whose marker says one macro call has run for `hang_s` (the next check then
        sees it dead and stops the run the usual way, naming the macro)."""
        if not self.hang_s or proc.pid is None or proc.pid in self.hung:
            return
        found = read_marker_since(markers_dir(self.run_dir) / str(proc.pid))
        if not found or not found[0]:
            return
        ran = time.monotonic() - found[1]
        if ran >= self.hang_s:
            self.hung[proc.pid] = ran
            try:
                os.kill(proc.pid, signal.SIGKILL)
            except OSError:
                pass

    def _stop_sending_to(self, proc: Any) -> None:
        """Drop the trainer's routes into the dead process's event-loop queue.

        Stopping the run emits ``stop`` to every component, the dead one included; if the process died while
        it held its own queue's lock (it reads that queue all the time), that one write would block the
        trainer forever. Nobody reads the queue any more, so nothing is lost by not writing to it.
        """
        dead_queue = getattr(getattr(proc, "event_loop", None), "signal_queue", None)
        if dead_queue is None:
            return
        for obj in list(self.runner.event_loop.objects.values()):
            queues = getattr(obj, "receiver_queues", {})
            dead_ids = {rid for rid, q in queues.items() if q is dead_queue}
            if dead_ids:
                for receivers in obj.send_signals_to.values():
                    receivers.difference_update(dead_ids)

    def processes(self) -> list[Any]:
        """The Sample Factory child processes watched (learner, inference and rollout workers)."""
        return self._processes()

    def _release_batchers_of(self, proc: Any) -> None:
        """Count a dead learner's batcher as stopped.

        The batcher is a thread of its learner's process; the runner cannot see it die (its process is
        unknown in the trainer), so it would wait for the batcher's stop message forever.
        """
        for policy_id, learner in getattr(self.runner, "learners", {}).items():
            batcher = self.runner.batchers.get(policy_id)
            if learner.event_loop.process is proc and batcher in self.runner.components_to_stop:
                sf_private.component_stopped(self.runner, batcher.object_id)


class StopDeadline(threading.Thread):
    """Ends the trainer process if a run with a dead child has not stopped ``grace_s`` seconds after it died.

    A daemon thread, so that it runs while the main thread is blocked in C on a queue lock a dead process
    left held (faster-fifo releases the GIL there). It is armed by the death `WorkerWatch` recorded
    (``recorded_death``), or by a child it sees dead itself while the run is not stopping (a trainer whose own
    event loop is stuck never runs the watch); :meth:`finish` disarms it once Sample Factory's run loop
    returns. When it fires it kills every child still alive, calls ``before_exit`` (closes the progress
    line), clears the workers' markers, writes ``rlgpt: error: <what died>`` to stderr and exits with status
    1, as the CLI would have.
    """

    def __init__(
        self,
        processes: Callable[[], list[Any]],
        run_dir: str | os.PathLike,
        grace_s: float,
        recorded_death: Callable[[], WorkerDeath | None] = lambda: None,
        stopping: Callable[[], bool] = lambda: False,
        before_exit: Callable[[], None] | None = None,
        poll_s: float = 0.25,
    ) -> None:
        super().__init__(name="rlgpt-stop-deadline", daemon=True)
        self.processes = processes
        self.run_dir = Path(run_dir)
        self.grace_s = float(grace_s)
        self.recorded_death = recorded_death
        self.stopping = stopping
        self.before_exit = before_exit
        self.poll_s = poll_s
        self._finished = threading.Event()
        self.death: WorkerDeath | None = None

    def finish(self) -> None:
        """The run loop returned: nothing left to guard."""
        self._finished.set()

    def _first_dead(self) -> WorkerDeath | None:
        for proc in self.processes():
            exitcode = proc.exitcode
            if exitcode is not None:
                macro = read_marker(markers_dir(self.run_dir) / str(proc.pid))
                return WorkerDeath(proc.name, proc.pid, exitcode, macro)
        return None

    def run(self) -> None:
        armed_at = None
        while not self._finished.wait(self.poll_s):
            if armed_at is None:
                death = self.recorded_death()
                if death is None and not self.stopping():
                    death = self._first_dead()
                if death is not None:
                    self.death, armed_at = death, time.monotonic()
            elif time.monotonic() - armed_at >= self.grace_s:
                self._abandon()

    def _abandon(self) -> None:
        for proc in self.processes():
            if proc.exitcode is None:
                try:
                    os.kill(proc.pid, signal.SIGKILL)
                except OSError:
                    pass
        try:
            if self.before_exit is not None:
                self.before_exit()
            clear_markers(self.run_dir)
        finally:
            assert self.death is not None
            os.write(2, f"rlgpt: error: {self.death.describe(self.run_dir)}\n".encode())
            os._exit(1)
