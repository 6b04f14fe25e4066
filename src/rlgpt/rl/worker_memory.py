"""The memory backstop of Sample Factory's env workers, for code (macros, a dense reward) no check
anticipated: an env worker that runs generated code caps its data segment (``RLIMIT_DATA``) at its size
when its first env is made plus ``macros.memory_limit_mb``. A macro that allocates past it gets a
``MemoryError``, which the macro runtime turns into one failed call (``memory`` diagnostic); the worker,
and the run, go on. ``RLIMIT_DATA`` rather than ``RLIMIT_AS``: a worker maps ~1 GB of address space it
never uses (torch, numba, shared buffers) but only ~200 MB of data.

One of three always-on defences around the worker processes; the others are the running-macro marker
(`rlgpt.rl.macro_marker`) and the trainer's watch (`rlgpt.rl.worker_watch`)."""

from __future__ import annotations

import os
import resource
import sys
from typing import Any

from rlgpt.procs import limit_memory, memory_in_use


def is_sf_child_process() -> bool:
    """True in a process started by multiprocessing's spawn method (Sample Factory's workers).

    While a spawned child unpickles its target (and so imports rlgpt modules), ``parent_process()`` is not
    set yet and ``sys.argv`` is still the parent's; the interpreter's own command line tells.
    """
    return "--multiprocessing-fork" in sys.orig_argv


def data_segment_bytes() -> int | None:
    """This process's data segment as ``RLIMIT_DATA`` counts it (``VmData``), or None where unknown."""
    return memory_in_use(resource.RLIMIT_DATA)


def set_memory_limit(headroom_mb: int) -> int | None:
    """Cap this process's data segment at its current size plus ``headroom_mb`` MiB (soft ``RLIMIT_DATA``,
    `rlgpt.procs.limit_memory`: never raised, the hard limit left alone). Returns the limit in bytes, or
    None when ``headroom_mb <= 0`` or the platform cannot tell the current size."""
    return limit_memory(resource.RLIMIT_DATA, headroom_mb)


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
