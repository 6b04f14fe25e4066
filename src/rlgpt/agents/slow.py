"""The slow agent: decomposes a task into sub-actions, each coded (a macro) or learned (RL).

A small model garbles goals, so every decomposition goes through `check_goals` (goals repaired from the
sub-action names and crafter's recipes, the task's own achievement appended when left out); a reply that
never validates falls back to `recipe_decomposition`, the task's prerequisite chain from the recipe graph.

Every task kind the CLI accepts has a fallback: one achievement or several (``a+b``) get their
prerequisite chain; a planner chain's link (a `start` set) the chain's rest from where its episodes start;
the Crafter benchmark (`rlgpt.envs.tasks.BENCHMARK_TASK`), which has no single goal, the first steps of
`rlgpt.agents.envdoc.benchmark_plan` (the achievement graph, shallowest first).

The reply's token budget (`reply_token_bound`) is the longest reply the decomposition schema allows, so a
reply is never cut off by construction: the schema bounds every string (``maxLength`` kept small: llama.cpp
turns each into grammar rules) and the number of sub-actions.

Under the prompt-knowledge ablation (`AgentConfig.env_doc` ``rules`` or ``none``) the prompts withhold that
chain, so neither the fallback nor a repair may bring it back: the fallback is `rl_decomposition` (each
task achievement learned by RL, marked ``fallback: task_as_rl``) and an appended sub-action's description
only names its achievement. Otherwise an ablation run whose model failed would be measured with the very
knowledge the ablation removes (a recorded note could flag that, but the number would still be wrong).
"""

from __future__ import annotations

import copy
import math
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from crafter import constants

from rlgpt import prompts
from rlgpt.agents.common import (
    StartedRole,
    degradable,
    describe_task,
    documentation,
    knowledge_values,
    note_fallback,
)
from rlgpt.agents.envdoc import benchmark_plan, prerequisite_chain, remaining_chain, requirement_lines
from rlgpt.agents.replies import Decomposition
from rlgpt.config import AgentConfig
from rlgpt.envs.tasks import BENCHMARK_TASK
from rlgpt.llm.context import CHARS_PER_TOKEN, RolePrompt, ask_fitted, fit
from rlgpt.llm.types import Message, SamplingParams
from rlgpt.macro.control import recipe_action

if TYPE_CHECKING:
    from rlgpt.macro.prefix import StartSummary

ROLE = "slow"
RECIPE_GRAPH = "recipe_graph"
"""The ``fallback`` mark of a decomposition taken from the recipe graph."""
TASK_AS_RL = "task_as_rl"
"""The ``fallback`` mark of `rl_decomposition` (the ablations' fallback: no recipe knowledge)."""


def valid_goals() -> tuple[str, ...]:
    """Every goal a sub-action may name (the decomposition schema's enum, without "")."""
    enum = prompts.load_schema("decomposition")["properties"]["subactions"]["items"]["properties"]["goal"]
    return tuple(g for g in enum["enum"] if g)


def is_benchmark(task: str) -> bool:
    """Whether `task` names the Crafter benchmark (`BENCHMARK_TASK`) rather than achievements to unlock."""
    return task.strip() == BENCHMARK_TASK


def task_targets(task: str) -> list[str]:
    """The achievements a task name asks for ("a+b" -> [a, b]); none for the Crafter benchmark, whose
    episode no achievement ends (its plan is `benchmark_plan`)."""
    if is_benchmark(task):
        return []
    return [t.strip() for t in task.split("+") if t.strip()]


def _item_schema() -> dict[str, Any]:
    return prompts.load_schema("decomposition")["properties"]["subactions"]["items"]["properties"]


def _max_subactions() -> int:
    return int(prompts.load_schema("decomposition")["properties"]["subactions"]["maxItems"])


def max_reply_chars(schema: dict[str, Any]) -> tuple[int, int]:
    """The longest compact JSON text valid under `schema` (characters, a string's quotes and an escape
    each counted as characters), and how many values it holds. Every array needs ``maxItems`` and every
    string ``maxLength`` or an ``enum``: an unbounded reply has no budget that fits it.

    Raises:
        ValueError: a part of `schema` has no bound.
    """
    kind = schema.get("type")
    if "enum" in schema:
        return max(len(str(v)) + 2 for v in schema["enum"]), 1
    if kind == "object":
        chars, values = 2, 1
        for key, sub in schema.get("properties", {}).items():
            c, v = max_reply_chars(sub)
            chars, values = chars + len(key) + 4 + c, values + v  # "key": value,
        return chars, values
    if kind == "array":
        if "maxItems" not in schema:
            raise ValueError("an array without maxItems has no longest reply")
        c, v = max_reply_chars(schema["items"])
        return 2 + schema["maxItems"] * (c + 1), 1 + schema["maxItems"] * v
    if kind == "string":
        if "maxLength" not in schema:
            raise ValueError("a string without maxLength or enum has no longest reply")
        return int(schema["maxLength"]) + 2, 1
    if kind in ("integer", "number"):
        return 24, 1
    return 5, 1  # true, false, null


def reply_token_bound(schema: dict[str, Any]) -> int:
    """Completion tokens that hold the longest reply `schema` allows: its characters at the prompts'
    conservative `CHARS_PER_TOKEN` (the model's tokenizer packs English and JSON ~3.7 to a token), plus a
    token per value for the whitespace the JSON grammar lets the model put before it."""
    chars, values = max_reply_chars(schema)
    return math.ceil(chars / CHARS_PER_TOKEN) + values


def slow_max_tokens(config: AgentConfig) -> int:
    """The slow agent's completion limit: `AgentConfig.slow_max_tokens`, or when 0 the decomposition
    schema's `reply_token_bound` (at least `AgentConfig.json_max_tokens`)."""
    if config.slow_max_tokens:
        return config.slow_max_tokens
    return max(config.json_max_tokens, reply_token_bound(prompts.schema_for_role(ROLE)))


def _recipe_subaction(achievement: str, why: str, env_doc: str = "full") -> dict[str, Any]:
    limits = _item_schema()
    if env_doc != "full":  # the prompt had no recipes: the description does not add them
        description = f"unlock the achievement {achievement}"
    else:
        description = requirement_lines([achievement]).splitlines()[-1].split(". ", 1)[-1]
    return {"name": achievement, "description": description[:limits["description"]["maxLength"]],
            "how": "code", "goal": achievement, "why": why[:limits["why"]["maxLength"]]}


def recipe_chain(task: str, start: StartSummary | None = None) -> tuple[str, ...]:
    """The achievements `recipe_decomposition` codes, at most the schema's ``maxItems``: for achievements
    (one, ``a+b``) their prerequisite chain (its last steps when longer: they name the task), from a
    chain's `start` only the steps `requirement_lines` still lists; for the Crafter benchmark the first
    steps of `benchmark_plan` from where its episodes start."""
    limit = _max_subactions()
    if is_benchmark(task):
        return benchmark_plan(start.unlocked if start is not None else ())[:limit]
    return task_chain(task, start)[-limit:]


def task_chain(task: str, start: StartSummary | None = None) -> tuple[str, ...]:
    """The whole prerequisite chain of an achievement task (one, ``a+b``) from crafter's recipes; from a
    chain's `start` only the steps it still needs (`remaining_chain`)."""
    targets = task_targets(task)
    return (prerequisite_chain(targets) if start is None
            else remaining_chain(targets, start.unlocked, dict(start.inventory)))


def recipe_decomposition(task: str, start: StartSummary | None = None) -> Decomposition:
    """`recipe_chain` from crafter's recipe graph, one coded sub-action per achievement."""
    why = "fallback: no valid slow reply; the recipe graph's chain"
    subs = [_recipe_subaction(a, why) for a in recipe_chain(task, start)]
    return Decomposition.from_dict({"subactions": subs})


def rl_decomposition(task: str, env_doc: str) -> Decomposition:
    """The fallback when the prompts withheld the recipes (`env_doc` ``rules``/``none``): one sub-action per
    task achievement (the Crafter benchmark: one for the whole game), each learned by RL; it uses nothing
    but the task's name."""
    valid = valid_goals()
    why = f"fallback: no valid slow reply; env_doc={env_doc} withholds recipes: RL learns it"
    if is_benchmark(task):
        return Decomposition.from_dict({"subactions": [
            {"name": "crafter", "description": "unlock as many different achievements as possible",
             "how": "rl", "goal": "", "why": why}]})
    subs = [{"name": t, "description": f"unlock the achievement {t}", "how": "rl",
             "goal": t if t in valid else "", "why": why} for t in task_targets(task)]
    return Decomposition.from_dict({"subactions": subs[-_max_subactions():]})


def _repair_goal(goal: str, valid: tuple[str, ...]) -> str | None:
    """A nonexistent goal as the valid one it spells (case, spaces, a plural, an achievement's item)."""
    norm = goal.strip().lower().replace(" ", "_").replace("-", "_")
    for candidate in (norm, norm.rstrip("s"), f"collect_{norm}", f"make_{norm}", f"place_{norm}"):
        if candidate in valid:
            return candidate
    return None


def goal_covers(goal: Any, target: str) -> bool:
    """Whether a sub-action's `goal` rising unlocks achievement `target`: the achievement itself, or the
    item a collect_/make_ achievement gives ("wood" for collect_wood)."""
    kind, _, item = target.partition("_")
    return goal == target or (kind in ("collect", "make") and goal == item)


def check_goals(data: dict[str, Any], task: str, env_doc: str = "full",
                start: StartSummary | None = None) -> tuple[dict[str, Any], list[str]]:
    """Repair a decomposition reply's goals; returns the repaired copy and one note per repair.

    - a sub-action named exactly like a Crafter achievement (``make_stone_pickaxe``) whose goal names
      something else gets that achievement as its goal; when that goal was another step's (not the
      achievement's item), its description is replaced too, by the achievement's recipe line (at `env_doc`
      ``full``; its name otherwise);
    - a goal naming no achievement or item is repaired when it spells one, else dropped ("");
    - a make_ or place_ sub-action whose description contradicts the recipe (it says to ``do``, or to place
      facing a tile the recipe does not allow) gets the recipe's description (`_misleading`);
    - when no sub-action has the task's own achievement (or the item it gives) as its goal, a coded
      sub-action for it is appended
      (replacing the last other one when the list is full); its description is the recipe line at
      `env_doc` ``full``, only the achievement's name otherwise;
    - from a chain's `start`, a sub-action whose goal is an achievement the start states have unlocked and
      the rest of the chain does not need again (`remaining_chain`) is dropped: the small model copies the
      chain's prefix although the prompt says it is done;
    - sub-actions after the ones that unlock every task achievement are dropped: the task's episode ends at
      that success, so they never run (the small model appends a next step of the tech tree);
    - at `env_doc` ``full`` (the prompt listed the chain), a link of the task's recipe chain that no
      sub-action's goal covers is inserted as a coded
      sub-action before the first sub-action of a later link, when the whole chain fits the schema's
      ``maxItems`` and there is room (longer chains go through the task planner): the small model leaves
      links out (place_stone's plan went from the table to the stone, without the wood pickaxe crafter
      needs to mine it, and every later macro failed). A missing collect_ link is inserted only after a link
      the plan covers (a gap: make_stone_pickaxe's plan skipped the stone); one before the plan's first
      link is left to that first macro (one `gather` call, or a stored skill it composes).
    """
    data = copy.deepcopy(data)
    subs = data.get("subactions")
    if not isinstance(subs, list):
        return data, []
    valid = valid_goals()
    notes: list[str] = []
    for sub in subs:
        if not isinstance(sub, dict):
            continue
        name, goal = sub.get("name"), sub.get("goal", "")
        if name in constants.achievements and goal != name:
            notes.append(f"{name}: goal {goal!r} -> {name!r} (the sub-action is named after an achievement)")
            sub["goal"] = name
            given = _repair_goal(goal, valid) if isinstance(goal, str) and goal.strip() else None
            if given is not None and not goal_covers(given, name):
                # Its goal was another step's (the small model shifts goals and descriptions along the
                # chain: make_stone_pickaxe "face a grass tile and place_stone"): so is its description.
                sub["description"] = _recipe_subaction(name, "", env_doc)["description"]
                notes.append(f"{name}: description -> the recipe's (its goal {goal!r} was another step's)")
        elif isinstance(goal, str) and goal and goal not in valid:
            fixed = _repair_goal(goal, valid)
            notes.append(f"{name}: goal {goal!r} names no achievement or item; "
                         + (f"-> {fixed!r}" if fixed else "dropped"))
            sub["goal"] = fixed or ""
        action = recipe_action(sub.get("goal", ""))
        wrong = _misleading(action, sub.get("description")) if action else ""
        if wrong:
            # The small model copies the collecting sub-action's wording onto a craft ("explore until a
            # table tile is in view, walk to it, face it and do until the inventory holds 1 wood_pickaxe")
            # and the fast agent writes exactly that: `do` at a table, exploring for a table never placed.
            sub["description"] = _recipe_subaction(action, "", env_doc)["description"]
            notes.append(f"{name}: description -> the recipe's ({wrong})")
    targets = [t for t in task_targets(task) if t in constants.achievements]
    if start is not None:
        redo = set(start.unlocked) - set(remaining_chain(targets, start.unlocked, dict(start.inventory)))
        for sub in [s for s in subs
                    if isinstance(s, dict) and any(goal_covers(s.get("goal"), a) for a in redo)]:
            subs.remove(sub)
            notes.append(f"{sub.get('name')}: dropped, its goal {sub.get('goal')!r} is unlocked at the start")
    firsts = [next((i for i, s in enumerate(subs)
                    if isinstance(s, dict) and goal_covers(s.get("goal"), t)), None) for t in targets]
    if targets and None not in firsts:
        for sub in subs[max(firsts) + 1:]:
            name = sub.get("name") if isinstance(sub, dict) else sub
            notes.append(f"{name}: dropped, it comes after the task's achievements are unlocked (the "
                         f"episode ends there)")
        del subs[max(firsts) + 1:]
    goals = {s.get("goal") for s in subs if isinstance(s, dict)}
    names = {s.get("name") for s in subs if isinstance(s, dict)}
    for target in targets:
        if any(goal_covers(goal, target) for goal in goals):
            continue
        if target in names:  # cannot happen (a sub-action named after it got it as goal above); kept unique
            continue
        added = _recipe_subaction(target, "appended: the reply left out the task's own achievement", env_doc)
        if len(subs) >= _max_subactions():  # drop the last sub-action that is not for a task achievement
            keep = set(task_targets(task))
            at = max(i for i, s in enumerate(subs) if not (isinstance(s, dict) and s.get("goal") in keep))
            dropped = subs.pop(at)
            notes.append(f"{dropped.get('name')!r} dropped to make room for the task's achievement")
        subs.append(added)
        notes.append(f"appended {target!r}: no sub-action had the task's achievement as its goal")
    if env_doc == "full" and targets:
        notes.extend(_insert_missing_links(subs, task_chain(task, start), env_doc))
    return data, notes


_DO = re.compile(r"\bdo\b")
_FACE = re.compile(r"\bface an? (\w+) tile")


def _misleading(action: str, description: Any) -> str:
    """Why a make_ or place_ sub-action's `description` contradicts crafter's recipe for `action` ("" when
    it does not): it says to ``do`` (crafting and placing are their own actions), or to place facing a
    material the recipe does not allow."""
    if not isinstance(description, str):
        return ""
    if _DO.search(description):
        return f"it said to `do`, and {action} is its own action"
    kind, _, item = action.partition("_")
    faced = _FACE.search(description)
    if kind == "place" and faced and faced.group(1) not in constants.place[item]["where"]:
        return f"{item} cannot be placed on {faced.group(1)}"
    return ""


def _insert_missing_links(subs: list[Any], chain: tuple[str, ...], env_doc: str) -> list[str]:
    """Insert into `subs` (in place) a coded sub-action for each link of `chain` no sub-action's goal covers,
    before the first sub-action whose goal is a later link (`check_goals`); one note per insertion. A
    collect_ link is inserted only in a gap, after a link the plan covers: a material the chain needs
    before the plan's first link is that first macro's to gather (one `gather` call, or a stored skill it
    composes), but the 1.5B's macro after a gap does what its recipe line says (craft from the inventory)
    and rarely gathers what the plan skipped (make_stone_pickaxe's stone: 1 of the 6 candidates tried)."""
    if len(chain) > _max_subactions():  # only the chain's last steps fit: the planner's tasks
        return []
    notes: list[str] = []

    def link_of(sub: Any) -> int | None:
        goal = sub.get("goal") if isinstance(sub, dict) else None
        return next((i for i, a in enumerate(chain) if goal_covers(goal, a)), None)

    for i, link in enumerate(chain):
        links = [k for k in map(link_of, subs) if k is not None]
        if i in links:
            continue
        if not link.startswith(("make_", "place_")) and not any(k < i for k in links):
            continue  # a material before the plan's first link: the first macro gathers it
        if len(subs) >= _max_subactions():
            notes.append(f"{link!r} is a link of the recipe chain no sub-action has as its goal; no room to "
                         f"insert it")
            continue
        at = next((j for j, sub in enumerate(subs) if (k := link_of(sub)) is not None and k > i), len(subs))
        subs.insert(at, _recipe_subaction(link, "inserted: the reply left out this link of the recipe chain",
                                          env_doc))
        notes.append(f"inserted {link!r} at {at}: no sub-action had this link of the recipe chain as goal")
    return notes


@dataclass
class SlowResult:
    """A decomposition and how it was obtained."""

    decomposition: Decomposition
    """The (repaired) decomposition."""
    repairs: list[str] = field(default_factory=list)
    """`check_goals` notes."""
    fallback: str | None = None
    """`RECIPE_GRAPH` when the model's reply never validated."""
    error: str = ""
    """Why the model's reply was not used (with a fallback)."""
    cuts: list[str] = field(default_factory=list)
    """Prompt parts cut to fit the context."""


class SlowAgent(StartedRole):
    """Task (+ the critic's feedback) in, typed `Decomposition` out."""

    def prompt(self, task: str, feedback: str = "none") -> RolePrompt:
        """The prompt's values: crafter's rules, the macro API, the task and earlier feedback."""
        cfg = self.config
        return RolePrompt(ROLE, {**documentation(cfg.api, cfg.env_doc),
                                 "task": describe_task(task, cfg.env_doc, self.start),
                                 "feedback": feedback or "none",
                                 **knowledge_values(ROLE, cfg.env_doc, cfg.examples)})

    def messages(self, task: str, feedback: str = "none") -> list[Message]:
        """The prompt, fitted to the context."""
        return fit(self.prompt(task, feedback), self.client, self.max_tokens)

    @property
    def max_tokens(self) -> int:
        """The decomposition's completion limit (`slow_max_tokens`)."""
        return slow_max_tokens(self.config)

    def sampling(self) -> SamplingParams:
        """The decomposition request's sampling (greedy, the agent's seed, `max_tokens`)."""
        return SamplingParams(temperature=0.0, max_tokens=self.max_tokens, seed=self.config.seed)

    def decompose_checked(self, task: str, feedback: str = "none") -> SlowResult:
        """Ask for the decomposition (greedy; schema-checked and re-asked by the client) and repair its goals.

        Raises:
            rlgpt.llm.LLMError: no schema-valid reply within the client's retries (or the call failed).
            rlgpt.agents.replies.ReplyValidationError: the reply repeats a sub-action name.
        """
        prompt = self.prompt(task, feedback)
        data = ask_fitted(prompt, self.client, self.max_tokens,
                          lambda messages: self.client.structured(
                              ROLE, messages, prompts.schema_for_role(ROLE), sampling=self.sampling()))
        data, repairs = check_goals(data, task, self.config.env_doc, self.start)
        return SlowResult(Decomposition.from_dict(data), repairs, cuts=prompt.cuts)

    def decompose(self, task: str, feedback: str = "none") -> Decomposition:
        """`decompose_checked`'s decomposition."""
        return self.decompose_checked(task, feedback).decomposition

    def decompose_or_fallback(self, task: str, feedback: str = "none") -> SlowResult:
        """`decompose_checked`, or, when the model's reply never validates, `recipe_decomposition`
        (marked ``fallback: recipe_graph``, counted in ``llm/fallbacks``); under the prompt-knowledge
        ablation (`AgentConfig.env_doc` not ``full``) `rl_decomposition` instead
        (``fallback: task_as_rl``)."""
        try:
            return self.decompose_checked(task, feedback)
        except Exception as exc:
            if not degradable(exc):
                raise
            note_fallback(self.client, ROLE)
            env_doc = self.config.env_doc
            if env_doc != "full":
                return SlowResult(rl_decomposition(task, env_doc), fallback=TASK_AS_RL, error=str(exc))
            return SlowResult(recipe_decomposition(task, self.start), fallback=RECIPE_GRAPH, error=str(exc))
