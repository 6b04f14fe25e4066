"""SMDP learning over macro-actions inside Sample Factory's APPO learner.

A macro-action that runs ``k`` primitive steps is one policy decision. Its reward is already the discounted
sum ``sum_i gamma^i r_i`` over those steps (`rlgpt.macro.runtime.run_macro`), so the value of the state it
ends in must be discounted by ``gamma^k``, not by ``gamma`` once per decision as Sample Factory does (that
makes a long macro look as cheap as one step and biases the policy toward long macros).

How ``k`` reaches the learner: `rlgpt.rl.sf_env.PrimitiveStepCount` adds an observation key
``num_frames`` holding ``k`` of the transition that produced the observation (a reset after an episode end
holds ``k`` of the episode's last transition). Sample Factory stores the observation after every step of a
rollout (``obs[:, t + 1]``, one extra slot at the end), so ``k_t = obs["num_frames"][:, t + 1]`` without
touching its trajectory buffers or rollout workers; the policy's encoders never see the key
(`rlgpt.rl.model.make_encoder`). An env without the key has ``k = 1`` everywhere, which reproduces Sample
Factory's own GAE (to float32 rounding).

`SMDPLearner` overrides `Learner._prepare_batch` (GAE and the time-out bootstrap with ``gamma^k_t``) and
`Learner.train` (``env_steps`` grows by the exact sum of ``k`` over the batch, so ``train_for_env_steps``,
checkpoints, FPS and every summary count primitive steps; a batch arriving once ``env_steps`` is past
``train_for_env_steps`` is dropped untrained, so a training exceeds its budget by at most one batch). The
override copies Sample Factory 2.1.1's method, hence the version pin in `install`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path
from typing import Any

import torch
from sample_factory.algo.learning.learner import Learner
from sample_factory.algo.utils.misc import LEARNER_ENV_STEPS, POLICY_ID_KEY
from sample_factory.algo.utils.tensor_dict import TensorDict, shallow_recursive_copy
from sample_factory.cfg.arguments import cfg_dict
from sample_factory.utils.dicts import iterate_recursively
from sample_factory.utils.utils import experiment_dir, log
from torch import Tensor

from rlgpt import kernels, layout, rundir
from rlgpt.rl import sf_private
from rlgpt.rl.worker_config import worker_config

NUM_FRAMES_KEY = "num_frames"
"""Observation key holding the primitive steps of the transition that produced the observation."""
DECISIONS_KEY = "rlgpt_decisions"
"""Learner report key: policy decisions (transitions) consumed so far, counting earlier sessions."""
SF_VERSION = "2.1.1"
"""The Sample Factory version whose `Learner._prepare_batch` `SMDPLearner._prepare_batch` mirrors."""


def transition_discounts(num_frames: Tensor, gamma: float) -> Tensor:
    """``gamma ** k`` per transition, computed in float64 and rounded once, so ``k = 1`` gives exactly the
    float32 ``gamma`` Sample Factory multiplies by."""
    return torch.pow(gamma, num_frames.double()).float()


def smdp_gae(rewards: Tensor, dones: Tensor, values: Tensor, valids: Tensor, num_frames: Tensor,
             gamma: float, lam: float) -> tuple[Tensor, Tensor]:
    """``(advantages, returns)`` of GAE over SMDP transitions ([E, T] inputs, ``values``/``valids``
    [E, T + 1]): ``delta_t = r_t + gamma^k_t V_{t+1} - V_t`` and ``A_t = delta_t + gamma^k_t lambda A_{t+1}``.

    ``lambda`` weights decisions (it is a trace over the policy's own steps), ``gamma`` primitive steps.
    The arithmetic is `rlgpt.kernels.gae` (a Triton kernel on CUDA, the fastest measured CPU path
    otherwise; its reference follows Sample Factory's ``gae_advantages`` step for step, which ``k = 1``
    reproduces to float32 rounding).
    """
    return kernels.gae(rewards, dones.float(), values, valids.float(), gamma, lam,
                       discounts=transition_discounts(num_frames, gamma))


def time_out_bootstrap(values: Tensor, time_outs: Tensor, dones: Tensor, discounts: Tensor) -> Tensor:
    """Reward to add where an episode was cut by its time limit: ``gamma^k_t V(s_t)`` stands in for the
    value of the state after the cut, ``k_t`` steps later (SF's approximation, with SMDP discounting)."""
    return discounts * values * time_outs * dones


def batch_num_frames(obs: TensorDict, shape: torch.Size) -> Tensor:
    """``k_t`` for every transition of a [E, T] batch: the ``num_frames`` of the observation after it
    (at least 1: every transition advanced the game); ones when the env does not report it."""
    if NUM_FRAMES_KEY not in obs:
        return torch.ones(shape)
    return obs[NUM_FRAMES_KEY][:, 1:, 0].float().clamp_min(1.0)


class MarkSaver:
    """Saves a copy of the policy the first time the run's step count (`rlgpt.config.TrainConfig.mark_offset`
    + the learner's ``env_steps``) reaches each of its `rlgpt.config.TrainConfig.marks`, into
    `rlgpt.layout.mark_dir`: the checkpoint (tensors on the CPU) and Sample Factory's config, so the
    copy is a run directory `rlgpt.rl.evaluate.evaluate` reads like any other. A mark whose copy exists
    (saved by an earlier, killed session) is kept as it is: it is the policy that crossed the mark."""

    def __init__(self, cfg: Any) -> None:
        self.cfg = cfg
        train = worker_config(cfg).train
        self.offset = train.mark_offset
        self.pending = sorted(set(train.marks))
        self.train_dir = Path(experiment_dir(cfg=cfg)) if self.pending else None

    def due(self, env_steps: int) -> list[int]:
        """The pending marks the run's count has reached at `env_steps` (removed from pending)."""
        reached = [m for m in self.pending if self.offset + env_steps >= m]
        self.pending = self.pending[len(reached):]
        return reached

    def save(self, env_steps: int, checkpoint: Callable[[], dict[str, Any]]) -> None:
        """Save the copies of the marks reached at `env_steps`; `checkpoint` builds the checkpoint dict
        (only called when a mark is due)."""
        marks = self.due(env_steps)
        if not marks or self.train_dir is None:
            return
        state = _to_cpu(checkpoint())
        for mark in marks:
            out = layout.mark_dir(self.train_dir, mark)
            path = out / "checkpoint_p0" / f"checkpoint_{int(state['train_step']):09d}_{env_steps}.pth"
            if list(path.parent.glob("checkpoint_*.pth")):
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            rundir.atomic_write_text(out / layout.SF_CONFIG, json.dumps(cfg_dict(self.cfg), indent=2))
            rundir.write_json(out / layout.MARK_RECORD_JSON, {"mark": mark, "env_steps": env_steps,
                                                               "run_steps": self.offset + env_steps})
            # Written under a name `latest_checkpoint` skips, then renamed: a kill mid-save leaves no copy.
            tmp = path.with_name("checkpoint_temp")
            torch.save(state, tmp)
            os.replace(tmp, path)


def _to_cpu(value: Any) -> Any:
    """`value` (a checkpoint dict) with every tensor copied to the CPU."""
    if isinstance(value, Tensor):
        return value.detach().to("cpu", copy=True)
    if isinstance(value, dict):
        return {k: _to_cpu(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_to_cpu(v) for v in value)
    return value


class SMDPLearner(Learner):
    """Sample Factory's learner with ``gamma^k`` discounting and primitive-step counting (see module doc)."""

    def __init__(self, cfg, *args: Any, **kwargs: Any) -> None:
        if cfg.with_vtrace:
            raise ValueError("with_vtrace is not supported: V-trace discounts once per decision, use GAE")
        super().__init__(cfg, *args, **kwargs)
        self.decisions = 0
        """Transitions (policy decisions) trained on, counting earlier sessions."""
        self._batch_frames = 0
        self._batch_decisions = 0
        self.marks = MarkSaver(cfg)
        """The budget marks this training saves a policy copy at."""

    def init(self):
        # In the learner process: the core `rlgpt.rl.train` kept free for it.
        core = worker_config(self.cfg).learner_core
        if core >= 0:
            os.sched_setaffinity(0, {core})
        return super().init()

    def _get_checkpoint_dict(self) -> dict[str, Any]:
        checkpoint = super()._get_checkpoint_dict()
        checkpoint["decisions"] = self.decisions
        return checkpoint

    def _load_state(self, checkpoint_dict, load_progress=True):
        super()._load_state(checkpoint_dict, load_progress)
        if load_progress:
            # Checkpoints from before this learner counted decisions only (SF's env_steps).
            self.decisions = int(checkpoint_dict.get("decisions", checkpoint_dict["env_steps"]))

    def train(self, batch: TensorDict) -> dict | None:
        before = self.env_steps
        if before > self.cfg.train_for_env_steps:
            # Past the budget (Sample Factory's own test: it ends once env_steps > train_for_env_steps), its
            # rollout workers still deliver batches until it stops (two more were seen). They are dropped
            # untrained, so a training ends at most one batch past its budget; the report (env_steps
            # unchanged) lets the runner see the count and stop, also in a session resumed past the budget.
            return {LEARNER_ENV_STEPS: self.env_steps, POLICY_ID_KEY: self.policy_id}
        stats = super().train(batch)
        if stats is not None:  # SF counted experience_size * frameskip; the exact count replaces it
            self.decisions += self._batch_decisions
            self.env_steps = before + self._batch_frames
            stats[LEARNER_ENV_STEPS] = self.env_steps
            stats[DECISIONS_KEY] = self.decisions
            self.marks.save(self.env_steps, self._get_checkpoint_dict)
        return stats

    def _prepare_batch(self, batch: TensorDict) -> tuple[TensorDict, int, int]:
        # Mirrors Sample Factory 2.1.1's Learner._prepare_batch; the changes are marked "SMDP".
        with torch.no_grad():
            buff = shallow_recursive_copy(batch)

            valids: Tensor = buff["policy_id"] == self.policy_id
            curr_policy_version: int = self.train_step
            recent = curr_policy_version - buff["policy_version"] < self.cfg.max_policy_lag
            buff["valids"][:, :-1] = valids & recent
            buff["valids"][:, -1] = buff["valids"][:, -2]

            # SMDP: primitive steps per transition, read before the obs are normalized and dropped.
            num_frames = batch_num_frames(buff["obs"], buff["rewards"].shape).to(buff["rewards"].device)
            self._batch_frames = int(num_frames.sum().item())
            self._batch_decisions = int(num_frames.numel())

            if not self.actor_critic.training:
                self.actor_critic.train()

            buff["normalized_obs"] = self._prepare_and_normalize_obs(buff["obs"])
            del buff["obs"]

            normalized_last_obs = buff["normalized_obs"][:, -1]
            last_rnn_states = buff["rnn_states"][:, -1]
            buff["values"][:, -1] = self.actor_critic(normalized_last_obs, last_rnn_states, values_only=True)[
                "values"
            ]

            if self.cfg.normalize_returns:
                denormalized_values = buff["values"].clone()
                self.actor_critic.returns_normalizer(denormalized_values, denormalize=True)
            else:
                denormalized_values = buff["values"]

            if self.cfg.value_bootstrap:
                # SMDP: a time-out ends the episode after k_t primitive steps; bootstrap with gamma^k_t.
                discounts = transition_discounts(num_frames, self.cfg.gamma)
                values = denormalized_values[:, :-1]
                buff["rewards"].add_(time_out_bootstrap(values, buff["time_outs"], buff["dones"], discounts))

            # SMDP: GAE with gamma^k_t (V-trace is refused in __init__).
            buff["advantages"], buff["returns"] = smdp_gae(
                buff["rewards"], buff["dones"], denormalized_values, buff["valids"], num_frames,
                self.cfg.gamma, self.cfg.gae_lambda,
            )

            for key in ["normalized_obs", "rnn_states", "values", "valids"]:
                buff[key] = buff[key][:, :-1]

            dataset_size = buff["actions"].shape[0] * buff["actions"].shape[1]
            for d, k, v in iterate_recursively(buff):
                d[k] = v.reshape((dataset_size,) + tuple(v.shape[2:]))

            buff["dones_cpu"] = buff["dones"].to("cpu", copy=True, dtype=torch.float, non_blocking=True)
            buff["rewards_cpu"] = buff["rewards"].to("cpu", copy=True, dtype=torch.float, non_blocking=True)

            if self.cfg.normalize_returns:
                self.actor_critic.returns_normalizer(buff["returns"])

            num_invalids = dataset_size - buff["valids"].sum().item()
            if num_invalids > 0:
                invalid_fraction = num_invalids / dataset_size
                if invalid_fraction > 0.5:
                    log.warning(f"{self.policy_id=} batch has {invalid_fraction:.2%} of invalid samples")
                invalid_indices = (buff["valids"] == 0).nonzero().squeeze()
                buff["actions"][invalid_indices] = 0
                buff["log_prob_actions"][invalid_indices] = -1

            return buff, dataset_size, num_invalids


def install(learner_cls: type[Learner] = SMDPLearner) -> None:
    """Make Sample Factory build ``learner_cls`` for every policy (call in the trainer before `make_runner`).

    Sample Factory constructs the learner in the trainer process (`LearnerWorker.__init__`) and pickles it
    into the learner process, so patching the name there is enough. ``install(Learner)`` restores SF's own.
    """
    installed = version("sample-factory")
    if installed != SF_VERSION:
        raise RuntimeError(
            f"rlgpt.rl.learner mirrors Sample Factory {SF_VERSION}'s Learner._prepare_batch, but "
            f"sample-factory {installed} is installed; pin sample-factory=={SF_VERSION} or port SMDPLearner"
        )
    sf_private.replace_learner(learner_cls)
