"""Policy torsos for Crafter's observations (`rlgpt.config.PPOConfig.encoder`).

``small``: the local view is a grid of material/object ids, so ids are embedded (an id is a category, not
a magnitude), a two-layer conv reads spatial structure, and the inventory/status vector joins through an
MLP; pixel observations fall back to Sample Factory's default encoders.

``resnet``: the IMPALA network as the Crafter papers use it (PPO-ResNet, Achievement Distillation: residual
stacks of 64, 128, 128 channels, two blocks each, group-normed convolutions, layer-normed dense layers,
fan-in initialisation), ported from snu-mllab/Achievement-Distillation
(achievement_distillation/impala_cnn.py, torch_util.py; configs/ppo.yaml ``impala_kwargs``), over the
pixels or over the embedded symbolic view (with the inventory/status vector through an MLP beside it).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from gymnasium import spaces
from sample_factory.algo.utils.context import global_model_factory
from sample_factory.model.actor_critic import ActorCritic, default_make_actor_critic_func
from sample_factory.model.encoder import Encoder, default_make_encoder_func
from sample_factory.utils.typing import ActionSpace, Config, ObsSpace
from torch import Tensor, nn

from rlgpt import kernels
from rlgpt.kernels.modules import FusedLinearAct
from rlgpt.rl.learner import NUM_FRAMES_KEY
from rlgpt.rl.worker_config import worker_config

EMBED_DIM = 16
CONV_CHANNELS = 32
VECTOR_DIM = 64
RESNET_CHANNELS = (64, 128, 128)
"""Channels of the IMPALA stacks (the reference's ``impala_kwargs.chans``)."""
RESNET_BLOCKS = 2
"""Residual blocks per stack (``impala_kwargs.nblock``)."""
RESNET_OUT = 256
"""Width of the dense layer after the stacks (``impala_kwargs.outsize``)."""
RESNET_EMBED_DIM = 32
"""Embedding width of a symbolic id before the stacks (the reference reads pixels; ours, 3 x this many
input channels' worth of room for 19 categories)."""


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


class FanInLayer(nn.Module):
    """The reference's ``FanInInitReLULayer``: optional norm of the input, then a linear or 3x3 conv layer
    whose weight is scaled to norm `init_scale` per output unit (no bias when normed), then an optional
    ReLU."""

    def __init__(self, n_in: int, n_out: int, conv: bool = False, init_scale: float = 1.0,
                 norm: str | None = None, relu: bool = True):
        super().__init__()
        norms = {"group": lambda: nn.GroupNorm(1, n_in), "layer": lambda: nn.LayerNorm(n_in)}
        self.norm = norms[norm]() if norm else None
        bias = self.norm is None
        self.layer = (nn.Conv2d(n_in, n_out, 3, padding=1, bias=bias) if conv
                      else nn.Linear(n_in, n_out, bias=bias))
        self.init_scale = init_scale
        self.relu = relu
        self.reset()

    @torch.no_grad()
    def reset(self) -> None:
        """The fan-in initialisation (again: Sample Factory's actor-critic re-initialises every layer)."""
        w = self.layer.weight
        w.copy_(torch.empty_like(w).normal_() if w.numel() else w)  # torch's default draw is uniform
        w.mul_(self.init_scale / w.norm(dim=tuple(range(1, w.ndim)), p=2, keepdim=True))
        if self.layer.bias is not None:
            self.layer.bias.zero_()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.norm is not None:
            x = self.norm(x)
        x = self.layer(x)
        return F.relu(x) if self.relu else x


class ResidualStack(nn.Module):
    """One IMPALA stack: a conv, a 3x3/2 max-pool, a group norm, `blocks` residual blocks of two convs."""

    def __init__(self, n_in: int, n_out: int, blocks: int, init_scale: float, first_norm: bool):
        super().__init__()
        self.first = FanInLayer(n_in, n_out, conv=True, norm="group" if first_norm else None)
        self.post_pool = nn.GroupNorm(1, n_out)
        scale = math.sqrt(init_scale / math.sqrt(blocks))
        self.blocks = nn.ModuleList(
            nn.Sequential(FanInLayer(n_out, n_out, conv=True, init_scale=scale, norm="group"),
                          FanInLayer(n_out, n_out, conv=True, init_scale=scale, norm="group"))
            for _ in range(blocks)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.post_pool(F.max_pool2d(self.first(x), kernel_size=3, stride=2, padding=1))
        for block in self.blocks:
            x = x + block(x)
        return x


class ImpalaCNN(nn.Module):
    """Residual stacks over a (C, H, W) input, flattened through a layer-normed dense layer of
    `RESNET_OUT`."""

    def __init__(self, channels: int, height: int, width: int):
        super().__init__()
        stacks = []
        for i, n_out in enumerate(RESNET_CHANNELS):
            stacks.append(ResidualStack(channels, n_out, RESNET_BLOCKS, 1 / math.sqrt(len(RESNET_CHANNELS)),
                                        first_norm=i > 0))
            channels, height, width = n_out, (height + 1) // 2, (width + 1) // 2
        self.stacks = nn.Sequential(*stacks)
        self.dense = FanInLayer(channels * height * width, RESNET_OUT, init_scale=1.4, norm="layer")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dense(self.stacks(x).flatten(1))


class ResNetEncoder(Encoder):
    """`ImpalaCNN` over the pixels (scaled to [0, 1]) or over the embedded symbolic view plus an MLP over the
    inventory/status vector, then a layer-normed dense layer of ``hidden_size`` (the reference's ``linear``
    of ``hidsize`` 1024)."""

    def __init__(self, cfg: Config, obs_space: ObsSpace):
        super().__init__(cfg)
        self.symbolic = is_symbolic(obs_space)
        if self.symbolic:
            view, vector = obs_space["view"], obs_space["vector"]
            self.n_ids = int(view.high.max()) + 1
            self.embed = nn.Embedding(self.n_ids, RESNET_EMBED_DIM)
            self.cnn = ImpalaCNN(RESNET_EMBED_DIM, *view.shape)
            self.vector = FanInLayer(vector.shape[0], VECTOR_DIM, init_scale=1.4)
            width = RESNET_OUT + VECTOR_DIM
        else:
            self.obs_key = next(iter(obs_space.spaces)) if isinstance(obs_space, spaces.Dict) else None
            shape = (obs_space[self.obs_key] if self.obs_key else obs_space).shape
            self.cnn = ImpalaCNN(*shape)
            width = RESNET_OUT
        self.out_size = worker_config(cfg).train.ppo.hidden_size
        self.linear = FanInLayer(width, self.out_size, norm="layer")

    def forward(self, obs_dict: dict[str, torch.Tensor]) -> torch.Tensor:
        if self.symbolic:
            ids = obs_dict["view"].long().clamp(0, self.n_ids - 1)
            x = self.cnn(self.embed(ids).permute(0, 3, 1, 2))
            v = self.vector(torch.log1p(obs_dict["vector"].float().clamp_min(0)))
            x = torch.cat([x, v], dim=1)
        else:
            x = self.cnn(obs_dict[self.obs_key].float() / 255.0)
        return self.linear(x)

    def get_out_size(self) -> int:
        return self.out_size

    def type_for_input_tensor(self, input_tensor_name: str) -> torch.dtype:
        return torch.long if input_tensor_name == "view" else torch.float32


class ADHeads(nn.Module):
    """Achievement Distillation's extra networks (`rlgpt.rl.ad`): a FiLM of the action on the latent and the
    next-achievement predictor (reference ``PPOADModel``: ``action_mlp`` and ``next_goal_pred_mlp``, one
    hidden layer each)."""

    def __init__(self, hidden: int, num_actions: int):
        super().__init__()
        self.num_actions = num_actions
        self.action_mlp = nn.Sequential(FanInLayer(num_actions, hidden, init_scale=1.4, norm="layer"),
                                        FanInLayer(hidden, 2 * hidden, relu=False))
        self.predictor = nn.Sequential(FanInLayer(hidden, hidden, init_scale=1.4, norm="layer"),
                                       FanInLayer(hidden, hidden, relu=False))

    def film(self, latents: Tensor, actions: Tensor) -> Tensor:
        """``(1 + gamma(a)) * latents + beta(a)``."""
        onehot = F.one_hot(actions.long().flatten(), self.num_actions).to(latents.dtype)
        gamma, beta = torch.chunk(self.action_mlp(onehot), 2, dim=-1)
        return (1 + gamma) * latents + beta

    def predict(self, latents: Tensor, actions: Tensor) -> Tensor:
        """The predicted (unit) state of the next achievement after taking `actions` from `latents`."""
        return F.normalize(self.predictor(self.film(latents, actions)), dim=-1)


def policy_obs_space(obs_space: ObsSpace) -> ObsSpace:
    """The observation space without ``num_frames`` (bookkeeping for the learner, not a policy input)."""
    if isinstance(obs_space, spaces.Dict) and NUM_FRAMES_KEY in obs_space.spaces:
        return spaces.Dict({k: v for k, v in obs_space.spaces.items() if k != NUM_FRAMES_KEY})
    return obs_space


def make_encoder(cfg: Config, obs_space: ObsSpace) -> Encoder:
    """Sample Factory encoder factory: the ``resnet`` torso when the config asks for it, else the ``small``
    symbolic torso where it applies and SF's default otherwise (configs of runs recorded before
    `rlgpt.config.PPOConfig.encoder` existed read its default, ``small``)."""
    obs_space = policy_obs_space(obs_space)
    if worker_config(cfg).train.ppo.encoder == "resnet":
        return ResNetEncoder(cfg, obs_space)
    if is_symbolic(obs_space):
        return SymbolicEncoder(cfg, obs_space)
    return default_make_encoder_func(cfg, obs_space)


def make_actor_critic(cfg: Config, obs_space: ObsSpace, action_space: ActionSpace) -> ActorCritic:
    """Sample Factory's actor-critic around :func:`make_encoder`'s torso. Sample Factory initialises every
    layer orthogonally; the ``resnet`` torso gets its fan-in initialisation back and the heads the reference's
    scales (policy 0.01, value 0.1: achievement_distillation/action_head.py, mse_head.py). With ``algo: ad``
    the model carries AD's heads (`ADHeads`), so that they are saved, loaded and optimized with
    it (configs recorded before these knobs read their defaults, ``small`` and ``ppo``)."""
    model = default_make_actor_critic_func(cfg, obs_space, action_space)
    if worker_config(cfg).train.ppo.encoder == "resnet":
        for module in model.modules():
            if isinstance(module, FanInLayer):
                module.reset()
        with torch.no_grad():
            for linear, gain in ((model.action_parameterization.distribution_linear, 0.01),
                                 (model.critic_linear, 0.1)):
                nn.init.orthogonal_(linear.weight, gain=gain)
                linear.bias.zero_()
    if worker_config(cfg).train.ppo.algo == "ad":
        model.ad_heads = ADHeads(model.encoder.get_out_size(), int(action_space.n))
    return model


def register_model() -> None:
    """Make Sample Factory build policies with :func:`make_actor_critic` and :func:`make_encoder` (call before
    training or evaluation)."""
    global_model_factory().register_encoder_factory(make_encoder)
    global_model_factory().register_actor_critic_factory(make_actor_critic)
