"""The skill library: trained policies (and their macros) that reached a measured success on a task,
stored with task, success rate, steps and provenance, reused across runs and tasks, and executed in
sequence to reach long-horizon goals.

Layout of the library directory (default ``$RLGPT_SKILLS_DIR`` or ``~/.cache/rlgpt/skills``)::

    <task>/<entry id>/skill.json     task, success_rate, steps, provenance, macros
    <task>/<entry id>/policy/        config.json + the newest checkpoint of the training (a policy skill)
    code_skills.json                 code skills (`CodeLibrary`): macros the model wrote that reached their
                                     goal, callable from later macros (`rlgpt.macro.code_skills`)
    curriculum.json                  `rlgpt skills learn`'s attempt per achievement
    .lock                            writers hold it (flock) while adding, so concurrent runs can share one

Code skills are versioned: each entry has a version (times its name was written) and the hash of its code;
the library has a version (times anything was written) and a hash of its entries. A run that reads the
library records which one it read (`CodeLibrary.ref`).

`ChainEnv` plays a chain in one episode: each skill acts until its task's achievements are unlocked (its
termination condition), then the next one takes over, on the same world. `run_chain` evaluates a chain with
the shared episode runner (`rlgpt.rl.evaluate.play_episodes`, `ChainPolicy` its adapter).
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import os
import shutil
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import gymnasium

from rlgpt import layout, rundir
from rlgpt.envs.tasks import TaskSpec
from rlgpt.macro.code_skills import CodeSkill, called_skills, code_hash
from rlgpt.macro.contain import ContainLimits, run_contained
from rlgpt.rl.evaluate import action_names, eval_seeds, play_episode, play_episodes, summarize
from rlgpt.rl.stored_policy import StoredPolicy


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


CODE_LIBRARY_FORMAT = 1
"""Version of ``code_skills.json``'s layout."""


@dataclass(frozen=True)
class CodeLibrary:
    """A snapshot of a library's code skills."""

    path: str
    """The library directory."""
    version: int
    """Times the library's code skills were written (0: none ever)."""
    skills: dict[str, CodeSkill]
    """Name -> entry."""

    @property
    def hash(self) -> str:
        """Content hash of every entry (names and code hashes)."""
        return code_hash("\n".join(f"{n}:{s.hash}" for n, s in sorted(self.skills.items())))

    def ref(self) -> dict[str, Any]:
        """What a run records about the library it used: path, version, hash, and each entry's."""
        return {"path": self.path, "version": self.version, "hash": self.hash,
                "skills": {n: {"version": s.version, "hash": s.hash} for n, s in sorted(self.skills.items())}}


def better(new: CodeSkill, old: CodeSkill | None) -> bool:
    """Whether `new` should replace `old` under the same name: a higher probe goal rate, or the same rate
    and a higher training success (an entry without training counts as 0)."""
    if old is None:
        return True
    return (new.goal_rate, new.train_success or 0.0) > (old.goal_rate, old.train_success or 0.0)


def verified_code_skills(macros: Sequence[dict[str, Any]], fast: dict[str, Any], train_success: float,
                         min_goal_rate: float, min_success: float,
                         provenance: dict[str, Any]) -> list[CodeSkill]:
    """The code skills a run's iteration earns: its trained `macros` (`rlgpt.run.loop.measured_macros`:
    linked code, goal, probe goal rate) that the model wrote (the kept candidate in `fast`, the
    iteration's ``fast.json``, is not the trusted goal macro), that reached their goal in at least
    `min_goal_rate` of probe calls, when the iteration's `train_success` (validation) is at least
    `min_success`. A macro probed after earlier sub-actions' macros needs them first (``requires.after``).
    """
    if train_success < min_success:
        return []
    kept = {}
    for choice in fast.get("macros", []):
        best = next((c for c in choice["candidates"] if c["index"] == choice["best"]), None)
        if best is not None and best.get("code") and not best.get("fallback"):
            kept[choice["subaction"]] = best
    found = []
    for m in macros:
        candidate, rate = kept.get(m["name"]), m.get("goal_rate")
        if candidate is None or not m.get("goal") or rate is None or rate < min_goal_rate:
            continue
        setup = list((candidate.get("probe") or {}).get("setup") or [])
        found.append(CodeSkill(m["name"], str(m.get("description", "")), m["goal"], m["code"], float(rate),
                               requires={"after": setup} if setup else {}, train_success=float(train_success),
                               provenance={**provenance, "calls": called_skills(candidate["code"])}))
    return found


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

    # -- code skills -----------------------------------------------------------------------------------

    def _read_json(self, name: str) -> dict[str, Any]:
        """A library file as a dict ({} when absent; unreadable: a warning on stderr and {})."""
        path = self.root / name
        try:
            data = json.loads(path.read_text())
            if not isinstance(data, dict):
                raise ValueError("not a JSON object")
            return data
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as e:
            print(f"rlgpt: warning: skill library file {str(path)!r} unreadable, read as empty: {e}",
                  file=sys.stderr)
            return {}

    def code_library(self) -> CodeLibrary:
        """The code skills as stored now (an invalid entry is skipped with a warning on stderr)."""
        data = self._read_json(layout.CODE_SKILLS_JSON)
        skills = {}
        for name, record in (data.get("skills") or {}).items():
            try:
                skill = CodeSkill.from_record(record)
                if skill.name != name:
                    raise ValueError(f"stored under {name!r} but named {skill.name!r}")
            except (ValueError, TypeError) as e:
                print(f"rlgpt: warning: skipping code skill {name!r} of {str(self.root)!r}: {e}",
                      file=sys.stderr)
                continue
            skills[name] = skill
        return CodeLibrary(str(self.root), int(data.get("version", 0)), skills)

    def add_code(self, skill: CodeSkill) -> tuple[CodeSkill, bool]:
        """Store `skill` (under the lock: concurrent runs never lose each other's entries) unless an entry
        of its name is at least as good (`better`). Returns the entry stored under its name afterwards and
        whether it is `skill` (then with its version and creation time set)."""
        with self._locked():
            data = self._read_json(layout.CODE_SKILLS_JSON)
            current = self.code_library().skills
            old = current.get(skill.name)
            if not better(skill, old):
                return old, False  # type: ignore[return-value]
            entry = dataclasses.replace(skill, version=(old.version if old else 0) + 1,
                                        provenance={**skill.provenance, "created": time.time()})
            records = {n: s.to_record() for n, s in current.items()}
            records[entry.name] = entry.to_record()
            rundir.write_json(self.root / layout.CODE_SKILLS_JSON,
                              {"format": CODE_LIBRARY_FORMAT, "version": int(data.get("version", 0)) + 1,
                               "skills": records})
        return entry, True

    def attempts(self) -> dict[str, dict[str, Any]]:
        """`rlgpt skills learn`'s record: achievement -> its attempt."""
        return dict(self._read_json(layout.CURRICULUM_JSON).get("attempts") or {})

    def record_attempt(self, achievement: str, attempt: dict[str, Any]) -> None:
        """Add (or replace) `achievement`'s attempt in the curriculum record, under the lock."""
        with self._locked():
            attempts = {**self.attempts(), achievement: attempt}
            rundir.write_json(self.root / layout.CURRICULUM_JSON, {"attempts": attempts})

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


class ChainEnv:
    """Stored skill policies played in sequence as one episode, on one world: each stage is a skill's
    policy behind its own wrappers (`StoredPolicy.wrap`), and hands over once its task's achievements are
    all unlocked; the next stage continues on the same world.

    The episode ends when the task env ends it, when the last stage reaches its goal (``end_reason``
    "chain done"), or when a stage used `max_stage_decisions` decisions without reaching it. Its statistics
    (``episode_extra_stats``) are ``chain/stages`` (stages whose goal was reached); the stages' own
    statistics (each counts only its part of the episode) are dropped.
    """

    def __init__(self, policies: Sequence[StoredPolicy], make_env: Callable[[], gymnasium.Env],
                 max_stage_decisions: int | None = None) -> None:
        self.policies = list(policies)
        self.make_env = make_env
        """Builds a fresh task env for each episode (its reward and success are the episode's)."""
        self.max_stage_decisions = max_stage_decisions
        self.task_env: gymnasium.Env | None = None
        self.stage = 0
        """Stages whose goal was reached so far (the index of the stage playing)."""
        self._env: Any = None
        self._goals: tuple[str, ...] = ()
        self._decisions = 0

    @property
    def policy(self) -> StoredPolicy:
        """The stage playing now."""
        return self.policies[self.stage]

    @property
    def action_names(self) -> tuple[str, ...]:
        """The playing stage's action names, prefixed by its task."""
        return tuple(f"{self.policy.task}:{name}" for name in action_names(self._env))

    def reset(self, seed: int | None = None) -> tuple[Any, dict[str, Any]]:
        """A new world (from `seed`) and the first stage."""
        self.task_env = self.make_env()
        self._base = ChainBase(self.task_env)
        self.stage = 0
        return self._enter(seed)

    def _enter(self, seed: int | None = None) -> tuple[Any, dict[str, Any]]:
        self._env = self.policy.wrap(self._base)
        self._goals = TaskSpec.from_name(self.policy.task).targets
        self._decisions = 0
        return self._env.reset(seed=seed) if seed is not None else self._env.reset()

    def step(self, action: int) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self._env.step(action)
        info = {k: v for k, v in info.items() if k != "episode_extra_stats"}
        self._decisions += 1
        if all(info["achievements"].get(g, 0) > 0 for g in self._goals):
            self.stage += 1
            if not (terminated or truncated):
                if self.stage == len(self.policies):
                    truncated, info["end_reason"] = True, "chain done"
                else:
                    obs, _ = self._enter()
        elif not (terminated or truncated) and self.max_stage_decisions is not None \
                and self._decisions >= self.max_stage_decisions:
            truncated, info["end_reason"] = True, f"stage {self.stage} out of decisions"
        if terminated or truncated:
            info["episode_extra_stats"] = {"chain/stages": float(self.stage)}
        return obs, reward, terminated, truncated, info

    def close(self) -> None:
        if self.task_env is not None:
            self.task_env.close()


class ChainPolicy:
    """A chain's playing stage picks the action (an `rlgpt.rl.evaluate.EpisodePolicy` over `ChainEnv`s)."""

    def __init__(self, chains: Sequence[ChainEnv]) -> None:
        self.chains = list(chains)

    def reset(self, slot: int) -> None:
        """Nothing to reset: the chain env starts its first stage itself."""

    def act(self, slots: Sequence[int], observations: Sequence[Any]) -> list[int]:
        return [self.chains[slot].policy.act(obs) for slot, obs in zip(slots, observations, strict=True)]


def _stored(skills: Sequence[Skill]) -> list[StoredPolicy]:
    return [StoredPolicy(s.policy_dir, s.task) for s in skills]


def run_chain(skills: Sequence[Skill], task: str, episodes: int, episode_length: int | None,
              seed: int = 0) -> dict[str, Any]:
    """Play `skills` in sequence on `task` for `episodes` episodes (test seeds); each skill hands over once
    its task's achievements are all unlocked. Returns success on `task`, per-achievement rates, how far the
    chain got and the last steps before failures (`rlgpt.rl.evaluate.summarize` and the chain's fields)."""
    from rlgpt.envs.tasks import make_task_env

    spec = TaskSpec.from_name(task)
    seeds = eval_seeds("test", seed, episodes)
    played = []
    if skills:  # an empty chain (every subtask's training failed) plays nothing: it fails every episode
        chain = ChainEnv(_stored(skills), lambda: make_task_env(spec, episode_length=episode_length))
        played = play_episodes([chain], ChainPolicy([chain]), seeds)
        chain.close()
    return {**summarize(task, played, failed=len(seeds) - len(played)), "split": "test", "seeds": seeds,
            "mean_stages_completed": sum(e.stats["chain/stages"] for e in played) / len(seeds),
            "chain": [s.task for s in skills]}


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
    `run_chain` does; each skill gets `max_steps` decisions to reach its goal) and save the game
    (`CrafterEnv.snapshot`, exact) wherever every skill reached its goal alive, until `size` states are saved
    or `max_episodes` (default ``4 * size``) were played.

    Returns ``{"states", "steps", "episodes", "reached"}``: ``steps`` counts every primitive step played
    (the run counts them against its budget as chain-prefix steps)."""
    from rlgpt.envs.tasks import make_task_env

    policies = _stored(skills)
    # The task env never ends the episode before the chain does: the last skill's goal ends it at most.
    spec = TaskSpec.from_name(skills[-1].task)
    chain = ChainEnv(policies, lambda: make_task_env(spec, episode_length=max_steps * len(policies)),
                     max_stage_decisions=max_steps)
    states: list[Any] = []
    steps = episodes = 0
    for episode in range(max_episodes or 4 * size):
        if len(states) >= size:
            break
        episodes += 1
        played = play_episode(chain, ChainPolicy([chain]), PREFIX_SEED_BASE + seed * 1000 + episode)
        steps += played.steps
        crafter_env = chain.task_env.env
        if chain.stage == len(policies) and crafter_env.crafter._player.health > 0:
            states.append(crafter_env.snapshot())
    chain.close()
    return {"states": states, "steps": steps, "episodes": episodes, "reached": len(states)}
