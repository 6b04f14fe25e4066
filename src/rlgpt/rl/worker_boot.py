"""What every Sample Factory child process of a training sets up before it does anything else.

Nothing happens at import: the trainer calls :func:`boot_trainer` before it starts Sample Factory, and
every child calls :func:`boot_worker` while it unpickles the env factory (`rlgpt.rl.sf_env.SFEnvFactory`),
which Sample Factory ships to each process it spawns (learner, inference, rollout workers) as part of
its global context, before the process's own work starts.
"""

from __future__ import annotations

import logging
import logging.handlers
import os
import sys
import warnings

from rlgpt.procs import die_with_parent
from rlgpt.rl.checkpoint import install_allow_list
from rlgpt.rl.worker_memory import is_sf_child_process

SF_CONSOLE_LEVEL_ENV = "RLGPT_SF_CONSOLE_LEVEL"
"""Sample Factory's console log level (its console handler is module-level in every process it spawns);
unset: `QUIET_LEVEL`. Its log file (``sf_log.txt`` in the training directory) gets every level."""
QUIET_LEVEL = "ERROR"
"""Sample Factory's console level without ``--verbose``: its warnings ("No checkpoints found", "Saved
parameter configuration ... not found!") describe a normal start, and go to its log file only."""
SF_LOG_FORMAT = "[%(asctime)s][%(process)05d] %(message)s"
"""The format of Sample Factory's own file handler (`sample_factory.utils.utils.init_file_logger`)."""
TRAINER_PID_ENV = "RLGPT_TRAINER_PID"
"""The trainer's pid, inherited by every Sample Factory child it spawns (see `die_with_parent`)."""


def apply_console_level() -> None:
    """Set Sample Factory's console log level in this process from ``RLGPT_SF_CONSOLE_LEVEL`` (unset:
    `QUIET_LEVEL`)."""
    from sample_factory.utils import utils as sf_utils

    sf_utils.stream_handler.setLevel(os.environ.get(SF_CONSOLE_LEVEL_ENV) or QUIET_LEVEL)


def hold_sf_log() -> logging.handlers.MemoryHandler:
    """Keep Sample Factory's log records of this process until `sf_log_to_file` names their file: the
    ones logged before the training directory exists (its config parse warns there) included."""
    from sample_factory.utils.utils import log

    _drop_handlers(log, logging.handlers.MemoryHandler)  # an earlier training's that failed before its file
    held = logging.handlers.MemoryHandler(capacity=100_000, flushLevel=logging.CRITICAL + 1)
    log.addHandler(held)
    return held


def sf_log_to_file(path: os.PathLike[str] | str, held: logging.handlers.MemoryHandler) -> None:
    """Send Sample Factory's log of this process to `path` (appending; what `held` kept first), as its own
    file handler would (which, finding this one, adds none)."""
    from sample_factory.utils.utils import log

    _drop_handlers(log, logging.FileHandler)  # an earlier training's in this process: its own file
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter(SF_LOG_FORMAT))
    held.setTarget(handler)
    held.flush()
    log.removeHandler(held)
    held.close()
    log.addHandler(handler)


def quiet_known_warnings() -> None:
    """Silence the warnings Sample Factory 2.1.1 triggers on every run, which say nothing about the run."""
    # Its learner logs `float(loss)` of tensors that require grad.
    warnings.filterwarnings("ignore", message="Converting a tensor with requires_grad=True to a scalar")
    # It reads num_agents/is_multiagent through its own gymnasium wrappers around a batch env
    # (`rlgpt.rl.sf_batch`), which gymnasium 0.29 answers with a deprecation warning per lookup.
    warnings.filterwarnings("ignore", message=r".*WARN: env\.(num_agents|is_multiagent) to get variables")


def sf_child_dies_with_trainer() -> None:
    """In a Sample Factory child process, ask Linux to SIGKILL it when the trainer process dies.

    Without this, a trainer killed with SIGKILL (or any signal it does not handle) leaves its rollout,
    inference and learner processes running as orphans that keep burning the CPU. Only processes started
    with multiprocessing's spawn method (Sample Factory's) are affected; a no-op in the trainer itself and
    on platforms without ``prctl``.
    """
    if not is_sf_child_process() or not sys.platform.startswith("linux"):
        return
    # The trainer says who it is: a child whose trainer died before this call would otherwise take the
    # process it was re-parented to for its trainer and live on as an orphan.
    trainer = int(os.environ.get(TRAINER_PID_ENV) or os.getppid())
    die_with_parent()
    if os.getppid() != trainer:  # the trainer died before the request took effect
        os._exit(1)


def _drop_handlers(log: logging.Logger, kind: type[logging.Handler]) -> None:
    for handler in [h for h in log.handlers if isinstance(h, kind)]:
        log.removeHandler(handler)
        handler.close()


_USER_CONSOLE_LEVEL = os.environ.get(SF_CONSOLE_LEVEL_ENV)
"""``RLGPT_SF_CONSOLE_LEVEL`` as the user set it when this process started (the variable itself is then
rewritten per training, for its children: an earlier training's level in this process must not stick)."""


def boot_trainer(verbose: bool) -> None:
    """In the trainer, before Sample Factory starts: the console level (``verbose``: its DEBUG lines, else
    errors only, unless the user's ``RLGPT_SF_CONSOLE_LEVEL`` says) and the pid its children die with."""
    os.environ[SF_CONSOLE_LEVEL_ENV] = "DEBUG" if verbose else (_USER_CONSOLE_LEVEL or QUIET_LEVEL)
    os.environ[TRAINER_PID_ENV] = str(os.getpid())
    apply_console_level()
    quiet_known_warnings()
    install_allow_list()


def boot_worker() -> None:
    """In a Sample Factory child: die with the trainer, the trainer's console level, the warnings filter
    and the checkpoint allow-list (the learner loads checkpoints to resume)."""
    sf_child_dies_with_trainer()
    apply_console_level()
    quiet_known_warnings()
    install_allow_list()
