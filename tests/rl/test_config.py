import pytest

from rlgpt.config import ConfigError, TrainConfig, builtin_config_path, load_config


def test_defaults_and_builtin_main_config():
    cfg = load_config(builtin_config_path("main.yaml"))
    assert isinstance(cfg, TrainConfig)
    assert cfg.task == "collect_wood" and cfg.steps == 300_000
    assert cfg.env.obs_mode == "symbolic"


def test_overrides_are_typed_and_nested(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("task: place_table\nppo:\n  learning_rate: 0.001\n")
    cfg = load_config(path, ["steps=1e4", "ppo.num_epochs=3", "env.episode_length=null", "wandb=true"])
    assert cfg.task == "place_table"
    assert cfg.steps == 10_000 and isinstance(cfg.steps, int)
    assert cfg.ppo.learning_rate == pytest.approx(1e-3)
    assert cfg.ppo.num_epochs == 3
    assert cfg.env.episode_length is None
    assert cfg.wandb is True


@pytest.mark.parametrize(
    "override, message",
    [
        ("ppo.learnin_rate=1", "unknown config key 'ppo.learnin_rate'"),
        ("steps=abc", "steps: expected an integer"),
        ("steps=1.5", "steps: expected an integer"),
        ("steps=-5", "steps must be > 0"),
        ("ppo.gamma=1.5", "ppo.gamma must be in (0, 1]"),
        ("stop_at_success=1.5", "stop_at_success must be in [0, 1]"),
        ("env.obs_mode=rgb", "env.obs_mode must be 'symbolic' or 'pixels'"),
        ("env.num_envs_per_worker=3", "multiple of env.worker_num_splits"),
        ("wandb=maybe", "wandb: expected true/false"),
        ("ppo=3", "ppo: expected a mapping"),
        ("noequals", "must look like key=value"),
    ],
)
def test_bad_values_fail_with_a_clear_message(override, message):
    with pytest.raises(ConfigError) as e:
        load_config(None, [override])
    assert message in str(e.value)


def test_bad_files(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("task: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(bad)
    bad.write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match="mapping at the top level"):
        load_config(bad)


def test_default_run_dir_is_deterministic_so_reruns_resume():
    cfg = load_config(None, ["task=collect_wood+place_table", "seed=3"])
    assert cfg.resolved_run_dir().as_posix() == "train_dir/collect_wood_place_table-seed3"


def test_unknown_task_is_a_config_error():
    with pytest.raises(ConfigError, match="Did you mean collect_wood"):
        load_config(None, ["task=colect_wood"])
