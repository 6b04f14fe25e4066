"""One learner step of the real policy: forward, PPO loss, backward, gradient clipping and Adam.

The policy Sample Factory builds for ``configs/main.yaml`` (rlgpt's encoder and SF's heads), on a random
minibatch of symbolic observations, timed per sample for each combination of the encoder's precision
(``ppo.encoder_precision``: fp32, bf16) and the CPU implementation of its embedding + first convolution
(``eager``: the convolution of the embedding; ``tables``: `rlgpt.kernels.cpu.embed_conv_tables`). Rounds
interleave the variants; the speedup is against fp32 + eager measured in the same run.

    OMP_NUM_THREADS=1 python -m bench.learner_step [--batch 1024] [--rounds 7] [--threads 1]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

import numpy as np
import torch
from sample_factory.algo.utils.rl_utils import prepare_and_normalize_obs
from sample_factory.model.actor_critic import create_actor_critic

from rlgpt.config import builtin_config_path, load_config
from rlgpt.envs.crafter import N_IDS, CrafterEnv
from rlgpt.kernels import cpu
from rlgpt.rl.model import register_model
from rlgpt.rl.sf_config import build_sf_config
from rlgpt.rl.sf_env import register_task_env


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=1024, help="minibatch (configs/main.yaml: 1024)")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (Sample Factory's learner: 1)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    env = CrafterEnv(obs_mode="symbolic")
    register_model()
    models = {}
    for precision in ("fp32", "bf16"):
        cfg = load_config(builtin_config_path("main.yaml"), [f"ppo.encoder_precision={precision}"])
        sf_cfg = build_sf_config(cfg, Path("/nonexistent/run"), register_task_env(cfg.task))
        torch.manual_seed(0)
        model = create_actor_critic(sf_cfg, env.observation_space, env.action_space)
        models[precision] = (model, torch.optim.Adam(model.parameters(), lr=3e-4))
    rng = np.random.default_rng(0)
    b = args.batch
    obs = {
        "view": torch.as_tensor(rng.integers(0, N_IDS, size=(b, *env.observation_space["view"].shape))),
        "vector": torch.as_tensor(rng.integers(0, 9, size=(b, 22)).astype(np.float32)),
    }
    actions = torch.as_tensor(rng.integers(0, 17, size=b))
    advantages, returns = torch.randn(b), torch.randn(b)

    def step(precision: str, embed_conv: str) -> None:
        cpu.CPU_CHOICE["embed_conv"] = embed_conv
        model, optimizer = models[precision]
        out = model(prepare_and_normalize_obs(model, dict(obs)), torch.zeros(b, 1))
        log_prob = torch.log_softmax(out["action_logits"], -1).gather(1, actions[:, None])[:, 0]
        ratio = torch.exp(log_prob - log_prob.detach())
        policy_loss = -torch.min(ratio * advantages, ratio.clamp(0.8, 1.2) * advantages).mean()
        loss = policy_loss + 0.5 * ((out["values"] - returns) ** 2).mean()
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()

    chosen = cpu.CPU_CHOICE["embed_conv"]
    variants = [(p, e) for p in ("fp32", "bf16") for e in ("eager", "tables")]
    for v in variants:
        step(*v)
    samples: dict[tuple[str, str], list[float]] = {v: [] for v in variants}
    load = os.getloadavg()[0]
    for _ in range(args.rounds):
        for v in variants:
            start = time.perf_counter()
            step(*v)
            step(*v)
            samples[v].append((time.perf_counter() - start) / 2 / b * 1e6)
    cpu.CPU_CHOICE["embed_conv"] = chosen
    base = statistics.median(samples[("fp32", "eager")])
    print(f"batch {b}, {args.threads} thread(s), load average {load:.1f} -> {os.getloadavg()[0]:.1f}")
    print("| encoder precision | embed_conv | us per sample | speedup |\n|---|---|---:|---:|")
    for (precision, embed_conv), values in samples.items():
        median = statistics.median(values)
        print(f"| {precision} | {embed_conv} | {median:.1f} | {base / median:.2f} |")


if __name__ == "__main__":
    main()
