"""Exceptions for user mistakes: the CLI prints their message as one line, never a traceback."""

from __future__ import annotations


class AnnetteError(Exception):
    """Base of every error caused by the user's input (a file, a shape, a platform, a model)."""


class ModelLoadError(AnnetteError):
    """A model file or object cannot be read or converted (missing, truncated, dynamic shapes...)."""


class PlatformError(AnnetteError):
    """A platform name is unknown or a platform file is malformed; the message names the field."""
