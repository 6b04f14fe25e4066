"""The environments rlgpt trains on, by name: ``--env crafter | minedojo`` (`rlgpt.config.EnvConfig.kind`).

An environment is an `EnvKind`: its tasks, how to build a task env (which brings its observation and action
spaces), whether it can run here, whether macros (the code-as-policy game API) and the batch backend exist
for it, and the rules text the prompts give the LLM agents. Everything rlgpt does with an env goes through
`get_env`; registering another is one call (``docs``: "Adding an environment")::

    from rlgpt.env_registry import EnvKind, register_env_kind

    register_env_kind(EnvKind(
        name="myenv", summary="...", tasks=lambda: ("reach_goal",), check_task=..., episode_length=...,
        make_task_env=lambda task, obs_mode, episode_length: MyTaskEnv(task, episode_length),
        rules=lambda: "The rules of my game ..."))

A task env is a gymnasium env with ``Discrete`` actions and a dict observation whose ``info`` carries
``success`` (the task reached) and ``achievements`` (name -> count); `rlgpt.rl.sf_env` registers its Sample
Factory env as ``<name>_<task>`` and puts the per-env wrappers around it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rlgpt.errors import RlgptError

DEFAULT_ENV = "crafter"
"""The environment of a config that names none."""


class EnvUnavailable(RlgptError, RuntimeError):
    """An environment cannot run on this machine (a package or runtime is missing); says what and the fix."""


@dataclass(frozen=True)
class EnvKind:
    """One environment rlgpt can train on."""

    name: str
    """Its name on the command line (``--env``) and in ``env.kind``; its Sample Factory env names are
    ``<name>_<task>``."""
    summary: str
    """One line for ``--help`` and errors."""
    tasks: Callable[[], tuple[str, ...]]
    """Its task names (Crafter also joins achievements with ``+``)."""
    check_task: Callable[[str], None]
    """Raises ValueError naming the valid tasks unless the name is a task of this env."""
    episode_length: Callable[[str], int]
    """A task's default episode length, in primitive steps."""
    make_task_env: Callable[[str, str, int | None], Any]
    """``(task, obs_mode, episode_length)`` -> the task env (episode_length None: the task's default)."""
    rules: Callable[[], str]
    """The game's rules as the prompts give them to the LLM agents."""
    check_available: Callable[[], None] = lambda: None
    """Raises `EnvUnavailable` (one line: what is missing, and the fix) where the env cannot run here; runs
    before anything slow."""
    macros: bool = False
    """Macros run on it: `rlgpt.macro.api.GameAPI` reads its games (today Crafter's); without them a run
    trains on primitives (``--mode ppo``), and macros, the LLM loop and code mode are a ConfigError."""
    batch_backend: bool = False
    """The compiled batch backend (`rlgpt.rl.sf_batch`) steps its games; without it, ``env.backend=gym``."""


_KINDS: dict[str, EnvKind] = {}


def register_env_kind(kind: EnvKind) -> EnvKind:
    """Make ``kind`` available as ``--env <kind.name>`` (a name registered again is replaced)."""
    if not kind.name.isidentifier():
        raise ValueError(f"an env name must be an identifier, got {kind.name!r}")
    _KINDS[kind.name] = kind
    return kind


def env_names() -> tuple[str, ...]:
    """The registered environments, in registration order."""
    return tuple(_KINDS)


def get_env(name: str) -> EnvKind:
    """The environment ``name``; ValueError listing the registered ones otherwise."""
    try:
        return _KINDS[name]
    except KeyError:
        raise ValueError(f"unknown env {name!r}; choose one of {', '.join(_KINDS)}") from None


def sf_env_name(kind: str, task: str) -> str:
    """Sample Factory's name of ``task`` of env ``kind``, e.g. ``crafter_collect_wood``."""
    return f"{kind}_{task}"


def parse_sf_env_name(env_name: str) -> tuple[str, str]:
    """Inverse of :func:`sf_env_name`: ``(kind, task)``."""
    for kind in sorted(_KINDS, key=len, reverse=True):
        if env_name.startswith(f"{kind}_"):
            return kind, env_name[len(kind) + 1 :]
    raise ValueError(f"not an rlgpt env name: {env_name!r} (expected <env>_<task>, env one of "
                     f"{', '.join(_KINDS)})")


# -- Crafter ------------------------------------------------------------------------------------------------


def _crafter_check(task: str) -> None:
    from rlgpt.envs.tasks import TaskSpec

    TaskSpec.from_name(task)


def _crafter_length(task: str) -> int:
    from rlgpt.envs.tasks import TaskSpec

    return TaskSpec.from_name(task).episode_length


def _crafter_env(task: str, obs_mode: str, episode_length: int | None) -> Any:
    from rlgpt.envs.tasks import TaskSpec, make_task_env

    return make_task_env(TaskSpec.from_name(task), obs_mode=obs_mode, episode_length=episode_length)


def _crafter_tasks() -> tuple[str, ...]:
    from rlgpt.envs.tasks import ACHIEVEMENTS, BENCHMARK_TASK

    return (*ACHIEVEMENTS, BENCHMARK_TASK)


def _crafter_rules() -> str:
    from rlgpt.agents.envdoc import crafter_rules

    return crafter_rules()


register_env_kind(EnvKind(
    name="crafter", summary="Crafter (Hafner 2021): a 2-D Minecraft, symbolic or 64x64 pixels",
    tasks=_crafter_tasks, check_task=_crafter_check, episode_length=_crafter_length,
    make_task_env=_crafter_env, rules=_crafter_rules, macros=True, batch_backend=True,
))


# -- MineDojo ----------------------------------------------------------------------------------------------


def _minedojo_check(task: str) -> None:
    from rlgpt.envs.minedojo import get_task

    try:
        get_task(task)
    except KeyError as e:
        raise ValueError(e.args[0]) from None


def _minedojo_length(task: str) -> int:
    from rlgpt.envs.minedojo import get_task

    return get_task(task).episode_length


def _minedojo_env(task: str, obs_mode: str, episode_length: int | None) -> Any:
    import dataclasses

    from rlgpt.envs.minedojo import MineDojoTaskEnv, get_task

    spec = get_task(task)
    if episode_length:
        spec = dataclasses.replace(spec, episode_length=episode_length)
    # symbolic: inventory, position, facing, vitals and nearby tables; pixels: the RGB frame as well.
    return MineDojoTaskEnv(spec, include_rgb=obs_mode == "pixels")


def _minedojo_available() -> None:
    from rlgpt.envs.minedojo import MineDojoUnavailable, check_minedojo_prerequisites

    try:
        check_minedojo_prerequisites()
    except MineDojoUnavailable as e:
        raise EnvUnavailable(f"--env minedojo: {e}") from None


def _minedojo_rules() -> str:
    from rlgpt.envs.minedojo import ACTION_NAMES, MINEDOJO_TASKS

    tasks = "\n".join(f"- {t.name}: {t.description}" for t in MINEDOJO_TASKS.values())
    return ("Minecraft (MineDojo). The agent acts one discrete action per step: " + ", ".join(ACTION_NAMES)
            + ". Crafting needs the ingredients in the inventory (and a crafting table or furnace nearby for "
            "the table and smelting recipes). A task succeeds when its items were gained since the episode "
            "started. Tasks:\n" + tasks)


def _minedojo_tasks() -> tuple[str, ...]:
    from rlgpt.envs.minedojo import MINEDOJO_TASKS

    return tuple(MINEDOJO_TASKS)


register_env_kind(EnvKind(
    name="minedojo", summary="MineDojo (Minecraft); needs the minedojo package and a JDK 8",
    tasks=_minedojo_tasks, check_task=_minedojo_check, episode_length=_minedojo_length,
    make_task_env=_minedojo_env, rules=_minedojo_rules, check_available=_minedojo_available,
))
