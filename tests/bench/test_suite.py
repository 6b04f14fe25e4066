"""``python -m bench --quick`` runs every section end to end and prints one complete table.

Timings are printed, never asserted (the box is shared); what is checked is that every row is there with
positive numbers and the machine it ran on, so the benchmarks cannot rot unnoticed.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from bench.__main__ import sample_efficiency_table
from bench.training import SF_KEEP, sf_default_argv, steady_rate, steps_to_threshold, wall_to_threshold

ROOT = Path(__file__).resolve().parents[2]

# (row, candidate) of every row --quick prints on a CPU-only machine (a CUDA host times Triton kernels instead
# of the CPU candidates).
QUICK_ROWS = {
    ("env step (no render)", "CrafterEnv symbolic"),
    ("env step (render)", "CrafterEnv pixels"),
    ("engine step (16 games, auto-reset)", "CompiledBatch"),
    ("training (10,000 steps)", "rlgpt train (configs/main.yaml)"),
    ("training (10,000 steps)", "Sample Factory defaults"),
    ("kernel fuse (batch 1024)", "fused_ops"),
    ("kernel fuse+ln (batch 1024)", "fused_ops"),
    ("kernel vector (batch 1024)", "fused_ops"),
    ("kernel gae (batch 1024)", "eager"),
    ("kernel gae (batch 1024)", "fused_ops"),
    ("kernel gae (batch 1024)", "numba"),
    ("kernel embed_conv (batch 1024)", "tables"),
    ("macro overhead", "macro_replay"),
    ("macro overhead", "macro_api"),
    ("macro training (10,000 steps)", "rlgpt train + go_to_tree macro (batch backend)"),
    ("LLM tokens/s", "qwen2.5-coder-0.5b generation"),
}


def _number(cell: str) -> float:
    return float(cell.replace(",", ""))


@pytest.mark.slow
@pytest.mark.timeout(1800)  # a few minutes on a loaded 2-core box; < 2 min idle
def test_quick_suite_prints_every_row_with_positive_numbers_and_the_machine():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"} | {"OMP_NUM_THREADS": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "bench", "--quick"], capture_output=True, text=True, env=env, cwd=ROOT,
        timeout=1800,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    print(result.stdout)  # the timings, for whoever reads the test log
    lines = [line for line in result.stdout.splitlines() if line.startswith("| ")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    assert header[:7] == ["row", "candidate", "baseline", "value", "baseline value", "ratio", "unit"]
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in lines[1:]]
    rows = [dict(zip(header, c, strict=True)) for c in cells]
    printed = {(r["row"], r["candidate"]) for r in rows}
    if torch.cuda.is_available():
        assert any(row.startswith("kernel") for row, _ in printed), result.stdout
        printed = {p for p in printed if not p[0].startswith("kernel")}
        expected = {p for p in QUICK_ROWS if not p[0].startswith("kernel")}
    else:
        expected = QUICK_ROWS
    assert printed == expected, result.stdout
    for r in rows:
        for key in ("value", "baseline value", "ratio"):
            assert _number(r[key]) > 0, (key, r)
        assert "cores" in r["machine"] and ("GPU" in r["machine"]), r
        if r["row"].startswith("macro training"):
            assert r["baseline"] == "rlgpt train (configs/main.yaml)"
        if r["row"].startswith("training"):
            assert r["baseline"] == "sync PPO (bench/sync_ppo.py)"
            cand_mib, base_mib = (_number(x.split()[0]) for x in r["peak RSS (cand. / base)"].split(" / "))
            assert cand_mib > 0 and base_mib > 0, r


def test_sf_default_puts_rlgpts_flags_back_to_sample_factory_defaults():
    argv = dict(flag[2:].split("=", 1) for flag in sf_default_argv())
    # configs/main.yaml sets these; Sample Factory's defaults differ.
    assert argv["num_envs_per_worker"] == "2" and argv["rollout"] == "32" and argv["num_epochs"] == "1"
    assert argv["learning_rate"] == "0.0001" and argv["exploration_loss_coeff"] == "0.003"
    assert argv["use_rnn"] == "False" and argv["normalize_input"] == "False"  # what the env and network need
    assert not any(
        name.startswith("rlgpt_") or name in SF_KEEP - {"use_rnn", "normalize_input"} for name in argv
    )


def test_curve_helpers_leave_out_start_up_and_find_the_first_full_window_at_the_threshold():
    rows = [
        dict(env_steps="0", wall_time="5", success="", success_episodes="0"),
        dict(env_steps="1000", wall_time="10", success="1.0", success_episodes="3"),  # 3 lucky episodes
        dict(env_steps="5000", wall_time="12", success="0.95", success_episodes="32"),
        dict(env_steps="9000", wall_time="14", success="0.8", success_episodes="32"),
    ]
    assert steady_rate(rows) == 8000 / 4
    assert steady_rate(rows[:2]) is None
    assert steps_to_threshold(rows, 0.9) == 5000
    assert steps_to_threshold(rows, 0.99) is None
    # The time to the threshold is the same row's clock, not the lucky early row's.
    assert wall_to_threshold(rows, 0.9) == 12.0
    assert wall_to_threshold(rows, 0.99) is None


def test_sample_efficiency_table_reports_unreached_runs_and_ratios_to_the_sync_baseline():
    runs = [
        dict(
            trainer=t,
            seed=s,
            steps_per_s=rate,
            reached=reached,
            wall_to_threshold=None if reached is None else reached / rate,
            peak_rss_mb=100.0,
            load_before=1,
            load_after=2,
        )
        for t, rate, reached in (
            ("rlgpt", 300.0, 4000),
            ("sf_default", 50.0, None),
            ("sync_ppo", 100.0, 8000),
        )
        for s in (0, 1)
    ]
    table = sample_efficiency_table(runs, 0.9)
    lines = {line.split("|")[1].strip(): line for line in table.splitlines()[2:]}
    assert (
        "| 3.00 |" in lines["rlgpt train (configs/main.yaml)"]
        and "| 4,000 | 13 |" in lines["rlgpt train (configs/main.yaml)"]
    )
    assert "not reached; not reached | not reached | not reached |" in lines["Sample Factory defaults"]
    assert "| 8,000 | 80 |" in lines["sync PPO (bench/sync_ppo.py)"]
    assert "| 1.00 |" in lines["sync PPO (bench/sync_ppo.py)"]


@pytest.mark.parametrize("trainers", ["rlgpt", "nope,sync_ppo"])
def test_sample_efficiency_refuses_unknown_trainers_or_no_baseline(trainers, capsys):
    from bench.__main__ import main

    with pytest.raises(SystemExit) as exc:
        main(["--sample-efficiency", "--trainers", trainers])
    assert exc.value.code == 2
    assert "--trainers" in capsys.readouterr().err


@pytest.mark.parametrize("whole_run, stop", [(False, 0.9), (True, None)])
def test_whole_runs_train_the_whole_budget_and_only_read_the_threshold(whole_run, stop, monkeypatch,
                                                                      tmp_path):
    from bench import __main__ as suite
    from bench import training

    asked = []

    def run_trainer(trainer, steps, seed, *, stop_at_success, threshold):
        asked.append((trainer, steps, stop_at_success, threshold))
        return training.TrainingRun(trainer, seed, steps, 1.0, 100.0, 1.0, None, None, None, {}, (0.0, 0.0))

    monkeypatch.setattr(training, "run_trainer", run_trainer)
    out = tmp_path / "se.json"
    argv = ["--sample-efficiency", "--trainers", "rlgpt,sync_ppo", "--seeds", "0", "--steps", "5000",
            "--json", str(out)]
    assert suite.main(argv + (["--whole-run"] if whole_run else [])) == 0
    assert asked == [("rlgpt", 5000, stop, 0.9), ("sync_ppo", 5000, stop, 0.9)]
    assert json.loads(out.read_text())["whole_run"] is whole_run
