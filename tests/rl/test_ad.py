"""`rlgpt.rl.ad`: Achievement Distillation's losses against values computed by hand from the reference's
formulas (snu-mllab/Achievement-Distillation, model/ppo_ad.py), its trajectory bookkeeping, its optimal
transport, and a short real training whose auxiliary phase runs, checkpoints and resumes."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from rlgpt.config import builtin_config_path, load_config
from rlgpt.rl import ad
from rlgpt.rl.checkpoint import latest_checkpoint, load_checkpoint
from rlgpt.rl.train import train


def test_contrastive_loss_equals_the_hand_computed_cross_entropy():
    anchor = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    positive = torch.tensor([[0.6, 0.8], [1.0, 0.0]])
    negative = torch.tensor([[0.0, 1.0], [0.6, 0.8]])
    # logits / 0.1: row 1 [6, 0] -> log(1 + e^-6); row 2 [0, 8] -> log(1 + e^8); the mean of the two.
    expected = (math.log(1 + math.exp(-6)) + math.log(1 + math.exp(8))) / 2
    got = ad.contrastive_loss(anchor, positive, negative, temperature=0.1)
    assert got.item() == pytest.approx(expected, rel=1e-6)


def test_policy_distillation_is_kl_of_the_new_policy_from_the_old():
    new = torch.tensor([[0.0, 0.0], [1.0, 1.0]])          # pi = (1/2, 1/2) both rows
    old = torch.tensor([[0.0, math.log(3)], [5.0, 5.0]])  # (1/4, 3/4), then (1/2, 1/2)
    # row 1: 1/2 ln(2) + 1/2 ln(2/3) = 1/2 ln(4/3); row 2: 0.
    assert ad.policy_distillation(new, old).item() == pytest.approx(0.5 * math.log(4 / 3) / 2, rel=1e-6)


def test_value_distillation_is_the_mean_squared_error():
    assert ad.value_distillation(torch.tensor([1.0, 2.0]), torch.tensor([0.0, 4.0])).item() == 2.5


def test_goal_states_are_unit_latent_changes_with_a_zero_latent_at_the_end():
    latents = torch.tensor([[1.0, 1.0], [0.0, 2.0]])
    next_latents = torch.tensor([[4.0, 5.0], [9.0, 9.0]])
    states = ad.goal_states(latents, next_latents, torch.tensor([False, True]))
    torch.testing.assert_close(states, torch.tensor([[0.6, 0.8], [0.0, -1.0]]))


def test_segments_split_at_episode_ends_and_find_their_achievements():
    rewards = torch.tensor([[0.0, 1.0, 0.0, 0.1, 1.0, 0.0, 1.0],   # 0.1 (health) is no achievement
                            [0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0]])
    dones = torch.tensor([[0, 0, 0, 0, 0, 0, 1],
                          [0, 0, 1, 0, 0, 0, 0]])
    segs = ad.segments(rewards, dones, offset=100)
    assert [s.rows.tolist() for s in segs] == [list(range(100, 107)), [107, 108, 109], [110, 111, 112, 113]]
    assert [s.ends_episode for s in segs] == [True, True, False]
    # The last transition of a segment is no achievement here: its next observation is not in the segment.
    assert [s.goals.tolist() for s in segs] == [[1, 4], [1], [2]]  # t = 1, 4 (not 6); t = 1; t = 5


def test_next_goals_follow_the_reference_assignment():
    seg = ad.Segment(torch.arange(7), torch.tensor([1, 4]), ends_episode=True)
    steps, goal, missing = ad.next_goals(seg)
    assert steps.tolist() == [0, 1, 2, 3, 4, 5, 6]
    assert goal.tolist() == [1, 1, 4, 4, 4, 6, 6]   # after the last one: the episode's end, obs[-1] and zeros
    assert missing.tolist() == [False] * 5 + [True, True]
    cut = ad.Segment(torch.arange(4), torch.tensor([1]), ends_episode=False)
    steps, goal, missing = ad.next_goals(cut)
    assert steps.tolist() == [0, 1] and goal.tolist() == [1, 1]  # steps 2, 3: next achievement unknown


def test_partial_optimal_transport_matches_the_cheap_pairs():
    cost = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])   # 3 source achievements, 2 target
    plan = ad.entropic_partial_wasserstein(np.ones(3), np.ones(2), cost, ad.OT_REG)
    assert plan.sum() == pytest.approx(2.0)                  # mass min(3, 2)
    assert [tuple(ix) for ix in np.argwhere(plan > ad.OT_MATCHED)] == [(0, 1), (1, 0)]
    assert plan[2].max() < 1e-6


def test_a_short_ad_training_runs_its_auxiliary_phase_and_resumes(tmp_path):
    run_dir = tmp_path / "ad"
    overrides = [f"run_dir={run_dir}", "task=crafter", "ppo.algo=ad", "ppo.ad_aux_every=2",
                 "ppo.ad_aux_epochs=1", "eval_episodes=0"]
    cfg = load_config(builtin_config_path("smoke.yaml"), [*overrides, "steps=2048"])
    first = train(cfg)
    assert first.status == 0
    state = load_checkpoint(latest_checkpoint(run_dir))
    # 256 decisions (steps) a batch; a training ends at most one batch past its budget.
    phases = state["env_steps"] // 256
    assert phases >= 8 and (state["ad"]["ppo_phases"], state["ad"]["aux_phases"]) == (phases, phases // 2)
    assert set(state["ad"]["pred_optimizer"]["state"]), "the prediction loss never stepped its optimizer"
    assert any(k.startswith("ad_heads.") for k in state["model"])
    # The learner found its LearnerWorker, whose heartbeat it keeps going during a phase.
    assert "no heartbeats during auxiliary phases" not in (run_dir / "sf_log.txt").read_text()

    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run_dir / ".summary" / "0"))
    events.Reload()
    assert {"train/ad/aux_phases", "train/ad/pred_loss", "train/ad/pi_dist"} <= set(events.Tags()["scalars"])

    again = train(load_config(builtin_config_path("smoke.yaml"), [*overrides, "steps=3072"]))
    assert again.status == 0 and again.env_steps >= 3072
    resumed = load_checkpoint(latest_checkpoint(run_dir))
    phases = resumed["env_steps"] // 256  # counted on from the first session's checkpoint, not anew
    counts = resumed["ad"]["ppo_phases"], resumed["ad"]["aux_phases"]
    assert phases >= 12 and counts == (phases, phases // 2)


def test_the_auxiliary_phase_trains_on_a_fixed_batch():
    """`AuxiliaryPhase` on two stored batches of a real policy: every `ad_aux_every`-th PPO phase it runs both
    losses (matching needs two trajectories with achievements), steps the heads and the torso, and leaves
    the policy close to where it was (the distillation terms)."""
    from types import SimpleNamespace

    from test_encoders import build

    model, sf_cfg = build("ppo.algo=ad", "ppo.hidden_size=32")
    from rlgpt.config import load_config
    from rlgpt.rl.worker_config import FLAG, WorkerConfig

    train = load_config(None, ["ppo.algo=ad", "ppo.ad_aux_every=2", "ppo.ad_aux_epochs=2",
                               "ppo.ad_pi_dist_coef=1.0", "ppo.ad_vf_dist_coef=1.0", "ppo.ad_temperature=0.1",
                               "ppo.ad_match=true"])
    cfg = SimpleNamespace(**{FLAG: WorkerConfig(train=train).to_json()}, max_grad_norm=0.5,
                          learning_rate=3e-4, seed=0)
    beats = []
    phase = ad.AuxiliaryPhase(model, cfg, heartbeat=lambda: beats.append(1), heartbeat_every_s=0.0)
    envs, steps = 2, 8
    gen = torch.Generator().manual_seed(0)
    rewards = torch.zeros(envs, steps)
    rewards[:, 2] = rewards[:, 5] = 1.0  # two achievements in each env's slice
    dones = torch.zeros(envs, steps)
    buff = {"normalized_obs": {"view": torch.randint(0, 19, (envs * steps, 7, 9), generator=gen),
                               "vector": torch.rand(envs * steps, 22, generator=gen)},
            "rnn_states": torch.zeros(envs * steps, 32), "actions": torch.randint(0, 17, (envs * steps,)),
            "returns": torch.randn(envs * steps, generator=gen), "rewards_cpu": rewards.flatten(),
            "dones_cpu": dones.flatten()}
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    phase.store(buff, steps)
    assert phase.after_ppo_phase() is None  # the first of two PPO phases
    phase.store(buff, steps)
    stats = phase.after_ppo_phase()
    assert stats is not None and stats["ad/aux_phases"] == 1 and stats["ad/segments_with_goals"] == 4
    assert {"ad/match_loss", "ad/pred_loss", "ad/pi_dist", "ad/vf_dist"} <= set(stats)
    assert all(math.isfinite(v) for v in stats.values())
    changed = {n for n, p in model.named_parameters() if not torch.equal(p, before[n])}
    assert any(n.startswith("ad_heads.predictor") for n in changed)
    assert any(n.startswith("encoder.") for n in changed)
    assert stats["ad/pi_dist"] < 0.1  # distilled: the policy moved little
    assert phase.state_dict()["ppo_phases"] == 2
    assert len(beats) == stats["ad/updates"]  # Sample Factory hears from the learner during the phase
