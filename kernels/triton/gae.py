"""Fused GAE (a reverse scan over time, ``BLOCK_E`` trajectories per program) and advantage normalization.

Why: Sample Factory computes GAE with a TorchScript loop that launches ~10 kernels per time step
(rollout 32-64 steps -> hundreds of tiny launches on a GPU), then ``returns`` and the normalization
statistics in further passes. Here each program keeps its trajectories' running advantage in registers,
walks time backwards once, writes advantages and returns, and (optionally) per-trajectory Welford
statistics of the valid advantages, so normalization needs only one more element-wise pass.

Normalization statistics are combined with Chan's parallel formula in float64 from per-trajectory (or
per-block) ``(count, mean, M2)`` triples, never from raw sums of squares, which lose precision when
``|mean| >> std``.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from rlgpt.kernels.reference import ADV_STD_MIN
from rlgpt.kernels.triton import _alloc


@triton.jit
def _gae_kernel(
    rew_ptr, done_ptr, val_ptr, valid_ptr, disc_ptr, adv_ptr, ret_ptr, stats_ptr,
    E, T, gamma, lam,
    PER_STEP: tl.constexpr, STATS: tl.constexpr, BLOCK_E: tl.constexpr,
):  # fmt: skip
    """Inputs are contiguous ``[E, T]`` (values/valids ``[E, T + 1]``), all fp32."""
    re = tl.program_id(0) * BLOCK_E + tl.arange(0, BLOCK_E)
    e_mask = re < E
    v_next = tl.load(val_ptr + re * (T + 1) + T, mask=e_mask, other=0.0)
    valid_next = tl.load(valid_ptr + re * (T + 1) + T, mask=e_mask, other=0.0)
    adv = tl.zeros((BLOCK_E,), dtype=tl.float32)
    count = tl.zeros((BLOCK_E,), dtype=tl.float32)
    mean = tl.zeros((BLOCK_E,), dtype=tl.float32)
    m2 = tl.zeros((BLOCK_E,), dtype=tl.float32)
    for i in range(0, T):
        t = T - 1 - i
        r = tl.load(rew_ptr + re * T + t, mask=e_mask, other=0.0)
        d = tl.load(done_ptr + re * T + t, mask=e_mask, other=0.0)
        v = tl.load(val_ptr + re * (T + 1) + t, mask=e_mask, other=0.0)
        valid = tl.load(valid_ptr + re * (T + 1) + t, mask=e_mask, other=0.0)
        if PER_STEP:
            g = tl.load(disc_ptr + re * T + t, mask=e_mask, other=0.0)
        else:
            g = gamma
        # Same arithmetic and order as sample_factory.algo.utils.rl_utils.gae_advantages.
        delta = (r - v) * valid + (1.0 - d) * (g * v_next * valid_next)
        discount_valid = g * lam * valid + (1.0 - valid)
        adv = delta + discount_valid * adv * (1.0 - d)
        tl.store(adv_ptr + re * T + t, adv, mask=e_mask)
        tl.store(ret_ptr + re * T + t, adv + valid * v, mask=e_mask)
        if STATS:  # Welford over the valid steps of each trajectory (valid is 0/1)
            count += valid
            diff = adv - mean
            mean += valid * diff / tl.maximum(count, 1.0)
            m2 += valid * diff * (adv - mean)
        v_next = v
        valid_next = valid
    if STATS:
        tl.store(stats_ptr + re * 3, count, mask=e_mask)
        tl.store(stats_ptr + re * 3 + 1, mean, mask=e_mask)
        tl.store(stats_ptr + re * 3 + 2, m2, mask=e_mask)


@triton.jit
def _block_stats_kernel(x_ptr, valid_ptr, stats_ptr, N, HAS_VALID: tl.constexpr, BLOCK: tl.constexpr):
    """(count, mean, M2) of the valid elements of one block, two-pass within registers."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    w = tl.where(mask, 1.0, 0.0)
    if HAS_VALID:
        w = w * tl.load(valid_ptr + offs, mask=mask, other=0.0)
    count = tl.sum(w, axis=0)
    mean = tl.sum(x * w, axis=0) / tl.maximum(count, 1.0)
    dev = (x - mean) * w
    pid = tl.program_id(0)
    tl.store(stats_ptr + pid * 3, count)
    tl.store(stats_ptr + pid * 3 + 1, mean)
    tl.store(stats_ptr + pid * 3 + 2, tl.sum(dev * dev, axis=0))


@triton.jit
def _normalize_kernel(x_ptr, out_ptr, mean_std_ptr, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N
    mean = tl.load(mean_std_ptr)
    std = tl.load(mean_std_ptr + 1)
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.store(out_ptr + offs, (x - mean) / std, mask=mask)


def combine_stats(stats: torch.Tensor) -> torch.Tensor:
    """Chan's parallel merge of ``[P, 3]`` (count, mean, M2) rows, in float64; returns fp32 ``[mean, std]``.

    ``std`` is unbiased and clamped like :func:`rlgpt.kernels.reference.normalize_advantages`.
    """
    s = stats.double()
    count, mean, m2 = s[:, 0], s[:, 1], s[:, 2]
    n = count.sum()
    total_mean = (count * mean).sum() / n.clamp_min(1)
    total_m2 = (m2 + count * (mean - total_mean) ** 2).sum()
    std = (total_m2 / (n - 1).clamp_min(1)).sqrt().clamp_min(ADV_STD_MIN)
    return torch.stack([total_mean, std]).float()


_BLOCK_E = 32
_BLOCK = 1024


def normalize_with_stats(x: torch.Tensor, stats: torch.Tensor) -> torch.Tensor:
    """``(x - mean) / std`` with the merged ``stats`` (one element-wise kernel)."""
    mean_std = combine_stats(stats)
    out = _alloc.empty(*x.shape, device=x.device)
    n = x.numel()
    _normalize_kernel[(triton.cdiv(n, _BLOCK),)](x, out, mean_std, n, BLOCK=_BLOCK)
    return out


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
    """``(advantages, returns)`` like :func:`rlgpt.kernels.reference.gae`, both ``[E, T]`` fp32.

    With ``normalize`` the advantages come back normalized over the valid steps (returns are not).
    """
    n_env, n_steps = rewards.shape
    rewards, dones, values, valids = (_alloc.f32(t) for t in (rewards, dones, values, valids))
    disc = _alloc.f32(discounts) if discounts is not None else rewards
    adv = _alloc.empty(n_env, n_steps, device=rewards.device)
    ret = _alloc.empty(n_env, n_steps, device=rewards.device)
    stats = _alloc.empty(n_env, 3, device=rewards.device) if normalize else adv
    grid = (triton.cdiv(n_env, _BLOCK_E),)
    _gae_kernel[grid](
        rewards, dones, values, valids, disc, adv, ret, stats, n_env, n_steps, float(gamma), float(lam),
        PER_STEP=discounts is not None, STATS=normalize, BLOCK_E=_BLOCK_E,
    )  # fmt: skip
    if normalize:
        adv = normalize_with_stats(adv, stats)
    return adv, ret


def normalize_advantages(adv: torch.Tensor, valids: torch.Tensor | None = None) -> torch.Tensor:
    """Like :func:`rlgpt.kernels.reference.normalize_advantages`: block statistics, merge, one pass."""
    x = _alloc.f32(adv)
    n = x.numel()
    n_blocks = triton.cdiv(n, _BLOCK)
    stats = _alloc.empty(n_blocks, 3, device=x.device)
    v = _alloc.f32(valids) if valids is not None else x
    _block_stats_kernel[(n_blocks,)](x, v, stats, n, HAS_VALID=valids is not None, BLOCK=_BLOCK)
    return normalize_with_stats(x, stats).view(adv.shape)
