"""Evaluation: one episode runner for every kind of policy, and the evaluation of a trained run.

`play_episodes` plays episodes on given envs (several in lockstep, so that a network's forward pass is
batched) with an `EpisodePolicy`: a small adapter that picks actions. Three adapters exist:
`CheckpointPolicy` (a trained run's network, `evaluate`), `rlgpt.run.baselines.MacroPolicy` (one macro as the
whole policy, ``--mode code``) and `rlgpt.run.chain.ChainPolicy` (a chain of library skills). Every mode's
episodes are seeded by `eval_seed`, traced, and summed up (`summarize`: success, achievements, Crafter
score, steps, macro and option statistics) alike.

`evaluate` rebuilds the policy from the run's saved Sample Factory config and newest checkpoint (loaded with
the safe unpickler, `rlgpt.rl.stored_policy.StoredPolicy`) and plays it in-process on fresh environments.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

import gymnasium
import numpy as np
import torch

from rlgpt import layout, rundir
from rlgpt.envs.tasks import ACHIEVEMENTS
from rlgpt.rl.checkpoint import EvalError
from rlgpt.rl.score import PAPER_SCORES_1M, crafter_score, percent_rates, success_measure
from rlgpt.rl.sf_env import make_gym_env
from rlgpt.rl.stored_policy import StoredPolicy
from rlgpt.rl.worker_config import worker_config
from rlgpt.tracking import log_scalars, read_curve

TRACE_STEPS = 8
"""Actions kept per failed episode's trace."""
TRACE_EPISODES = 5
"""Failed episodes traced per evaluation."""
# Evaluation envs are seeded far from the training ones (SF seeds training env i with i, prefix pools and
# probes use their own bases well below these). Two disjoint splits: "validation" episodes are what the
# loop may look at (success-threshold stop, best-iteration choice); "test" episodes are played once, by the
# final evaluation of the selected policy, and are what summary.json and the report show.
VALIDATION_SEED_BASE = 10_000_000
"""First seed of the validation split."""
TEST_SEED_BASE = 20_000_000
"""First seed of the test split (validation seeds stay below it while run seeds < `MAX_RUN_SEED`)."""
EPISODES_PER_SEED = 1000
"""Episode seeds reserved per run seed: episode ``i`` of run seed ``s`` gets ``base + s * 1000 + i``."""
MAX_RUN_SEED = (TEST_SEED_BASE - VALIDATION_SEED_BASE) // EPISODES_PER_SEED
"""Run seeds must stay below this for the splits to stay disjoint."""
SPLITS = ("validation", "test")
"""The evaluation seed splits."""


def eval_seed(split: str, run_seed: int, episode: int) -> int:
    """The env seed of evaluation episode ``episode`` of run seed ``run_seed`` in ``split``: one formula for
    every mode, so that modes with the same run seed are scored on the same episodes."""
    if split not in SPLITS:
        raise EvalError(f"split must be one of {SPLITS}, got {split!r}")
    if not 0 <= run_seed < MAX_RUN_SEED:
        raise EvalError(f"run seed must be in [0, {MAX_RUN_SEED}) for disjoint eval seeds, got {run_seed}")
    if not 0 <= episode < EPISODES_PER_SEED:
        raise EvalError(f"at most {EPISODES_PER_SEED} evaluation episodes per seed, got {episode + 1}")
    base = VALIDATION_SEED_BASE if split == "validation" else TEST_SEED_BASE
    return base + run_seed * EPISODES_PER_SEED + episode


def eval_seeds(split: str, run_seed: int, episodes: int) -> list[int]:
    """The env seeds of ``episodes`` evaluation episodes (`eval_seed`); an error for a bad split, run seed
    or count before anything is played."""
    if episodes < 1:
        raise EvalError(f"episodes must be >= 1, got {episodes}")
    return [eval_seed(split, run_seed, i) for i in range(episodes)]


# -- the episode runner -------------------------------------------------------------------------------


class EpisodePolicy(Protocol):
    """What `play_episodes` asks of a policy. Envs are numbered by slot (their index in the env list)."""

    def reset(self, slot: int) -> None:
        """An episode starts on env `slot` (its env was just reset)."""

    def act(self, slots: Sequence[int], observations: Sequence[Any]) -> list[int]:
        """One action (a primitive, macro or option index of the env's action space) per slot, given each
        slot's current observation."""


@dataclass
class Episode:
    """One finished episode as the runner saw it."""

    success: bool
    """The task succeeded (``info["success"]`` of the last step)."""
    steps: int
    """Primitive (game) steps: a macro or option call counts the steps it took (``info["macro_steps"]``)."""
    decisions: int
    """Policy decisions (env steps of the outermost env)."""
    episode_return: float
    """Undiscounted sum of the rewards."""
    unlocked: list[str]
    """Achievements unlocked during the episode."""
    stats: dict[str, float]
    """The env's own episode statistics (``episode_extra_stats``: ``macro/``, ``option/``, ... counters)."""
    trace: str
    """The last `TRACE_STEPS` decisions (with macro outcomes) and how the episode ended."""


def play_episodes(envs: Sequence[Any], policy: EpisodePolicy, seeds: Sequence[int]) -> list[Episode]:
    """Play one episode per seed (``env.reset(seed=...)``) on `envs` in lockstep: each env plays the next
    seed when its episode ends, until every seed was played. Episodes in the order they ended."""
    envs = list(envs)[: len(seeds)]
    obs: list[Any] = [None] * len(envs)
    returns = [0.0] * len(envs)
    steps = [0] * len(envs)
    decisions = [0] * len(envs)
    recent: list[deque[str]] = [deque(maxlen=TRACE_STEPS) for _ in envs]

    def start(slot: int, seed: int) -> None:
        obs[slot] = envs[slot].reset(seed=seed)[0]
        returns[slot], steps[slot], decisions[slot] = 0.0, 0, 0
        recent[slot].clear()
        policy.reset(slot)

    for slot, seed in enumerate(seeds[: len(envs)]):
        start(slot, seed)
    started = len(envs)
    active = list(range(len(envs)))
    done: list[Episode] = []
    while active:
        actions = policy.act(active, [obs[i] for i in active])
        still_active = []
        for i, action in zip(active, actions, strict=True):
            names = action_names(envs[i])  # before the step: a chain's names change when a stage ends
            obs[i], reward, terminated, truncated, info = envs[i].step(int(action))
            returns[i] += float(reward)
            steps[i] += int(info.get("macro_steps", 1))
            decisions[i] += 1
            recent[i].append(describe_step(names, int(action), info))
            if not (terminated or truncated):
                still_active.append(i)
                continue
            ended = info.get("end_reason") or ("died" if terminated else "time limit")
            done.append(Episode(
                success=bool(info.get("success", False)), steps=steps[i], decisions=decisions[i],
                episode_return=returns[i],
                unlocked=[a for a in ACHIEVEMENTS if info["achievements"].get(a, 0) > 0],
                stats={k: float(v) for k, v in info.get("episode_extra_stats", {}).items()},
                trace=f"{' -> '.join(recent[i])} ({ended})"))
            if started < len(seeds):
                start(i, seeds[started])
                started += 1
                still_active.append(i)
        active = still_active
    return done


def play_episode(env: Any, policy: EpisodePolicy, seed: int) -> Episode:
    """One episode of `policy` on `env` (`play_episodes` of one seed; a contained child's unit of work)."""
    return play_episodes([env], policy, [seed])[0]


def summarize(task: str, episodes: Sequence[Episode], failed: int = 0) -> dict[str, Any]:
    """What every evaluation reports over its episodes (the shared fields of `EvalReport`, the code mode's
    and a chain's records). `failed` episodes were not played to their end (their process failed, or
    nothing could play them): they count as episodes with no success and no achievement, and add no
    steps."""
    count = len(episodes) + failed
    if count < 1:
        raise EvalError("nothing to summarize: no episode was played")
    achievement_success = {a: sum(a in e.unlocked for e in episodes) / count for a in ACHIEVEMENTS}
    success = sum(e.success for e in episodes) / count
    stats = [e.stats for e in episodes]
    return {
        "task": task,
        "episodes": count,
        "success_rate": success_measure(task, success, achievement_success),
        "achievement_success": achievement_success,
        "crafter_score": crafter_score(percent_rates(achievement_success)),
        "mean_episode_steps": float(np.mean([e.steps for e in episodes])) if episodes else 0.0,
        "mean_return": float(np.mean([e.episode_return for e in episodes])) if episodes else 0.0,
        "steps": int(sum(e.steps for e in episodes)),
        "macro_stats": _macro_stats(stats),
        "option_stats": _summed_stats(stats, "option/"),
        "traces": [e.trace for e in episodes if not e.success][:TRACE_EPISODES],
    }


def action_names(env: Any) -> tuple[str, ...]:
    """Primitive then macro action names of an env: those of the outermost layer that names its actions
    (a property ``action_names``: the macro wrapper, a skill chain), else the primitives'."""
    from rlgpt.envs.crafter import ACTION_NAMES

    while True:
        if isinstance(getattr(type(env), "action_names", None), property):
            return tuple(env.action_names)
        if not isinstance(env, gymnasium.Wrapper):
            return tuple(ACTION_NAMES)
        env = env.env


def describe_step(names: Sequence[str], action: int, info: dict) -> str:
    """One decision of a trace: the action's name, with a macro call's outcome, steps and diagnostic."""
    name = names[action] if action < len(names) else str(action)
    macro = info.get("macro")
    if not macro:
        return name
    text = f"{name}[{macro['outcome']}, {macro['steps']} steps]"
    if macro.get("diagnostic"):
        text += f" ({macro['diagnostic'].get('message', '')[:80]})"
    return text


# -- a trained run's evaluation -----------------------------------------------------------------------


@dataclass
class EvalReport:
    """Result of evaluating one checkpoint."""

    task: str
    """Task evaluated."""
    episodes: int
    """Episodes played."""
    env_steps: int
    """Training env (primitive) steps of the evaluated checkpoint."""
    success_rate: float
    """Fraction of episodes in which the task succeeded; for the Crafter benchmark task the Crafter score /
    100 (`rlgpt.rl.score.success_measure`), the measure the loop stops on and picks iterations by."""
    achievement_success: dict[str, float]
    """Per achievement: fraction of episodes in which it was unlocked."""
    crafter_score: float
    """The Crafter score (Hafner 2021, 0-100) of `achievement_success`, for any task."""
    mean_episode_steps: float
    """Mean primitive steps per episode."""
    mean_return: float
    """Mean undiscounted episode return."""
    deterministic: bool
    """Whether actions were the policy's argmax instead of samples."""
    split: str = "validation"
    """Seed split the episodes came from (`SPLITS`)."""
    steps: int = 0
    """Primitive (game) steps the evaluation played: the sum of its episodes' lengths."""
    macro_stats: dict[str, dict[str, float]] = field(default_factory=dict)
    """Per macro: calls, successes, mean_length, interrupted and fail_<kind> counts summed over episodes
    (mean_length averaged over calls)."""
    option_stats: dict[str, dict[str, float]] = field(default_factory=dict)
    """Per option (a stored policy as an action, named by its task): calls, reached and steps summed over
    episodes."""
    traces: list[str] = field(default_factory=list)
    """For (up to `TRACE_EPISODES`) failed episodes: the last `TRACE_STEPS` actions, with macro outcomes."""
    seeds: list[int] = field(default_factory=list)
    """The env seed of every episode played, in the order they started (all of `split`, `eval_seed`)."""


class CheckpointPolicy:
    """A trained run's network as an `EpisodePolicy`: one batched forward pass for all slots."""

    def __init__(self, policy: StoredPolicy, deterministic: bool = False) -> None:
        self.policy = policy
        self.deterministic = deterministic

    def reset(self, slot: int) -> None:
        """Nothing to reset: the recurrent state starts at zero on every decision."""

    def act(self, slots: Sequence[int], observations: Sequence[Any]) -> list[int]:
        return self.policy.act_batch(observations, self.deterministic)


def evaluation_envs(cfg: Any, count: int, episode_length: int | None = None) -> list[Any]:
    """``count`` envs of the training whose Sample Factory config is ``cfg``, as its evaluation plays them:
    the training's task env and per-env wrappers (macros, dense reward, observation parts, options), one
    game each, with ``episode_length`` replacing the training's episode limit when given."""
    wc = worker_config(cfg)
    if episode_length is not None:
        wc = dataclasses.replace(wc, episode_length=episode_length)
    return [make_gym_env(cfg.env, wc) for _ in range(count)]


def evaluate(
    run_dir: str | Path,
    episodes: int = 50,
    num_envs: int = 8,
    deterministic: bool = False,
    seed: int = 0,
    write: bool = True,
    episode_length: int | None = None,
    split: str = "validation",
) -> EvalReport:
    """Play ``episodes`` episodes with the newest checkpoint of ``run_dir`` and report success rates.

    ``episode_length`` replaces the training's episode limit (so that runs trained with different horizons
    are evaluated alike). ``split`` picks the episode seeds (`eval_seed`). With ``write`` the report lands in
    ``run_dir/eval/`` as ``eval.json`` and
    ``eval_success.png``.
    """
    seeds = eval_seeds(split, seed, episodes)  # bad split, seed or count: an error before anything loads
    run_dir = Path(run_dir)
    policy = StoredPolicy(run_dir)
    cfg = policy.cfg
    envs = evaluation_envs(cfg, min(num_envs, episodes), episode_length)
    policy.build(envs[0])
    # Sampled actions come from torch's global generator: seeding it (in a fork, leaving the caller's
    # stream as it was) makes an evaluation of one checkpoint with one seed the same wherever it runs.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seeds[0])
        played = play_episodes(envs, CheckpointPolicy(policy, deterministic), seeds)
    for env in envs:
        env.close()

    task = policy.task
    report = EvalReport(**summarize(task, played), env_steps=policy.env_steps, deterministic=deterministic,
                        split=split, seeds=list(seeds))
    if write:
        out_dir = run_dir / layout.EVAL_DIR
        out_dir.mkdir(exist_ok=True)
        rundir.write_json(out_dir / layout.EVAL_JSON, asdict(report))
        plot_eval(report, out_dir / layout.EVAL_PNG)
        plot_crafter_achievements({task: report.achievement_success}, out_dir / layout.EVAL_CRAFTER_PNG,
                                  f"{task} @ {report.env_steps:,} env steps, {report.episodes} episodes")
        scalars = {
            "eval/success_rate": report.success_rate,
            "eval/crafter_score": report.crafter_score,
            "eval/mean_return": report.mean_return,
            "eval/mean_episode_steps": report.mean_episode_steps,
        }
        scalars.update({f"eval/achievement/{k}": v for k, v in report.achievement_success.items()})
        wandb_run = None
        if cfg.get("with_wandb") and cfg.get("wandb_unique_id"):
            wandb_run = {"id": cfg.wandb_unique_id, "project": cfg.wandb_project}
        log_scalars(run_dir, scalars, report.env_steps, wandb_run)
    return report


def _macro_stats(stats: list[dict]) -> dict[str, dict[str, float]]:
    """Sum the episodes' ``macro/<name>/<counter>`` entries per macro (mean_length weighted by calls)."""
    out: dict[str, dict[str, float]] = {}
    for episode in stats:
        for key, value in episode.items():
            if not key.startswith("macro/"):
                continue
            _, name, counter = key.split("/", 2)
            entry = out.setdefault(name, {})
            if counter == "mean_length":
                calls = episode.get(f"macro/{name}/calls", 0.0)
                entry["_length"] = entry.get("_length", 0.0) + value * calls
            else:
                entry[counter] = entry.get(counter, 0.0) + float(value)
    for entry in out.values():
        length = entry.pop("_length", 0.0)
        entry["mean_length"] = length / entry["calls"] if entry.get("calls") else 0.0
    return out


def _summed_stats(stats: list[dict], prefix: str) -> dict[str, dict[str, float]]:
    """Sum the episodes' ``<prefix><name>/<counter>`` entries per name."""
    out: dict[str, dict[str, float]] = {}
    for episode in stats:
        for key, value in episode.items():
            if key.startswith(prefix):
                name, counter = key[len(prefix):].split("/", 1)
                entry = out.setdefault(name, {})
                entry[counter] = entry.get(counter, 0.0) + float(value)
    return out


def plot_eval(report: EvalReport, path: Path) -> None:
    """Bar chart of per-achievement success."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(report.achievement_success)
    values = [report.achievement_success[n] for n in names]
    fig, ax = plt.subplots(figsize=(10, 4.5))
    ax.bar(range(len(names)), values, color=["tab:green" if v > 0 else "tab:gray" for v in values])
    ax.set_xticks(range(len(names)), names, rotation=60, ha="right", fontsize=8)
    ax.set_ylim(0, 1)
    ax.set_ylabel("success rate")
    ax.set_title(
        f"{report.task}: success {report.success_rate:.2f} over {report.episodes} episodes "
        f"@ {report.env_steps:,} env steps"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def plot_crafter_achievements(rates: dict[str, dict[str, float]], path: Path, title: str) -> None:
    """The Crafter paper's per-achievement chart: success rate in percent (log scale) of each of the 22
    achievements, one bar group per entry of ``rates`` (label -> achievement -> fraction 0-1), each
    labelled with its Crafter score; the paper's 1M-step anchor scores in the corner."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(12, 4.8))
    width = 0.8 / max(len(rates), 1)
    for k, (label, fractions) in enumerate(rates.items()):
        percent = percent_rates(fractions)
        # Log scale as in the paper; a rate of 0 is drawn at the axis floor.
        values = [max(percent.get(name, 0.0), 0.01) for name in ACHIEVEMENTS]
        ax.bar([i + (k - (len(rates) - 1) / 2) * width for i in range(len(ACHIEVEMENTS))], values, width,
               label=f"{label}: score {crafter_score(percent):.1f}")
    ax.set_yscale("log")
    ax.set_ylim(0.01, 100)
    ax.set_yticks([0.01, 0.1, 1, 10, 100], ["0.01", "0.1", "1", "10", "100"])
    ax.set_xticks(range(len(ACHIEVEMENTS)), ACHIEVEMENTS, rotation=60, ha="right", fontsize=8)
    ax.set_ylabel("success rate (%)")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8, loc="upper right")
    anchors = ", ".join(f"{name} {score}" for name, score in PAPER_SCORES_1M.items())
    ax.set_title(f"Crafter score: {title}\npaper at 1M steps: {anchors}", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def plot_learning_curves(run_dir: str | Path) -> Path | None:
    """Success and episode reward against primitive steps from ``metrics.csv`` (each step once, superseded
    rows of a killed session dropped); None when nothing was logged."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    run_dir = Path(run_dir)
    path = run_dir / layout.METRICS_CSV
    rows = read_curve(path) if path.exists() else []
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    plotted = False
    for ax, key in zip(axes, ("success", "episode_reward"), strict=True):
        points = [(int(r["env_steps"]), float(r[key])) for r in rows if r[key] not in ("", None)]
        if points:
            xs, ys = zip(*points, strict=True)
            ax.plot(xs, ys)
            plotted = True
        ax.set_xlabel("env (primitive) steps")
        ax.set_ylabel(key)
        ax.grid(alpha=0.3)
    if not plotted:
        plt.close(fig)
        return None
    fig.suptitle(run_dir.name)
    fig.tight_layout()
    out = run_dir / layout.LEARNING_CURVES_PNG
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out
