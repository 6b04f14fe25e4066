"""Every Triton kernel against the float64 torch reference, forward and backward, under the interpreter.

Shapes are tiny (the interpreter is ~1000x slower than a GPU) but chosen to hit the edges: one row,
sizes that are not multiples of the block sizes, several row/column/time blocks, K smaller than one
K-tile. Every output buffer starts as NaN (``nan_buffers``), so an element a kernel forgets to write
fails the NaN check.
"""

import math

import pytest
import torch

from rlgpt.kernels import reference

ATOL, RTOL = 2e-5, 2e-5


def _close(actual: torch.Tensor, expected: torch.Tensor, atol: float = ATOL, rtol: float = RTOL) -> None:
    assert actual.shape == expected.shape
    assert torch.isfinite(actual).all(), "kernel left NaN/inf (an unwritten or mis-computed element)"
    torch.testing.assert_close(actual.double(), expected.double(), atol=atol, rtol=rtol)


def _f64(*tensors):
    return [None if t is None else t.detach().double().requires_grad_(t.requires_grad) for t in tensors]


# ----------------------------------------------------------------------------- fused linear + act (+ LN)

LINEAR_SHAPES = [(1, 3, 1), (5, 37, 20), (70, 33, 130)]  # (M, K, N): 1 row; odd sizes; 2 row x 3 col blocks


@pytest.mark.parametrize("shape", LINEAR_SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("act", reference.ACTIVATIONS)
@pytest.mark.parametrize("layer_norm", [False, True], ids=["plain", "layernorm"])
@pytest.mark.parametrize("gemm", ["triton", "torch"], ids=["triton_gemm", "cublas_gemm"])
def test_linear_act_matches_reference(nan_buffers, shape, act, layer_norm, gemm):
    m, k, n = shape
    gen = torch.Generator().manual_seed(m * 1000 + k + n)
    x = torch.randn(m, k, generator=gen).requires_grad_()
    weight = (torch.randn(n, k, generator=gen) / math.sqrt(k)).requires_grad_()
    bias = torch.randn(n, generator=gen).requires_grad_()
    ln_w = (1 + 0.5 * torch.randn(n, generator=gen)).requires_grad_() if layer_norm else None
    ln_b = torch.randn(n, generator=gen).requires_grad_() if layer_norm else None
    y = nan_buffers.linear_act(x, weight, bias, act, ln_w, ln_b, 1e-5, layer_norm, gemm)
    inputs = [t for t in (x, weight, bias, ln_w, ln_b) if t is not None]
    dy = torch.randn(y.shape, generator=gen)
    grads = torch.autograd.grad(y, inputs, dy)

    ref_inputs = _f64(x, weight, bias, ln_w, ln_b)
    y_ref = reference.linear_act(*ref_inputs[:3], act, *ref_inputs[3:], 1e-5, layer_norm)
    grads_ref = torch.autograd.grad(y_ref, [t for t in ref_inputs if t is not None], dy.double())
    _close(y, y_ref)
    for g, g_ref in zip(grads, grads_ref, strict=True):
        _close(g, g_ref, atol=1e-4)


def test_linear_act_without_bias_or_ln_affine_and_3d_input(nan_buffers):
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(2, 3, 17, generator=gen).requires_grad_()
    weight = torch.randn(9, 17, generator=gen).requires_grad_()
    y = nan_buffers.linear_act(x, weight, None, "elu", None, None, 1e-5, True, "torch")
    assert y.shape == (2, 3, 9)
    dx, dw = torch.autograd.grad(y.pow(2).sum(), (x, weight))
    x64, w64 = _f64(x, weight)
    y_ref = reference.linear_act(x64, w64, None, "elu", None, None, 1e-5, True)
    dx_ref, dw_ref = torch.autograd.grad(y_ref.pow(2).sum(), (x64, w64))
    _close(y, y_ref)
    _close(dx, dx_ref, atol=1e-4)
    _close(dw, dw_ref, atol=1e-4)


@pytest.mark.parametrize("affine", ["weight_only", "bias_only"])
def test_linear_act_layernorm_with_one_affine_part(nan_buffers, affine):
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(3, 10, generator=gen).requires_grad_()
    weight = torch.randn(6, 10, generator=gen).requires_grad_()
    part = torch.randn(6, generator=gen).requires_grad_()
    ln = (part, None) if affine == "weight_only" else (None, part)
    y = nan_buffers.linear_act(x, weight, None, "relu", *ln, 1e-5, True)
    grads = torch.autograd.grad(y.sum(), (x, weight, part))
    x64, w64, p64 = _f64(x, weight, part)
    ln64 = (p64, None) if affine == "weight_only" else (None, p64)
    y_ref = reference.linear_act(x64, w64, None, "relu", *ln64, 1e-5, True)
    _close(y, y_ref)
    for g, g_ref in zip(grads, torch.autograd.grad(y_ref.sum(), (x64, w64, p64)), strict=True):
        _close(g, g_ref, atol=1e-4)


def test_linear_act_grad_only_for_weights(nan_buffers):
    """A frozen input (no grad) must not get one, and the weight gradient must still be right."""
    x = torch.randn(4, 8)
    weight = torch.randn(6, 8, requires_grad=True)
    bias = torch.randn(6, requires_grad=True)
    y = nan_buffers.linear_act(x, weight, bias, "tanh")
    dw, db = torch.autograd.grad(y.sum(), (weight, bias))
    w64, b64 = _f64(weight, bias)
    dw_ref, db_ref = torch.autograd.grad(reference.linear_act(x.double(), w64, b64, "tanh").sum(), (w64, b64))
    _close(dw, dw_ref, atol=1e-4)
    _close(db, db_ref, atol=1e-4)


def test_activations_are_exact_at_extremes(nan_buffers):
    """ELU/tanh must not overflow for large |z| (tanh via exp(-2|z|)) and must be exact at 0."""
    x = torch.tensor([[-100.0], [-1e-3], [0.0], [1e-3], [100.0]])
    weight = torch.ones(1, 1)
    for act in ("elu", "tanh"):
        y = nan_buffers.linear_act(x, weight, None, act)
        _close(y, reference.linear_act(x.double(), weight.double(), None, act), atol=1e-7, rtol=1e-6)


# ----------------------------------------------------------------------------- GAE + normalization


def _trajectories(n_env: int, n_steps: int, seed: int, p_done: float = 0.2, p_valid: float = 0.8):
    gen = torch.Generator().manual_seed(seed)
    rewards = torch.randn(n_env, n_steps, generator=gen)
    dones = torch.rand(n_env, n_steps, generator=gen) < p_done
    values = torch.randn(n_env, n_steps + 1, generator=gen)
    valids = torch.rand(n_env, n_steps + 1, generator=gen) < p_valid
    discounts = 0.99 ** torch.randint(1, 9, (n_env, n_steps), generator=gen).float()
    return rewards, dones, values, valids, discounts


@pytest.mark.parametrize("n_env,n_steps", [(1, 1), (5, 7), (33, 4)])  # one step; odd; 2 programs (BLOCK_E 32)
@pytest.mark.parametrize("per_step", [False, True], ids=["scalar_gamma", "per_step_gamma"])
@pytest.mark.parametrize("normalize", [False, True], ids=["raw", "normalized"])
def test_gae_matches_reference(nan_buffers, n_env, n_steps, per_step, normalize):
    rewards, dones, values, valids, discounts = _trajectories(n_env, n_steps, seed=n_env * 31 + n_steps)
    disc = discounts if per_step else None
    adv, ret = nan_buffers.gae(rewards, dones, values, valids, 0.99, 0.95, disc, normalize)
    adv_ref, ret_ref = reference.gae(
        rewards.double(), dones, values.double(), valids, 0.99, 0.95, None if disc is None else disc.double()
    )
    if normalize:
        adv_ref = reference.normalize_advantages(adv_ref, valids[:, :-1])
    _close(adv, adv_ref, atol=1e-5, rtol=1e-5)
    _close(ret, ret_ref)


def test_gae_float_masks_and_all_invalid_rows(nan_buffers):
    """dones/valids as floats (SF's buffers) and trajectories that are entirely another policy's."""
    rewards, dones, values, valids, _ = _trajectories(6, 5, seed=3)
    valids[2:4] = False
    adv, ret = nan_buffers.gae(rewards, dones.float(), values, valids.float(), 0.9, 0.8, None, True)
    adv_ref, ret_ref = reference.gae(rewards.double(), dones, values.double(), valids, 0.9, 0.8)
    _close(adv, reference.normalize_advantages(adv_ref, valids[:, :-1]), atol=1e-5)
    _close(ret, ret_ref)


@pytest.mark.parametrize("n", [1, 7, 1500])  # 1500 = two 1024-element blocks, the second partial
@pytest.mark.parametrize("masked", [False, True], ids=["all_valid", "masked"])
def test_normalize_advantages_matches_reference(nan_buffers, n, masked):
    gen = torch.Generator().manual_seed(n)
    adv = torch.randn(n, generator=gen) * 3 + 1
    valids = (torch.rand(n, generator=gen) < 0.7) if masked else None
    out = nan_buffers.normalize_advantages(adv, valids)
    _close(out, reference.normalize_advantages(adv.double(), valids), atol=1e-5)


def test_normalization_is_stable_when_mean_dwarfs_std(nan_buffers):
    """Welford/Chan statistics: a sum-of-squares variance would lose every digit at mean 1e3, std 1e-2.

    The tolerance is what fp32 inputs allow: rounding the mean (~1000) to fp32 moves ``x - mean`` by up
    to 3e-5, i.e. 3e-3 standard deviations; an fp32 sum of squares would be off by orders of magnitude."""
    gen = torch.Generator().manual_seed(0)
    adv = 1000 + 0.01 * torch.randn(2000, generator=gen)
    expected = reference.normalize_advantages(adv.double())
    _close(nan_buffers.normalize_advantages(adv), expected, atol=1e-2, rtol=1e-3)
    # GAE with lam=0 (advantage = TD error): rewards ~1000, values ~0.01, so every advantage is ~1000 +- 0.01.
    rewards, dones, values, valids, _ = _trajectories(40, 6, seed=5, p_done=0.0, p_valid=1.0)
    rewards, values = 1000 + 0.01 * rewards, 0.01 * values
    adv_n, _ = nan_buffers.gae(rewards, dones, values, valids, 0.99, 0.0, None, True)
    adv_ref, _ = reference.gae(rewards.double(), dones, values.double(), valids, 0.99, 0.0)
    assert adv_ref.mean() > 1e4 * adv_ref.std()
    _close(adv_n, reference.normalize_advantages(adv_ref), atol=1e-2, rtol=1e-3)


def test_normalization_of_empty_selection_is_finite(nan_buffers):
    adv = torch.randn(10)
    out = nan_buffers.normalize_advantages(adv, torch.zeros(10, dtype=torch.bool))
    _close(out, reference.normalize_advantages(adv.double(), torch.zeros(10, dtype=torch.bool)), rtol=1e-5)


# ----------------------------------------------------------------------------- PPO loss


def _ppo_inputs(n: int, seed: int, spread: float = 1.5):
    gen = torch.Generator().manual_seed(seed)
    log_prob = (torch.randn(n, generator=gen) * spread).requires_grad_()  # spread 1.5: many clipped, some
    old_log_prob = torch.randn(n, generator=gen) * spread  # beyond the [0.05, 20] ratio clamp
    adv = torch.randn(n, generator=gen)
    old_values = torch.randn(n, generator=gen)
    values = (old_values + 0.3 * torch.randn(n, generator=gen)).requires_grad_()  # ~half inside clip_value
    targets = torch.randn(n, generator=gen)
    return log_prob, old_log_prob, adv, values, old_values, targets


@pytest.mark.parametrize("n", [1, 33, 2049])  # 2049: three blocks, the last with one element
@pytest.mark.parametrize("valid_mode", ["none", "random", "all_invalid"])
def test_ppo_loss_matches_reference(nan_buffers, n, valid_mode):
    lp, old_lp, adv, v, old_v, tgt = _ppo_inputs(n, seed=n)
    valids = {
        "none": None,
        "random": torch.rand(n, generator=torch.Generator().manual_seed(n + 1)) < 0.7,
        "all_invalid": torch.zeros(n, dtype=torch.bool),
    }[valid_mode]
    kwargs = dict(clip_ratio=0.1, clip_value=0.2, value_loss_coeff=0.5)
    policy, value = nan_buffers.ppo_loss(lp, old_lp, adv, v, old_v, tgt, valids, **kwargs)
    d_lp, d_v = torch.autograd.grad(0.7 * policy + 1.3 * value, (lp, v))

    ref = _f64(lp, old_lp, adv, v, old_v, tgt)
    policy_ref, value_ref = reference.ppo_loss(*ref, valids, **kwargs)
    d_lp_ref, d_v_ref = torch.autograd.grad(0.7 * policy_ref + 1.3 * value_ref, (ref[0], ref[3]))
    _close(policy, policy_ref)
    _close(value, value_ref)
    _close(d_lp, d_lp_ref, atol=1e-6)
    _close(d_v, d_v_ref, atol=1e-6)
    if valid_mode == "all_invalid":
        assert policy.item() == 0 and value.item() == 0 and not d_lp.any() and not d_v.any()


def test_ppo_loss_ties_split_gradients_like_autograd(nan_buffers):
    """Ratios inside the clip range and values inside clip_value make every min/max operand pair equal
    (torch splits the gradient in halves there); the kernel's gradients must agree on this all-tie batch."""
    n = 16
    lp = torch.zeros(n, requires_grad=True)
    old_lp = torch.zeros(n)
    adv = torch.linspace(-1, 1, n)
    old_v = torch.zeros(n)
    v = torch.full((n,), 0.05, requires_grad=True)
    tgt = torch.linspace(-2, 2, n)
    policy, value = nan_buffers.ppo_loss(lp, old_lp, adv, v, old_v, tgt, None, 0.1, 0.2, 0.5)
    d_lp, d_v = torch.autograd.grad(policy + value, (lp, v))
    ref = _f64(lp, old_lp, adv, v, old_v, tgt)
    policy_ref, value_ref = reference.ppo_loss(*ref, None, 0.1, 0.2, 0.5)
    d_lp_ref, d_v_ref = torch.autograd.grad(policy_ref + value_ref, (ref[0], ref[3]))
    _close(d_lp, d_lp_ref, atol=1e-7)
    _close(d_v, d_v_ref, atol=1e-7)


def test_ppo_loss_gradient_to_values_only(nan_buffers):
    lp, old_lp, adv, v, old_v, tgt = _ppo_inputs(20, seed=9)
    _, value = nan_buffers.ppo_loss(lp.detach(), old_lp, adv, v, old_v, tgt)
    (d_v,) = torch.autograd.grad(value, (v,))
    ref = _f64(lp, old_lp, adv, v, old_v, tgt)
    (d_v_ref,) = torch.autograd.grad(reference.ppo_loss(*ref)[1], (ref[3],))
    _close(d_v, d_v_ref, atol=1e-6)


def test_ppo_loss_without_grad_writes_no_gradient_buffers(nan_buffers):
    """Under no_grad (evaluation, summaries) only the partial sums are computed and still exact."""
    lp, old_lp, adv, v, old_v, tgt = _ppo_inputs(40, seed=4)
    with torch.no_grad():
        policy, value = nan_buffers.ppo_loss(lp, old_lp, adv, v, old_v, tgt)
    ref = _f64(lp, old_lp, adv, v, old_v, tgt)
    policy_ref, value_ref = reference.ppo_loss(*ref)
    _close(policy, policy_ref)
    _close(value, value_ref)
