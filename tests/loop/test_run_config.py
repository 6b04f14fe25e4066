"""RunConfig: one typed place for the loop's knobs, overridable like TrainConfig."""

from __future__ import annotations

import pytest

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
])
def test_bad_values_fail_with_the_key(override: str, fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment):
        load_run_config(None, [override])


def test_cli_run_flags_map_to_the_config() -> None:
    args = build_parser().parse_args(["run", "--task", "collect_wood", "--llm", "http://h:1/v1", "--mode",
                                      "code", "--set", "llm.model=served"])
    assert args.task == "collect_wood" and args.llm == "http://h:1/v1" and args.mode == "code"
