"""Errors shared across the package's layers (config, LLM, envs): one definition each."""

from __future__ import annotations


class ConfigError(ValueError):
    """A configuration value, file or override is invalid; the message says which key and why."""
