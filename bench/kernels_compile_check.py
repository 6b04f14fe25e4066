"""Compile every Triton kernel with Triton's real compiler for an NVIDIA target, without a GPU.

Run: ``python bench/kernels_compile_check.py [--arch 90]``. The tests run the kernels only under the
interpreter, which skips Triton's type checks, layouts and register allocation; this compiles each kernel
variant the dispatcher can launch (at the policy's widths) down to a cubin with the ``ptxas`` bundled in
the triton wheel and prints its register / stack (spill) use from ``cuobjdump --dump-resource-usage``.
A developer check: nothing in ``rlgpt.kernels`` compiles Triton on a machine without a GPU.
"""

from __future__ import annotations

import argparse
import importlib
import itertools
import os
import re
import subprocess
import tempfile

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

linear = importlib.import_module("rlgpt.kernels.triton.linear_act")
gae = importlib.import_module("rlgpt.kernels.triton.gae")
ppo = importlib.import_module("rlgpt.kernels.triton.ppo_loss")

FLOAT_ARGS = {"eps", "gamma", "lam", "clip_low", "clip_high", "clip_value", "ratio_min", "ratio_max"}


def compile_one(fn, constexprs: dict, num_warps: int, arch: int) -> str:
    """Compile ``fn`` with fp32 pointers, i32 sizes and fp32 scalars; return its resource usage."""
    signature = {
        name: "constexpr" if name in constexprs else "*fp32" if name.endswith("_ptr") else
        "fp32" if name in FLOAT_ARGS else "i32"
        for name in fn.arg_names
    }  # fmt: skip
    kernel = triton.compile(
        ASTSource(fn, signature, constexprs),
        target=GPUTarget("cuda", arch, 32),
        options={"num_warps": num_warps},
    )
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "k.cubin")
        with open(path, "wb") as f:
            f.write(kernel.asm["cubin"])
        tool = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
        out = subprocess.run([tool, "--dump-resource-usage", path], capture_output=True, text=True).stdout
    match = re.search(r"REG:\d+ STACK:\d+", out)
    return match.group(0) if match else out.strip()


def variants():
    for width, ln, act, pre in itertools.product([64, 256, 512], [False, True], [0, 2], [False, True]):
        if width > 256 and not ln:
            continue
        block_m, block_n, warps = linear._blocks(width, ln)
        consts = dict(HAS_BIAS=True, LAYER_NORM=ln, LN_AFFINE=ln, ACT=act, PRE_GEMM=pre, PRECISION="ieee",
                      BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=32)  # fmt: skip
        yield (
            f"linear fwd N={width} ln={ln} act={act} cublas_gemm={pre}",
            linear._linear_act_fwd_kernel,
            consts,
            warps,
        )
    for width, ln, act in itertools.product([64, 256, 512], [False, True], range(4)):
        if width > 256 and not ln:
            continue
        block_m, block_n, warps = linear._blocks(width, ln)
        consts = dict(LAYER_NORM=ln, LN_AFFINE=ln, ACT=act, BLOCK_M=block_m, BLOCK_N=block_n)
        yield f"linear bwd N={width} ln={ln} act={act}", linear._linear_act_bwd_kernel, consts, warps
    for per_step, stats in itertools.product([False, True], [False, True]):
        consts = dict(PER_STEP=per_step, STATS=stats, BLOCK_E=gae._BLOCK_E)
        yield f"gae per_step={per_step} stats={stats}", gae._gae_kernel, consts, 4
    yield "block_stats", gae._block_stats_kernel, dict(HAS_VALID=True, BLOCK=gae._BLOCK), 4
    yield "normalize", gae._normalize_kernel, dict(BLOCK=gae._BLOCK), 4
    for valid, grad in itertools.product([False, True], [False, True]):
        yield (
            f"ppo valids={valid} grad={grad}",
            ppo._ppo_loss_kernel,
            dict(HAS_VALID=valid, GRAD=grad, BLOCK=ppo._BLOCK),
            4,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--arch", type=int, default=90, help="SM version (90: H100/H200)")
    args = parser.parse_args()
    os.environ.pop("TRITON_INTERPRET", None)
    print(f"triton {triton.__version__}, target sm_{args.arch}")
    for name, fn, consts, warps in variants():
        print(f"{name:<48} warps={warps:<3} {compile_one(fn, consts, warps, args.arch)}")


if __name__ == "__main__":
    main()
