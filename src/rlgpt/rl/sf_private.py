"""Every private Sample Factory interface rlgpt uses, each with the reason no public one does the job.

Sample Factory 2.1.1 (pinned: `rlgpt.rl.learner.SF_VERSION`) has public interfaces for configuring,
registering envs and models and observing a run (``AlgoObserver``, ``register_env``, ``global_model_factory``,
``make_runner``); the rest of rlgpt uses only those. What it lacks is below, so that a Sample Factory upgrade
has one module to check (plus the learner methods `rlgpt.rl.learner.SMDPLearner` overrides, listed last).
"""

from __future__ import annotations

from typing import Any


def stop_training(runner: Any, failed: bool = False) -> None:
    """Stop a run from the trainer's event loop the normal way (last checkpoint, every component told).

    Private ``Runner._stop_training``: the only way to stop besides Ctrl-C (``stop_at_success`` and a dead
    worker, `rlgpt.rl.worker_watch.WorkerWatch`, both need it)."""
    runner._stop_training(failed=failed)


def report_summaries(runner: Any) -> None:
    """Write the run's summaries (TensorBoard, W&B, metrics.csv through the observers) now.

    Private ``Runner._report_experiment_summaries``: Sample Factory reports on a timer only, so the last
    point of a training would be lost without it (`rlgpt.rl.train`)."""
    runner._report_experiment_summaries()


def component_stopped(runner: Any, object_id: str) -> None:
    """Count a component the runner cannot see stop as stopped.

    Private ``Runner._component_stopped``: a dead learner's batcher thread never reports, and the runner
    would wait for it forever (`rlgpt.rl.worker_watch.WorkerWatch`)."""
    runner._component_stopped(object_id, {})


def add_policy_msg_handler(runner: Any, key: str, handler: Any) -> None:
    """Call ``handler(runner, msg)`` for every learner message carrying ``key``.

    The public ``Runner.register_policy_msg_handler`` stores the bare function where 2.1.1 iterates a list,
    so the handler list (``Runner.policy_msg_handlers``) is appended to directly."""
    runner.policy_msg_handlers.setdefault(key, []).append(handler)


def replace_learner(learner_cls: type) -> None:
    """Make Sample Factory build ``learner_cls`` for every policy (in the trainer, before ``make_runner``).

    Sample Factory has no learner factory: its ``LearnerWorker`` constructs ``learner_worker.Learner`` by
    name (in the trainer process, then pickles it into the learner process), so the name is replaced.
    `rlgpt.rl.learner.SMDPLearner` also overrides the private ``Learner._prepare_batch`` (GAE over macro
    calls of k steps), ``_get_checkpoint_dict`` and ``_load_state`` (its own state in checkpoints)."""
    from sample_factory.algo.learning import learner_worker

    learner_worker.Learner = learner_cls
