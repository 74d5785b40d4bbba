"""Search spaces without writing a class: from a function ``trial -> nn.Module`` or a dict of choices.

`FunctionSpace` wraps ``build(trial)`` (any ``trial.suggest_*`` calls, returning an ``nn.Module``, a
`Network` or an ``.onnx`` path); `ChoiceSpace` suggests one value per entry of a dict of choices and calls
``build(**params)``. An architecture is a `Sample`: the trial's parameters and the model built from them;
objectives receive it (``sample.model`` to train, ``sample.params`` to look up), and its encoding is the
parameters as sorted JSON. A decoded architecture is rebuilt from its parameters (``optuna.trial.FixedTrial``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from ...errors import AnnetteError
from ...estimator import to_network
from ...ir import Network

__all__ = ["Sample", "FunctionSpace", "ChoiceSpace", "space_from"]


@dataclass(eq=False)
class Sample:
    """One architecture of a function or choice space: its parameters and the model built from them."""

    params: dict[str, Any]
    model: Any = field(repr=False, default=None)

    def __str__(self) -> str:
        return json.dumps(self.params, sort_keys=True, default=str)


class FunctionSpace:
    """A space defined by ``build(trial)``: the trial's ``suggest_*`` calls are the parameters, the returned
    model (``nn.Module`` with ``input_shape``, `Network` or ``.onnx`` path) is the architecture."""

    def __init__(self, build: Callable[[Any], Any], input_shape: Sequence[int] | None = None,
                 name: str | None = None) -> None:
        if not callable(build):
            raise AnnetteError(f"a function space needs a callable trial -> model, got {type(build).__name__}")
        self.build = build
        self.input_shape = None if input_shape is None else tuple(input_shape)
        self.name: str = name or str(getattr(build, "__name__", "function"))

    def _call(self, trial: Any) -> Any:
        try:
            model = self.build(trial)
        except Exception as e:  # noqa: BLE001 - TrialPruned passes; a user's build error is one line
            import optuna
            if isinstance(e, optuna.TrialPruned):
                raise
            raise AnnetteError(f"space {self.name}: building the model failed: {type(e).__name__}: {e}") from e
        if model is None:
            raise AnnetteError(f"space {self.name}: the build function returned None, expected a model")
        return model

    def suggest(self, trial: Any) -> Sample:
        model = self._call(trial)
        return Sample(dict(trial.params), model)

    def rebuild(self, params: Mapping[str, Any]) -> Sample:
        """The architecture with these parameters (the build function run on a fixed trial)."""
        import optuna
        return Sample(dict(params), self._call(optuna.trial.FixedTrial(dict(params))))

    def network(self, arch: Sample) -> Network:
        model = arch.model if arch.model is not None else self.rebuild(arch.params).model
        return to_network(model, self.input_shape)

    def model(self, arch: Sample) -> Any:
        """The architecture's model (rebuilt when the sample carries none)."""
        return arch.model if arch.model is not None else self.rebuild(arch.params).model

    def encode(self, arch: Sample) -> str:
        return str(arch)

    def decode(self, text: str) -> Sample:
        try:
            params = json.loads(text)
        except ValueError as e:
            raise ValueError(f"{self.name}: {text!r} is not a JSON object of parameters ({e})") from None
        if not isinstance(params, dict):
            raise ValueError(f"{self.name}: {text!r} is not a JSON object of parameters")
        return Sample(params)

    def latency_key(self, arch: Sample) -> str:
        return str(arch)

    def key(self, arch: Sample) -> str:
        return str(arch)

    def text_key(self, text: str) -> str:
        return str(self.decode(text))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name}, input_shape={self.input_shape})"


class ChoiceSpace(FunctionSpace):
    """A space from a dict of choices: ``{"width": [16, 32, 64], "depth": range(1, 4), ...}``; each entry is
    one categorical parameter (a ``range`` an integer one), and ``build(**params)`` makes the model."""

    def __init__(self, choices: Mapping[str, Sequence[Any]], build: Callable[..., Any],
                 input_shape: Sequence[int] | None = None, name: str | None = None) -> None:
        if not isinstance(choices, Mapping) or not choices:
            raise AnnetteError("a choice space needs a non-empty dict of parameter -> choices")
        for k, v in choices.items():
            if isinstance(v, (str, bytes)) or not isinstance(v, (Sequence, range)) or len(v) == 0:
                raise AnnetteError(f"choice space: {k!r} must be a non-empty list of choices, got {v!r}")
        if not callable(build):
            raise AnnetteError("a choice space needs build(**params) -> model")
        self.choices = {str(k): v for k, v in choices.items()}
        self.build_params = build
        super().__init__(self._build, input_shape, name or getattr(build, "__name__", "choices"))

    def _build(self, trial: Any) -> Any:
        params = {}
        for k, v in self.choices.items():
            if isinstance(v, range) and v.step > 0:
                params[k] = trial.suggest_int(k, v.start, v[-1], step=v.step)
            else:
                params[k] = trial.suggest_categorical(k, list(v))
        return self.build_params(**params)


def space_from(space: Any, input_shape: Sequence[int] | None = None, build: Callable[..., Any] | None = None,
               name: str | None = None) -> FunctionSpace:
    """A function ``trial -> model`` -> `FunctionSpace`; a dict of choices (with ``build``) -> `ChoiceSpace`."""
    if isinstance(space, Mapping):
        if build is None:
            raise AnnetteError("a dict of choices needs build=: a function of the parameters returning the model")
        return ChoiceSpace(space, build, input_shape, name)
    if callable(space):
        return FunctionSpace(space, input_shape, name)
    raise AnnetteError(f"cannot make a search space from a {type(space).__name__}")
