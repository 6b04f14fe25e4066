"""`rlgpt.rl.sf_config`: the one place a TrainConfig + env setup becomes Sample Factory's config."""

from __future__ import annotations

import dataclasses
import typing
from pathlib import Path

import pytest
from sample_factory.cfg.arguments import parse_sf_args

from rlgpt.config import NO_SETUP, ConfigError, EnvSetup, TrainConfig, load_config
from rlgpt.macro.compiler import MacroSource
from rlgpt.rl.sf_config import add_rlgpt_args, build_sf_config
from rlgpt.rl.sf_env import register_task_env
from rlgpt.rl.worker_config import FLAG, WorkerConfig, worker_config

RUN = Path("/nonexistent/run")


def build(*overrides: str, extra_argv: tuple[str, ...] = (), setup: EnvSetup = NO_SETUP):
    cfg = load_config(None, list(overrides))
    return build_sf_config(cfg, RUN, register_task_env(cfg.task), extra_argv, setup)


def _changed(obj):
    """``obj`` (a dataclass) with every leaf field set to a value other than its default."""
    changes = {}
    hints = typing.get_type_hints(type(obj))
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if dataclasses.is_dataclass(value):
            changes[f.name] = _changed(value)
        elif isinstance(value, bool):
            changes[f.name] = not value
        elif isinstance(value, int | float):
            changes[f.name] = value + 3
        elif isinstance(value, tuple):
            changes[f.name] = (*value, 7) if f.name == "marks" else (*value, "x")
        elif value is None and int in typing.get_args(hints[f.name]):
            changes[f.name] = 5
        else:  # str, or None for a str
            changes[f.name] = f"{value}-changed"
    return dataclasses.replace(obj, **changes)


def test_every_field_of_the_train_config_reaches_the_workers_typed():
    """Every field, a field added later included, travels in the one flag and decodes with its type."""
    train = _changed(TrainConfig())
    sent = WorkerConfig(train=train, setup=EnvSetup("def reward(game, prev):\n    return 1", ("view",)),
                        macros=(MacroSource("m", "def m(game):\n    yield 'noop'\n", "d"),), episode_length=9,
                        batch_games=4, learner_core=1, encoder_precision="bf16")
    got = WorkerConfig.from_json(sent.to_json())
    assert got == sent and got.train == train and type(got.train.marks) is tuple
    assert got.train != TrainConfig()  # every default was changed, so a field the JSON dropped would differ


def test_the_flag_is_decoded_once_per_process_and_its_default_is_the_dataclasses():
    parser, _ = parse_sf_args(argv=["--env=x"], evaluation=False)
    add_rlgpt_args(parser)
    ours = {k for k in vars(parser.parse_args(["--env=x"])) if k.startswith("rlgpt_")}
    assert ours == {FLAG}  # one flag; its absence reads as the dataclasses' defaults
    sf_cfg = build("env.backend=gym", "ppo.hidden_size=64")
    wc = worker_config(sf_cfg)
    assert worker_config(sf_cfg) is wc and wc.train.ppo.hidden_size == 64


def test_a_config_saved_before_the_flag_reads_from_its_old_flags():
    saved = {"seed": 3, "gamma": 0.9, "rlgpt_hidden_size": 64, "rlgpt_macro_max_steps": 32,
             "rlgpt_options": "/a,/b", "rlgpt_marks": "100,200", "rlgpt_reward": "code",
             "rlgpt_observation": "view", "rlgpt_batch_games": 4,
             "rlgpt_macros": '[{"name": "m", "code": "def m(game):\\n    yield 1", "description": ""}]'}
    wc = worker_config(saved)
    assert (wc.seed, wc.gamma, wc.train.ppo.hidden_size, wc.train.macros.max_steps) == (3, 0.9, 64, 32)
    assert (wc.train.options, wc.train.marks, wc.batch_games) == (("/a", "/b"), (100, 200), 4)
    assert wc.setup == EnvSetup("code", ("view",)) and [m.name for m in wc.macros] == ["m"]
    assert worker_config({"seed": 0}).train == TrainConfig()  # older still: the dataclasses' defaults


def test_every_flag_is_given_on_the_command_line_so_a_resume_overrides_the_saved_config():
    sf_cfg = build("env.backend=gym")
    # Sample Factory's resume keeps a saved value unless the flag was given: a job without a reward must
    # clear the reward an earlier session of the run directory had.
    assert FLAG in sf_cfg.cli_args and sf_cfg.cli_args["batched_sampling"] is False
    assert WorkerConfig.from_json(sf_cfg.cli_args[FLAG]).setup.reward_code == ""


def test_the_job_setup_reaches_the_env_flags():
    code = "def reward(game, prev):\n    return 0.0"
    wc = worker_config(build(setup=EnvSetup(reward_code=code, observation=("view", "vector"))))
    assert wc.setup.reward_code == code and wc.setup.observation == ("view", "vector")
    assert wc.batch_games == 4  # the batch backend runs the dense reward and observation parts


def test_extra_flags_cannot_bypass_the_config():
    with pytest.raises(ConfigError, match="rlgpt's own flags"):
        build(extra_argv=(f"--{FLAG}={{}}",))
    with pytest.raises(ConfigError, match="batch backend sized its batches"):
        build(extra_argv=("--num_envs_per_worker=4",))
    # Sample Factory flags the TrainConfig has no knob for (or per-env overrides) pass.
    assert build("env.backend=gym", extra_argv=("--num_envs_per_worker=4",)).num_envs_per_worker == 4
    assert build(extra_argv=("--save_best_after=0",)).save_best_after == 0


def test_the_training_device_reaches_sample_factory_and_cuda_without_one_is_a_config_error(monkeypatch):
    import torch

    assert build().device == "cpu"  # the default: tests and the 2-core box train on CPU
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert build("device=auto").device == "cpu"
    with pytest.raises(ConfigError, match="device=cuda, but torch sees no CUDA device"):
        build("device=cuda")
    with pytest.raises(ConfigError, match="device must be one of cpu, cuda, auto"):
        load_config(None, ["device=gpu"])
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    sf_cfg = build("device=auto", "ppo.encoder_precision=auto")
    assert sf_cfg.device == "gpu"  # Sample Factory's name for it
    assert worker_config(sf_cfg).encoder_precision == "bf16"  # every CUDA device does bf16 natively
