"""The loop at its seams, with recorded replies served through the real client's cache (replay-only: a
request the test did not record is an error, so these also prove which requests the loop makes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from crafter_helpers import chop_source
from loop_helpers import (
    SMOKE,
    assert_error_line,
    cli,
    json_sampling,
    record,
    role_schema,
    slow_sampling,
    smoke_config,
    write_step,
)

from rlgpt import layout, rundir
from rlgpt.agents.critic import Critic, critic_schema
from rlgpt.agents.fast import FastAgent
from rlgpt.agents.replies import Decomposition, SubAction
from rlgpt.agents.slow import SlowAgent
from rlgpt.llm.client import LLMClient
from rlgpt.llm.config import build_client
from rlgpt.llm.types import Completion
from rlgpt.run.loop import feedback_text
from rlgpt.run.runner import run

TASK = "collect_wood"
FIRST = Decomposition((SubAction("find_tree", "walk to a tree", "rl", "", "needs exploring"),))
SECOND = Decomposition((SubAction("chop_tree", "walk to a tree and collect wood", "code", "wood", "fixed"),))


def fast_without_code(horizon: int = 200) -> dict:
    """A fast step that kept no macro and no reward (what a run records when every candidate failed)."""
    return {"feedback": "none", "macros": [], "reward": {"code": None, "attempts": []},
            "setup": {"horizon": horizon, "observation": ["view", "vector"], "macros": []},
            "reply": {"macros": [], "reward_code": "", "observation": ["view", "vector"], "horizon": horizon}}


def evaluation(success: float) -> dict:
    """A training.json as the loop reads it back (keys sorted)."""
    return json.loads(json.dumps(_evaluation(success), sort_keys=True))


def _evaluation(success: float) -> dict:
    report = {"task": TASK, "episodes": 4, "env_steps": 1024, "success_rate": success,
              "achievement_success": {"collect_wood": success}, "mean_episode_steps": 200.0,
              "mean_return": success, "deterministic": False, "macro_stats": {}, "traces": ["noop -> noop"]}
    return {"ok": True, "error": "", "steps": 1024, "wall_time_s": 1.0, "success_rate": success,
            "report": report, "run_dir": "x"}


def prefill_iteration(it_dir: Path, success: float, record_name: str = layout.TRAINING_JSON) -> None:
    """An iteration whose fast step and training already finished (as a killed run leaves them); an older
    run directory has its training record under `layout.LEGACY_TRAINING_JSON`."""
    write_step(it_dir / "fast.json", fast_without_code())
    write_step(it_dir / "probes.json", [])
    (it_dir / "reward.py").write_text("def reward(game, prev):\n    return 0.0\n")
    write_step(it_dir / record_name, evaluation(success))


def replay_client(cfg) -> LLMClient:
    return build_client(cfg.llm)


DONE = {"target": "done", "subaction": "", "change": "", "problems": [], "suggestions": []}
"""The critic's "done" reply (its schema names no sub-action here: `critic_schema`)."""


def test_critic_targets_slow_then_done(tmp_path: Path) -> None:
    cfg = smoke_config(tmp_path / "run", "max_outer=2", "max_inner=2", f"task={TASK}")
    client = replay_client(cfg)
    slow, critic = SlowAgent(client, cfg.agents), Critic(client, cfg.agents)
    # Iteration 0: decomposed, trained, and the critic asked for a new decomposition.
    run_dir = tmp_path / "run"
    write_step(run_dir / "iter_000" / "slow.json", {"new": True, "feedback": "none",
                                                    "decomposition": FIRST.to_dict()})
    prefill_iteration(run_dir / "iter_000", 0.0, layout.LEGACY_TRAINING_JSON)  # an older run resumes
    slow_feedback = {"by": "critic", "target": "slow", "problems": ["find_tree never yields wood"],
                     "suggestions": ["make chopping a coded sub-action"]}
    write_step(run_dir / "iter_000" / "critic.json", slow_feedback)
    # What the slow agent answers to the critic's feedback, and the critic's verdict on iteration 1.
    record(cfg, slow.messages(TASK, feedback_text(slow_feedback)), SECOND.to_dict(), slow_sampling(cfg),
           role_schema("slow"))
    prefill_iteration(run_dir / "iter_001", 0.5)
    critic_messages = critic.messages(TASK, 2, SECOND, [], evaluation(0.5)["report"], [])
    record(cfg, critic_messages, DONE, json_sampling(cfg),
           critic_schema(SECOND))

    summary = run(cfg)

    new = json.loads((run_dir / "iter_001" / "slow.json").read_text())
    assert new["new"] is True and "find_tree never yields wood" in new["feedback"]
    assert new["prompt"] == slow.messages(TASK, feedback_text(slow_feedback))  # the prompt is kept
    assert Decomposition.from_dict(new["decomposition"]) == SECOND
    assert json.loads((run_dir / "iter_001" / "critic.json").read_text())["target"] == "done"
    assert not (run_dir / "iter_002").exists()  # done ends the loop though an inner iteration was left
    assert [(it["outer"], it["inner"], it["critic"]) for it in summary["iterations"]] == [(0, 0, "slow"),
                                                                                         (1, 0, "done")]
    assert summary["best"] == "iter_001" and summary["success_rate"] == 0.5
    assert summary["steps_used"] == 2048 and summary["steps_budget"] == cfg.steps
    assert json.loads((run_dir / "summary.json").read_text()) == summary
    assert summary["llm"]["llm/cache_hits"] == 2.0  # exactly the two recorded replies were asked for
    # Every phase's wall time, in the order the loop ran them.
    phases = [json.loads(line) for line in (run_dir / "phases.jsonl").read_text().splitlines()]
    assert [(p["iteration"], p["phase"]) for p in phases] == [
        (i, ph) for i in (0, 1) for ph in ("slow", "fast", "train", "critic")]
    assert all(p["task"] == TASK and p["wall_s"] >= 0 for p in phases)
    # The finished run replays offline with the same command: every step is read, nothing is asked.
    again = cli("run", "--config", SMOKE, "--run-dir", str(run_dir), "--set", "max_outer=2", "--set",
                "max_inner=2", "--set", "llm.replay_only=true", "--task", TASK)
    assert again.returncode == 0, again.stderr
    replayed = json.loads((run_dir / "summary.json").read_text())
    assert {**replayed, "llm": None} == {**summary, "llm": None} and replayed["llm"]["llm/cache_hits"] == 0


def test_a_failed_training_counts_its_steps_and_is_never_the_best(tmp_path: Path) -> None:
    cfg = smoke_config(tmp_path / "run", "max_outer=1", "max_inner=2", f"task={TASK}")
    client = replay_client(cfg)
    critic = Critic(client, cfg.agents)
    run_dir = tmp_path / "run"
    write_step(run_dir / "iter_000" / "slow.json", {"new": True, "feedback": "none",
                                                    "decomposition": FIRST.to_dict()})
    prefill_iteration(run_dir / "iter_000", 0.0)
    # Iteration 0's training died after 700 steps, every attempt: a failed record, its steps spent.
    failed = {"ok": False, "error": "training process exited with status -9 without a result", "steps": 700,
              "wall_time_s": 3.0, "success_rate": 0.0, "report": None, "run_dir": "x", "attempts": 3}
    write_step(run_dir / "iter_000" / layout.TRAINING_JSON, failed)
    record(cfg, critic.messages(TASK, 1, FIRST, [], None, [f"training failed: {failed['error']}"]),
           {**DONE, "target": "fast", "problems": ["training died"], "suggestions": ["retry"]},
           json_sampling(cfg), critic_schema(FIRST))
    prefill_iteration(run_dir / "iter_001", 0.0)  # finished, and no better than the failed one's 0
    record(cfg, critic.messages(TASK, 2, FIRST, [], evaluation(0.0)["report"], []),
           DONE, json_sampling(cfg), critic_schema(FIRST))

    summary = run(cfg)

    assert [it["ok"] for it in summary["iterations"]] == [False, True]
    assert summary["best"] == "iter_001" and summary["checkpoint"].endswith("iter_001/train")
    assert summary["steps_used"] == 700 + 1024


def test_critic_targets_fast_and_the_threshold_ends_without_asking(tmp_path: Path) -> None:
    cfg = smoke_config(tmp_path / "run", "max_outer=1", "max_inner=3", f"task={TASK}",
                       "success_threshold=0.75", "wandb=true")
    client = replay_client(cfg)
    critic = Critic(client, cfg.agents)
    run_dir = tmp_path / "run"
    write_step(run_dir / "iter_000" / "slow.json", {"new": True, "feedback": "none",
                                                    "decomposition": FIRST.to_dict()})
    prefill_iteration(run_dir / "iter_000", 0.25)
    fast_feedback = {"target": "fast", "subaction": "", "change": "", "problems": ["no reward"],
                     "suggestions": ["reward wood"]}
    record(cfg, critic.messages(TASK, 1, FIRST, [], evaluation(0.25)["report"], []), fast_feedback,
           json_sampling(cfg), critic_schema(FIRST))
    prefill_iteration(run_dir / "iter_001", 0.75)

    summary = run(cfg)

    carried = json.loads((run_dir / "iter_001" / "slow.json").read_text())
    assert carried["new"] is False and Decomposition.from_dict(carried["decomposition"]) == FIRST
    assert json.loads((run_dir / "iter_001" / "critic.json").read_text())["by"] == "threshold"
    assert not (run_dir / "iter_002").exists()
    assert [it["critic"] for it in summary["iterations"]] == ["fast", "done"]
    # One offline W&B run for the whole `rlgpt run`, with the loop's metrics and the code as an artifact.
    runs = list((run_dir / "wandb").glob("offline-run-*"))
    assert len(runs) == 1
    logged = next(runs[0].glob("*.wandb")).read_bytes()
    for key in (b"eval/success_rate", b"train/steps", b"llm/cache_hits", b"code-run", b"budget/steps_train",
                b"budget/total_steps_eval"):
        assert key in logged, key


def test_a_reply_that_never_validates_falls_back_and_the_run_goes_on(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    cfg = smoke_config(run_dir, "llm.schema_retries=0")
    slow = SlowAgent(replay_client(cfg), cfg.agents)
    record(cfg, slow.messages(cfg.task), "Sure! Here is the decomposition: chop trees.", slow_sampling(cfg),
           role_schema("slow"))
    proc = cli("run", "--config", SMOKE, "--run-dir", str(run_dir),
               "--set", f"llm.cache_dir={run_dir / 'llm_cache'}", "--set", "llm.replay_only=true",
               "--set", "llm.schema_retries=0")
    # The slow reply never validated: the recipe graph's decomposition stands in (recorded as such) and the
    # run goes on to the fast agent, whose requests this replay-only run has not recorded: that is the one
    # error line (a replay must not diverge silently), and the slow step is kept for the resume.
    assert_error_line(proc, "replay-only", "fast")
    slow_step = json.loads((run_dir / "iter_000" / "slow.json").read_text())
    assert slow_step["fallback"] == "recipe_graph" and slow_step["decomposition"]["subactions"]


def test_unreachable_server_is_one_error_line(tmp_path: Path) -> None:
    from rlgpt.llm.serve import free_port

    url = f"http://127.0.0.1:{free_port()}/v1"
    proc = cli("run", "--config", SMOKE, "--run-dir", str(tmp_path / "run"), "--llm", url,
               "--set", "llm.max_retries=0", timeout=300)
    assert_error_line(proc, "127.0.0.1")


def test_bad_llm_flag_and_task_are_one_error_line(tmp_path: Path) -> None:
    assert_error_line(cli("run", "--task", "colect_wood", "--run-dir", str(tmp_path / "a")), "collect_wood")
    assert_error_line(cli("run", "--llm", "gpt", "--run-dir", str(tmp_path / "b")), "--llm")
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_raw_control_characters_inside_json_strings_are_accepted(tmp_path: Path) -> None:
    # The 1.5B's critic wrote code with literal newlines inside a JSON string (llama.cpp's grammar lets
    # them through); a strict parser rejected all three attempts and ended a 20-minute iteration.
    cfg = smoke_config(tmp_path / "run", f"task={TASK}")
    critic = Critic(replay_client(cfg), cfg.agents)
    report = evaluation(0.0)["report"]
    text = ('{"target": "fast", "subaction": "", "change": "", "problems": ["line one\nline\ttwo"], '
            '"suggestions": ["```python\nx = 1\n```"]}')
    messages = critic.messages(TASK, 1, FIRST, [], report, [])
    record(cfg, messages, text, json_sampling(cfg), critic_schema(FIRST))
    feedback = critic.review(TASK, 1, FIRST, [], report, [])
    assert feedback.target == "fast" and feedback.problems == ("line one\nline\ttwo",)
    assert feedback.suggestions == ("```python\nx = 1\n```",)


def test_a_run_dir_in_use_is_one_error_line_and_a_killed_holder_leaves_no_lock(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    holder_code = ("import sys; from pathlib import Path; from rlgpt import layout, rundir\n"
                   "with rundir.locked_run_dir(Path(sys.argv[1]), layout.RUN_LOCK):\n"
                   "    print('held', flush=True); sys.stdin.read()\n")
    holder = subprocess.Popen([sys.executable, "-c", holder_code, str(run_dir)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        second = cli("run", "--config", SMOKE, "--run-dir", str(run_dir), "--mode", "ppo")
        assert_error_line(second, str(run_dir), f"in use by rlgpt pid {holder.pid}")
        assert not (run_dir / "run.yaml").exists()  # the second run wrote nothing
    finally:
        holder.kill()
        holder.wait()
    # The kernel dropped the killed holder's lock: the directory can be taken again at once.
    with rundir.locked_run_dir(run_dir, layout.RUN_LOCK):
        assert (run_dir / layout.RUN_LOCK).read_text() == f"rlgpt pid {os.getpid()}"


class _Planner:
    """A backend that answers the slow agent with `SECOND` and anything else with text that is no valid
    reply (the reward, the setup and the critic degrade); it records every request."""

    model_id = "scripted"

    def __init__(self) -> None:
        self.requests: list[list] = []

    def complete(self, messages, schema, sampling) -> Completion:
        self.requests.append(messages)
        slow = schema is not None and "subactions" in json.dumps(schema)
        return Completion(json.dumps(SECOND.to_dict()) if slow else "no", 10, 10, "stop", self.model_id)

    def complete_many(self, messages, samplings) -> list[Completion]:
        return [self.complete(messages, None, s) for s in samplings]


CHOP_PLAN = Decomposition((SubAction("chop", "walk to a tree and collect wood", "code", "wood", "fixed"),))
"""One coded sub-action: collect a wood."""


def prefill_chop(run_dir: Path, goal_rate: float) -> dict:
    """Iteration 0 decomposed as `CHOP_PLAN` and trained (success 0), its fast step keeping a model-written
    chop macro whose probe reached the goal at `goal_rate`; returns that fast step's record."""
    write_step(run_dir / "iter_000" / "slow.json",
               {"new": True, "feedback": "none", "decomposition": CHOP_PLAN.to_dict()})
    prefill_iteration(run_dir / "iter_000", 0.0)
    fast = json.loads((run_dir / "iter_000" / "fast.json").read_text())
    fast["macros"] = [{"subaction": "chop", "best": 0, "written_by": "model", "candidates": [
        {"index": 0, "code": chop_source("chop"), "written_by": "model",
         "probe": {"goal": "wood", "goal_rate": goal_rate}}]}]
    write_step(run_dir / "iter_000" / "fast.json", fast)
    return fast


def test_a_re_decomposition_keeps_the_earlier_iterations_verified_macro(tmp_path: Path) -> None:
    """Iteration 0 kept a model-written chop macro that reached its goal (wood) in every probe call; the
    critic sent the run back to the slow agent, whose new decomposition names the goal under another name.
    Iteration 1's fast step tries the earlier macro first and keeps it without asking the model for it."""
    cfg = smoke_config(tmp_path / "run", "max_outer=2", "max_inner=1", f"task={TASK}",
                       "llm.replay_only=false")
    run_dir = tmp_path / "run"
    prefill_chop(run_dir, 1.0)
    write_step(run_dir / "iter_000" / "critic.json",
               {"by": "critic", "target": "slow", "problems": ["x"], "suggestions": ["y"]})
    write_step(run_dir / "iter_001" / layout.TRAINING_JSON, evaluation(1.0))  # its training: done
    backend = _Planner()

    run(cfg, backend=backend)

    kept = json.loads((run_dir / "iter_001" / "fast.json").read_text())["macros"][0]
    assert kept["subaction"] == "chop_tree" and kept["best"] == 0 and kept["written_by"] == "model"
    assert kept["search"]["stopped"] == "carried" and kept["search"]["sampled"] == 0
    assert kept["candidates"][0]["carried_from"] == "iter_000"
    assert kept["candidates"][0]["code"].startswith(chop_source("chop").rstrip())
    assert "def chop_tree(game)" in (run_dir / "iter_001" / "macros.yaml").read_text()
    assert backend.requests  # the slow agent was asked (its reply is the new decomposition)


def test_a_slow_verdict_on_a_plan_whose_macros_all_work_keeps_the_decomposition(tmp_path: Path) -> None:
    """The critic asks the slow agent for a new decomposition although every coded sub-action's macro reached
    its goal and the plan covers the task: the verdict becomes "fast" (recorded as overruled), the next
    iteration keeps the decomposition and its fast step keeps the macro without asking the model."""
    from rlgpt.run.loop import workable_plan

    cfg = smoke_config(tmp_path / "run", "max_outer=2", "max_inner=2", f"task={TASK}",
                       "llm.replay_only=false")
    run_dir = tmp_path / "run"
    plan = CHOP_PLAN
    fast = prefill_chop(run_dir, 0.5)
    assert "decomposition is kept" in workable_plan(TASK, plan, fast)
    assert workable_plan("make_wood_pickaxe", plan, fast) == ""  # the plan does not cover that task
    assert workable_plan(TASK, plan, {"macros": []}) == ""  # no macro reached the goal
    write_step(run_dir / "iter_001" / layout.TRAINING_JSON, evaluation(1.0))  # ends the run at threshold

    class SlowCritic(_Planner):
        def complete(self, messages, schema, sampling) -> Completion:
            if schema is not None and "target" in json.dumps(schema):
                self.requests.append(messages)
                verdict = {**DONE, "target": "slow", "problems": ["x"], "suggestions": ["y"]}
                return Completion(json.dumps(verdict), 10, 10, "stop", self.model_id)
            return super().complete(messages, schema, sampling)

    run(cfg, backend=SlowCritic())

    critic = json.loads((run_dir / "iter_000" / "critic.json").read_text())
    assert critic["target"] == "fast" and critic["overruled"].startswith("slow: every coded sub-action")
    again = json.loads((run_dir / "iter_001" / "slow.json").read_text())
    assert again["new"] is False and Decomposition.from_dict(again["decomposition"]) == plan
    kept = json.loads((run_dir / "iter_001" / "fast.json").read_text())["macros"][0]
    assert kept["candidates"][0]["carried_from"] == "iter_000" and kept["best"] == 0


def test_a_slow_verdict_with_no_outer_iteration_left_goes_to_the_fast_agent(tmp_path: Path,
                                                                          monkeypatch) -> None:
    """At max_outer 1 the critic asks for a new decomposition after the first of two inner iterations: no
    outer iteration is left, so the verdict becomes "fast" (recorded as overruled) and the second iteration
    runs on the same decomposition, its fast step carrying the critic's problems (the run does not end with
    half its budget unspent)."""
    cfg = smoke_config(tmp_path / "run", "max_outer=1", "max_inner=2", f"task={TASK}",
                       "llm.replay_only=false")
    run_dir = tmp_path / "run"
    write_step(run_dir / "iter_000" / "slow.json", {"new": True, "feedback": "none",
                                                    "decomposition": FIRST.to_dict()})
    prefill_iteration(run_dir / "iter_000", 0.0)
    write_step(run_dir / "iter_001" / layout.TRAINING_JSON, evaluation(1.0))  # ends the run at threshold

    class SlowCritic(_Planner):
        def complete(self, messages, schema, sampling) -> Completion:
            if schema is not None and "target" in json.dumps(schema):
                self.requests.append(messages)
                verdict = {**DONE, "target": "slow", "problems": ["the plan never reaches a tree"],
                           "suggestions": ["add a sub-action that walks to a tree"]}
                return Completion(json.dumps(verdict), 10, 10, "stop", self.model_id)
            return super().complete(messages, schema, sampling)

    draws: list[int] = []
    searched = FastAgent.run

    def run_recording(agent, *args, draw: int = 0, **kwargs):
        draws.append(draw)
        return searched(agent, *args, draw=draw, **kwargs)

    monkeypatch.setattr(FastAgent, "run", run_recording)
    summary = run(cfg, backend=SlowCritic())

    critic = json.loads((run_dir / "iter_000" / "critic.json").read_text())
    assert critic["target"] == "fast" and critic["overruled"].startswith("slow: no outer iteration is left")
    assert [it["dir"] for it in summary["iterations"]] == ["iter_000", "iter_001"]
    again = json.loads((run_dir / "iter_001" / "slow.json").read_text())
    assert again["new"] is False and Decomposition.from_dict(again["decomposition"]) == FIRST
    fast = json.loads((run_dir / "iter_001" / "fast.json").read_text())
    assert "the plan never reaches a tree" in fast["feedback"]
    # The second iteration's searches draw their own sampling seeds (the first's would replay its replies).
    assert draws == [1]  # iteration 0 was prefilled
