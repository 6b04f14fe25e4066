"""`rlgpt skills learn`: an automatic curriculum over Crafter's achievement graph that grows the skill
library's code skills (Voyager's loop).

Each round takes the easiest unmet achievement: among those without a stored code skill and not yet
attempted (with this model and API level), whose prerequisites
(`rlgpt.agents.envdoc.achievement_requirements`) all have one, the one with the fewest prerequisites in all
(then by name). Its start states are where its prerequisites hold: the stored skills of its prerequisite
chain played in order from fresh worlds (`rlgpt.macro.prefix.PrefixStart`), the states kept where every one
reached its goal alive. The fast agent then writes the achievement's macro (samples, compile repair, probes
from those states, probe-fed revisions; the library's relevant skills listed and callable, the trusted goal
macro off: only model code is stored), and the kept candidate is stored as ``skills.<achievement>`` when it
reached the goal in at least ``code_skill_min_goal_rate`` of its probe calls. Every attempt is recorded in
the library (``curriculum.json``), so a killed run resumes with the skills and attempts it has.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from rlgpt import layout, rundir
from rlgpt.agents.envdoc import achievement_requirements, prerequisite_chain
from rlgpt.agents.fast import FastAgent
from rlgpt.agents.replies import SubAction
from rlgpt.config import RunConfig
from rlgpt.envs.crafter import GameState
from rlgpt.llm.client import LLMClient
from rlgpt.macro.code_skills import CodeSkill, called_skills, goal_key
from rlgpt.macro.contain import ContainLimits, run_contained
from rlgpt.macro.prefix import PrefixLink, PrefixStart, StartSummary
from rlgpt.run.skills import SkillLibrary

START_ATTEMPTS = 4
"""Worlds tried per start state wanted (the prerequisite skills may miss their goals in some)."""
START_SEED_BASE = 8_000_000
"""World seeds of the episodes that build start states (apart from probes', training's and evaluation's)."""


def achievement_skills(skills: Mapping[str, CodeSkill]) -> dict[str, CodeSkill]:
    """Achievement -> the stored skill that reaches it on its own (no ``requires.after``), the best by
    probe goal rate."""
    found: dict[str, CodeSkill] = {}
    needs = achievement_requirements()
    for skill in skills.values():
        if skill.requires.get("after"):
            continue
        for achievement in needs:
            if skill.goal and goal_key(skill.goal) == goal_key(achievement) and (
                    achievement not in found or skill.goal_rate > found[achievement].goal_rate):
                found[achievement] = skill
    return found


def next_achievement(have: Sequence[str], attempted: Sequence[str]) -> str | None:
    """The easiest unmet achievement (see the module docstring), or None when none is eligible."""
    needs = achievement_requirements()
    eligible = [a for a in needs if a not in have and a not in attempted and needs[a] <= set(have)]
    return min(eligible, key=lambda a: (len(prerequisite_chain([a])), a), default=None)


def start_states(links: Sequence[PrefixLink], count: int, max_steps: int, seed: int) -> dict[str, Any]:
    """Up to `count` states where every link reached its goal alive, from at most ``START_ATTEMPTS *
    count`` fresh worlds: ``{"states", "steps", "worlds"}`` (no links: `count` fresh worlds' first
    states)."""
    from rlgpt.envs.tasks import make_task_env

    if not links:
        return {"states": [], "steps": 0, "worlds": 0}
    env = PrefixStart(make_task_env("collect_wood", episode_length=max_steps * len(links) + 1), links,
                      max_steps=max_steps, pool_size=0, attempts=1)
    states: list[GameState] = []
    steps = worlds = 0
    while len(states) < count and worlds < START_ATTEMPTS * count:
        _, info = env.reset(seed=START_SEED_BASE + seed * 1000 + worlds)
        worlds += 1
        steps += info["prefix_steps"]
        if info["prefix_ok"]:
            states.append(env.env.env.snapshot())  # type: ignore[attr-defined]
    env.close()
    return {"states": states, "steps": steps, "worlds": worlds}


def attempt_key(cfg: RunConfig, model_id: str) -> str:
    """What an attempt is judged under: a later run with another model or API level tries again."""
    return f"{model_id}/{cfg.agents.api}"


def learn(cfg: RunConfig, library: SkillLibrary, client: LLMClient, run_dir: Path,
          max_achievements: int | None = None, say: Callable[[str], None] = print,
          retry_failed: bool = False) -> list[dict[str, Any]]:
    """Run the curriculum (module docstring) for at most `max_achievements` new attempts; each attempt's
    candidates go to ``run_dir/learn/<achievement>.json``. With `retry_failed`, an achievement whose
    earlier attempt stored nothing is attempted again (once per call). Returns every recorded attempt of
    this model and API level (earlier runs' included), in the order they were made."""
    agents = dataclasses.replace(cfg.agents, goal_fallback=False)  # only model-written code is stored
    contain = ContainLimits.from_config(cfg.train.macros)
    fast = FastAgent(client, agents, contain=contain)
    key = attempt_key(cfg, client.model_id)
    done, tried = 0, set()
    while max_achievements is None or done < max_achievements:
        skills = library.code_library().skills
        have = achievement_skills(skills)
        attempted = [a for a, rec in library.attempts().items() if rec.get("key") == key
                     and (a in tried or rec.get("stored") or not retry_failed)]
        achievement = next_achievement(list(have), attempted)
        if achievement is None:
            break
        done += 1
        tried.add(achievement)
        record, skill = attempt(cfg, fast, achievement, have, contain, run_dir)
        record["key"] = key
        if skill is not None:
            entry, stored = library.add_code(skill)
            record.update(stored=stored, version=entry.version, hash=entry.hash)
        library.record_attempt(achievement, record)
        rate = "-" if record["goal_rate"] is None else f"{record['goal_rate']:.2f}"
        starts = f"{record['start_states']} start states" if record["prerequisites"] else "fresh worlds"
        say(f"[{done}] {achievement}: {starts}, probe rate {rate}, "
            f"{'stored' if record['stored'] else 'not stored'}, {record['llm_seconds']:.1f} s LLM"
            + (f" ({record['error']})" if record.get("error") else ""))
    mine = [{"achievement": a, **rec} for a, rec in library.attempts().items() if rec.get("key") == key]
    return sorted(mine, key=lambda rec: rec.get("created", 0.0))


def attempt(cfg: RunConfig, fast: FastAgent, achievement: str, have: Mapping[str, CodeSkill],
            contain: ContainLimits, run_dir: Path) -> tuple[dict[str, Any], CodeSkill | None]:
    """One achievement's attempt: its start states, the fast agent's macro, its probes. Returns the
    attempt's record and the skill it earned (None: its kept candidate missed the goal too often)."""
    chain = prerequisite_chain([achievement])[:-1]
    record: dict[str, Any] = {"prerequisites": list(chain), "start_states": 0, "goal_rate": None,
                              "stored": False, "llm_seconds": 0.0, "candidates": 0, "created": time.time()}
    states: list[GameState] = []
    if chain:
        links = [PrefixLink(fast.compile_macro_code(have[p].name, have[p].code, goal=have[p].goal),
                            have[p].goal) for p in chain]
        wanted = len(cfg.agents.probe_seeds)
        out = run_contained(start_states, links, wanted, cfg.agents.probe_max_steps, cfg.seed,
                            limits=contain)
        if out.diagnostic is not None:
            return {**record, "error": f"building start states failed: {out.diagnostic}"}, None
        states = out.value["states"]
        record.update(start_states=len(states), start_steps=out.value["steps"])
        if not states:
            return {**record, "error": f"the prerequisite skills reached their goals in none of "
                                       f"{out.value['worlds']} worlds"}, None
    # The attempt's agent: the run's, writing for the attempt's start and with the skills learned so far.
    fast = FastAgent(fast.client, fast.config, fast.limits, fast.contain, on_phase=fast.on_phase,
                     start=StartSummary.of(states) if states else None, start_states=tuple(states),
                     library_skills={s.name: s for s in have.values()})
    sub = SubAction(achievement, f"unlock the achievement {achievement}", "code", achievement,
                    "the curriculum's next achievement")
    before = client_seconds(fast.client)
    choice = fast.write_macro(achievement, sub)
    record["llm_seconds"] = client_seconds(fast.client) - before
    record["candidates"] = len(choice.candidates)
    (run_dir / layout.LEARN_DIR).mkdir(parents=True, exist_ok=True)
    rundir.write_json(run_dir / layout.LEARN_DIR / f"{achievement}.json", choice.to_dict())
    best, source = choice.best, choice.source
    if best is None or best.fallback or best.probe is None or source is None:
        return {**record, "error": "no candidate compiled"}, None
    rate = best.probe.goal_rate
    record["goal_rate"] = rate
    if rate is None or rate < cfg.code_skill_min_goal_rate:
        return record, None
    calls = sorted(set(called_skills(best.code.code or "")) & set(fast.library_skills))
    skill = CodeSkill(achievement, f"unlocks {achievement}", achievement, source.code, float(rate),
                      requires=requires(fast.start),
                      provenance={"curriculum": str(run_dir), "model_id": fast.client.model_id,
                                  "api": cfg.agents.api, "calls": calls})
    return record, skill


def requires(start: StartSummary | None) -> dict[str, Any]:
    """A skill's ``requires`` from its start states' summary ({} for fresh worlds)."""
    if start is None:
        return {}
    return {"achievements": list(start.unlocked), "inventory": dict(start.inventory)}


def client_seconds(client: LLMClient) -> float:
    """The fast role's LLM seconds so far."""
    return float(client.metrics().get("llm/fast/latency_s", 0.0))


def learn_table(attempts: Sequence[dict[str, Any]]) -> str:
    """The closing table: achievement, skill stored?, probe rate, LLM seconds (one row per attempt)."""
    rows = ["| achievement | skill stored | probe rate | LLM s |", "|---|---|---|---|"]
    for a in attempts:
        rate = "-" if a.get("goal_rate") is None else f"{a['goal_rate']:.2f}"
        rows.append(f"| {a['achievement']} | {'yes' if a.get('stored') else 'no'} | {rate} | "
                    f"{a.get('llm_seconds', 0.0):.1f} |")
    stored = sum(bool(a.get("stored")) for a in attempts)
    seconds = sum(a.get("llm_seconds", 0.0) for a in attempts)
    rows.append(f"\n{stored} of {len(achievement_requirements())} achievements have a stored skill from "
                f"these attempts; {seconds:.1f} s LLM")
    return "\n".join(rows)
