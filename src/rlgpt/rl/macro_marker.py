"""The running-macro marker of Sample Factory's env workers (:class:`MacroMarker`,
:class:`MarkRunningMacro`): each env worker keeps a fixed-size memory-mapped file ``RUN_DIR/.workers/<pid>``
saying which macro it is running. Its page survives the process, so when a worker dies the trainer can
still tell which macro was running (`rlgpt.rl.worker_watch`), and kill a worker whose macro call has run
too long."""

from __future__ import annotations

import mmap
import os
import shutil
import struct
import time
from pathlib import Path
from typing import Any

import gymnasium as gym

from rlgpt import layout
from rlgpt.rl.worker_memory import is_sf_child_process, limit_worker_memory

_MARKER_SIZE = 256
_IDLE, _RUNNING = 0, 1
_SINCE = struct.Struct("<d")
"""Bytes 1-8 of a marker: when the running macro call started (``time.monotonic``, system-wide on Linux)."""
_NAME_AT = 1 + _SINCE.size


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
