"""Fused PPO clipped policy loss + clipped value loss, forward and backward in one pass over the batch.

Why: Sample Factory's loss is ~25 element-wise ops (exp, two clamps, min, max, squares, masked means),
each a kernel launch and a full read/write of a ``[B]`` vector, repeated by autograd in the backward.
Here one kernel reads the seven inputs once, writes per-block partial sums (policy, value, valid count;
reduced by torch, deterministic), and, when a gradient is needed, the per-sample derivatives of both
losses. The backward is then a scale by ``grad_output / count``.

Tie-breaking follows PyTorch's autograd exactly: ``min``/``max`` of equal operands split the gradient
in halves, ``clamp`` passes it on the closed interval.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from rlgpt.kernels.reference import RATIO_MAX, RATIO_MIN
from rlgpt.kernels.triton import _alloc


@triton.jit
def _ppo_loss_kernel(
    lp_ptr, old_lp_ptr, adv_ptr, v_ptr, old_v_ptr, tgt_ptr, valid_ptr, part_ptr, glp_ptr, gv_ptr,
    N, clip_low, clip_high, clip_value, ratio_min, ratio_max,
    HAS_VALID: tl.constexpr, GRAD: tl.constexpr, BLOCK: tl.constexpr,
):  # fmt: skip
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N
    lp = tl.load(lp_ptr + offs, mask=mask, other=0.0)
    old_lp = tl.load(old_lp_ptr + offs, mask=mask, other=0.0)
    adv = tl.load(adv_ptr + offs, mask=mask, other=0.0)
    v = tl.load(v_ptr + offs, mask=mask, other=0.0)
    old_v = tl.load(old_v_ptr + offs, mask=mask, other=0.0)
    tgt = tl.load(tgt_ptr + offs, mask=mask, other=0.0)
    w = tl.where(mask, 1.0, 0.0)
    if HAS_VALID:
        w = w * tl.load(valid_ptr + offs, mask=mask, other=0.0)

    raw_ratio = tl.exp(lp - old_lp)
    ratio = tl.minimum(tl.maximum(raw_ratio, ratio_min), ratio_max)
    clipped = tl.minimum(tl.maximum(ratio, clip_low), clip_high)
    unclipped_obj = ratio * adv
    clipped_obj = clipped * adv
    surrogate = tl.minimum(unclipped_obj, clipped_obj)

    dv = v - old_v
    dv_clipped = tl.minimum(tl.maximum(dv, -clip_value), clip_value)
    err = v - tgt
    err_clipped = old_v + dv_clipped - tgt
    sq = err * err
    sq_clipped = err_clipped * err_clipped
    value_err = tl.maximum(sq, sq_clipped)

    tl.store(part_ptr + pid * 3, tl.sum(-surrogate * w, axis=0))
    tl.store(part_ptr + pid * 3 + 1, tl.sum(value_err * w, axis=0))
    tl.store(part_ptr + pid * 3 + 2, tl.sum(w, axis=0))

    if GRAD:
        # d(surrogate)/d(ratio): the smaller branch's derivative, halves on a tie (torch.min's rule).
        in_clip = (ratio >= clip_low) & (ratio <= clip_high)
        g_clipped = tl.where(in_clip, adv, 0.0)
        g_surr = tl.where(
            unclipped_obj < clipped_obj, adv,
            tl.where(unclipped_obj > clipped_obj, g_clipped, 0.5 * (adv + g_clipped)),
        )  # fmt: skip
        in_range = (raw_ratio >= ratio_min) & (raw_ratio <= ratio_max)
        g_lp = tl.where(in_range, -g_surr * raw_ratio, 0.0) * w
        g_sq = 2.0 * err
        in_vclip = (dv >= -clip_value) & (dv <= clip_value)
        g_sq_clipped = tl.where(in_vclip, 2.0 * err_clipped, 0.0)
        g_v = tl.where(
            sq > sq_clipped, g_sq, tl.where(sq < sq_clipped, g_sq_clipped, 0.5 * (g_sq + g_sq_clipped))
        )
        tl.store(glp_ptr + offs, g_lp, mask=mask)
        tl.store(gv_ptr + offs, g_v * w, mask=mask)


_BLOCK = 1024


class PPOLossFunction(torch.autograd.Function):
    """Autograd wrapper returning ``(policy_loss, value_loss)``; gradients flow to log-probs and values."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx,
        log_prob: torch.Tensor,
        old_log_prob: torch.Tensor,
        advantages: torch.Tensor,
        values: torch.Tensor,
        old_values: torch.Tensor,
        targets: torch.Tensor,
        valids: torch.Tensor | None,
        clip_ratio: float,
        clip_value: float,
        value_loss_coeff: float,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        n = log_prob.numel()
        lp = _alloc.f32(log_prob)
        grad = ctx.needs_input_grad[0] or ctx.needs_input_grad[3]
        n_blocks = triton.cdiv(n, _BLOCK)
        part = _alloc.empty(n_blocks, 3, device=lp.device)
        g_lp = _alloc.empty(n, device=lp.device) if grad else lp
        g_v = _alloc.empty(n, device=lp.device) if grad else lp
        clip_high = 1.0 + clip_ratio
        _ppo_loss_kernel[(n_blocks,)](
            lp, *(_alloc.f32(t) for t in (old_log_prob, advantages, values, old_values, targets)),
            _alloc.f32(valids) if valids is not None else lp, part, g_lp, g_v,
            n, 1.0 / clip_high, clip_high, float(clip_value), RATIO_MIN, RATIO_MAX,
            HAS_VALID=valids is not None, GRAD=grad, BLOCK=_BLOCK,
        )  # fmt: skip
        sums = part.sum(0)
        count = sums[2].clamp_min(1.0)
        policy_loss = sums[0] / count
        value_loss = value_loss_coeff * sums[1] / count
        if grad:
            ctx.save_for_backward(g_lp, g_v, count)
        ctx.value_loss_coeff = value_loss_coeff
        ctx.shapes = (log_prob.shape, values.shape)
        return policy_loss, value_loss

    @staticmethod
    def backward(ctx, d_policy: torch.Tensor, d_value: torch.Tensor):  # type: ignore[override]
        g_lp, g_v, count = ctx.saved_tensors
        d_lp = (g_lp * (d_policy / count)).view(ctx.shapes[0]) if ctx.needs_input_grad[0] else None
        d_v = (
            (g_v * (d_value * ctx.value_loss_coeff / count)).view(ctx.shapes[1])
            if ctx.needs_input_grad[3]
            else None
        )
        return d_lp, None, None, d_v, None, None, None, None, None, None


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
    """Fused ``(policy_loss, value_loss)``; same signature and meaning as the reference."""
    return PPOLossFunction.apply(
        log_prob, old_log_prob, advantages, values, old_values, targets, valids,
        clip_ratio, clip_value, value_loss_coeff,
    )  # fmt: skip
