"""Fused ops for the policy's hot path: Triton kernels on CUDA, the measured-fastest PyTorch path on CPU.

Use the ops through :mod:`rlgpt.kernels.dispatch` (or the re-exports here) and the layers through
:mod:`rlgpt.kernels.modules`; :mod:`rlgpt.kernels.reference` defines what each op computes, and
``rlgpt.kernels.triton`` (imported only on demand) holds the kernels.
"""

from rlgpt.kernels.dispatch import (
    embed_conv,
    gae,
    get_backend,
    linear_act,
    normalize_advantages,
    ppo_loss,
    set_backend,
    triton_available,
    use_backend,
)
from rlgpt.kernels.modules import FusedLinearAct

__all__ = [
    "FusedLinearAct",
    "embed_conv",
    "gae",
    "get_backend",
    "linear_act",
    "normalize_advantages",
    "ppo_loss",
    "set_backend",
    "triton_available",
    "use_backend",
]
