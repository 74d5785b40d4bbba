"""Shared fixtures: the reference data folder beside the checkout (../shared), skipped when absent."""

from __future__ import annotations

from pathlib import Path

import pytest

REF = Path(__file__).resolve().parents[1].parent / "shared" / "annette-reference"


@pytest.fixture(scope="session")
def ref_dir() -> Path:
    if not REF.is_dir():
        pytest.skip("../shared/annette-reference not present")
    return REF
