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

Playing a chain of the library's skills is `rlgpt.run.chain`'s.
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
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rlgpt import layout, rundir
from rlgpt.macro.code_skills import CodeSkill, called_skills, code_hash
from rlgpt.run.records import kept_candidate


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
        best = kept_candidate(choice)
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
