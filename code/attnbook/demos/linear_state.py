"""Lessons 7 and 8: the toy stream of the cache-against-state picture, and where the trends of
two measured timing curves cross."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from attnbook.timing import linear_fit
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


@dataclass(frozen=True)
class PowerLaw:
    """A trend t(T) = scale · T ** exponent, fitted to measured times on log–log axes."""

    scale: float
    exponent: float

    def __call__(self, length: float) -> float:
        return self.scale * length**self.exponent


def fit_power_law(
    lengths: Sequence[int], runs: Sequence[Sequence[float]]
) -> PowerLaw:
    """Least-squares line through every run on log–log axes: log t = log a + p log T.

    ``runs[i]`` holds the seconds of each timed run at ``lengths[i]``; every run is one point,
    so no single noisy run or length decides the trend.
    """
    points = [
        (math.log(t), math.log(s))
        for t, at_t in zip(lengths, runs, strict=True)
        for s in at_t
    ]
    if len({x for x, _ in points}) < 2 or any(
        s <= 0 for at in runs for s in at
    ):
        raise ValueError(
            "runs: expected positive seconds at two or more lengths, "
            f"got {list(map(list, runs))} at {list(lengths)}"
        )
    log_a, p = linear_fit([x for x, _ in points], [y for _, y in points])
    return PowerLaw(math.exp(log_a), p)


def trend_crossing(steeper: PowerLaw, flatter: PowerLaw) -> float | None:
    """The length T where the two trends meet, a T^p = b T^r; None when ``steeper`` does not
    grow faster than ``flatter`` (the trends never trade places)."""
    if steeper.exponent <= flatter.exponent:
        return None
    return (flatter.scale / steeper.scale) ** (
        1 / (steeper.exponent - flatter.exponent)
    )
