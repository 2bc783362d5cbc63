"""What the hook's synchronous exchange paths share: their result type. (Which compressors send
exactly ``k_for(numel, density)`` values on every rank is their spec's ``exact_k``.)"""

from __future__ import annotations

import torch

from sim.collectives import AlphaBeta

__all__ = ["PathResult"]

#: What a synchronous path returns: (flat mean, alpha-beta terms, gain numerator, gain
#: denominator, communication start, communication end).
PathResult = tuple[torch.Tensor, AlphaBeta, float, float, float, float]
