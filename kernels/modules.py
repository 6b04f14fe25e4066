"""``nn.Module`` front-ends of the fused ops: drop-in replacements for the policy's layer stacks."""

from __future__ import annotations

import torch
from torch import nn

from rlgpt.kernels import dispatch

_ACT_MODULES: dict[str, type[nn.Module]] = {
    "elu": nn.ELU,
    "relu": nn.ReLU,
    "tanh": nn.Tanh,
    "identity": nn.Identity,
}


class FusedLinearAct(nn.Sequential):
    """``Linear`` (+ ``LayerNorm``) + activation whose forward goes through :mod:`rlgpt.kernels.dispatch`.

    It *is* an ``nn.Sequential(Linear, [LayerNorm,] act)``, so parameters, their initialization and the
    state-dict keys (``0.weight``, ``0.bias``, ...) are exactly those of the plain layer stack: checkpoints
    load either way, and only ``forward`` differs (fused Triton kernel on CUDA, the measured-fastest torch
    path on CPU).
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        act: str = "elu",
        layer_norm: bool = False,
        bias: bool = True,
    ) -> None:
        if act not in _ACT_MODULES:
            raise ValueError(f"unknown activation {act!r}; expected one of {tuple(_ACT_MODULES)}")
        layers: list[nn.Module] = [nn.Linear(in_features, out_features, bias=bias)]
        if layer_norm:
            layers.append(nn.LayerNorm(out_features))
        layers.append(_ACT_MODULES[act]())
        super().__init__(*layers)
        self.act = act
        self.layer_norm = layer_norm

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        linear = self[0]
        norm = self[1] if self.layer_norm else None
        return dispatch.linear_act(
            x,
            linear.weight,
            linear.bias,
            self.act,
            norm.weight if norm is not None else None,
            norm.bias if norm is not None else None,
            norm.eps if norm is not None else 1e-5,
            self.layer_norm,
        )
