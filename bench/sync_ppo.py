"""A CleanRL-style single-file synchronous PPO on rlgpt's Crafter task env: a training-throughput baseline.

What a user would write instead of rlgpt's Sample Factory setup: ``num_envs`` task envs stepped one after
the other in this process, a rollout, GAE, a few epochs of clipped PPO, repeat. It is here only to measure
rlgpt against (``python -m bench``); it is not part of the package.

"Same task, same network, same hyperparameters": the envs are built by the factory ``rlgpt train`` gives
Sample Factory (`rlgpt.rl.sf_env.make_gym_env`: task env, episode statistics), the actor-critic is the
one Sample Factory builds for ``rlgpt train`` (`rlgpt.rl.model`'s encoder, SF's linear heads), from the same
``configs/main.yaml`` (16 envs = 2 workers x 8, rollout 64, batch 1024, 2 epochs, lr 3e-4, gamma 0.99,
lambda 0.95, clip 0.2, entropy 0.01, value 0.5, grad norm 1.0). What differs is what CleanRL's ``ppo.py``
does: advantages normalized per minibatch, no return normalization, no value clipping, no policy lag.

    OMP_NUM_THREADS=1 python -m bench.sync_ppo --steps 300000 --seed 0 --run-dir /tmp/sync

Writes ``RUN_DIR/metrics.csv`` (`rlgpt.tracking.MetricsLog`, a row every ``summaries_every_sec``, the same
columns and rolling-success window as ``rlgpt train``) and prints one JSON line with the result.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections import deque
from pathlib import Path

import numpy as np
import torch
from sample_factory.model.actor_critic import create_actor_critic
from torch import nn

from rlgpt.config import builtin_config_path, load_config
from rlgpt.rl.model import register_model
from rlgpt.rl.sf_config import build_sf_config
from rlgpt.rl.sf_env import make_batch_task_env, make_gym_env, register_task_env
from rlgpt.rl.worker_boot import SF_CONSOLE_LEVEL_ENV, apply_console_level
from rlgpt.tracking import SUCCESS_WINDOW, MetricsLog


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=str(builtin_config_path("main.yaml")), help="rlgpt train config")
    parser.add_argument("--task", default=None, help="Crafter task (default: the config's)")
    parser.add_argument("--steps", type=int, default=None, help="env steps (default: the config's)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--run-dir", required=True, help="where metrics.csv goes")
    parser.add_argument(
        "--stop-at-success",
        type=float,
        default=None,
        help="stop at the first row whose full rolling window reaches this success rate",
    )
    parser.add_argument(
        "--env",
        choices=("gym", "batch"),
        default="gym",
        help="gym: one task env per game, stepped one after the other (the baseline the issue names); "
        "batch: all games in one call of the compiled engine, as rlgpt's batch backend steps them",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=0,
        help="torch threads (default 0: one per core this process may use, what a script that leaves torch "
        "alone gets, whatever OMP_NUM_THREADS says; the one process has the whole machine to itself)",
    )
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="config override")
    return parser.parse_args(argv)


def to_tensors(obs: list[dict[str, np.ndarray]]) -> dict[str, torch.Tensor]:
    """Stack the envs' dict observations key by key into batch tensors."""
    return {key: torch.from_numpy(np.stack([o[key] for o in obs])) for key in obs[0]}


class GymSteps:
    """The games as task envs built by the factory ``rlgpt train`` gives Sample Factory
    (`rlgpt.rl.sf_env.make_gym_env`), stepped one after the other."""

    def __init__(self, env_name: str, sf_cfg, num_envs: int) -> None:
        self.envs = [make_gym_env(env_name, sf_cfg) for _ in range(num_envs)]
        self.observation_space, self.action_space = self.envs[0].observation_space, self.envs[0].action_space

    def reset(self) -> dict[str, torch.Tensor]:
        # Env i gets seed i, offset by the run seed (`EpisodeStats`), as in Sample Factory's workers.
        return to_tensors([env.reset(seed=i)[0] for i, env in enumerate(self.envs)])

    def step(self, action: torch.Tensor, successes: deque[float]):
        """One step of every game (a finished one is reset): observations, rewards, dones; the successes of
        episodes that ended are appended to ``successes``."""
        obs_list, rewards, dones = [], [], []
        for i, env in enumerate(self.envs):
            obs, reward, terminated, truncated, info = env.step(int(action[i]))
            if terminated or truncated:
                successes.append(info["episode_extra_stats"]["rollout/success"])
                obs, _ = env.reset()
            obs_list.append(obs)
            rewards.append(float(reward))
            dones.append(terminated or truncated)
        return to_tensors(obs_list), torch.tensor(rewards), torch.tensor(dones, dtype=torch.float32)


class BatchSteps:
    """The games as one `rlgpt.rl.sf_batch.BatchTaskEnv` over the compiled engine: the same games (seeds),
    task rules and statistics as `GymSteps`, stepped by one call."""

    def __init__(self, env_name: str, sf_cfg, num_envs: int) -> None:
        self.env = make_batch_task_env(env_name, sf_cfg, num_games=num_envs)
        self.observation_space, self.action_space = self.env.observation_space, self.env.action_space

    def reset(self) -> dict[str, torch.Tensor]:
        obs, _ = self.env.reset(seed=0)  # game j: the seed of env j, as `GymSteps`
        return {k: torch.from_numpy(np.array(v)) for k, v in obs.items()}

    def step(self, action: torch.Tensor, successes: deque[float]):
        obs, reward, terminated, truncated, infos = self.env.step(action.numpy())
        done = terminated | truncated
        if done.any():
            successes.extend(infos["rollout/success"][torch.from_numpy(done)].tolist())
        # Copies: the engine reuses its observation arrays on the next step.
        obs_t = {k: torch.from_numpy(np.array(v)) for k, v in obs.items()}
        return obs_t, torch.from_numpy(reward), torch.from_numpy(done.astype(np.float32))


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    os.environ.setdefault(SF_CONSOLE_LEVEL_ENV, "WARNING")  # Sample Factory's info lines off the console
    apply_console_level()
    run_dir = Path(args.run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    overrides = [f"seed={args.seed}", f"run_dir={run_dir}"]
    overrides += [f"task={args.task}"] if args.task else []
    overrides += [f"steps={args.steps}"] if args.steps else []
    overrides += args.set
    cfg = load_config(args.config, overrides)
    ppo = cfg.ppo
    num_envs = cfg.env.num_workers * cfg.env.num_envs_per_worker
    minibatch = ppo.batch_size
    batch = num_envs * ppo.rollout
    torch.set_num_threads(args.threads or len(os.sched_getaffinity(0)))
    torch.manual_seed(cfg.seed)
    np.random.seed(cfg.seed)

    # Envs and network exactly as `rlgpt train` has Sample Factory build them.
    env_name = register_task_env(cfg.task)
    register_model()
    sf_cfg = build_sf_config(cfg, run_dir, env_name)
    steps_class = BatchSteps if args.env == "batch" else GymSteps
    step_all = steps_class(env_name, sf_cfg, num_envs)
    agent = create_actor_critic(sf_cfg, step_all.observation_space, step_all.action_space)
    optimizer = torch.optim.Adam(agent.parameters(), lr=ppo.learning_rate, eps=sf_cfg.adam_eps)

    def policy(obs: dict[str, torch.Tensor]) -> tuple[torch.distributions.Categorical, torch.Tensor]:
        x, _ = agent.forward_core(agent.forward_head(agent.normalize_obs(obs)), None)
        out = agent.forward_tail(x, values_only=False, sample_actions=False)
        return torch.distributions.Categorical(logits=out["action_logits"]), out["values"]

    # Rollout storage: [rollout, num_envs, ...].
    next_obs, next_done = step_all.reset(), torch.zeros(num_envs)
    obs_buf = {k: torch.zeros((ppo.rollout, *v.shape), dtype=v.dtype) for k, v in next_obs.items()}
    actions = torch.zeros((ppo.rollout, num_envs), dtype=torch.long)
    logprobs, rewards, dones, values = (torch.zeros((ppo.rollout, num_envs)) for _ in range(4))

    metrics = MetricsLog(run_dir / "metrics.csv")
    successes: deque[float] = deque(maxlen=SUCCESS_WINDOW)
    global_step, start = 0, time.time()
    last_row, last_row_steps = start, 0
    while global_step < cfg.steps:
        # 1. Collect a rollout with the current policy.
        for t in range(ppo.rollout):
            for k, v in next_obs.items():
                obs_buf[k][t] = v
            dones[t] = next_done
            with torch.no_grad():
                dist, value = policy(next_obs)
                action = dist.sample()
            actions[t], logprobs[t], values[t] = action, dist.log_prob(action), value
            next_obs, rewards[t], next_done = step_all.step(action, successes)
            global_step += num_envs

        # 2. Generalized advantage estimation, bootstrapping from the value of the last observation.
        with torch.no_grad():
            _, next_value = policy(next_obs)
            advantages = torch.zeros_like(rewards)
            last_gae = torch.zeros(num_envs)
            for t in reversed(range(ppo.rollout)):
                not_done = 1.0 - (next_done if t == ppo.rollout - 1 else dones[t + 1])
                following = next_value if t == ppo.rollout - 1 else values[t + 1]
                delta = rewards[t] + ppo.gamma * following * not_done - values[t]
                last_gae = delta + ppo.gamma * ppo.gae_lambda * not_done * last_gae
                advantages[t] = last_gae
            returns = advantages + values

        # 3. Clipped PPO over shuffled minibatches, a few epochs.
        b_obs = {k: v.reshape(batch, *v.shape[2:]) for k, v in obs_buf.items()}
        b_actions, b_logprobs = actions.reshape(-1), logprobs.reshape(-1)
        b_advantages, b_returns = advantages.reshape(-1), returns.reshape(-1)
        for _ in range(ppo.num_epochs):
            order = torch.randperm(batch)
            for begin in range(0, batch, minibatch):
                idx = order[begin : begin + minibatch]
                dist, new_value = policy({k: v[idx] for k, v in b_obs.items()})
                ratio = (dist.log_prob(b_actions[idx]) - b_logprobs[idx]).exp()
                adv = b_advantages[idx]
                adv = (adv - adv.mean()) / (adv.std() + 1e-8)
                clipped = ratio.clamp(1 - ppo.ppo_clip_ratio, 1 + ppo.ppo_clip_ratio)
                policy_loss = torch.max(-adv * ratio, -adv * clipped).mean()
                value_loss = 0.5 * ((new_value - b_returns[idx]) ** 2).mean()
                entropy = dist.entropy().mean()
                loss = policy_loss + ppo.value_loss_coeff * value_loss - ppo.exploration_loss_coeff * entropy
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), ppo.max_grad_norm)
                optimizer.step()

        # 4. Log a metrics row every few seconds, like `rlgpt train`.
        now = time.time()
        if now - last_row >= cfg.summaries_every_sec or global_step >= cfg.steps:
            success = float(np.mean(successes)) if successes else None
            fps = (global_step - last_row_steps) / (now - last_row)
            metrics.write(
                env_steps=global_step,
                decisions=global_step,
                wall_time=round(now - start, 2),
                fps=round(fps, 1),
                success=success,
                success_episodes=len(successes),
            )
            last_row, last_row_steps = now, global_step
            full = len(successes) == SUCCESS_WINDOW
            if args.stop_at_success is not None and full and success >= args.stop_at_success:
                break
    metrics.close()
    result = dict(
        env_steps=global_step,
        wall_s=round(time.time() - start, 2),
        success=float(np.mean(successes)) if successes else None,
    )
    print(json.dumps(result), flush=True)
    return result


if __name__ == "__main__":
    main()
