"""`rlgpt run`'s validated config: the run seed reaches the LLM's sampling, validation copies instead of
mutating, and the per-iteration budget has one definition."""

from __future__ import annotations

import copy
import dataclasses
import re

import pytest

from rlgpt.agents.fast import FastAgent
from rlgpt.agents.replies import SubAction
from rlgpt.agents.slow import SlowAgent
from rlgpt.config import SEED_STRIDE, RunConfig, load_run_config, validate_run
from rlgpt.llm.config import build_client
from rlgpt.llm.errors import CacheMissError


def replayed_request_key(call) -> str:
    """The cache key of the one request `call` makes (a replay-only client on an empty cache refuses it
    and names the key)."""
    with pytest.raises(CacheMissError) as miss:
        call()
    return re.search(r"\(key (\w+)\)", str(miss.value)).group(1)


def run_config(tmp_path, seed: int, *overrides: str) -> RunConfig:
    return load_run_config(None, [f"seed={seed}", f"run_dir={tmp_path / f'seed{seed}'}",
                                  f"llm.cache_dir={tmp_path / 'cache'}", "llm.replay_only=true", *overrides])


def request_keys(tmp_path, seed: int) -> tuple[str, str]:
    """The keys of the slow agent's decomposition and the fast agent's first macro candidate in a run
    seeded ``seed``."""
    cfg = run_config(tmp_path, seed)
    client = build_client(cfg.llm)
    slow = replayed_request_key(lambda: SlowAgent(client, cfg.agents).decompose("collect_wood"))
    sub = SubAction("collect_wood", "chop a tree", "code", "collect_wood", "wood is needed")
    fast = replayed_request_key(lambda: FastAgent(client, cfg.agents).write_macro("collect_wood", sub))
    return slow, fast


def test_two_run_seeds_ask_the_model_different_requests(tmp_path):
    one, two = request_keys(tmp_path, 1), request_keys(tmp_path, 2)
    assert one[0] != two[0] and one[1] != two[1]
    assert request_keys(tmp_path, 1) == one  # the same seed asks the same (replay finds its answers)


def test_candidate_seeds_of_different_run_seeds_never_meet(tmp_path):
    samples = 5
    seeds = [run_config(tmp_path, s, f"agents.samples={samples}").agents.seed for s in range(4)]
    candidates = [set(range(base, base + samples)) for base in seeds]
    assert all(not (a & b) for i, a in enumerate(candidates) for b in candidates[i + 1:])
    assert seeds[0] == 0 and seeds[3] == 3 * SEED_STRIDE  # seed 0 keeps the requests recorded before
    assert run_config(tmp_path, 3).llm.seed == 3 * SEED_STRIDE
    # A sampling seed set explicitly is kept.
    assert run_config(tmp_path, 3, "agents.seed=7", "llm.seed=9").agents.seed == 7
    assert run_config(tmp_path, 3, "agents.seed=7", "llm.seed=9").llm.seed == 9


def test_validation_returns_a_new_config_and_is_idempotent(tmp_path):
    raw = RunConfig(task="place_table", steps=8192, seed=4, max_outer=2, max_inner=2, eval_episodes=2,
                    run_dir=str(tmp_path / "run"))
    before = copy.deepcopy(raw)
    valid = validate_run(raw)
    assert raw == before  # nothing written into the caller's config
    assert (valid.train.task, valid.train.steps, valid.train.seed) == ("place_table", 2048, 4)
    assert valid.llm.cache_dir == str(tmp_path / "run" / "llm_cache")
    assert validate_run(valid) == valid


@pytest.mark.parametrize("mode, trainings", [("rlgpt", 6), ("ppo", 1)])
def test_iteration_budget_is_one_definition(mode, trainings):
    cfg = RunConfig(mode=mode, steps=60_000, max_outer=3, max_inner=2)
    assert cfg.steps_per_iteration == cfg.iteration_budget(cfg.steps) == 60_000 // trainings
    assert cfg.iteration_budget(30_000) == 30_000 // trainings  # a planner subtask's share of the budget
    assert dataclasses.replace(cfg, steps=1).steps_per_iteration == (1 if mode == "ppo" else 0)


def test_probe_worlds_follow_the_run_seed(tmp_path):
    worlds = [run_config(tmp_path, s, "agents.probe_seeds=[0, 1, 2]").agents.probe_episode_seeds
              for s in range(3)]
    assert worlds[0] == (0, 1, 2)  # seed 0 probes the configured worlds (recorded runs keep their probes)
    assert all(not set(a) & set(b) for i, a in enumerate(worlds) for b in worlds[i + 1:])
    assert worlds[2] == tuple(2 * SEED_STRIDE + s for s in (0, 1, 2))
    valid = run_config(tmp_path, 2)
    assert validate_run(valid).agents.probe_episode_seeds == valid.agents.probe_episode_seeds  # idempotent
    assert run_config(tmp_path, 2, "agents.probe_seed_offset=5").agents.probe_episode_seeds == (5, 6, 7)
