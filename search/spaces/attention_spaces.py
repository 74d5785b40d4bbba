"""The attention spaces as the Optuna searches see them: `ViTSpace` (`vit`) and `HybridSpace` (`hybrid`).

Each adapter samples an architecture from a trial (define-by-run: the per-block parameters exist only for the
blocks the sampled depth keeps), builds its IR (traced from the module on the meta device), encodes it as
its space's string, and builds a ``SPACE:ARCH[:CLASSES]`` candidate (`network_of`). Networks are
stitched from cached traced parts (`vit.stitched_network`, `hybrid.stitched_network`).
"""

from __future__ import annotations

import logging
from typing import Any, Sequence

from ...ir import Network
from . import hybrid, vit
from ._stitch import PartCache, same_layers

__all__ = ["ViTSpace", "HybridSpace"]

log = logging.getLogger(__name__)


class _Base:
    """Cache and table keys: the encoding (equal encodings, equal networks); the last `CACHE` networks built
    are kept (a search's latency oracle and an ops-based objective ask for the same one).

    A network is stitched from parts traced once each (`_stitch.PartCache`); the first one is checked against
    the whole module's trace (same layers, columns and edges), and the space traces whole modules from then
    on if they differ.
    """

    name = "space"
    CACHE = 64
    _module: Any = None  # the space's module (vit or hybrid)

    def _build(self, arch: Any) -> Network:
        m = self._module
        fast = self.__dict__.get("_fast")
        if fast is False:
            return m.build_network(arch, self.num_classes, self.resolution)  # type: ignore[attr-defined]
        parts = self.__dict__.setdefault("_parts", PartCache())
        net = m.stitched_network(arch, self.num_classes, self.resolution, parts)  # type: ignore[attr-defined]
        if fast is None:
            ref = m.build_network(arch, self.num_classes, self.resolution)  # type: ignore[attr-defined]
            self._fast = same_layers(net, ref)
            if not self._fast:
                log.info("%s: stitched IR differs from the traced module; tracing whole modules", self.name)
                return ref
        return net

    def network(self, arch: Any) -> Network:
        cache: dict[str, Network] = self.__dict__.setdefault("_nets", {})
        key = self.encode(arch)
        net = cache.pop(key, None)
        if net is None:
            net = self._build(arch)
            while len(cache) >= self.CACHE:
                cache.pop(next(iter(cache)))
        cache[key] = net  # most recent last
        return net

    def encode(self, arch: Any) -> str:
        raise NotImplementedError

    def decode(self, text: str) -> Any:
        raise NotImplementedError

    def latency_key(self, arch: Any) -> str:
        return self.encode(arch)

    def key(self, arch: Any) -> str:
        return self.encode(arch)

    def text_key(self, text: str) -> str:
        return self.encode(self.decode(text))

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def _square(space: str, shape: Sequence[int] | None) -> int | None:
    """The resolution of a square image input (1, 3, R, R); None for no shape; ValueError otherwise."""
    if shape is None:
        return None
    s = tuple(int(v) for v in shape)
    if len(s) != 4 or s[:2] != (1, 3) or s[2] != s[3]:
        raise ValueError(f"{space} networks take a square image input (1, 3, R, R), not {'x'.join(map(str, s))}")
    return s[2]


class ViTSpace(_Base):
    """Vision transformers (`vit`): embedding dimension, depth, and per block heads and MLP ratio.
    An architecture is a `vit.ViTArch`; its encoding ``e240-h4r4-h4r3.5-...``. Input 1x3x224x224."""

    name = "vit"
    _module = vit

    def __init__(self, num_classes: int = 1000, resolution: int = 224) -> None:
        self.num_classes, self.resolution = num_classes, resolution

    def suggest(self, trial: Any) -> vit.ViTArch:
        embed = trial.suggest_categorical("embed", vit.EMBED_DIMS)
        depth = trial.suggest_categorical("depth", vit.DEPTHS)
        return vit.ViTArch(int(embed), tuple(
            (int(trial.suggest_categorical(f"block {i:02d} heads", vit.HEADS)),
             float(trial.suggest_categorical(f"block {i:02d} mlp ratio", vit.MLP_RATIOS))) for i in range(depth)))

    def model(self, arch: Any) -> Any:
        """The architecture as an ``nn.Module`` (for training)."""
        return vit.build_module(arch, self.num_classes, self.resolution)

    def encode(self, arch: Any) -> str:
        return vit.encode(arch)

    def decode(self, text: str) -> vit.ViTArch:
        return vit.decode(text)

    def params_of(self, arch: Any) -> dict[str, Any]:
        """Optuna parameters that select ``arch`` (for ``study.enqueue_trial``)."""
        a = vit.validate(arch)
        out: dict[str, Any] = {"embed": a.embed, "depth": a.depth}
        for i, (h, r) in enumerate(a.blocks):
            out[f"block {i:02d} heads"], out[f"block {i:02d} mlp ratio"] = h, r
        return out

    @staticmethod
    def network_of(arch: str, classes: int | None, shape: Sequence[int] | None) -> Network:
        """The network of a ``vit:ARCH[:CLASSES]`` candidate (input (1, 3, R, R), R a multiple of 16)."""
        r = _square("vit", shape)
        return vit.build_network(vit.decode(arch), classes or 1000, r or 224)


class HybridSpace(_Base):
    """Convolution stages then attention stages (`hybrid`): per stage width and depth, per block expansion
    or heads and MLP ratio. An architecture is a tuple of `hybrid.Stage`; its encoding
    ``c32_e4_e4-c48_e4-a128_h4r2-a192_h4r4``. Input 1x3x224x224."""

    name = "hybrid"
    _module = hybrid

    def __init__(self, num_classes: int = 1000, resolution: int = 224) -> None:
        self.num_classes, self.resolution = num_classes, resolution

    def suggest(self, trial: Any) -> tuple[hybrid.Stage, ...]:
        stages = []
        for i, s in enumerate(hybrid.STAGES):
            w = int(trial.suggest_categorical(f"stage {i} width", s.widths))
            d = int(trial.suggest_categorical(f"stage {i} depth", s.depths))
            ops = hybrid.block_ops(s.kind)
            stages.append(hybrid.Stage(w, tuple(str(trial.suggest_categorical(f"stage {i} block {j}", ops))
                                                for j in range(d))))
        return tuple(stages)

    def model(self, arch: Any) -> Any:
        """The architecture as an ``nn.Module`` (for training)."""
        return hybrid.build_module(arch, self.num_classes, self.resolution)

    def encode(self, arch: Any) -> str:
        return hybrid.encode(arch)

    def decode(self, text: str) -> tuple[hybrid.Stage, ...]:
        return hybrid.decode(text)

    def params_of(self, arch: Any) -> dict[str, Any]:
        """Optuna parameters that select ``arch`` (for ``study.enqueue_trial``)."""
        out: dict[str, Any] = {}
        for i, st in enumerate(hybrid.validate(arch)):
            out[f"stage {i} width"], out[f"stage {i} depth"] = st.width, st.depth
            for j, op in enumerate(st.blocks):
                out[f"stage {i} block {j}"] = op
        return out

    @staticmethod
    def network_of(arch: str, classes: int | None, shape: Sequence[int] | None) -> Network:
        """The network of a ``hybrid:ARCH[:CLASSES]`` candidate (input (1, 3, R, R))."""
        r = _square("hybrid", shape)
        return hybrid.build_network(hybrid.decode(arch), classes or 1000, r or 224)
