"""The dispatcher: CPU never reaches Triton's compiler, the package works without triton, backends switch."""

import os
import subprocess
import sys
import textwrap

import pytest
import torch

from rlgpt.kernels import dispatch, reference

# Runs every op and the fused layer (forward + backward) on CPU with the default backend.
_EXERCISE_CPU = """
import torch
from rlgpt.kernels import dispatch, FusedLinearAct
layer = FusedLinearAct(12, 8, "elu", layer_norm=True)
layer(torch.randn(5, 12, requires_grad=True)).sum().backward()
e, t = 3, 4
adv, ret = dispatch.gae(torch.randn(e, t), torch.zeros(e, t), torch.randn(e, t + 1), torch.ones(e, t + 1),
                        0.99, 0.95, torch.full((e, t), 0.98), normalize=True)
dispatch.normalize_advantages(adv.flatten())
lp = torch.randn(6, requires_grad=True)
v = torch.randn(6, requires_grad=True)
sum(dispatch.ppo_loss(lp, torch.randn(6), torch.randn(6), v, torch.randn(6), torch.randn(6))).backward()
assert lp.grad is not None and v.grad is not None
"""


def _run(*parts: str, **env: str) -> subprocess.CompletedProcess:
    code = "\n".join(textwrap.dedent(part) for part in parts)
    environ = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "RLGPT_KERNELS")}
    environ.update(env)
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=environ, timeout=300
    )


def test_cpu_never_compiles_triton():
    """Production condition on this box: no GPU, no interpreter. Triton's compile entry points are made to
    fail loudly; the default backend must not reach them, nor even import the kernels, and an explicit
    'triton' backend must refuse with a clear error instead of trying to compile."""
    pytest.importorskip("triton", reason="triton is not installed (pip install 'rlgpt[kernels]')")
    code = """
    import sys
    import triton, triton.compiler, triton.compiler.compiler, triton.runtime.jit
    calls = []
    def refuse(*args, **kwargs):
        calls.append(args)
        raise AssertionError("Triton compiler reached on a CPU-only machine")
    triton.compiler.compile = triton.compiler.compiler.compile = refuse
    triton.runtime.jit.JITFunction.run = refuse
    """
    check = """
    assert "rlgpt.kernels.triton" not in sys.modules, "kernels imported on CPU"
    dispatch.set_backend("triton")
    try:
        dispatch.linear_act(torch.randn(2, 3), torch.randn(4, 3), None)
    except RuntimeError as err:
        assert "TRITON_INTERPRET" in str(err), err
    else:
        raise AssertionError("backend 'triton' on CPU without the interpreter did not refuse")
    assert not calls, calls
    print("OK")
    """
    result = _run(code, _EXERCISE_CPU, check)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().endswith("OK")


def test_package_works_without_triton():
    """triton is an optional extra: without it everything but the 'triton' backend works."""
    code = """
    import sys
    sys.modules["triton"] = None  # makes `import triton` raise ImportError, as if not installed
    """
    check = """
    assert not dispatch.triton_available()
    dispatch.set_backend("triton")
    try:
        dispatch.ppo_loss(*[torch.randn(3) for _ in range(6)])
    except RuntimeError as err:
        assert "needs the triton package" in str(err), err
    else:
        raise AssertionError("backend 'triton' without triton did not refuse")
    print("OK")
    """
    result = _run(code, _EXERCISE_CPU, check)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().endswith("OK")


def test_backend_from_environment_and_validation(monkeypatch):
    monkeypatch.setenv("RLGPT_KERNELS", "torch")
    assert dispatch.backend_from_env() == "torch"
    monkeypatch.delenv("RLGPT_KERNELS")
    assert dispatch.backend_from_env() == "auto"
    monkeypatch.setenv("RLGPT_KERNELS", "cuda")
    with pytest.raises(ValueError, match="kernel backend must be one of"):
        dispatch.backend_from_env()
    with pytest.raises(ValueError, match="must be one of"):
        dispatch.set_backend("fast")
    before = dispatch.get_backend()
    with dispatch.use_backend("torch"):
        assert dispatch.get_backend() == "torch"
    assert dispatch.get_backend() == before


def test_cpu_dispatch_uses_the_measured_choice(monkeypatch):
    """The CPU path is whatever CPU_CHOICE names (so the bench's measurement is what runs)."""
    called = []
    monkeypatch.setitem(dispatch.cpu.CPU_CHOICE, "gae", "fused_ops")
    monkeypatch.setattr(dispatch.cpu, "gae_fused_ops", lambda *a: called.append(a) or reference.gae(*a))
    rewards = torch.randn(2, 3, dtype=torch.float64)
    dones = torch.zeros(2, 3)
    values = torch.randn(2, 4, dtype=torch.float64)
    valids = torch.ones(2, 4)
    with dispatch.use_backend("auto"):
        adv, _ = dispatch.gae(rewards, dones, values, valids, 0.9, 0.9, normalize=True)
    assert len(called) == 1
    raw, _ = reference.gae(rewards, dones, values, valids, 0.9, 0.9)
    torch.testing.assert_close(adv, reference.normalize_advantages(raw, valids[:, :-1]))


def test_triton_backend_on_cpu_runs_the_interpreted_kernels(kernels, monkeypatch):
    """Under the interpreter an explicit 'triton' backend really runs the kernels (not the torch path)."""
    launched = []
    original = kernels.ppo_loss
    monkeypatch.setattr(kernels, "ppo_loss", lambda *a: launched.append(1) or original(*a))
    inputs = [torch.randn(9) for _ in range(6)]
    with dispatch.use_backend("triton"):
        policy, value = dispatch.ppo_loss(*inputs)
    assert launched == [1]
    policy_ref, value_ref = reference.ppo_loss(*[t.double() for t in inputs])
    torch.testing.assert_close(policy.double(), policy_ref, atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(value.double(), value_ref, atol=1e-6, rtol=1e-6)


def test_layernorm_wider_than_the_fused_limit_runs_in_torch(kernels, monkeypatch):
    launched = []
    original = kernels.linear_act
    monkeypatch.setattr(kernels, "linear_act", lambda *a: launched.append(a[1].shape[0]) or original(*a))
    n = dispatch.MAX_LAYER_NORM_WIDTH
    with dispatch.use_backend("triton"):
        for width in (n, n + 1):
            x, w = torch.randn(2, 3), torch.randn(width, 3)
            y = dispatch.linear_act(x, w, None, "elu", layer_norm=True)
            torch.testing.assert_close(
                y, reference.linear_act(x, w, None, "elu", layer_norm=True), atol=1e-5, rtol=1e-5
            )
    assert launched == [n]


def test_auto_on_cuda_runs_triton_only_for_the_ops_measured_faster(monkeypatch):
    # No GPU here: a stand-in with what the decision reads of a CUDA fp32 tensor.
    class CudaTensor:
        is_cuda, dtype = True, torch.float32

        def is_floating_point(self):
            return True

        def numel(self):
            return 1024

    monkeypatch.setattr(dispatch, "triton_available", lambda: True)
    with dispatch.use_backend("auto"):
        chosen = {op: dispatch._use_triton(op, CudaTensor()) for op in dispatch.CUDA_TRITON}
    # bench/RESULTS.md "Triton kernels on a real GPU": the fused linear layers lost to eager at these sizes.
    assert chosen == {"linear_act": False, "gae": True, "normalize_advantages": True, "ppo_loss": True}
    with dispatch.use_backend("torch"):
        assert not any(dispatch._use_triton(op, CudaTensor()) for op in dispatch.CUDA_TRITON)
