"""The evaluation seed splits: one formula, disjoint validation and test episodes, far from training."""

import pytest

from rlgpt.rl.checkpoint import EvalError
from rlgpt.rl.evaluate import EPISODES_PER_SEED, MAX_RUN_SEED, SPLITS, eval_seed
from rlgpt.run.chain import PREFIX_SEED_BASE


def test_validation_and_test_seeds_are_disjoint_and_far_from_training() -> None:
    run_seeds = [0, 1, 7, MAX_RUN_SEED - 1]
    episodes = [0, 1, EPISODES_PER_SEED - 1]
    seeds = {split: {eval_seed(split, s, e) for s in run_seeds for e in episodes} for split in SPLITS}
    assert len(seeds["validation"]) == len(seeds["test"]) == len(run_seeds) * len(episodes)
    assert not seeds["validation"] & seeds["test"]
    # Every validation seed of any run seed is below every test seed: no overlap across run seeds either.
    assert max(seeds["validation"]) < min(seeds["test"])
    # Training envs are seeded with their index (a few hundred at most); chain prefixes with their own base.
    assert min(seeds["validation"]) > 1_000_000
    prefix = {PREFIX_SEED_BASE + s * 1000 + e for s in run_seeds[:3] for e in episodes}
    assert not prefix & (seeds["validation"] | seeds["test"])


@pytest.mark.parametrize("args", [("train", 0, 0), ("test", -1, 0), ("test", MAX_RUN_SEED, 0),
                                  ("validation", 0, EPISODES_PER_SEED)])
def test_seeds_outside_the_disjoint_ranges_are_refused(args: tuple) -> None:
    with pytest.raises(EvalError):
        eval_seed(*args)
