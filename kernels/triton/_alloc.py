"""The single allocator for every kernel output and partial-sum buffer, and the fp32 input conversion.

Buffers are uninitialized (the kernels must write every element); routing all allocations through
:func:`empty` lets the tests swap in NaN-filled buffers and prove that nothing is left unwritten.
"""

from __future__ import annotations

import torch


def empty(*shape: int, device: torch.device) -> torch.Tensor:
    """An uninitialized fp32 buffer of ``shape`` on ``device``."""
    return torch.empty(shape, device=device, dtype=torch.float32)


def f32(t: torch.Tensor) -> torch.Tensor:
    """``t`` as a contiguous fp32 tensor outside autograd (a no-op for one already); kernels index it flat."""
    return t.detach().to(torch.float32).contiguous()
