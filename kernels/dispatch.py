"""The one place that decides which implementation of a fused op runs.

- ``auto`` (default): on CUDA fp32 tensors the Triton kernels of the ops they were measured faster for
  (:data:`CUDA_TRITON`) when ``triton`` imports, eager PyTorch for the rest; on CPU the fastest path
  measured by ``bench/kernels.py`` (:data:`rlgpt.kernels.cpu.CPU_CHOICE`).
- ``torch``: never Triton (A/B comparisons, or to rule the kernels out when debugging).
- ``triton``: always Triton; CPU tensors are allowed only under the Triton interpreter
  (``TRITON_INTERPRET=1`` set before the kernels were imported), which is how the tests run them.

Nothing here imports the kernels, let alone compiles one, unless a CUDA tensor (or the interpreter,
by explicit request) gets there: on a CPU-only machine the Triton compiler is never reached.

The backend comes from ``RLGPT_KERNELS`` (inherited by Sample Factory's worker processes), or from
:func:`set_backend` / :func:`use_backend` in-process.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import os
from collections.abc import Callable, Iterator
from types import ModuleType

import torch

from rlgpt.kernels import cpu, reference

BACKENDS = ("auto", "torch", "triton")
ENV_VAR = "RLGPT_KERNELS"
MAX_LAYER_NORM_WIDTH = 512
"""The fused LayerNorm keeps whole rows in one Triton program; wider layers run in PyTorch. 512 is the
widest whose backward compiles without register spills on sm_90 (16 x 512 tile, 8 warps: 172 registers;
16 x 1024 on 16 warps spills), per ``bench/kernels_compile_check.py``."""
CUDA_LINEAR_GEMM = "torch"
"""Who runs the forward GEMM of the fused linear layer on CUDA when it runs in Triton (backend ``triton``):
``"torch"`` (cuBLAS, then bias, LayerNorm and activation as one Triton epilogue kernel) or ``"triton"`` (the
GEMM in the same Triton kernel). Measured on an H200 (bench/RESULTS.md, "Triton kernels on a real GPU"):
the Triton GEMM takes 1.8-1.9x cuBLAS's GPU time at batch 65536 (fp32, no TF32)."""
CUDA_TRITON = {"linear_act": False, "gae": True, "normalize_advantages": True, "ppo_loss": True}
"""Ops whose Triton kernels ``auto`` runs on CUDA, as measured on an H200 (bench/RESULTS.md, "Triton kernels
on a real GPU", forward + backward per call): GAE 3.5-4.9x Sample Factory's TorchScript loop and the PPO
loss 2.0-2.8x eager at every batch; the fused linear layers 0.41-0.62x eager at the learner's batch (1024)
and at most 1.07x at 65536: at these sizes a call is bound by its launches and Python (the kernels took
less GPU time than eager torch everywhere), so the linear layers stay eager on CUDA."""


def _check(name: str) -> str:
    if name not in BACKENDS:
        raise ValueError(
            f"kernel backend must be one of {BACKENDS}, got {name!r} (from {ENV_VAR} or set_backend)"
        )
    return name


def backend_from_env() -> str:
    """The backend ``RLGPT_KERNELS`` names (``auto`` when unset); a bad value fails at import, loudly."""
    return _check(os.environ.get(ENV_VAR, "auto"))


_backend = backend_from_env()


def get_backend() -> str:
    """The backend in force (``auto``, ``torch`` or ``triton``)."""
    return _backend


def set_backend(name: str) -> None:
    """Choose the backend for this process (child processes read ``RLGPT_KERNELS`` instead)."""
    global _backend
    _backend = _check(name)


@contextlib.contextmanager
def use_backend(name: str) -> Iterator[None]:
    """Run a block under another backend, restoring the previous one afterwards."""
    previous = get_backend()
    set_backend(name)
    try:
        yield
    finally:
        set_backend(previous)


@functools.cache
def triton_available() -> bool:
    """True when the ``triton`` package imports (it is an optional extra: ``rlgpt[kernels]``)."""
    if importlib.util.find_spec("triton") is None:
        return False
    try:
        import triton  # noqa: F401
    except Exception:  # a broken install (e.g. a CUDA-only wheel without its libraries) counts as absent
        return False
    return True


def _kernels(on_cpu: bool) -> ModuleType:
    """Import the Triton kernels; on CPU tensors only if they were defined for the interpreter."""
    if not triton_available():
        raise RuntimeError("kernel backend 'triton' needs the triton package (pip install 'rlgpt[kernels]')")
    if on_cpu:
        from triton.runtime.interpreter import InterpretedFunction

        # importlib, not ``from ... import linear_act``: the package re-exports a function of that name.
        module = importlib.import_module("rlgpt.kernels.triton.linear_act")
        if not isinstance(module._linear_act_fwd_kernel, InterpretedFunction):
            raise RuntimeError(
                "Triton kernels on CPU tensors run only under the interpreter: set TRITON_INTERPRET=1 "
                "before rlgpt.kernels.triton is imported (there is no GPU to compile them for)"
            )
    import rlgpt.kernels.triton as kernels

    return kernels


def _use_triton(op: str, *tensors: torch.Tensor | None) -> bool:
    present = [t for t in tensors if t is not None]
    backend = get_backend()
    if backend == "torch":
        return False
    on_cuda = all(t.is_cuda for t in present)
    if backend == "auto":
        return (
            on_cuda
            and CUDA_TRITON[op]
            and all(t.dtype == torch.float32 for t in present if t.is_floating_point())
            and all(t.numel() > 0 for t in present)
            and triton_available()
        )
    _kernels(on_cpu=not on_cuda)
    return True


def _cpu_impl(op: str, impls: dict[str, Callable]) -> Callable:
    return impls[cpu.CPU_CHOICE[op]]


@functools.cache
def _compiled_linear_act(act: str, layer_norm: bool, eps: float) -> Callable:
    """One compiled module per configuration (compiling is seconds; a new module would recompile)."""
    return torch.compile(cpu.LinearActModule(act, layer_norm, eps))


@functools.cache
def _compiled_ppo_loss(clip_ratio: float, clip_value: float, value_loss_coeff: float) -> Callable:
    return torch.compile(cpu.PPOLossModule(clip_ratio, clip_value, value_loss_coeff))


def _linear_act_compiled(
    x, weight, bias, act="elu", ln_weight=None, ln_bias=None, eps=1e-5, layer_norm=False
):
    return _compiled_linear_act(act, layer_norm, eps)(x, weight, bias, ln_weight, ln_bias)


def linear_act(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    act: str = "elu",
    ln_weight: torch.Tensor | None = None,
    ln_bias: torch.Tensor | None = None,
    eps: float = 1e-5,
    layer_norm: bool = False,
) -> torch.Tensor:
    """``act(LayerNorm?(x @ weight.T + bias))`` (see :func:`rlgpt.kernels.reference.linear_act`)."""
    if act not in reference.ACTIVATIONS:
        raise ValueError(f"unknown activation {act!r}; expected one of {reference.ACTIVATIONS}")
    wide_ln = layer_norm and weight.shape[0] > MAX_LAYER_NORM_WIDTH
    if not wide_ln and _use_triton("linear_act", x, weight, bias, ln_weight, ln_bias):
        kernels = _kernels(not x.is_cuda)
        return kernels.linear_act(x, weight, bias, act, ln_weight, ln_bias, eps, layer_norm, CUDA_LINEAR_GEMM)
    if x.is_cuda:
        return reference.linear_act(x, weight, bias, act, ln_weight, ln_bias, eps, layer_norm)
    impl = _cpu_impl(
        "linear_act",
        {
            "eager": reference.linear_act,
            "fused_ops": cpu.linear_act_fused_ops,
            "compiled": _linear_act_compiled,
        },
    )
    return impl(x, weight, bias, act, ln_weight, ln_bias, eps, layer_norm)


def gae(
    rewards: torch.Tensor,
    dones: torch.Tensor,
    values: torch.Tensor,
    valids: torch.Tensor,
    gamma: float,
    lam: float,
    discounts: torch.Tensor | None = None,
    normalize: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(advantages, returns)`` over ``[E, T]`` trajectories (see :func:`rlgpt.kernels.reference.gae`).

    ``discounts`` is the optional per-step discount (``gamma**k`` for a ``k``-step macro-action);
    with ``normalize`` the advantages are normalized over the valid steps.
    """
    if _use_triton("gae", rewards, values, discounts):
        return _kernels(not rewards.is_cuda).gae(
            rewards, dones, values, valids, gamma, lam, discounts, normalize
        )
    if rewards.is_cuda:
        adv, ret = reference.gae(rewards, dones, values, valids, gamma, lam, discounts)
    else:
        impl = _cpu_impl(
            "gae", {"eager": reference.gae, "fused_ops": cpu.gae_fused_ops, "numba": cpu.gae_numba}
        )
        adv, ret = impl(rewards, dones, values, valids, gamma, lam, discounts)
    if normalize:
        adv = reference.normalize_advantages(adv, valids[:, :-1])
    return adv, ret


def normalize_advantages(adv: torch.Tensor, valids: torch.Tensor | None = None) -> torch.Tensor:
    """``(adv - mean) / max(std, 1e-7)`` over the valid elements; see the reference for edge cases."""
    if _use_triton("normalize_advantages", adv):
        return _kernels(not adv.is_cuda).normalize_advantages(adv, valids)
    return reference.normalize_advantages(adv, valids)


def _ppo_loss_compiled(log_prob, old_log_prob, advantages, values, old_values, targets, valids=None,
                       clip_ratio=0.1, clip_value=1.0, value_loss_coeff=0.5):  # fmt: skip
    module = _compiled_ppo_loss(clip_ratio, clip_value, value_loss_coeff)
    return module(log_prob, old_log_prob, advantages, values, old_values, targets, valids)


def ppo_loss(
    log_prob: torch.Tensor,
    old_log_prob: torch.Tensor,
    advantages: torch.Tensor,
    values: torch.Tensor,
    old_values: torch.Tensor,
    targets: torch.Tensor,
    valids: torch.Tensor | None = None,
    clip_ratio: float = 0.1,
    clip_value: float = 1.0,
    value_loss_coeff: float = 0.5,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(policy_loss, value_loss)``: SF's PPO losses, see :func:`rlgpt.kernels.reference.ppo_loss`."""
    args = (log_prob, old_log_prob, advantages, values, old_values, targets, valids, clip_ratio, clip_value,
            value_loss_coeff)  # fmt: skip
    if _use_triton("ppo_loss", log_prob, values, advantages):
        return _kernels(not log_prob.is_cuda).ppo_loss(*args)
    if log_prob.is_cuda:
        return reference.ppo_loss(*args)
    return _cpu_impl("ppo_loss", {"eager": reference.ppo_loss, "compiled": _ppo_loss_compiled})(*args)


def embed_conv(
    ids: torch.Tensor, embed_weight: torch.Tensor, conv_weight: torch.Tensor, conv_bias: torch.Tensor
) -> torch.Tensor:
    """3x3 convolution (padding 1) of an id grid's embedding, ``[B, H, W]`` -> ``[B, C, H, W]`` (see
    :func:`rlgpt.kernels.reference.embed_conv`). On CUDA cuDNN's convolution (no Triton kernel: the
    table gather is a CPU saving, where it replaces the convolution's multiply-adds with additions), and on
    CPU under bfloat16 autocast too: oneDNN's bfloat16 convolution beats the float32 gather there (learner
    step at batch 1024: 65 vs 76 us per sample, against 109 for the float32 gather and 134 for the float32
    convolution; bench/RESULTS.md, "Learner step")."""
    if ids.is_cuda or torch.is_autocast_enabled("cpu"):
        return reference.embed_conv(ids, embed_weight, conv_weight, conv_bias)
    impl = _cpu_impl("embed_conv", {"eager": reference.embed_conv, "tables": cpu.embed_conv_tables})
    return impl(ids, embed_weight, conv_weight, conv_bias)


def native_bf16(device: str = "cpu") -> bool:
    """Whether ``device`` does bfloat16 dot products in hardware: any CUDA device, or a CPU with AVX512-BF16
    or AMX tiles. Elsewhere oneDNN emulates bfloat16 (slower than float32), which is why
    ``ppo.encoder_precision=auto`` picks float32 there."""
    if device.startswith("cuda"):
        return True
    return bool(torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported())
