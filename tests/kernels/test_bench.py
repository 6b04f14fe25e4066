"""bench/kernels.py's GPU code path (the Triton rows) runs, here under the interpreter at a tiny batch."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_kernel_bench_runs_every_row_including_triton():
    pytest.importorskip("triton", reason="triton is not installed (pip install 'rlgpt[kernels]')")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"} | {"OMP_NUM_THREADS": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "bench.kernels", "--interpret", "--no-compile", "--batches", "32",
         "--rounds", "1"],
        capture_output=True, text=True, env=env, timeout=600, cwd=ROOT,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    rows = {tuple(line.split()[:3]) for line in result.stdout.splitlines()}
    for op in ("fuse", "fuse+ln", "vector"):
        for cand in ("eager", "fused_ops", "triton", "triton_gemm"):
            assert (op, "32", cand) in rows, (op, cand, result.stdout)
    for cand in ("sf", "eager", "fused_ops", "numba", "triton"):
        assert ("gae", "32", cand) in rows, (cand, result.stdout)
    assert ("ppo", "32", "triton") in rows, result.stdout
