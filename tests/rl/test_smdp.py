"""SMDP learning over macro-actions in Sample Factory: gamma^k discounting and primitive-step counting.

The known-answer test trains real Sample Factory (serial mode, a few seconds) on a two-decision env: the
first decision is an option that runs K primitive steps with no reward, the second earns 1 and ends the
episode. The start state's true value is ``gamma^K``; discounting once per decision learns ``gamma``.
"""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from sample_factory.algo.learning import learner_worker
from sample_factory.algo.learning.learner import Learner
from sample_factory.algo.utils.rl_utils import gae_advantages
from sample_factory.cfg.arguments import parse_full_cfg, parse_sf_args
from sample_factory.envs.env_utils import register_env
from sample_factory.model.actor_critic import create_actor_critic
from sample_factory.model.model_utils import get_rnn_size
from sample_factory.train import run_rl

from rlgpt.kernels.cpu import CPU_CHOICE
from rlgpt.rl import learner as smdp
from rlgpt.rl.checkpoint import latest_checkpoint, load_checkpoint
from rlgpt.rl.model import make_encoder, register_model
from rlgpt.rl.wrappers import PrimitiveStepCount

GAMMA = 0.9
K = 10
ENV_NAME = "two_decision_option"


class TwoDecisionEnv(gym.Env):
    """Decision 1 runs a K-step option (reward 0, ``info["macro_steps"] = K``); decision 2 earns 1, ends."""

    observation_space = gym.spaces.Box(0.0, 1.0, shape=(2,), dtype=np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self) -> None:
        self.phase = 0

    def _obs(self) -> np.ndarray:
        return np.eye(2, dtype=np.float32)[self.phase]

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.phase = 0
        return self._obs(), {}

    def step(self, action):
        if self.phase == 0:
            self.phase = 1
            return self._obs(), 0.0, False, False, {"macro_steps": K}
        self.phase = 0
        return self._obs(), 1.0, True, False, {"macro_steps": 1}


def make_two_decision_env(full_env_name, cfg=None, env_config=None, render_mode=None):
    return PrimitiveStepCount(TwoDecisionEnv())


def train_two_decision(train_dir, learner_cls) -> tuple[float, float, dict]:
    """Train with ``learner_cls``; returns (V(start), V(after the option), checkpoint)."""
    register_env(ENV_NAME, make_two_decision_env)
    register_model()
    argv = [
        f"--env={ENV_NAME}",
        "--experiment=tiny",
        f"--train_dir={train_dir}",
        "--device=cpu",
        "--serial_mode=True",
        "--async_rl=False",
        "--num_workers=1",
        "--num_envs_per_worker=2",
        "--rollout=32",
        "--batch_size=128",
        "--num_epochs=4",
        "--learning_rate=0.002",
        f"--gamma={GAMMA}",
        "--gae_lambda=0.95",
        "--use_rnn=False",
        "--normalize_input=False",
        "--normalize_returns=True",
        "--encoder_mlp_layers",
        "32",
        "--train_for_env_steps=60000",
        "--decorrelate_experience_max_seconds=0",
        "--save_every_sec=600",
        "--with_wandb=False",
        "--set_workers_cpu_affinity=False",
    ]
    parser, _ = parse_sf_args(argv=argv, evaluation=False)
    cfg = parse_full_cfg(parser, argv=argv)
    previous = learner_worker.Learner
    smdp.install(learner_cls)
    try:
        assert run_rl(cfg) == 0
    finally:
        learner_worker.Learner = previous
    ckpt = load_checkpoint(latest_checkpoint(train_dir / "tiny"))
    env = make_two_decision_env(ENV_NAME)
    model = create_actor_critic(cfg, env.observation_space, env.action_space)
    model.load_state_dict(ckpt["model"])
    model.eval()
    obs = {"obs": torch.eye(2), "num_frames": torch.ones(2, 1)}
    with torch.no_grad():
        values = model(model.normalize_obs(obs), torch.zeros(2, get_rnn_size(cfg)), values_only=True)[
            "values"
        ]
        model.returns_normalizer(values, denormalize=True)
    return float(values[0]), float(values[1]), ckpt


@pytest.fixture(scope="module")
def smdp_run(tmp_path_factory):
    return train_two_decision(tmp_path_factory.mktemp("smdp"), smdp.SMDPLearner)


def test_value_of_an_option_is_discounted_by_gamma_to_the_k(smdp_run):
    start, after, _ = smdp_run
    assert after == pytest.approx(1.0, abs=0.08)
    assert start == pytest.approx(GAMMA**K, abs=0.08), f"V(start)={start:.3f}, true {GAMMA**K:.3f}"


def test_env_steps_count_primitive_steps_exactly(smdp_run):
    """Every rollout of 32 decisions holds 16 options (K steps) and 16 one-step decisions."""
    _, _, ckpt = smdp_run
    assert ckpt["decisions"] > 0 and ckpt["decisions"] % 128 == 0
    assert ckpt["env_steps"] == ckpt["decisions"] // 2 * (K + 1)
    assert ckpt["env_steps"] >= 60000


def test_per_decision_discounting_learns_the_wrong_value(tmp_path):
    """Sample Factory's own learner (gamma once per decision) fails the known-answer test above: it learns
    V(start) ~ gamma instead of gamma^K, and counts decisions as env steps."""
    start, _, ckpt = train_two_decision(tmp_path, Learner)
    assert start == pytest.approx(GAMMA, abs=0.08)
    assert abs(start - GAMMA**K) > 0.4
    assert "decisions" not in ckpt and ckpt["env_steps"] % 128 == 0


def reference_advantages(rewards, dones, time_outs, values, valids, num_frames, gamma, lam):
    """Float64 loop: time-out bootstrap with gamma^k, then GAE with per-transition discounts gamma^k."""
    rewards, values = rewards.double().clone(), values.double()
    n_envs, n_steps = rewards.shape
    adv = torch.zeros(n_envs, n_steps, dtype=torch.float64)
    for e in range(n_envs):
        for t in range(n_steps):
            if time_outs[e, t] and dones[e, t]:
                rewards[e, t] += gamma ** float(num_frames[e, t]) * values[e, t]
        running = 0.0
        for t in reversed(range(n_steps)):
            disc = gamma ** float(num_frames[e, t])
            valid, next_valid = float(valids[e, t]), float(valids[e, t + 1])
            not_done = 1.0 - float(dones[e, t])
            delta = (rewards[e, t] - values[e, t]) * valid + not_done * disc * values[e, t + 1] * next_valid
            trace = disc * lam if valid else 1.0
            running = delta + trace * running * not_done
            adv[e, t] = running
    return adv


def sf_style_advantages(rewards, dones, time_outs, values, valids, num_frames, gamma, lam):
    discounts = smdp.transition_discounts(num_frames, gamma)
    rewards = rewards + smdp.time_out_bootstrap(values[:, :-1], time_outs, dones, discounts)
    return smdp.smdp_gae(rewards, dones, values, valids, num_frames, gamma, lam)[0]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_smdp_gae_matches_a_float64_reference(seed):
    g = torch.Generator().manual_seed(seed)
    n_envs, n_steps = 6, 40
    rewards = torch.randn(n_envs, n_steps, generator=g)
    dones = torch.rand(n_envs, n_steps, generator=g) < 0.15
    time_outs = torch.rand(n_envs, n_steps, generator=g) < 0.5
    values = torch.randn(n_envs, n_steps + 1, generator=g)
    valids = torch.rand(n_envs, n_steps + 1, generator=g) < 0.9
    num_frames = torch.randint(1, 33, (n_envs, n_steps), generator=g).float()
    got = sf_style_advantages(rewards, dones, time_outs, values, valids, num_frames, 0.97, 0.9)
    want = reference_advantages(rewards, dones, time_outs, values, valids, num_frames, 0.97, 0.9)
    torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=1e-5)
    # ... and discounting matters here: per-decision GAE is far off.
    per_decision = sf_style_advantages(
        rewards, dones, time_outs, values, valids, torch.ones_like(num_frames), 0.97, 0.9
    )
    assert (per_decision.double() - want).abs().max() > 0.1


@pytest.mark.parametrize("impl", ["eager", "fused_ops", "numba"])
@pytest.mark.parametrize("gamma, lam", [(0.99, 0.95), (0.9, 0.8), (0.997, 1.0), (0.95, 0.0)])
def test_one_primitive_step_per_decision_is_sample_factorys_gae(gamma, lam, impl, monkeypatch):
    # Every CPU implementation the dispatcher can pick (`rlgpt.kernels.cpu.CPU_CHOICE`), not only today's.
    monkeypatch.setitem(CPU_CHOICE, "gae", impl)
    g = torch.Generator().manual_seed(7)
    rewards = torch.randn(5, 33, generator=g)
    dones = torch.rand(5, 33, generator=g) < 0.1
    values = torch.randn(5, 34, generator=g)
    valids = torch.rand(5, 34, generator=g) < 0.9
    ours, returns = smdp.smdp_gae(rewards, dones, values, valids, torch.ones(5, 33), gamma, lam)
    sf = gae_advantages(rewards, dones, values, valids, gamma, lam)
    assert ours.dtype == sf.dtype == torch.float32 and not ours.isnan().any()
    torch.testing.assert_close(ours, sf, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(returns, sf + valids[:, :-1] * values[:, :-1], rtol=1e-5, atol=1e-5)
    assert torch.equal(smdp.transition_discounts(torch.ones(3), gamma), torch.full((3,), gamma))


def test_primitive_step_count_wrapper_reports_k_in_obs_and_info():
    env = PrimitiveStepCount(TwoDecisionEnv())
    assert set(env.observation_space.spaces) == {"obs", "num_frames"}
    obs, _ = env.reset(seed=0)
    assert obs["num_frames"].tolist() == [0.0] and obs["obs"].tolist() == [1.0, 0.0]
    obs, _, _, _, info = env.step(0)
    assert obs["num_frames"].tolist() == [K] and info["num_frames"] == K
    obs, _, terminated, _, info = env.step(0)
    assert terminated and obs["num_frames"].tolist() == [1.0] and info["num_frames"] == 1
    # Sample Factory resets right after the last step and stores the reset obs in that step's slot.
    obs, _ = env.reset()
    assert obs["num_frames"].tolist() == [1.0]
    assert env.observation_space.contains(obs)


def test_vtrace_is_refused():
    class Cfg:
        with_vtrace = True

    with pytest.raises(ValueError, match="with_vtrace"):
        smdp.SMDPLearner(Cfg(), None, None, 0, None)


def test_the_policy_ignores_num_frames():
    """``num_frames`` is bookkeeping for the learner: no encoder weight reads it, whatever its value."""
    from rlgpt.config import load_config
    from rlgpt.rl.sf_config import build_sf_config
    from rlgpt.rl.sf_env import make_gym_env, register_task_env

    cfg = load_config(None, ["task=collect_wood", "ppo.hidden_size=32"])
    sf_cfg = build_sf_config(cfg, Path("/nonexistent/run"), register_task_env("collect_wood"))
    register_model()
    env = make_gym_env(sf_cfg.env, sf_cfg)
    model = create_actor_critic(sf_cfg, env.observation_space, env.action_space)
    assert "num_frames" in env.observation_space.spaces
    obs, _ = env.reset(seed=0)
    # Two passes over the same rows, differing only in num_frames: identical shapes take identical
    # kernels, so the values match bit for bit (rows of one batch need not: GEMM blocking varies by row).
    values = []
    for frames in (1.0, 32.0):
        batch = {k: torch.as_tensor(np.stack([v, v])) for k, v in obs.items()}
        batch["num_frames"] = torch.full((2, 1), frames)
        with torch.no_grad():
            out = model(model.normalize_obs(batch), torch.zeros(2, get_rnn_size(sf_cfg)), values_only=True)
        values.append(out["values"])
    assert torch.equal(values[0], values[1])
    env.close()
    # Sample Factory's default encoder (pixels, other envs) would encode every key; it gets the rest only.
    pixels = gym.spaces.Box(0, 255, shape=(3, 64, 64), dtype=np.uint8)
    wrapped = gym.spaces.Dict({"obs": pixels, "num_frames": gym.spaces.Box(0, np.inf, (1,), np.float32)})
    assert make_encoder(sf_cfg, wrapped).obs_keys == ["obs"]


def test_pixel_observations_build_a_policy_that_sees_the_image():
    """Crafter's pixels are HWC; Sample Factory's conv encoder needs CHW (it used to fail to build)."""
    from rlgpt.config import load_config
    from rlgpt.rl.sf_config import build_sf_config
    from rlgpt.rl.sf_env import make_gym_env, register_task_env

    cfg = load_config(None, ["task=collect_wood", "ppo.hidden_size=32", "env.obs_mode=pixels"])
    sf_cfg = build_sf_config(cfg, Path("/nonexistent/run"), register_task_env("collect_wood"))
    register_model()
    env = make_gym_env(sf_cfg.env, sf_cfg)
    assert env.observation_space["obs"].shape == (3, 64, 64)
    model = create_actor_critic(sf_cfg, env.observation_space, env.action_space)
    obs, _ = env.reset(seed=0)
    frame = env.unwrapped.render()  # the same frame, HWC
    assert obs["obs"].shape == (3, 64, 64) and np.array_equal(obs["obs"].transpose(1, 2, 0), frame)
    batch = {k: torch.as_tensor(np.stack([v, v])).float() for k, v in obs.items()}
    batch["obs"][1] = 255 - batch["obs"][1]  # another image gives another value
    with torch.no_grad():
        out = model(model.normalize_obs(batch), torch.zeros(2, get_rnn_size(sf_cfg)), values_only=True)
    assert out["values"].shape == (2,) and out["values"][0] != out["values"][1]
    env.close()
