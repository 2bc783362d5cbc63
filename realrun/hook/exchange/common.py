"""What the hook's synchronous exchange paths share: their result type and which compressors
send exactly ``k_for(numel, density)`` values on every rank."""

from __future__ import annotations

import torch

from sim.collectives import AlphaBeta

__all__ = ["EXACT_K", "PathResult"]

#: Compressors whose payload size is exactly ``k_for(numel, density)`` on every rank, so sparse
#: exchanges need no size negotiation.
EXACT_K = frozenset({"topk"})

#: What a synchronous path returns: (flat mean, alpha-beta terms, gain numerator, gain
#: denominator, communication start, communication end).
PathResult = tuple[torch.Tensor, AlphaBeta, float, float, float, float]
