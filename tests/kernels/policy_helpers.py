"""The policy the kernel tests check: what ``rlgpt train --config configs/main.yaml`` builds."""

import torch


def main_policy(run_dir, batch: int, n_ids: int, view_dtype: str = "int64"):
    """The float32 policy `rlgpt train --config configs/main.yaml` builds (seed 0), its Sample Factory config,
    and ``batch`` random observations (view ids below ``n_ids``, drawn as ``view_dtype``: each test keeps the
    draws its tolerances were set on) prepared as the learner feeds them."""
    import numpy as np
    from sample_factory.algo.utils.rl_utils import prepare_and_normalize_obs
    from sample_factory.model.actor_critic import create_actor_critic

    from rlgpt.config import builtin_config_path, load_config
    from rlgpt.envs.crafter import CrafterEnv
    from rlgpt.rl.model import register_model
    from rlgpt.rl.sf_config import build_sf_config
    from rlgpt.rl.sf_env import register_task_env

    cfg = load_config(builtin_config_path("main.yaml"), ["ppo.encoder_precision=fp32"])  # the kernels' dtype
    sf_cfg = build_sf_config(cfg, run_dir, register_task_env(cfg.task))
    register_model()
    env = CrafterEnv(obs_mode="symbolic")
    torch.manual_seed(0)
    model = create_actor_critic(sf_cfg, env.observation_space, env.action_space)
    rng = np.random.default_rng(0)
    obs = {
        "view": torch.as_tensor(
            rng.integers(0, n_ids, size=(batch, *env.observation_space["view"].shape), dtype=view_dtype)
        ),
        "vector": torch.as_tensor(rng.integers(0, 9, size=(batch, 22)).astype(np.float32)),
    }
    return model, prepare_and_normalize_obs(model, obs), sf_cfg
