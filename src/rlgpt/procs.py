"""Process utilities shared across the package's layers (LLM servers, trainers, training jobs): dying with
the parent, and the resource limits (memory, CPU) generated code runs under."""

from __future__ import annotations

import contextlib
import ctypes
import os
import resource
import signal
import sys
from collections.abc import Iterator

_PR_SET_PDEATHSIG = 1


class Terminated(KeyboardInterrupt):
    """SIGTERM (`kill PID`, a scheduler's stop) raised as a KeyboardInterrupt, so that every command stops
    the way Ctrl-C stops it. Unlike Ctrl-C, which the whole process group gets, it reached this process
    only: a child that should stop gets it passed on (`rlgpt.run.executor.stop_child`)."""


def raise_terminated(signum: int, frame: object) -> None:
    """A SIGTERM handler: raise `Terminated`."""
    raise Terminated(f"signal {signum}")


def die_with_parent() -> None:
    """Ask Linux to SIGKILL this process when the process that started it dies (a no-op elsewhere).

    Used as the ``preexec_fn`` of model servers and training jobs, and at import in Sample Factory's
    children, so that a killed ``rlgpt`` command (SIGKILL included) leaves no server, trainer or worker
    behind burning the CPU.
    """
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


@contextlib.contextmanager
def stderr_to(path: str | os.PathLike[str]) -> Iterator[None]:
    """Send this process's standard error to the file `path` (appended) for the block, at the descriptor
    level: what native libraries write there (llama.cpp's load and context warnings, printed by C code or
    by llama-cpp-python's log callback) lands in the file, not on the console."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(path, "ab") as log:
            os.dup2(log.fileno(), 2)
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


_STATUS_FIELDS = {resource.RLIMIT_DATA: "VmData", resource.RLIMIT_AS: "VmSize"}
"""The line of ``/proc/self/status`` that holds what each memory limit counts."""


def memory_in_use(which: int) -> int | None:
    """Bytes this process uses as memory limit ``which`` (``RLIMIT_DATA``: the data segment, ``VmData``;
    ``RLIMIT_AS``: the address space, ``VmSize``) counts them, or None where the platform cannot tell."""
    field = _STATUS_FIELDS[which] + ":"
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def lower_limit(which: int, soft: int, extra: int | None = None) -> int:
    """Lower resource ``which``'s soft limit to ``soft`` (never raise it: a tighter one is kept, and the
    hard limit caps it); with ``extra``, also the hard limit to ``soft + extra`` (``RLIMIT_CPU``: SIGXCPU at
    the soft limit, SIGKILL at the hard one). Returns the soft limit now in force."""
    old_soft, hard = resource.getrlimit(which)
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    if old_soft != resource.RLIM_INFINITY and old_soft <= soft:
        return old_soft
    new_hard = hard
    if extra is not None:
        new_hard = soft + extra if hard == resource.RLIM_INFINITY else min(soft + extra, hard)
    resource.setrlimit(which, (soft, new_hard))
    return soft


def limit_memory(which: int, headroom_mb: int) -> int | None:
    """The one memory backstop for generated code: cap this process's memory as ``which`` counts it
    (`memory_in_use`) at its current size plus ``headroom_mb`` MiB (`lower_limit`). Returns the limit in
    force in bytes, or None when ``headroom_mb <= 0`` or the current size is unknown."""
    current = memory_in_use(which) if headroom_mb > 0 else None
    if current is None:
        return None
    return lower_limit(which, current + headroom_mb * 2**20)
