"""Shared fixtures: the reference data folder beside the checkout (../shared), skipped when absent."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

ROOT = Path(__file__).resolve().parents[1]
REF = ROOT.parent / "shared" / "annette-reference"


@pytest.fixture(scope="session")
def ref_dir() -> Path:
    if not REF.is_dir():
        pytest.skip("../shared/annette-reference not present")
    return REF


def load_module(path: Path, name: str) -> Any:
    """A script (not part of the package) as a module."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="session")
def accuracy_benchmark():
    """benchmarks/accuracy.py as a module."""
    return load_module(ROOT / "benchmarks" / "accuracy.py", "accuracy_bench")


@pytest.fixture(scope="session")
def script() -> Callable[[str], Any]:
    """``script(name)``: scripts/<name>.py as a module."""
    return lambda name: load_module(ROOT / "scripts" / f"{name}.py", name)


@pytest.fixture(autouse=True)
def _own_platform_folder(tmp_path_factory, monkeypatch):
    """Every test sees an empty user platform folder of its own (never the developer's ~/.local/share)."""
    monkeypatch.setenv("ANNETTE_HOME", str(tmp_path_factory.mktemp("annette-home")))


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """URL (with its password) of a throw-away PostgreSQL server started for this session; skipped with the
    reason where none can be started (no server binaries, no psycopg)."""
    import pg_server
    try:
        server = pg_server.start()
    except pg_server.Unavailable as e:
        pytest.skip(f"PostgreSQL: {e}")
    yield server.url
    server.stop()


@pytest.fixture(autouse=True)
def _fresh_platform_names() -> Iterator[None]:
    """Platform names resolved by a test (which may have switched the shipped folder or the machine's
    identity) are resolved afresh by the next one."""
    yield
    from annette_torch.platform import refresh_platforms
    refresh_platforms()


@pytest.fixture
def quiet_optuna() -> Iterator[None]:
    """Optuna logs warnings only (a search's per-trial lines would flood the test output)."""
    import optuna

    old = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    yield
    optuna.logging.set_verbosity(old)
