"""Validation: the networks the accuracy figures are measured on, whole-network latency measurement
through the runners, and the metrics."""

from .validation import *  # noqa: F401,F403
from .validation import __all__  # noqa: F401
