"""Achievement Distillation (Moon, Yeom, Song: "Discovering Hierarchical Achievements in Reinforcement
Learning via Contrastive Learning", NeurIPS 2023) on Sample Factory's learner
(`rlgpt.config.PPOConfig.algo` ``ad``).

Every `PPOConfig.ad_aux_every` PPO phases (training batches) the learner runs an auxiliary phase over the
batches of those phases (`AuxiliaryPhase.run`), `PPOConfig.ad_aux_epochs` passes of:

- in-context achievement matching: the achievements of one trajectory (the change of the encoder's latent
  over the step that unlocked each, normalised: `goal_states`) are matched to another trajectory's by entropic
  partial optimal transport (`entropic_partial_wasserstein`); a matched pair is a positive, a random
  achievement of the other trajectory a negative (`contrastive_loss`);
- intra-trajectory achievement prediction: the latent of (observation, action) through a FiLM layer and an
  MLP (`rlgpt.rl.model.ADHeads.predict`) must point at the next achievement of its trajectory rather than at
  that of another step of the same trajectory (`contrastive_loss`);
- both with policy and value distillation against the networks from before the phase
  (`policy_distillation`: KL(pi || pi_before); `value_distillation`: MSE to the stored, normalised returns).

The formulas, the order (matching then prediction, each with its own Adam) and the hyper-parameters are those
of the reference code, snu-mllab/Achievement-Distillation (achievement_distillation/algorithm/ppo_ad.py,
model/ppo_ad.py; configs/ppo_ad.yaml: aux_freq 8, aux_nepoch 6, pi_dist_coef 1, vf_dist_coef 1,
temperature 0.1, OT reg 0.05 and 100 iterations, 16 partner trajectories, minibatches of at most 512).

Where this port differs, and why:
- A "trajectory" is a stretch of one env's rollout slice up to an episode end (`segments`), not a whole
  episode: Sample Factory hands the learner slices of ``rollout`` steps whose order across batches it does not
  keep. Steps after a slice's last achievement have no known next achievement and are left out of the
  prediction loss unless the slice ends the episode (then the reference's end-of-episode target applies).
- An achievement is a transition whose reward exceeds 0.1, the reference's test (it asserts it equals the
  unlock of an achievement): this holds for crafter's own reward (`rlgpt.envs.tasks.BENCHMARK_TASK`).
- No "memory" (the reference's ``use_memory``: the latent of the last achievement fed to the heads at every
  step): it needs a per-env state the rollout workers would have to compute; the heads read the latent only.
- The stored batches are lost when a training stops; a resumed training refills them before its next phase.
"""

from __future__ import annotations

import sys
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from sample_factory.algo.learning.learner_worker import LearnerWorker
from sample_factory.algo.utils.misc import TRAIN_STATS
from sample_factory.utils.utils import log
from torch import Tensor, nn

from rlgpt.rl.learner import SMDPLearner
from rlgpt.rl.worker_config import worker_config

GOAL_REWARD = 0.1
"""A transition with a reward above this unlocked an achievement (the reference's test)."""
OT_REG = 0.05
"""Entropic regularisation of the matching's optimal transport (reference: ``reg=0.05``)."""
OT_ITERATIONS = 100
"""Iterations of the matching's optimal transport (reference: ``numItermax=100``)."""
OT_MATCHED = 0.5
"""A transport plan entry above this is a match (reference: ``T > 0.5``)."""
MATCH_PARTNERS = 16
"""Trajectories each trajectory's achievements are matched against (reference: 16)."""
MAX_MINIBATCH = 512
"""Largest auxiliary minibatch (reference: ``max_batch_size=512``)."""


# ----------------------------------------------------------------------------------- the loss formulas


def goal_states(latents: Tensor, next_latents: Tensor, next_missing: Tensor | None = None) -> Tensor:
    """An achievement's state: the unit change of the latent over the step that unlocked it; where the next
    observation is missing (the end of an episode) its latent counts as zero (reference ``get_states``)."""
    if next_missing is not None:
        next_latents = torch.where(next_missing[:, None], torch.zeros_like(next_latents), next_latents)
    return F.normalize(next_latents - latents, dim=-1)


def contrastive_loss(anchor: Tensor, positive: Tensor, negative: Tensor, temperature: float) -> Tensor:
    """Cross-entropy of telling the positive from the negative by the dot product with the anchor, over
    ``temperature`` (reference ``compute_pred_losses`` / ``compute_match_losses``)."""
    logits = torch.stack([(anchor * positive).sum(-1), (anchor * negative).sum(-1)], dim=-1) / temperature
    return F.cross_entropy(logits, torch.zeros(len(logits), dtype=torch.long, device=logits.device))


def policy_distillation(logits: Tensor, old_logits: Tensor) -> Tensor:
    """Mean KL(pi || pi_before) over the batch (the reference's
    ``CategoricalActionHead.kl_divergence(new, old)``)."""
    log_q, log_p = F.log_softmax(logits, dim=-1), F.log_softmax(old_logits, dim=-1)
    return (log_q.exp() * (log_q - log_p)).sum(-1).mean()


def value_distillation(values: Tensor, targets: Tensor) -> Tensor:
    """Mean squared error of the (normalised) value to the returns stored with the batch."""
    return F.mse_loss(values, targets)


def entropic_partial_wasserstein(a: np.ndarray, b: np.ndarray, cost: np.ndarray, reg: float,
                                 iterations: int = OT_ITERATIONS) -> np.ndarray:
    """The transport plan of entropic partial optimal transport moving mass ``min(|a|, |b|)`` (Benamou et al.
    2015, iterative Bregman projections): a port of POT 0.9's ``ot.partial.entropic_partial_wasserstein``
    (MIT licence), which the reference calls, without its convergence test (the reference's threshold,
    1e-100, never stops it early)."""
    a, b, cost = (np.asarray(x, dtype=np.float64) for x in (a, b, cost))
    mass = min(a.sum(), b.sum())
    plan = np.exp(-cost / reg)
    plan *= mass / plan.sum()
    q1, q2, q3 = np.ones_like(plan), np.ones_like(plan), np.ones_like(plan)
    for _ in range(iterations):
        prev = plan
        plan = plan * q1
        k1 = np.minimum(a / plan.sum(axis=1), 1.0)[:, None] * plan
        q1 = q1 * prev / k1
        k1_prev, k1 = k1, k1 * q2
        k2 = k1 * np.minimum(b / k1.sum(axis=0), 1.0)[None, :]
        q2 = q2 * k1_prev / k2
        k2_prev, k2 = k2, k2 * q3
        plan = k2 * (mass / k2.sum())
        q3 = q3 * k2_prev / plan
        if not np.isfinite(plan).all():
            return prev
    return plan


# ------------------------------------------------------------------------------ trajectories and goals


@dataclass
class Segment:
    """A stretch of one env's steps inside the stored batches, up to an episode end."""

    rows: Tensor
    """Row of each step in the stored (concatenated, flat) buffer, in time order."""
    goals: Tensor
    """Positions (in the segment) of the transitions that unlocked an achievement and whose next
    observation is in the segment."""
    ends_episode: bool
    """Whether the segment's last transition ended the episode."""


def segments(rewards: Tensor, dones: Tensor, offset: int = 0) -> list[Segment]:
    """Split ``[E, T]`` slices (flat rows ``offset + e * T + t``) at episode ends into `Segment` s."""
    envs, steps = rewards.shape
    out = []
    for e in range(envs):
        ends = (dones[e] > 0).nonzero().flatten().tolist()
        start = 0
        for end in [*ends, steps - 1]:
            if end < start:
                continue
            n = end - start + 1
            # A goal's next observation must be in the segment: its last transition is no goal.
            goals = (rewards[e, start:end] > GOAL_REWARD).nonzero().flatten()
            rows = offset + e * steps + torch.arange(start, end + 1)
            out.append(Segment(rows, goals, bool(dones[e, end] > 0) if n else False))
            start = end + 1
    return out


def next_goals(segment: Segment) -> tuple[Tensor, Tensor, Tensor]:
    """For the steps that know their next achievement: ``(steps, goal, missing)``: their positions, the
    position of that achievement's transition (its observation; the next is at ``goal + 1``), and whether
    that next observation is missing (the episode's end, the reference's target for the steps after its last
    achievement: ``obs[-1]`` and a zero observation)."""
    n = len(segment.rows)
    goals = segment.goals.tolist()
    steps, target, missing = [], [], []
    start = 0
    for g in goals:
        steps.extend(range(start, g + 1))
        target.extend([g] * (g + 1 - start))
        missing.extend([False] * (g + 1 - start))
        start = g + 1
    if segment.ends_episode and start < n:
        steps.extend(range(start, n))
        target.extend([n - 1] * (n - start))
        missing.extend([True] * (n - start))
    return torch.tensor(steps, dtype=torch.long), torch.tensor(target, dtype=torch.long), torch.tensor(
        missing, dtype=torch.bool)


# ---------------------------------------------------------------------------------------- the phase


class AuxiliaryPhase:
    """Stores the last `aux_every` training batches and runs AD's auxiliary phase over them."""

    def __init__(self, model: nn.Module, cfg: Any, device: torch.device | str = "cpu",
                 heartbeat: Callable[[], None] | None = None, heartbeat_every_s: float = 10.0):
        self.model = model
        self.heartbeat = heartbeat
        """Called at most every `heartbeat_every_s` during a phase: Sample Factory stops a training whose
        learner sends no heartbeat for ``heartbeat_reporting_interval`` seconds, and a phase blocks the
        learner's event loop (measured: a phase of the preset on the loaded 2-core box ran > 10 min)."""
        self.heartbeat_every_s = heartbeat_every_s
        self._last_beat = time.monotonic()
        self.device = torch.device(device)
        ppo = worker_config(cfg).train.ppo
        self.aux_every = ppo.ad_aux_every
        self.epochs = ppo.ad_aux_epochs
        self.pi_coef = ppo.ad_pi_dist_coef
        self.vf_coef = ppo.ad_vf_dist_coef
        self.temperature = ppo.ad_temperature
        self.match = ppo.ad_match
        self.max_grad_norm = float(cfg.max_grad_norm)
        self.batches: deque[dict[str, Any]] = deque(maxlen=self.aux_every)
        self.ppo_phases = 0
        """PPO phases (training batches) so far, counting earlier sessions."""
        self.aux_phases = 0
        """Auxiliary phases run so far, counting earlier sessions."""
        # The reference keeps one Adam per loss beside PPO's (same learning rate).
        self.match_optimizer = torch.optim.Adam(model.parameters(), lr=cfg.learning_rate)
        self.pred_optimizer = torch.optim.Adam(model.parameters(), lr=cfg.learning_rate)
        self.generator = torch.Generator().manual_seed(int(cfg.seed))

    def state_dict(self) -> dict[str, Any]:
        return {"ppo_phases": self.ppo_phases, "aux_phases": self.aux_phases,
                "match_optimizer": self.match_optimizer.state_dict(),
                "pred_optimizer": self.pred_optimizer.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.ppo_phases, self.aux_phases = int(state["ppo_phases"]), int(state["aux_phases"])
        self.match_optimizer.load_state_dict(state["match_optimizer"])
        self.pred_optimizer.load_state_dict(state["pred_optimizer"])

    def store(self, buff: Any, rollout: int) -> None:
        """Keep a prepared batch (flat ``[E * T, ...]`` tensors of `rlgpt.rl.learner.SMDPLearner`)."""
        keep = {"obs": {k: v.detach().to("cpu", copy=True) for k, v in buff["normalized_obs"].items()},
                "rnn_states": buff["rnn_states"].detach().to("cpu", copy=True),
                "actions": buff["actions"].detach().to("cpu", copy=True),
                "returns": buff["returns"].detach().to("cpu", copy=True)}
        envs = len(keep["actions"]) // rollout
        keep["rewards"] = buff["rewards_cpu"].reshape(envs, rollout)
        keep["dones"] = buff["dones_cpu"].reshape(envs, rollout)
        self.batches.append(keep)

    def after_ppo_phase(self) -> dict[str, float] | None:
        """Count a PPO phase; every `aux_every`-th, run the auxiliary phase and return its mean losses."""
        self.ppo_phases += 1
        if self.ppo_phases % self.aux_every or not self.batches:
            return None
        return self.run()

    # -- the data of one phase

    def _gather(self) -> None:
        cat = torch.cat
        self.obs = {k: cat([b["obs"][k] for b in self.batches]) for k in self.batches[0]["obs"]}
        self.rnn = cat([b["rnn_states"] for b in self.batches])
        self.actions = cat([b["actions"] for b in self.batches])
        self.returns = cat([b["returns"] for b in self.batches])
        self.segments, offset = [], 0
        for b in self.batches:
            self.segments += segments(b["rewards"], b["dones"], offset)
            offset += b["rewards"].numel()
        self.with_goals = [s for s in self.segments if len(s.goals)]

    def _rows(self, rows: Tensor) -> tuple[dict[str, Tensor], Tensor]:
        return {k: v[rows].to(self.device) for k, v in self.obs.items()}, self.rnn[rows].to(self.device)

    def _forward(self, model: nn.Module, rows: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """``(latents, action logits, values)`` of `model` on the stored rows."""
        obs, rnn = self._rows(rows)
        latents = model.forward_head(obs)
        core, _ = model.forward_core(latents, rnn)
        out = model.forward_tail(core, values_only=False, sample_actions=False)
        return latents, out["action_logits"], out["values"]

    def _latents(self, rows: Tensor) -> Tensor:
        obs, _ = self._rows(rows)
        return self.model.forward_head(obs)

    def _states(self, obs_rows: Tensor, next_missing: Tensor) -> Tensor:
        """`goal_states` of the achievements whose transitions are at `obs_rows` (next obs at row + 1)."""
        next_rows = torch.where(next_missing, obs_rows, obs_rows + 1)
        return goal_states(self._latents(obs_rows), self._latents(next_rows), next_missing.to(self.device))

    @torch.no_grad()
    def _old_logits(self) -> Tensor:
        """The policy's action logits on every stored row before the phase (the reference's ``old_model``,
        evaluated once per row instead of once per use)."""
        rows = torch.arange(len(self.actions))
        return torch.cat([self._forward(self.model, idx)[1].cpu() for idx in rows.split(MAX_MINIBATCH)])

    def _distill(self, rows: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        latents, logits, values = self._forward(self.model, rows)
        pi = policy_distillation(logits, self.old_logits[rows].to(self.device))
        vf = value_distillation(values, self.returns[rows].to(self.device))
        return latents, pi, vf

    def _step(self, optimizer: torch.optim.Optimizer, loss: Tensor) -> None:
        if self.heartbeat is not None and time.monotonic() - self._last_beat >= self.heartbeat_every_s:
            self.heartbeat()
            self._last_beat = time.monotonic()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(self.model.parameters(), self.max_grad_norm)
        optimizer.step()

    def _perm(self, n: int) -> Tensor:
        return torch.randperm(n, generator=self.generator)

    # -- the two losses

    def _match_epoch(self, sums: dict[str, float]) -> None:
        trajs = self.with_goals
        for i in self._perm(len(trajs)).tolist():
            source = trajs[i]
            src_rows = source.rows[source.goals]
            with torch.no_grad():
                src_states = self._states(src_rows, torch.zeros(len(src_rows), dtype=torch.bool))
            anchors, positives, negatives = [], [], []
            for j in self._perm(len(trajs) - 1)[:MATCH_PARTNERS].tolist():
                target = trajs[j + (j >= i)]
                tgt_rows = target.rows[target.goals]
                with torch.no_grad():
                    tgt_states = self._states(tgt_rows, torch.zeros(len(tgt_rows), dtype=torch.bool))
                cost = (1 - src_states @ tgt_states.T).cpu().numpy()
                plan = torch.from_numpy(entropic_partial_wasserstein(
                    np.ones(len(src_rows)), np.ones(len(tgt_rows)), cost, OT_REG))
                r, c = torch.where(plan > OT_MATCHED)
                if len(r) == 0:
                    continue
                anchors.append(src_rows[r])
                positives.append(tgt_rows[c])
                negatives.append(tgt_rows[torch.randint(len(tgt_rows), (len(c),), generator=self.generator)])
            if not anchors:
                continue
            anc, pos, neg = torch.cat(anchors), torch.cat(positives), torch.cat(negatives)
            misc = source.rows[torch.randint(len(source.rows), (len(anc),), generator=self.generator)]
            none = torch.zeros(len(anc), dtype=torch.bool)
            for idx in self._perm(len(anc)).split(MAX_MINIBATCH):
                anc_states = self._states(anc[idx], none[idx])
                with torch.no_grad():
                    pos_states = self._states(pos[idx], none[idx])
                    neg_states = self._states(neg[idx], none[idx])
                loss = contrastive_loss(anc_states, pos_states, neg_states, self.temperature)
                _, pi, vf = self._distill(misc[idx])
                self._step(self.match_optimizer, loss + self.pi_coef * pi + self.vf_coef * vf)
                _add(sums, match_loss=loss.item(), pi_dist=pi.item(), vf_dist=vf.item(), match_updates=1)

    def _pred_epoch(self, sums: dict[str, float]) -> None:
        trajs = self.with_goals
        for i in self._perm(len(trajs)).tolist():
            segment = trajs[i]
            steps, goal, missing = next_goals(segment)
            if len(steps) == 0:
                continue
            rows, goal_rows = segment.rows[steps], segment.rows[goal]
            neg_rows = rows[self._perm(len(rows))]
            for idx in self._perm(len(rows)).split(MAX_MINIBATCH):
                with torch.no_grad():
                    anchor = self._states(goal_rows[idx], missing[idx])
                heads = self.model.ad_heads
                both = torch.cat([rows[idx], neg_rows[idx]])
                latents, pi, vf = self._distill(both)
                actions = self.actions[both].to(self.device)
                preds = heads.predict(latents, actions)
                pos_pred, neg_pred = preds[: len(idx)], preds[len(idx):]
                loss = contrastive_loss(anchor, pos_pred, neg_pred, self.temperature)
                self._step(self.pred_optimizer, loss + self.pi_coef * pi + self.vf_coef * vf)
                _add(sums, pred_loss=loss.item(), pi_dist=pi.item(), vf_dist=vf.item(), pred_updates=1)

    def run(self) -> dict[str, float]:
        """One auxiliary phase over the stored batches; the mean losses (``ad/*`` summaries)."""
        start = time.monotonic()
        self._gather()
        was_training = self.model.training
        self.model.train()
        self.old_logits = self._old_logits()
        sums: dict[str, float] = {}
        for _ in range(self.epochs):
            if self.match:
                self._match_epoch(sums)
            self._pred_epoch(sums)
        self.model.train(was_training)
        self.model.zero_grad(set_to_none=True)
        self.aux_phases += 1
        updates = sums.get("match_updates", 0) + sums.get("pred_updates", 0)
        stats = {"ad/aux_phases": float(self.aux_phases), "ad/phase_seconds": time.monotonic() - start,
                 "ad/segments_with_goals": float(len(self.with_goals)),
                 "ad/updates": float(updates)}
        for key, count in (("match_loss", "match_updates"), ("pred_loss", "pred_updates")):
            if sums.get(count):
                stats[f"ad/{key}"] = sums[key] / sums[count]
        for key in ("pi_dist", "vf_dist"):
            if updates:
                stats[f"ad/{key}"] = sums[key] / updates
        del self.obs, self.rnn, self.actions, self.returns, self.old_logits
        return stats


def _add(sums: dict[str, float], **values: float) -> None:
    for k, v in values.items():
        sums[k] = sums.get(k, 0.0) + v


# --------------------------------------------------------------------------------------- the learner

AD_CHECKPOINT_KEY = "ad"
"""Checkpoint entry of `AuxiliaryPhase.state_dict` (phase counters and the auxiliary optimizers)."""


class ADLearner(SMDPLearner):
    """`SMDPLearner` (PPO on Sample Factory) plus AD's auxiliary phase every ``ad_aux_every`` PPO phases;
    its losses reach the ``train/`` summaries as ``ad/*``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.aux: AuxiliaryPhase | None = None
        self._aux_resume: dict[str, Any] | None = None

    def init(self):
        # Sample Factory 2.1.1's LearnerWorker.init calls this; its heartbeat must go on during a phase.
        worker = sys._getframe(1).f_locals.get("self")
        heartbeat = worker._report_heartbeat if isinstance(worker, LearnerWorker) else None
        if heartbeat is None:
            log.warning("ADLearner: no LearnerWorker called init; no heartbeats during auxiliary phases")
        result = super().init()  # builds the model and loads a checkpoint (`_load_state`)
        self.aux = AuxiliaryPhase(self.actor_critic, self.cfg, self.device, heartbeat,
                                  heartbeat_every_s=float(self.cfg.heartbeat_interval))
        if self._aux_resume is not None:
            self.aux.load_state_dict(self._aux_resume)
        return result

    def _get_checkpoint_dict(self) -> dict[str, Any]:
        checkpoint = super()._get_checkpoint_dict()
        if self.aux is not None:
            checkpoint[AD_CHECKPOINT_KEY] = self.aux.state_dict()
        return checkpoint

    def _load_state(self, checkpoint_dict, load_progress=True):
        super()._load_state(checkpoint_dict, load_progress)
        if load_progress:
            self._aux_resume = checkpoint_dict.get(AD_CHECKPOINT_KEY)

    def _prepare_batch(self, batch):
        buff, size, invalids = super()._prepare_batch(batch)
        if invalids < size:  # a wholly invalid batch is not trained on (Learner.train)
            self.aux.store(buff, self.cfg.rollout)
        return buff, size, invalids

    def train(self, batch) -> dict | None:
        before = self.train_step
        stats = super().train(batch)
        if stats is None or self.train_step == before:  # dropped past the budget, or not trained on
            return stats
        aux_stats = self.aux.after_ppo_phase()
        if aux_stats is not None:
            stats.setdefault(TRAIN_STATS, {}).update(aux_stats)
        return stats


def learner_class(cfg: Any) -> type[SMDPLearner]:
    """The learner class of a Sample Factory config (`rlgpt.config.PPOConfig.algo`; runs recorded before the
    knob read its default, ``ppo``)."""
    return ADLearner if worker_config(cfg).train.ppo.algo == "ad" else SMDPLearner
