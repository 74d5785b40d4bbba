"""The fx graph walk: each node of a symbolically traced module becomes layers of a `NetworkBuilder`, its
output shape computed by the analytic rule the dispatch tables (`registry`) name for it, or by running the
node alone on the ``meta`` device when no rule covers it."""

from __future__ import annotations

import copy
import logging
import math
import warnings
from typing import Any, Sequence

import torch
import torch.nn as nn
from torch.fx import Node

from ...errors import ModelLoadError
from ...ir import MASK_SCAN_LIMIT, IRError, LayerType, Network, NetworkBuilder, subnormal_share
from .leaf import recover
from .registry import (_CONST_FUNCTIONS, _CONST_METHODS, _FUNCTION_NAMES, _FUNCTIONS, _KNOWN_TYPES, _METHODS,
                       _module_rule)
from .values import T, _first_line, _NeedsOnnx, _ShapeError, _TV

log = logging.getLogger(__package__)  # one logger for the whole fx front end


def _load(a: Any, env: dict) -> Any:
    t = type(a)
    if t is Node:
        return env[a]
    if t is tuple or t is list:
        return t(_load(x, env) for x in a)
    if t is dict:
        return {k: _load(v, env) for k, v in a.items()}
    if t is slice:
        return slice(_load(a.start, env), _load(a.stop, env), _load(a.step, env))
    if isinstance(a, list):  # fx's immutable_list: a list to the callee (torchvision's Swin copies one)
        return [_load(x, env) for x in a]
    if isinstance(a, tuple):  # torch.Size, named tuples
        return tuple(_load(x, env) for x in a)
    if isinstance(a, dict):  # fx's immutable_dict
        return {k: _load(v, env) for k, v in a.items()}
    return a


def _has_tv(a: Any) -> bool:
    t = type(a)
    if t is _TV:
        return True
    if t is tuple or t is list:
        return any(_has_tv(x) for x in a)
    if t is dict:
        return any(_has_tv(x) for x in a.values())
    return False


def _tvs(a: Any, out: list) -> list:
    t = type(a)
    if t is _TV:
        out.append(a)
    elif t is tuple or t is list:
        for x in a:
            _tvs(x, out)
    elif t is dict:
        for x in a.values():
            _tvs(x, out)
    return out


_PURE_MODULES = {"_operator", "operator", "builtins", "math"}


class _Walker:
    def __init__(self, root: nn.Module, shapes: list[tuple[int, ...]], name: str) -> None:
        self.root = root
        self.shapes = shapes
        self.b = NetworkBuilder(name)
        self.unknown: dict[str, int] = {}
        self.meta_modules: dict[str, nn.Module] = {}
        self.name = ""  # layer name of the node being converted
        self.module: str | None = None  # its qualified module name (call_module nodes)
        self.scope: str | None = None  # qualified name of the module whose forward() calls a function

    # -- layer creation -----------------------------------------------------------------------------
    def emit(self, t: LayerType, tvs: Sequence[_TV], shape: tuple[int, ...], in_shape: Sequence[int] | None = None,
             ir_out: Sequence[int] | None = None, name: str | None = None, **kw: Any) -> _TV:
        """Add a layer fed by the non-constant tensors ``tvs``; all-constant inputs fold to a constant. Subnormal
        values flow on (`_subnormal`)."""
        inputs = [v.layer for v in tvs if v.layer >= 0]
        logits, probs = _subnormal(t, tvs, shape, in_shape, kw)
        if not inputs:
            return _TV(-1, shape, None, logits, probs)
        if in_shape is None:
            for v in tvs:
                if v.layer >= 0:
                    in_shape = v.shape
                    break
        if self.module is not None:
            kw["module"] = self.module
        elif self.scope is not None:
            kw["scope"] = self.scope
        if len(shape) != 4 or ir_out is not None:  # the tensor's own shape, for display (the columns fold it)
            kw.setdefault("dims", tuple(int(d) for d in shape))
        idx = self.b.add(t, name or self.name, inputs, shape if ir_out is None else ir_out,
                         in_shape=in_shape, **kw)
        return _TV(idx, shape, None, logits, probs)

    # -- main loop ----------------------------------------------------------------------------------
    def run(self, graph) -> Network:
        env: dict[Node, Any] = {}
        shapes = iter(self.shapes)
        n_placeholders = 0
        for node in graph.nodes:
            op = node.op
            if op == "placeholder":
                shape = next(shapes, None)
                if shape is None:
                    if node.args:  # forward() argument with a default value
                        env[node] = node.args[0]
                        continue
                    raise ModelLoadError(f"{self.b.name}: forward() takes more inputs than the "
                                         f"{len(self.shapes)} shape(s) given (no shape for {node.target!r})")
                n_placeholders += 1
                dims = tuple(int(d) for d in shape) if len(shape) != 4 else None  # display: the real rank
                env[node] = _TV(self.b.add(LayerType.INPUT, str(node.target).lstrip("*"), [], shape, dims=dims),
                                shape)
                continue
            if op == "output":
                continue
            if op == "get_attr":
                v = _fetch_attr(self.root, node.target)
                if isinstance(v, torch.Tensor):  # a buffer holding an attention mask: its subnormal-band share
                    share = (subnormal_share(v.detach().cpu().numpy()) if v.is_floating_point() and v.device.type
                             != "meta" and 0 < v.numel() <= MASK_SCAN_LIMIT else 0.0)
                    v = _TV(-1, tuple(v.shape), v.dtype, share)
                env[node] = v
                continue
            args = _load(node.args, env)
            kwargs = _load(node.kwargs, env) if node.kwargs else {}
            env[node] = self.call(node, op, args, kwargs)
        if n_placeholders < len(self.shapes):
            raise ModelLoadError(f"{self.b.name}: {len(self.shapes)} input shapes given but forward() takes "
                                 f"{n_placeholders} tensor input(s)")
        return self.b.build()

    def call(self, node: Node, op: str, args: tuple, kwargs: dict) -> Any:
        target = node.target
        if op == "call_module":
            mod = self.root.get_submodule(target)
            rule = _module_rule(type(mod))
            self.name, self.module, self.scope, fn = target, target, None, mod
        else:
            if op == "call_function":
                if not _has_tv(args) and not _has_tv(kwargs):
                    if getattr(target, "__module__", None) in _PURE_MODULES:
                        return target(*args, **kwargs)  # arithmetic on sizes
                    return self.meta(node, op, args, kwargs, const=True)  # factory call: a constant
                if target in _CONST_FUNCTIONS:
                    return self.meta(node, op, args, kwargs, const=True)
                rule = _FUNCTIONS.get(target)
                if rule is None:
                    rule = _FUNCTION_NAMES.get(getattr(target, "__name__", ""))
            else:  # call_method
                if type(args[0]) is not _TV:
                    return getattr(args[0], target)(*args[1:], **kwargs)
                if target in _CONST_METHODS:
                    return self.meta(node, op, args, kwargs, const=True)
                rule = _METHODS.get(target)
            stack = node.meta.get("nn_module_stack")
            self.name, self.module, fn = node.name, None, target
            self.scope = next(reversed(stack.values()))[0] if stack else None
        if rule is None:
            return self.meta(node, op, args, kwargs)
        try:
            return rule(self, fn, args, kwargs)
        except _ShapeError as e:
            raise self.shape_error(node, args, str(e)) from None
        except IRError as e:
            raise self.shape_error(node, args, str(e)) from None
        except ModelLoadError:
            raise
        except Exception as e:  # noqa: BLE001 - a variant the rule does not cover
            log.debug("trace: no analytic rule for node %s (%s: %s); using the meta device",
                      node.name, type(e).__name__, e)
            return self.meta(node, op, args, kwargs)

    def shape_error(self, node: Node, args: tuple, msg: str) -> ModelLoadError:
        shapes = [list(v.shape) for v in _tvs(args, [])]
        what = (f"layer {node.target!r} ({type(self.root.get_submodule(node.target)).__name__})"
                if node.op == "call_module" else f"node {node.name!r} ({_op_name(node, self.root)})")
        inputs = ", ".join(str(s) for s in self.shapes)
        return ModelLoadError(f"{self.b.name}: {what} cannot take input shape(s) "
                              f"{', '.join(str(s) for s in shapes)}: {msg} (check input_shape={inputs})")

    # -- fallback: evaluate one node on the meta device ------------------------------------------------
    def meta(self, node: Node, op: str, args: tuple, kwargs: dict, const: bool = False) -> Any:
        ins = [] if const else _tvs((args, kwargs), [])
        margs, mkwargs = _to_meta(args), _to_meta(kwargs)
        try:
            with torch.device("meta"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                if op == "call_module":
                    res = self.meta_module(node.target)(*margs, **mkwargs)
                elif op == "call_function":
                    res = node.target(*margs, **mkwargs)
                else:
                    res = getattr(margs[0], node.target)(*margs[1:], **mkwargs)
        except NotImplementedError as e:
            rec = None if const else self.recover(node, op, args, kwargs, partial=True)
            if rec is not None:
                return rec
            raise _NeedsOnnx(f"node {node.name!r} ({_op_name(node, self.root)}) has no shape rule and cannot run "
                             f"on the meta device: {_first_line(e)}") from e
        except ModelLoadError:
            raise
        except Exception as e:  # noqa: BLE001 - torch's own shape check: the user's shapes are wrong, unless the
            rec = None if const else self.recover(node, op, args, kwargs, partial=True)  # call runs on real zeros
            if rec is not None:
                return rec
            raise self.shape_error(node, args, _first_line(e)) from None
        outs = _meta_tensors(res, [])
        if not outs:
            return res  # a Python value (e.g. numel())
        if not any(v.layer >= 0 for v in ins):
            return _from_meta(res, -1)
        opname = _op_name(node, self.root)
        t = _KNOWN_TYPES.get(type(self.root.get_submodule(node.target)) if op == "call_module" else node.target,
                             T.UNKNOWN)
        if t == T.UNKNOWN:
            rec = self.recover(node, op, args, kwargs) if len(outs) == 1 and isinstance(res, torch.Tensor) else None
            if rec is not None:  # a leaf call made of known layers (a function fx left as a leaf)
                return rec
            self.unknown[opname] = self.unknown.get(opname, 0) + 1
        layer = self.emit(t, ins, tuple(outs[0].shape), op=opname if t == T.UNKNOWN else None).layer
        return _from_meta(res, layer)

    def recover(self, node: Node, op: str, args: tuple, kwargs: dict, partial: bool = False) -> Any:
        """The node's layers from the ONNX export of the call alone (`leaf.recover`), or None."""
        fn = self.root.get_submodule(node.target) if op == "call_module" else node.target
        return recover(self, node, fn, args, kwargs, partial)

    def meta_module(self, target: str) -> nn.Module:
        m = self.meta_modules.get(target)
        if m is None:
            mod = self.root.get_submodule(target)
            # deep-copy the module with its parameters and buffers replaced by meta tensors (no weight copy)
            memo: dict[int, Any] = {}
            for p in mod.parameters():
                memo[id(p)] = nn.Parameter(torch.empty_like(p, device="meta"), requires_grad=p.requires_grad)
            for buf in mod.buffers():
                memo[id(buf)] = torch.empty_like(buf, device="meta")
            m = copy.deepcopy(mod, memo).to("meta")
            self.meta_modules[target] = m
        return m


#: types that pass their input's values on unchanged (a mask's share of subnormal logits goes with them)
_VALUE_KEEPING = (T.RESHAPE, T.TRANSPOSE, T.FLATTEN, T.DROPOUT)


def _subnormal(t: LayerType, tvs: Sequence[_TV], shape: tuple[int, ...], in_shape: Sequence[int] | None,
               kw: dict) -> tuple[float, float]:
    """The (logits, probs) shares of a new layer's output (see `_TV`); a Softmax or MatMul reading subnormal
    values gets its slow-path work in ``kw["slow"]`` (`ir.SLOW_UNITS`), as the ONNX front end counts it."""
    logits = max((v.logits for v in tvs), default=0.0)
    probs = max((v.probs for v in tvs), default=0.0)
    if not (logits or probs):
        return 0.0, 0.0
    if t in _VALUE_KEEPING:
        return logits, probs
    if t == T.ADD:
        return logits, 0.0
    if t == T.SOFTMAX and logits:
        kw["slow"] = round(logits * math.prod(shape))
        return 0.0, logits
    if t == T.MATMUL and probs and in_shape is not None:  # in_shape (batch, k, m, 1), output batch x m x n
        kw["slow"] = round(probs * math.prod(shape) * int(in_shape[1]))
    return 0.0, 0.0


def _to_meta(a: Any) -> Any:
    t = type(a)
    if t is _TV:
        return torch.empty(a.shape, dtype=a.dtype or torch.float32, device="meta")
    if t is tuple or t is list:
        return t(_to_meta(x) for x in a)
    if t is dict:
        return {k: _to_meta(v) for k, v in a.items()}
    return a


def _meta_tensors(a: Any, out: list) -> list:
    if isinstance(a, torch.Tensor):
        out.append(a)
    elif isinstance(a, (tuple, list)):
        for x in a:
            _meta_tensors(x, out)
    elif isinstance(a, dict):
        for x in a.values():
            _meta_tensors(x, out)
    return out


def _from_meta(a: Any, layer: int) -> Any:
    if isinstance(a, torch.Tensor):
        return _TV(layer, tuple(a.shape), a.dtype if a.dtype != torch.float32 else None)
    if isinstance(a, torch.Size):
        return a
    if isinstance(a, (tuple, list)):
        vals = tuple(_from_meta(x, layer) for x in a)
        if type(a) is tuple or type(a) is list:
            return vals
        try:  # keep named results (torch.return_types.max(...).values, namedtuples)
            return type(a)(*vals) if hasattr(a, "_fields") else type(a)(vals)
        except Exception:  # noqa: BLE001
            return vals
    if isinstance(a, dict):
        return {k: _from_meta(v, layer) for k, v in a.items()}
    return a


def _fetch_attr(root: nn.Module, target: str) -> Any:
    obj: Any = root
    for part in target.split("."):
        obj = getattr(obj, part)
    return obj


def _op_name(node: Node, root: nn.Module) -> str:
    if node.op == "call_module":
        return type(root.get_submodule(node.target)).__name__
    if node.op == "call_method":
        return str(node.target)
    return getattr(node.target, "__name__", str(node.target))
