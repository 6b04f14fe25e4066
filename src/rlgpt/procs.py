"""Process utilities shared across the package's layers (LLM servers, trainers, training jobs)."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
from collections.abc import Iterator

_PR_SET_PDEATHSIG = 1


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
