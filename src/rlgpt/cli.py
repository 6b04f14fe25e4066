"""The ``rlgpt`` command: ``train``, ``eval``, ``run``, ``sweep``, ``report``, ``warm``, ``llm``.

Every user error (bad task name, bad config value, unwritable run dir, missing checkpoint) ends with a
single ``rlgpt: error: ...`` line and exit status 2, not a traceback; a worker process that dies during
training ends the run with one such line naming it (and the macro it ran) and exit status 1.
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rlgpt.llm.cli import add_subcommands as add_llm_subcommands

if TYPE_CHECKING:
    from rlgpt.config import RunConfig

EXIT_USAGE = 2


def _train(args: argparse.Namespace) -> int:
    from rlgpt.config import load_config

    overrides = list(args.set or [])
    for flag, key in (("task", "task"), ("steps", "steps"), ("seed", "seed"), ("run_dir", "run_dir"),
                      ("env", "env.kind")):
        value = getattr(args, flag)
        if value is not None:
            overrides.append(f"{key}={value}")
    if args.wandb:
        overrides.append("wandb=true")
    if args.verbose:
        overrides.append("verbose=true")
    cfg = load_config(args.config, overrides)

    from sample_factory.algo.utils.misc import ExperimentStatus

    from rlgpt.rl.evaluate import evaluate, plot_learning_curves
    from rlgpt.rl.train import train

    result = train(cfg)
    if result.status == ExperimentStatus.INTERRUPTED:
        raise KeyboardInterrupt
    if result.status != ExperimentStatus.SUCCESS:
        print(
            f"rlgpt: error: training failed (Sample Factory status {result.status}); "
            f"see {result.run_dir / 'sf_log.txt'}",
            file=sys.stderr,
        )
        return 1
    curves = plot_learning_curves(result.run_dir)
    print(
        f"trained {cfg.task}: {result.env_steps:,} env steps in {result.wall_time_s:.0f}s -> {result.run_dir}"
    )
    if curves:
        print(f"learning curves: {curves}")
    if cfg.eval_episodes > 0:
        report = evaluate(result.run_dir, episodes=cfg.eval_episodes)
        print(
            f"eval: success {report.success_rate:.2f}, Crafter score {report.crafter_score:.2f} over "
            f"{report.episodes} episodes -> {result.run_dir / 'eval'}"
        )
    return 0


def _eval(args: argparse.Namespace) -> int:
    from rlgpt.rl.evaluate import evaluate, plot_learning_curves

    report = evaluate(args.run_dir, episodes=args.episodes, deterministic=args.deterministic, seed=args.seed,
                      split=args.split)
    plot_learning_curves(args.run_dir)
    print(
        f"{report.task}: success {report.success_rate:.2f}, Crafter score {report.crafter_score:.2f} over "
        f"{report.episodes} episodes @ {report.env_steps:,} env steps"
    )
    unlocked = {k: v for k, v in report.achievement_success.items() if v > 0}
    for name, rate in sorted(unlocked.items(), key=lambda kv: -kv[1]):
        print(f"  {name:<22} {rate:.2f}")
    return 0


def run_config(args: argparse.Namespace) -> RunConfig:
    """The RunConfig of a parsed ``rlgpt run`` command line (its config file, flags and ``--set``s)."""
    from rlgpt.config import load_run_config

    overrides = llm_overrides(args.llm) if args.llm is not None else []
    overrides += list(args.set or [])
    overrides += executor_overrides(args)
    for flag in ("task", "steps", "seed", "run_dir", "mode"):
        value = getattr(args, flag)
        if value is not None:
            overrides.append(f"{flag}={value}")
    if args.env is not None:
        overrides.append(f"train.env.kind={args.env}")
    if args.wandb:
        overrides.append("wandb=true")
    if getattr(args, "verbose", False):
        overrides.append("train.verbose=true")
    return load_run_config(args.config, overrides)


def _run(args: argparse.Namespace) -> int:
    cfg = run_config(args)

    from rlgpt.run.report import result_table
    from rlgpt.run.runner import run

    summary = run(cfg)
    print(result_table([summary]))
    print(f"run directory: {summary['run_dir']}")
    return 0


def _sweep(args: argparse.Namespace) -> int:
    from pathlib import Path

    from rlgpt.config import ConfigError, load_run_config
    from rlgpt.run.runner import make_executor
    from rlgpt.run.sweep import Cell, cells, run_sweep

    try:
        seeds = [int(s) for s in args.seeds.split(",")]
    except ValueError:
        raise ConfigError(f"--seeds must be comma-separated integers, got {args.seeds!r}") from None
    matrix = cells(args.tasks.split(","), args.modes.split(","), seeds)
    overrides = list(args.set or []) + executor_overrides(args)
    if args.steps is not None:
        overrides.append(f"steps={args.steps}")
    if args.llm is not None:
        overrides += llm_overrides(args.llm)

    def make_config(cell: Cell, run_dir: Path) -> RunConfig:
        return load_run_config(args.config, [*overrides, f"task={cell.task}", f"mode={cell.mode}",
                                             f"seed={cell.seed}", f"run_dir={run_dir}"])

    def make_backend(cfg: RunConfig):
        from rlgpt.llm.config import build_backend

        return None if cfg.llm.replay_only else build_backend(cfg.llm)

    first = make_config(matrix[0], Path(args.out) / matrix[0].name)
    parallel = args.parallel or (len(matrix) if first.executor == "ray" else 1)
    record = run_sweep(args.out, matrix, make_config, make_executor(first), parallel,
                       make_backend=make_backend)
    print(record["table"])
    failed = [c for c in record["cells"] if c["state"] != "done"]
    if record["report"]:
        print(f"report: {record['report']['markdown']}")
    if failed:
        names = "; ".join(f"{c['task']}/{c['mode']}/seed {c['seed']}: {c.get('error', c['state'])}"
                          for c in failed)
        print(f"rlgpt: error: {len(failed)} of {len(matrix)} cells failed: {names}", file=sys.stderr)
        return 1
    return 0


def llm_overrides(llm: str) -> list[str]:
    """``--llm embedded|URL`` as RunConfig overrides."""
    if llm == "embedded":
        return ["llm.backend=embedded"]
    if llm.startswith(("http://", "https://")):
        # The served model name defaults to the server's first model; `--set llm.model=...` picks one.
        return ["llm.backend=http", f"llm.base_url={llm}", "llm.model="]
    from rlgpt.config import ConfigError

    raise ConfigError(f"--llm must be 'embedded' or an http(s)://HOST:PORT/v1 URL, got {llm!r}")


def executor_overrides(args: argparse.Namespace) -> list[str]:
    """``--executor`` and ``--ray-address`` as RunConfig overrides."""
    out = []
    if args.executor is not None:
        out.append(f"executor={args.executor}")
    if args.ray_address is not None:
        out.append(f"ray.address={args.ray_address}")
    return out


def add_executor_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--executor", choices=("local", "ray"),
                   help="where trainings run: local child processes (default) or Ray tasks "
                   "(needs the ray extra; the LLM stays in this process)")
    p.add_argument("--ray-address", dest="ray_address", metavar="ADDR",
                   help="the Ray cluster: 'auto' (started with `ray start` here) or HOST:PORT of its head; "
                   "default: a private Ray instance in this process")


def add_env_flag(p: argparse.ArgumentParser) -> None:
    from rlgpt.env_registry import env_names

    p.add_argument("--env", help=f"environment: {' | '.join(env_names())} (default crafter; "
                   "rlgpt.env_registry registers others)")


def steps_arg(text: str) -> int:
    """A step count as ``250000``, ``250_000``, ``250k`` or ``1M`` (for ``--budget``)."""
    scale = {"k": 1_000, "m": 1_000_000}.get(text[-1:].lower(), 1)
    try:
        value = float((text[:-1] if scale > 1 else text).replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a step count such as 250000 or 250k, got {text!r}") from None
    if value * scale <= 0 or value * scale != int(value * scale):
        raise argparse.ArgumentTypeError(f"expected a positive whole number of steps, got {text!r}")
    return int(value * scale)


def _warm(args: argparse.Namespace) -> int:
    from rlgpt.agents.common import system_messages
    from rlgpt.config import ConfigError, load_run_config
    from rlgpt.llm.config import build_backend, prompt_state_dir
    from rlgpt.llm.warm import warm

    overrides = (llm_overrides(args.llm) if args.llm is not None else []) + list(args.set or [])
    cfg = load_run_config(args.config, overrides)
    if cfg.llm.replay_only:
        raise ConfigError("llm.replay_only asks no model: there is nothing to warm")
    if cfg.llm.backend == "embedded":
        folder = prompt_state_dir(cfg.llm)
        if folder is None:
            raise ConfigError("the embedded model keeps no prompt states on disk (llm.prompt_cache_mb=0 or "
                              "llm.prompt_cache_dir=''): a warm state would die with this process")
        where = f"kept in {folder}"
    else:
        where = f"in the server's prefix cache at {cfg.llm.base_url}, if it keeps one"
    backend = build_backend(cfg.llm)

    def starting(i: int, n: int, name: str) -> None:
        loading = " (the first starts the model)" if i == 1 and cfg.llm.backend == "embedded" else ""
        print(f"  warming {i}/{n}: {name}{loading} ...", flush=True)

    def finished(w: Any) -> None:
        print(f"  {w.name:<12} {w.prompt_tokens:>6,} prompt tokens, {w.computed_tokens:>6,} computed "
              f"({w.seconds:.1f} s)", flush=True)

    try:
        done = warm(backend, system_messages(cfg.agents), on_start=starting, on_done=finished)
    finally:
        close = getattr(backend, "close", None)
        if close is not None:
            close()
    print(f"prompt states of {len(done)} system messages ({backend.model_id}) {where}")
    return 0


def _replay(args: argparse.Namespace) -> int:
    from rlgpt.run.replay import replay

    done = replay(args.run, args.out, episode=args.episode, length=args.length,
                  deterministic=args.deterministic)
    used = ", ".join(f"{name} {n}" for name, n in sorted(done.actions.items(), key=lambda kv: -kv[1]))
    print(f"test episode {args.episode} (seed {done.seed}) of {done.policy}: {done.steps} steps "
          f"({used}), {'success' if done.success else 'no success'}, return {done.episode_return:.2f}")
    print(f"replay: {done.path} ({done.frames} frames)")
    return 0


def _report(args: argparse.Namespace) -> int:
    from rlgpt.run.report import write_report

    paths = write_report(args.run_dirs, args.out, budget=args.budget,
                         wandb_project=args.wandb_project if args.wandb else None, replays=args.replays)
    print(paths["markdown"].read_text())
    print(f"report: {', '.join(str(p) for p in paths.values())}")
    return 0


def _skills_learn(args: argparse.Namespace) -> int:
    from pathlib import Path

    from rlgpt import layout
    from rlgpt.config import ConfigError, load_run_config
    from rlgpt.run.curriculum import learn, learn_table
    from rlgpt.run.runner import make_client
    from rlgpt.run.skills import SkillLibrary, default_skills_dir

    if args.max_achievements is not None and args.max_achievements < 1:
        raise ConfigError(f"--max-achievements must be >= 1, got {args.max_achievements}")
    overrides = (llm_overrides(args.llm) if args.llm is not None else []) + list(args.set or [])
    root = Path(args.library or load_run_config(args.config, overrides).skills_dir or default_skills_dir())
    run_dir = Path(args.run_dir) if args.run_dir else root / layout.LEARN_DIR
    cfg = load_run_config(args.config, [*overrides, f"skills_dir={root}", f"run_dir={run_dir}"])
    library = SkillLibrary(root)
    client = make_client(cfg, run_dir)
    attempts = learn(cfg, library, client, run_dir, args.max_achievements,
                     say=lambda line: print(line, flush=True), retry_failed=args.retry_failed)
    print(learn_table(attempts))
    version = library.code_library()
    print(f"skill library: {root} (version {version.version}, hash {version.hash})")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rlgpt", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("train", help="train PPO (Sample Factory APPO) on a Crafter task")
    p.add_argument("--config", help="YAML config (default: built-in defaults)")
    p.add_argument(
        "--task", help="Crafter achievement(s), e.g. collect_wood or place_table+make_wood_pickaxe; "
        "'crafter': the Crafter benchmark (crafter's own reward)"
    )
    add_env_flag(p)
    p.add_argument("--steps", help="environment steps to train for")
    p.add_argument("--seed", help="seed for policy and environments")
    p.add_argument("--run-dir", dest="run_dir", help="run directory (the same one resumes)")
    p.add_argument(
        "--wandb", action="store_true", help="log to W&B (offline unless WANDB_MODE says otherwise)"
    )
    p.add_argument("--verbose", action="store_true", help="show Sample Factory's own log on the console")
    p.add_argument(
        "--set",
        action="append",
        metavar="KEY=VALUE",
        help="override any config field, e.g. --set ppo.learning_rate=3e-4 (repeatable)",
    )
    p.set_defaults(func=_train)

    p = sub.add_parser("eval", help="evaluate a run's newest checkpoint (JSON + PNG under RUN_DIR/eval)")
    p.add_argument("run_dir", help="a run directory written by `rlgpt train`")
    p.add_argument("--episodes", type=int, default=50)
    p.add_argument("--deterministic", action="store_true", help="argmax actions instead of sampling")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--split", choices=("validation", "test"), default="validation",
                   help="evaluation seed split (rlgpt.rl.evaluate.eval_seed); test is for reported results")
    p.set_defaults(func=_eval)

    p = sub.add_parser("run", help="the RL-GPT loop (or a baseline) on a Crafter task")
    p.add_argument("--config", help="YAML RunConfig (default: built-in defaults)")
    p.add_argument("--task", help="Crafter achievement(s), e.g. make_wood_pickaxe or a+b; "
                   "'crafter': the Crafter benchmark")
    add_env_flag(p)
    p.add_argument("--steps", help="total primitive-step RL budget across iterations")
    p.add_argument("--seed", help="seed for policies, environments and sampling")
    p.add_argument("--run-dir", dest="run_dir", help="run directory (the same one resumes)")
    p.add_argument("--mode", help="rlgpt (default), ppo (no LLM) or code (LLM-written policy, no RL)")
    p.add_argument("--llm", help="'embedded' (default, in-process model) or an OpenAI-compatible URL "
                   "such as http://127.0.0.1:8000/v1")
    p.add_argument("--wandb", action="store_true", help="one W&B run for the whole run (offline by default)")
    p.add_argument("--verbose", action="store_true", help="show Sample Factory's own log on the console "
                   "(without it: in each training's sf_log.txt; llama.cpp's log is in RUN/llm_logs)")
    p.add_argument("--set", action="append", metavar="KEY=VALUE",
                   help="override any RunConfig field, e.g. --set agents.samples=1")
    add_executor_flags(p)
    p.set_defaults(func=_run)

    p = sub.add_parser("sweep", help="rlgpt run for every task x mode x seed (resumable), then the report")
    p.add_argument("--tasks", required=True, help="comma-separated tasks, e.g. collect_wood,place_table")
    p.add_argument("--modes", default="rlgpt", help="comma-separated modes (default: rlgpt)")
    p.add_argument("--seeds", default="0", help="comma-separated seeds (default: 0)")
    p.add_argument("--out", required=True, help="sweep directory: one run directory per cell, sweep.json, "
                   "report/ (the same one resumes)")
    p.add_argument("--config", help="YAML RunConfig every cell starts from")
    p.add_argument("--steps", help="each run's primitive-step RL budget")
    p.add_argument("--llm", help="'embedded' (default) or an OpenAI-compatible URL")
    p.add_argument("--parallel", type=int, help="cells in flight at once (default: 1 locally, all on Ray)")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="override any RunConfig field")
    add_executor_flags(p)
    p.set_defaults(func=_sweep)

    p = sub.add_parser("report", help="Table 2 (test success per task per mode), steps to success, steps "
                       "by kind, success-vs-steps curves, the Crafter score (Markdown + PNG) from run dirs")
    p.add_argument("run_dirs", nargs="+", help="directories written by `rlgpt run`")
    p.add_argument("--out", default="report", help="output directory (default: ./report)")
    p.add_argument("--budget", type=steps_arg, metavar="STEPS",
                   help="report each run's budget-mark evaluation at exactly STEPS primitive steps (e.g. "
                   "250k); a run without that mark is shown as missing. Default: each run's final result")
    p.add_argument("--wandb", action="store_true",
                   help="also log the tables and PNGs to one W&B run in OUT/wandb (offline unless WANDB_MODE "
                   "says otherwise)")
    p.add_argument("--wandb-project", dest="wandb_project", default="rlgpt",
                   help="the W&B project of --wandb (default: rlgpt)")
    p.add_argument("--no-replays", dest="replays", action="store_false",
                   help="skip the replay GIF of one test episode per mode (`rlgpt replay`, each plays one "
                   "episode of at most 300 steps)")
    p.set_defaults(func=_report)

    p = sub.add_parser("replay", help="one test episode of a run's policy as an animated GIF: crafter's "
                       "frames with the running macro, its source, the inventory and the reward")
    p.add_argument("run", help="a run directory of `rlgpt run` (its reported policy) or of `rlgpt train`")
    p.add_argument("--episode", type=int, default=0, metavar="K", help="test episode K of the run's seed "
                   "(default 0)")
    p.add_argument("--out", help="the GIF (or .mp4, with imageio-ffmpeg) to write (default: "
                   "RUN/replay_K.gif)")
    p.add_argument("--length", type=int, help="episode length (default: the length the run's test "
                   "evaluation plays); one frame per step")
    p.add_argument("--deterministic", action="store_true", help="the network's most likely actions instead "
                   "of sampled ones")
    p.set_defaults(func=_replay)

    p = sub.add_parser("warm", help="compute the LLM's prompt states for every role's system message at a "
                       "config's prompt levels, so the first run on this machine starts warm")
    p.add_argument("--config", help="YAML RunConfig whose agents and llm sections the runs will use "
                   "(default: built-in defaults)")
    p.add_argument("--llm", help="'embedded' (default) or an OpenAI-compatible URL")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="override any RunConfig field")
    p.set_defaults(func=_warm)

    p = sub.add_parser("skills", help="the skill library's code skills")
    skills = p.add_subparsers(dest="skills_command", required=True)
    q = skills.add_parser("learn", help="an automatic curriculum over the achievement graph: write, verify "
                          "(probes) and store one code skill per achievement, easiest unmet first "
                          "(resumable: re-run to continue)")
    q.add_argument("--library", help="the skill library directory (default: skills_dir, $RLGPT_SKILLS_DIR "
                   "or ~/.cache/rlgpt/skills)")
    q.add_argument("--max-achievements", dest="max_achievements", type=int,
                   help="new attempts this run makes at most (default: until no achievement is eligible)")
    q.add_argument("--retry-failed", dest="retry_failed", action="store_true",
                   help="attempt again the achievements whose earlier attempt stored no skill")
    q.add_argument("--run-dir", dest="run_dir", help="where candidates and the LLM cache go "
                   "(default: LIBRARY/learn)")
    q.add_argument("--config", help="YAML RunConfig whose agents and llm sections it uses")
    q.add_argument("--llm", help="'embedded' (default) or an OpenAI-compatible URL")
    q.add_argument("--set", action="append", metavar="KEY=VALUE", help="override any RunConfig field, "
                   "e.g. --set agents.api=basic")
    q.set_defaults(func=_skills_learn)

    add_llm_subcommands(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    from rlgpt.agents.replies import ReplyValidationError
    from rlgpt.config import ConfigError
    from rlgpt.llm.errors import LLMError
    from rlgpt.macro.files import MacroFileError
    from rlgpt.rl.checkpoint import CheckpointError
    from rlgpt.rl.evaluate import EvalError
    from rlgpt.rl.worker_watch import WorkerDiedError
    from rlgpt.run.report import ReportError
    from rlgpt.rundir import RunDirError

    user_errors = (
        ConfigError,
        RunDirError,
        MacroFileError,
        CheckpointError,
        EvalError,
        LLMError,
        ReplyValidationError,
        ReportError,
        FileNotFoundError,
    )
    # `kill PID` (a scheduler's SIGTERM) stops any command the way Ctrl-C does: the running training
    # checkpoints (`LocalExecutor` passes the signal on and waits for it) and the same command resumes.
    from rlgpt.procs import raise_terminated

    signal.signal(signal.SIGTERM, raise_terminated)
    try:
        return int(args.func(args) or 0)
    except user_errors as e:
        print(f"rlgpt: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except WorkerDiedError as e:
        print(f"rlgpt: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("rlgpt: interrupted; re-run the same command to resume", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
