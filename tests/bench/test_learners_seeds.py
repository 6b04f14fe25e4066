"""`bench.learners.run_seeds`: one learner's seeds trained side by side (real Sample Factory, real Crafter),
each evaluated, and a second call resuming a run directory counts only the steps it trained."""

from __future__ import annotations

import pytest

from bench import learners


def test_steps_per_second_counts_only_the_steps_this_call_trained():
    run = learners.LearnerRun("ppo-small", 3000, 10.0, 1.0, 1, {}, "cmd", resumed_from=1000)
    assert run.steps_per_s == 200.0
    assert "3,000 (1,000)" in learners.markdown([run])
    assert learners.seeds_line([]) == "no run finished its evaluation"
    two = [run, learners.LearnerRun("ppo-small", 3000, 10.0, 3.0, 1, {}, "cmd", seed=1)]
    assert learners.seeds_line(two) == "Crafter score over 2 seed(s): mean 2.00, range 1.00-3.00"


@pytest.mark.slow
def test_seeds_train_side_by_side_and_a_second_call_resumes(tmp_path):
    runs = learners.run_seeds("ppo-small", (0, 1), 512, 1, tmp_path, quick=True)
    assert [r.seed for r in runs] == [0, 1]
    assert all(r.steps >= 512 and r.resumed_from == 0 and r.episodes == 1 for r in runs)
    # Side by side, neither run pins its learner to the shared last core.
    assert all("learner_core=shared" in r.command for r in runs)
    again = learners.run_seeds("ppo-small", (0,), runs[0].steps + 512, 1, tmp_path, quick=True)
    assert again[0].resumed_from == runs[0].steps and again[0].steps >= runs[0].steps + 512
    assert "learner_core=shared" not in again[0].command  # one run alone keeps the default placement
