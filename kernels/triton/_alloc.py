"""The single allocator for every kernel output and partial-sum buffer.

Buffers are uninitialized (the kernels must write every element); routing all allocations through
:func:`empty` lets the tests swap in NaN-filled buffers and prove that nothing is left unwritten.
"""

from __future__ import annotations

import torch


def empty(*shape: int, device: torch.device) -> torch.Tensor:
    """An uninitialized fp32 buffer of ``shape`` on ``device``."""
    return torch.empty(shape, device=device, dtype=torch.float32)
