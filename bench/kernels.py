"""Fused kernels vs eager vs ``torch.compile`` at the policy's shapes, forward + backward.

The ``kernels`` rows of ``python -m bench`` (batch 1024, ``configs/main.yaml``'s minibatch). Alone, at
several batch sizes: ``OMP_NUM_THREADS=1 python -m bench.kernels [--batches 1024,2048,4096] [--no-compile]``.

The same script runs unchanged on a GPU host and on this CPU box:

- CUDA + triton: eager PyTorch, ``torch.compile`` (of an ``nn.Module`` subclass) and the Triton kernels
  (``rlgpt.kernels.triton``), batch 1k-64k by default. For the linear layers ``triton`` is cuBLAS's GEMM
  + the fused Triton epilogue and ``triton_gemm`` the GEMM in Triton as well: their ratio decides
  ``rlgpt.kernels.dispatch.CUDA_LINEAR_GEMM``. The matmul precision is torch's default ("highest", no
  TF32); ``--tf32`` allows TF32 for torch and Triton alike.
- CPU: the CPU candidates of :mod:`rlgpt.kernels.cpu` (eager, fused torch ops, ``torch.compile``, numba
  for GAE), batch 1k-4k by default; Triton is skipped with a line saying why. These numbers choose
  ``rlgpt.kernels.cpu.CPU_CHOICE``.

Ops (the learner's hot path for rlgpt's symbolic Crafter policy, ``configs/main.yaml``):

- ``fuse``: the encoder's Linear(32*7*9 + 64 -> 256) + ELU; ``fuse+ln``: the same with a LayerNorm;
  ``vector``: Linear(22 -> 64) + ELU. Forward and backward (input, weight and bias gradients).
- ``gae``: advantages + returns (+ normalization) over batch/64 trajectories of rollout 64; the baseline
  ``sf`` is Sample Factory's TorchScript ``gae_advantages`` plus the returns and normalization passes.
- ``ppo``: PPO clipped policy + value loss, forward and backward.
- ``embed_conv``: the encoder's embedding + first 3x3 convolution (``eager``: ``nn.Embedding`` then
  ``Conv2d``; ``tables``: the same function as gathers of per-offset tables, CPU only), forward and
  backward.

Timings are medians over rounds that interleave the candidates (a shared box drifts; interleaving keeps
the ratios fair); ratios are against the first candidate of the same row, measured in the same run.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
from sample_factory.algo.utils.rl_utils import gae_advantages

from rlgpt.envs.crafter import N_IDS
from rlgpt.kernels import cpu, dispatch, reference
from rlgpt.rl.model import CONV_CHANNELS, EMBED_DIM, VECTOR_DIM

VIEW_SHAPE = (7, 9)  # rlgpt's symbolic Crafter view (rlgpt.envs.crafter.CrafterEnv, obs_mode="symbolic")
VECTOR_SIZE = 22
HIDDEN = 256  # configs/main.yaml ppo.hidden_size
ROLLOUT = 64  # configs/main.yaml ppo.rollout
FUSE_IN = CONV_CHANNELS * VIEW_SHAPE[0] * VIEW_SHAPE[1] + VECTOR_DIM


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def measure(
    candidates: dict[str, Callable[[], object]], device: torch.device, rounds: int, inner: int
) -> dict:
    """Median seconds per call of each candidate; rounds interleave the candidates."""
    for fn in candidates.values():  # warm-up (and, for torch.compile, compilation: timed separately)
        fn()
    _sync(device)
    samples: dict[str, list[float]] = {name: [] for name in candidates}
    for _ in range(rounds):
        for name, fn in candidates.items():
            _sync(device)
            start = time.perf_counter()
            for _ in range(inner):
                fn()
            _sync(device)
            samples[name].append((time.perf_counter() - start) / inner)
    return {name: statistics.median(s) for name, s in samples.items()}


def _compile_seconds(fn: Callable[[], object], device: torch.device) -> float:
    _sync(device)
    start = time.perf_counter()
    fn()
    _sync(device)
    return time.perf_counter() - start


def linear_case(batch: int, k: int, n: int, layer_norm: bool, device: torch.device):
    """Inputs and a fwd+bwd closure per implementation of act(LN?(x W^T + b))."""
    gen = torch.Generator(device=device).manual_seed(0)
    x = torch.randn(batch, k, device=device, generator=gen, requires_grad=True)
    w = (torch.randn(n, k, device=device, generator=gen) / k**0.5).requires_grad_()
    b = torch.zeros(n, device=device, requires_grad=True)
    g = torch.ones(n, device=device, requires_grad=True) if layer_norm else None
    beta = torch.zeros(n, device=device, requires_grad=True) if layer_norm else None
    dy = torch.randn(batch, n, device=device, generator=gen)
    params = [t for t in (x, w, b, g, beta) if t is not None]

    def step(fn: Callable) -> Callable[[], object]:
        def run() -> object:
            y = fn(x, w, b, "elu", g, beta, 1e-5, layer_norm)
            return torch.autograd.grad(y, params, dy)

        return run

    return step


def embed_conv_case(batch: int, device: torch.device):
    """The encoder's embedding + first 3x3 convolution, forward + backward (embedding, weight, bias)."""
    gen = torch.Generator(device=device).manual_seed(0)
    ids = torch.randint(0, N_IDS, (batch, *VIEW_SHAPE), device=device, generator=gen)
    embed = torch.randn(N_IDS, EMBED_DIM, device=device, generator=gen, requires_grad=True)
    weight = (torch.randn(CONV_CHANNELS, EMBED_DIM, 3, 3, device=device, generator=gen) / 12).requires_grad_()
    bias = torch.zeros(CONV_CHANNELS, device=device, requires_grad=True)
    dy = torch.randn(batch, CONV_CHANNELS, *VIEW_SHAPE, device=device, generator=gen)

    def step(fn: Callable) -> Callable[[], object]:
        def run() -> object:
            return torch.autograd.grad(fn(ids, embed, weight, bias), (embed, weight, bias), dy)

        return run

    return step


def gae_case(batch: int, device: torch.device):
    n_env = max(1, batch // ROLLOUT)
    gen = torch.Generator(device=device).manual_seed(0)
    rewards = torch.randn(n_env, ROLLOUT, device=device, generator=gen)
    dones = (torch.rand(n_env, ROLLOUT, device=device, generator=gen) < 0.02).float()
    values = torch.randn(n_env, ROLLOUT + 1, device=device, generator=gen)
    valids = torch.ones(n_env, ROLLOUT + 1, device=device)

    def sf() -> object:
        adv = gae_advantages(rewards, dones, values, valids, 0.99, 0.95)
        ret = adv + valids[:, :-1] * values[:, :-1]
        std, mean = torch.std_mean(adv)
        return (adv - mean) / std.clamp_min(1e-7), ret

    def step(fn: Callable) -> Callable[[], object]:
        def run() -> object:
            adv, ret = fn(rewards, dones, values, valids, 0.99, 0.95)
            return reference.normalize_advantages(adv), ret

        return run

    return sf, step, (rewards, dones, values, valids)


def ppo_case(batch: int, device: torch.device):
    gen = torch.Generator(device=device).manual_seed(0)
    lp = (torch.randn(batch, device=device, generator=gen) * 0.3).requires_grad_()
    old_lp = torch.randn(batch, device=device, generator=gen) * 0.3
    adv, old_v, tgt = (torch.randn(batch, device=device, generator=gen) for _ in range(3))
    v = (old_v + 0.3 * torch.randn(batch, device=device, generator=gen)).requires_grad_()

    def step(fn: Callable) -> Callable[[], object]:
        def run() -> object:
            policy, value = fn(lp, old_lp, adv, v, old_v, tgt, None, 0.1, 1.0, 0.5)
            return torch.autograd.grad(policy + value, (lp, v))

        return run

    return step


@dataclass(frozen=True)
class KernelTiming:
    """One candidate of one op against the op's first candidate (its baseline), timed in the same run."""

    op: str
    """``fuse``, ``fuse+ln``, ``vector``, ``gae``, ``ppo`` or ``embed_conv``."""
    batch: int
    """Samples per call."""
    candidate: str
    """Implementation timed."""
    baseline: str
    """The op's first candidate (eager PyTorch; Sample Factory's own for ``gae``)."""
    seconds: float
    """Median seconds per call of the candidate."""
    baseline_seconds: float
    """Median seconds per call of the baseline."""


def candidates(
    batch: int, device: torch.device, use_triton: bool, with_compile: bool
) -> list[tuple[str, dict[str, Callable[[], object]]]]:
    """Per op, a forward+backward closure per implementation; the first one is the op's baseline."""
    cuda = device.type == "cuda"
    if use_triton:
        import rlgpt.kernels.triton as kernels
    if with_compile:
        compiled_linear = {ln: torch.compile(cpu.LinearActModule("elu", ln)) for ln in (False, True)}
        compiled_ppo = torch.compile(cpu.PPOLossModule(0.1, 1.0, 0.5))

    def comp_linear(x, w, b, act, g, beta, eps, ln):
        return compiled_linear[ln](x, w, b, g, beta)

    def comp_ppo(lp, old_lp, adv, v, old_v, tgt, valids, *_):
        return compiled_ppo(lp, old_lp, adv, v, old_v, tgt, valids)

    rows: list[tuple[str, dict[str, Callable[[], object]]]] = []
    for op, (k, n, ln) in {
        "fuse": (FUSE_IN, HIDDEN, False),
        "fuse+ln": (FUSE_IN, HIDDEN, True),
        "vector": (VECTOR_SIZE, VECTOR_DIM, False),
    }.items():
        step = linear_case(batch, k, n, ln, device)
        cands = {"eager": step(reference.linear_act)}
        if not cuda:
            cands["fused_ops"] = step(cpu.linear_act_fused_ops)
        if with_compile:
            cands["compiled"] = step(comp_linear)
        if use_triton:  # cuBLAS GEMM + fused Triton epilogue, and the GEMM in Triton too
            cands["triton"] = step(functools.partial(kernels.linear_act, gemm="torch"))
            cands["triton_gemm"] = step(functools.partial(kernels.linear_act, gemm="triton"))
        rows.append((op, cands))
    sf, gstep, gae_inputs = gae_case(batch, device)
    cands = {"sf": sf, "eager": gstep(reference.gae)}
    if not cuda:
        cands["fused_ops"] = gstep(cpu.gae_fused_ops)
        cands["numba"] = gstep(cpu.gae_numba)
    if use_triton:
        cands["triton"] = functools.partial(kernels.gae, *gae_inputs, 0.99, 0.95, None, True)
    rows.append(("gae", cands))
    pstep = ppo_case(batch, device)
    cands = {"eager": pstep(reference.ppo_loss)}
    if with_compile:
        cands["compiled"] = pstep(comp_ppo)
    if use_triton:
        cands["triton"] = pstep(kernels.ppo_loss)
    rows.append(("ppo", cands))
    estep = embed_conv_case(batch, device)
    cands = {"eager": estep(reference.embed_conv)}
    if not cuda:
        cands["tables"] = estep(cpu.embed_conv_tables)
    rows.append(("embed_conv", cands))
    return rows


def _inner(batch: int, cuda: bool, interpret: bool) -> int:
    """Calls per timed sample: enough that one sample is not just timer noise."""
    return 1 if interpret else max(1, (8 if cuda else 2) * 4096 // batch)


def suite_measurements(batch: int = 1024, rounds: int = 15, compile: bool = True) -> list[KernelTiming]:
    """Every candidate of every op at ``batch`` against the op's first candidate (``python -m bench``)."""
    cuda = torch.cuda.is_available()
    device = torch.device("cuda" if cuda else "cpu")
    use_triton = cuda and dispatch.triton_available()
    timings = []
    for op, cands in candidates(batch, device, use_triton, compile):
        if "compiled" in cands:
            _compile_seconds(cands["compiled"], device)  # compile outside the timings
        times = measure(cands, device, rounds, _inner(batch, cuda, False))
        baseline, base_s = next(iter(times.items()))
        timings += [
            KernelTiming(op, batch, c, baseline, t, base_s) for c, t in times.items() if c != baseline
        ]
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batches", default=None, help="comma-separated batch sizes (samples)")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--no-compile", action="store_true", help="skip the torch.compile candidates")
    parser.add_argument("--tf32", action="store_true", help="allow TF32 matmuls (torch and Triton)")
    parser.add_argument(
        "--interpret",
        action="store_true",
        help="CPU smoke test of the Triton rows under TRITON_INTERPRET=1 (tiny batches; timings meaningless)",
    )
    args = parser.parse_args()
    if args.interpret:
        os.environ["TRITON_INTERPRET"] = "1"  # before the kernels are imported (in main, below)
    if args.tf32:
        torch.set_float32_matmul_precision("high")

    cuda = torch.cuda.is_available()
    device = torch.device("cuda" if cuda else "cpu")
    use_triton = (cuda or args.interpret) and dispatch.triton_available()
    default_batches = "1024,4096,16384,65536" if cuda else "1024,2048,4096"
    batches = [int(b) for b in (args.batches or default_batches).split(",")]
    name = (
        torch.cuda.get_device_name()
        if cuda
        else f"CPU ({os.cpu_count()} cores, {torch.get_num_threads()} threads)"
    )
    precision = torch.get_float32_matmul_precision()
    print(f"device: {name}; torch {torch.__version__}; fp32 matmul precision {precision}")
    print(f"load average at start: {os.getloadavg()}")
    if args.interpret:
        print("Triton kernels: run by the interpreter on the CPU (a smoke test; their timings mean nothing)")
    if not use_triton:
        why = "no CUDA device" if not cuda else "triton is not installed"
        print(f"Triton kernels: skipped ({why}); comparing the CPU candidates of rlgpt.kernels.cpu")
    print(f"{'op':<8} {'batch':>6} {'candidate':<11} {'ms/call':>9} {'speedup':>9}")
    for batch in batches:
        inner = _inner(batch, cuda, args.interpret)
        rows = candidates(batch, device, use_triton, not args.no_compile)
        for op, cands in rows:
            if "compiled" in cands:  # first call compiles: report it, keep it out of the timings
                compile_ms = 1e3 * _compile_seconds(cands["compiled"], device)
                print(f"{op:<8} {batch:>6} {'(compile)':<11} {compile_ms:>9.0f}")
            times = measure(cands, device, args.rounds, inner)
            first = next(iter(times.values()))
            for cand, seconds in times.items():
                print(f"{op:<8} {batch:>6} {cand:<11} {1e3 * seconds:>9.3f} {first / seconds:>8.2f}x")
    print(f"load average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
