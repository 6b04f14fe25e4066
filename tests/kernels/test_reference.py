"""The references mean what Sample Factory computes, and every CPU candidate equals the reference.

The kernels are tested against :mod:`rlgpt.kernels.reference`; these tests pin the reference itself to
Sample Factory 2.1.1's learner code, so that "equal to the reference" means "equal to SF".
"""

from types import SimpleNamespace

import pytest
import torch
from sample_factory.algo.learning.learner import Learner
from sample_factory.algo.utils.rl_utils import gae_advantages

from rlgpt.kernels import cpu, reference


def _trajectories(n_env=6, n_steps=9, seed=0):
    gen = torch.Generator().manual_seed(seed)
    rewards = torch.randn(n_env, n_steps, generator=gen, dtype=torch.float64)
    dones = (torch.rand(n_env, n_steps, generator=gen) < 0.2).double()
    values = torch.randn(n_env, n_steps + 1, generator=gen, dtype=torch.float64)
    valids = torch.rand(n_env, n_steps + 1, generator=gen) < 0.8
    return rewards, dones, values, valids


def test_gae_equals_sample_factory():
    rewards, dones, values, valids = _trajectories()
    adv, ret = reference.gae(rewards, dones, values, valids, 0.99, 0.95)
    sf_adv = gae_advantages(rewards, dones, values, valids, 0.99, 0.95)
    torch.testing.assert_close(adv, sf_adv)
    torch.testing.assert_close(ret, sf_adv + valids[:, :-1] * values[:, :-1])


def test_per_step_discount_is_the_smdp_return():
    """With lam=1, no dones and all steps valid, the return is r_t + gamma_t * R_{t+1}, bootstrapped by
    the last value: a macro that ran k steps discounts what follows it by gamma**k."""
    rewards, _, values, _ = _trajectories(3, 5, seed=1)
    k = torch.tensor([[1, 3, 2, 1, 4], [2, 2, 2, 2, 2], [5, 1, 1, 1, 1]])
    discounts = 0.9 ** k.double()
    ones = torch.ones(3, 6, dtype=torch.bool)
    _, ret = reference.gae(rewards, torch.zeros_like(rewards), values, ones, 0.9, 1.0, discounts)
    expected = values[:, -1]
    for t in reversed(range(5)):
        expected = rewards[:, t] + discounts[:, t] * expected
        torch.testing.assert_close(ret[:, t], expected)
    same, _ = reference.gae(
        rewards, torch.zeros_like(rewards), values, ones, 0.9, 0.95, torch.full_like(rewards, 0.9)
    )
    torch.testing.assert_close(
        same, reference.gae(rewards, torch.zeros_like(rewards), values, ones, 0.9, 0.95)[0]
    )


def test_ppo_losses_equal_sample_factory():
    gen = torch.Generator().manual_seed(0)
    n = 200
    lp, old_lp, adv, v, old_v, tgt = (torch.randn(n, generator=gen, dtype=torch.float64) for _ in range(6))
    valids = torch.rand(n, generator=gen) < 0.7
    num_invalids = int((~valids).sum())
    policy, value = reference.ppo_loss(lp, old_lp, adv, v, old_v, tgt, valids, 0.1, 0.2, 0.5)
    # SF clamps the ratio in _calculate_losses, then calls the two loss functions.
    ratio = torch.exp(lp - old_lp).clamp(0.05, 20.0)
    sf_policy = Learner._policy_loss(ratio, adv, 1 / 1.1, 1.1, valids, num_invalids)
    learner = SimpleNamespace(cfg=SimpleNamespace(value_loss_coeff=0.5))
    sf_value = Learner._value_loss(learner, v, old_v, tgt, 0.2, valids, num_invalids)
    torch.testing.assert_close(policy, sf_policy)
    torch.testing.assert_close(value, sf_value)


def test_advantage_normalization_equals_sample_factory():
    adv = torch.randn(100, dtype=torch.float64) * 2 + 3
    valids = torch.rand(100) < 0.6
    std, mean = torch.std_mean(adv[valids])
    torch.testing.assert_close(
        reference.normalize_advantages(adv, valids), (adv - mean) / std.clamp_min(1e-7)
    )


@pytest.mark.parametrize("impl", [cpu.gae_fused_ops, cpu.gae_numba], ids=["fused_ops", "numba"])
@pytest.mark.parametrize("per_step", [False, True])
def test_cpu_gae_candidates_equal_reference(impl, per_step):
    rewards, dones, values, valids = _trajectories(7, 11, seed=2)
    discounts = 0.99 ** torch.randint(1, 6, rewards.shape).double() if per_step else None
    adv, ret = impl(rewards, dones.bool(), values, valids, 0.99, 0.95, discounts)
    adv_ref, ret_ref = reference.gae(rewards, dones, values, valids, 0.99, 0.95, discounts)
    torch.testing.assert_close(adv, adv_ref)
    torch.testing.assert_close(ret, ret_ref)


@pytest.mark.parametrize("act", reference.ACTIVATIONS)
@pytest.mark.parametrize("layer_norm", [False, True])
def test_cpu_fused_ops_linear_act_equals_reference(act, layer_norm):
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(2, 5, 12, generator=gen, dtype=torch.float64, requires_grad=True)
    w = torch.randn(7, 12, generator=gen, dtype=torch.float64, requires_grad=True)
    b = torch.randn(7, generator=gen, dtype=torch.float64, requires_grad=True)
    g = torch.randn(7, generator=gen, dtype=torch.float64, requires_grad=True) if layer_norm else None
    y = cpu.linear_act_fused_ops(x, w, b, act, g, None, 1e-5, layer_norm)
    y_ref = reference.linear_act(x, w, b, act, g, None, 1e-5, layer_norm)
    torch.testing.assert_close(y, y_ref)
    inputs = [t for t in (x, w, b, g) if t is not None]
    grads, grads_ref = torch.autograd.grad(y.sum(), inputs), torch.autograd.grad(y_ref.sum(), inputs)
    for grad, grad_ref in zip(grads, grads_ref, strict=True):
        torch.testing.assert_close(grad, grad_ref)
