"""Typed configuration: one obvious place for every knob.

A run is described by a :class:`TrainConfig`, loaded from YAML (``configs/``) and overridden from the
command line with dotted ``key=value`` pairs (``ppo.learning_rate=3e-4``). Unknown keys and values of
the wrong type fail loudly with :class:`ConfigError` instead of being silently ignored.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from rlgpt.errors import ConfigError
from rlgpt.llm.config import LLMConfig

ENV_BACKENDS = ("auto", "batch", "gym")
"""Accepted values of `EnvConfig.backend`."""
LEARNER_CORES = ("auto", "own", "shared")
"""Accepted values of `TrainConfig.learner_core`."""
DEVICES = ("cpu", "cuda", "auto")
"""Accepted values of `TrainConfig.device`."""
ENCODER_PRECISIONS = ("auto", "fp32", "bf16")
"""Accepted values of `PPOConfig.encoder_precision`."""
ENCODERS = ("small", "resnet")
"""Accepted values of `PPOConfig.encoder`."""
ALGOS = ("ppo", "ad")
"""Accepted values of `PPOConfig.algo`."""


@dataclass
class EnvConfig:
    """The environment side of a run."""

    kind: str = "crafter"
    """The environment (`rlgpt.env_registry`): ``crafter`` or ``minedojo`` (where MineDojo and a JDK 8 are
    installed; primitives only: its games have no macro API yet), or one registered by the user; ``--env``."""
    obs_mode: str = "symbolic"
    """Observation: ``symbolic`` (Crafter: semantic local view + inventory vector; MineDojo: inventory,
    position, facing, vitals) or ``pixels`` (Crafter: 64x64 RGB; MineDojo: its RGB frame as well)."""
    episode_length: int | None = None
    """Primitive steps before an episode is truncated; ``None`` uses the task's default."""
    num_workers: int = 2
    """Sample Factory rollout worker processes."""
    num_envs_per_worker: int = 8
    """Games (environments) stepped by each rollout worker, in ``worker_num_splits`` equal groups."""
    worker_num_splits: int = 2
    """Groups a rollout worker's games are stepped in (Sample Factory's double buffering): with 2, one group
    steps while the other waits for its actions from the inference worker; with 1, every game waits, but
    each step and each inference call covers all of them (fewer, larger calls: less per-call overhead,
    which is what a 2-core box runs short of)."""
    backend: str = "auto"
    """How rollout workers step their games: ``batch`` (each half of a worker's games is one batch stepped
    by one call, `rlgpt.rl.sf_batch`, through Sample Factory's batched sampling; macros, the LLM's dense
    reward and observation parts included), ``gym`` (one Python env per game with the per-env wrappers,
    `rlgpt.rl.sf_env`; what pixel observations, saved start states and stored policies as options need), or
    ``auto``: ``batch`` wherever it applies, else ``gym``."""
    start_pool: str | None = None
    """File of saved start states (`rlgpt.macro.prefix.save_pool`): each training episode starts from one of
    them, restored exactly, instead of a fresh world. The planner sets it for a chain's later subtasks (the
    states its earlier skills reach) and counts the steps that built it; needs the ``gym`` backend."""


@dataclass
class PPOConfig:
    """Sample Factory APPO hyper-parameters (names match Sample Factory's flags)."""

    learning_rate: float = 3e-4
    """Adam learning rate."""
    gamma: float = 0.99
    """Discount factor per primitive (game) step: a macro call that ran k steps returns its rewards discounted
    within the call and the value of the state it ends in is discounted by ``gamma**k``
    (`rlgpt.rl.learner.SMDPLearner`)."""
    gae_lambda: float = 0.95
    """GAE lambda, applied once per policy decision (a macro call is one decision)."""
    rollout: int = 64
    """Policy decisions per trajectory slice sent to the learner (a macro call is one decision)."""
    batch_size: int = 1024
    """Minibatch size of one SGD step, in policy decisions (transitions)."""
    num_batches_per_epoch: int = 1
    """Minibatches per training iteration; a training batch is ``batch_size * num_batches_per_epoch``."""
    num_epochs: int = 2
    """Passes over each training batch."""
    ppo_clip_ratio: float = 0.2
    """PPO ratio clipping."""
    value_loss_coeff: float = 0.5
    """Weight of the value loss."""
    exploration_loss_coeff: float = 0.01
    """Entropy bonus weight."""
    max_grad_norm: float = 1.0
    """Gradient clipping norm."""
    hidden_size: int = 256
    """Width of the policy's torso."""
    encoder_precision: str = "fp32"
    """Arithmetic of the policy's encoder (embedding, convolutions, torso: nearly all of its work), in the
    learner and in inference alike: ``fp32``, ``bf16`` (autocast to bfloat16; its output returns to
    float32 before the action and value heads and the loss), or ``auto``: ``bf16`` where the hardware
    does bfloat16 dot products natively (a CUDA device, or a CPU with AVX512-BF16 or AMX;
    `rlgpt.kernels.dispatch.native_bf16`), ``fp32`` elsewhere, where bfloat16 is emulated and slower.
    ``bf16`` changes the numbers, not the function (measured sample efficiency: ``bench/RESULTS.md``)."""
    async_rl: bool = True
    """Asynchronous sampling and learning (APPO); ``False`` alternates them."""
    max_policy_lag: int = 50
    """Drop experience older than this many policy versions."""
    encoder: str = "small"
    """The policy's torso (`rlgpt.rl.model`): ``small`` (embedding + 2 convs + MLP, tuned for throughput on
    this 2-core box; the kernels of `rlgpt.kernels` serve it) or ``resnet`` (the IMPALA/PPO-ResNet network
    of the Crafter papers: residual conv stacks of 64, 128, 128 channels with layer-normed dense layers, on
    the embedded semantic view or on the pixels, the inventory through an MLP; `hidden_size` 1024 in the
    papers). ``resnet`` costs ~10x the compute per step (docs/results/learners.md)."""
    use_rnn: bool = False
    """A recurrent core (Sample Factory's GRU of ``hidden_size`` units) between the torso and the heads."""
    algo: str = "ppo"
    """Learner: ``ppo`` (Sample Factory's APPO) or ``ad``: PPO plus Achievement Distillation's auxiliary phase
    every `ad_aux_every` training batches (Moon et al. 2023, `rlgpt.rl.ad`)."""
    ad_aux_every: int = 8
    """AD: training batches (PPO phases) between two auxiliary phases; the reference's ``aux_freq``."""
    ad_aux_epochs: int = 6
    """AD: passes of one auxiliary phase over the stored batches; the reference's ``aux_nepoch``."""
    ad_pi_dist_coef: float = 1.0
    """AD: weight of the policy distillation loss KL(pi || pi_before) in the auxiliary phase."""
    ad_vf_dist_coef: float = 1.0
    """AD: weight of the value distillation loss (value vs the stored returns) in the auxiliary phase."""
    ad_temperature: float = 0.1
    """AD: temperature of the contrastive (achievement prediction and matching) cross-entropies."""
    ad_match: bool = True
    """AD: run the in-context achievement matching loss (partial optimal transport between the achievement
    sequences of two trajectories) beside the achievement prediction loss."""


@dataclass
class MacroConfig:
    """Code-as-policy macro-actions added to the primitive action space."""

    file: str | None = None
    """YAML/JSON list of macros (``name``, ``code``, optional ``description``); ``None`` = primitives only."""
    max_steps: int = 200
    """Primitive steps after which a running macro is cut off. Room for the control primitives (a walk to
    iron, collecting its ingredients first, takes ~100-200 steps); keep `agents.probe_max_steps` equal so
    macros are probed as they train."""
    memory_limit_mb: int = 1024
    """OS-level backstop: each env worker running macros or a dense reward may grow its data segment by at
    most this many MiB beyond its size at start (``RLIMIT_DATA``); an allocation past it fails the one macro
    call that made it (``memory`` diagnostic) instead of exhausting the machine. Also the memory headroom
    (``RLIMIT_AS``) of each contained process (probes, reward dry runs, code mode). 0 disables both."""
    contain_cpu_seconds: float = 300.0
    """CPU seconds one contained run of generated code off the env workers (a macro's probe, a reward's dry
    run, a code-mode play) may use (``RLIMIT_CPU``); past it, a ``timeout`` diagnostic. 0 disables it."""
    contain_wall_seconds: float = 600.0
    """Wall-clock seconds of one contained run before it is killed (a ``timeout`` diagnostic)."""
    hang_seconds: float = 300.0
    """Wall-clock seconds one macro call in a training's env worker may run before the trainer kills that
    worker as hung (a loop that takes no game step, in generated or trusted code; a call of `max_steps`
    steps takes well under a second): the training then ends with an error naming the macro, which the
    executor's retries and the critic see, instead of a run stalled at 0 FPS forever. 0 disables it."""
    max_time_share: float = 0.9
    """Largest share of the time of its calls (its code plus the game steps it makes) one macro's own code,
    or the dense reward's, may take, once it has used `budget_grace_seconds`; past it, it is switched off
    for the rest of the process (a ``disabled`` diagnostic: ``macro/<name>/fail_disabled``, the reward's
    diagnostics), so that code just under the per-call limits cannot slow training down 100x unnoticed
    (0.9: up to 9x the game's own time; the control primitives take ~0.1-0.25). 1 never disables."""
    budget_grace_seconds: float = 2.0
    """Code seconds a macro or the reward may use before `max_time_share` is enforced (start-up costs)."""


@dataclass
class TrainConfig:
    """Everything one ``rlgpt train`` needs."""

    task: str = "collect_wood"
    """Crafter achievement(s) to reach, e.g. ``collect_wood`` or ``place_table+make_wood_pickaxe``."""
    steps: int = 300_000
    """Primitive (game) steps to train for; a macro call that ran k game steps counts k. This is Sample
    Factory's ``env_steps`` (budget, checkpoints, FPS, metrics.csv's ``env_steps``)."""
    seed: int = 0
    """Seed for the policy and the environments."""
    run_dir: str | None = None
    """Where checkpoints, logs and reports go; default ``train_dir/<task>-seed<seed>``. Re-running the same
    command resumes this directory."""
    env: EnvConfig = field(default_factory=EnvConfig)
    """Environment settings."""
    ppo: PPOConfig = field(default_factory=PPOConfig)
    """Learner settings."""
    macros: MacroConfig = field(default_factory=MacroConfig)
    """Macro-actions (compiled LLM- or hand-written code) beside the primitive actions."""
    options: tuple[str, ...] = ()
    """Trained policies offered as actions (options) beside primitives and macros: directories holding a
    training's ``config.json`` and checkpoints (a training run, or a skill's ``policy/``). Chosen, one runs
    until its task's achievement count rises or ``macros.max_steps`` steps pass (`rlgpt.rl.options`). The
    planner offers a chain's earlier trained links to the later ones; needs the ``gym`` backend."""
    progress_reward: float = 0.1
    """What the plan's progress reward pays the first time in an episode each goal of the setup's
    ``progress_goals`` is reached (`rlgpt.rl.progress`; the loop's goals are the slow agent's sub-action
    goals, the task's own left out): a signal for every link of a chain of macros where the task's reward
    pays only the last. 0: off."""
    dense_reward_cap: float = 0.5
    """Most the LLM's dense reward may add up to over one episode; its running total stays within [0, cap]
    (`rlgpt.macro.reward.DenseReward`): below the task's success reward (1), so that no episode stopping
    short (farming the shaping, +0.5 a stone every step) earns what reaching the goal does. Measured:
    uncapped, a chain link's policy learned to mine stone for 16-step episodes (~1.7 reward) and never called
    its working ``place_furnace`` macro (success 0.03); capped at +-0.5, wood +0.5 then -0.5 for each item
    it was spent on let a make_wood_pickaxe policy fall from 0.94 to 0.00 success. 0: no cap."""
    stop_at_success: float = 0.0
    """End the training before `steps` at the first metrics row whose rolling success (training episodes, over
    a full window of Sample Factory's ``stats_avg`` episodes) reaches this; 0 never. What is left of `steps`
    is not spent. A stopping rule only: the RL-GPT loop still selects and reports on evaluation episodes."""
    save_every_sec: int = 30
    """Checkpoint period; a killed run loses at most this much training."""
    summaries_every_sec: int = 5
    """Period of the ``train/``, ``rollout/`` and ``macro/`` scalars (TensorBoard, W&B, metrics.csv); the
    end of training always writes a last point."""
    stop_grace_sec: int = 45
    """After a worker process dies, how long the run may take to stop the normal way (a last checkpoint,
    every process told to stop) before its remaining processes are killed and it ends with the error. A
    process killed while it held one of Sample Factory's shared queue locks leaves that queue locked for
    good, and whoever touches it next (the trainer included) waits forever."""
    learner_core: str = "auto"
    """Where Sample Factory's learner runs: ``own`` pins it to the last CPU core this process may use and
    every other process of the run (trainer, inference, rollout workers) to the rest; ``shared`` lets the
    OS place all of them; ``auto`` is ``own`` for the batch backend on 2+ cores (its learner needs about a
    core and the sampling the rest: on 2 cores, the scheduler otherwise keeps waking the sampling processes
    onto the learner's core) and ``shared`` otherwise (per-env rollout workers need every core)."""
    device: str = "cpu"
    """Where Sample Factory's learner and inference run: ``cpu``; ``cuda`` (a ConfigError at the start when
    torch sees no CUDA device); ``auto``: ``cuda`` when torch sees one, else ``cpu``. Rollouts stay on CPU
    processes either way, and evaluation and stored policies load on CPU. A GPU pays for the ``resnet``
    encoder's presets (configs/crafter_resnet.yaml); the ``small`` encoder is sized for CPU."""
    eval_episodes: int = 50
    """Episodes run by the evaluation at the end of training (0 disables it)."""
    marks: tuple[int, ...] = ()
    """Budget marks, in the steps of the run this training is part of (`mark_offset` + its own ``env_steps``):
    the first learner step at which that count reaches a mark saves a copy of the policy under
    ``marks/<mark>/`` (`rlgpt.rl.learner.MarkSaver`); a mark already at or below `mark_offset` is saved at
    the first learner step. The run evaluates the copies on test seeds (`RunConfig.eval_marks`)."""
    mark_offset: int = 0
    """Steps the run had counted when this training started (what `marks` are measured from)."""
    wandb: bool = False
    """Log to Weights & Biases (offline unless ``WANDB_MODE`` says otherwise)."""
    wandb_project: str = "rlgpt"
    """W&B project name."""
    verbose: bool = False
    """Show Sample Factory's own log lines on the console (they always go to the run's log file)."""

    def resolved_run_dir(self) -> Path:
        """The run directory, derived from task and seed when not given."""
        if self.run_dir:
            return Path(self.run_dir)
        return Path("train_dir") / f"{self.task.replace('+', '_')}-seed{self.seed}"


@dataclass(frozen=True)
class EnvSetup:
    """The part of a training's env the fast agent writes (the RL setup beside the TrainConfig)."""

    reward_code: str = ""
    """Source of the dense reward ``def reward(game, prev)`` ("" = the task's reward only)."""
    observation: tuple[str, ...] = ()
    """Observation parts the policy sees (empty = all)."""
    progress_goals: tuple[str, ...] = ()
    """Goals (Crafter items or achievements) the plan's progress reward pays once per episode each
    (`rlgpt.rl.progress`, ``TrainConfig.progress_reward`` each): the slow agent's sub-action goals, the
    task's own left out. Empty: none."""


NO_SETUP = EnvSetup()
"""The task's own reward and every observation part."""


def builtin_config_path(name: str) -> Path:
    """Path of a config shipped with the package, e.g. ``main.yaml`` or ``ppo/fast.yaml``."""
    return Path(str(resources.files("rlgpt.configs").joinpath(name)))


def _coerce(value: Any, hint: Any, key: str) -> Any:
    """Convert a YAML/CLI value to the annotated type, or raise ConfigError."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(hint)
        if value is None or (isinstance(value, str) and value.lower() in ("none", "null")):
            if type(None) in args:
                return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _coerce(value, arg, key)
            except ConfigError as e:
                errors.append(str(e))
        raise ConfigError(errors[0] if errors else f"{key}: invalid value {value!r}")
    if hint is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "1", "yes", "on", "false", "0", "no", "off"):
            return value.lower() in ("true", "1", "yes", "on")
        raise ConfigError(f"{key}: expected true/false, got {value!r}")
    if hint is int:
        if isinstance(value, bool):
            raise ConfigError(f"{key}: expected an integer, got {value!r}")
        try:
            as_float = float(value)
        except (TypeError, ValueError):
            raise ConfigError(f"{key}: expected an integer, got {value!r}") from None
        if not as_float.is_integer():
            raise ConfigError(f"{key}: expected an integer, got {value!r}")
        return int(as_float)
    if hint is float:
        if isinstance(value, bool):
            raise ConfigError(f"{key}: expected a number, got {value!r}")
        try:
            return float(value)
        except (TypeError, ValueError):
            raise ConfigError(f"{key}: expected a number, got {value!r}") from None
    if hint is str:
        if not isinstance(value, str | int | float):
            raise ConfigError(f"{key}: expected a string, got {value!r}")
        return str(value)
    if origin is tuple:
        # Only homogeneous ``tuple[X, ...]`` knobs (e.g. probe seeds); "1,2" on the command line works too.
        items = value.split(",") if isinstance(value, str) else value
        if not isinstance(items, list | tuple):
            raise ConfigError(f"{key}: expected a list, got {value!r}")
        item_hint = typing.get_args(hint)[0]
        return tuple(_coerce(v.strip() if isinstance(v, str) else v, item_hint, key) for v in items)
    raise ConfigError(f"{key}: unsupported type {hint}")


def _apply(obj: Any, data: dict[str, Any], prefix: str = "") -> None:
    hints = typing.get_type_hints(type(obj))
    names = {f.name for f in dataclasses.fields(obj)}
    for key, value in data.items():
        full = f"{prefix}{key}"
        if key not in names:
            raise ConfigError(f"unknown config key {full!r}; valid keys here: {', '.join(sorted(names))}")
        current = getattr(obj, key)
        if dataclasses.is_dataclass(current):
            if not isinstance(value, dict):
                raise ConfigError(f"{full}: expected a mapping of settings, got {value!r}")
            _apply(current, value, prefix=f"{full}.")
        else:
            setattr(obj, key, _coerce(value, hints[key], full))


def _parse_override(item: str) -> dict[str, Any]:
    if "=" not in item:
        raise ConfigError(f"override {item!r} must look like key=value (e.g. ppo.learning_rate=3e-4)")
    key, raw = item.split("=", 1)
    value = yaml.safe_load(raw) if raw else ""
    nested: dict[str, Any] = {}
    node = nested
    parts = key.strip().split(".")
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    node[parts[-1]] = value
    return nested


def validate(cfg: TrainConfig) -> TrainConfig:
    """Check value ranges that types alone cannot express."""
    checks = [
        (cfg.steps > 0, "steps must be > 0"),
        (cfg.env.obs_mode in ("symbolic", "pixels"), "env.obs_mode must be 'symbolic' or 'pixels'"),
        (cfg.env.episode_length is None or cfg.env.episode_length > 0, "env.episode_length must be > 0"),
        (cfg.env.num_workers >= 1, "env.num_workers must be >= 1"),
        (cfg.progress_reward >= 0 and math.isfinite(cfg.progress_reward),
         "progress_reward must be a finite number >= 0"),
        (cfg.env.backend in ENV_BACKENDS, f"env.backend must be one of {', '.join(ENV_BACKENDS)}"),
        (
            cfg.env.worker_num_splits >= 1 and cfg.env.num_envs_per_worker % cfg.env.worker_num_splits == 0,
            "env.num_envs_per_worker must be a multiple of env.worker_num_splits (>= 1)",
        ),
        (cfg.ppo.learning_rate > 0, "ppo.learning_rate must be > 0"),
        (0 < cfg.ppo.gamma <= 1, "ppo.gamma must be in (0, 1]"),
        (0 <= cfg.ppo.gae_lambda <= 1, "ppo.gae_lambda must be in [0, 1]"),
        (cfg.ppo.rollout >= 2, "ppo.rollout must be >= 2"),
        (
            cfg.ppo.batch_size >= cfg.ppo.rollout and cfg.ppo.batch_size % cfg.ppo.rollout == 0,
            "ppo.batch_size must be a multiple of ppo.rollout",
        ),
        (cfg.ppo.num_epochs >= 1, "ppo.num_epochs must be >= 1"),
        (cfg.ppo.hidden_size >= 8, "ppo.hidden_size must be >= 8"),
        (
            cfg.ppo.encoder_precision in ENCODER_PRECISIONS,
            f"ppo.encoder_precision must be one of {', '.join(ENCODER_PRECISIONS)}",
        ),
        (cfg.ppo.encoder in ENCODERS, f"ppo.encoder must be one of {', '.join(ENCODERS)}"),
        (cfg.ppo.algo in ALGOS, f"ppo.algo must be one of {', '.join(ALGOS)}"),
        (cfg.ppo.ad_aux_every >= 1, "ppo.ad_aux_every must be >= 1"),
        (cfg.ppo.ad_aux_epochs >= 1, "ppo.ad_aux_epochs must be >= 1"),
        (cfg.ppo.ad_temperature > 0, "ppo.ad_temperature must be > 0"),
        (cfg.macros.max_steps >= 1, "macros.max_steps must be >= 1"),
        (cfg.macros.memory_limit_mb >= 0, "macros.memory_limit_mb must be >= 0 (0 disables it)"),
        (cfg.macros.contain_cpu_seconds >= 0, "macros.contain_cpu_seconds must be >= 0 (0 disables it)"),
        (cfg.macros.contain_wall_seconds > 0, "macros.contain_wall_seconds must be > 0"),
        (cfg.macros.hang_seconds >= 0, "macros.hang_seconds must be >= 0 (0 disables it)"),
        (0 < cfg.macros.max_time_share <= 1, "macros.max_time_share must be in (0, 1]"),
        (cfg.macros.budget_grace_seconds >= 0, "macros.budget_grace_seconds must be >= 0"),
        (0 <= cfg.stop_at_success <= 1, "stop_at_success must be in [0, 1] (0: never stop early)"),
        (cfg.save_every_sec >= 1, "save_every_sec must be >= 1"),
        (cfg.summaries_every_sec >= 1, "summaries_every_sec must be >= 1"),
        (cfg.stop_grace_sec >= 1, "stop_grace_sec must be >= 1"),
        (cfg.learner_core in LEARNER_CORES, f"learner_core must be one of {', '.join(LEARNER_CORES)}"),
        (cfg.device in DEVICES, f"device must be one of {', '.join(DEVICES)}"),
        (cfg.eval_episodes >= 0, "eval_episodes must be >= 0"),
        (all(m > 0 for m in cfg.marks), "marks must be > 0"),
        (cfg.mark_offset >= 0, "mark_offset must be >= 0"),
    ]
    for ok, message in checks:
        if not ok:
            raise ConfigError(message)
    from rlgpt.env_registry import EnvUnavailable, get_env  # deferred: importing an env is not free

    try:
        kind = get_env(cfg.env.kind)
        kind.check_task(cfg.task)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    if not kind.macros and cfg.macros.file:
        raise ConfigError(f"env {kind.name} has no macro game API: macros.file needs env.kind=crafter")
    try:
        kind.check_available()
    except EnvUnavailable as e:
        raise ConfigError(str(e)) from None
    return cfg


def read_config_file(path: Path) -> dict[str, Any]:
    """The top-level mapping of a YAML config file, or ConfigError saying what is wrong with it."""
    if not path.is_file():
        raise ConfigError(f"config file {str(path)!r} does not exist")
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as e:
        raise ConfigError(f"config file {str(path)!r} is not valid YAML: {e}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"config file {str(path)!r} must hold a mapping at the top level")
    return data


def load_config(path: str | Path | None = None, overrides: list[str] | None = None) -> TrainConfig:
    """Build a TrainConfig from defaults, then a YAML file, then ``key=value`` overrides."""
    cfg = TrainConfig()
    if path is not None:
        path = Path(path)
        _apply(cfg, read_config_file(path))
        if cfg.macros.file and not Path(cfg.macros.file).is_absolute():
            cfg.macros.file = str(path.parent / cfg.macros.file)
    for item in overrides or []:
        _apply(cfg, _parse_override(item))
    return validate(cfg)


def train_config_from_dict(data: dict[str, Any], check: bool = True) -> TrainConfig:
    """Inverse of :func:`to_dict`; validated unless ``check`` is False (a config a trainer already validated,
    decoded again in its workers, `rlgpt.rl.worker_config`)."""
    cfg = TrainConfig()
    _apply(cfg, data)
    return validate(cfg) if check else cfg


def to_dict(cfg: TrainConfig) -> dict[str, Any]:
    """Plain-dict form of a config (for YAML dumps and W&B)."""
    return dataclasses.asdict(cfg)


ENV_DOC_LEVELS = ("full", "rules", "none")
"""`AgentConfig.env_doc`: how much the prompts say about the game, most first."""


@dataclass
class AgentConfig:
    """Knobs of the LLM agents (planner, slow, fast, critic) of the RL-GPT loop."""

    samples: int = 3
    """Test-time search width: macro candidates sampled per round for a coded sub-action, from distinct
    seeds and decoded together (several sequences per llama.cpp step on the embedded model, concurrent
    requests to a server); they are tried in order and the search stops at the first that reaches its goal
    in every probe call (`rlgpt.agents.fast.FastAgent.write_macro`)."""
    temperature: float = 0.7
    """Sampling temperature for code candidates (> 0 so that candidates differ)."""
    seed: int = 0
    """Base sampling seed; the search's k-th sampled candidate uses seed + k (distinct seeds also keep their
    cache entries apart)."""
    repair_retries: int = 2
    """Times one candidate's compile (or the reward's dry-run) diagnostics are sent back to the fast agent
    for a fix, before it is probed."""
    probe_repair_retries: int = 1
    """Test-time search depth: repair rounds after the first while no candidate reached its goal in every
    probe call; each samples `samples` new candidates from a prompt carrying the best failing candidate's
    code, probes, diagnostic, failing line, last actions and inventory change. Costs one batched decode
    per round, far less than a training iteration."""
    search_budget_s: float = 0.0
    """LLM wall seconds one sub-action's search may spend (samples and compile repairs); no new round and
    no further compile repair starts past it (0 = no limit: `samples` x rounds bound it)."""
    code_max_tokens: int = 512
    """Completion token limit of one code reply."""
    json_max_tokens: int = 384
    """Completion token limit of one structured (JSON) reply (the critic's, the planner's, the setup's)."""
    slow_max_tokens: int = 0
    """Completion token limit of the slow agent's decomposition; 0 = room for the longest reply its schema
    allows (`rlgpt.agents.slow.reply_token_bound`, at least `json_max_tokens`), so that a decomposition
    with every sub-action the task needs (the Crafter benchmark's fill the schema's ``maxItems``) is never
    cut off by construction. A smaller number cuts long replies (they are re-asked, then fall back)."""
    probe_seeds: tuple[int, ...] = (0, 1, 2)
    """Seeded episodes in which each candidate macro is probed (each plus `probe_seed_offset`)."""
    probe_seed_offset: int = 0
    """Added to every probe seed (`probe_episode_seeds`), so that probes follow the run's ``--seed``:
    `validate_run` sets it to ``run_seed * SEED_STRIDE`` unless set (non-zero), like the sampling seeds
    (`derived_seed`); run seed 0 probes the worlds of `probe_seeds` themselves."""
    probe_calls_per_episode: int = 1
    """Consecutive macro calls per probe episode."""
    probe_warmup_steps: int = 0
    """Random moves before each probe call, so calls start in varied states."""
    probe_max_steps: int = 200
    """Primitive step bound of one probe call (as `macros.max_steps` bounds it in training)."""
    reward_dry_run_steps: int = 20
    """Random steps a compiled reward is run for before training; a runtime failure is repaired like a
    compile error."""
    api: str = "primitives"
    """What macro code may use of the game object, documented in every prompt and enforced by the compiler
    (`rlgpt.macro.api.API_LEVELS`): ``basic`` (queries and moves only), ``primitives`` (the default: also the
    control primitives `game.gather`, `game.place_item`, `game.craft_item`, `game.walk_to`, ...: each does one
    thing and fails with `game.last_failure` set when a prerequisite is missing) or ``expert`` (also
    `game.collect`, `game.place`, `game.craft`, which solve their own prerequisites: one call is a whole
    chain, reported as expert code's level). ``skills`` is the old name of ``expert`` and still loads (with a
    warning)."""
    goal_fallback: bool = False
    """When no sampled macro of a coded sub-action reached its goal in every probe call, also probe the
    trusted one-call goal macro (`rlgpt.macro.control.goal_macro_code`, expert code such as
    ``yield from game.collect("stone")``) and keep it if it probes better (its source is ``expert`` in
    ``fast.json``, the summary and the report). Off by default: results are the model's own code and RL's;
    expert code is one flag away (``--set agents.api=expert --set agents.goal_fallback=true``) and is
    reported as such. Never at ``api: basic``."""
    critic_max_chars: int = 6000
    """Upper bound on the evaluation/probe/diagnostics text in the critic's prompt."""
    env_doc: str = "full"
    """What every role's prompt says about the game (the prompt-knowledge ablation, `ENV_DOC_LEVELS`):
    ``full``: crafter's rules and, with the task, its prerequisite chain computed from crafter's recipes
    (`rlgpt.agents.envdoc.requirement_lines`, and the slow prompt's instructions to follow it); ``rules``:
    the rules without the computed chain; ``none``: only the task name and the action list (the macro API
    reference stays: it is how code talks to the game). Under ``rules``/``none`` the slow agent's fallback
    for a reply that never validates learns the task by RL instead of taking the recipe graph
    (`rlgpt.agents.slow.decompose_or_fallback`), so no run gets recipe knowledge its prompts withheld."""
    examples: bool = True
    """Worked examples in the prompts: the fast agent's example macros and example reward, and the slow
    agent's example decomposition. False is the ablation (the output format is still stated)."""

    @property
    def probe_episode_seeds(self) -> tuple[int, ...]:
        """The world seeds of the probe episodes: `probe_seeds` shifted by `probe_seed_offset`."""
        return tuple(s + self.probe_seed_offset for s in self.probe_seeds)

    def __post_init__(self) -> None:
        if self.env_doc not in ENV_DOC_LEVELS:
            raise ConfigError(
                f"agents.env_doc must be one of {', '.join(ENV_DOC_LEVELS)}, got {self.env_doc!r}")
        if self.samples < 1:
            raise ConfigError(f"agents.samples must be >= 1, got {self.samples}")
        if self.repair_retries < 0:
            raise ConfigError(f"agents.repair_retries must be >= 0, got {self.repair_retries}")
        if self.probe_repair_retries < 0:
            raise ConfigError(f"agents.probe_repair_retries must be >= 0, got {self.probe_repair_retries}")
        if self.search_budget_s < 0:
            raise ConfigError(f"agents.search_budget_s must be >= 0, got {self.search_budget_s}")
        if not self.probe_seeds:
            raise ConfigError("agents.probe_seeds must list at least one seed")
        if self.probe_calls_per_episode < 1 or self.probe_max_steps < 1:
            raise ConfigError("agents.probe_calls_per_episode and agents.probe_max_steps must be >= 1")
        if self.temperature < 0:
            raise ConfigError(f"agents.temperature must be >= 0, got {self.temperature}")
        if self.code_max_tokens < 1 or self.json_max_tokens < 1 or self.slow_max_tokens < 0:
            raise ConfigError("agents.code_max_tokens and agents.json_max_tokens must be >= 1, "
                              "agents.slow_max_tokens >= 0 (0: the decomposition schema's bound)")
        # Imported here: the config module stays free of crafter.
        from rlgpt.macro.api import API_LEVELS, DEPRECATED_LEVELS

        if self.api in DEPRECATED_LEVELS:
            level = DEPRECATED_LEVELS[self.api]
            warnings.warn(f"agents.api={self.api!r} is deprecated: it means {level!r} now (the "
                          f"prerequisite-solving collect/place/craft); write agents.api={level}",
                          FutureWarning, stacklevel=2)
            self.api = level
        if self.api not in API_LEVELS:
            raise ConfigError(f"agents.api must be one of {', '.join(API_LEVELS)}, got {self.api!r}")


MODES = ("rlgpt", "ppo", "code")
"""`rlgpt run --mode`: the RL-GPT loop, plain PPO (no LLM), or the LLM's code as the whole policy (no RL)."""

EXECUTORS = ("local", "ray")
"""`rlgpt run --executor`: trainings in child processes here, or as tasks on a Ray cluster."""


@dataclass
class RayConfig:
    """Where and how trainings run with ``--executor ray`` (`rlgpt.run.ray_executor`)."""

    address: str | None = None
    """The cluster to join: ``auto`` (the one ``ray start`` began on this machine), ``HOST:PORT`` of its head,
    or None to start a private Ray instance inside this process."""
    num_cpus: float | None = None
    """CPUs one training job asks the scheduler for; None = its ``env.num_workers`` (Sample Factory's
    rollout worker processes; the learner shares their cores)."""
    num_gpus: float = 0.0
    """GPUs (a fraction shares one) one training job asks the scheduler for."""


@dataclass
class RunConfig:
    """Everything one ``rlgpt run`` needs: the loop's knobs plus the configs of what it drives."""

    task: str = "make_wood_pickaxe"
    """Crafter achievement(s) to reach, e.g. ``collect_wood`` or ``place_table+make_wood_pickaxe``."""
    mode: str = "rlgpt"
    """``rlgpt`` (the agents' loop), ``ppo`` (one training on the whole budget, no LLM) or ``code`` (the LLM
    writes the whole policy as one macro; no RL)."""
    steps: int = 200_000
    """Total primitive-step RL budget of the run, split evenly over the loop's iterations
    (``max_outer * max_inner``); each iteration's share must pay for its training and its validation
    evaluation (`eval_bound`), so `validate_run` refuses a budget that leaves an iteration nothing to
    train."""
    seed: int = 0
    """Seed for the policies, the environments and the LLM's sampling: `validate_run` derives the agents'
    and the LLM's sampling seeds from it (`derived_seed`), so runs of different seeds ask the model
    different questions (decompositions and code differ, not only the RL)."""
    run_dir: str | None = None
    """Where every iteration's files go; default ``runs/<task>-<mode>-seed<seed>``. Re-running the same
    command resumes this directory."""
    max_outer: int = 2
    """Outer iterations: times the slow agent (re-)decomposes the task."""
    max_inner: int = 2
    """Inner iterations per outer one: times the fast agent (re-)writes code and RL setup."""
    success_threshold: float = 0.8
    """Evaluation success at which the loop stops without asking the critic; above 1 no evaluation reaches
    it, so every iteration runs and the critic is asked after each (a fixed number of iterations)."""
    eval_episodes: int = 20
    """Episodes of each iteration's evaluation (and of ``--mode code``)."""
    eval_marks: tuple[int, ...] = (50_000, 100_000, 250_000, 500_000, 1_000_000)
    """Budget marks in the run's counted primitive steps (cumulative over its iterations, not per training):
    the training running when the run's count crosses a mark saves its policy there, and after the run each
    mark's policy is evaluated on test seeds at the task's episode length with `eval_episodes` episodes
    (``summary.json``: ``marks``, ``steps_to_success``). Marks above `steps` are ignored; a mark the run
    never reached (the loop stopped at its threshold) carries the reported policy's test result
    (`rlgpt.run.marks`). ``--set eval_marks=[]`` turns them off."""
    planner_min_chain: int = 6
    """Tasks whose prerequisite chain (crafter's recipes) is at least this long go through the task planner
    and the skill library; shorter ones run the loop directly."""
    skills_dir: str | None = None
    """The persistent skill library; None = ``$RLGPT_SKILLS_DIR`` or ``~/.cache/rlgpt/skills``."""
    skill_threshold: float = 0.2
    """Evaluation success a result needs to be stored in (or taken from) the skill library."""
    code_skills: bool = False
    """Share code skills through the skill library (`skills_dir`): each fast-agent prompt lists the stored
    code skills relevant to its sub-action, which its macros may call (``yield from skills.<name>(game)``);
    after the run, the kept model-written macros of its best iteration that reached their goal in at least
    `code_skill_min_goal_rate` of probe calls, and whose training met `skill_threshold`, are stored.
    ``summary.json``'s ``skill_library`` records the library read (path, version, hash) and what was
    stored. Off: the library's code skills are neither read nor written (a planner chain still links its
    own links' macros)."""
    code_skill_min_goal_rate: float = 0.8
    """Share of probe calls a model-written macro must reach its goal in to be stored as a code skill (by a
    run with `code_skills`, or by `rlgpt skills learn`)."""
    chain_starts: int = 16
    """Start states a planned chain's later subtask trains from: the planner plays the chain's earlier skills
    from fresh worlds and saves up to this many states where they all reached their goals
    (`rlgpt.run.chain.chain_start_pool`; its steps count against the budget as chain-prefix steps). 0 trains
    every subtask from fresh worlds. The chain's own evaluation always plays from fresh worlds."""
    chain_options: bool = True
    """A planned chain's later subtasks get the earlier links' trained policies as actions (options,
    `rlgpt.rl.options`): chosen, one plays its stored policy until its achievement count rises. Off: only
    primitives and the subtask's own macros."""
    job_attempts: int = 3
    """Times a training job is run before it counts as failed: a job whose process died (a worker, the OOM
    killer) or whose evaluation crashed is run again, resuming from its newest checkpoint (an evaluation
    crash after a full training only evaluates again). A failed job's steps still count as used."""
    ppo_progress: bool = False
    """``--mode ppo`` also trains on the progress reward (`TrainConfig.progress_reward`) over the task's
    prerequisite chain from crafter's recipes (`rlgpt.run.baselines.chain_goals`: the chain the slow agent's
    prompt states at ``agents.env_doc: full``, less the task's own targets), each paid once per episode as
    the loop pays its plan's goals. The baseline that tells what rlgpt's code adds beyond that reward
    (reported as ``chain`` among the rewards it trained on). Off: the task's sparse reward alone."""
    train_candidates: int = 1
    """Trainings one loop iteration runs on the same fast-agent reply (macros, reward, observation,
    horizon), each with its own RL seed (`candidate_seed`) in its own directory (``iter_N/train/`` for
    candidate 0, ``iter_N/train_cand_K/`` for the others); the iteration's training budget is split evenly
    across them and every candidate's steps are charged. The iteration keeps the candidate with the best
    validation success (ties: the lowest K). The Ray executor trains them at the same time (one Ray task
    each); the local executor one after another."""
    executor: str = "local"
    """Where trainings run: ``local`` (child processes of this one) or ``ray`` (tasks on a Ray cluster, see
    ``ray``; needs the ``ray`` extra). The LLM calls stay in this process either way."""
    ray: RayConfig = field(default_factory=RayConfig)
    """The Ray cluster and each job's resource request (``executor: ray``)."""
    wandb: bool = False
    """One W&B run per ``rlgpt run`` (offline unless ``WANDB_MODE`` says otherwise)."""
    wandb_project: str = "rlgpt"
    """W&B project name."""
    train: TrainConfig = field(default_factory=TrainConfig)
    """Settings of every training (env, ppo, macro step bound, checkpoints); `validate_run` gives it the
    run's task, seed and `steps_per_iteration`; run_dir and episode length are set per iteration by the
    loop. Its ``env.episode_length`` is the length of every evaluation episode of the run (and of
    ``--mode ppo``'s training); left unset, `validate_run` sets `RUN_EPISODE_LENGTH` (the Crafter benchmark
    task keeps its own)."""
    agents: AgentConfig = field(default_factory=AgentConfig)
    """The LLM agents' knobs."""
    llm: LLMConfig = field(default_factory=LLMConfig)
    """How to reach the model (``--llm embedded|URL``); the response cache defaults to ``RUN/llm_cache``, so
    ``llm.replay_only=true`` replays a finished run offline."""

    def resolved_run_dir(self) -> Path:
        """The run directory, derived from task, mode and seed when not given."""
        if self.run_dir:
            return Path(self.run_dir)
        return Path("runs") / f"{self.task.replace('+', '_')}-{self.mode}-seed{self.seed}"

    @property
    def iterations(self) -> int:
        """The most trainings the loop runs (``max_outer * max_inner``)."""
        return self.max_outer * self.max_inner

    def eval_length(self, task: str) -> int:
        """The episode length every reported evaluation of `task` plays: ``train.env.episode_length`` or
        the task's standard one; never a training's horizon."""
        from rlgpt.env_registry import get_env  # deferred: importing an env is not free

        return self.train.env.episode_length or get_env(self.train.env.kind).episode_length(task)

    def eval_bound(self, task: str) -> int:
        """The most primitive steps one validation evaluation of `task` can play (`eval_episodes` episodes
        of `eval_length`): what an iteration keeps back from its share before it trains."""
        return self.eval_episodes * self.eval_length(task)

    def iteration_budget(self, steps: int) -> int:
        """Primitive-step budget of one training when ``steps`` are split over the loop's iterations
        (``--mode ppo``: one training on all of them)."""
        return steps // (1 if self.mode == "ppo" else self.iterations)

    def budget_shortfall(self, steps: int, tasks: Sequence[str]) -> str | None:
        """Why `steps`, split over `tasks` (one loop each: the run's task, or a plan's links) and then over
        each loop's iterations, leave an iteration nothing to train after its validation evaluation, with
        the ``--steps`` that would do; None when every iteration trains. Such a run would plan and write
        code and train nothing, so both `validate_run` and the planner refuse it with this message."""
        share = steps // len(tasks)
        per_iteration = self.iteration_budget(share)
        kept_back = self.train_candidates * max(self.eval_bound(t) for t in tasks)
        if per_iteration > kept_back:
            return None
        split = f"the plan's {len(tasks)} subtasks {share} steps and " if len(tasks) > 1 else ""
        length = max(self.eval_length(t) for t in tasks)
        return (f"steps ({steps}) give {split}each of its {self.iterations} iterations {per_iteration}, "
                f"nothing left to train after its validation evaluation ({self.train_candidates} x "
                f"{self.eval_episodes} episodes x {length} steps kept back): raise --steps to at least "
                f"{len(tasks) * self.iterations * (kept_back + self.train.ppo.batch_size)}, or lower "
                f"eval_episodes or train.env.episode_length")

    def code_probe_bound(self) -> int:
        """The most steps ``--mode code`` charges: its probes, every candidate of its one macro (`samples` in
        each of the search's 1 + `probe_repair_retries` rounds, and the trusted goal macro) at
        `rlgpt.macro.probe.probe_step_bound`."""
        from rlgpt.macro.probe import probe_step_bound  # deferred: importing crafter is not free

        a = self.agents
        candidates = a.samples * (1 + a.probe_repair_retries) + 1  # rounds of samples + the goal macro
        return candidates * probe_step_bound(len(a.probe_seeds), a.probe_calls_per_episode,
                                             a.probe_warmup_steps, a.probe_max_steps)

    def mode_shortfall(self) -> str | None:
        """Why ``--steps`` cannot pay for the mode's work, with the ``--steps`` that would do; None when it
        can. Checked before any LLM call (`validate_run`): ``rlgpt`` needs every iteration to train after its
        validation evaluation (`budget_shortfall`), ``ppo`` one training batch, ``code`` its probes at their
        bound (`code_probe_bound`)."""
        if self.mode == "code":
            bound = self.code_probe_bound()
            if self.steps >= bound:
                return None
            a = self.agents
            candidates = a.samples * (1 + a.probe_repair_retries) + 1
            return (f"steps ({self.steps}) cannot pay for --mode code's probes: up to {bound} steps "
                    f"({candidates} candidates x {len(a.probe_seeds)} probe "
                    f"seeds x {a.probe_calls_per_episode} calls x {a.probe_warmup_steps + a.probe_max_steps} "
                    f"steps): raise --steps to at least {bound}, or lower agents.samples or "
                    f"agents.probe_max_steps")
        if self.steps_per_iteration < self.train.ppo.batch_size:
            need = self.train.ppo.batch_size * (1 if self.mode == "ppo" else self.iterations)
            what = ("--mode ppo's training" if self.mode == "ppo"
                    else f"each of the {self.iterations} iterations")
            return (f"steps ({self.steps}) must give {what} at least one training batch "
                    f"({self.train.ppo.batch_size} steps): raise --steps to at least {need}, or lower "
                    f"train.ppo.batch_size")
        return None

    @property
    def steps_per_iteration(self) -> int:
        """Primitive-step budget of one iteration's training on the whole run's budget."""
        return self.iteration_budget(self.steps)


RUN_EPISODE_LENGTH = 1000
"""The evaluation episode length of ``rlgpt run`` when ``train.env.episode_length`` is unset (as
``configs/run.yaml`` sets it): crafter's own 10,000 steps at 20 episodes would keep back 200,000 steps for
each iteration's evaluation, more than a run's whole default budget. The Crafter benchmark task
(``--task crafter``) keeps crafter's length."""

SEED_STRIDE = 1000
"""Sampling seeds of runs seeded ``s`` start at ``s * SEED_STRIDE``: an agent's candidate ``i`` samples with
``seed + i``, so adjacent run seeds must not share the seeds of their candidates."""


CANDIDATE_SEED_STRIDE = 10_000
"""Training seeds of an iteration's candidate ``k >= 1`` (`candidate_seed`) start at ``k`` times this: run
seeds stay below it (`rlgpt.rl.evaluate.MAX_RUN_SEED`, the same number), so no candidate trains with
another run's seed or another candidate's."""
MAX_TRAIN_CANDIDATES = 64
"""The most `RunConfig.train_candidates` (a bound on a typo, not on the method)."""


def candidate_seed(run_seed: int, k: int) -> int:
    """The RL seed of candidate `k` of a run seeded `run_seed`: the run's seed for ``k = 0`` (a run of one
    candidate trains as before), else ``run_seed + k * CANDIDATE_SEED_STRIDE``, distinct for every
    (run seed, k) pair while run seeds stay below the stride."""
    return run_seed + k * CANDIDATE_SEED_STRIDE


def derived_seed(own: int, run_seed: int) -> int:
    """A sampling seed that follows the run's ``--seed``: ``own`` when set (non-zero), else
    ``run_seed * SEED_STRIDE``. Deriving it again gives the same seed; run seed 0 keeps 0."""
    return own if own else run_seed * SEED_STRIDE


def validate_run(cfg: RunConfig) -> RunConfig:
    """Check a RunConfig's value ranges (and those of the configs it holds) and return the validated run:
    a new RunConfig (``cfg`` is left as it was) whose training has the run's task, seed and
    `steps_per_iteration`, whose agents and LLM sample with seeds derived from the run's (`derived_seed`),
    and whose LLM response cache defaults to ``RUN/llm_cache``. Validating it again changes nothing."""
    checks = [
        (cfg.mode in MODES, f"mode must be one of {', '.join(MODES)}, got {cfg.mode!r}"),
        (cfg.max_outer >= 1 and cfg.max_inner >= 1, "max_outer and max_inner must be >= 1"),
        (cfg.success_threshold >= 0, "success_threshold must be >= 0 (above 1: never stop early)"),
        (0 <= cfg.skill_threshold <= 1, "skill_threshold must be in [0, 1]"),
        (0 <= cfg.code_skill_min_goal_rate <= 1, "code_skill_min_goal_rate must be in [0, 1]"),
        (cfg.eval_episodes >= 1, "eval_episodes must be >= 1"),
        (cfg.job_attempts >= 1, "job_attempts must be >= 1"),
        (1 <= cfg.train_candidates <= MAX_TRAIN_CANDIDATES,
         f"train_candidates must be in [1, {MAX_TRAIN_CANDIDATES}], got {cfg.train_candidates}"),
        (cfg.train_candidates == 1 or 0 <= cfg.seed < CANDIDATE_SEED_STRIDE,
         f"seed must be in [0, {CANDIDATE_SEED_STRIDE}) with train_candidates > 1"),
        (all(m > 0 for m in cfg.eval_marks), "eval_marks must be > 0"),
        (cfg.planner_min_chain >= 1, "planner_min_chain must be >= 1"),
        (cfg.chain_starts >= 0, "chain_starts must be >= 0"),
        (cfg.executor in EXECUTORS, f"executor must be one of {', '.join(EXECUTORS)}, got {cfg.executor!r}"),
        (cfg.ray.num_cpus is None or cfg.ray.num_cpus > 0, "ray.num_cpus must be > 0"),
        (cfg.ray.num_gpus >= 0, "ray.num_gpus must be >= 0"),
    ]
    for ok, message in checks:
        if not ok:
            raise ConfigError(message)
    shortfall = cfg.mode_shortfall()
    if shortfall:
        raise ConfigError(shortfall)
    from rlgpt.env_registry import get_env
    from rlgpt.envs.tasks import BENCHMARK_TASK  # deferred: importing crafter is not free

    train = validate(dataclasses.replace(cfg.train, task=cfg.task, steps=max(cfg.steps_per_iteration, 1),
                                         seed=cfg.seed))
    if not get_env(train.env.kind).macros and cfg.mode != "ppo":
        raise ConfigError(f"env {train.env.kind} has no macro game API yet, so the LLM loop and code mode "
                          "cannot run on it: use --mode ppo")
    crafter_task = train.env.kind == "crafter" and cfg.task.strip() != BENCHMARK_TASK
    if train.env.episode_length is None and crafter_task:
        train = validate(dataclasses.replace(train, env=dataclasses.replace(
            train.env, episode_length=RUN_EPISODE_LENGTH)))
    cfg = dataclasses.replace(cfg, train=train)
    shortfall = cfg.budget_shortfall(cfg.steps, [cfg.task]) if cfg.mode == "rlgpt" else None
    if shortfall:
        raise ConfigError(shortfall)
    try:
        agents = AgentConfig(**{**dataclasses.asdict(cfg.agents),
                                "seed": derived_seed(cfg.agents.seed, cfg.seed),
                                "probe_seed_offset": derived_seed(cfg.agents.probe_seed_offset, cfg.seed)})
        llm = LLMConfig(**{**dataclasses.asdict(cfg.llm), "seed": derived_seed(cfg.llm.seed, cfg.seed),
                           "cache_dir": cfg.llm.cache_dir or str(cfg.resolved_run_dir() / "llm_cache")})
    except ValueError as e:
        raise ConfigError(str(e)) from None
    return dataclasses.replace(cfg, train=train, agents=agents, llm=llm)


def load_run_config(path: str | Path | None = None, overrides: list[str] | None = None) -> RunConfig:
    """Build a RunConfig from defaults, a YAML file, then ``key=value`` overrides (``train.ppo.rollout=32``,
    ``agents.samples=1``, ``llm.base_url=...``)."""
    cfg = RunConfig()
    if path is not None:
        _apply(cfg, read_config_file(Path(path)))
    for item in overrides or []:
        _apply(cfg, _parse_override(item))
    return validate_run(cfg)
