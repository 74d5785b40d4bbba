"""The dispatch tables of the fx walker: analytic rules by module class, function object and method name,
filled by the family modules of `rules` through `_reg`, and the layer type of calls that run on the meta
device. A rule is ``rule(walker, module | function | method name, args, kwargs) -> value``."""

from __future__ import annotations

from typing import Any, Callable, Sequence

import torch

from ...ir import LayerType

_MODULES: dict[type, Callable] = {}
_FUNCTIONS: dict[Any, Callable] = {}
_METHODS: dict[str, Callable] = {}
#: Rules by a function's ``__name__``, for functions defined outside torch that libraries leave as fx leaves
#: (``torch.fx.wrap``): stochastic depth / drop path, the identity at inference.
_FUNCTION_NAMES: dict[str, Callable] = {}
#: Layer type of a module class / function when its shape had to come from the meta device.
_KNOWN_TYPES: dict[Any, LayerType] = {}


def _reg(table: dict, keys: Sequence[Any], rule: Callable, t: LayerType | None = None) -> None:
    for k in keys:
        table[k] = rule
        if t is not None and table is not _METHODS:
            _KNOWN_TYPES[k] = t


#: Calls whose result depends on a tensor's shape only: constants once shapes are static (ONNX folds them).
_CONST_FUNCTIONS = frozenset({torch.zeros_like, torch.ones_like, torch.empty_like, torch.full_like,
                              torch.rand_like, torch.randn_like, torch.randint_like})
_CONST_METHODS = frozenset({"new_zeros", "new_ones", "new_empty", "new_full", "new_tensor"})

_RULE_CACHE: dict[type, Callable | None] = {}


def _module_rule(cls: type) -> Callable | None:
    """The rule of a module class or of its nearest registered base class (e.g. ReLU6 -> Hardtanh)."""
    try:
        return _RULE_CACHE[cls]
    except KeyError:
        pass
    rule = None
    for base in cls.__mro__:
        rule = _MODULES.get(base)
        if rule is not None:
            if base in _KNOWN_TYPES and cls not in _KNOWN_TYPES:
                _KNOWN_TYPES[cls] = _KNOWN_TYPES[base]
            break
    _RULE_CACHE[cls] = rule
    return rule
