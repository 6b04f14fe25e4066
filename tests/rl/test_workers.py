"""Worker-process defences: the memory backstop (`rlgpt.rl.worker_memory`), the running-macro marker
(`rlgpt.rl.macro_marker`) and the trainer's watch (`rlgpt.rl.worker_watch`).

The end-to-end behaviour (a real Sample Factory env worker dying mid-macro, the run stopping with one line
and resuming) is in test_resume.py.
"""

from __future__ import annotations

import json
import os
import pickle
import resource
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import gymnasium
import numpy as np
import pytest

from rlgpt.config import ConfigError, load_config
from rlgpt.envs.crafter import ACTION_NAMES, CrafterEnv
from rlgpt.envs.engine import CompiledBatch
from rlgpt.envs.tasks import TaskSpec
from rlgpt.macro.runtime import MacroActionWrapper
from rlgpt.rl.macro_marker import MacroMarker, MarkRunningMacro, read_marker
from rlgpt.rl.sf_batch import BatchTaskEnv
from rlgpt.rl.sf_env import SFEnvFactory
from rlgpt.rl.worker_memory import data_segment_bytes
from rlgpt.rl.worker_watch import WorkerDeath

ENV = dict(os.environ, OMP_NUM_THREADS="1")

WALK = """
def walk(game):
    for i in range(3):
        yield "move_left"
"""


def run_child(code: str, *args: str) -> dict:
    """Run ``code`` in a fresh interpreter and return the JSON it prints last."""
    argv = [sys.executable, "-c", textwrap.dedent(code), *args]
    proc = subprocess.run(argv, env=ENV, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_marker_says_which_macro_runs_and_outlives_its_process(tmp_path):
    path = tmp_path / "marker"
    assert read_marker(path) is None
    marker = MacroMarker(path)
    assert read_marker(path) == ""
    marker.running(MacroMarker.encode("a_long_macro_name"))
    marker.idle()
    marker.running(MacroMarker.encode("go"))
    assert read_marker(path) == "go"  # a shorter name after a longer one is not mixed with it
    marker.idle()
    assert read_marker(path) == ""
    marker.close()

    # A process killed (SIGKILL, no clean-up of any kind) while its marker is set still tells.
    dead = tmp_path / "dead"
    code = f"""
        import os, signal
        from rlgpt.rl.macro_marker import MacroMarker
        MacroMarker({str(dead)!r}).running(MacroMarker.encode("doomed"))
        os.kill(os.getpid(), signal.SIGKILL)
    """
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=ENV, timeout=120)
    assert proc.returncode == -signal.SIGKILL
    assert read_marker(dead) == "doomed"


class MarkerProbe(gymnasium.Wrapper):
    """Below the macro wrapper: records what the marker says at every primitive step."""

    def __init__(self, env: gymnasium.Env, path: Path) -> None:
        super().__init__(env)
        self.path = path
        self.seen: list[str | None] = []

    def step(self, action):
        self.seen.append(read_marker(self.path))
        return self.env.step(action)


def test_marker_is_set_exactly_while_a_macro_steps_the_env(tmp_path):
    path = tmp_path / "marker"
    probe = MarkerProbe(CrafterEnv(seed=0), path)
    env = MarkRunningMacro(MacroActionWrapper(probe, [WALK], seed=0), MacroMarker(path))
    env.reset(seed=0)
    env.step(ACTION_NAMES.index("noop"))
    assert probe.seen == [""]
    _, _, _, _, info = env.step(env.n_primitive)
    assert info["macro"]["outcome"] == "success"
    assert probe.seen == ["", "walk", "walk", "walk"]
    assert read_marker(path) == ""
    env.step(ACTION_NAMES.index("noop"))
    assert probe.seen[-1] == ""


class MarkerProbeBatch(CompiledBatch):
    """A compiled batch that records what the marker says at every step of some of its games."""

    def __init__(self, num_envs: int, path: Path) -> None:
        super().__init__(num_envs)
        self.path = path
        self.seen: list[str | None] = []

    def step_rows(self, rows, actions, out) -> None:
        self.seen.append(read_marker(self.path))
        super().step_rows(rows, actions, out)


def test_marker_is_set_exactly_while_macros_step_a_batch(tmp_path):
    """On the batch backend several games run macro calls side by side: the marker says a macro runs from the
    first call's start to the last one's end (naming the macro whose code ran last), idle otherwise."""
    path = tmp_path / "marker"
    batch = MarkerProbeBatch(2, path)
    other = WALK.replace("walk", "stroll").replace("range(3)", "range(5)")
    env = BatchTaskEnv(batch, TaskSpec.from_name("collect_wood"), 0, macros=[WALK, other],
                       marker=MacroMarker(path))
    env.reset(seed=0)
    noop, walk, stroll = ACTION_NAMES.index("noop"), len(ACTION_NAMES), len(ACTION_NAMES) + 1
    env.step(np.array([noop, noop]))
    assert batch.seen == [""]
    obs, *_ = env.step(np.array([walk, stroll]))
    assert obs["num_frames"][:, 0].tolist() == [3, 5]
    assert batch.seen == ["", "stroll", "stroll", "stroll", "stroll", "stroll"]
    assert read_marker(path) == ""
    env.step(np.array([walk, noop]))
    assert batch.seen[-3:] == ["walk"] * 3 and read_marker(path) == ""


MEMORY_CHILD = """
    import json, resource, sys
    from rlgpt.envs.crafter import ACTION_NAMES, CrafterEnv
    from rlgpt.macro.runtime import MacroActionWrapper
    from rlgpt.macro.sandbox import MacroLimits
    from rlgpt.rl.worker_memory import set_memory_limit

    HOG = '''
    def hog(game):
        keep = list(range(2000000))
        yield "noop"
    '''
    WALK = {walk!r}
    # In-process checks generous enough that the OS limit is the one that trips (~80 MB for the list).
    limits = MacroLimits(fuel=50_000, max_items=10**7)
    env = MacroActionWrapper(CrafterEnv(seed=0), [HOG, WALK], limits=limits)
    env.reset(seed=0)
    hog, walk = env.n_primitive, env.n_primitive + 1
    out = {{"before": env.step(hog)[4]["macro"]["outcome"]}}  # no limit yet: the macro may allocate it
    out["limit"] = set_memory_limit(int(sys.argv[1]))
    for name, action in [("hog", hog), ("noop", ACTION_NAMES.index("noop")), ("walk", walk), ("hog2", hog)]:
        info = env.step(action)[4]
        out[name] = info.get("macro", {{}}).get("outcome", "primitive")
        if name == "hog":
            out["diagnostic"] = info["macro"]["diagnostic"]
    out["soft"] = resource.getrlimit(resource.RLIMIT_DATA)[0]
    out["stats"] = env.stats["hog"].failures["memory"]
    print(json.dumps(out))
"""


def test_os_memory_limit_costs_one_failed_macro_call_and_the_process_goes_on():
    out = run_child(MEMORY_CHILD.format(walk=WALK), "16")
    assert out["before"] == "success"
    assert out["limit"] == out["soft"] > 0
    assert out["hog"] == "memory", out
    # The sandbox turns the MemoryError the OS limit raised inside the macro's call into its memory kind.
    assert out["diagnostic"]["kind"] == "memory" and "memory" in out["diagnostic"]["message"]
    assert out["diagnostic"]["line"] == 3  # points at the allocation in the macro's source
    assert (out["noop"], out["walk"], out["hog2"]) == ("primitive", "success", "memory")
    assert out["stats"] == 2


def test_memory_limit_is_sized_from_current_usage_and_never_raised():
    code = """
        import json, resource
        from rlgpt.rl.worker_memory import data_segment_bytes, set_memory_limit
        before = data_segment_bytes()
        first = set_memory_limit(64)
        looser = set_memory_limit(4096)  # never loosens an existing limit
        print(json.dumps({"before": before, "first": first, "looser": looser,
                          "soft": resource.getrlimit(resource.RLIMIT_DATA)[0], "off": set_memory_limit(0)}))
    """
    out = run_child(code)
    assert 0 <= out["first"] - out["before"] - 64 * 2**20 < 8 * 2**20
    assert out["looser"] == out["first"] == out["soft"]
    assert out["off"] is None
    # This (test) process was left alone.
    assert data_segment_bytes() > 0
    assert resource.getrlimit(resource.RLIMIT_DATA)[0] == resource.RLIM_INFINITY


@pytest.mark.parametrize("headroom_mb", [256, 0])
def test_env_factory_applies_the_backstop_only_in_worker_processes(tmp_path, headroom_mb):
    """`make_gym_env` limits an SF worker process (once) and marks macros; 0 turns the limit off."""
    macro_file = tmp_path / "macros.yaml"
    macro_file.write_text("- name: walk\n  code: |\n" + textwrap.indent(WALK.strip("\n"), "    ") + "\n")
    code = f"""
        import json, os, resource
        from rlgpt.config import load_config
        from rlgpt.rl.sf_env import make_gym_env, register_task_env
        from rlgpt.rl.sf_config import build_sf_config
        from rlgpt.rl.macro_marker import read_marker
        from rlgpt.rl.worker_memory import data_segment_bytes

        cfg = load_config(None, ["macros.file={macro_file}", "macros.memory_limit_mb={headroom_mb}"])
        run_dir = {str(tmp_path / "run")!r}
        sf_cfg = build_sf_config(cfg, __import__("pathlib").Path(run_dir), register_task_env(cfg.task))
        before = data_segment_bytes()
        env = make_gym_env("crafter_collect_wood", sf_cfg)
        limit = resource.getrlimit(resource.RLIMIT_DATA)[0]
        make_gym_env("crafter_collect_wood", sf_cfg)
        env.reset(seed=0)
        env.step(env.action_space.n - 1)
        marker = os.path.join(run_dir, ".workers", str(os.getpid()))
        again = resource.getrlimit(resource.RLIMIT_DATA)[0]
        print(json.dumps({{"before": before, "limit": limit, "again": again,
                          "marker": read_marker(marker), "inf": resource.RLIM_INFINITY}}))
    """
    # The interpreter's command line is what marks a multiprocessing (Sample Factory) child process.
    out = run_child(code, "--multiprocessing-fork")
    if headroom_mb:
        assert 0 <= out["limit"] - out["before"] - headroom_mb * 2**20 < 64 * 2**20
    else:
        assert out["limit"] == out["inf"]
    assert out["again"] == out["limit"], "the limit is set once per process"
    assert out["marker"] == ""


def test_memory_limit_config_knob():
    assert load_config(None, []).macros.memory_limit_mb == 1024
    assert load_config(None, ["macros.memory_limit_mb=0"]).macros.memory_limit_mb == 0
    with pytest.raises(ConfigError, match="memory_limit_mb"):
        load_config(None, ["macros.memory_limit_mb=-1"])


def test_worker_death_message():
    run_dir = "/runs/x"
    death = WorkerDeath("rollout_proc1", 4242, -signal.SIGKILL, "go_to_tree")
    assert death.describe(run_dir) == (
        "env worker 4242 (rollout_proc1) died (SIGKILL) while running macro 'go_to_tree'; "
        "checkpoints and metrics kept in /runs/x, re-run the same command to resume"
    )
    idle = WorkerDeath("rollout_proc0", 1, -signal.SIGSEGV, "").describe(run_dir)
    assert "died (SIGSEGV) while no macro was running" in idle
    learner = WorkerDeath("learner_proc0", 7, 3, None).describe(run_dir)
    assert learner.startswith("learner 7 (learner_proc0) died (exit status 3); checkpoints")


@pytest.mark.parametrize("trainer_alive", [True, False])
def test_a_sf_child_whose_trainer_is_gone_exits_when_it_unpickles_the_env_factory(trainer_alive):
    # A Sample Factory child unpickles the env factory with its target; if the trainer died before that,
    # the child was re-parented and must not take its new parent for the trainer (it would live on).
    factory = pickle.dumps(SFEnvFactory())
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    trainer = os.getpid() if trainer_alive else gone.pid
    child = subprocess.run(
        [sys.executable, "-c", f"import pickle; pickle.loads({factory!r}); print('alive')",
         "--multiprocessing-fork"],
        env=dict(os.environ, RLGPT_TRAINER_PID=str(trainer)),
        capture_output=True,
        text=True,
        timeout=120,
    )
    if trainer_alive:
        assert child.returncode == 0 and "alive" in child.stdout, child.stderr[-2000:]
    else:
        assert child.returncode == 1 and "alive" not in child.stdout, child.stderr[-2000:]


STUCK_TRAINER = textwrap.dedent(
    """
    import multiprocessing, os, signal, sys, threading, time
    from rlgpt.rl.worker_watch import StopDeadline

    if __name__ == "__main__":
        ctx = multiprocessing.get_context("spawn")
        worker = ctx.Process(target=time.sleep, args=(3600,), name="rollout_proc0")
        learner = ctx.Process(target=time.sleep, args=(3600,), name="learner_proc0")
        worker.start(); learner.start()
        print(worker.pid, learner.pid, flush=True)
        StopDeadline(lambda: [learner, worker], sys.argv[1], grace_s=float(sys.argv[2]), poll_s=0.05).start()
        os.kill(worker.pid, signal.SIGKILL)
        # The trainer's main thread waits forever in C with the GIL released, as it does on a queue lock
        # that a killed Sample Factory process held.
        lock = threading.Lock()
        lock.acquire()
        lock.acquire()
    """
)


def test_stop_deadline_ends_a_trainer_stuck_after_a_death(tmp_path):
    import psutil

    proc = subprocess.Popen(
        [sys.executable, "-c", STUCK_TRAINER, str(tmp_path), "0.5"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    worker, learner = (int(pid) for pid in out.split())
    assert proc.returncode == 1, err[-2000:]
    assert err.strip().splitlines()[-1] == (
        f"rlgpt: error: env worker {worker} (rollout_proc0) died (SIGKILL); checkpoints and metrics kept in "
        f"{tmp_path}, re-run the same command to resume"
    )
    # The live child was killed too (it is the deadline's, not the trainer's, last act).
    assert not psutil.pid_exists(learner) or psutil.Process(learner).status() == psutil.STATUS_ZOMBIE


def test_stop_grace_config_knob():
    assert load_config(None, []).stop_grace_sec == 45
    with pytest.raises(ConfigError, match="stop_grace_sec"):
        load_config(None, ["stop_grace_sec=0"])


HUNG_WORKER = textwrap.dedent(
    """
    import sys, time
    from rlgpt.rl.macro_marker import MacroMarker
    marker = MacroMarker(sys.argv[1])
    marker.running(MacroMarker.encode(sys.argv[2]))
    print("running", flush=True)
    while True:  # a macro call that never returns and takes no game step
        time.sleep(0.05)
    """
)


@pytest.mark.parametrize("macro", ["spin", ""])
def test_the_watch_kills_a_worker_whose_macro_call_hangs_and_names_it(tmp_path, macro):
    # A real child process marks a macro call running and never ends it; the trainer's real watch (on a real
    # signal-slot event loop) kills it after `hang_s` and stops the run naming the macro. A worker running
    # no macro (idle marker) is never killed, however long it runs.
    from types import SimpleNamespace

    from signal_slot.signal_slot import EventLoop

    from rlgpt.rl.macro_marker import markers_dir
    from rlgpt.rl.worker_watch import WorkerWatch

    markers_dir(tmp_path).mkdir(parents=True)
    marker = markers_dir(tmp_path) / "pending"
    child = subprocess.Popen([sys.executable, "-c", HUNG_WORKER, str(marker), macro], stdout=subprocess.PIPE,
                             text=True, env=ENV)
    try:
        assert child.stdout.readline().strip() == "running"
        if not macro:
            MacroMarker(marker).idle()
        marker.rename(markers_dir(tmp_path) / str(child.pid))
        proc = SimpleNamespace(pid=child.pid, name="rollout_proc0", is_alive=lambda: child.poll() is None,
                               exitcode=None)
        stopped = []
        runner = SimpleNamespace(event_loop=EventLoop("test"), timers=[], stopped=False, processes=[proc],
                                 _stop_training=lambda failed: stopped.append(failed))
        watch = WorkerWatch(runner, tmp_path, hang_s=0.3)
        # Until the watch records a death; an idle worker is watched for 2 s (several times hang_s).
        start = time.monotonic()
        while watch.death is None and time.monotonic() - start < (120 if macro else 2):
            proc.exitcode = child.poll()
            watch.check()
            time.sleep(0.05)
        if not macro:
            assert child.poll() is None and watch.death is None and not watch.hung
            return
        assert watch.death is not None and stopped == [True]
        assert watch.death.exitcode == -signal.SIGKILL and watch.death.hung_s >= 0.3
        text = watch.death.describe(tmp_path)
        assert "killed as hung" in text and "'spin'" in text
    finally:
        child.kill()
        child.wait()


def test_hang_seconds_config_knob():
    assert load_config(None, ["macros.hang_seconds=0"]).macros.hang_seconds == 0
    with pytest.raises(ConfigError, match="hang_seconds"):
        load_config(None, ["macros.hang_seconds=-1"])
