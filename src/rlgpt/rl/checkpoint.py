"""Loading Sample Factory checkpoints under torch>=2.6.

torch 2.6 made ``torch.load(weights_only=True)`` the default. Sample Factory 2.1.1 checkpoints hold numpy
scalars (e.g. ``best_performance``), which the safe unpickler refuses, and SF's learner then logs the
exception and silently starts from scratch. Rather than turning safety off globally, the few numpy
globals those checkpoints need are allow-listed (:func:`install_allow_list`, called by every loader here and
in every Sample Factory process, `rlgpt.rl.worker_boot`).
"""

from __future__ import annotations

import glob
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import torch
from sample_factory.utils.attr_dict import AttrDict

from rlgpt import layout
from rlgpt.errors import RlgptError

_NUMPY_SAFE_GLOBALS: list[Any] = [
    np.core.multiarray.scalar,
    np.dtype,
    *sorted({type(np.dtype(t)) for t in (np.float64, np.float32, np.int64, np.int32, np.bool_)}, key=str),
]


def install_allow_list() -> None:
    """Let ``torch.load(weights_only=True)`` read the numpy scalars of Sample Factory's checkpoints."""
    torch.serialization.add_safe_globals(_NUMPY_SAFE_GLOBALS)


class CheckpointError(RlgptError, RuntimeError):
    """No usable checkpoint in a run directory."""


def latest_checkpoint(run_dir: str | os.PathLike, policy_id: int = 0, kind: str = "checkpoint") -> str:
    """Path of the newest ``checkpoint_*.pth`` (or ``best_*``) of a Sample Factory run."""
    # `.pth` leaves out the `<kind>_temp` file Sample Factory writes before renaming it into place.
    pattern = os.path.join(os.fspath(run_dir), f"checkpoint_p{policy_id}", f"{kind}_*.pth")
    found = sorted(glob.glob(pattern))
    if not found:
        raise CheckpointError(f"no {kind} in {os.fspath(run_dir)!r} (looked for {pattern})")
    return found[-1]


def load_checkpoint(path: str | os.PathLike, device: str = "cpu") -> dict[str, Any]:
    """Load a checkpoint with torch's safe (weights-only) unpickler."""
    install_allow_list()
    return torch.load(path, map_location=device, weights_only=True)


def remove_partial_checkpoints(run_dir: str | os.PathLike) -> list[str]:
    """Delete the ``checkpoint_temp``/``best_temp`` files a process killed mid-save left; return their paths.

    Sample Factory saves to ``<kind>_temp`` and then renames it, but on resume it loads the newest file
    matching ``<kind>_*``, which is the temp file: a torn one fails to load and the run silently starts
    from scratch.
    """
    found = glob.glob(os.path.join(os.fspath(run_dir), "checkpoint_p*", "*_temp"))
    for path in found:
        os.remove(path)
    return found


class EvalError(RlgptError, RuntimeError):
    """The run directory cannot be evaluated or played (missing config or checkpoint)."""


def load_sf_config(run_dir: Path) -> AttrDict:
    """The Sample Factory config a run was trained with."""
    path = run_dir / layout.SF_CONFIG
    if not path.is_file():
        raise EvalError(f"{str(run_dir)!r} is not a training run directory (no {layout.SF_CONFIG})")
    return AttrDict(json.loads(path.read_text()))
