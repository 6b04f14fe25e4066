"""bench.learner_step runs end to end (tiny batch; its timings are not asserted)."""

from bench import learner_step
from rlgpt.kernels import cpu


def test_learner_step_times_every_variant_and_restores_the_choice(capsys):
    chosen = cpu.CPU_CHOICE["embed_conv"]
    learner_step.main(["--batch", "32", "--rounds", "1"])
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| fp32") or
            line.startswith("| bf16")]
    assert [r.split("|")[1:3] for r in rows] == [
        [" fp32 ", " eager "], [" fp32 ", " tables "], [" bf16 ", " eager "], [" bf16 ", " tables "]
    ]
    assert all(float(r.split("|")[3]) > 0 for r in rows)
    assert cpu.CPU_CHOICE["embed_conv"] == chosen
