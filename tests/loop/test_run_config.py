"""RunConfig: one typed place for the loop's knobs, overridable like TrainConfig."""

from __future__ import annotations

import pytest
from loop_helpers import assert_error_line, cli

from rlgpt.cli import build_parser
from rlgpt.config import ConfigError, RunConfig, builtin_config_path, load_run_config


def test_defaults_files_and_nested_overrides() -> None:
    cfg = load_run_config(builtin_config_path("run.yaml"), ["agents.probe_seeds=[3, 4]",
                                                             "train.ppo.rollout=32", "llm.backend=http",
                                                             "max_inner=4"])
    assert cfg.task == "make_wood_pickaxe" and cfg.agents.probe_seeds == (3, 4)
    assert cfg.train.ppo.rollout == 32 and cfg.llm.backend == "http" and cfg.iterations == cfg.max_outer * 4
    assert cfg.steps_per_iteration == cfg.steps // cfg.iterations == cfg.train.steps
    assert load_run_config(None, ["agents.probe_seeds=1,2"]).agents.probe_seeds == (1, 2)
    assert str(RunConfig(task="a+b", mode="ppo").resolved_run_dir()) == "runs/a_b-ppo-seed0"
    assert RunConfig(mode="ppo", steps=1000).steps_per_iteration == 1000  # one training, whole budget
    # Budget marks: a list or "a,b" on the command line; [] turns them off.
    assert load_run_config(None, ["eval_marks=[512, 1024]"]).eval_marks == (512, 1024)
    assert load_run_config(None, ["eval_marks=512,1024"]).eval_marks == (512, 1024)
    assert load_run_config(None, ["eval_marks=[]"]).eval_marks == ()
    # `make run` measures the model's own code: the primitives level and no trusted goal macro.
    main = load_run_config(builtin_config_path("run.yaml"), [])
    assert (main.agents.api, main.agents.goal_fallback) == ("primitives", False)


@pytest.mark.parametrize("override, fragment", [
    ("mode=dqn", "mode must be one of"),
    ("steps=100", "at least one training batch"),
    ("llm.backend=cloud", "llm.backend"),
    ("agents.samples=0", "agents.samples"),
    ("max_outer=0", "max_outer"),
    ("task=colect_wood", "collect_wood"),
    ("nonsense=1", "unknown config key"),
    ("eval_marks=[0,1000]", "eval_marks"),
    ("eval_marks=[5e4,1e5x]", "eval_marks"),
    ("train.marks=[-1]", "marks must be > 0"),
    ("success_threshold=-0.1", "success_threshold"),
])
def test_bad_values_fail_with_the_key(override: str, fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment):
        load_run_config(None, [override])


def test_cli_run_flags_map_to_the_config() -> None:
    args = build_parser().parse_args(["run", "--task", "collect_wood", "--llm", "http://h:1/v1", "--mode",
                                      "code", "--set", "llm.model=served"])
    assert args.task == "collect_wood" and args.llm == "http://h:1/v1" and args.mode == "code"


def test_the_default_run_can_train_and_a_budget_too_small_for_its_evaluations_is_refused() -> None:
    from rlgpt.config import RUN_EPISODE_LENGTH
    from rlgpt.envs.tasks import DEFAULT_EPISODE_LENGTH

    cfg = load_run_config(None, [])  # `rlgpt run --task T` with nothing else
    assert cfg.train.env.episode_length == RUN_EPISODE_LENGTH == cfg.eval_length(cfg.task)
    assert cfg.steps_per_iteration - cfg.eval_bound(cfg.task) >= cfg.train.ppo.batch_size
    # A length set by the user stays; the Crafter benchmark keeps crafter's own.
    assert load_run_config(None, ["train.env.episode_length=300"]).eval_length("collect_wood") == 300
    crafter = load_run_config(None, ["task=crafter", "steps=1000000"])
    assert crafter.train.env.episode_length is None
    assert crafter.eval_length("crafter") == DEFAULT_EPISODE_LENGTH
    # Iterations of 5,000 steps cannot pay for 20 evaluation episodes of 1,000 steps: one clear error naming
    # what would (4 x (20,000 + one 1,024-step batch)), not a run that plans, writes code and trains nothing.
    with pytest.raises(ConfigError, match="raise --steps to at least 84096"):
        load_run_config(None, ["steps=20000"])
    with pytest.raises(ConfigError, match="raise --steps to at least"):
        load_run_config(None, ["task=crafter"])
    assert load_run_config(None, ["steps=20000", "mode=ppo"]).steps == 20000  # no validation episodes


def test_a_plan_whose_links_cannot_pay_for_their_evaluations_is_refused() -> None:
    from rlgpt.run.loop import Loop

    loop = Loop(load_run_config(None, ["steps=400000"]), None, None, None)  # type: ignore[arg-type]
    loop.check_link_budget(400_000, ["collect_wood", "place_table"])  # 50k per iteration: trains
    with pytest.raises(ConfigError, match="plan.s 5 subtasks 80000 steps and each of its 4 iterations 20000, "
                                          "nothing left to train .*raise --steps to at least 420480"):
        loop.check_link_budget(400_000, ["collect_wood", "place_table", "make_wood_pickaxe", "collect_stone",
                                         "place_furnace"])


@pytest.mark.parametrize("task, length", [("collect_wood", 300), ("crafter", 10_000)])
def test_a_training_plays_the_fast_agents_horizon_but_the_crafter_benchmark_plays_its_own(task, length,
                                                                                         tmp_path) -> None:
    # The benchmark's reward counts each achievement's first unlock in a 10,000-step episode: a horizon of
    # 300 would train on episodes that can never unlock what takes longer.
    from rlgpt.agents.replies import FastReply
    from rlgpt.run.loop import Loop

    loop = Loop(load_run_config(None, [f"task={task}", "steps=1000000", "max_outer=1", "max_inner=1"]),
                None, None, None)  # type: ignore[arg-type]
    [job] = loop.candidate_jobs(tmp_path, task, FastReply((), "", ("view",), 300), 50_000, None, (), (), 0)
    assert job.config.env.episode_length == length
    assert job.eval_episode_length == loop.cfg.eval_length(task)


@pytest.mark.parametrize("mode, steps, fragment", [
    ("code", 10, "raise --steps to at least 4200"),
    ("ppo", 10, "raise --steps to at least 1024"),
    ("rlgpt", 10, "raise --steps to at least 4096"),
])
def test_every_mode_checks_its_budget_before_any_llm_call(mode: str, steps: int, fragment: str) -> None:
    """`rlgpt run --task crafter --mode code --steps 10` is one error naming the budget that would do (it
    started the model and ran for minutes); each mode names its own (issue 27)."""
    with pytest.raises(ConfigError, match=fragment):
        load_run_config(None, ["task=crafter", f"mode={mode}", f"steps={steps}"])
    cfg = load_run_config(None, ["task=crafter", "mode=code", "steps=4200"])
    assert cfg.code_probe_bound() == 4200 and cfg.mode_shortfall() is None


def test_the_cli_refuses_a_code_run_too_small_for_its_probes_in_one_line(tmp_path) -> None:
    proc = cli("run", "--task", "crafter", "--mode", "code", "--steps", "10",
               "--run-dir", str(tmp_path / "r"))
    assert_error_line(proc, "--mode code's probes", "raise --steps to at least 4200")
    assert not (tmp_path / "r").exists()  # refused before the run began: no model, no run directory
