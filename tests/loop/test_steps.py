"""Every env step a run takes is counted by kind (`rlgpt.run.ledger`) and charged against ``--steps``: the
fast agent's probes (setup macros and warm-up moves included) and reward dry runs, trainings, validation
evaluations; test evaluations are reported but not charged. Probes and the reward are real (real Crafter,
real compiler, contained children); the model's replies are recorded (replay-only: an unrecorded request
is an error)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from crafter_helpers import chop_source, fenced
from loop_helpers import record, smoke_config, write_step

from rlgpt import layout
from rlgpt.agents.fast import DRAW_STRIDE, FastAgent
from rlgpt.agents.replies import Decomposition, SubAction
from rlgpt.config import RunConfig
from rlgpt.envs.crafter import CrafterEnv
from rlgpt.llm.config import build_client
from rlgpt.llm.context import fit
from rlgpt.macro.compiler import MacroSource, compile_macro
from rlgpt.macro.probe import probe_macro
from rlgpt.run.ledger import STEP_KINDS, StepLedger
from rlgpt.run.loop import training_budget
from rlgpt.run.records import result_record
from rlgpt.run.report import write_report
from rlgpt.run.runner import run

TASK = "place_table"
CHOP = SubAction("chop_tree", "walk to a tree and collect wood", "code", "wood", "fixed")
TABLE = SubAction("put_table", "place a crafting table", "code", "place_table", "fixed")
CHOP_CODE = fenced(chop_source("chop_tree", steps=40))
IDLE_CODE = "```python\ndef put_table(game):\n    for i in range(3):\n        yield \"noop\"\n```"
REWARD_CODE = ("```python\ndef reward(game, prev):\n    return float(game.inventory[\"wood\"] - "
               "prev.inventory[\"wood\"])\n```")


class CountingEnv(CrafterEnv):
    """Real Crafter that counts the steps played on it: the count the probe's own must equal."""

    def __init__(self) -> None:
        super().__init__(length=None)
        self.played = 0

    def step(self, action):
        self.played += 1
        return super().step(action)


def test_a_probe_counts_its_setup_warm_up_and_call_steps() -> None:
    chop = compile_macro(MacroSource("chop_tree", chop_source("chop_tree", steps=40)))
    idle = compile_macro(MacroSource("put_table", IDLE_CODE.strip("`").removeprefix("python\n")))
    env = CountingEnv()
    report = probe_macro(idle, seeds=(3, 4), calls_per_episode=2, warmup_steps=5, max_steps=32,
                         goal="place_table", env=env, setup=(chop,))
    assert report.env_steps == env.played
    # More than the recorded calls took: the setup macro's steps and the warm-up moves count too.
    assert report.env_steps > sum(c.steps for c in report.calls) + 2 * 2 * 5 - 1
    assert type(report).from_dict(report.to_dict()) == report


def cfg_for(run_dir: Path, *overrides: str) -> RunConfig:
    return smoke_config(run_dir, f"task={TASK}", "seed=1", "agents.probe_seeds=[0, 1]",
                        "agents.probe_warmup_steps=3", "agents.probe_repair_retries=0", *overrides)


def record_fast(cfg: RunConfig, decomposition: Decomposition, feedback: str = "none",
                iteration: int = 0) -> FastAgent:
    """Record the fast agent's replies (one macro per coded sub-action, the reward, the setup) for the
    loop's `iteration` (its macro searches sample from their own seeds: `FastAgent.run`'s draw)."""
    client = build_client(cfg.llm)
    agent = FastAgent(client, cfg.agents)
    replies = {CHOP.name: CHOP_CODE, TABLE.name: IDLE_CODE}
    for sub in decomposition.subactions:
        record(cfg, agent.macro_messages(TASK, sub, feedback), replies[sub.name],
               agent._sampling(iteration * DRAW_STRIDE))
    reward = fit(agent.reward_prompt(TASK, decomposition, feedback), client, cfg.agents.code_max_tokens)
    record(cfg, reward, REWARD_CODE, agent._sampling(0))
    names = [s.name for s in decomposition.subactions]
    setup = agent.setup_prompt(TASK, decomposition, names, feedback)
    reply = {"horizon": 200, "observation": ["view", "vector"], "macros": []}
    record(cfg, fit(setup, client, cfg.agents.json_max_tokens), reply, agent.setup_sampling(),
           agent.setup_schema(names))
    return agent


def recount_probes(cfg: RunConfig, fast: dict) -> int:
    """Every candidate of ``fast.json`` probed again on a counting env: the steps its probes played."""
    agents, played, setup = cfg.agents, 0, ()
    for choice in fast["macros"]:
        for candidate in choice["candidates"]:
            if candidate["probe"] is None:
                continue
            env = CountingEnv()
            goal = candidate["probe"]["goal"] or ""  # a call ends at its goal, in the recount too
            compiled = compile_macro(MacroSource(choice["subaction"], candidate["code"], goal=goal))
            probe_macro(compiled, seeds=agents.probe_episode_seeds,
                        calls_per_episode=agents.probe_calls_per_episode,
                        warmup_steps=agents.probe_warmup_steps, max_steps=agents.probe_max_steps,
                        goal=candidate["probe"]["goal"], env=env, setup=setup)
            played += env.played
        best = choice["candidates"][choice["best"]]
        setup = (*setup, compile_macro(MacroSource(choice["subaction"], best["code"],
                                                   goal=best["probe"]["goal"] or "")))
    return played


def prefill_training(it_dir: Path, steps: int, eval_steps: int, ok: bool = True) -> None:
    """A finished training record (a failed one, with ``ok`` False, is never the best iteration)."""
    report = {"task": TASK, "episodes": 4, "env_steps": steps, "success_rate": 0.0, "split": "validation",
              "achievement_success": {TASK: 0.0}, "mean_episode_steps": 200.0, "steps": eval_steps}
    write_step(layout.training_record(it_dir), {
        "ok": ok, "error": "" if ok else "died", "steps": steps, "eval_steps": eval_steps, "wall_time_s": 1.0,
        "success_rate": 0.0, "report": report if ok else None, "run_dir": "x", "attempts": 1})


def prefill_iteration(it_dir: Path, decomposition: Decomposition, steps: int, eval_steps: int,
                      ok: bool = True) -> None:
    """Iteration `it_dir` finished up to its critic, which asked the fast agent again ("x", "y")."""
    write_step(it_dir / "slow.json", {"new": True, "feedback": "none",
                                      "decomposition": decomposition.to_dict()})
    write_step(it_dir / "fast.json", {
        "feedback": "none", "macros": [], "reward": {"code": None, "attempts": []},
        "setup": {"horizon": 200, "observation": ["view", "vector"], "macros": []},
        "reply": {"macros": [], "reward_code": "", "observation": ["view", "vector"], "horizon": 200}})
    write_step(it_dir / "probes.json", [])
    prefill_training(it_dir, steps, eval_steps, ok)
    write_step(it_dir / "critic.json", {"by": "critic", "target": "fast", "problems": ["x"],
                                        "suggestions": ["y"]})


FEEDBACK = "Problems: x\nSuggestions: y"


def test_every_probe_and_reward_check_step_is_counted_and_charged(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    # Done by threshold after the iteration (no critic); the trusted goal macro offered (off by default).
    cfg = cfg_for(run_dir, "success_threshold=0", "agents.goal_fallback=true")
    decomposition = Decomposition((CHOP, TABLE))
    write_step(run_dir / "iter_000" / "slow.json", {"new": True, "feedback": "none",
                                                    "decomposition": decomposition.to_dict()})
    record_fast(cfg, decomposition)
    prefill_training(run_dir / "iter_000", 1024, 600)  # the training is not what this test is about

    summary = run(cfg)

    fast = json.loads((run_dir / "iter_000" / "fast.json").read_text())
    candidates = [c for m in fast["macros"] for c in m["candidates"]]
    # chop_tree's calls ended at their goal (one wood each); the idle put_table missed its goal, so the
    # trusted goal macro was probed after it.
    assert [c["written_by"] for c in candidates] == ["model", "model", "expert"]
    # Probes follow the run seed (1): worlds 1000 and 1001, not the configured 0 and 1.
    assert {c["seed"] for cand in candidates for c in cand["probe"]["calls"]} == {1000, 1001}
    probe = sum(c["probe"]["env_steps"] for c in candidates)
    # Each probe's count is every step it played on the env (warm-up moves and setup macros included).
    assert probe == recount_probes(cfg, fast) > sum(c["steps"] for cand in candidates
                                                    for c in cand["probe"]["calls"])
    by_kind = summary["steps_by_kind"]
    assert by_kind == {**dict.fromkeys(STEP_KINDS, 0), "probe": probe,
                       "reward_check": cfg.agents.reward_dry_run_steps, "train": 1024, "eval": 600}
    assert fast["steps_by_kind"] == {"probe": probe, "reward_check": cfg.agents.reward_dry_run_steps}
    assert summary["steps_used"] == probe + cfg.agents.reward_dry_run_steps + 1024 + 600
    assert summary["iterations"][0]["steps_by_kind"] == by_kind


def test_a_spent_budget_starts_no_iteration_and_probes_can_end_the_run(tmp_path: Path) -> None:
    decomposition = Decomposition((CHOP,))
    # Iteration 0 spent the whole budget (4096): iteration 1 never starts though the critic asked for one.
    spent = tmp_path / "spent"
    cfg = cfg_for(spent, "max_inner=2")
    prefill_iteration(spent / "iter_000", decomposition, 3500, 600)
    summary = run(cfg)
    assert len(summary["iterations"]) == 1 and not (spent / "iter_001").exists()
    assert summary["steps_used"] == 4100

    # Iteration 0 left 246 steps: iteration 1 starts, but after its probes and reward checks less than its
    # evaluation's bound (4 episodes of 200 steps) is left. It does not train, and the run ends.
    left = tmp_path / "left"
    cfg = cfg_for(left, "max_inner=3")
    prefill_iteration(left / "iter_000", decomposition, 3250, 600)
    record_fast(cfg, decomposition, FEEDBACK, iteration=1)
    summary = run(cfg)
    last = summary["iterations"][-1]
    assert len(summary["iterations"]) == 2 and not (left / "iter_002").exists()
    assert last["stopped"] == "budget" and not last["ok"] and last["steps_by_kind"]["probe"] > 0
    assert not (left / "iter_001" / layout.TRAINING_JSON).exists()
    assert last["steps_by_kind"]["reward_check"] == cfg.agents.reward_dry_run_steps
    assert summary["steps_used"] == 3850 + last["steps_by_kind"]["probe"] + cfg.agents.reward_dry_run_steps
    assert summary["best"] == "iter_000"


@pytest.mark.slow
def test_a_training_gets_what_is_left_and_the_budget_holds_within_one_batch(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    # The idle macro never reaches its goal and the setup lists none: the training is on primitives, so
    # one Sample Factory batch is 256 primitive steps.
    cfg = cfg_for(run_dir, "max_inner=2", "agents.goal_fallback=false", "success_threshold=0")
    decomposition = Decomposition((TABLE,))
    prefill_iteration(run_dir / "iter_000", decomposition, 2900, 0, ok=False)  # never the best
    record_fast(cfg, decomposition, FEEDBACK, iteration=1)

    summary = run(cfg)

    it = run_dir / "iter_001"
    fast = json.loads((it / "fast.json").read_text())
    before = 2900 + sum(fast["steps_by_kind"].values())
    budget = json.loads((it / "train" / "job.json").read_text())["config"]["steps"]
    assert budget == training_budget(cfg.iteration_budget(cfg.steps), cfg.steps - before, 4 * 200) > 0
    assert budget < cfg.iteration_budget(cfg.steps)  # what was left, not the iteration's share
    training = json.loads((it / layout.TRAINING_JSON).read_text())
    assert training["ok"], training["error"]
    by_kind = summary["steps_by_kind"]
    assert by_kind["train"] == 2900 + training["steps"] and by_kind["eval"] == training["eval_steps"]
    assert 0 < training["eval_steps"] <= 4 * 200
    assert summary["steps_used"] <= cfg.steps + cfg.train.ppo.batch_size
    # The selected policy's test episodes are reported, not charged.
    assert summary["best"] == "iter_001"
    test = json.loads((it / layout.TEST_JSON).read_text())
    assert by_kind["test_eval"] == test["eval_steps"] > 0 and test["report"]["split"] == "test"
    assert summary["steps_used"] == sum(n for k, n in by_kind.items() if k != "test_eval")


def test_test_evaluation_is_reported_but_not_charged_and_old_summaries_still_report(tmp_path: Path) -> None:
    cfg = smoke_config(tmp_path / "run")
    ledger = StepLedger({"train": 1000, "probe": 30, "eval": 200})
    ledger.add("test_eval", 400)
    assert ledger.used == 1230 and ledger.by_kind()["test_eval"] == 400
    new = result_record(cfg, "collect_wood", "rlgpt", 4096, ledger.by_kind(), {"success_rate": 0.5}, [])
    assert new["steps_used"] == 1230 and new["steps_by_kind"]["test_eval"] == 400
    assert set(new["steps_by_kind"]) == set(STEP_KINDS)
    with pytest.raises(ValueError, match="unknown step kind"):
        ledger.add("warmup", 1)
    # A summary from before steps were counted by kind still reports (its steps_used as it counted then).
    old = {k: v for k, v in new.items() if k != "steps_by_kind"} | {"steps_used": 2048, "task": "place_table"}
    dirs = []
    for name, summary in (("new", new), ("old", old)):
        (tmp_path / name).mkdir()
        (tmp_path / name / layout.SUMMARY_JSON).write_text(json.dumps(summary))
        dirs.append(tmp_path / name)
    text = write_report(dirs, tmp_path / "report")["markdown"].read_text()
    assert "| collect_wood | rlgpt | 1 | 1,000 | 30 | 0 | 0 | 200 | 400 | 1,230 |" in text
    assert "| place_table | rlgpt | 1 | n/a | n/a | n/a | n/a | n/a | n/a | 2,048 [1] |" in text
