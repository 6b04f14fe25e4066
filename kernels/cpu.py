"""CPU implementations of the fused ops: every candidate ``bench/kernels.py`` measures, and the chosen one.

There is no Triton on a CPU (and compiling Triton there is never attempted), so each op has a few
plain-PyTorch (or numba) candidates; the dispatcher uses the one listed in :data:`CPU_CHOICE`, picked
from the measurements recorded in ``bench/RESULTS.md`` ("Kernels"), not by assumption.

Candidates per op:

- ``eager``: the reference definition (:mod:`rlgpt.kernels.reference`), one torch op per step.
- ``fused_ops``: fewer, fused torch ops (``addmm`` with the bias, in-place activations; GAE with the
  per-step terms precomputed so that the time loop is one ``addcmul`` per step).
- ``compiled``: ``torch.compile`` of an ``nn.Module`` subclass (``nn.Sequential(...).compile()`` would
  silently do nothing); Inductor generates C++ for the element-wise parts.
- ``numba`` (GAE only): the reverse scan as one compiled loop over numpy views of the tensors.
"""

from __future__ import annotations

import numba
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from rlgpt.kernels import reference

_INPLACE_ACT = {"elu": F.elu_, "relu": F.relu_, "tanh": torch.tanh_, "identity": lambda z: z}


def linear_act_fused_ops(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    act: str = "elu",
    ln_weight: torch.Tensor | None = None,
    ln_bias: torch.Tensor | None = None,
    eps: float = 1e-5,
    layer_norm: bool = False,
) -> torch.Tensor:
    """``addmm`` (GEMM with the bias folded in) then the activation in place: one fewer pass, one fewer
    ``[B, hidden]`` buffer than eager. Autograd handles the in-place activation from its output."""
    if act not in _INPLACE_ACT:
        raise ValueError(f"unknown activation {act!r}; expected one of {reference.ACTIVATIONS}")
    x2 = x.reshape(-1, x.shape[-1])
    z = torch.addmm(bias, x2, weight.t()) if bias is not None else x2 @ weight.t()
    if layer_norm:
        z = F.layer_norm(z, (z.shape[-1],), ln_weight, ln_bias, eps)
    return _INPLACE_ACT[act](z).view(*x.shape[:-1], weight.shape[0])


class LinearActModule(nn.Module):
    """``linear_act`` as a module, so that ``torch.compile`` has a graph to capture (``compiled``)."""

    def __init__(self, act: str = "elu", layer_norm: bool = False, eps: float = 1e-5) -> None:
        super().__init__()
        self.act, self.layer_norm, self.eps = act, layer_norm, eps

    def forward(
        self,
        x: torch.Tensor,
        weight: torch.Tensor,
        bias: torch.Tensor | None,
        ln_weight: torch.Tensor | None = None,
        ln_bias: torch.Tensor | None = None,
    ) -> torch.Tensor:
        return reference.linear_act(x, weight, bias, self.act, ln_weight, ln_bias, self.eps, self.layer_norm)


class PPOLossModule(nn.Module):
    """The reference PPO loss as a module, for ``torch.compile`` (``compiled``)."""

    def __init__(
        self, clip_ratio: float = 0.1, clip_value: float = 1.0, value_loss_coeff: float = 0.5
    ) -> None:
        super().__init__()
        self.clip_ratio, self.clip_value, self.value_loss_coeff = clip_ratio, clip_value, value_loss_coeff

    def forward(
        self,
        log_prob: torch.Tensor,
        old_log_prob: torch.Tensor,
        advantages: torch.Tensor,
        values: torch.Tensor,
        old_values: torch.Tensor,
        targets: torch.Tensor,
        valids: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        return reference.ppo_loss(
            log_prob, old_log_prob, advantages, values, old_values, targets, valids,
            self.clip_ratio, self.clip_value, self.value_loss_coeff,
        )  # fmt: skip


def gae_fused_ops(
    rewards: torch.Tensor,
    dones: torch.Tensor,
    values: torch.Tensor,
    valids: torch.Tensor,
    gamma: float,
    lam: float,
    discounts: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The reference recursion with every per-step term computed up front over the whole ``[E, T]``
    block, so the sequential part is one ``addcmul`` per step over a contiguous ``[E]`` row."""
    dtype = rewards.dtype
    dones, valids = dones.to(dtype), valids.to(dtype)
    gam = discounts.to(dtype) if discounts is not None else torch.full_like(rewards, gamma)
    not_done = 1 - dones
    deltas = (rewards - values[:, :-1]) * valids[:, :-1] + not_done * (gam * values[:, 1:] * valids[:, 1:])
    coef = (gam * lam * valids[:, :-1] + (1 - valids[:, :-1])) * not_done
    deltas_t, coef_t = deltas.t().contiguous(), coef.t().contiguous()  # [T, E]: rows are contiguous
    adv_t = torch.empty_like(deltas_t)
    acc = torch.zeros_like(deltas_t[0])
    for t in range(deltas_t.shape[0] - 1, -1, -1):
        acc = torch.addcmul(deltas_t[t], coef_t[t], acc, out=adv_t[t])
    advantages = adv_t.t().contiguous()
    return advantages, advantages + valids[:, :-1] * values[:, :-1]


@numba.njit(cache=True, nogil=True)
def _gae_scan(
    rewards: np.ndarray,
    dones: np.ndarray,
    values: np.ndarray,
    valids: np.ndarray,
    discounts: np.ndarray,
    lam: float,
    adv: np.ndarray,
    ret: np.ndarray,
) -> None:
    n_env, n_steps = rewards.shape
    for e in range(n_env):
        acc = 0.0
        v_next = values[e, n_steps]
        valid_next = valids[e, n_steps]
        for t in range(n_steps - 1, -1, -1):
            g = discounts[e, t]
            v, valid, not_done = values[e, t], valids[e, t], 1.0 - dones[e, t]
            delta = (rewards[e, t] - v) * valid + not_done * (g * v_next * valid_next)
            acc = delta + (g * lam * valid + (1.0 - valid)) * acc * not_done
            adv[e, t] = acc
            ret[e, t] = acc + valid * v
            v_next, valid_next = v, valid


def gae_numba(
    rewards: torch.Tensor,
    dones: torch.Tensor,
    values: torch.Tensor,
    valids: torch.Tensor,
    gamma: float,
    lam: float,
    discounts: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The reverse scan in one numba loop (no gradient: GAE runs under ``no_grad`` in the learner)."""
    dtype = rewards.dtype

    def arr(t: torch.Tensor) -> np.ndarray:
        return t.detach().to(dtype).contiguous().numpy()

    disc = arr(discounts) if discounts is not None else torch.full_like(rewards, gamma, dtype=dtype).numpy()
    adv = torch.empty_like(rewards)
    ret = torch.empty_like(rewards)
    _gae_scan(arr(rewards), arr(dones), arr(values), arr(valids), disc, float(lam), adv.numpy(), ret.numpy())
    return adv, ret


CPU_CHOICE: dict[str, str] = {
    "linear_act": "fused_ops",
    "gae": "numba",
    "ppo_loss": "eager",
    "embed_conv": "tables",
}
"""The implementation the dispatcher runs on CPU per op, chosen from ``bench/kernels.py`` at the policy's
shapes (batch 1024-4096, hidden 256, Crafter's 7x9 symbolic view); full numbers in ``bench/RESULTS.md``
("Kernels"), re-run the bench before changing one. In short (same-run speedups, two runs, loaded box):

- ``linear_act``: ``fused_ops`` ties eager on the GEMM-bound fuse layer (median 1.00x) and wins on the
  small vector layer (median ~1.1x); ``compiled`` is 0.6-1.03x, plus seconds of compilation.
- ``gae``: ``numba`` is 11-73x faster than Sample Factory's TorchScript loop.
- ``ppo_loss``: ``eager``; ``compiled`` saves ~0.1 ms per minibatch (1.45-1.65x) but its 0.6-4.4 s
  compile needs ~6,000+ minibatches to pay back, ten times what a 300k-step run performs."""


# ---------------------------------------------------------------------------------------------- embed_conv
# A 3x3 conv over embedded ids is linear in the one-hot of each neighbour's id, so it is a sum of table
# rows: conv(embed(ids))[b, :, y, x] = bias + sum over the 9 offsets k of T[k, ids[b, y + dy_k, x + dx_k]],
# with T[k] = conv_weight[:, :, k] @ embed_weight.T ([C, n] per offset; neighbours in the zero padding add
# nothing). T is recomputed from the parameters on every call, so autograd carries its gradient back to
# both; the gather and its transpose (a scatter-add into T) run as numba loops, ~9 x C additions per cell
# against the D x 9 x C multiply-adds of the convolution (and of each of its two backward passes).


@numba.njit(cache=True, nogil=True)
def _embed_conv_fwd(ids: np.ndarray, tables: np.ndarray, bias: np.ndarray, out: np.ndarray) -> None:
    n_b, height, width = ids.shape
    channels = bias.shape[0]
    for b in range(n_b):
        for y in range(height):
            for x in range(width):
                acc = out[b, y, x]
                acc[:] = bias
                for dy in range(3):
                    yy = y + dy - 1
                    if yy < 0 or yy >= height:
                        continue
                    for dx in range(3):
                        xx = x + dx - 1
                        if xx < 0 or xx >= width:
                            continue
                        row = tables[dy * 3 + dx, ids[b, yy, xx]]
                        for c in range(channels):
                            acc[c] += row[c]


@numba.njit(cache=True, nogil=True)
def _embed_conv_bwd(ids: np.ndarray, grad: np.ndarray, grad_tables: np.ndarray) -> None:
    n_b, height, width = ids.shape
    channels = grad.shape[3]
    for b in range(n_b):
        for y in range(height):
            for x in range(width):
                g = grad[b, y, x]
                for dy in range(3):
                    yy = y + dy - 1
                    if yy < 0 or yy >= height:
                        continue
                    for dx in range(3):
                        xx = x + dx - 1
                        if xx < 0 or xx >= width:
                            continue
                        row = grad_tables[dy * 3 + dx, ids[b, yy, xx]]
                        for c in range(channels):
                            row[c] += g[c]


class _TableGather(torch.autograd.Function):
    """``out[b, y, x] = bias + sum_k tables[k, ids[b, y + dy_k, x + dx_k]]`` (channels last), with the
    gradients of ``tables`` and ``bias``."""

    @staticmethod
    def forward(ctx, ids: torch.Tensor, tables: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        ids_np = ids.detach().contiguous().numpy()
        out = torch.empty((*ids.shape, bias.shape[0]), dtype=tables.dtype)
        _embed_conv_fwd(ids_np, tables.detach().contiguous().numpy(), bias.detach().numpy(), out.numpy())
        ctx.save_for_backward(ids)
        ctx.n_tables = tables.shape
        return out

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor):
        (ids,) = ctx.saved_tensors
        grad = grad_out.contiguous()
        grad_tables = torch.zeros(ctx.n_tables, dtype=grad.dtype)
        _embed_conv_bwd(ids.contiguous().numpy(), grad.numpy(), grad_tables.numpy())
        return None, grad_tables, grad.sum(dim=(0, 1, 2))


def embed_conv_tables(
    ids: torch.Tensor, embed_weight: torch.Tensor, conv_weight: torch.Tensor, conv_bias: torch.Tensor
) -> torch.Tensor:
    """:func:`rlgpt.kernels.reference.embed_conv` as table gathers (see above). The result is
    ``[B, C, H, W]`` in channels-last memory (a permuted view of the ``[B, H, W, C]`` gather), which the
    next convolution takes as it is."""
    channels, dim = conv_weight.shape[:2]
    # T[k, i, c] = sum_d conv_weight[c, d, k] * embed_weight[i, d], for the 9 offsets k = dy * 3 + dx.
    tables = torch.einsum("cdk,id->kic", conv_weight.reshape(channels, dim, 9), embed_weight)
    # The gather runs in float32 or float64 (numba has no bfloat16): under bf16 autocast the einsum's
    # bfloat16 tables are widened here, and autograd narrows their gradient back.
    dtype = torch.float64 if tables.dtype == torch.float64 else torch.float32
    return _TableGather.apply(ids, tables.to(dtype), conv_bias.to(dtype)).permute(0, 3, 1, 2)
