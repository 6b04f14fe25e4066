"""A stored trained policy played outside its training: its network and its own env wrappers around a given
task env (a skill chained into another episode, or an option of a later training), or the run's own envs
(`rlgpt.rl.evaluate`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np


class StoredPolicy:
    """The newest checkpoint of the training in `policy_dir` (its ``config.json`` and checkpoint), for
    `task` (default: the task it was trained on)."""

    def __init__(self, policy_dir: str | Path, task: str | None = None) -> None:
        from sample_factory.model.actor_critic import create_actor_critic

        from rlgpt.env_registry import parse_sf_env_name
        from rlgpt.rl.checkpoint import latest_checkpoint, load_checkpoint, load_sf_config
        from rlgpt.rl.model import register_model
        from rlgpt.rl.worker_boot import apply_console_level

        apply_console_level()  # its model set-up's log lines stay off the console, as in a training

        self.policy_dir = Path(policy_dir).resolve()
        """The training directory this policy was loaded from."""
        self.cfg = load_sf_config(Path(policy_dir))
        self.task = task or parse_sf_env_name(self.cfg.env)[1]
        register_model()
        self.checkpoint = load_checkpoint(latest_checkpoint(Path(policy_dir)))
        self._create = create_actor_critic
        self.model = None

    @property
    def env_steps(self) -> int:
        """Training env (primitive) steps of the checkpoint."""
        return int(self.checkpoint.get("env_steps", 0))

    def build(self, env: Any) -> None:
        """Create the network for `env`'s spaces (an env this policy's wrappers made) once."""
        if self.model is None:
            self.model = self._create(self.cfg, env.observation_space, env.action_space)
            self.model.load_state_dict(self.checkpoint["model"])
            self.model.eval()

    def wrap(self, env: Any) -> Any:
        """`env` behind this policy's wrappers (no dense reward: only the task's reward counts here)."""
        from rlgpt.rl.wrappers import wrap_task_env

        wrapped = wrap_task_env(env, self.cfg, dense_reward=False, options=option_policies(self.cfg))
        self.build(wrapped)
        return wrapped

    def act(self, obs: dict[str, Any]) -> int:
        """One sampled action."""
        return self.act_batch([obs])[0]

    def act_batch(self, observations: Sequence[dict[str, Any]], deterministic: bool = False) -> list[int]:
        """One action per observation, in one forward pass: sampled, or the most likely with
        `deterministic`. The recurrent state starts at zero on every call."""
        import torch
        from sample_factory.algo.utils.action_distributions import argmax_actions
        from sample_factory.algo.utils.rl_utils import prepare_and_normalize_obs
        from sample_factory.model.model_utils import get_rnn_size

        with torch.no_grad():
            batch = {k: torch.as_tensor(np.stack([np.asarray(o[k]) for o in observations]))
                     for k in observations[0]}
            rnn = torch.zeros(len(observations), get_rnn_size(self.cfg))
            out = self.model(prepare_and_normalize_obs(self.model, batch), rnn)
            actions = argmax_actions(self.model.action_distribution()) if deterministic else out["actions"]
        return [int(a) for a in actions.view(-1).tolist()]


_OPTION_POLICIES: dict[Path, StoredPolicy] = {}
"""Every stored policy loaded as an option in this process, by directory (see `option_policies`)."""


def option_policies(cfg: Any) -> list[StoredPolicy]:
    """The stored policies a training's config offers as options (`rlgpt.config.TrainConfig.options`).

    Each directory is loaded once per process and shared: a planner chain's link k offers links 0..k-1,
    whose own configs offer the links before them again, so loading per mention would build 2^(k-1)
    networks (and, per env, as many wrapper stacks) for link k: at the fifth link of a diamond chain the
    env workers ran out of memory building them. Option directories are finished trainings (skill
    library entries), so a loaded checkpoint never goes stale."""
    from rlgpt.rl.worker_config import worker_config

    policies = []
    for d in worker_config(cfg).train.options:
        if d:
            key = Path(d).resolve()
            if key not in _OPTION_POLICIES:
                _OPTION_POLICIES[key] = StoredPolicy(key)
            policies.append(_OPTION_POLICIES[key])
    return policies
