"""Latency-aware neural architecture search on top of annette-torch estimates.

`LatencyConstraint` puts the predicted latency into any Optuna objective; `space_from` turns a function
``trial -> nn.Module`` or a dict of choices into a search space for `optuna_search`; `Choice` marks a
supernet's searchable blocks for `annette_torch.lookup.LatencyTable.from_supernet` and `proxyless`.
"""

from __future__ import annotations

from typing import Any

from .constraint import LatencyConstraint
from .spaces.custom import ChoiceSpace, FunctionSpace, Sample, space_from

__all__ = ["LatencyConstraint", "FunctionSpace", "ChoiceSpace", "Sample", "space_from", "Choice"]


def __getattr__(name: str) -> Any:
    if name == "Choice":  # defined on first use: importing the search package does not import torch
        from .. import lookup
        return lookup.Choice
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
