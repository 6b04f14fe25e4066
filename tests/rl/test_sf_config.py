"""`rlgpt.rl.sf_config`: the one place a TrainConfig + env setup becomes Sample Factory's config."""

from __future__ import annotations

from pathlib import Path

import pytest
from sample_factory.cfg.arguments import parse_sf_args

from rlgpt.config import NO_SETUP, ConfigError, EnvSetup, TrainConfig, load_config
from rlgpt.rl.sf_config import add_rlgpt_args, build_sf_config, rlgpt_flags
from rlgpt.rl.sf_env import register_task_env

RUN = Path("/nonexistent/run")


def build(*overrides: str, extra_argv: tuple[str, ...] = (), setup: EnvSetup = NO_SETUP):
    cfg = load_config(None, list(overrides))
    return build_sf_config(cfg, RUN, register_task_env(cfg.task), extra_argv, setup)


def test_rlgpt_flag_defaults_are_the_dataclasses_defaults():
    parser, _ = parse_sf_args(argv=["--env=x"], evaluation=False)
    add_rlgpt_args(parser)
    defaults = {k: v for k, v in vars(parser.parse_args(["--env=x"])).items() if k.startswith("rlgpt_")}
    default = TrainConfig()
    assert defaults == rlgpt_flags(default)
    assert defaults["rlgpt_hidden_size"] == default.ppo.hidden_size
    assert defaults["rlgpt_macro_memory_mb"] == default.macros.memory_limit_mb


def test_every_flag_is_given_on_the_command_line_so_a_resume_overrides_the_saved_config():
    sf_cfg = build("env.backend=gym")
    # Sample Factory's resume keeps a saved value unless the flag was given: a job without a reward must
    # clear the reward an earlier session of the run directory had.
    assert set(rlgpt_flags(TrainConfig())) <= set(sf_cfg.cli_args)
    assert sf_cfg.cli_args["rlgpt_reward"] == "" and sf_cfg.cli_args["batched_sampling"] is False


def test_the_job_setup_reaches_the_env_flags():
    code = "def reward(game, prev):\n    return 0.0"
    sf_cfg = build(setup=EnvSetup(reward_code=code, observation=("view", "vector")))
    assert sf_cfg.rlgpt_reward == code and sf_cfg.rlgpt_observation == "view,vector"
    assert sf_cfg.rlgpt_batch_games == 4  # the batch backend runs the dense reward and observation parts


def test_extra_flags_cannot_bypass_the_config():
    with pytest.raises(ConfigError, match="rlgpt's own flags"):
        build(extra_argv=("--rlgpt_reward=x",))
    with pytest.raises(ConfigError, match="batch backend sized its batches"):
        build(extra_argv=("--num_envs_per_worker=4",))
    # Sample Factory flags the TrainConfig has no knob for (or per-env overrides) pass.
    assert build("env.backend=gym", extra_argv=("--num_envs_per_worker=4",)).num_envs_per_worker == 4
    assert build(extra_argv=("--save_best_after=0",)).save_best_after == 0
