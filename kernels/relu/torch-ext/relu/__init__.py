"""ReLU as a native torch op, built by kforge (or HF kernel-builder) from this project."""

from __future__ import annotations

import torch

from ._ops import ops

__all__ = ["relu"]


def relu(x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """Return max(x, 0) elementwise (NaN stays NaN), written into `out` when given.

    `out` must be contiguous and match `x` in shape, dtype and device.
    """
    if out is None:
        out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    ops.relu(out, x)
    return out
