"""The architecture's layering, checked on the source: the prediction path imports nothing from the
benchmark tool, the model generator, validation, the CLI or the fitting libraries; no two modules import
each other (imports inside functions count too; those under ``if TYPE_CHECKING:`` never run and do not)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: source folders and the package they install as
SOURCES = {ROOT / "annette_torch": "annette_torch", ROOT / "search": "annette_torch.search"}
#: layers, lowest first: a module may import its own layer and lower ones only
LAYERS = {
    "core": ("annette_torch", "annette_torch.errors", "annette_torch.atomic", "annette_torch.dburl", "annette_torch.ir",
             "annette_torch.frontends", "annette_torch.mapping", "annette_torch.models", "annette_torch.platform", "annette_torch.platforms", "annette_torch.prediction", "annette_torch.types",
             "annette_torch.estimator", "annette_torch.lookup", "annette_torch.zoo", "annette_torch.zoo_blocks", "annette_torch.zoo_modern"),
    # charts of estimates and of search results: above the prediction path, below everything that draws them
    "charts": ("annette_torch.plots",),
    "search": ("annette_torch.search",),
    "bench": ("annette_torch.bench",),
    "validate": ("annette_torch.validate",),
    "fit": ("annette_torch.fit",),
    "top": ("annette_torch.cli",),
}
ORDER = list(LAYERS)
#: may import each other's layer freely: neither is below the other
INDEPENDENT = {frozenset({"search", "bench"})}
#: third-party packages the core layer must not import (fitting and search libraries)
CORE_FORBIDDEN = ("scipy", "sklearn", "optuna", "onnxruntime", "openvino")


def _modules() -> dict[str, tuple[Path, bool]]:
    out = {}
    for folder, pkg in SOURCES.items():
        for path in folder.rglob("*.py"):
            rel = path.relative_to(folder).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            out[".".join([pkg, *parts])] = (path, path.name == "__init__.py")
    return out


def _type_checking_only(node: ast.AST) -> bool:
    """``if TYPE_CHECKING:`` (or ``typing.TYPE_CHECKING``): its body is read by type checkers, never run."""
    if not isinstance(node, ast.If):
        return False
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or \
        (isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")


def _nodes(tree: ast.AST, in_functions: bool):
    """Every node of ``tree`` that runs (``if TYPE_CHECKING:`` bodies left out); without ``in_functions``,
    those outside function bodies only."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        if _type_checking_only(node):
            todo.extend(node.orelse)
        elif in_functions or not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            todo.extend(ast.iter_child_nodes(node))


def _imports(name: str, path: Path, is_pkg: bool, in_functions: bool = True) -> set[str]:
    """Absolute names of every module (or module attribute) imported in the file (also inside functions)."""
    pkg = name if is_pkg else name.rpartition(".")[0]
    found = set()
    for node in _nodes(ast.parse(path.read_text(encoding="utf-8")), in_functions):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            found.add(mod)
            found.update(f"{mod}.{a.name}" for a in node.names)
    return found


def _layer(mod: str) -> str | None:
    best = None
    for layer, prefixes in LAYERS.items():
        for p in prefixes:
            if (mod == p or mod.startswith(p + ".")) and (best is None or len(p) > len(best[1])):
                best = (layer, p)
    return best[0] if best else None


MODULES = _modules()
GRAPH = {m: {i for i in _imports(m, *MODULES[m]) if i in MODULES and i != m} for m in MODULES}


def test_every_module_has_a_layer():
    assert [m for m in MODULES if _layer(m) is None] == []


def test_no_module_imports_a_higher_layer():
    bad = []
    for m, deps in GRAPH.items():
        lm = _layer(m)
        for d in deps:
            ld = _layer(d)
            if ORDER.index(ld) > ORDER.index(lm) and frozenset({lm, ld}) not in INDEPENDENT:
                bad.append(f"{m} ({lm}) imports {d} ({ld})")
    assert bad == []


def test_the_core_imports_no_fitting_or_runtime_library():
    """At module level; a layer model's own ``fit`` (the scikit-learn estimator contract) may import
    scikit-learn when called, which prediction never does (the next-but-one test checks that at run time)."""
    bad = sorted(f"{m} imports {i}" for m in MODULES if _layer(m) == "core"
                 for i in _imports(m, *MODULES[m], in_functions=False) if i.split(".")[0] in CORE_FORBIDDEN)
    assert bad == []


def test_no_import_cycles_between_modules():
    """A package's __init__ importing its own submodules (to re-export them) is not a cycle."""
    def edges(m):
        return {d for d in GRAPH[m] if not (MODULES[m][1] and d.startswith(m + "."))
                and not (MODULES[d][1] and m.startswith(d + "."))}
    index, low, stack, on, cycles, counter = {}, {}, [], set(), [], [0]

    def visit(v):  # Tarjan's strongly connected components
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges(v):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for m in sorted(MODULES):
        if m not in index:
            visit(m)
    assert cycles == []


def test_type_checkers_see_every_lazily_loaded_public_name():
    """`annette_torch.__init__` loads most public names on first use (`_LAZY`); its ``if TYPE_CHECKING:``
    block imports each of them from the module `_LAZY` names, as ``import X as X`` (an explicit re-export)."""
    import annette_torch

    path = ROOT / "annette_torch" / "__init__.py"
    seen = {}
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if _type_checking_only(node):
            for imp in ast.walk(node):
                if isinstance(imp, ast.ImportFrom):
                    for a in imp.names:
                        assert a.asname == a.name, f"{a.name}: import it as itself (an explicit re-export)"
                        seen[a.name] = "." * imp.level + (imp.module or "")
    assert seen == annette_torch._LAZY
    assert set(annette_torch._LAZY) <= set(annette_torch.__all__)


def test_importing_the_package_imports_neither_torch_nor_onnx():
    code = "import sys, annette_torch; print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'onnx')))"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


@pytest.mark.slow
def test_estimating_with_every_shipped_platform_loads_no_fitting_benchmark_or_torch_code():
    code = """
import sys
import annette_torch as at
from annette_torch.ir import LayerType as T, NetworkBuilder
b = NetworkBuilder("n")
x = b.input("x", (1, 3, 32, 32))
x = b.same(T.RELU, "relu", b.conv("conv", x, 16, 3, padding=1))
b.linear("fc", b.global_pool("gap", x), 10)
net = b.build()
for name in at.list_platforms():
    e = at.estimate(net, name)
    e.table(), e.e2e_ms, e.to_dict()
at.estimate_many([net, net], "ort-cpu")
prefixes = ("annette_torch.fit", "annette_torch.bench", "annette_torch.validate", "annette_torch.cli",
            "annette_torch.search", "scipy", "sklearn", "optuna", "torch", "onnxruntime", "openvino")
print(sorted(m for m in sys.modules if m.startswith(prefixes)))
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"
