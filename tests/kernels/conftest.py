"""Kernel tests run the Triton kernels on the CPU under Triton's interpreter.

``@triton.jit`` reads ``TRITON_INTERPRET`` when a kernel is *defined* (i.e. when
``rlgpt.kernels.triton`` is imported), so it is set here, before any test module imports the kernels.
The interpreter is ~1000x slower than a GPU: every shape in these tests is tiny.
"""

import importlib
import os

import pytest
import torch

os.environ["TRITON_INTERPRET"] = "1"


@pytest.fixture
def kernels():
    """The Triton kernel package (skipped only when triton is not installed at all)."""
    pytest.importorskip("triton", reason="triton is not installed (pip install 'rlgpt[kernels]')")
    from triton.runtime.interpreter import InterpretedFunction

    import rlgpt.kernels.triton as kernels

    module = importlib.import_module("rlgpt.kernels.triton.linear_act")
    assert isinstance(module._linear_act_fwd_kernel, InterpretedFunction), (
        "rlgpt.kernels.triton was imported before TRITON_INTERPRET=1 was set"
    )
    return kernels


@pytest.fixture
def nan_buffers(kernels, monkeypatch):
    """Every kernel output / partial buffer starts as NaN: any element a kernel fails to write stays NaN."""
    from rlgpt.kernels.triton import _alloc

    def empty(*shape, device):
        return torch.full(shape, float("nan"), device=device, dtype=torch.float32)

    monkeypatch.setattr(_alloc, "empty", empty)
    return kernels
