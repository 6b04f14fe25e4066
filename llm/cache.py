"""On-disk response cache: one JSON file per request, keyed by model + messages + schema + sampling.

A run that replays with the same cache gets byte-identical completions without touching a model, which
makes runs reproducible and lets them be re-executed offline.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from rlgpt.llm.types import Completion

_FORMAT_VERSION = 1


def request_key(model_id: str, messages: list[dict[str, str]], schema: dict[str, Any] | None,
                sampling: dict[str, Any]) -> str:
    """Return the hex sha256 of the canonical JSON of everything that determines a completion."""
    material = {
        "v": _FORMAT_VERSION,
        "model": model_id,
        "messages": messages,
        "schema": schema,
        "sampling": sampling,
    }
    canonical = json.dumps(material, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


class ResponseCache:
    """A directory of cached completions; writes are atomic so concurrent runs can share one."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    def _path(self, key: str) -> Path:
        # Two-level fan-out keeps directories small for long runs.
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> Completion | None:
        """Return the cached completion for `key`, or None when absent or unreadable."""
        path = self._path(key)
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            # A torn or foreign file is a miss, never a wrong answer.
            return None
        if entry.get("v") != _FORMAT_VERSION or entry.get("key") != key:
            return None
        return Completion(**entry["completion"])

    def put(self, key: str, completion: Completion, request: dict[str, Any]) -> None:
        """Store `completion` under `key`, with the request alongside for humans reading the cache."""
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        entry = {"v": _FORMAT_VERSION, "key": key, "request": request, "completion": completion.to_dict()}
        fd, tmp = tempfile.mkstemp(prefix=f".{key}.", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(entry, f, ensure_ascii=False, indent=1)
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)

    def __len__(self) -> int:
        return sum(1 for _ in self.root.glob("*/*.json"))
