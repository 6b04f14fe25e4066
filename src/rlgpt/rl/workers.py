"""Defence in depth around Sample Factory's worker processes, for code (macros) no check anticipated.

Three layers, each cheap enough to be always on:

- **Memory backstop** (:func:`set_memory_limit`): an env worker that runs macros caps its data segment
  (``RLIMIT_DATA``) at its size when its first env is made plus ``macros.memory_limit_mb``. A macro that
  allocates past it gets a ``MemoryError``, which the macro runtime turns into one failed call (``memory``
  diagnostic); the worker, and the run, go on. ``RLIMIT_DATA`` rather than ``RLIMIT_AS``: a worker maps
  ~1 GB of address space it never uses (torch, numba, shared buffers) but only ~200 MB of data.
- **Running-macro marker** (:class:`MacroMarker`, :class:`MarkRunningMacro`): each env worker keeps a
  fixed-size memory-mapped file ``RUN_DIR/.workers/<pid>`` saying which macro it is running. Its page
  survives the process, so when a worker dies the trainer can still tell which macro was running.
- **Watch** (:class:`WorkerWatch`): a timer on the trainer's event loop notices a dead Sample Factory child
  (and kills an env worker whose marker says one macro call has run for ``macros.hang_seconds``: a hung
  call, e.g. a loop that takes no game step, would otherwise stall the run at 0 FPS for good),
  stops the run the normal way (the learner saves a checkpoint if it is alive; metrics.csv rows are
  flushed as written) and :func:`rlgpt.rl.train.train` raises :class:`WorkerDiedError` naming the worker,
  how it died and the macro it was running. The same command resumes. Sample Factory 2.1.1 alone does not
  notice: with its only env worker SIGKILLed, training stalls at 0 FPS while the learner keeps re-saving
  the same checkpoint (its heartbeat check stops a run only once every component of a kind has been silent
  for ``heartbeat_reporting_interval``, 600 s here), and with its learner dead even a clean stop hangs.
- **Stop deadline** (:class:`StopDeadline`): a thread of the trainer that bounds that stop. Sample Factory's
  processes talk through faster-fifo queues guarded by process-shared mutexes that are not robust: a process
  killed while it holds one (mid-``put`` or mid-``get``) leaves that queue locked for good, and the next
  process to touch it, the trainer's own event loop included, blocks forever in C. If the run has not
  stopped ``stop_grace_sec`` after a death, the thread kills the remaining children, prints the same error
  line and ends the process with status 1; checkpoints already written and metrics.csv rows (flushed as
  written) are kept, and the same command resumes.
"""

from __future__ import annotations

import mmap
import os
import resource
import shutil
import signal
import struct
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
from signal_slot.signal_slot import EventLoopObject, Timer

from rlgpt import layout
from rlgpt.errors import RlgptError
from rlgpt.procs import limit_memory, memory_in_use
from rlgpt.rl import sf_private

_MARKER_SIZE = 256
_IDLE, _RUNNING = 0, 1
_SINCE = struct.Struct("<d")
"""Bytes 1-8 of a marker: when the running macro call started (``time.monotonic``, system-wide on Linux)."""
_NAME_AT = 1 + _SINCE.size


def is_sf_child_process() -> bool:
    """True in a process started by multiprocessing's spawn method (Sample Factory's workers).

    While a spawned child unpickles its target (and so imports rlgpt modules), ``parent_process()`` is not
    set yet and ``sys.argv`` is still the parent's; the interpreter's own command line tells.
    """
    return "--multiprocessing-fork" in sys.orig_argv


# -- memory backstop ---------------------------------------------------------------------------------------


def data_segment_bytes() -> int | None:
    """This process's data segment as ``RLIMIT_DATA`` counts it (``VmData``), or None where unknown."""
    return memory_in_use(resource.RLIMIT_DATA)


def set_memory_limit(headroom_mb: int) -> int | None:
    """Cap this process's data segment at its current size plus ``headroom_mb`` MiB (soft ``RLIMIT_DATA``,
    `rlgpt.procs.limit_memory`: never raised, the hard limit left alone). Returns the limit in bytes, or
    None when ``headroom_mb <= 0`` or the platform cannot tell the current size."""
    return limit_memory(resource.RLIMIT_DATA, headroom_mb)


# -- running-macro marker ----------------------------------------------------------------------------------


def markers_dir(run_dir: str | os.PathLike) -> Path:
    """Where the env workers of a run keep their markers."""
    return Path(run_dir) / layout.WORKER_MARKERS


def clear_markers(run_dir: str | os.PathLike) -> None:
    """Remove the markers of a run's (finished or dead) workers."""
    shutil.rmtree(markers_dir(run_dir), ignore_errors=True)


class MacroMarker:
    """A worker process's marker: byte 0 says running/idle, bytes 1-8 when the running call started, then
    the macro name, NUL-terminated.

    Setting and clearing are writes into a shared memory mapping (no system call): well under a microsecond.
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o666)
        try:
            os.ftruncate(fd, _MARKER_SIZE)
            self._map = mmap.mmap(fd, _MARKER_SIZE)
        finally:
            os.close(fd)

    @staticmethod
    def encode(name: str) -> bytes:
        """The bytes :meth:`running` writes for ``name`` (precomputed once per macro)."""
        return name.encode()[: _MARKER_SIZE - _NAME_AT - 1] + b"\0"

    def running(self, encoded_name: bytes) -> None:
        """Mark a macro (from :meth:`encode`) as running since now; the name and start time are in place
        before the flag is set."""
        self._map[_NAME_AT : _NAME_AT + len(encoded_name)] = encoded_name
        _SINCE.pack_into(self._map, 1, time.monotonic())
        self._map[0] = _RUNNING

    def rename(self, encoded_name: bytes) -> None:
        """Name another macro as the one running, keeping the time the running call(s) started (a batch of
        games runs several macro calls side by side: the marker names the one whose code runs)."""
        self._map[_NAME_AT : _NAME_AT + len(encoded_name)] = encoded_name

    def idle(self) -> None:
        """Mark that no macro is running."""
        self._map[0] = _IDLE

    def close(self) -> None:
        self._map.close()


def read_marker(path: str | os.PathLike) -> str | None:
    """The macro a marker says is running, ``""`` when idle, None when there is no (valid) marker."""
    found = read_marker_since(path)
    return None if found is None else found[0]


def read_marker_since(path: str | os.PathLike) -> tuple[str, float] | None:
    """The running macro and when its call started (``time.monotonic``); ``("", 0.0)`` when idle, None when
    there is no (valid) marker."""
    try:
        data = Path(path).read_bytes()
    except OSError:
        return None
    if len(data) != _MARKER_SIZE:
        return None
    if data[0] != _RUNNING:
        return "", 0.0
    return data[_NAME_AT:].split(b"\0", 1)[0].decode(errors="replace"), _SINCE.unpack_from(data, 1)[0]


_process_marker: tuple[int, MacroMarker] | None = None


def process_marker(run_dir: str | os.PathLike) -> MacroMarker:
    """This process's marker in ``run_dir`` (one per process, shared by all envs the worker steps)."""
    global _process_marker
    if _process_marker is None or _process_marker[0] != os.getpid():
        _process_marker = (os.getpid(), MacroMarker(markers_dir(run_dir) / str(os.getpid())))
    return _process_marker[1]


class MarkRunningMacro(gym.Wrapper):
    """Around a :class:`~rlgpt.macro.runtime.MacroActionWrapper`: marks the macro running while it runs.

    The marker is deliberately not cleared when the step raises: a worker that dies of that exception was
    running the macro.
    """

    def __init__(self, env: gym.Env, marker: MacroMarker) -> None:
        super().__init__(env)
        self.marker = marker
        self.n_primitive = int(env.get_wrapper_attr("n_primitive"))
        self._names = [MacroMarker.encode(m.name) for m in env.get_wrapper_attr("compiled")]

    def step(self, action: Any):
        index = int(action) - self.n_primitive
        if not 0 <= index < len(self._names):
            return self.env.step(action)
        self.marker.running(self._names[index])
        out = self.env.step(action)
        self.marker.idle()
        return out


# -- the trainer's watch -----------------------------------------------------------------------------------


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


# -- the hook in the env factory ---------------------------------------------------------------------------

_limited_pid: int | None = None


def limit_worker_memory(cfg: Any) -> None:
    """In a Sample Factory env worker that runs generated code (macros or a dense reward), apply the memory
    backstop once per process; a no-op elsewhere (a process-wide limit would cap the caller)."""
    global _limited_pid
    if not is_sf_child_process() or _limited_pid == os.getpid():
        return
    _limited_pid = os.getpid()
    from rlgpt.rl.worker_config import worker_config

    limit = set_memory_limit(worker_config(cfg).train.macros.memory_limit_mb)
    if limit is not None:
        from sample_factory.utils.utils import log

        log.debug("env worker %d: data segment limited to %d MiB (RLIMIT_DATA)", os.getpid(), limit >> 20)


def worker_marker(cfg: Any) -> MacroMarker | None:
    """In a Sample Factory env worker that runs macros: apply the memory backstop (once per process) and
    return the worker's running-macro marker. Elsewhere (evaluation in the caller's own process, tests)
    None, and no limit: a process-wide limit there would cap the caller."""
    if not is_sf_child_process():
        return None
    limit_worker_memory(cfg)
    from sample_factory.utils.utils import experiment_dir

    return process_marker(experiment_dir(cfg, mkdir=False))


def protect_macro_env(env: gym.Env, cfg: Any) -> gym.Env:
    """``env`` (the `MacroActionWrapper`) marking its running macros in a Sample Factory env worker, with the
    memory backstop applied (`worker_marker`); elsewhere ``env`` as is."""
    marker = worker_marker(cfg)
    return env if marker is None else MarkRunningMacro(env, marker)
