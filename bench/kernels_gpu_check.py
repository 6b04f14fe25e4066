"""The Triton kernels on a real GPU: outputs and gradients against the float64 references, then timings.

Run on a CUDA host, from the repository root (nothing needs installing; see :func:`import_kernels`):

    python3 bench/kernels_gpu_check.py [--out DIR] [--compile]

CPU smoke test of the same code paths (tiny shapes, Triton's interpreter; timings mean nothing):

    .venv/bin/python bench/kernels_gpu_check.py --interpret --dry-run

1. Correctness. Every op of ``rlgpt.kernels.triton`` (fused linear + activation (+ LayerNorm) forward and
   backward in both GEMM modes, GAE with scalar and per-step discount with and without advantage
   normalization, normalization alone, the PPO clipped loss forward and backward) on the device against
   ``rlgpt.kernels.reference`` in float64, with the tolerances of ``tests/kernels/test_triton_kernels.py``
   (``|actual - expected| <= atol + rtol * |expected|``, everything finite, every kernel buffer starting as
   NaN so that an unwritten element fails). Shapes: the tests' edge shapes and the learner's
   (``configs/main.yaml``: batch 1024, ``fuse`` = Linear(2080 -> 256), ``vector`` = Linear(22 -> 64), rollout
   64), larger batches, odd sizes, and LayerNorm at its widest fused width (512). Each case also reports
   eager fp32 torch's own error against the same reference (``torch`` in the output), which tells a
   kernel bug from fp32 rounding that a tolerance did not foresee. ``embed_conv`` has no Triton path (CUDA
   runs cuDNN's convolution); its fp32 error is reported for information only.
2. Timings: forward + backward per op (``bench/kernels.py``'s ops and shapes) of eager torch, the Triton
   kernels (``triton``: cuBLAS GEMM + fused Triton epilogue, what the dispatcher runs; ``triton_gemm``: the
   GEMM in Triton too) and, for GAE, a copy of Sample Factory 2.1.1's TorchScript ``gae_advantages`` plus its
   returns and normalization passes (``sf``). Median over interleaved rounds of ``inner`` calls each, timed
   with ``torch.cuda.synchronize``; ``--compile`` adds ``torch.compile`` at batch 1024 while time is left.

Prints a table and writes ``kernels_gpu_check.json`` to ``--out`` (default ``$OUT``, else the current
folder). Exit status 1 when any correctness case fails.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib.util
import json
import math
import os
import platform
import statistics
import sys
import time
import traceback
import types
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
START = time.perf_counter()

# The learner's shapes (bench/kernels.py; rlgpt.rl.model, rlgpt.envs.crafter, configs/main.yaml), written
# out so that this script imports neither Sample Factory nor the environment.
VIEW_SHAPE = (7, 9)
N_IDS = 19
EMBED_DIM = 16
CONV_CHANNELS = 32
VECTOR_DIM = 64
VECTOR_SIZE = 22
HIDDEN = 256
ROLLOUT = 64
FUSE_IN = CONV_CHANNELS * VIEW_SHAPE[0] * VIEW_SHAPE[1] + VECTOR_DIM  # 2080
ACTIVATIONS = ("elu", "relu", "tanh", "identity")

# tests/kernels/test_triton_kernels.py's tolerances
ATOL, RTOL = 2e-5, 2e-5


def _load(name: str, init: Path) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, init, submodule_search_locations=[str(init.parent)])
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def import_kernels() -> str:
    """Map ``rlgpt`` to ``src/rlgpt`` and ``rlgpt.kernels`` to ``kernels/`` of this checkout, uninstalled.

    ``pip install -e .`` is no option on the GPU image: ``requires-python`` stops at 3.11 and the pinned
    dependencies (Sample Factory, ...) are absent. ``kernels/__init__.py`` imports the dispatcher, whose CPU
    paths need numba; if that import fails, ``rlgpt.kernels`` becomes a bare package (the kernels and
    references import torch and triton only). Returns ``"full"`` or ``"bare (why)"``.
    """
    for name in [n for n in sys.modules if n == "rlgpt" or n.startswith("rlgpt.")]:
        del sys.modules[name]
    top = _load("rlgpt", ROOT / "src" / "rlgpt" / "__init__.py")
    try:
        top.kernels = _load("rlgpt.kernels", ROOT / "kernels" / "__init__.py")
        return "full"
    except Exception as exc:  # numba missing or broken for this numpy: the kernels don't need it
        for name in [n for n in sys.modules if n.startswith("rlgpt.kernels")]:
            del sys.modules[name]
        bare = types.ModuleType("rlgpt.kernels")
        bare.__path__ = [str(ROOT / "kernels")]
        bare.__package__ = "rlgpt.kernels"
        sys.modules["rlgpt.kernels"] = bare
        top.kernels = bare
        return f"bare ({type(exc).__name__}: {exc})"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=os.environ.get("OUT", "."), help="folder for the JSON")
    parser.add_argument("--interpret", action="store_true", help="CPU, under TRITON_INTERPRET=1")
    parser.add_argument("--dry-run", action="store_true", help="tiny shapes, one round (a smoke test)")
    parser.add_argument("--batches", default=None, help="timing batch sizes (default 1024,4096,16384,65536)")
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--compile", action="store_true", help="also time torch.compile at batch 1024")
    parser.add_argument(
        "--profile",
        action="store_true",
        help="only the profile stage: GPU kernel time vs host time per call, and launch costs",
    )
    parser.add_argument(
        "--deadline",
        type=float,
        default=300.0,
        help="seconds after start past which optional stages (TF32, compile) are skipped",
    )
    return parser.parse_args()


ARGS = parse_args()
if ARGS.interpret:
    os.environ["TRITON_INTERPRET"] = "1"  # read by @triton.jit when the kernels are defined (import time)
else:
    os.environ.pop("TRITON_INTERPRET", None)
IMPORT_MODE = import_kernels()

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

import rlgpt.kernels.triton as tk  # noqa: E402
from rlgpt.kernels import reference  # noqa: E402
from rlgpt.kernels.triton import _alloc  # noqa: E402

CUDA = torch.cuda.is_available() and not ARGS.interpret
if not CUDA and not ARGS.interpret:
    sys.exit("no CUDA device: run with --interpret (and --dry-run) for the CPU smoke test")
DEV = torch.device("cuda" if CUDA else "cpu")


def _sync() -> None:
    if CUDA:
        torch.cuda.synchronize()


@contextlib.contextmanager
def nan_buffers() -> Iterator[None]:
    """Every kernel output / partial buffer starts as NaN (the tests' ``nan_buffers`` fixture)."""
    original = _alloc.empty

    def empty(*shape: int, device: torch.device) -> torch.Tensor:
        return torch.full(shape, float("nan"), device=device, dtype=torch.float32)

    _alloc.empty = empty
    try:
        yield
    finally:
        _alloc.empty = original


# ----------------------------------------------------------------------------- comparison and records

RESULTS: list[dict] = []


def compare(name: str, actual, expected, atol: float, rtol: float, fp32=None) -> dict:
    """One quantity: max abs error, worst ``error / allowed`` (<= 1 passes), eager fp32 torch's error."""
    a, e = actual.detach().double(), expected.detach().double()
    rec: dict = {"quantity": name, "shape": list(a.shape), "atol": atol, "rtol": rtol}
    if a.shape != e.shape:
        return rec | {"ok": False, "error": f"shape {tuple(a.shape)} != {tuple(e.shape)}"}
    finite = bool(torch.isfinite(a).all())
    diff = (a - e).abs()
    allowed = atol + rtol * e.abs()
    rec["finite"] = finite
    rec["max_abs_err"] = float(diff.max()) if diff.numel() else 0.0
    rec["tol_ratio"] = float((diff / allowed).max()) if diff.numel() else 0.0
    rec["ok"] = finite and bool((diff <= allowed).all())
    if not rec["ok"] and diff.numel():
        worst = int(torch.nan_to_num(diff / allowed, nan=math.inf).argmax())
        idx = list(torch.unravel_index(torch.tensor(worst), a.shape)) if a.dim() else []
        rec["worst_at"] = [int(i) for i in idx]
        rec["worst_actual"], rec["worst_expected"] = float(a.flatten()[worst]), float(e.flatten()[worst])
        rec["nan_count"] = int(torch.isnan(a).sum())
    if fp32 is not None and diff.numel():
        fdiff = (fp32.detach().double() - e).abs()
        rec["torch_fp32_max_abs_err"] = float(fdiff.max())
        rec["torch_fp32_tol_ratio"] = float((fdiff / allowed).max())
    return rec


def record(kernel: str, case: str, fn: Callable[[], list[dict]]) -> None:
    """Run one case; an exception (a compile error, a launch failure) is a failed case, not the end."""
    t0 = time.perf_counter()
    try:
        checks = fn()
        ok = all(c["ok"] for c in checks)
        rec = {"kernel": kernel, "case": case, "ok": ok, "checks": checks}
    except Exception as exc:
        rec = {
            "kernel": kernel,
            "case": case,
            "ok": False,
            "checks": [],
            "exception": f"{type(exc).__name__}: {exc}",
            "traceback": traceback.format_exc()[-3000:],
        }
    rec["seconds"] = round(time.perf_counter() - t0, 3)
    RESULTS.append(rec)
    status = "PASS" if rec["ok"] else "FAIL"
    parts = []
    for c in rec["checks"]:
        tag = c["quantity"] + (f" {c['max_abs_err']:.1e}" if "max_abs_err" in c else "")
        if "torch_fp32_max_abs_err" in c:
            tag += f" (torch {c['torch_fp32_max_abs_err']:.1e})"
        if not c["ok"]:
            tag += f" [x{c.get('tol_ratio', float('nan')):.2g} of tol"
            tag += f"; torch x{c['torch_fp32_tol_ratio']:.2g}]" if "torch_fp32_tol_ratio" in c else "]"
        parts.append(tag)
    print(f"{status} {kernel:<10} {case:<44} {'; '.join(parts)}", flush=True)
    if "exception" in rec:
        print(rec["traceback"], flush=True)


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _dev(*tensors):
    """CPU-generated tensors (the same numbers on every machine) moved to the device."""
    return [None if t is None else t.to(DEV) for t in tensors]


def _like(tensors, dtype, grads):
    return [
        None if t is None else t.detach().to(dtype).requires_grad_(g)
        for t, g in zip(tensors, grads, strict=True)
    ]


# ----------------------------------------------------------------------------- fused linear + act (+ LN)


def check_linear(
    lead: tuple[int, ...],
    k: int,
    n: int,
    act: str,
    layer_norm: bool,
    gemm: str,
    bias: bool = True,
    affine: str = "both",
    x_grad: bool = True,
    seed: int = 0,
) -> list[dict]:
    gen = _gen(seed)
    x = torch.randn(*lead, k, generator=gen)
    w = torch.randn(n, k, generator=gen) / math.sqrt(k)
    b = torch.randn(n, generator=gen) if bias else None
    g = (1 + 0.5 * torch.randn(n, generator=gen)) if layer_norm and affine in ("both", "weight") else None
    beta = torch.randn(n, generator=gen) if layer_norm and affine in ("both", "bias") else None
    dy = torch.randn(*lead, n, generator=gen)
    base = _dev(x, w, b, g, beta)
    (dy,) = _dev(dy)
    wants = [x_grad, True, True, True, True]
    names = ["y", "dx", "dw", "db", "dln_w", "dln_b"]

    def run(fn, dtype):
        inputs = _like(base, dtype, wants)
        y = fn(*inputs[:3], act, *inputs[3:], 1e-5, layer_norm)
        need = [t for t, want in zip(inputs, wants, strict=True) if t is not None and want]
        return [y, *torch.autograd.grad(y, need, dy.to(dtype))]

    labels = [nm for nm, t, want in zip(names[1:], base, wants, strict=True) if t is not None and want]
    with nan_buffers():
        out = run(functools.partial(tk.linear_act, gemm=gemm), torch.float32)
    ref = run(reference.linear_act, torch.float64)
    fp32 = run(reference.linear_act, torch.float32)
    checks = [compare("y", out[0], ref[0], ATOL, RTOL, fp32[0])]
    for label, o, r, f in zip(labels, out[1:], ref[1:], fp32[1:], strict=True):
        checks.append(compare(label, o, r, 1e-4, RTOL, f))
    return checks


def check_linear_extremes(act: str, gemm: str) -> list[dict]:
    """ELU/tanh must not overflow for large |z| and must be exact at 0 (the tests' tolerance 1e-7/1e-6)."""
    x = torch.tensor([[-100.0], [-1e-3], [0.0], [1e-3], [100.0]], device=DEV)
    w = torch.ones(1, 1, device=DEV)
    with nan_buffers():
        y = tk.linear_act(x, w, None, act, gemm=gemm)
    return [compare("y", y, reference.linear_act(x.double(), w.double(), None, act), 1e-7, 1e-6)]


def linear_cases() -> None:
    if ARGS.dry_run:
        shapes = {
            "test 1x3x1": ((1,), 3, 1),
            "test 5x37x20": ((5,), 37, 20),
            "odd 70x2080x130": ((70,), 2080, 130),
        }
        ln_extra = {"ln512 40x24x512": ((40,), 24, 512)}
    else:
        shapes = {
            "test 1x3x1": ((1,), 3, 1),
            "test 5x37x20": ((5,), 37, 20),
            "test 70x33x130": ((70,), 33, 130),
            "fuse 1024x2080x256": ((1024,), FUSE_IN, HIDDEN),
            "vector 1024x22x64": ((1024,), VECTOR_SIZE, VECTOR_DIM),
            "odd 1000x2079x255": ((1000,), 2079, 255),
            "fuse 16384x2080x256": ((16384,), FUSE_IN, HIDDEN),
        }
        ln_extra = {"ln512 1024x256x512": ((1024,), 256, 512), "ln 1537x100x300": ((1537,), 100, 300)}
    all_acts = {"test 70x33x130", "fuse 1024x2080x256"}  # every activation; ELU (the policy's) elsewhere
    for label, (lead, k, n) in shapes.items():
        acts = ACTIVATIONS if label in all_acts or ARGS.dry_run else ("elu",)
        for act in acts:
            for ln in (False, True):
                for gemm in ("torch", "triton"):
                    case = f"{label} {act}{' ln' if ln else ''} gemm={gemm}"
                    record("linear_act", case, functools.partial(check_linear, lead, k, n, act, ln, gemm))
    for label, (lead, k, n) in ln_extra.items():
        for gemm in ("torch", "triton"):
            record(
                "linear_act",
                f"{label} elu ln gemm={gemm}",
                functools.partial(check_linear, lead, k, n, "elu", True, gemm),
            )
    lead3 = (2, 3) if ARGS.dry_run else (8, 128)
    for gemm in ("torch", "triton"):
        record(
            "linear_act",
            f"3d {lead3} no-bias ln no-affine gemm={gemm}",
            functools.partial(check_linear, lead3, 17, 9, "elu", True, gemm, bias=False, affine="none"),
        )
        for affine in ("weight", "bias"):
            record(
                "linear_act",
                f"ln {affine}-only relu gemm={gemm}",
                functools.partial(check_linear, (3,), 10, 6, "relu", True, gemm, bias=False, affine=affine),
            )
        record(
            "linear_act",
            f"frozen input tanh gemm={gemm}",
            functools.partial(check_linear, (4,), 8, 6, "tanh", False, gemm, x_grad=False),
        )
        for act in ("elu", "tanh"):
            record(
                "linear_act",
                f"extremes {act} gemm={gemm}",
                functools.partial(check_linear_extremes, act, gemm),
            )


# ----------------------------------------------------------------------------- GAE + normalization


def _trajectories(n_env: int, n_steps: int, seed: int, p_done: float = 0.2, p_valid: float = 0.8):
    gen = _gen(seed)
    rewards = torch.randn(n_env, n_steps, generator=gen)
    dones = torch.rand(n_env, n_steps, generator=gen) < p_done
    values = torch.randn(n_env, n_steps + 1, generator=gen)
    valids = torch.rand(n_env, n_steps + 1, generator=gen) < p_valid
    discounts = 0.99 ** torch.randint(1, 9, (n_env, n_steps), generator=gen).float()
    return _dev(rewards, dones, values, valids, discounts)


def _gae_ref(rewards, dones, values, valids, gamma, lam, disc, normalize, dtype):
    adv, ret = reference.gae(
        rewards.to(dtype),
        dones,
        values.to(dtype),
        valids,
        gamma,
        lam,
        None if disc is None else disc.to(dtype),
    )
    if normalize:
        adv = reference.normalize_advantages(adv, valids[:, :-1])
    return adv, ret


def check_gae(
    n_env: int,
    n_steps: int,
    per_step: bool,
    normalize: bool,
    float_masks: bool = False,
    invalid_rows: bool = False,
) -> list[dict]:
    rewards, dones, values, valids, discounts = _trajectories(n_env, n_steps, seed=n_env * 31 + n_steps)
    if invalid_rows:
        valids[2:4] = False
    disc = discounts if per_step else None
    gamma, lam = (0.9, 0.8) if float_masks else (0.99, 0.95)
    d_in, v_in = (dones.float(), valids.float()) if float_masks else (dones, valids)
    with nan_buffers():
        adv, ret = tk.gae(rewards, d_in, values, v_in, gamma, lam, disc, normalize)
    adv_ref, ret_ref = _gae_ref(rewards, dones, values, valids, gamma, lam, disc, normalize, torch.float64)
    adv32, ret32 = _gae_ref(rewards, dones, values, valids, gamma, lam, disc, normalize, torch.float32)
    return [compare("adv", adv, adv_ref, 1e-5, 1e-5, adv32), compare("ret", ret, ret_ref, ATOL, RTOL, ret32)]


def check_normalize(n: int, masked: bool) -> list[dict]:
    gen = _gen(n)
    adv = torch.randn(n, generator=gen) * 3 + 1
    valids = (torch.rand(n, generator=gen) < 0.7) if masked else None
    adv, valids = _dev(adv, valids)
    with nan_buffers():
        out = tk.normalize_advantages(adv, valids)
    ref = reference.normalize_advantages(adv.double(), valids)
    return [compare("adv", out, ref, 1e-5, RTOL, reference.normalize_advantages(adv, valids))]


def check_stability() -> list[dict]:
    """Mean 1e3, std 1e-2 (the tests' tolerance 1e-2/1e-3): Welford/Chan statistics, not sums of squares."""
    (adv,) = _dev(1000 + 0.01 * torch.randn(2000, generator=_gen(0)))
    with nan_buffers():
        out = tk.normalize_advantages(adv)
    checks = [
        compare(
            "norm",
            out,
            reference.normalize_advantages(adv.double()),
            1e-2,
            1e-3,
            reference.normalize_advantages(adv),
        )
    ]
    rewards, dones, values, valids, _ = _trajectories(40, 6, seed=5, p_done=0.0, p_valid=1.0)
    rewards, values = 1000 + 0.01 * rewards, 0.01 * values
    with nan_buffers():
        adv_n, _ = tk.gae(rewards, dones, values, valids, 0.99, 0.0, None, True)
    adv_ref, _ = reference.gae(rewards.double(), dones, values.double(), valids, 0.99, 0.0)
    adv32, _ = reference.gae(rewards, dones, values, valids, 0.99, 0.0)
    checks.append(
        compare(
            "gae_norm",
            adv_n,
            reference.normalize_advantages(adv_ref),
            1e-2,
            1e-3,
            reference.normalize_advantages(adv32),
        )
    )
    return checks


def check_empty_selection() -> list[dict]:
    (adv,) = _dev(torch.randn(10, generator=_gen(1)))
    mask = torch.zeros(10, dtype=torch.bool, device=DEV)
    with nan_buffers():
        out = tk.normalize_advantages(adv, mask)
    return [compare("adv", out, reference.normalize_advantages(adv.double(), mask), ATOL, 1e-5)]


def gae_cases() -> None:
    shapes = [(1, 1), (5, 7), (33, 4)]
    if not ARGS.dry_run:  # batch 1024 / rollout 64, then 4096 and 65536 samples, odd sizes
        shapes += [(16, ROLLOUT), (64, ROLLOUT), (1024, ROLLOUT), (1000, 63), (37, 200)]
    for n_env, n_steps in shapes:
        for per_step in (False, True):
            for normalize in (False, True):
                gamma = "per-step" if per_step else "scalar"
                case = f"{n_env}x{n_steps} {gamma} gamma{' norm' if normalize else ''}"
                record("gae", case, functools.partial(check_gae, n_env, n_steps, per_step, normalize))
    record(
        "gae",
        "6x5 float masks, all-invalid rows, norm",
        functools.partial(check_gae, 6, 5, False, True, float_masks=True, invalid_rows=True),
    )
    big = (16 * ROLLOUT, ROLLOUT) if not ARGS.dry_run else (6, 5)
    record(
        "gae",
        f"{big[0]}x{big[1]} float masks, all-invalid rows, norm",
        functools.partial(check_gae, *big, True, True, float_masks=True, invalid_rows=True),
    )
    record("gae", "mean 1e3 / std 1e-2 stability", check_stability)
    sizes = [1, 7, 1500] + ([] if ARGS.dry_run else [1024, 65536, 1_000_003])
    for n in sizes:
        for masked in (False, True):
            record(
                "normalize",
                f"n={n}{' masked' if masked else ''}",
                functools.partial(check_normalize, n, masked),
            )
    record("normalize", "empty selection", check_empty_selection)


# ----------------------------------------------------------------------------- PPO loss


def _ppo_inputs(n: int, seed: int, spread: float = 1.5):
    gen = _gen(seed)
    log_prob = torch.randn(n, generator=gen) * spread
    old_log_prob = torch.randn(n, generator=gen) * spread
    adv = torch.randn(n, generator=gen)
    old_values = torch.randn(n, generator=gen)
    values = old_values + 0.3 * torch.randn(n, generator=gen)
    targets = torch.randn(n, generator=gen)
    return _dev(log_prob, old_log_prob, adv, values, old_values, targets)


def _ppo_run(fn, inputs, valids, dtype, kwargs, weights=(0.7, 1.3), grads=(True, True)):
    lp, old_lp, adv, v, old_v, tgt = _like(inputs, dtype, [grads[0], False, False, grads[1], False, False])
    if not any(grads):
        with torch.no_grad():
            return list(fn(lp, old_lp, adv, v, old_v, tgt, valids, **kwargs))
    policy, value = fn(lp, old_lp, adv, v, old_v, tgt, valids, **kwargs)
    need = [t for t, want in zip((lp, v), grads, strict=True) if want]
    return [policy, value, *torch.autograd.grad(weights[0] * policy + weights[1] * value, need)]


def check_ppo(n: int, valid_mode: str, grads=(True, True)) -> list[dict]:
    inputs = _ppo_inputs(n, seed=n)
    valids = {
        "none": None,
        "random": torch.rand(n, generator=_gen(n + 1)) < 0.7,
        "all_invalid": torch.zeros(n, dtype=torch.bool),
    }[valid_mode]
    (valids,) = _dev(valids)
    kwargs = dict(clip_ratio=0.1, clip_value=0.2, value_loss_coeff=0.5)
    with nan_buffers():
        out = _ppo_run(tk.ppo_loss, inputs, valids, torch.float32, kwargs, grads=grads)
    ref = _ppo_run(reference.ppo_loss, inputs, valids, torch.float64, kwargs, grads=grads)
    fp32 = _ppo_run(reference.ppo_loss, inputs, valids, torch.float32, kwargs, grads=grads)
    names = ["policy", "value"] + [nm for nm, want in zip(("d_lp", "d_v"), grads, strict=True) if want]
    checks = []
    for name, o, r, f in zip(names, out, ref, fp32, strict=True):
        atol = 1e-6 if name.startswith("d_") else ATOL
        checks.append(compare(name, o, r, atol, RTOL, f))
    if valid_mode == "all_invalid":
        zero = all(float(t.detach().abs().max()) == 0 for t in out)
        checks.append(
            {
                "quantity": "all-zero",
                "ok": zero,
                "max_abs_err": max(float(t.detach().abs().max()) for t in out),
            }
        )
    return checks


def check_ppo_ties() -> list[dict]:
    """All-tie batch: torch splits min/max gradients in halves; the kernel must too (atol 1e-7)."""
    n = 16
    lp, old_lp = torch.zeros(n, device=DEV), torch.zeros(n, device=DEV)
    adv = torch.linspace(-1, 1, n, device=DEV)
    old_v, v = torch.zeros(n, device=DEV), torch.full((n,), 0.05, device=DEV)
    tgt = torch.linspace(-2, 2, n, device=DEV)
    inputs = [lp, old_lp, adv, v, old_v, tgt]
    kwargs = dict(clip_ratio=0.1, clip_value=0.2, value_loss_coeff=0.5)
    with nan_buffers():
        out = _ppo_run(tk.ppo_loss, inputs, None, torch.float32, kwargs, weights=(1.0, 1.0))
    ref = _ppo_run(reference.ppo_loss, inputs, None, torch.float64, kwargs, weights=(1.0, 1.0))
    return [compare("d_lp", out[2], ref[2], 1e-7, RTOL), compare("d_v", out[3], ref[3], 1e-7, RTOL)]


def ppo_cases() -> None:
    sizes = [1, 33, 2049] + ([] if ARGS.dry_run else [1024, 16384, 65537])
    for n in sizes:
        for mode in ("none", "random", "all_invalid"):
            record("ppo_loss", f"n={n} valids={mode}", functools.partial(check_ppo, n, mode))
    record("ppo_loss", "all ties (halved gradients)", check_ppo_ties)
    n = 20 if ARGS.dry_run else 1024
    record("ppo_loss", f"n={n} grad to values only", functools.partial(check_ppo, n, "random", (False, True)))
    record("ppo_loss", f"n={n} no_grad", functools.partial(check_ppo, n, "random", (False, False)))


# ----------------------------------------------------------------------------- dispatcher and embed_conv


def check_dispatch() -> list[dict]:
    """Through ``rlgpt.kernels.dispatch`` on the backend ``auto``: the Triton kernels must be what runs."""
    dispatch = sys.modules["rlgpt.kernels.dispatch"]
    calls: list[str] = []
    wrapped = {}
    for name in ("linear_act", "gae", "ppo_loss"):
        original = getattr(tk, name)
        wrapped[name] = original

        def spy(*a, _name=name, _fn=original, **kw):
            calls.append(_name)
            return _fn(*a, **kw)

        setattr(tk, name, spy)
    try:
        with dispatch.use_backend("auto"):
            lead, k, n = ((8,), 40, 16) if ARGS.dry_run else ((1024,), FUSE_IN, HIDDEN)
            gen = _gen(7)
            x, w, b = _dev(
                torch.randn(*lead, k, generator=gen),
                torch.randn(n, k, generator=gen) / math.sqrt(k),
                torch.randn(n, generator=gen),
            )
            y = dispatch.linear_act(x, w, b, "elu")
            checks = [
                compare("linear_act", y, reference.linear_act(x.double(), w.double(), b.double()), ATOL, RTOL)
            ]
            rewards, dones, values, valids, _ = _trajectories(16, 8 if ARGS.dry_run else ROLLOUT, seed=3)
            adv, _ = dispatch.gae(rewards, dones, values, valids, 0.99, 0.95, None, True)
            adv_ref, _ = _gae_ref(rewards, dones, values, valids, 0.99, 0.95, None, True, torch.float64)
            checks.append(compare("gae", adv, adv_ref, 1e-5, 1e-5))
            inputs = _ppo_inputs(64, seed=1)
            policy, _ = dispatch.ppo_loss(*inputs)
            checks.append(
                compare("ppo_loss", policy, reference.ppo_loss(*(t.double() for t in inputs))[0], ATOL, RTOL)
            )
    finally:
        for name, fn in wrapped.items():
            setattr(tk, name, fn)
    expected = ["linear_act", "gae", "ppo_loss"] if CUDA else []
    checks.append({"quantity": f"triton ran: {calls}", "ok": calls == expected})
    return checks


def check_embed_conv() -> list[dict]:
    """No Triton path (CUDA runs cuDNN); informational: fp32 error under torch's default cuDNN settings."""
    gen = _gen(11)
    b = 16 if ARGS.dry_run else 1024
    ids = torch.randint(0, N_IDS, (b, *VIEW_SHAPE), generator=gen)
    emb = torch.randn(N_IDS, EMBED_DIM, generator=gen)
    w = torch.randn(CONV_CHANNELS, EMBED_DIM, 3, 3, generator=gen) / 12
    bias = torch.randn(CONV_CHANNELS, generator=gen)
    ids, emb, w, bias = _dev(ids, emb, w, bias)
    y = reference.embed_conv(ids, emb, w, bias)
    ref = reference.embed_conv(ids, emb.double(), w.double(), bias.double())
    rec = compare("y", y, ref, 1e-4, 1e-4)
    rec["ok"] = True  # information only (cuDNN, not ours)
    rec["cudnn_allow_tf32"] = bool(torch.backends.cudnn.allow_tf32)
    return [rec]


# ----------------------------------------------------------------------------- timings


def _sf_discounted_sum(x, dones, valids, discount: float):
    cumulative = torch.zeros_like(x[-1])
    out = torch.zeros_like(x)
    i = len(x) - 1
    while i >= 0:
        discount_valid = discount * valids[i] + (1 - valids[i])
        cumulative = x[i] + discount_valid * cumulative * (1.0 - dones[i])
        out[i] = cumulative
        i -= 1
    return out


_sf_discounted_sum_script = None


def sf_gae_advantages(rewards, dones, values, valids, gamma: float, lam: float):
    """Sample Factory 2.1.1's ``gae_advantages`` (``rl_utils.py``), its TorchScript loop included."""
    global _sf_discounted_sum_script
    if _sf_discounted_sum_script is None:
        _sf_discounted_sum_script = torch.jit.script(_sf_discounted_sum)
    rewards, dones = rewards.transpose(0, 1), dones.transpose(0, 1).float()
    values, valids = values.transpose(0, 1), valids.transpose(0, 1).float()
    deltas = (rewards - values[:-1]) * valids[:-1] + (1 - dones) * (gamma * values[1:] * valids[1:])
    adv = _sf_discounted_sum_script(deltas, dones, valids[:-1], gamma * lam)
    return adv.transpose_(0, 1)


def measure(cands: dict[str, Callable[[], object]], rounds: int, inner: int) -> dict[str, float]:
    for fn in cands.values():  # warm-up: Triton compiles, cuBLAS picks its kernels
        fn()
        fn()
    _sync()
    samples: dict[str, list[float]] = {name: [] for name in cands}
    for _ in range(rounds):
        for name, fn in cands.items():
            _sync()
            start = time.perf_counter()
            for _ in range(inner):
                fn()
            _sync()
            samples[name].append((time.perf_counter() - start) / inner)
    return {name: statistics.median(s) for name, s in samples.items()}


class _LinearModule(torch.nn.Module):
    def __init__(self, layer_norm: bool) -> None:
        super().__init__()
        self.layer_norm = layer_norm

    def forward(self, x, w, b, g, beta):
        return reference.linear_act(x, w, b, "elu", g, beta, 1e-5, self.layer_norm)


class _PPOModule(torch.nn.Module):
    def forward(self, lp, old_lp, adv, v, old_v, tgt):
        return reference.ppo_loss(lp, old_lp, adv, v, old_v, tgt, None, 0.1, 1.0, 0.5)


def timing_rows(
    batch: int, compiled: dict | None = None
) -> list[tuple[str, dict[str, Callable[[], object]]]]:
    """Per op a forward+backward closure per implementation; the first is the op's baseline."""
    gen = torch.Generator(device=DEV).manual_seed(0)
    rows = []
    for op, (k, n, ln) in {
        "fuse": (FUSE_IN, HIDDEN, False),
        "fuse+ln": (FUSE_IN, HIDDEN, True),
        "vector": (VECTOR_SIZE, VECTOR_DIM, False),
    }.items():
        x = torch.randn(batch, k, device=DEV, generator=gen, requires_grad=True)
        w = (torch.randn(n, k, device=DEV, generator=gen) / k**0.5).requires_grad_()
        b = torch.zeros(n, device=DEV, requires_grad=True)
        g = torch.ones(n, device=DEV, requires_grad=True) if ln else None
        beta = torch.zeros(n, device=DEV, requires_grad=True) if ln else None
        dy = torch.randn(batch, n, device=DEV, generator=gen)
        params = [t for t in (x, w, b, g, beta) if t is not None]

        def step(fn, x=x, w=w, b=b, g=g, beta=beta, ln=ln, dy=dy, params=params):
            return lambda: torch.autograd.grad(fn(x, w, b, "elu", g, beta, 1e-5, ln), params, dy)

        cands = {
            "eager": step(reference.linear_act),
            "triton": step(functools.partial(tk.linear_act, gemm="torch")),
            "triton_gemm": step(functools.partial(tk.linear_act, gemm="triton")),
        }
        if compiled is not None:
            mod = compiled["linear"][ln]
            cands["compiled"] = step(lambda x, w, b, act, g, beta, eps, ln, mod=mod: mod(x, w, b, g, beta))
        rows.append((op, cands))

    n_env = max(1, batch // ROLLOUT)
    rewards = torch.randn(n_env, ROLLOUT, device=DEV, generator=gen)
    dones = (torch.rand(n_env, ROLLOUT, device=DEV, generator=gen) < 0.02).float()
    values = torch.randn(n_env, ROLLOUT + 1, device=DEV, generator=gen)
    valids = torch.ones(n_env, ROLLOUT + 1, device=DEV)

    def sf():
        adv = sf_gae_advantages(rewards, dones, values, valids, 0.99, 0.95)
        ret = adv + valids[:, :-1] * values[:, :-1]
        std, mean = torch.std_mean(adv)
        return (adv - mean) / std.clamp_min(1e-7), ret

    def eager():
        adv, ret = reference.gae(rewards, dones, values, valids, 0.99, 0.95)
        return reference.normalize_advantages(adv), ret

    rows.append(
        (
            "gae",
            {
                "sf": sf,
                "eager": eager,
                "triton": functools.partial(tk.gae, rewards, dones, values, valids, 0.99, 0.95, None, True),
            },
        )
    )

    lp = (torch.randn(batch, device=DEV, generator=gen) * 0.3).requires_grad_()
    old_lp = torch.randn(batch, device=DEV, generator=gen) * 0.3
    adv, old_v, tgt = (torch.randn(batch, device=DEV, generator=gen) for _ in range(3))
    v = (old_v + 0.3 * torch.randn(batch, device=DEV, generator=gen)).requires_grad_()

    def pstep(fn):
        def run():
            policy, value = fn(lp, old_lp, adv, v, old_v, tgt, None, 0.1, 1.0, 0.5)
            return torch.autograd.grad(policy + value, (lp, v))

        return run

    cands = {"eager": pstep(reference.ppo_loss), "triton": pstep(tk.ppo_loss)}
    if compiled is not None:
        cands["compiled"] = pstep(
            lambda lp, old_lp, adv, v, old_v, tgt, *_: compiled["ppo"](lp, old_lp, adv, v, old_v, tgt)
        )
    rows.append(("ppo", cands))

    ids = torch.randint(0, N_IDS, (batch, *VIEW_SHAPE), device=DEV, generator=gen)
    emb = torch.randn(N_IDS, EMBED_DIM, device=DEV, generator=gen, requires_grad=True)
    cw = (torch.randn(CONV_CHANNELS, EMBED_DIM, 3, 3, device=DEV, generator=gen) / 12).requires_grad_()
    cb = torch.zeros(CONV_CHANNELS, device=DEV, requires_grad=True)
    edy = torch.randn(batch, CONV_CHANNELS, *VIEW_SHAPE, device=DEV, generator=gen)
    rows.append(
        (
            "embed_conv",
            {
                "eager": lambda: torch.autograd.grad(
                    reference.embed_conv(ids, emb, cw, cb), (emb, cw, cb), edy
                )
            },
        )
    )
    return rows


TIMINGS: list[dict] = []


def time_batch(batch: int, rounds: int, label: str = "", compiled: dict | None = None, ops=None) -> None:
    inner = 1 if ARGS.interpret else max(1, 8 * 4096 // batch)
    precision = torch.get_float32_matmul_precision()
    for op, cands in timing_rows(batch, compiled):
        if ops is not None and op not in ops:
            continue
        if compiled is not None:  # only the ops that have a compiled candidate, and only it against eager
            if "compiled" not in cands:
                continue
            first = next(iter(cands))
            cands = {first: cands[first], **{c: f for c, f in cands.items() if c in ("triton", "compiled")}}
        try:
            times = measure(cands, rounds, inner)
        except Exception as exc:
            print(f"{op:<10}{label:<6} {batch:>6} TIMING FAILED: {type(exc).__name__}: {exc}", flush=True)
            TIMINGS.append({"op": op + label, "batch": batch, "error": f"{type(exc).__name__}: {exc}"})
            continue
        base_name, base = next(iter(times.items()))
        for cand, sec in times.items():
            TIMINGS.append(
                {
                    "op": op + label,
                    "batch": batch,
                    "candidate": cand,
                    "us_per_call": 1e6 * sec,
                    "baseline": base_name,
                    "speedup_vs_baseline": base / sec,
                    "inner": inner,
                    "rounds": rounds,
                    "fp32_matmul_precision": precision,
                }
            )
            print(
                f"{op + label:<16} {batch:>6} {cand:<12} {1e6 * sec:>10.1f} {base / sec:>8.2f}x", flush=True
            )


# ----------------------------------------------------------------------------- profile


@triton.jit
def _tiny_kernel(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=mask) + 1.0, mask=mask)


def _device_us(prof) -> float:
    """Total GPU kernel time in a profile (us): the self device time of the CUDA entries."""
    total = 0.0
    for evt in prof.key_averages():
        if evt.device_type == torch.autograd.DeviceType.CUDA:
            total += getattr(evt, "self_device_time_total", None) or getattr(evt, "self_cuda_time_total", 0)
    return total


PROFILE: dict = {"per_call": [], "launch_us": {}, "host_tables": {}}


def profile_stage(batches: list[int]) -> None:
    """Per op and candidate: GPU kernel time per call (torch.profiler) next to the wall time per call,
    which tells launch/host overhead from kernel time; then the cost of one bare launch."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if CUDA else [])
    calls = 2 if ARGS.dry_run else 20
    print(
        f"{'op':<12} {'batch':>6} {'candidate':<12} {'wall us':>9} {'gpu us':>9} {'kernels':>8}", flush=True
    )
    for batch in batches:
        for op, cands in timing_rows(batch):
            for cand, fn in cands.items():
                for _ in range(3):
                    fn()
                _sync()
                start = time.perf_counter()
                for _ in range(calls):
                    fn()
                _sync()
                wall = 1e6 * (time.perf_counter() - start) / calls
                with profile(activities=activities) as prof:
                    for _ in range(calls):
                        fn()
                    _sync()
                gpu = _device_us(prof) / calls
                n_kernels = (
                    sum(
                        e.count
                        for e in prof.key_averages()
                        if e.device_type == torch.autograd.DeviceType.CUDA
                    )
                    / calls
                )
                PROFILE["per_call"].append(
                    {
                        "op": op,
                        "batch": batch,
                        "candidate": cand,
                        "wall_us": wall,
                        "gpu_kernel_us": gpu,
                        "kernels_per_call": n_kernels,
                    }
                )
                print(
                    f"{op:<12} {batch:>6} {cand:<12} {wall:>9.1f} {gpu:>9.1f} {n_kernels:>8.1f}", flush=True
                )
                if batch == batches[0] and op in ("fuse", "ppo") and cand in ("eager", "triton"):
                    table = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=14)
                    PROFILE["host_tables"][f"{op} {cand} {batch}"] = table
    for op_cand, table in PROFILE["host_tables"].items():
        print(f"\n-- host time by op: {op_cand} ({calls} calls) --\n{table}", flush=True)

    x = torch.zeros(4096, device=DEV)
    n_launch = 10 if ARGS.dry_run else 2000
    launches = {
        "triton_tiny_kernel": lambda: _tiny_kernel[(4,)](x, 4096, BLOCK=1024),
        "torch_add_": lambda: x.add_(1.0),
        "torch_empty_4096": lambda: torch.empty(4096, device=DEV),
    }
    for name, fn in launches.items():
        for _ in range(10):
            fn()
        _sync()
        start = time.perf_counter()
        for _ in range(n_launch):
            fn()
        host = 1e6 * (time.perf_counter() - start) / n_launch
        _sync()
        total = 1e6 * (time.perf_counter() - start) / n_launch
        PROFILE["launch_us"][name] = {"host_us": host, "with_sync_us": total}
        print(f"launch {name:<20} host {host:7.1f} us/launch, incl. final sync {total:7.1f} us", flush=True)


# ----------------------------------------------------------------------------- main


def environment() -> dict:
    env = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "cuda_runtime": torch.version.cuda,
        "device": torch.cuda.get_device_name() if CUDA else "cpu (TRITON_INTERPRET=1)",
        "import_mode": IMPORT_MODE,
        "fp32_matmul_precision": torch.get_float32_matmul_precision(),
        "cudnn_allow_tf32": bool(torch.backends.cudnn.allow_tf32),
        "interpret": bool(ARGS.interpret),
        "dry_run": bool(ARGS.dry_run),
    }
    if CUDA:
        props = torch.cuda.get_device_properties(0)
        env |= {
            "capability": list(torch.cuda.get_device_capability()),
            "sms": props.multi_processor_count,
            "memory_gib": round(props.total_memory / 2**30, 1),
        }
        with contextlib.suppress(Exception):
            import subprocess

            env["driver"] = subprocess.run(
                ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                capture_output=True,
                text=True,
                timeout=20,
            ).stdout.strip()
    return env


def summary() -> dict:
    out: dict = {}
    for rec in RESULTS:
        s = out.setdefault(rec["kernel"], {"cases": 0, "failed": 0, "failed_cases": [], "max_tol_ratio": 0.0})
        s["cases"] += 1
        if not rec["ok"]:
            s["failed"] += 1
            s["failed_cases"].append(rec["case"])
        for c in rec["checks"]:
            s["max_tol_ratio"] = max(s["max_tol_ratio"], c.get("tol_ratio", 0.0))
    return out


def write_json(env: dict) -> Path:
    out_dir = Path(ARGS.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "kernels_gpu_check.json"
    payload = {
        "environment": env,
        "summary": summary(),
        "correctness": RESULTS,
        "timings": TIMINGS,
        "elapsed_s": round(time.perf_counter() - START, 1),
    }
    path.write_text(json.dumps(payload, indent=1))
    return path


def main() -> int:
    torch.manual_seed(0)
    env = environment()
    print(json.dumps(env), flush=True)
    if ARGS.profile:
        default = "32" if ARGS.dry_run else "1024,65536"
        profile_stage([int(b) for b in (ARGS.batches or default).split(",")])
        path = Path(ARGS.out) / "kernels_gpu_profile.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"environment": env, **PROFILE}, indent=1))
        print(f"wrote {path}; {time.perf_counter() - START:.0f} s in all", flush=True)
        return 0

    print("\n== correctness against the float64 references ==", flush=True)
    linear_cases()
    gae_cases()
    ppo_cases()
    if "rlgpt.kernels.dispatch" in sys.modules:
        record("dispatch", "backend auto picks triton on the device", check_dispatch)
    record("embed_conv", "cuDNN fp32 (info; no Triton path)", check_embed_conv)
    summ = summary()
    print("\nper kernel:", flush=True)
    for kernel, s in summ.items():
        print(
            f"  {kernel:<10} {s['cases'] - s['failed']}/{s['cases']} pass, worst error/tolerance "
            f"{s['max_tol_ratio']:.3g}{'  FAILED: ' + ', '.join(s['failed_cases']) if s['failed'] else ''}"
        )
    write_json(env)

    print(f"\n== timings: forward + backward, median us per call ({DEV.type}) ==", flush=True)
    print(f"{'op':<16} {'batch':>6} {'candidate':<12} {'us/call':>10} {'speedup':>9}", flush=True)
    default = "32" if ARGS.dry_run else "1024,4096,16384,65536"
    batches = [int(b) for b in (ARGS.batches or default).split(",")]
    rounds = 1 if ARGS.dry_run else ARGS.rounds
    for batch in batches:
        time_batch(batch, rounds)
    write_json(env)

    if time.perf_counter() - START < ARGS.deadline:
        previous = torch.get_float32_matmul_precision()
        torch.set_float32_matmul_precision("high")  # TF32 for cuBLAS and (via _precision) tl.dot
        try:
            for batch in batches[:1] + batches[2:3]:
                time_batch(batch, rounds, label="[tf32]", ops={"fuse", "fuse+ln", "vector"})
        finally:
            torch.set_float32_matmul_precision(previous)
        write_json(env)
    else:
        print("TF32 timings skipped (past --deadline)", flush=True)

    if ARGS.compile and time.perf_counter() - START < ARGS.deadline:
        t0 = time.perf_counter()
        try:
            compiled = {
                "linear": {ln: torch.compile(_LinearModule(ln)) for ln in (False, True)},
                "ppo": torch.compile(_PPOModule()),
            }
            time_batch(batches[0], rounds, label="[cmp]", compiled=compiled)
        except Exception as exc:
            print(f"torch.compile timings failed: {type(exc).__name__}: {exc}", flush=True)
        print(f"torch.compile stage: {time.perf_counter() - t0:.0f} s (compiles included)", flush=True)
    elif ARGS.compile:
        print("torch.compile timings skipped (past --deadline)", flush=True)

    path = write_json(env)
    failed = sum(s["failed"] for s in summ.values())
    print(
        f"\n{'ALL PASS' if not failed else f'{failed} FAILED CASES'}; wrote {path}; "
        f"{time.perf_counter() - START:.0f} s in all",
        flush=True,
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
