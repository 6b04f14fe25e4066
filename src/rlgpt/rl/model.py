"""A small policy torso for Crafter's symbolic observation.

The local view is a grid of material/object ids, so ids are embedded (an id is a category, not a
magnitude), a two-layer conv reads spatial structure, and the inventory/status vector joins through
an MLP. Pixel observations fall back to Sample Factory's default encoders.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from gymnasium import spaces
from sample_factory.algo.utils.context import global_model_factory
from sample_factory.model.encoder import Encoder, default_make_encoder_func
from sample_factory.utils.typing import Config, ObsSpace
from torch import nn

from rlgpt import kernels
from rlgpt.kernels.modules import FusedLinearAct
from rlgpt.rl.learner import NUM_FRAMES_KEY
from rlgpt.rl.worker_config import worker_config

EMBED_DIM = 16
CONV_CHANNELS = 32
VECTOR_DIM = 64


def is_symbolic(obs_space: ObsSpace) -> bool:
    """True for the symbolic Crafter observation (an integer ``view`` grid plus a ``vector``)."""
    return (
        isinstance(obs_space, spaces.Dict)
        and "view" in obs_space.spaces
        and "vector" in obs_space.spaces
        and len(obs_space["view"].shape) == 2
    )


class SymbolicEncoder(Encoder):
    """Embedding + conv over the semantic view, MLP over the vector, fused into ``hidden_size`` features."""

    def __init__(self, cfg: Config, obs_space: spaces.Dict):
        super().__init__(cfg)
        view, vector = obs_space["view"], obs_space["vector"]
        self.n_ids = int(view.high.max()) + 1
        height, width = view.shape
        self.embed = nn.Embedding(self.n_ids, EMBED_DIM)
        self.conv = nn.Sequential(
            nn.Conv2d(EMBED_DIM, CONV_CHANNELS, 3, padding=1),
            nn.ELU(),
            nn.Conv2d(CONV_CHANNELS, CONV_CHANNELS, 3, padding=1),
            nn.ELU(),
        )
        # Linear+ELU stacks that run as one fused Triton kernel on CUDA (same parameters and state-dict
        # keys as nn.Sequential(nn.Linear, nn.ELU); RLGPT_KERNELS=torch turns the kernels off).
        self.vector = FusedLinearAct(vector.shape[0], VECTOR_DIM, "elu")
        hidden = worker_config(cfg).train.ppo.hidden_size
        self.fuse = FusedLinearAct(CONV_CHANNELS * height * width + VECTOR_DIM, hidden, "elu")
        # getattr: configs of runs trained before the knob existed lack it (they ran in float32).
        self.bf16 = worker_config(cfg).encoder_precision == "bf16"
        self.out_size = hidden

    def forward(self, obs_dict: dict[str, torch.Tensor]) -> torch.Tensor:
        if not self.bf16:
            return self._forward(obs_dict)
        with torch.autocast(obs_dict["vector"].device.type, dtype=torch.bfloat16):
            return self._forward(obs_dict).float()

    def _forward(self, obs_dict: dict[str, torch.Tensor]) -> torch.Tensor:
        ids = obs_dict["view"].long().clamp_(0, self.n_ids - 1)
        conv1, conv2 = self.conv[0], self.conv[2]
        # = self.conv(self.embed(ids).permute(0, 3, 1, 2)), computed as `rlgpt.kernels.embed_conv` (on CPU
        # table gathers instead of the first convolution, in channels-last memory, which conv2 keeps); the
        # ELUs run in place so that their backward reads the output instead of recomputing exp of the input.
        x = F.elu_(kernels.embed_conv(ids, self.embed.weight, conv1.weight, conv1.bias))
        x = F.elu_(conv2(x))
        # Counts run 0..9 and beyond; log1p keeps them in a range an MLP handles without input normalization.
        v = self.vector(torch.log1p(obs_dict["vector"].float().clamp_min(0)))
        linear = self.fuse[0]
        if x.shape[0] <= linear.weight.shape[0] or not x.is_contiguous(memory_format=torch.channels_last):
            return self.fuse(torch.cat([x.flatten(1), v], dim=1))
        # A large batch in channels-last memory: its (c, h, w)-order flattening (what the fuse layer's columns
        # are laid out for) would copy more than the weight has, so the features are taken in (h, w, c)
        # order, a free view, and the weight's columns reordered to match: the same function.
        n_conv = x[0].numel()
        conv_columns = linear.weight[:, :n_conv].unflatten(1, tuple(x.shape[1:]))
        weight = torch.cat([conv_columns.permute(0, 2, 3, 1).flatten(1), linear.weight[:, n_conv:]], dim=1)
        x = x.permute(0, 2, 3, 1).flatten(1)
        return kernels.linear_act(torch.cat([x, v], dim=1), weight, linear.bias, "elu")

    def get_out_size(self) -> int:
        return self.out_size

    def type_for_input_tensor(self, input_tensor_name: str) -> torch.dtype:
        return torch.long if input_tensor_name == "view" else torch.float32


def policy_obs_space(obs_space: ObsSpace) -> ObsSpace:
    """The observation space without ``num_frames`` (bookkeeping for the learner, not a policy input)."""
    if isinstance(obs_space, spaces.Dict) and NUM_FRAMES_KEY in obs_space.spaces:
        return spaces.Dict({k: v for k, v in obs_space.spaces.items() if k != NUM_FRAMES_KEY})
    return obs_space


def make_encoder(cfg: Config, obs_space: ObsSpace) -> Encoder:
    """Sample Factory encoder factory: the symbolic torso where it applies, SF's default otherwise."""
    obs_space = policy_obs_space(obs_space)
    if is_symbolic(obs_space):
        return SymbolicEncoder(cfg, obs_space)
    return default_make_encoder_func(cfg, obs_space)


def register_model() -> None:
    """Make Sample Factory build policies with :func:`make_encoder` (call before training or evaluation)."""
    global_model_factory().register_encoder_factory(make_encoder)
