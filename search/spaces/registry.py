"""Search spaces as the Optuna searches see them: the `Space` protocol, one adapter per space, `get_space`.

An adapter samples an architecture from an Optuna trial, builds its IR for the latency estimate and encodes
it as a string (the key of studies, caches and accuracy tables); the IR builders live in `nb201`, `nb101`,
`mbv2` and `anb` beside this module. `space_network` builds a candidate named as ``SPACE:ARCH[:CLASSES]`` (the
rows of ``annette adapt --latencies``).
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Mapping, Protocol, Sequence, Union, cast, runtime_checkable

import numpy as np

from ...errors import AnnetteError
from ...ir import INT_COLUMNS, IRError, Network
from . import anb, mbv2, nb101, nb201
from .attention_spaces import HybridSpace, ViTSpace
from .custom import ChoiceSpace, FunctionSpace, Sample, space_from

__all__ = ["Space", "NB201Space", "NB101Space", "MBV2Space", "ANBSpace", "ViTSpace", "HybridSpace", "FunctionSpace",
           "ChoiceSpace", "Sample", "SPACES", "SpaceLike", "get_space", "same_network", "split_space_spec",
           "space_network"]

log = logging.getLogger(__name__)

#: a stitched piece of an MBV2 network: types, int-column matrix, local edges (-1 = the piece's input),
#: names, index of its output layer, number of residual adds
_Piece = tuple[np.ndarray, np.ndarray, np.ndarray, list[str], int, int]


@runtime_checkable
class Space(Protocol):
    """What a search needs from a search space: sample an architecture, build its IR, name it."""

    name: str

    def suggest(self, trial: Any) -> Any:
        """Draw an architecture with ``trial.suggest_*``; raise ``optuna.TrialPruned`` for an invalid one."""

    def network(self, arch: Any) -> Network:
        """The architecture's IR (for the latency estimate)."""

    def encode(self, arch: Any) -> str:
        """A string that identifies the architecture (stored in the study, the key of caches and CSVs)."""

    def decode(self, text: str) -> Any:
        """Inverse of `encode`; raises ValueError for a malformed string."""


class _SpaceBase:
    """Defaults of the optional adapter methods (cache and table keys) in terms of `encode` / `decode`."""

    name = "space"

    def latency_key(self, arch: Any) -> Any:
        """Key of the latency cache: architectures with equal keys have equal networks (default: encoding)."""
        return self.encode(arch)  # type: ignore[attr-defined]

    def key(self, arch: Any) -> str:
        """Key of an architecture in accuracy tables (default: its encoding)."""
        return self.encode(arch)  # type: ignore[attr-defined]

    def text_key(self, text: str) -> str:
        """Key of a table entry written as text (default: the normalised encoding); ValueError if malformed."""
        return self.encode(self.decode(text))  # type: ignore[attr-defined]

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class NB201Space(_SpaceBase):
    """NAS-Bench-201 cells: 6 categorical edges over ``none / skip / conv1x1 / conv3x3 / avgpool3x3``.

    An architecture is the benchmark's arch string (``|nor_conv_3x3~0|+|...|``); its network is the
    benchmark's CIFAR skeleton (C=16, N=5, input 1x3x32x32) built directly as IR.
    """

    name = "nb201"

    def __init__(self, C: int = 16, N: int = 5, num_classes: int = 10) -> None:
        self._m = nb201
        self.C, self.N, self.num_classes = C, N, num_classes
        self._params = [(f"edge {d}<-{s}", e) for e, (s, d) in enumerate(nb201.EDGES)]

    def suggest(self, trial: Any) -> str:
        return self._m.arch_string([trial.suggest_categorical(p, self._m.OPS) for p, _ in self._params])

    def network(self, arch: str) -> Network:
        return self._m.build_network(arch, self.C, self.N, self.num_classes)

    def networks(self, archs: Sequence[str]) -> list[Network]:
        """The IR of each architecture, built as one batch."""
        return self._m.build_networks(list(archs), self.C, self.N, self.num_classes)

    def encode(self, arch: str) -> str:
        return arch

    def decode(self, text: str) -> str:
        text = text.strip()
        return self._m.arch_string([op for op, _, _ in self._m.parse(text)])

    def latency_key(self, arch: str) -> Any:
        return self._m.live_edges(arch)  # equal live edges -> identical networks

    def params_of(self, arch: str) -> dict[str, Any]:
        """Optuna parameters that select ``arch`` (for ``study.enqueue_trial``)."""
        ops = [op for op, _, _ in self._m.parse(arch)]
        return {p: ops[e] for p, e in self._params}


class NB101Space(_SpaceBase):
    """NAS-Bench-101 cells: the upper-triangular 7x7 adjacency (21 binary parameters) + 5 interior ops.

    A sampled cell is validated and pruned as the benchmark does (`annette_torch.search.spaces.nb101.validate`);
    an invalid one (output unreachable, > 9 edges after pruning) prunes its trial (``TrialPruned``, reason in
    ``user_attrs["invalid"]``), and the samplers steer away from such cells. An architecture is the pruned
    ``Spec``; its encoding is ``rows/of/the/matrix|op;op;...`` (e.g. ``011/001/000|input;conv3x3-bn-relu;
    output``; ``,`` is accepted too when decoding). Accuracy tables are matched by the benchmark's
    isomorphism-invariant hash (`key`), so a CSV may hold either the 32-hex ``spec_hash`` or the encoding.
    """

    name = "nb101"

    def __init__(self) -> None:
        self._m = nb101
        n = nb101.MAX_VERTICES
        self._bits = [(i, j) for i in range(n) for j in range(i + 1, n)]

    def suggest(self, trial: Any) -> Any:
        import optuna
        m = self._m
        n = m.MAX_VERTICES
        matrix = np.zeros((n, n), dtype=np.int64)
        for i, j in self._bits:
            matrix[i, j] = trial.suggest_categorical(f"edge {i}->{j}", (0, 1))
        ops = (m.INPUT, *(trial.suggest_categorical(f"op {v}", m.OPS) for v in range(1, n - 1)), m.OUTPUT)
        try:
            return m.validate(matrix, ops)
        except ValueError as e:
            trial.set_user_attr("invalid", str(e))
            raise optuna.TrialPruned(f"invalid NB101 cell: {e}") from None

    def network(self, arch: Any) -> Network:
        return self._m.build_network(arch.matrix, arch.ops)

    def encode(self, arch: Any) -> str:
        rows = "/".join("".join(str(int(v)) for v in row) for row in np.asarray(arch.matrix))
        return f"{rows}|{';'.join(arch.ops)}"

    def decode(self, text: str) -> Any:
        rows, sep, ops = text.strip().partition("|")
        if not sep:
            raise ValueError(f"NB101 encoding {text!r}: expected 'matrix rows|ops', e.g. '01/00|input;output'")
        bits = rows.split("/")
        if any(len(r) != len(bits) or set(r) - {"0", "1"} for r in bits):
            raise ValueError(f"NB101 encoding {text!r}: matrix rows must be {len(bits)} binary digits each")
        matrix = np.array([[int(c) for c in r] for r in bits], dtype=np.int64)
        return self._m.validate(matrix, tuple(o.strip() for o in ops.replace(",", ";").split(";")))

    def latency_key(self, arch: Any) -> Any:
        return self.encode(arch)

    def key(self, arch: Any) -> str:
        return self._m.spec_hash(arch.matrix, arch.ops)

    def text_key(self, text: str) -> str:
        t = text.strip().lower()
        if len(t) == 32 and all(c in "0123456789abcdef" for c in t):
            return t
        return self.key(self.decode(text))


class MBV2Space(_SpaceBase):
    """MobileNetV2 / ProxylessNAS block space: per searchable block a categorical over its candidates
    (``mb{3,5,7}_e{3,6}``, plus ``zero`` = skip where the block is residual). An architecture is the tuple
    of ops; its encoding joins them with ``-``. Input 1x3x224x224 (``resolution`` to change it).

    `network` stitches cached per-block pieces (``mbv2.stem_network`` / ``block_network`` / ``head_network``,
    built once per candidate) instead of building every layer again: the same IR as ``mbv2.build_network``
    (names, types, shapes, edges; checked against it on first use, falling back to it on any difference)
    in a fraction of the time.
    """

    name = "mbv2"

    def __init__(self, num_classes: int = 1000, resolution: int = 224) -> None:
        self._m = mbv2
        self.num_classes, self.resolution = num_classes, resolution
        self._pieces: dict[Any, _Piece] = {}
        self._fast: bool | None = None  # None: not checked yet

    def suggest(self, trial: Any) -> tuple[str, ...]:
        return tuple(trial.suggest_categorical(f"block {i:02d}", blk.ops) for i, blk in enumerate(self._m.BLOCKS))

    def network(self, arch: Sequence[str]) -> Network:
        if self._fast is False:
            return self._m.build_network(arch, self.num_classes, self.resolution)
        arch = tuple(arch)
        if self._fast is None:
            ref = self._m.build_network(arch, self.num_classes, self.resolution)
            try:
                net = self._stitch(arch)
                self._fast = same_network(net, ref)
            except Exception:  # noqa: BLE001 - the space module changed shape: use its builder
                self._fast = False
            if not self._fast:
                log.info("mbv2: stitched IR differs from mbv2.build_network; using the builder")
            return ref
        return self._stitch(arch)

    def _piece(self, key: Any) -> _Piece:
        """(types, int-column matrix, local edges (-1 = the piece's input), names, output, adds) of a part,
        its own Input layer dropped (kept for the stem: the network's input)."""
        p = self._pieces.get(key)
        if p is None:
            m = self._m
            if key == "stem":
                net, first = m.stem_network(self.resolution), 0
            elif key == "head":
                net, first = m.head_network(self.num_classes, self.resolution), 1
            else:
                net, first = m.block_network(key[0], key[1], self.resolution), 1
            types = net.types[first:]
            mat = np.vstack([net.cols[c][first:] for c in INT_COLUMNS]) if len(types) else \
                np.zeros((len(INT_COLUMNS), 0), np.int64)
            edges = net.edges - first
            names = list(net.names[first:])
            adds = sum(1 for n in names if n == "add" or n.startswith("add_"))
            p = (types, mat, edges, names, len(types) - 1, adds)
            self._pieces[key] = p
        return p

    def _stitch(self, arch: tuple[str, ...]) -> Network:
        self._m.validate(arch)
        parts = [self._piece("stem")] + [self._piece((i, op)) for i, op in enumerate(arch)] + [self._piece("head")]
        types, mats, edges, names = [], [], [], []
        at, out, n_add = 0, -1, 0
        for t, mat, e, nm, o, adds in parts:
            if len(e):
                edges.append(np.where(e < 0, out, e + at))
            if adds:
                nm = [(f"add_{n_add}" if n_add else "add") if (n == "add" or n.startswith("add_")) else n for n in nm]
                n_add += adds
            if len(t):
                types.append(t)
                mats.append(mat)
                names.extend(nm)
                out = at + o
                at += len(t)
        mat = np.hstack(mats)
        e = np.concatenate(edges) if edges else np.zeros((0, 2), np.int64)
        return Network.from_matrix("mbv2", names, np.concatenate(types), mat, e)

    def encode(self, arch: Sequence[str]) -> str:
        return "-".join(arch)

    def decode(self, text: str) -> tuple[str, ...]:
        return tuple(self._m.validate([op.strip() for op in text.strip().split("-")]))


class ANBSpace(_SpaceBase):
    """Accel-NASBench space (EfficientNet-B0 skeleton): per stage a categorical over expansion, kernel, number
    of blocks and squeeze-excitation (`anb`). An architecture is a tuple of `anb.StageChoice`; its encoding is
    ``e4k5l2+se-e1k3l1-...`` (`anb.encode`). Input 1x3x224x224."""

    name = "anb"

    def __init__(self, num_classes: int = 1000, resolution: int = 224) -> None:
        self._m = anb
        self.num_classes, self.resolution = num_classes, resolution

    def suggest(self, trial: Any) -> Any:
        m = self._m
        return m.validate([(trial.suggest_categorical(f"stage {i} e", m.EXPANSIONS),
                            trial.suggest_categorical(f"stage {i} k", m.KERNELS),
                            trial.suggest_categorical(f"stage {i} l", m.DEPTHS[i]),
                            trial.suggest_categorical(f"stage {i} se", (False, True))) for i in range(len(m.STAGES))])

    def network(self, arch: Any) -> Network:
        return self._m.build_network(arch, self.num_classes, self.resolution)

    def encode(self, arch: Any) -> str:
        return self._m.encode(arch)

    def decode(self, text: str) -> Any:
        return self._m.decode(text)


def same_network(a: Network, b: Network) -> bool:
    """Same layers (names, types, integer columns) and edges."""
    return (a.names == b.names and np.array_equal(a.types, b.types) and np.array_equal(a.edges, b.edges)
            and all(np.array_equal(a.cols[c], b.cols[c]) for c in INT_COLUMNS))


#: search-space name -> adapter class
SPACES: dict[str, type] = {"nb201": NB201Space, "nb101": NB101Space, "mbv2": MBV2Space, "anb": ANBSpace,
                           "accel-nasbench": ANBSpace, "vit": ViTSpace, "hybrid": HybridSpace}

#: what `get_space` and the searches take: a shipped space's name, a `Space`, a dict of choices (with
#: ``build``) or a function ``trial -> model``
SpaceLike = Union[str, Space, Mapping[str, Any], Callable[..., Any]]


def get_space(space: SpaceLike, input_shape: Sequence[int] | None = None,
              build: Callable[..., Any] | None = None) -> Space:
    """An adapter by name (``nb201``, ``nb101``, ``mbv2``, ``anb`` / ``accel-nasbench``); ``space`` itself when it is one; a function
    ``trial -> model`` (`FunctionSpace`, with ``input_shape`` for an nn.Module) or a dict of choices with
    ``build(**params) -> model`` (`ChoiceSpace`)."""
    if isinstance(space, Mapping) or (callable(space) and not isinstance(space, type)
                                      and not callable(getattr(space, "suggest", None))):
        return space_from(space, input_shape, build)
    if not isinstance(space, str):
        missing = [m for m in ("suggest", "network", "encode") if not callable(getattr(space, m, None))]
        if missing:
            raise AnnetteError(f"{type(space).__name__} is not a search space: it lacks {', '.join(missing)}()")
        return cast(Space, space)  # it has the methods: a Space by duck typing
    cls = SPACES.get(space.lower())
    if cls is None:
        raise AnnetteError(f"unknown search space {space!r} (known: {', '.join(SPACES)})")
    return cls()


# ------------------------------------------------------------------------------------------------------
# candidates named by a string: SPACE:ARCH[:CLASSES]

_SPEC_FORM = "SPACE:ARCH[:CLASSES]"


def split_space_spec(text: str) -> tuple[str, str, int | None] | None:
    """``(space, arch, classes)`` of ``SPACE:ARCH[:CLASSES]`` when the text before the first colon names a
    built-in space (`SPACES`, any case); None for anything else (a file, a zoo name, ``module:callable``).

    No space's encoding holds a colon, so a last ``:`` field is the number of classes. Raises `AnnetteError`
    for an empty ARCH or CLASSES that is not a whole number >= 1.
    """
    head, sep, rest = text.strip().partition(":")
    space = head.strip().lower()
    if not sep or space not in SPACES:
        return None
    arch, sep, classes_text = rest.rpartition(":")
    classes = None
    if not sep:
        arch = rest
    else:
        c = classes_text.strip()
        if not (c.isascii() and c.isdigit()) or int(c) < 1:
            raise AnnetteError(f"{text.strip()!r}: CLASSES {classes_text!r} is not a whole number >= 1 "
                               f"({_SPEC_FORM}, e.g. {space}:ARCH:100)")
        classes = int(c)
    arch = arch.strip()
    if not arch:
        raise AnnetteError(f"{text.strip()!r}: no architecture after {space!r}: expected {_SPEC_FORM} "
                           f"({_example(space)})")
    return space, arch, classes


def space_network(text: str, input_shape: Sequence[int] | None = None) -> Network | None:
    """The network of a built-in space's candidate named as ``SPACE:ARCH[:CLASSES]`` (see `split_space_spec`),
    None when ``text`` names no built-in space.

    ARCH is the space's encoding (`Space.encode`; NB201: the benchmark's arch string), CLASSES the classifier's
    width (default: the space's own, 10 for the CIFAR spaces, 1000 for ``mbv2``). ``input_shape`` may be
    omitted; ``mbv2`` takes a square ``(1, 3, R, R)``, ``nb101`` any image shape, ``nb201`` only its CIFAR
    1x3x32x32. The network is named ``nb201#INDEX[:CLASSES]`` (the benchmark's index) or after the text.
    A malformed candidate raises `AnnetteError` (one line).
    """
    parsed = split_space_spec(text)
    if parsed is None:
        return None
    space, arch, classes = parsed
    shape = None if input_shape is None else tuple(int(v) for v in input_shape)
    try:
        if space == "nb201":
            if shape is not None and shape != nb201.INPUT_SHAPE:
                raise ValueError(f"nb201 networks take the CIFAR input {_dims(nb201.INPUT_SHAPE)}, not {_dims(shape)}")
            sp201 = NB201Space(num_classes=classes or 10)
            a = sp201.decode(arch)
            net = sp201.network(a)
            net.name = f"nb201#{nb201.arch_to_index(a)}" + (f":{classes}" if classes is not None else "")
            return net
        if space == "nb101":
            spec = NB101Space().decode(arch)
            if shape is not None and len(shape) != 4:
                raise ValueError(f"nb101 networks take an image input (N, C, H, W), not {_dims(shape)}")
            net = nb101.build_network(spec.matrix, spec.ops, num_classes=classes or 10,
                                      input_shape=shape or nb101.INPUT_SHAPE)
        elif hasattr(SPACES[space], "network_of"):  # vit, hybrid
            net = SPACES[space].network_of(arch, classes, shape)
        elif space == "anb":
            if shape is not None and (len(shape) != 4 or shape[:2] != (1, 3) or shape[2] != shape[3]):
                raise ValueError(f"anb networks take a square image input (1, 3, R, R), not {_dims(shape)}")
            net = ANBSpace(num_classes=classes or 1000,
                           resolution=224 if shape is None else shape[2]).network(ANBSpace().decode(arch))
        else:
            if shape is not None and (len(shape) != 4 or shape[:2] != (1, 3) or shape[2] != shape[3]):
                raise ValueError(f"mbv2 networks take a square image input (1, 3, R, R), not {_dims(shape)}")
            net = MBV2Space(num_classes=classes or 1000,
                            resolution=224 if shape is None else shape[2]).network(MBV2Space().decode(arch))
    except (ValueError, IRError) as e:
        hint = ""
        if arch.isidentifier() and classes is None and arch not in (*mbv2.CANDIDATES, mbv2.ZERO):
            hint = (f"; a module of your own named {space!r} is named by its package "
                    f"(package.{space}:{arch})")
        raise AnnetteError(f"{text.strip()!r} is not a valid {space} candidate: {e}{hint}") from None
    net.name = text.strip()
    return net


def _dims(shape: Sequence[int]) -> str:
    """``(1, 3, 32, 32)`` -> ``1x3x32x32`` for error lines."""
    return "x".join(str(v) for v in shape)


def _example(space: str) -> str:
    """A valid candidate of ``space`` in the ``SPACE:ARCH[:CLASSES]`` form, for error lines."""
    return {"nb201": "nb201:|nor_conv_3x3~0|+|nor_conv_3x3~0|skip_connect~1|+|skip_connect~0|none~1|"
                     "nor_conv_1x1~2|:100",
            "nb101": "nb101:011/001/000|input;conv3x3-bn-relu;output",
            "mbv2": "mbv2:" + "-".join(["mb3_e3"] * len(mbv2.BLOCKS)),
            "anb": "anb:e4k3l2+se-e4k3l2-e4k5l2+se-e4k5l2-e1k3l2+se-e6k5l2+se-e6k5l1+se",
            "vit": "vit:e240-" + "-".join(["h4r4"] * 6), "hybrid": "hybrid:c32_e4-c48_e4-a128_h4r2-a192_h4r4"}[space]
