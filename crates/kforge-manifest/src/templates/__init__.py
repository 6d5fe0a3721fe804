"""{{name}}: elementwise ReLU as a torch custom op."""

from typing import Optional

import torch

from ._ops import ops


def {{py}}(x: torch.Tensor, out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Return max(x, 0) elementwise; writes into `out` when given (same shape and dtype as `x`)."""
    if out is None:
        out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    ops.{{py}}(out, x)
    return out


__all__ = ["{{py}}"]
