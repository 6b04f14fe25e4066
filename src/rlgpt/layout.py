"""Every file name of rlgpt's directories, in one place so that every module agrees on them.

A run directory of ``rlgpt run`` (``RUN/``)::

    run.yaml                 the run's config (`RunConfig`)
    .lock                    held (flock) by the process running it: one run per directory at a time
    phases.jsonl             one line per finished phase with its wall time
    llm_cache/               every request (prompt) and reply, one JSON file each
    llm_logs/                the embedded model's llama.cpp log (server-<n>.log per start, tokenizer.log)
    summary.json             the result record: best iteration, success, budget used
    wandb_id.txt             the W&B run id a resumed run continues
    iter_000/slow.json       the decomposition in effect
    iter_000/fast.json       the fast agent's reply, every macro candidate with its attempts and probe
    iter_000/macros.yaml     the kept macros;  reward.py: the dense reward;  probes.json: kept macros' probes
    iter_000/train/          a training run directory (below); with ``train_candidates`` > 1 candidate 0's,
    iter_000/train_cand_1/   ... and candidate K's (`candidate_dir`)
    iter_000/training.json   the training's outcome and its evaluation (was ``eval.json``; still read); with
                             several candidates the selected one's, and every candidate's in ``candidates``
    iter_000/train_job.json  the (selected candidate's) training job, evaluated again on test seeds
    iter_000/critic.json     the critic's feedback and prompt
    plan.json                the planner's chain of subtasks (long-horizon tasks)
    sub_00_<task>/           a subtask: skill.json (the skill chosen) and, when trained, a loop's files;
                             start_pool.json + start_pool.pkl: the states its earlier links reach
    chain.json               the chain played in one episode and its evaluation
    ppo/, code/              the baselines' one iteration (train/, training.json; fast.json)

A training run directory (``rlgpt train``, ``iter_N/train/``) is Sample Factory's experiment directory
(``checkpoint_p0/``, ``config.json``, ``.summary/``) plus ``rlgpt.yaml``, ``metrics.csv``,
``learning_curves.png``, ``eval/eval.json`` + ``eval/eval_success.png`` + ``eval/eval_crafter.png`` (the
Crafter paper's per-achievement chart with the score) (`rlgpt eval`), and, when the
executor runs it, ``job.json``, ``result.json``, ``trained.json`` and ``attempts.json`` (and, on Ray,
``ray_worker.json``), and ``marks/<steps>/`` for each budget mark it crossed (`mark_dir`: the policy at
that mark, ``mark.json``, and after the run its test evaluation ``test.json``).

A sweep directory (``rlgpt sweep --out OUT``)::

    <task>-<mode>-s<seed>/   one ordinary run directory per cell (above)
    sweep.json               the cells, each one's state (done, failed, error) and the report's files
    .sweep.lock              held (flock) by the sweep running it
    report/                  `rlgpt report` over the done cells (below)

`rlgpt report --out OUT`::

    results.md               Table 2, steps to success, steps by kind, the Crafter section, the runs
    results.png              Table 2 as an image
    success_vs_steps.png     test success vs primitive steps from the budget marks (when runs have them)
    iterations.png           each run's validation success per loop iteration
    crafter.png              the Crafter paper's per-achievement chart (runs of the benchmark task)
    wandb/                   with --wandb: the W&B run of the same tables and images

A skill library (`rlgpt.run.skills`)::

    <task>/<entry id>/skill.json     task, success_rate, steps, provenance, macros
    <task>/<entry id>/policy/        config.json + the newest checkpoint of the training
    <task>/.<entry id>.tmp/          an entry being written (readers skip it)
    code_skills.json                 code skills (model-written macros that reached their goals): the
                                     library's version, content hash and one versioned entry per skill
    curriculum.json                  `rlgpt skills learn`'s attempt per achievement (a resumed run skips)
    learn/                           its default run directory (learn/<achievement>.json: candidates)
    .lock                            writers hold it (flock) while adding
"""

from __future__ import annotations

from pathlib import Path

# -- a run directory (`rlgpt run`) ------------------------------------------------------------------
RUN_YAML = "run.yaml"
RUN_LOCK = ".lock"
"""Held (fcntl) by the process running the directory; a second `rlgpt run` on it fails at once."""
PHASES_JSONL = "phases.jsonl"
"""One line per finished phase: task, iteration, phase and its wall time (`LoopProgress`)."""
LLM_CACHE = "llm_cache"
LLM_LOGS = "llm_logs"
"""The embedded model's llama.cpp output (`rlgpt.llm.isolated.IsolatedBackend`'s ``log_dir``)."""
SUMMARY_JSON = "summary.json"
WANDB_ID = "wandb_id.txt"
SLOW_JSON = "slow.json"
FAST_JSON = "fast.json"
MACROS_YAML = "macros.yaml"
REWARD_PY = "reward.py"
PROBES_JSON = "probes.json"
TRAIN_DIR = "train"
CANDIDATE_DIR = "train_cand_{k}"
"""Candidate K's (K >= 1) training run directory in an iteration (`candidate_dir`)."""
TRAINING_JSON = "training.json"
"""An iteration's training outcome and evaluation (`rlgpt.run.records.job_record`)."""
LEGACY_TRAINING_JSON = "eval.json"
"""What `TRAINING_JSON` was called before; read (never written) so older run directories resume."""
TRAIN_JOB_JSON = "train_job.json"
"""An iteration's `TrainJob`, kept so that the selected iteration can be evaluated again on test seeds."""
TEST_JSON = "test.json"
"""The selected iteration's final evaluation on test seeds (`rlgpt.run.records.job_record`)."""
CRITIC_JSON = "critic.json"
PLAN_JSON = "plan.json"
CHAIN_JSON = "chain.json"
SKILL_CHOICE_JSON = "skill.json"
"""A planner subtask's chosen skill (where it came from, the steps it cost)."""
START_POOL_JSON = "start_pool.json"
"""A chain subtask's start-state record (``pool`` file, steps played, states reached)."""
START_POOL_FILE = "start_pool.pkl"
"""The saved start states themselves (`rlgpt.macro.prefix.save_pool`)."""
PPO_DIR = "ppo"
CODE_DIR = "code"
TABLE_MD = "results.md"
TABLE_PNG = "results.png"
CURVES_PNG = "iterations.png"
"""`rlgpt report`'s per-iteration (validation) success of each run."""
MARKS_PNG = "success_vs_steps.png"
"""`rlgpt report`'s test success vs primitive steps per task, one line per mode, from the budget marks."""
CRAFTER_PNG = "crafter.png"
"""`rlgpt report`'s Crafter paper per-achievement chart with the score (runs of the benchmark task)."""
SWEEP_JSON = "sweep.json"
SWEEP_LOCK = ".sweep.lock"
REPORT_DIR = "report"

# -- a training run directory (`rlgpt train`, ``iter_N/train/``) -------------------------------------------
RLGPT_CONFIG = "rlgpt.yaml"
SF_CONFIG = "config.json"
METRICS_CSV = "metrics.csv"
LEARNING_CURVES_PNG = "learning_curves.png"
SF_LOG = "sf_log.txt"
EVAL_DIR = "eval"
EVAL_JSON = "eval.json"
"""`rlgpt eval`'s report, inside `EVAL_DIR` (not an iteration's `TRAINING_JSON`)."""
EVAL_PNG = "eval_success.png"
EVAL_CRAFTER_PNG = "eval_crafter.png"
"""The Crafter paper's per-achievement chart of an evaluation, with its Crafter score."""
WORKER_MARKERS = ".workers"
"""Per-env-worker markers of the running macro (`rlgpt.rl.macro_marker`); removed when the run ends."""
JOB_JSON = "job.json"
RESULT_JSON = "result.json"
JOB_ERROR_TXT = "error.txt"
"""The traceback of a training job that raised (the console gets one line naming this file)."""
TRAINED_JSON = "trained.json"
"""Written once a job's training finished: an attempt after an evaluation crash only evaluates again."""
ATTEMPTS_JSON = "attempts.json"
"""The executor's earlier attempts of a job (each failed child: its error and the steps it trained)."""
RAY_WORKER_JSON = "ray_worker.json"
"""The Ray worker running the job's current attempt (pid, node) with ``--executor ray``."""
MARKS_DIR = "marks"
"""A training's budget-mark policy copies (`mark_dir`), each an evaluable run directory of its own."""
MARK_RECORD_JSON = "mark.json"
"""Written beside a mark's copy when it is saved: the mark, the training's own and the run's step counts."""

# -- a skill library ------------------------------------------------------------------------------------
SKILL_JSON = "skill.json"
POLICY_DIR = "policy"
LIBRARY_LOCK = ".lock"
CODE_SKILLS_JSON = "code_skills.json"
"""The library's code skills (`rlgpt.run.skills.CodeLibrary`)."""
CURRICULUM_JSON = "curriculum.json"
"""`rlgpt skills learn`'s record: one attempt per achievement (`rlgpt.run.curriculum`)."""
LEARN_DIR = "learn"
"""`rlgpt skills learn`'s default run directory in the library, and the folder of its candidates (one
``<achievement>.json`` each) in any run directory."""


def iteration_dir(run_dir: Path, index: int) -> Path:
    """The directory of the loop's iteration `index`."""
    return run_dir / f"iter_{index:03d}"


def candidate_dir(it_dir: Path, k: int) -> Path:
    """The training run directory of an iteration's candidate `k` (`RunConfig.train_candidates`):
    `TRAIN_DIR` for candidate 0 (a run of one candidate is laid out as before), ``train_cand_K`` for
    K >= 1."""
    return it_dir / (TRAIN_DIR if k == 0 else CANDIDATE_DIR.format(k=k))


def subtask_dir(run_dir: Path, index: int, task: str) -> Path:
    """The directory of the planner's subtask `index`."""
    return run_dir / f"sub_{index:02d}_{task}"


def mark_dir(train_dir: Path, mark: int) -> Path:
    """Where a training saves its policy at budget mark `mark` (run steps): ``config.json`` (Sample
    Factory's), ``checkpoint_p0/checkpoint_*.pth``, `MARK_RECORD_JSON`; its test evaluation adds
    `TEST_JSON` and the executor's ``job.json``/``result.json``/``attempts.json``."""
    return train_dir / MARKS_DIR / str(mark)


def training_record(it_dir: Path) -> Path:
    """An iteration's `TRAINING_JSON`, or its `LEGACY_TRAINING_JSON` when only that one exists."""
    legacy = it_dir / LEGACY_TRAINING_JSON
    current = it_dir / TRAINING_JSON
    return legacy if legacy.is_file() and not current.is_file() else current
