"""What rlgpt's own code in every Sample Factory process reads: the typed `TrainConfig`, serialized once.

The trainer (`rlgpt.rl.sf_config.build_sf_config`) resolves a `WorkerConfig` from the `TrainConfig` and the
job's `EnvSetup` and passes it to Sample Factory as ONE flag, ``--rlgpt_train_config=<json>``: Sample
Factory saves it in the run's ``config.json`` and hands it to every process it spawns, where
:func:`worker_config` decodes it with the same dataclasses (so every default has one copy: the dataclass
field's) once per process. A field added to `TrainConfig` (or any of its parts) travels with no other change.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

from rlgpt.config import NO_SETUP, EnvSetup, TrainConfig, train_config_from_dict
from rlgpt.macro.compiler import MacroSource

FLAG = "rlgpt_train_config"
"""The one Sample Factory flag (and ``config.json`` key) rlgpt adds: a `WorkerConfig` as JSON."""


@dataclass(frozen=True)
class WorkerConfig:
    """A training's `TrainConfig`, the fast agent's env setup, and what the trainer resolved from them once
    (for its machine and env backend), as every Sample Factory process of the training reads them."""

    train: TrainConfig = field(default_factory=TrainConfig)
    """The training's config, as `rlgpt.config.load_config` built and validated it."""
    setup: EnvSetup = NO_SETUP
    """The LLM-written dense reward and observation parts."""
    macros: tuple[MacroSource, ...] = ()
    """The macros of ``train.macros.file``, read and checked once by the trainer; compiled where they run
    (no code objects pickled)."""
    episode_length: int = 0
    """Primitive steps per episode: ``train.env.episode_length`` or the task's default (0, in a config saved
    before the typed flag without the old flag: the task's default)."""
    batch_games: int = 0
    """Games per Sample Factory env on the ``batch`` backend; 0: the ``gym`` backend (one task env each)."""
    learner_core: int = -1
    """The CPU core the learner has to itself (`rlgpt.rl.sf_config.learner_core`), -1 for none."""
    encoder_precision: str = "fp32"
    """``fp32`` or ``bf16``: ``train.ppo.encoder_precision`` with ``auto`` resolved for this machine."""

    @property
    def seed(self) -> int:
        """The run seed (policy and world seeds derive from it)."""
        return self.train.seed

    @property
    def gamma(self) -> float:
        """Discount per primitive step (`rlgpt.config.PPOConfig.gamma`)."""
        return self.train.ppo.gamma

    def to_json(self) -> str:
        """The flag's value (:func:`worker_config` decodes it)."""
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> WorkerConfig:
        """Inverse of :meth:`to_json` (the trainer validated the config; it is not checked again)."""
        data = json.loads(text)
        return cls(
            train=train_config_from_dict(data.pop("train"), check=False),
            setup=_setup(data.pop("setup", {})),
            macros=tuple(MacroSource(**m) for m in data.pop("macros", ())),
            **data,
        )


def _setup(data: dict[str, Any]) -> EnvSetup:
    return EnvSetup(reward_code=data.get("reward_code", ""), observation=tuple(data.get("observation", ())),
                    progress_goals=tuple(data.get("progress_goals", ())))


_DECODED: dict[str, WorkerConfig] = {}
"""Configs decoded in this process, by their JSON (a process decodes its training's once)."""


def worker_config(cfg: Any) -> WorkerConfig:
    """The `WorkerConfig` of Sample Factory config ``cfg`` (a parsed config, or a run's loaded
    ``config.json``), decoded once per process; a `WorkerConfig` is returned as it is. A config saved before
    the flag existed is read from its old per-setting flags (`_legacy`)."""
    if isinstance(cfg, WorkerConfig):
        return cfg
    text = cfg.get(FLAG) if hasattr(cfg, "get") else getattr(cfg, FLAG, None)
    if not text:
        return _legacy(cfg)
    if text not in _DECODED:
        _DECODED[text] = WorkerConfig.from_json(text)
    return _DECODED[text]


# The per-setting flags configs were saved with before FLAG: flag -> (WorkerConfig field or TrainConfig path).
_LEGACY_FLAGS = {
    "rlgpt_obs_mode": "train.env.obs_mode", "rlgpt_hidden_size": "train.ppo.hidden_size",
    "rlgpt_macro_max_steps": "train.macros.max_steps", "rlgpt_start_pool": "train.env.start_pool",
    "rlgpt_macro_memory_mb": "train.macros.memory_limit_mb",
    "rlgpt_max_time_share": "train.macros.max_time_share",
    "rlgpt_budget_grace_seconds": "train.macros.budget_grace_seconds", "rlgpt_marks": "train.marks",
    "rlgpt_dense_reward_cap": "train.dense_reward_cap", "rlgpt_mark_offset": "train.mark_offset",
    "rlgpt_options": "train.options", "rlgpt_episode_length": "episode_length",
    "rlgpt_batch_games": "batch_games", "rlgpt_learner_core": "learner_core",
    "rlgpt_encoder_precision": "encoder_precision",
}


def _legacy(cfg: Any) -> WorkerConfig:
    """A config saved before :data:`FLAG` existed: its ``rlgpt_*`` flags, the dataclasses' defaults for the
    ones it lacks (older still)."""
    from rlgpt.macro.files import sources_from_json

    saved = dict(cfg.items()) if hasattr(cfg, "items") else vars(cfg)
    train: dict[str, Any] = {"seed": int(saved.get("seed") or 0)}
    own: dict[str, Any] = {}
    for flag, path in _LEGACY_FLAGS.items():
        value = saved.get(flag)
        if value in (None, ""):
            continue
        if path in ("train.options", "train.marks"):
            value = [v for v in str(value).split(",") if v]
        parts = path.split(".")
        if parts[0] != "train":
            own[path] = value
            continue
        node = train
        for part in parts[1:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value
    if "gamma" in saved:
        train.setdefault("ppo", {})["gamma"] = saved["gamma"]
    observation = saved.get("rlgpt_observation") or ""
    return WorkerConfig(
        train=train_config_from_dict(train, check=False),
        setup=EnvSetup(reward_code=saved.get("rlgpt_reward") or "",
                       observation=tuple(o for o in observation.split(",") if o)),
        macros=tuple(sources_from_json(saved["rlgpt_macros"])) if saved.get("rlgpt_macros") else (),
        **own,
    )
