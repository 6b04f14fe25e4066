"""Where a Sample Factory run's time went, per 1,000 env steps, from the profiles it writes at the end.

Sample Factory ends ``sf_log.txt`` with one timing tree per component (``<component> profile tree view:``,
then indented ``name: seconds`` entries, several per line) and ``Collected {0: N}``. This reads them and
prints seconds per 1,000 env steps for each entry, grouped the way issue 9 asks (env stepping, observation
packing, inference, learner forward / backward + optimizer, IPC and queueing, waiting):

    python -m bench.sf_profile RUN_DIR [RUN_DIR ...]

Wall-clock seconds inside each process, summed over the run (start-up excluded): on a loaded machine
every entry includes the time the process waited for a core. Only rollout worker 0 and the last one report
(Sample Factory's choice); with one rollout worker that is all of them.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

_HEADER = re.compile(r"\]\[\d+\] (?P<component>.+?) profile tree view:$")
_ENTRY = re.compile(r"(?P<name>[A-Za-z_]+): (?P<seconds>[0-9.]+)")
_COLLECTED = re.compile(r"Collected \{0: (?P<steps>\d+)\}")

GROUPS: dict[str, tuple[tuple[str, str], ...]] = {
    "env stepping (game, task rules, resets)": (("RolloutWorker", "env_step"),),
    "observation packing (trajectory buffers, actions in)": (
        ("RolloutWorker", "post_env_step"),
        ("RolloutWorker", "process_policy_outputs"),
    ),
    "rollout worker -> inference hand-off (buffer write + queue)": (
        ("RolloutWorker", "enqueue_policy_requests"),
    ),
    "inference forward (policy at batch = one split)": (("InferenceWorker", "forward"),),
    "inference batching + outputs": (
        ("InferenceWorker", "deserialize"),
        ("InferenceWorker", "stack"),
        ("InferenceWorker", "obs_to_device_normalize"),
        ("InferenceWorker", "prepare_outputs"),
    ),
    "inference -> rollout worker signals": (("InferenceWorker", "send_messages"),),
    "inference idle (waiting for requests)": (("InferenceWorker", "wait_policy_total"),),
    "learner forward (losses)": (("Learner", "calculate_losses"),),
    "learner backward + optimizer": (("Learner", "update"),),
    "learner batch preparation (GAE, returns)": (("Learner", "prepare_batch"),),
}
"""Report rows: (component prefix, timer name) pairs summed into each."""


def parse(sf_log: Path) -> tuple[dict[str, dict[str, float]], int]:
    """``({component: {timer: seconds}}, env steps collected)`` from a run's ``sf_log.txt`` (the last
    profile of each component, i.e. the last session of a resumed run)."""
    profiles: dict[str, dict[str, float]] = {}
    steps, current = 0, None
    for line in sf_log.read_text(errors="replace").splitlines():
        header = _HEADER.search(line)
        if header:
            current = profiles.setdefault(header["component"], {})
            current.clear()
            continue
        if line.startswith("["):
            current = None
            collected = _COLLECTED.search(line)
            steps = int(collected["steps"]) if collected else steps
            continue
        if current is not None:
            for entry in _ENTRY.finditer(line):
                current[entry["name"]] = float(entry["seconds"])
    return profiles, steps


def per_1k(profiles: dict[str, dict[str, float]], steps: int) -> dict[str, float]:
    """Seconds per 1,000 env steps of each `GROUPS` row (rows whose timers are absent are left out)."""
    out = {}
    for row, timers in GROUPS.items():
        found = [
            seconds
            for prefix, timer in timers
            for component, entries in profiles.items()
            if component.startswith(prefix) and timer in entries
            for seconds in [entries[timer]]
        ]
        if found:
            out[row] = sum(found) * 1000 / steps
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dirs", nargs="+", type=Path)
    args = parser.parse_args(argv)
    tables = []
    for run_dir in args.run_dirs:
        profiles, steps = parse(run_dir / "sf_log.txt")
        if not steps:
            raise SystemExit(f"{run_dir}: no Sample Factory profile in sf_log.txt (did the run finish?)")
        tables.append((run_dir.name, steps, per_1k(profiles, steps)))
    rows = list(dict.fromkeys(row for _, _, table in tables for row in table))
    names = [f"{name} ({steps:,} steps)" for name, steps, _ in tables]
    print("| s per 1k env steps | " + " | ".join(names) + " |")
    print("|---|" + "---:|" * len(tables))
    for row in rows:
        print(f"| {row} | " + " | ".join(f"{table.get(row, 0.0):.3f}" for _, _, table in tables) + " |")


if __name__ == "__main__":
    main()
