"""`rlgpt.rl.model`: the ``resnet`` torso on symbolic and pixel observations (shapes, gradients, its
initialisation surviving Sample Factory's), the recurrent core, and the ``small`` default left as it was."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from sample_factory.algo.utils.rl_utils import prepare_and_normalize_obs
from sample_factory.model.actor_critic import create_actor_critic
from sample_factory.model.model_utils import get_rnn_size

from rlgpt.config import load_config
from rlgpt.envs.crafter import CrafterEnv
from rlgpt.rl import model as policy
from rlgpt.rl.sf_config import build_sf_config
from rlgpt.rl.sf_env import register_task_env

BATCH = 3


def build(*overrides: str, obs_space=None):
    cfg = load_config(None, ["env.backend=gym", *overrides])
    sf_cfg = build_sf_config(cfg, Path("/nonexistent/run"), register_task_env(cfg.task))
    policy.register_model()
    env = CrafterEnv(obs_mode="symbolic")
    torch.manual_seed(0)
    model = create_actor_critic(sf_cfg, obs_space or env.observation_space, env.action_space)
    return model, sf_cfg


def symbolic_obs(model) -> dict:
    gen = torch.Generator().manual_seed(0)
    obs = {"view": torch.randint(0, 19, (BATCH, 7, 9), generator=gen),
           "vector": torch.randint(0, 9, (BATCH, 22), generator=gen).float()}
    return prepare_and_normalize_obs(model, obs)


PIXELS = gym.spaces.Dict({"obs": gym.spaces.Box(0, 255, (3, 64, 64), np.uint8)})
"""What Sample Factory hands the encoder in pixel mode (`rlgpt.rl.wrappers`: HWC -> CHW, one key)."""


def pixel_obs(model) -> dict:
    gen = torch.Generator().manual_seed(0)
    return prepare_and_normalize_obs(model, {"obs": torch.randint(0, 256, (BATCH, 3, 64, 64), generator=gen,
                                                                  dtype=torch.uint8)})


def outputs_and_grads(model, obs, sf_cfg):
    model.zero_grad()
    out = model(dict(obs), torch.zeros(BATCH, get_rnn_size(sf_cfg)))
    (out["action_logits"].square().sum() + out["values"].square().sum()).backward()
    return out, {n: p.grad for n, p in model.named_parameters()}


@pytest.mark.parametrize("mode", ["symbolic", "pixels"])
def test_resnet_shapes_and_gradients(mode):
    space = PIXELS if mode == "pixels" else None
    model, sf_cfg = build("ppo.encoder=resnet", "ppo.hidden_size=96", obs_space=space)
    assert isinstance(model.encoder, policy.ResNetEncoder) and model.encoder.get_out_size() == 96
    obs = pixel_obs(model) if mode == "pixels" else symbolic_obs(model)
    head = model.forward_head(obs)
    assert head.shape == (BATCH, 96) and (head >= 0).all()  # the last layer is a ReLU, as in the reference
    out, grads = outputs_and_grads(model, obs, sf_cfg)
    assert out["action_logits"].shape == (BATCH, 17) and out["values"].shape == (BATCH,)
    stacks = [m for m in model.encoder.modules() if isinstance(m, policy.ResidualStack)]
    assert len(stacks) == len(policy.RESNET_CHANNELS)
    missing = [n for n, g in grads.items() if g is None or not torch.isfinite(g).all() or not g.abs().sum()]
    assert missing == []
    # Each sample's outputs depend on its own observation only (no mixing across the batch).
    single = model(dict({k: v[:1] for k, v in obs.items()}), torch.zeros(1, get_rnn_size(sf_cfg)))
    torch.testing.assert_close(single["action_logits"], out["action_logits"][:1], atol=1e-5, rtol=1e-5)


def test_resnet_keeps_the_reference_initialisation():
    """Sample Factory re-initialises every Linear/Conv2d orthogonally; the torso gets its fan-in scales back
    and the heads the reference's gains."""
    model, _ = build("ppo.encoder=resnet", "ppo.hidden_size=64")
    layers = [m for m in model.encoder.modules() if isinstance(m, policy.FanInLayer)]
    assert layers
    for layer in layers:
        w = layer.layer.weight
        norms = w.flatten(1).norm(dim=1)
        torch.testing.assert_close(norms, torch.full_like(norms, layer.init_scale))
    head = model.action_parameterization.distribution_linear.weight
    # orthogonal with gain 0.01: rows of norm 0.01 (17 actions < 64 inputs)
    torch.testing.assert_close(head.norm(dim=1), torch.full((17,), 0.01))


def test_small_stays_the_default_torso():
    model, sf_cfg = build()
    from rlgpt.rl.worker_config import FLAG, worker_config

    assert worker_config(sf_cfg).train.ppo.encoder == "small"
    assert isinstance(model.encoder, policy.SymbolicEncoder)
    assert not hasattr(model, "ad_heads")
    # A config recorded before the typed flag (no encoder knob at all) builds the same torso.
    delattr(sf_cfg, FLAG)
    assert isinstance(policy.make_encoder(sf_cfg, CrafterEnv(obs_mode="symbolic").observation_space),
                      policy.SymbolicEncoder)


def test_recurrent_core_carries_state():
    model, sf_cfg = build("ppo.use_rnn=true", "ppo.hidden_size=32")
    assert sf_cfg.use_rnn and get_rnn_size(sf_cfg) == 32
    obs = symbolic_obs(model)
    first = model(dict(obs), torch.zeros(BATCH, 32))
    second = model(dict(obs), first["new_rnn_states"])
    assert not torch.allclose(first["new_rnn_states"], second["new_rnn_states"])
    assert not torch.allclose(first["values"], second["values"])


def test_ad_heads_ride_on_the_model():
    model, _ = build("ppo.algo=ad", "ppo.hidden_size=32")
    heads = model.ad_heads
    assert isinstance(heads, policy.ADHeads) and heads.num_actions == 17
    assert any(name.startswith("ad_heads.") for name in model.state_dict())
    latents = model.forward_head(symbolic_obs(model))
    preds = heads.predict(latents, torch.tensor([0, 5, 16]))
    assert preds.shape == (BATCH, 32)
    torch.testing.assert_close(preds.norm(dim=1), torch.ones(BATCH))
    # FiLM: (1 + gamma(a)) * latents + beta(a), gamma and beta the halves of the action MLP's output.
    onehot = torch.nn.functional.one_hot(torch.tensor([2, 2, 2]), 17).float()
    gamma, beta = heads.action_mlp(onehot).chunk(2, dim=-1)
    torch.testing.assert_close(heads.film(latents, torch.tensor([2, 2, 2])), (1 + gamma) * latents + beta)
