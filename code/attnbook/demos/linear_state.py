"""Lessons 7 and 8: the toy stream of the cache-against-state picture, and where two measured
timing curves cross."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from attnlab.linear import elu_plus_one

#: The toy stream of the "cache against state" panel: tokens shown and width of k and v.
DEMO_STEPS = 16


DEMO_DIM = 8


def demo_stream(steps: int = DEMO_STEPS, dim: int = DEMO_DIM, seed: int = 0):
    """The toy stream: feature-mapped keys φ(k) ``[1, 1, steps, dim]`` (φ = elu + 1) and values
    v ``[1, 1, steps, dim]``, float64, from a fixed seed."""
    g = torch.Generator().manual_seed(seed)
    k = elu_plus_one(
        torch.randn(1, 1, steps, dim, generator=g, dtype=torch.float64)
    )
    v = torch.randn(1, 1, steps, dim, generator=g, dtype=torch.float64)
    return k, v


def crossing(
    lengths: Sequence[int],
    slower_first: Sequence[float],
    slower_later: Sequence[float],
) -> float | None:
    """The length at which the curve ``slower_later`` (faster at the shortest length) becomes
    slower than ``slower_first``, interpolated on log–log axes; None if it never does, and the
    first length if it already is from the start. Used for "where the measured curves cross"."""
    for i, (a, b) in enumerate(zip(slower_first, slower_later, strict=True)):
        if b >= a:
            if i == 0:
                return float(lengths[0])
            r0 = math.log(slower_later[i - 1] / slower_first[i - 1])
            r1 = math.log(b / a)
            x0, x1 = math.log(lengths[i - 1]), math.log(lengths[i])
            return (
                math.exp(x0 + (x1 - x0) * (0 - r0) / (r1 - r0))
                if r1 != r0
                else lengths[i]
            )
    return None
