"""The `annette` command line: one module per command group; the only code of the package that prints."""

from .app import main

__all__ = ["main"]
