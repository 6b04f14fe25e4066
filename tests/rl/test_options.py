"""Trained policies as options: a stored policy is one action of a later training; chosen, it plays on the
same game until its task's achievement count rises, as one SMDP transition (real Sample Factory)."""

from __future__ import annotations

import pytest
import torch

from rlgpt.config import builtin_config_path, load_config
from rlgpt.envs.tasks import make_task_env
from rlgpt.rl.sf_config import env_backend
from rlgpt.rl.stored_policy import StoredPolicy
from rlgpt.rl.train import train

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def wood_policy(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("option") / "wood"
    cfg = load_config(builtin_config_path("smoke.yaml"), [f"run_dir={run_dir}", "steps=2048"])
    result = train(cfg)
    assert result.status == 0
    return result.run_dir


def test_an_option_plays_the_stored_policy_as_one_transition(wood_policy) -> None:
    from rlgpt.rl.wrappers import wrap_task_env

    torch.manual_seed(0)  # the stored policy samples its actions
    policy = StoredPolicy(wood_policy)
    assert policy.task == "collect_wood"  # read from the training's config
    # The training's own wrappers as the wood training had them (primitives only), plus the option.
    env = wrap_task_env(make_task_env("place_table", episode_length=300), policy.cfg, options=[policy])
    assert env.action_space.n == 17 + 1  # the primitives, then the option
    player_of = lambda: env.unwrapped.crafter._player  # noqa: E731
    steps = reached = 0
    for seed in range(8):  # a weak (seconds-trained) policy can die first: play episodes until it reaches
        env.reset(seed=seed)
        for _ in range(10):
            wood = player_of().achievements["collect_wood"]
            obs, _, terminated, truncated, info = env.step(17)
            assert set(obs) == set(env.observation_space.spaces)
            call = info["option"]
            assert call["name"] == "collect_wood" and info["num_frames"] == max(call["steps"], 1)
            # A call ends exactly when its goal's count rose, the episode ended or its step bound passed.
            assert call["reached"] == (player_of().achievements["collect_wood"] > wood)
            bound = policy.cfg.rlgpt_macro_max_steps
            assert call["reached"] or terminated or truncated or call["steps"] >= bound
            steps += call["steps"]
            reached += call["reached"]
            if terminated or truncated:
                break
        if reached:
            break
    assert steps > 0 and reached >= 1


def test_a_training_chooses_a_stored_policy_as_an_option(tmp_path, wood_policy) -> None:
    from rlgpt.rl.evaluate import evaluate

    cfg = load_config(builtin_config_path("smoke.yaml"),
                      [f"run_dir={tmp_path / 'run'}", "steps=2000", "task=place_table",
                       f"options=[{wood_policy}]", "eval_episodes=0"])
    assert env_backend(cfg) == "gym"
    result = train(cfg)
    assert result.status == 0
    # The trained policy's env has the option (from its config), and sampling it chooses the option: a
    # seconds-trained policy is near uniform over its 18 actions, so 200-step episodes all but surely do.
    report = evaluate(result.run_dir, episodes=2)
    assert report.option_stats["collect_wood"]["calls"] > 0
    assert report.option_stats["collect_wood"]["steps"] >= report.option_stats["collect_wood"]["calls"]
