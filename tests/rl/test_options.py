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
from rlgpt.rl.worker_config import FLAG, worker_config

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
            bound = worker_config(policy.cfg).train.macros.max_steps
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


def option_chain(policy_dir, root, links: int) -> list:
    """`links` policy directories shaped like a planner chain's later links without training them: link i
    is `policy_dir`'s network with the links before it as options (its config's ``train.options``, its
    action head grown by one row per option, biased so that the options are chosen often)."""
    import json
    import shutil

    from rlgpt.rl.checkpoint import latest_checkpoint, load_checkpoint

    dirs = []
    for i in range(links):
        link = root / f"link{i}"
        shutil.copytree(policy_dir, link)
        config = json.loads((link / "config.json").read_text())
        ours = json.loads(config[FLAG])
        ours["train"]["options"] = [str(d) for d in dirs]
        config[FLAG] = json.dumps(ours)
        (link / "config.json").write_text(json.dumps(config))
        path = latest_checkpoint(link)
        checkpoint = load_checkpoint(path)
        model = checkpoint["model"]
        head = "action_parameterization.distribution_linear"
        weight, bias = model[f"{head}.weight"], model[f"{head}.bias"]
        model[f"{head}.weight"] = torch.cat([weight, weight[:1].repeat(i, 1)])
        model[f"{head}.bias"] = torch.cat([bias, torch.full((i,), 3.0)])
        torch.save(checkpoint, path)
        dirs.append(link)
    return dirs


def test_a_chain_of_options_loads_each_policy_once_per_process_and_wraps_it_once_per_game(
        tmp_path, wood_policy, monkeypatch) -> None:
    """Link k of a chain offers links 0..k-1, whose configs offer the links before them again. Loaded per
    mention that is 2^(k-1) networks and wrapper stacks for each env (the env workers of a diamond chain's
    fifth link ran out of memory building them); shared, it is one per earlier link."""
    from rlgpt.rl.stored_policy import option_policies
    from rlgpt.rl.wrappers import wrap_task_env

    links = option_chain(wood_policy, tmp_path, 6)
    wraps = []
    original = StoredPolicy.wrap
    monkeypatch.setattr(StoredPolicy, "wrap",
                        lambda self, env: wraps.append(worker_config(self.cfg).train.options)
                        or original(self, env))
    top = StoredPolicy(links[-1])
    assert len(worker_config(top.cfg).train.options) == 5
    options = option_policies(top.cfg)
    games = [wrap_task_env(make_task_env("collect_wood", episode_length=200), top.cfg, options=options)
             for _ in range(2)]
    # Once per earlier link and game (link i is the one offering i options).
    assert sorted(wraps) == sorted([tuple(map(str, links[:i])) for i in range(5)] * 2)
    assert len({id(p.model) for p in option_policies(top.cfg)}) == 5 and option_policies(top.cfg) == options
    # The nested options still play: the deepest link's option runs links that call their own options.
    torch.manual_seed(0)
    env = games[0]
    assert env.action_space.n == 17 + 5
    env.reset(seed=0)
    for _ in range(5):
        obs, _, terminated, truncated, info = env.step(17 + 4)
        assert set(obs) == set(env.observation_space.spaces) and info["option"]["steps"] >= 1
        if terminated or truncated:
            break
