"""Run directories: creating one, locking it, and crash-safe writes (the file names are in
`rlgpt.layout`)."""

from __future__ import annotations

import fcntl
import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from rlgpt.errors import RlgptError


class RunDirError(RlgptError, OSError):
    """The run directory cannot be created or written."""


def prepare_run_dir(path: str | os.PathLike) -> Path:
    """Create ``path`` if needed and prove it is writable, or raise RunDirError with the reason."""
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".write-probe-"):
            pass
    except OSError as e:
        raise RunDirError(f"run dir {str(path)!r} is not writable: {e.strerror or e}") from None
    return path


@contextmanager
def locked_run_dir(path: Path, lock_name: str) -> Iterator[None]:
    """Hold ``path/lock_name`` (an exclusive fcntl lock, held by the open file) for the whole block, or
    raise RunDirError at once when another process holds it: two runs writing one directory would tear
    each other's steps. The kernel drops the lock when the holder dies, SIGKILL included, so a killed run
    never leaves a stale lock behind."""
    lock_path = Path(path) / lock_name
    with open(lock_path, "a+") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            holder = f.read().strip() or "another process"
            raise RunDirError(f"run dir {str(path)!r} is in use by {holder}; wait for it to end or use "
                              "another --run-dir") from None
        f.seek(0)
        f.truncate()
        f.write(f"rlgpt pid {os.getpid()}")
        f.flush()
        try:
            yield
        finally:
            f.seek(0)
            f.truncate()
            fcntl.flock(f, fcntl.LOCK_UN)


def current_umask() -> int:
    """The process's umask, read without changing it (``os.umask`` can only be read by setting it, which
    races with other threads creating files)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Write a file so that a crash leaves either the old or the new content, never a torn one.

    The file gets the permissions ``open()`` would give it (0644 under the usual umask), not mkstemp's 0600:
    run-directory outputs are meant to be read like any other output.
    """
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as f:
            os.fchmod(f.fileno(), 0o666 & ~current_umask())
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json(path: str | os.PathLike, data: Any) -> None:
    atomic_write_text(path, json.dumps(data, indent=2, sort_keys=True) + "\n")


def write_yaml(path: str | os.PathLike, data: Any) -> None:
    atomic_write_text(path, yaml.safe_dump(data, sort_keys=False))
