"""Errors shared across the package's layers (config, LLM, envs): one definition each.

Every error class of the package derives from `RlgptError`, so a caller can tell "rlgpt refused or failed"
from a bug with one ``except``; each also keeps the built-in base it had (``ValueError``, ``RuntimeError``,
``OSError``), so existing ``except`` clauses still catch it.
"""

from __future__ import annotations


class RlgptError(Exception):
    """Base class of every error the package raises on purpose."""


class ConfigError(RlgptError, ValueError):
    """A configuration value, file or override is invalid; the message says which key and why."""
