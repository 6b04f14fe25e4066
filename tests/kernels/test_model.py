"""The whole policy (Sample Factory actor-critic around rlgpt's symbolic encoder) computes the same outputs
and gradients with the Triton kernels (run by the interpreter on a tiny batch) as with plain PyTorch."""

import pytest
import torch
from policy_helpers import main_policy
from sample_factory.model.model_utils import get_rnn_size
from torch import nn

from rlgpt.kernels import FusedLinearAct, dispatch
from rlgpt.rl.worker_config import worker_config


@pytest.fixture(scope="module")
def policy(tmp_path_factory):
    """The policy `rlgpt train --config configs/main.yaml` trains (hidden 256), on 3 random observations."""
    return main_policy(tmp_path_factory.mktemp("run") / "policy", batch=3, n_ids=19, view_dtype="uint8")


def _outputs_and_grads(model, obs, sf_cfg, backend: str):
    model.zero_grad()
    with dispatch.use_backend(backend):
        out = model(dict(obs), torch.zeros(3, get_rnn_size(sf_cfg)))
    gen = torch.Generator().manual_seed(1)
    loss = (out["action_logits"] * torch.randn(out["action_logits"].shape, generator=gen)).sum()
    loss = loss + (out["values"] * torch.randn(out["values"].shape, generator=gen)).sum()
    loss.backward()
    grads = {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}
    return out["action_logits"].detach(), out["values"].detach(), grads


def test_policy_uses_fused_layers_with_unchanged_state_dict_keys(policy):
    model, _, _ = policy
    fused = [m for m in model.modules() if isinstance(m, FusedLinearAct)]
    assert len(fused) == 2  # the vector MLP and the fuse layer of the symbolic encoder
    keys = set(model.state_dict())
    # The keys an nn.Sequential(nn.Linear, nn.ELU) had: checkpoints from before the kernels still load.
    for name in ("fuse", "vector"):
        assert any(k.endswith(f"{name}.0.weight") for k in keys) and any(
            k.endswith(f"{name}.0.bias") for k in keys
        )
    plain = nn.Sequential(nn.Linear(4, 3), nn.ELU())
    layer = FusedLinearAct(4, 3, "elu")
    assert set(plain.state_dict()) == set(layer.state_dict())
    layer.load_state_dict(plain.state_dict())
    x = torch.randn(2, 4)
    torch.testing.assert_close(layer(x), plain(x))


@pytest.mark.parametrize("gemm", ["torch", "triton"])
def test_policy_outputs_and_gradients_equal_with_and_without_kernels(kernels, policy, monkeypatch, gemm):
    model, obs, sf_cfg = policy
    monkeypatch.setattr(dispatch, "CUDA_LINEAR_GEMM", gemm)
    launches = []
    fused = kernels.linear_act
    monkeypatch.setattr(kernels, "linear_act", lambda *a: launches.append((a[1].shape, a[-1])) or fused(*a))
    logits_t, values_t, grads_t = _outputs_and_grads(model, obs, sf_cfg, "torch")
    assert not launches
    logits_k, values_k, grads_k = _outputs_and_grads(model, obs, sf_cfg, "triton")
    hidden = worker_config(sf_cfg).train.ppo.hidden_size
    expected = [((64, 22), gemm), ((hidden, 32 * 7 * 9 + 64), gemm)]  # the vector MLP and the fuse layer
    assert sorted(launches) == sorted(expected)
    torch.testing.assert_close(logits_k, logits_t, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(values_k, values_t, atol=1e-5, rtol=1e-5)
    assert grads_t.keys() == grads_k.keys() == {n for n, p in model.named_parameters() if p.requires_grad}
    for name, grad in grads_t.items():
        assert torch.isfinite(grads_k[name]).all(), name
        torch.testing.assert_close(
            grads_k[name], grad, atol=1e-5, rtol=1e-4, msg=lambda m, n=name: f"{n}: {m}"
        )
