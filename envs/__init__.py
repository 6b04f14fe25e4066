"""Environments: Crafter (`CrafterEnv`, symbolic or pixels) and Crafter tasks (`TaskEnv`, `make_task_env`)."""

from .crafter import ACTION_NAMES, ID_NAMES, N_IDS, OBS_MODES, VECTOR_FIELDS, CrafterEnv
from .tasks import (
    ACHIEVEMENTS,
    DEFAULT_EPISODE_LENGTH,
    TaskEnv,
    TaskSpec,
    make_task_env,
)

__all__ = [
    "ACHIEVEMENTS",
    "ACTION_NAMES",
    "DEFAULT_EPISODE_LENGTH",
    "ID_NAMES",
    "N_IDS",
    "OBS_MODES",
    "VECTOR_FIELDS",
    "CrafterEnv",
    "TaskEnv",
    "TaskSpec",
    "make_task_env",
]
