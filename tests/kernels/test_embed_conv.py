"""embed_conv: the first convolution over the embedded view as table gathers (CPU) equals the convolution of
the embedding, forward and backward, and the policy computes what its plain layer stack computes."""

import numpy as np
import pytest
import torch
from policy_helpers import main_policy
from sample_factory.algo.utils.rl_utils import prepare_and_normalize_obs
from sample_factory.model.actor_critic import create_actor_critic
from sample_factory.model.model_utils import get_rnn_size

from rlgpt.config import ConfigError, builtin_config_path, load_config
from rlgpt.envs.crafter import N_IDS, CrafterEnv
from rlgpt.kernels import cpu, dispatch, reference
from rlgpt.rl.model import register_model
from rlgpt.rl.sf_config import build_sf_config
from rlgpt.rl.sf_env import register_task_env
from rlgpt.rl.worker_config import worker_config


@pytest.fixture
def nan_for_uninitialized_memory():
    """torch.empty() returns NaN-filled memory: an output element the kernel never writes shows up."""
    before = torch.are_deterministic_algorithms_enabled(), torch.utils.deterministic.fill_uninitialized_memory
    torch.use_deterministic_algorithms(True)
    torch.utils.deterministic.fill_uninitialized_memory = True
    yield
    torch.use_deterministic_algorithms(before[0])
    torch.utils.deterministic.fill_uninitialized_memory = before[1]


def _inputs(batch, height, width, n_ids, dim, channels, dtype, seed=0):
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, n_ids, (batch, height, width), generator=gen)
    embed = torch.randn(n_ids, dim, generator=gen, dtype=dtype).requires_grad_()
    weight = (torch.randn(channels, dim, 3, 3, generator=gen, dtype=dtype) / 3).requires_grad_()
    bias = torch.randn(channels, generator=gen, dtype=dtype).requires_grad_()
    grad = torch.randn(batch, channels, height, width, generator=gen, dtype=dtype)
    return ids, embed, weight, bias, grad


@pytest.mark.parametrize(
    "shape", [(1, 1, 1, 3, 2, 4), (5, 2, 3, 4, 3, 5), (3, 7, 9, N_IDS, 16, 32), (2, 4, 1, 6, 5, 8)]
)
def test_tables_equal_the_convolution_of_the_embedding_in_float64(shape, nan_for_uninitialized_memory):
    ids, embed, weight, bias, grad = _inputs(*shape, torch.float64)
    expected = reference.embed_conv(ids, embed, weight, bias)
    got = cpu.embed_conv_tables(ids, embed, weight, bias)
    assert got.shape == expected.shape and not got.isnan().any()
    torch.testing.assert_close(got, expected, atol=1e-12, rtol=1e-12)
    for g_exp, g_got, name in zip(
        torch.autograd.grad(expected, (embed, weight, bias), grad),
        torch.autograd.grad(got, (embed, weight, bias), grad),
        ("embed", "weight", "bias"),
        strict=True,
    ):
        assert not g_got.isnan().any(), name
        torch.testing.assert_close(g_got, g_exp, atol=1e-10, rtol=1e-10, msg=lambda m, n=name: f"{n}: {m}")


def test_float32_at_the_policy_shape_and_the_dispatcher_uses_the_measured_choice(monkeypatch):
    ids, embed, weight, bias, grad = _inputs(64, 7, 9, N_IDS, 16, 32, torch.float32)
    ref64 = reference.embed_conv(ids, embed.double(), weight.double(), bias.double())
    monkeypatch.setitem(cpu.CPU_CHOICE, "embed_conv", "tables")
    got = dispatch.embed_conv(ids, embed, weight, bias)
    assert got.is_contiguous(memory_format=torch.channels_last)  # the gather's [B, H, W, C], seen as NCHW
    torch.testing.assert_close(got.double(), ref64, atol=1e-5, rtol=1e-5)
    monkeypatch.setitem(cpu.CPU_CHOICE, "embed_conv", "eager")
    eager = dispatch.embed_conv(ids, embed, weight, bias)
    torch.testing.assert_close(eager.double(), ref64, atol=1e-5, rtol=1e-5)


@pytest.fixture(scope="module")
def policy(tmp_path_factory):
    return main_policy(tmp_path_factory.mktemp("run") / "policy", batch=300, n_ids=N_IDS)


def _plain_encoder_forward(encoder, obs):
    """The symbolic encoder as its layers define it, one nn module after the other (no kernels)."""
    ids = obs["view"].long().clamp(0, encoder.n_ids - 1)
    x = encoder.conv(encoder.embed(ids).permute(0, 3, 1, 2)).flatten(1)
    v = encoder.vector[1](encoder.vector[0](torch.log1p(obs["vector"].float().clamp_min(0))))
    return encoder.fuse[1](encoder.fuse[0](torch.cat([x, v], dim=1)))


@pytest.mark.parametrize("batch", [16, 300])  # up to the hidden width (256) and past it: two flattenings
def test_policy_outputs_and_gradients_equal_its_plain_layer_stack(policy, monkeypatch, batch):
    """The encoder's forward (table gathers, in-place ELUs, fused linear layers) is the same function of the
    same parameters as the nn layers it holds: outputs and every parameter's gradient agree."""
    model, obs, sf_cfg = policy
    obs = {key: value[:batch] for key, value in obs.items()}
    monkeypatch.setitem(cpu.CPU_CHOICE, "embed_conv", "tables")
    encoder = model.encoder
    results = []
    for forward in (encoder.forward, lambda o: _plain_encoder_forward(encoder, o)):
        monkeypatch.setattr(encoder, "forward", forward)
        model.zero_grad()
        out = model(dict(obs), torch.zeros(batch, get_rnn_size(sf_cfg)))
        gen = torch.Generator().manual_seed(1)
        loss = (out["action_logits"] * torch.randn(out["action_logits"].shape, generator=gen)).sum()
        (loss + (out["values"] * torch.randn(out["values"].shape, generator=gen)).sum()).backward()
        grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
        results.append((out["action_logits"].detach(), out["values"].detach(), grads))
    (logits, values, grads), (logits_ref, values_ref, grads_ref) = results
    torch.testing.assert_close(logits, logits_ref, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(values, values_ref, atol=1e-5, rtol=1e-5)
    assert grads.keys() == grads_ref.keys() == {n for n, p in model.named_parameters() if p.requires_grad}
    for name, grad in grads_ref.items():
        # float32 sums over the batch in a different order (the fused path vs nn's, and each CPU's own BLAS
        # blocking: an AMD EPYC box differs from the Sapphire Rapids one by 4e-5 on the conv weight at 300):
        # the tolerance scales with the gradient's size; a wrong gradient still fails by orders of magnitude.
        atol = 1e-5 + 2e-5 * float(grad.abs().max())
        torch.testing.assert_close(grads[name], grad, atol=atol, rtol=1e-4, msg=lambda m, n=name: f"{n}: {m}")


def test_bf16_encoder_is_the_same_function_in_bfloat16(tmp_path):
    """ppo.encoder_precision=bf16: the encoder autocasts to bfloat16 (close to float32, not equal) and hands
    float32 features to the heads, in training (gradients flow to every parameter) and inference alike."""
    cfg = load_config(builtin_config_path("main.yaml"))
    env = CrafterEnv(obs_mode="symbolic")
    models = {}
    for precision in ("fp32", "bf16"):
        cfg.ppo.encoder_precision = precision
        sf_cfg = build_sf_config(cfg, tmp_path / precision, register_task_env(cfg.task))
        assert worker_config(sf_cfg).encoder_precision == precision
        register_model()
        torch.manual_seed(0)
        models[precision] = create_actor_critic(sf_cfg, env.observation_space, env.action_space)
    rng = np.random.default_rng(0)
    obs = {
        "view": torch.as_tensor(rng.integers(0, N_IDS, size=(300, *env.observation_space["view"].shape))),
        "vector": torch.as_tensor(rng.integers(0, 9, size=(300, 22)).astype(np.float32)),
    }
    features = {}
    for precision, model in models.items():
        out = model.encoder(prepare_and_normalize_obs(model, dict(obs)))
        assert out.dtype == torch.float32
        out.square().sum().backward()
        assert all(p.grad is not None and p.grad.isfinite().all() for p in model.encoder.parameters())
        features[precision] = out.detach()
    assert not torch.equal(features["bf16"], features["fp32"])  # it did compute in bfloat16
    torch.testing.assert_close(features["bf16"], features["fp32"], atol=0.05, rtol=0.05)
    with pytest.raises(ConfigError, match="ppo.encoder_precision"):
        load_config(None, ["ppo.encoder_precision=fp16"])


@pytest.mark.parametrize("native", [True, False])
def test_auto_encoder_precision_follows_the_cpu(tmp_path, monkeypatch, native):
    """ppo.encoder_precision=auto: bfloat16 only where the CPU does it natively (emulated it is slower)."""
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: native)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: False)
    cfg = load_config(builtin_config_path("main.yaml"), ["ppo.encoder_precision=auto"])
    sf_cfg = build_sf_config(cfg, tmp_path, register_task_env(cfg.task))
    assert worker_config(sf_cfg).encoder_precision == ("bf16" if native else "fp32")
    cfg.ppo.encoder_precision = "fp32"  # an explicit choice is kept whatever the CPU
    explicit = build_sf_config(cfg, tmp_path, register_task_env(cfg.task))
    assert worker_config(explicit).encoder_precision == "fp32"
