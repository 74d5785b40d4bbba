"""Exceptions for user mistakes: the CLI prints their message as one line, never a traceback."""

from __future__ import annotations


class AnnetteError(Exception):
    """Base of every error caused by the user's input (a file, a shape, a platform, a model)."""


class ModelLoadError(AnnetteError):
    """A model file or object cannot be read or converted (missing, truncated, dynamic shapes...)."""


class PlatformError(AnnetteError):
    """A platform name is unknown or a platform file is malformed; the message names the field."""


class MissingExtraError(AnnetteError, ModuleNotFoundError):
    """An optional dependency is not installed; the message names the pip extra that brings it."""


#: optional dependency (import name) -> (its pip package, the annette-torch extra that installs it)
EXTRAS: dict[str, tuple[str, str]] = {
    "sklearn": ("scikit-learn", "fit"), "scipy": ("scipy", "fit"), "optuna": ("optuna", "search"),
    "onnxruntime": ("onnxruntime", "runtimes"), "openvino": ("openvino", "runtimes"),
}


def missing_extra(err: ImportError, what: str) -> MissingExtraError | None:
    """The one-line error for ``what`` when ``err`` is a missing optional dependency, else None."""
    root = (getattr(err, "name", None) or "").split(".")[0]
    if root not in EXTRAS:
        return None
    package, extra = EXTRAS[root]
    return MissingExtraError(f'{what} needs {package}, which is not installed: pip install "annette-torch[{extra}]"')


def require(what: str, *modules: str) -> None:
    """Raise `MissingExtraError` naming the extra to install unless every optional module imports."""
    import importlib

    for m in modules:
        try:
            importlib.import_module(m)
        except ImportError as e:
            err = missing_extra(ModuleNotFoundError(f"No module named {m!r}", name=m), what)
            if err is None:
                raise
            raise err from e


def read_json_file(path: str, error: type[AnnetteError] = AnnetteError, what: str = "file") -> object:
    """Parse a JSON file; a missing, unreadable or malformed file raises ``error`` with one clear line."""
    import json
    import os

    if not os.path.isfile(path):
        raise error(f"{path}: no such {what}")
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise error(f"{path}: not valid JSON ({e})") from None
    except OSError as e:
        raise error(f"{path}: cannot read ({e.strerror})") from None


def check_writable(path: "str | os.PathLike[str]") -> None:
    """Raise `AnnetteError` unless a file can be written at ``path`` (its folder exists and is writable): checked
    before long work whose result goes there, not after it."""
    import os

    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise AnnetteError(f"{path}: is a folder; give a file name")
    if not os.path.isdir(folder):
        raise AnnetteError(f"{path}: folder {folder} does not exist")
    if not os.access(folder, os.W_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        raise AnnetteError(f"{path}: not writable")
