"""A non-editable install ships every module and data file: the wheel holds all of the source trees."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Import package -> source folder, as pyproject's package-dir maps them.
TREES = {
    "rlgpt": ROOT / "src" / "rlgpt",
    "rlgpt/envs": ROOT / "envs",
    "rlgpt/llm": ROOT / "llm",
    "rlgpt/kernels": ROOT / "kernels",
    "rlgpt/configs": ROOT / "configs",
}
NOT_SOURCE = (".git", ".venv", "build", "*.egg-info", "__pycache__", "train_dir", "runs", "wandb", ".*_cache")


def test_wheel_contains_every_module_and_data_file(tmp_path: Path) -> None:
    # A copy without build leftovers: setuptools would otherwise reuse a stale build/ tree.
    source = tmp_path / "source"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(*NOT_SOURCE))
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(tmp_path),
            ".",
        ],
        cwd=source,
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = tmp_path.glob("rlgpt-*.whl")
    shipped = set(zipfile.ZipFile(wheel).namelist())
    expected = {
        f"{package}/{path.relative_to(tree).as_posix()}"
        for package, tree in TREES.items()
        for path in tree.rglob("*")
        if path.is_file() and not any(part in ("__pycache__", "build") for part in path.parts)
    }
    assert any(name.endswith("configs/macros/go_to_tree.yaml") for name in expected)
    missing = sorted(expected - shipped)
    assert not missing, f"files a wheel install would lack (fix pyproject's packages/package-data): {missing}"


def test_make_run_warms_the_prompt_states_of_the_config_it_runs() -> None:
    # `make run` computes the model's prompt states (`rlgpt warm`) before the run, for the same config: a
    # warm step for another config would leave the first run cold.
    plan = subprocess.run(["make", "-n", "-B", "run"], cwd=ROOT, capture_output=True, text=True, check=True,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(Path.home())}).stdout.splitlines()
    warm = [i for i, line in enumerate(plan) if " warm " in f"{line} "]
    run = [i for i, line in enumerate(plan) if "/rlgpt run " in line]
    assert len(warm) == 1 and len(run) == 1 and warm[0] < run[0], plan
    config = plan[run[0]].split("--config ")[1].split()[0]
    assert plan[warm[0]].split("--config ")[1].split()[0] == config
