"""{{name}}: elementwise ReLU as a torch custom op."""

from __future__ import annotations

import torch

from ._ops import ops


def {{py}}(x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """Return max(x, 0) elementwise; writes into `out` when given (same shape and dtype as `x`)."""
    if out is None:
        out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    ops.{{py}}(out, x)
    return out


__all__ = ["{{py}}"]
