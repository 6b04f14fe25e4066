"""Plain torch references for every fused kernel: the definitions the kernels are tested against.

Each function is written for clarity, not speed, in whatever dtype it is given; tests call them on
float64 copies of the inputs so that the reference's own rounding is far below the fp32 tolerance of the
kernels. Their semantics follow Sample Factory 2.1.1's learner (``_policy_loss``, ``_value_loss``,
``gae_advantages`` and the advantage normalization in ``_calculate_losses``), with two deliberate
differences, both documented where they occur: an optional per-step discount (macro-actions) and no NaN on
empty or single-sample batches.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

ACTIVATIONS = ("elu", "relu", "tanh", "identity")
"""Activations the fused linear layer supports (ELU is the policy's; the others cost nothing extra)."""

RATIO_MIN, RATIO_MAX = 0.05, 20.0
"""Sample Factory clamps the importance ratio to this range before the PPO loss (``_calculate_losses``)."""

ADV_STD_MIN = 1e-7
"""Lower bound on the advantage std in normalization, as in Sample Factory."""


def activation(z: torch.Tensor, name: str) -> torch.Tensor:
    """Apply the activation ``name`` (one of :data:`ACTIVATIONS`)."""
    if name == "elu":
        return F.elu(z)
    if name == "relu":
        return F.relu(z)
    if name == "tanh":
        return torch.tanh(z)
    if name == "identity":
        return z
    raise ValueError(f"unknown activation {name!r}; expected one of {ACTIVATIONS}")


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
    """``act(LayerNorm(x @ weight.T + bias))``; without ``layer_norm`` just ``act(x @ weight.T + bias)``.

    LayerNorm sits between the affine map and the activation (the order of ``nn.Sequential(Linear,
    LayerNorm, act)``), and its affine ``ln_weight``/``ln_bias`` are optional like ``nn.LayerNorm``'s.
    """
    z = F.linear(x, weight, bias)
    if layer_norm:
        z = F.layer_norm(z, (z.shape[-1],), ln_weight, ln_bias, eps)
    return activation(z, act)


def embed_conv(
    ids: torch.Tensor, embed_weight: torch.Tensor, conv_weight: torch.Tensor, conv_bias: torch.Tensor
) -> torch.Tensor:
    """A 3x3 convolution (stride 1, zero padding 1) of the embedding of an id grid: ``ids`` ``[B, H, W]``
    (integers in ``[0, n)``), ``embed_weight`` ``[n, D]``, ``conv_weight`` ``[C, D, 3, 3]``, ``conv_bias``
    ``[C]`` -> ``[B, C, H, W]``. What ``nn.Conv2d(D, C, 3, padding=1)(nn.Embedding(n, D)(ids).permute(0, 3,
    1, 2))`` computes: the padding is zeros after the embedding, not the embedding of an id."""
    return F.conv2d(F.embedding(ids, embed_weight).permute(0, 3, 1, 2), conv_weight, conv_bias, padding=1)


def gae(
    rewards: torch.Tensor,
    dones: torch.Tensor,
    values: torch.Tensor,
    valids: torch.Tensor,
    gamma: float,
    lam: float,
    discounts: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalized advantage estimation over ``[E, T]`` trajectories; returns ``(advantages, returns)``.

    ``values`` and ``valids`` are ``[E, T + 1]`` (the last column bootstraps), as in Sample Factory's
    ``gae_advantages``, whose arithmetic this follows step for step. ``discounts`` (``[E, T]``), when given,
    replaces ``gamma`` per step: a macro-action that ran ``k`` primitive steps discounts by ``gamma**k``
    (an SMDP option), both in the TD error and in the advantage recursion (``discount_t * lam``).
    ``returns = advantages + valids[:, :-1] * values[:, :-1]``, as in ``_prepare_batch``.
    """
    dones = dones.to(rewards.dtype)
    valids = valids.to(rewards.dtype)
    n_steps = rewards.shape[1]
    gam = torch.full_like(rewards, gamma) if discounts is None else discounts.to(rewards.dtype)
    deltas = (rewards - values[:, :-1]) * valids[:, :-1] + (1 - dones) * (gam * values[:, 1:] * valids[:, 1:])
    advantages = torch.zeros_like(rewards)
    cumulative = torch.zeros_like(rewards[:, 0])
    for t in reversed(range(n_steps)):
        # Invalid steps are not discounted, so a span of another policy's experience is skipped entirely.
        discount_valid = gam[:, t] * lam * valids[:, t] + (1 - valids[:, t])
        cumulative = deltas[:, t] + discount_valid * cumulative * (1 - dones[:, t])
        advantages[:, t] = cumulative
    returns = advantages + valids[:, :-1] * values[:, :-1]
    return advantages, returns


def masked_std_mean(x: torch.Tensor, valids: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """Unbiased std and mean of the valid elements of ``x``.

    Sample Factory's ``torch.std_mean(masked_select(...))`` is NaN for 0 or 1 valid samples; here the
    count in the divisors is clamped at 1 instead (mean 0 / std 0 for an empty batch, std 0 for one
    sample), so that a degenerate minibatch yields a zero update rather than poisoning the weights.
    """
    mask = torch.ones_like(x) if valids is None else valids.to(x.dtype)
    n = mask.sum()
    mean = (x * mask).sum() / n.clamp_min(1)
    var = (((x - mean) ** 2) * mask).sum() / (n - 1).clamp_min(1)
    return var.sqrt(), mean


def normalize_advantages(adv: torch.Tensor, valids: torch.Tensor | None = None) -> torch.Tensor:
    """``(adv - mean) / max(std, 1e-7)`` with mean and std over the valid elements (applied to all)."""
    std, mean = masked_std_mean(adv, valids)
    return (adv - mean) / std.clamp_min(ADV_STD_MIN)


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
    """PPO clipped policy loss and clipped value loss, Sample Factory's definitions; ``(policy, value)``.

    The ratio is ``exp(log_prob - old_log_prob)`` clamped to ``[0.05, 20]``; the clip range is
    ``[1 / (1 + clip_ratio), 1 + clip_ratio]`` (SF's form, valid for clip ratios above 1). Means are over
    the valid samples, with the count clamped at 1 (SF gives NaN for an empty minibatch).
    """
    mask = torch.ones_like(log_prob) if valids is None else valids.to(log_prob.dtype)
    count = mask.sum().clamp_min(1)
    ratio = torch.exp(log_prob - old_log_prob).clamp(RATIO_MIN, RATIO_MAX)
    clip_high = 1.0 + clip_ratio
    clip_low = 1.0 / clip_high
    surrogate = torch.min(ratio * advantages, ratio.clamp(clip_low, clip_high) * advantages)
    policy_loss = -(surrogate * mask).sum() / count
    value_clipped = old_values + torch.clamp(values - old_values, -clip_value, clip_value)
    value_err = torch.max((values - targets) ** 2, (value_clipped - targets) ** 2)
    value_loss = value_loss_coeff * (value_err * mask).sum() / count
    return policy_loss, value_loss
