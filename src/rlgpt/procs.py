"""Process utilities shared across the package's layers (LLM servers, trainers, training jobs)."""

from __future__ import annotations

import ctypes
import signal
import sys

_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """Ask Linux to SIGKILL this process when the process that started it dies (a no-op elsewhere).

    Used as the ``preexec_fn`` of model servers and training jobs, and at import in Sample Factory's
    children, so that a killed ``rlgpt`` command (SIGKILL included) leaves no server, trainer or worker
    behind burning the CPU.
    """
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
