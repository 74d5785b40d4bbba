"""Layer naming shared by the direct IR builders: the names torch.fx gives function nodes."""

from __future__ import annotations


class FxNames:
    """``add``, ``add_1``, ``add_2`` ... per base name, as torch.fx names repeated function calls."""

    def __init__(self) -> None:
        self.count: dict[str, int] = {}

    def __call__(self, base: str) -> str:
        k = self.count.get(base, 0)
        self.count[base] = k + 1
        return base if k == 0 else f"{base}_{k}"
