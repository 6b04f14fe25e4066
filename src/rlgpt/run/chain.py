"""A chain of the skill library's skills (`rlgpt.run.skills.Skill`) played in sequence, in one episode.

`ChainEnv` plays a chain in one episode: each skill acts until its task's achievements are unlocked (its
termination condition), then the next one takes over, on the same world. `run_chain` evaluates a chain with
the shared episode runner (`rlgpt.rl.evaluate.play_episodes`, `ChainPolicy` its adapter), and
`chain_start_pool` saves the states where a chain reached its goals (a later subtask's start states). The
skills run generated macros: the run plays both in a contained child process (`contained_run_chain`,
`contained_start_pool`, under `chain_limits`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import gymnasium

from rlgpt.envs.tasks import TaskSpec
from rlgpt.macro.contain import ContainLimits, run_contained
from rlgpt.rl.evaluate import action_names, eval_seeds, play_episode, play_episodes, summarize
from rlgpt.rl.stored_policy import StoredPolicy
from rlgpt.run.skills import Skill


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
