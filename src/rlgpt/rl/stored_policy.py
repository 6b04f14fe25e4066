"""A stored trained policy played outside its training: its network and its own env wrappers around a given
task env (a skill chained into another episode, or an option of a later training)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np


class StoredPolicy:
    """The newest checkpoint of the training in `policy_dir` (its ``config.json`` and checkpoint), for
    `task` (default: the task it was trained on)."""

    def __init__(self, policy_dir: str | Path, task: str | None = None) -> None:
        from sample_factory.model.actor_critic import create_actor_critic

        from rlgpt.rl.checkpoint import latest_checkpoint, load_checkpoint, load_sf_config
        from rlgpt.rl.model import register_model
        from rlgpt.rl.sf_config import task_from_env_name

        self.cfg = load_sf_config(Path(policy_dir))
        self.task = task or task_from_env_name(self.cfg.env)
        register_model()
        self.checkpoint = load_checkpoint(latest_checkpoint(Path(policy_dir)))
        self._create = create_actor_critic
        self.model = None

    def wrap(self, env: Any) -> Any:
        """`env` behind this policy's wrappers (no dense reward: only the task's reward counts here)."""
        from rlgpt.rl.wrappers import wrap_task_env

        wrapped = wrap_task_env(env, self.cfg, dense_reward=False, options=option_policies(self.cfg))
        if self.model is None:
            self.model = self._create(self.cfg, wrapped.observation_space, wrapped.action_space)
            self.model.load_state_dict(self.checkpoint["model"])
            self.model.eval()
        return wrapped

    def act(self, obs: dict[str, Any]) -> int:
        """One sampled action."""
        import torch
        from sample_factory.algo.utils.rl_utils import prepare_and_normalize_obs
        from sample_factory.model.model_utils import get_rnn_size

        with torch.no_grad():
            batch = {k: torch.as_tensor(np.asarray(v))[None] for k, v in obs.items()}
            rnn = torch.zeros(1, get_rnn_size(self.cfg))
            out = self.model(prepare_and_normalize_obs(self.model, batch), rnn)
        return int(out["actions"].view(-1)[0])


def option_policies(cfg: Any) -> list[StoredPolicy]:
    """The stored policies a training's config offers as options (``rlgpt_options``: policy directories
    joined by ``,``; configs written before the flag existed have none)."""
    dirs = getattr(cfg, "rlgpt_options", "") or ""
    return [StoredPolicy(d) for d in dirs.split(",") if d]
