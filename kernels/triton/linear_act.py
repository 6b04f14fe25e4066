"""Fused ``act(LayerNorm?(x @ W.T + b))``: one Triton GEMM with the bias, LayerNorm and activation in its
epilogue (or, with ``gemm="torch"``, a cuBLAS GEMM followed by that epilogue as one kernel), and a
backward whose element-wise chain (activation derivative + LayerNorm backward + bias gradient) is one
kernel, leaving only the two GEMMs of the backward to cuBLAS.

Why: eager PyTorch runs the policy's fuse layer as GEMM, bias add, activation (3 reads + 2 writes of the
``[B, hidden]`` activations), and its backward as 3+ more element-wise passes; at the policy's sizes
(hidden 256) those passes cost as much as the GEMM. The activation derivative is taken from the output
(``elu' = y + 1`` below 0, ``relu' = y > 0``, ``tanh' = 1 - y^2``), so no pre-activation is stored;
with LayerNorm the normalized ``x_hat`` and ``1/std`` per row are kept for the backward.

fp32 only (the policy trains in fp32). ``tl.dot`` runs in IEEE fp32 unless torch itself allows TF32 for
matmuls, so that the fused layer and ``F.linear`` agree.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from rlgpt.kernels.reference import ACTIVATIONS
from rlgpt.kernels.triton import _alloc

_ACT_IDS = {name: i for i, name in enumerate(ACTIVATIONS)}
GEMMS = ("triton", "torch")
"""Who runs the forward GEMM: Triton (everything in one kernel) or cuBLAS + a fused Triton epilogue."""


@triton.jit
def _apply_act(z, ACT: tl.constexpr):
    if ACT == 0:  # elu; exp(z) - 1 rather than expm1: Triton has no portable expm1, error < 1e-7 absolute
        return tl.where(z > 0, z, tl.exp(tl.minimum(z, 0.0)) - 1.0)
    elif ACT == 1:  # relu
        return tl.maximum(z, 0.0)
    elif ACT == 2:  # tanh = sign(z) (1 - e^{-2|z|}) / (1 + e^{-2|z|}), overflow-free for any z
        e = tl.exp(-2.0 * tl.abs(z))
        t = (1.0 - e) / (1.0 + e)
        return tl.where(z < 0, -t, t)
    else:
        return z


@triton.jit
def _act_grad_from_output(y, ACT: tl.constexpr):
    if ACT == 0:
        return tl.where(y > 0, 1.0, y + 1.0)
    elif ACT == 1:
        return tl.where(y > 0, 1.0, 0.0)
    elif ACT == 2:
        return 1.0 - y * y
    else:
        return tl.full(y.shape, 1.0, tl.float32)


@triton.jit
def _linear_act_fwd_kernel(
    x_ptr, w_ptr, z_ptr, b_ptr, g_ptr, beta_ptr, y_ptr, xhat_ptr, rstd_ptr,
    M, N, K,
    stride_xm, stride_xk, stride_wn, stride_wk, stride_zm, stride_ym,
    eps,
    HAS_BIAS: tl.constexpr, LAYER_NORM: tl.constexpr, LN_AFFINE: tl.constexpr, ACT: tl.constexpr,
    PRE_GEMM: tl.constexpr, PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):  # fmt: skip
    """With PRE_GEMM, ``z = x @ W^T`` was computed by cuBLAS and this is only the fused epilogue."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    m_mask = rm < M
    n_mask = rn < N
    if PRE_GEMM:
        acc = tl.load(z_ptr + rm[:, None] * stride_zm + rn[None, :],
                      mask=m_mask[:, None] & n_mask[None, :], other=0.0)  # fmt: skip
    else:
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k0 in range(0, K, BLOCK_K):
            kk = k0 + rk
            k_mask = kk < K
            a = tl.load(x_ptr + rm[:, None] * stride_xm + kk[None, :] * stride_xk,
                        mask=m_mask[:, None] & k_mask[None, :], other=0.0)  # fmt: skip
            b = tl.load(w_ptr + rn[None, :] * stride_wn + kk[:, None] * stride_wk,
                        mask=n_mask[None, :] & k_mask[:, None], other=0.0)  # fmt: skip
            acc = tl.dot(a, b, acc, input_precision=PRECISION)
    if HAS_BIAS:
        acc += tl.load(b_ptr + rn, mask=n_mask, other=0.0)[None, :]
    if LAYER_NORM:
        # One program holds the whole row (BLOCK_N >= N, one column block): exact two-pass statistics.
        cols = n_mask[None, :]
        mean = tl.sum(tl.where(cols, acc, 0.0), axis=1) / N
        centered = tl.where(cols, acc - mean[:, None], 0.0)
        rstd = 1.0 / tl.sqrt(tl.sum(centered * centered, axis=1) / N + eps)
        xhat = centered * rstd[:, None]
        tl.store(xhat_ptr + rm[:, None] * N + rn[None, :], xhat, mask=m_mask[:, None] & cols)
        tl.store(rstd_ptr + rm, rstd, mask=m_mask)
        acc = xhat
        if LN_AFFINE:
            acc = acc * tl.load(g_ptr + rn, mask=n_mask, other=0.0)[None, :]
            acc += tl.load(beta_ptr + rn, mask=n_mask, other=0.0)[None, :]
    y = _apply_act(acc, ACT)
    tl.store(y_ptr + rm[:, None] * stride_ym + rn[None, :], y, mask=m_mask[:, None] & n_mask[None, :])


@triton.jit
def _linear_act_bwd_kernel(
    dy_ptr, y_ptr, xhat_ptr, rstd_ptr, g_ptr, dz_ptr, db_part_ptr, dg_part_ptr, dbeta_part_ptr,
    M, N, stride_dym, stride_ym,
    LAYER_NORM: tl.constexpr, LN_AFFINE: tl.constexpr, ACT: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):  # fmt: skip
    """dz = d(loss)/d(x W^T + b) for a block of rows, plus per-block column sums for db (and dg, dbeta)."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    m_mask = rm < M
    n_mask = rn < N
    mask = m_mask[:, None] & n_mask[None, :]
    dy = tl.load(dy_ptr + rm[:, None] * stride_dym + rn[None, :], mask=mask, other=0.0)
    y = tl.load(y_ptr + rm[:, None] * stride_ym + rn[None, :], mask=mask, other=0.0)
    dh = tl.where(mask, dy * _act_grad_from_output(y, ACT), 0.0)
    if LAYER_NORM:
        xhat = tl.load(xhat_ptr + rm[:, None] * N + rn[None, :], mask=mask, other=0.0)
        rstd = tl.load(rstd_ptr + rm, mask=m_mask, other=0.0)
        if LN_AFFINE:
            tl.store(dg_part_ptr + pid_m * N + rn, tl.sum(dh * xhat, axis=0), mask=n_mask)
            tl.store(dbeta_part_ptr + pid_m * N + rn, tl.sum(dh, axis=0), mask=n_mask)
            dxhat = dh * tl.load(g_ptr + rn, mask=n_mask, other=0.0)[None, :]
        else:
            dxhat = dh
        c1 = tl.sum(dxhat * xhat, axis=1) / N
        c2 = tl.sum(dxhat, axis=1) / N
        dz = tl.where(mask, (dxhat - (xhat * c1[:, None] + c2[:, None])) * rstd[:, None], 0.0)
    else:
        dz = dh
    tl.store(dz_ptr + rm[:, None] * N + rn[None, :], dz, mask=mask)
    tl.store(db_part_ptr + pid_m * N + rn, tl.sum(dz, axis=0), mask=n_mask)


def _precision() -> str:
    return "ieee" if torch.get_float32_matmul_precision() == "highest" else "tf32"


def _blocks(n: int, layer_norm: bool) -> tuple[int, int, int]:
    """(BLOCK_M, BLOCK_N, num_warps): LayerNorm needs the whole row; otherwise 64-wide column tiles.

    Sized from the sm_90 register report of Triton's compiler (``cuobjdump --dump-resource-usage``): a
    32 x 256 LayerNorm backward tile on 4 warps needs 255 registers and spills; 16 x 256 takes 161 and
    does not. So a tile holds at most 4096 elements per 4 warps (one warp per 1024), and at least 16 rows.
    """
    block_n = (
        max(16, triton.next_power_of_2(n)) if layer_norm else min(64, max(16, triton.next_power_of_2(n)))
    )
    block_m = max(16, min(64, 4096 // block_n))
    num_warps = min(16, max(4, block_m * block_n // 1024))
    return block_m, block_n, num_warps


def linear_act_forward(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    act: str,
    ln_weight: torch.Tensor | None,
    ln_bias: torch.Tensor | None,
    eps: float,
    layer_norm: bool,
    gemm: str = "triton",
) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
    """Launch the forward on a 2-D ``x``; returns ``(y, x_hat, rstd)`` (the last two only with LayerNorm).

    ``gemm="triton"``: one kernel, the GEMM in Triton; ``gemm="torch"``: cuBLAS GEMM, then the bias,
    LayerNorm and activation as one Triton epilogue kernel.
    """
    if gemm not in GEMMS:
        raise ValueError(f"gemm must be one of {GEMMS}, got {gemm!r}")
    m, k = x.shape
    n = weight.shape[0]
    y = _alloc.empty(m, n, device=x.device)
    xhat = _alloc.empty(m, n, device=x.device) if layer_norm else None
    rstd = _alloc.empty(m, device=x.device) if layer_norm else None
    block_m, block_n, num_warps = _blocks(n, layer_norm)
    block_k = 32
    grid = (triton.cdiv(m, block_m), triton.cdiv(n, block_n))
    ln_affine = layer_norm and ln_weight is not None
    z = x @ weight.t() if gemm == "torch" else y
    _linear_act_fwd_kernel[grid](
        x, weight, z, bias if bias is not None else y, ln_weight if ln_affine else y,
        ln_bias if ln_affine else y, y, xhat if layer_norm else y, rstd if layer_norm else y,
        m, n, k, x.stride(0), x.stride(1), weight.stride(0), weight.stride(1), z.stride(0), y.stride(0), eps,
        HAS_BIAS=bias is not None, LAYER_NORM=layer_norm, LN_AFFINE=ln_affine, ACT=_ACT_IDS[act],
        PRE_GEMM=gemm == "torch", PRECISION=_precision(), BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k,
        num_warps=num_warps,
    )  # fmt: skip
    return y, xhat, rstd


def linear_act_backward_dz(
    dy: torch.Tensor,
    y: torch.Tensor,
    xhat: torch.Tensor | None,
    rstd: torch.Tensor | None,
    ln_weight: torch.Tensor | None,
    act: str,
    layer_norm: bool,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
    """Launch the fused element-wise backward; returns ``(dz, dbias, d_ln_weight, d_ln_bias)``."""
    m, n = y.shape
    block_m, block_n, num_warps = _blocks(n, layer_norm)
    grid = (triton.cdiv(m, block_m), triton.cdiv(n, block_n))
    dz = _alloc.empty(m, n, device=y.device)
    # Per-row-block partial column sums, reduced by torch: deterministic, no atomics.
    db_part = _alloc.empty(grid[0], n, device=y.device)
    ln_affine = layer_norm and ln_weight is not None
    dg_part = _alloc.empty(grid[0], n, device=y.device) if ln_affine else None
    dbeta_part = _alloc.empty(grid[0], n, device=y.device) if ln_affine else None
    _linear_act_bwd_kernel[grid](
        dy, y, xhat if layer_norm else y, rstd if layer_norm else y, ln_weight if ln_affine else y,
        dz, db_part, dg_part if ln_affine else db_part, dbeta_part if ln_affine else db_part,
        m, n, dy.stride(0), y.stride(0),
        LAYER_NORM=layer_norm, LN_AFFINE=ln_affine, ACT=_ACT_IDS[act], BLOCK_M=block_m, BLOCK_N=block_n,
        num_warps=num_warps,
    )  # fmt: skip
    dg = dg_part.sum(0) if dg_part is not None else None
    dbeta = dbeta_part.sum(0) if dbeta_part is not None else None
    return dz, db_part.sum(0), dg, dbeta


class LinearActFunction(torch.autograd.Function):
    """Autograd wrapper: Triton forward, Triton element-wise backward + two cuBLAS GEMMs (dx, dW)."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx,
        x: torch.Tensor,
        weight: torch.Tensor,
        bias: torch.Tensor | None,
        ln_weight: torch.Tensor | None,
        ln_bias: torch.Tensor | None,
        act: str,
        eps: float,
        layer_norm: bool,
        gemm: str,
    ) -> torch.Tensor:
        lead = x.shape[:-1]
        x2 = x.reshape(-1, x.shape[-1])
        ctx.has_ln_weight, ctx.has_ln_bias = ln_weight is not None, ln_bias is not None
        if layer_norm and (ln_weight is None) != (ln_bias is None):  # one affine part: the other is neutral
            n = weight.shape[0]
            ln_weight = ln_weight if ln_weight is not None else weight.new_ones(n)
            ln_bias = ln_bias if ln_bias is not None else weight.new_zeros(n)
        y, xhat, rstd = linear_act_forward(x2, weight, bias, act, ln_weight, ln_bias, eps, layer_norm, gemm)
        ctx.save_for_backward(x2, weight, y, xhat, rstd, ln_weight)
        ctx.act, ctx.layer_norm, ctx.has_bias, ctx.lead = act, layer_norm, bias is not None, lead
        return y.view(*lead, y.shape[-1])

    @staticmethod
    def backward(ctx, dy: torch.Tensor):  # type: ignore[override]
        x2, weight, y, xhat, rstd, ln_weight = ctx.saved_tensors
        dy2 = dy.reshape(-1, dy.shape[-1])
        if dy2.stride(-1) != 1:
            dy2 = dy2.contiguous()
        dz, db, dg, dbeta = linear_act_backward_dz(dy2, y, xhat, rstd, ln_weight, ctx.act, ctx.layer_norm)
        dx = (dz @ weight).view(*ctx.lead, x2.shape[-1]) if ctx.needs_input_grad[0] else None
        dw = dz.t() @ x2 if ctx.needs_input_grad[1] else None
        dg = dg if ctx.has_ln_weight else None
        dbeta = dbeta if ctx.has_ln_bias else None
        return dx, dw, db if ctx.has_bias else None, dg, dbeta, None, None, None, None


def linear_act(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    act: str = "elu",
    ln_weight: torch.Tensor | None = None,
    ln_bias: torch.Tensor | None = None,
    eps: float = 1e-5,
    layer_norm: bool = False,
    gemm: str = "triton",
) -> torch.Tensor:
    """Fused ``act(LayerNorm?(x @ weight.T + bias))`` with autograd; the reference's signature plus ``gemm``
    (who runs the forward GEMM, see :func:`linear_act_forward`)."""
    floats = [t for t in (x, weight, bias, ln_weight, ln_bias) if t is not None]
    if any(t.dtype != torch.float32 for t in floats):
        raise TypeError("the fused linear kernel takes fp32 tensors (the dispatcher runs others in torch)")
    if x.stride(-1) != 1:
        x = x.contiguous()
    return LinearActFunction.apply(x, weight, bias, ln_weight, ln_bias, act, eps, layer_norm, gemm)
