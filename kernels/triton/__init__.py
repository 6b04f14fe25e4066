"""Triton kernels for the policy's hot path (imported only by :mod:`rlgpt.kernels.dispatch` on CUDA, or by
tests under ``TRITON_INTERPRET=1``): importing this package needs ``triton``, and ``@triton.jit`` reads
``TRITON_INTERPRET`` when the kernels are defined, i.e. at import time.
"""

from rlgpt.kernels.triton.gae import gae, normalize_advantages
from rlgpt.kernels.triton.linear_act import linear_act
from rlgpt.kernels.triton.ppo_loss import ppo_loss

__all__ = ["gae", "linear_act", "normalize_advantages", "ppo_loss"]
