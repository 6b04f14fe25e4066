"""The published-recipe presets (configs/crafter_resnet.yaml, crafter_ad.yaml) hold the reference code's
hyper-parameters (snu-mllab/Achievement-Distillation configs/ppo.yaml and ppo_ad.yaml), lower into a
Sample Factory config the batch backend accepts, and `bench.learners` builds a valid training of each."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import learners
from rlgpt.config import builtin_config_path, load_config
from rlgpt.rl.sf_config import build_sf_config
from rlgpt.rl.sf_env import register_task_env
from rlgpt.rl.worker_config import worker_config

# configs/ppo.yaml of the reference: nstep 512 x nproc 8, ppo_nepoch 3, ppo_nbatch 8, lr 3e-4, gamma 0.95,
# gae_lambda 0.65, ent_coef 0.01, vf_loss_coef 0.5, clip_param 0.2, max_grad_norm 0.5, hidsize 1024.
REFERENCE_PPO = {"rollout": 512, "num_epochs": 3, "num_batches_per_epoch": 8, "learning_rate": 3e-4,
                 "gamma": 0.95, "gae_lambda": 0.65, "exploration_loss_coeff": 0.01, "value_loss_coeff": 0.5,
                 "ppo_clip_ratio": 0.2, "max_grad_norm": 0.5}
REFERENCE_AD = {"ad_aux_every": 8, "ad_aux_epochs": 6, "ad_pi_dist_coef": 1.0, "ad_vf_dist_coef": 1.0,
                "ad_temperature": 0.1}


@pytest.mark.parametrize("preset, algo", [("crafter_resnet.yaml", "ppo"), ("crafter_ad.yaml", "ad")])
def test_presets_hold_the_reference_recipe(preset, algo):
    cfg = load_config(builtin_config_path(preset))
    sf = build_sf_config(cfg, Path("/nonexistent/run"), register_task_env(cfg.task))
    for name, value in REFERENCE_PPO.items():
        assert getattr(sf, name) == pytest.approx(value), name
    assert cfg.env.num_envs_per_worker * cfg.env.num_workers == 8  # nproc
    assert sf.batch_size * sf.num_batches_per_epoch == 8 * 512     # one batch = one reference rollout
    wc = worker_config(sf)
    assert (wc.train.ppo.encoder, wc.train.ppo.hidden_size, wc.train.ppo.algo) == ("resnet", 1024, algo)
    # Advantages: Sample Factory 2.1.1 normalizes them always (per minibatch; the reference per rollout).
    assert sf.normalize_returns and sf.lr_schedule == "constant"
    assert cfg.task == "crafter" and wc.episode_length == 10000 and cfg.steps == 1_000_000
    if algo == "ad":
        assert {k: getattr(wc.train.ppo, k) for k in REFERENCE_AD} == REFERENCE_AD
        assert wc.train.ppo.ad_match is True


def test_ad_knobs_parse_back_from_the_command_line():
    """AD's knobs travel in the typed worker config and parse back from Sample Factory's command line (a
    resumed run re-reads it): a bool given as text ("false") is false."""
    from rlgpt.rl.worker_config import FLAG, WorkerConfig

    cfg = load_config(None, ["ppo.algo=ad", "ppo.ad_match=false"])
    sf = build_sf_config(cfg, Path("/nonexistent/run"), register_task_env(cfg.task))
    assert worker_config(sf).train.ppo.ad_match is False
    assert WorkerConfig.from_json(sf.cli_args[FLAG]).train.ppo.algo == "ad"


@pytest.mark.parametrize("quick", [False, True])
@pytest.mark.parametrize("learner", list(learners.LEARNERS))
def test_every_bench_learner_builds_a_valid_training(learner, quick):
    cmd = learners.train_command(learner, Path("/nonexistent/run"), 2048, 0, quick)
    config = cmd[cmd.index("--config") + 1]
    sets = [cmd[i + 1] for i, arg in enumerate(cmd) if arg == "--set"]
    cfg = load_config(config, [*sets, "task=crafter"])
    sf = build_sf_config(cfg, Path("/nonexistent/run"), register_task_env(cfg.task))
    assert sf.batched_sampling and worker_config(sf).episode_length == 10000
