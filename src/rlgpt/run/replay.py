"""`rlgpt replay`: one test episode of a run's policy as an animated GIF (or MP4), to watch what it does.

Every primitive step is one frame: crafter's own rendering of the game beside a panel with the action
running (a primitive, a macro or an option, named), its source when it is a macro, the inventory and the
reward. The policy is the one the run reports: the selected iteration's network of an ``rlgpt run``
directory (``--mode rlgpt`` or ``ppo``; its macros come from the training's own config), the policy macro
of a ``--mode code`` run, or the newest checkpoint of an ``rlgpt train`` directory. The episode is test
episode K of the run's seed (`rlgpt.rl.evaluate.eval_seed`), played by the same episode runner and
wrappers as the evaluation (`rlgpt.rl.evaluate.play_episode`).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rlgpt import layout
from rlgpt.errors import RlgptError
from rlgpt.rl.checkpoint import EvalError

FPS = 5
"""Frames per second of a replay: crafter's own GUI rate."""
SCALE = 5
"""Crafter's 64x64 frame is drawn this many times larger (nearest neighbour: its pixel art stays sharp)."""
PANEL_W = 420
"""Width in pixels of the text panel beside the game."""
SOURCE_LINES = 14
"""Lines of a macro's source shown on a frame."""
PREVIEW_STEPS = 300
"""Episode length of the replays `rlgpt report` embeds and W&B receives: enough to see a policy at work, a
GIF of a few MB at most."""
_VITALS = ("health", "food", "drink", "energy")


@dataclass
class Replay:
    """A written replay."""

    path: Path
    """The GIF (or MP4) written."""
    frames: int
    """Frames written: one per primitive step."""
    steps: int
    """The episode's primitive steps as the episode runner counted them (macro calls count their steps)."""
    seed: int
    """The episode's seed (test split of the run's seed)."""
    policy: str
    """What played: the training directory of the network, or ``code: <macro>``."""
    success: bool
    """The task succeeded in this episode."""
    episode_return: float
    """The episode's undiscounted task reward."""
    actions: dict[str, int] = field(default_factory=dict)
    """Primitive steps per action name (a macro's name counts every step its calls took)."""


@dataclass
class _Player:
    """What plays the episode: its env (the evaluation's wrappers), policy and macro sources by name."""

    env: Any
    policy: Any
    sources: dict[str, str]
    run_seed: int
    describe: str


def replay(run: str | Path, out: str | Path | None = None, episode: int = 0, length: int | None = None,
           deterministic: bool = False) -> Replay:
    """Play test episode `episode` of `run`'s policy (`length` replaces the episode length) and write it
    to `out` (default: ``RUN/replay_<episode>.gif``; a ``.mp4`` name needs imageio-ffmpeg)."""
    import torch

    from rlgpt.rl.evaluate import eval_seed, play_episode

    run = Path(run)
    if not run.is_dir():
        raise EvalError(f"{str(run)!r} is not a directory")
    out = Path(out) if out is not None else run / f"replay_{episode}.gif"
    if out.suffix.lower() not in (".gif", ".mp4"):
        raise EvalError(f"--out must name a .gif or .mp4 file, got {str(out)!r}")
    if out.suffix.lower() == ".mp4":
        _check_mp4()
    player = _player(run, length)
    seed = eval_seed("test", player.run_seed, episode)
    recorder = _Recorder(player.env, player.sources)
    labelled = _Labelled(player.policy, player.env, recorder)
    with torch.random.fork_rng(devices=[]):  # as `evaluate`: sampled actions from a seeded generator
        torch.manual_seed(seed)
        if deterministic and hasattr(player.policy, "deterministic"):
            player.policy.deterministic = True
        played = play_episode(player.env, labelled, seed)
    player.env.close()
    out.parent.mkdir(parents=True, exist_ok=True)
    recorder.write(out, seed)
    counts: dict[str, int] = {}
    for label in recorder.labels:
        counts[label] = counts.get(label, 0) + 1
    return Replay(out, len(recorder.frames), played.steps, seed, player.describe, played.success,
                  played.episode_return, counts)


def preview(run: str | Path, out: str | Path | None = None) -> tuple[Replay | None, str]:
    """Test episode 0 of `run` as a preview (`replay`, at most `PREVIEW_STEPS` steps): the replay and "",
    or None and why there is none (no policy, a missing checkpoint, a disk that cannot take the file). A
    visualisation after the run (its steps are in no budget): it never ends a run or a report, and a file
    it could not finish is removed."""
    target = Path(out) if out is not None else None
    try:
        return replay(run, target, length=PREVIEW_STEPS), ""
    except (RlgptError, OSError) as exc:
        if target is not None:
            with contextlib.suppress(OSError):  # where the file could not be written it cannot be removed
                target.unlink(missing_ok=True)
        return None, str(exc)


def _player(run: Path, length: int | None) -> _Player:
    """The policy `run` reports, on the env its evaluation plays."""
    if (run / layout.SF_CONFIG).is_file():
        return _trained(run, length, None)
    summary_path = run / layout.SUMMARY_JSON
    if not summary_path.is_file():
        raise EvalError(f"{str(run)!r} is neither a run directory of `rlgpt run` (no {layout.SUMMARY_JSON}: "
                        f"unfinished?) nor a training directory of `rlgpt train` (no {layout.SF_CONFIG})")
    from rlgpt.config import load_run_config
    from rlgpt.run.records import RunSummary

    summary = RunSummary.read(summary_path)
    cfg = load_run_config(run / layout.RUN_YAML)
    length = length or cfg.eval_length(cfg.task)
    if summary.mode == "code":
        from rlgpt.run.baselines import POLICY_MACRO, MacroPolicy, macro_policy_env

        written = json.loads((run / layout.CODE_DIR / layout.FAST_JSON).read_text())
        if not written.get("source"):
            raise EvalError(f"{run}: the model's policy code never compiled: there is no policy to replay")
        env = macro_policy_env(cfg, written["source"], length)
        return _Player(env, MacroPolicy(env.action_space.n - 1), {POLICY_MACRO: written["source"]}, cfg.seed,
                       f"code: {POLICY_MACRO}")
    if not summary.best:
        raise EvalError(f"{run}: no iteration finished its training and evaluation: there is no policy to "
                        "replay")
    from rlgpt.run.loop import selected_train_dir

    return _trained(selected_train_dir(run / summary.best), length, cfg.seed)


def _trained(train_dir: Path, length: int | None, run_seed: int | None) -> _Player:
    """The newest checkpoint of `train_dir` on its own wrappers (no dense reward: the task's reward only)."""
    from rlgpt.envs.tasks import make_task_env
    from rlgpt.rl.checkpoint import CheckpointError
    from rlgpt.rl.evaluate import CheckpointPolicy
    from rlgpt.rl.stored_policy import StoredPolicy
    from rlgpt.rl.worker_config import worker_config

    try:
        policy = StoredPolicy(train_dir)
    except CheckpointError as e:
        raise EvalError(f"{train_dir}: {e}") from None
    cfg = policy.cfg
    wc = worker_config(cfg)
    env = policy.wrap(make_task_env(policy.task, obs_mode=wc.train.env.obs_mode,
                                    episode_length=length or wc.episode_length or None))
    sources = {m.name: m.code for m in wc.macros}
    seed = int(cfg.seed or 0) if run_seed is None else run_seed
    return _Player(env, CheckpointPolicy(policy), sources, seed, str(policy.policy_dir))


def _mono_font() -> Any:
    """DejaVu Sans Mono (shipped with matplotlib) so code keeps its indentation; PIL's default without it."""
    from PIL import ImageFont

    try:
        from matplotlib import font_manager

        return ImageFont.truetype(font_manager.findfont("DejaVu Sans Mono", fallback_to_default=False), 11)
    except (ImportError, OSError, ValueError):
        return ImageFont.load_default(size=11)


def _check_mp4() -> None:
    import importlib.util

    if importlib.util.find_spec("imageio_ffmpeg") is None:
        raise EvalError("an MP4 replay needs imageio-ffmpeg (pip install imageio-ffmpeg); a .gif needs "
                        "nothing")


class _Labelled:
    """The policy, telling the recorder the name of each action it picks before the env plays it."""

    def __init__(self, policy: Any, env: Any, recorder: _Recorder) -> None:
        self.policy, self.env, self.recorder = policy, env, recorder

    def reset(self, slot: int) -> None:
        self.policy.reset(slot)

    def act(self, slots: Sequence[int], observations: Sequence[Any]) -> list[int]:
        from rlgpt.rl.evaluate import action_names

        actions = self.policy.act(slots, observations)
        names = action_names(self.env)
        action = int(actions[0])
        self.recorder.running(names[action] if action < len(names) else str(action))
        return actions


class _Recorder:
    """Draws a frame after every primitive step of the task env under `env`'s wrappers (macros and options
    step it many times per decision), from crafter's own renderer and the game's inventory."""

    def __init__(self, env: Any, sources: dict[str, str]) -> None:

        from rlgpt.envs.tasks import TaskEnv

        task_env = env
        while not isinstance(task_env, TaskEnv):
            task_env = task_env.env
        self.game = task_env.unwrapped
        self.sources = sources
        self.frames: list[Any] = []
        self.labels: list[str] = []
        self.label = ""
        self.calls = 0
        self.episode_return = 0.0
        self.font = _mono_font()
        step = task_env.step

        def recorded_step(action: int) -> Any:  # an instance attribute: every wrapper's self.env.step
            out = step(action)
            self.episode_return += float(out[1])
            self.frames.append(self._draw(int(action), float(out[1])))
            self.labels.append(self.label)
            return out

        task_env.step = recorded_step

    def running(self, name: str) -> None:
        """The policy picked `name`: the next steps are its."""
        self.label = name
        self.calls += 1

    def _draw(self, action: int, reward: float) -> Any:
        from PIL import Image, ImageDraw

        from rlgpt.envs.crafter import ACTION_NAMES

        frame = np.asarray(self.game.render(), dtype=np.uint8)
        game = Image.fromarray(frame).resize((frame.shape[1] * SCALE, frame.shape[0] * SCALE), Image.NEAREST)
        image = Image.new("RGB", (game.width + PANEL_W, game.height), (24, 24, 28))
        image.paste(game, (0, 0))
        draw = ImageDraw.Draw(image)
        inventory = self.game.crafter._player.inventory
        kind = "macro" if self.label in self.sources else (
            "primitive" if self.label in ACTION_NAMES else "option")
        lines = [
            (f"step {len(self.frames) + 1}  decision {self.calls}", (200, 200, 200)),
            (f"{kind}: {self.label}" + (f" -> {ACTION_NAMES[action]}" if kind != "primitive" else ""),
             (255, 220, 120)),
            (f"reward {reward:+.2f}   return {self.episode_return:+.2f}", (140, 220, 140)),
            ("  ".join(f"{k} {inventory.get(k, 0)}" for k in _VITALS), (200, 200, 200)),
            (" ".join(f"{k} {v}" for k, v in inventory.items() if v and k not in _VITALS) or "(no items)",
             (200, 200, 200)),
        ]
        source = self.sources.get(self.label)
        if source:
            lines.append(("", (0, 0, 0)))
            code = source.strip("\n").splitlines()
            lines += [(text[:60], (150, 190, 255)) for text in code[:SOURCE_LINES]]
            if len(code) > SOURCE_LINES:
                lines.append((f"... ({len(code) - SOURCE_LINES} more lines)", (120, 120, 140)))
        y = 6
        for text, colour in lines:
            draw.text((game.width + 8, y), text, fill=colour, font=self.font)
            y += 14
        # Paletted now (a third of the memory of RGB): a long episode's frames are all held until written.
        return image.quantize(colors=256, method=Image.Quantize.FASTOCTREE)

    def write(self, out: Path, seed: int) -> None:
        """Write the frames to `out` (GIF, or MP4 by its suffix)."""
        if not self.frames:
            raise EvalError(f"episode {seed} played no step: nothing to replay")
        if out.suffix.lower() == ".mp4":
            import imageio.v2 as imageio

            with imageio.get_writer(out, fps=FPS) as writer:
                for image in self.frames:
                    writer.append_data(np.asarray(image.convert("RGB")))
            return
        # Every frame's step counter differs, so the GIF writer merges none of them.
        self.frames[0].save(out, save_all=True, append_images=self.frames[1:], duration=1000 // FPS, loop=0)
