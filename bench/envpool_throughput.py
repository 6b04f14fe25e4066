"""Throughput of the RL core on envpool envs: raw envpool stepping FPS and Sample Factory APPO training FPS.

The ``envpool`` row of ``python -m bench``. Alone:
``OMP_NUM_THREADS=1 python -m bench.envpool_throughput --env CartPole-v1 --train_steps 200000``.
The training FPS is env steps / wall-clock seconds of ``run_rl`` including its start-up, so short runs
under-report the steady-state rate.
"""

from __future__ import annotations

import argparse
import tempfile
import time

import numpy as np

from rlgpt.envs.envpool import make_envpool_env, parse_envpool_cfg, register_envpool_envs


def raw_env_fps(env_id: str, num_envs: int, steps: int) -> float:
    """Env steps per second of one envpool pool stepped with uniformly random actions."""
    cfg = argparse.Namespace(batched_sampling=True, envpool_num_envs=num_envs, envpool_num_threads=1, seed=0)
    env = make_envpool_env(f"envpool_{env_id}", cfg, None)
    rng = np.random.default_rng(0)
    env.reset()
    n_actions = int(env.action_space.n)
    start = time.perf_counter()
    for _ in range(steps // num_envs):
        env.step(rng.integers(0, n_actions, size=num_envs, dtype=np.int32))
    elapsed = time.perf_counter() - start
    env.close()
    return (steps // num_envs) * num_envs / elapsed


def train_fps(
    env_id: str,
    train_steps: int,
    num_workers: int = 2,
    num_envs_per_worker: int = 2,
    envpool_num_envs: int = 32,
    batch_size: int = 2048,
) -> float:
    """Env steps per wall-clock second of a Sample Factory APPO run with batched sampling on envpool."""
    from sample_factory.train import run_rl

    register_envpool_envs([env_id])
    with tempfile.TemporaryDirectory() as train_dir:
        cfg = parse_envpool_cfg(
            [
                f"--env=envpool_{env_id}",
                "--experiment=envpool_bench",
                f"--train_dir={train_dir}",
                "--batched_sampling=True",
                f"--num_workers={num_workers}",
                f"--num_envs_per_worker={num_envs_per_worker}",
                f"--envpool_num_envs={envpool_num_envs}",
                "--rollout=32",
                f"--batch_size={batch_size}",
                f"--train_for_env_steps={train_steps}",
                "--device=cpu",
                "--seed=0",
                "--save_every_sec=3600",
                "--with_wandb=False",
            ]
        )
        start = time.perf_counter()
        status = run_rl(cfg)
        elapsed = time.perf_counter() - start
    if status != 0:
        raise RuntimeError(f"Sample Factory exited with status {status}")
    return train_steps / elapsed


def main() -> None:
    """Print raw envpool FPS and SF training FPS for one envpool env."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="CartPole-v1", help="envpool id")
    parser.add_argument("--num_workers", type=int, default=2)
    parser.add_argument("--num_envs_per_worker", type=int, default=2)
    parser.add_argument("--envpool_num_envs", type=int, default=32)
    parser.add_argument("--batch_size", type=int, default=2048)
    parser.add_argument("--raw_steps", type=int, default=200_000)
    parser.add_argument("--train_steps", type=int, default=200_000)
    args = parser.parse_args()
    raw = raw_env_fps(args.env, args.envpool_num_envs, args.raw_steps)
    print(f"raw envpool {args.env} ({args.envpool_num_envs} envs): {raw:,.0f} env steps/s")
    trained = train_fps(
        args.env,
        args.train_steps,
        args.num_workers,
        args.num_envs_per_worker,
        args.envpool_num_envs,
        args.batch_size,
    )
    print(f"SF APPO training on envpool_{args.env}: {trained:,.0f} env steps/s (incl. start-up)")
    print(f"ratio (training / raw stepping): {trained / raw:.3f}")


if __name__ == "__main__":
    main()
