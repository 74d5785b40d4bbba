"""Models named by a string (the CLI's MODEL argument, a latencies CSV's model column): files, zoo names and
``package.module:callable`` -> `Network`."""

from __future__ import annotations

import importlib
import logging
import os
import sys
from typing import Any

from ..errors import ModelLoadError
from ..ir import Network

__all__ = ["load_model"]

log = logging.getLogger(__name__)


def load_model(spec: str, input_shape: Any = None) -> Network:
    """A model named by a string -> `Network`: an ``.onnx`` file, an ANNETTE ``.json`` graph, a zoo name
    (`annette_torch.zoo`) or ``package.module:callable`` returning an nn.Module; ``input_shape`` (one shape,
    or a list for a module with several inputs) where the model needs one."""
    low = spec.lower()
    if low.endswith((".onnx", ".json")) or os.path.exists(spec):
        if not os.path.exists(spec):
            raise ModelLoadError(f"{spec}: no such file")
        if os.path.isdir(spec):
            raise ModelLoadError(f"{spec}: is a directory, expected an .onnx file or an ANNETTE .json graph")
        if low.endswith(".json") and input_shape is not None:
            log.warning("the input shape is ignored for ANNETTE .json graphs (their shapes are fixed)")
        if low.endswith(".json"):
            from .annette_json import from_annette_json
            return from_annette_json(spec)
        if not low.endswith(".onnx"):
            raise ModelLoadError(f"{spec}: unknown model format (expected .onnx or an ANNETTE .json graph)")
        if isinstance(input_shape, list):
            raise ModelLoadError("an ONNX file takes one input shape (for its first input)")
        from .onnx import from_onnx
        return from_onnx(spec, input_shape=input_shape)
    if ":" in spec:
        return _from_callable(spec, input_shape)
    zoo = _zoo()
    if spec in zoo.ZOO:
        from .fx import trace
        shape = input_shape if input_shape is not None else zoo.INPUT_SHAPES[spec]
        return trace(zoo.get(spec), shape, name=spec)
    raise ModelLoadError(f"unknown model {spec!r}: not a file, not a zoo model ({', '.join(sorted(zoo.ZOO))}) "
                         "and not package.module:callable")


def _zoo():
    from .. import zoo
    return zoo


def _from_callable(spec: str, input_shape: Any):
    mod_name, _, attr = spec.partition(":")
    if not mod_name or not attr or not all(p.isidentifier() for p in mod_name.split(".") + attr.split(".")):
        raise ModelLoadError(f"{spec!r}: expected package.module:callable (e.g. torchvision.models:resnet18)")
    added = False
    if os.getcwd() not in sys.path and "" not in sys.path:  # the console script does not see the cwd
        sys.path.insert(0, os.getcwd())
        added = True
    try:
        module = importlib.import_module(mod_name)
    except Exception as e:  # noqa: BLE001 - the user's module: any failure is a user error
        raise ModelLoadError(f"cannot import module {mod_name!r}: {type(e).__name__}: {e}") from None
    finally:
        if added:
            sys.path.remove(os.getcwd())
    obj: Any = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ModelLoadError(f"module {mod_name!r} has no attribute {attr!r}") from None
    if not callable(obj):
        raise ModelLoadError(f"{spec}: {attr} is a {type(obj).__name__}, not a callable")
    try:
        model = obj()
    except Exception as e:  # noqa: BLE001
        raise ModelLoadError(f"calling {spec}() failed: {type(e).__name__}: {e}") from None
    import torch
    if not isinstance(model, torch.nn.Module):
        raise ModelLoadError(f"{spec}() returned a {type(model).__name__}, expected a torch.nn.Module")
    name = attr.split(".")[-1]
    if input_shape is None:
        shapes = getattr(_zoo(), "INPUT_SHAPES", {})
        if name not in shapes:
            raise ModelLoadError(f"{spec}: give the input shape (on the command line: --input-shape 1,3,224,224)")
        input_shape = shapes[name]
    from .fx import trace
    return trace(model, input_shape, name=name)
