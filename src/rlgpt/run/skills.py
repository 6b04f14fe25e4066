"""The skill library: trained policies (and their macros) that reached a measured success on a task,
stored with task, success rate, steps and provenance, reused across runs and tasks, and executed in
sequence to reach long-horizon goals.

Layout of the library directory (default ``$RLGPT_SKILLS_DIR`` or ``~/.cache/rlgpt/skills``)::

    <task>/<entry id>/skill.json     task, success_rate, steps, provenance, macros
    <task>/<entry id>/policy/        config.json + the newest checkpoint of the training (a policy skill)
    .lock                            writers hold it (flock) while adding, so concurrent runs can share one

`run_chain` plays a chain in one episode: each skill acts until its task's achievements are unlocked (its
termination condition), then the next one takes over, on the same world.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import sys
import time
import uuid
from collections import deque
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np

from rlgpt.macro.contain import ContainLimits, run_contained
from rlgpt.rl.stored_policy import StoredPolicy
from rlgpt.run import layout, rundir


def default_skills_dir() -> Path:
    """``$RLGPT_SKILLS_DIR`` or ``~/.cache/rlgpt/skills``."""
    return Path(os.environ.get("RLGPT_SKILLS_DIR") or Path.home() / ".cache" / "rlgpt" / "skills")


@dataclass
class Skill:
    """One library entry."""

    task: str
    """The task it solves (a Crafter achievement or several joined with ``+``)."""
    success_rate: float
    """Measured evaluation success on that task."""
    steps: int
    """Primitive RL steps its training took."""
    provenance: dict[str, Any]
    """Where it came from: run directory, iteration, model id, creation time."""
    macros: list[dict[str, str]] = field(default_factory=list)
    """Macros of its action space (``name``, ``description``, ``code``)."""
    path: str = ""
    """The entry's directory (set when read from the library)."""
    policy: str = layout.POLICY_DIR
    """The training run (Sample Factory config + checkpoint), relative to `path` or absolute."""

    @property
    def policy_dir(self) -> Path:
        """The stored training run's directory."""
        return Path(self.path) / self.policy

    def describe(self) -> str:
        """One line for the planner's prompt."""
        macros = ", ".join(m["name"] for m in self.macros) or "primitives only"
        return f"trained policy, success {self.success_rate:.0%} ({macros})"


class SkillLibrary:
    """A directory of skills; reads are lock-free (entries appear atomically), writes take a file lock."""

    def __init__(self, root: str | os.PathLike | None = None) -> None:
        self.root = Path(root) if root else default_skills_dir()
        self.root.mkdir(parents=True, exist_ok=True)

    @contextmanager
    def _locked(self) -> Iterator[None]:
        with open(self.root / layout.LIBRARY_LOCK, "a") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    def add(self, task: str, success_rate: float, steps: int, provenance: dict[str, Any],
            train_dir: str | Path, macros: Sequence[dict[str, str]] = ()) -> Skill:
        """Store a trained policy (the run directory's config and newest checkpoint) as a skill for `task`."""
        from rlgpt.rl.checkpoint import latest_checkpoint

        checkpoint = Path(latest_checkpoint(train_dir))
        entry_id = f"{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:8]}"
        with self._locked():
            staging = self.root / task / f".{entry_id}.tmp"
            policy = staging / layout.POLICY_DIR
            (policy / checkpoint.parent.name).mkdir(parents=True)
            shutil.copy2(Path(train_dir) / layout.SF_CONFIG, policy / layout.SF_CONFIG)
            shutil.copy2(checkpoint, policy / checkpoint.parent.name / checkpoint.name)
            skill = Skill(task, float(success_rate), int(steps), {**provenance, "created": time.time()},
                          [dict(m) for m in macros])
            rundir.write_json(staging / layout.SKILL_JSON, asdict(skill))
            final = self.root / task / entry_id
            os.replace(staging, final)  # the entry appears complete or not at all
        skill.path = str(final)
        return skill

    def entries(self, task: str | None = None) -> list[Skill]:
        """Every complete entry (of `task`, when given). Entries being written (staging directories) are
        skipped; a corrupt one (unreadable or invalid ``skill.json``, its policy's config or checkpoint
        missing) is skipped with a warning on stderr, so one bad entry never ends a run that shares the
        library."""
        from rlgpt.rl.checkpoint import CheckpointError, latest_checkpoint

        skills = []
        pattern = f"{task}/*/{layout.SKILL_JSON}" if task else f"*/*/{layout.SKILL_JSON}"
        for path in sorted(self.root.glob(pattern)):
            if path.parent.name.startswith("."):  # an entry being written; it appears by rename
                continue
            try:
                data = json.loads(path.read_text())
                skill = Skill(**{**data, "path": str(path.parent)})
                if not isinstance(skill.task, str) or not isinstance(skill.macros, list):
                    raise TypeError("task or macros of the wrong type")
                skill.success_rate, skill.steps = float(skill.success_rate), int(skill.steps)
                if not (skill.policy_dir / layout.SF_CONFIG).is_file():
                    raise FileNotFoundError(f"no {layout.SF_CONFIG} in {skill.policy_dir}")
                latest_checkpoint(skill.policy_dir)
            except (OSError, ValueError, TypeError, CheckpointError) as e:
                print(f"rlgpt: warning: skipping skill library entry {str(path.parent)!r}: {e}",
                      file=sys.stderr)
                continue
            skills.append(skill)
        return skills

    def best(self, task: str, min_success: float = 0.0) -> Skill | None:
        """The entry for `task` with the highest success (at least `min_success`), or None."""
        good = [s for s in self.entries(task) if s.success_rate >= min_success]
        return max(good, key=lambda s: (s.success_rate, -s.steps), default=None)

    def describe(self, min_success: float = 0.0) -> dict[str, str]:
        """Task -> one-line description of its best entry, for the planner's prompt."""
        out = {}
        for task in sorted({s.task for s in self.entries()}):
            best = self.best(task, min_success)
            if best is not None:
                out[task] = best.describe()
        return out


class ChainBase(gymnasium.Wrapper):
    """Keeps the world when a skill's wrappers reset: after the episode's first reset, ``reset`` returns the
    current observation instead of a new world (so the next skill continues where the last one stopped)."""

    def __init__(self, env: gymnasium.Env) -> None:
        super().__init__(env)
        self.started = False

    def reset(self, **kwargs: Any):
        if self.started:
            return self.env.unwrapped._observe(), {}
        self.started = True
        return self.env.reset(**kwargs)


class SkillPolicy(StoredPolicy):
    """A library skill's stored policy (`StoredPolicy` of its ``policy`` directory)."""

    def __init__(self, skill: Skill) -> None:
        super().__init__(skill.policy_dir, skill.task)
        self.skill = skill


def run_chain(skills: Sequence[Skill], task: str, episodes: int, episode_length: int | None,
              seed: int = 0) -> dict[str, Any]:
    """Play `skills` in sequence on `task` for `episodes` episodes; each skill hands over once its task's
    achievements are all unlocked. Returns success on `task`, per-achievement rates, how far the chain got
    and the last steps before failures."""
    from rlgpt.envs.tasks import ACHIEVEMENTS, TaskSpec, make_task_env
    from rlgpt.rl.evaluate import TRACE_EPISODES, TRACE_STEPS, eval_seed

    spec = TaskSpec.from_name(task)
    policies = [SkillPolicy(s) for s in skills]
    successes, stages, lengths, traces = [], [], [], []
    unlocked_any = dict.fromkeys(ACHIEVEMENTS, 0.0)
    for episode in range(episodes):
        base = ChainBase(make_task_env(spec, episode_length=episode_length))
        stage, steps, info = 0, 0, {"achievements": {}, "success": False}
        recent: deque[str] = deque(maxlen=TRACE_STEPS)
        ended = False
        first = True
        while stage < len(policies) and not ended:
            policy = policies[stage]
            env = policy.wrap(base)
            obs, _ = env.reset(seed=eval_seed("test", seed, episode)) if first else env.reset()
            first = False
            goals = TaskSpec.from_name(policy.skill.task).targets
            while True:
                action = policy.act(obs)
                obs, _, terminated, truncated, info = env.step(action)
                steps += int(info.get("macro_steps", 1))
                recent.append(f"{policy.skill.task}:{action}")
                goal_done = all(info["achievements"].get(g, 0) > 0 for g in goals)
                stage += int(goal_done)
                if terminated or truncated:
                    ended = True
                if goal_done or ended:
                    break
        successes.append(float(info.get("success", False)))
        stages.append(stage)
        lengths.append(steps)
        for name in ACHIEVEMENTS:
            unlocked_any[name] += float(info["achievements"].get(name, 0) > 0) / episodes
        if not info.get("success") and len(traces) < TRACE_EPISODES:
            traces.append(" -> ".join(recent))
    return {"task": task, "episodes": episodes, "success_rate": float(np.mean(successes)),
            "achievement_success": unlocked_any, "mean_stages_completed": float(np.mean(stages)),
            "mean_episode_steps": float(np.mean(lengths)), "chain": [s.task for s in skills],
            "traces": traces}


def _single_threaded(fn: Any, *args: Any) -> Any:
    """``fn(*args)`` with torch on one thread: a forked child must not enter the OpenMP pool of its parent
    (GNU OpenMP hangs in a child whose parent used it)."""
    import torch

    torch.set_num_threads(1)
    return fn(*args)


def chain_limits(macros: Any) -> ContainLimits:
    """The OS limits of a contained chain (`contained_run_chain`, `contained_start_pool`): the run's memory
    cap (``macros.memory_limit_mb``); no CPU or short wall-clock cap, since a chain legitimately plays many
    long episodes and each macro call in it is bounded by the sandbox and the time budget already."""
    return ContainLimits(memory_mb=macros.memory_limit_mb, cpu_seconds=0, wall_seconds=7 * 24 * 3600.0)


def contained_run_chain(skills: Sequence[Skill], task: str, episodes: int, episode_length: int | None,
                        seed: int = 0, limits: ContainLimits | None = None) -> dict[str, Any]:
    """`run_chain` in a contained child process (the skills run generated macros): when that process fails
    (out of memory, killed, crashed), a record of 0 success with the diagnostic under ``error``."""
    out = run_contained(_single_threaded, run_chain, skills, task, episodes, episode_length, seed,
                        limits=limits)
    if out.diagnostic is None:
        return out.value
    return {"task": task, "episodes": 0, "success_rate": 0.0, "achievement_success": {},
            "mean_stages_completed": 0.0, "mean_episode_steps": 0.0, "chain": [s.task for s in skills],
            "traces": [], "error": f"the chain's process failed: {out.diagnostic}"}


def contained_start_pool(skills: Sequence[Skill], size: int, max_steps: int, seed: int = 0,
                         max_episodes: int | None = None, limits: ContainLimits | None = None
                         ) -> dict[str, Any]:
    """`chain_start_pool` in a contained child process: when that process fails, no states (the subtask
    trains from fresh worlds) and the diagnostic under ``error``."""
    out = run_contained(_single_threaded, chain_start_pool, skills, size, max_steps, seed, max_episodes,
                        limits=limits)
    if out.diagnostic is None:
        return out.value
    return {"states": [], "steps": 0, "episodes": 0, "reached": 0,
            "error": f"the chain's process failed: {out.diagnostic}"}


PREFIX_SEED_BASE = 7_000_000
"""World seeds of the episodes that build a chain's start states (apart from training and evaluation's)."""


def chain_start_pool(skills: Sequence[Skill], size: int, max_steps: int, seed: int = 0,
                     max_episodes: int | None = None) -> dict[str, Any]:
    """Start states for the subtask after `skills`: play the skills in sequence from fresh worlds (as
    `run_chain` does) and save the game (`CrafterEnv.snapshot`, exact) wherever every skill reached its goal
    alive, until `size` states are saved or `max_episodes` (default ``4 * size``) were played.

    Returns ``{"states", "steps", "episodes", "reached"}``: ``steps`` counts every primitive step played
    (the run counts them against its budget as chain-prefix steps)."""
    from rlgpt.envs.tasks import TaskSpec, make_task_env

    policies = [SkillPolicy(s) for s in skills]
    states: list[Any] = []
    steps = episodes = 0
    for episode in range(max_episodes or 4 * size):
        if len(states) >= size:
            break
        episodes += 1
        # The task env never ends the episode before the chain does: the last skill's goal ends it at most.
        task_env = make_task_env(TaskSpec.from_name(skills[-1].task),
                                 episode_length=max_steps * len(policies))
        base = ChainBase(task_env)
        reached = 0
        for policy in policies:
            env = policy.wrap(base)
            obs, _ = env.reset(seed=PREFIX_SEED_BASE + seed * 1000 + episode) if reached == 0 else env.reset()
            goals = TaskSpec.from_name(policy.skill.task).targets
            ended = False
            for _ in range(max_steps):  # each skill gets `max_steps` decisions to reach its goal
                obs, _, terminated, truncated, info = env.step(policy.act(obs))
                steps += int(info.get("macro_steps", 1))
                if all(info["achievements"].get(g, 0) > 0 for g in goals):
                    reached += 1
                    break
                if terminated or truncated:
                    ended = True
                    break
            if ended or reached < policies.index(policy) + 1:
                break
        crafter_env = task_env.env
        if reached == len(policies) and crafter_env.crafter._player.health > 0:
            states.append(crafter_env.snapshot())
    return {"states": states, "steps": steps, "episodes": episodes, "reached": len(states)}
