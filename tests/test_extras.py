"""Without an optional extra, a command says in one line which extra to install (no ImportError traceback)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


def _run_without(modules: list[str], argv: list[str], cwd) -> subprocess.CompletedProcess:
    """Run the CLI with ``modules`` shadowed by stand-ins that fail to import as if not installed, in this
    process and in every worker process it starts."""
    shadow = cwd / "shadow"
    shadow.mkdir()
    for m in modules:
        (shadow / f"{m}.py").write_text(f"raise ModuleNotFoundError('No module named {m}', name='{m}')\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(shadow), os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, "-m", "annette_torch.cli", *argv], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=120)


@pytest.mark.slow
@pytest.mark.parametrize("blocked, argv, extra", [
    (["sklearn", "scipy"], ["calibrate", "--platform", "ort-cpu", "--quick", "--out", "never.json"], "fit"),
    (["optuna"], ["search", "--space", "nb201", "--platform", "zcu102-dnndk", "--latency-ms", "1", "--trials", "2",
                  "--out", "never.json"], "search"),
    (["onnxruntime"], ["bench", "--platform", "ort-cpu", "--suite", "conv", "-n", "1", "--db", "never.sqlite"],
     "runtimes"),
])
def test_a_missing_extra_is_one_line_naming_it(tmp_path, blocked, argv, extra):
    r = _run_without(blocked, argv, tmp_path)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip() and "cfg/s" not in ln]
    assert r.returncode == 1 and len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert f'pip install "annette-torch[{extra}]"' in lines[0].replace("'", '"')
    assert not (tmp_path / "never.json").exists() and not (tmp_path / "never.sqlite").exists()


def test_require_names_the_package_and_the_extra():
    from annette_torch.errors import AnnetteError, MissingExtraError, require

    require("x", "numpy")  # installed: nothing happens
    with pytest.raises(MissingExtraError, match=r'scikit-learn.*pip install "annette-torch\[fit\]"') as e:
        require("the model generator", "sklearn.no_such_module")
    assert isinstance(e.value, AnnetteError) and isinstance(e.value, ImportError)


def test_a_postgresql_store_without_its_driver_is_one_line_without_the_password(tmp_path):
    r = _run_without(["psycopg", "psycopg2"], ["bench", "status", "--db", "postgresql://bob:topsecret@127.0.0.1:9/x"],
                     tmp_path)
    assert r.returncode == 1 and r.stderr.count("annette: error:") == 1 and "Traceback" not in r.stderr, r.stderr
    assert "annette-torch[postgres]" in r.stderr and "bob:***@" in r.stderr and "topsecret" not in r.stderr
