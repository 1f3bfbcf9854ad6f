"""How close two computed arrays must be to count as the same."""

from __future__ import annotations

import numpy as np


ATOL = 2e-4


RTOL = 1e-3


def close(a, b, where: np.ndarray | None = None) -> bool:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        return False
    if where is not None:
        a, b = a[where], b[where]
    scale = max(1.0, float(np.max(np.abs(b)))) if b.size else 1.0
    return bool(np.allclose(a, b, atol=ATOL * scale, rtol=RTOL))
