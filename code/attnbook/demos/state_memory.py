"""The measurements of Lessons 9 and 10: recall error against stored pairs (capacity) and against
recency under a constant decay (forgetting), and the memory horizon of a decay."""

from __future__ import annotations

import math
from functools import cache

import torch

from attnlab.checks import check_int_in, check_range

from .associative_memory import (
    associative_pairs,
    mean_recall_error,
    recall_errors_by_pair,
)

#: The capacity panel's grids: number of stored pairs N and head dimension d (96 is Sophia's).
CAPACITY_PAIRS: tuple[int, ...] = (4, 8, 16, 32, 48, 64, 96, 128, 192, 256)


CAPACITY_DIMS: tuple[int, ...] = (16, 32, 64, 96)


#: Independent draws of keys and values averaged in every point of the capacity curves.
CAPACITY_TRIALS = 16


def seeded_generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(
        check_int_in("seed", seed, 0, 2**31 - 1)
    )


@cache
def capacity_curve(
    dim: int, orthogonal: bool
) -> tuple[tuple[int, float], ...]:
    """(N, mean relative recall error) over ``CAPACITY_PAIRS`` for one ``dim``, additive writes,
    ``CAPACITY_TRIALS`` draws each (``mean_recall_error``). Orthonormal keys stop at N = dim.
    Cached: the capacity panel draws from it."""
    return tuple(
        (
            n,
            mean_recall_error(
                n,
                dim,
                orthogonal=orthogonal,
                n_trials=CAPACITY_TRIALS,
                seed=n,
            ),
        )
        for n in CAPACITY_PAIRS
        if not (orthogonal and n > dim)
    )


#: The forgetting panel's grids: decays α = 1 − 2^(−k) (horizons 4 … 512 tokens, and α = 1:
#: no forgetting) and stream lengths (1, 2, 4 and 8 times the head dimension).
FORGET_DIM = 96


FORGET_ALPHAS: tuple[float, ...] = tuple(
    1 - 2.0**-k for k in range(2, 10)
) + (1.0,)


FORGET_LENGTHS: tuple[int, ...] = (96, 192, 384, 768)


FORGET_TRIALS = 8


#: A pair counts as recalled when its relative error is below this.
RECALL_THRESHOLD = 0.5


@cache
def forgetting_errors(length: int) -> torch.Tensor:
    """Mean relative error ``[len(FORGET_ALPHAS), length]`` of reading back each of ``length``
    random pairs (d = ``FORGET_DIM``) after writing them all with a constant decay α, one α per
    row, pair order as written (last column = the newest), averaged over ``FORGET_TRIALS``
    draws. One ``recall_errors_by_pair`` call per draw, the decays as its heads. Cached."""
    n = check_int_in("length", length, 1, 4096)
    generator = seeded_generator(length)
    # [H]
    log_alpha = torch.log(torch.tensor(FORGET_ALPHAS, dtype=torch.float64))
    g = log_alpha[None, :, None].expand(1, len(FORGET_ALPHAS), n)  # [1, H, N]
    total = torch.zeros(len(FORGET_ALPHAS), n, dtype=torch.float64)
    for _ in range(FORGET_TRIALS):
        keys, values = associative_pairs(
            n, FORGET_DIM, orthogonal=False, generator=generator
        )
        total += recall_errors_by_pair(keys[None], values[None], g=g)[0]
    return total / FORGET_TRIALS


def pair_weights(alpha: float, length: int) -> torch.Tensor:
    """The weight α^(length − i) with which pair i (1-based) is still in the state after
    ``length`` writes with a constant decay α, float64 ``[length]``."""
    ages = torch.arange(length - 1, -1, -1, dtype=torch.float64)
    return torch.exp(math.log(alpha) * ages)


def effective_horizon(g: torch.Tensor | float) -> torch.Tensor:
    """The memory horizon of a decay α = exp(g): ``1 / (1 - α)``, the total weight
    ``Σ_{n>=0} αⁿ`` of a geometric past (infinite for α = 1). Elementwise, any shape."""
    if not isinstance(g, torch.Tensor):
        g = torch.tensor(float(g))
    check_range("g", g, None, 0.0)
    # expm1: exact for α near 1
    return torch.where(g == 0, math.inf, -1.0 / torch.expm1(g))


def recalled_pairs(alpha: float, length: int) -> int:
    """How many of the ``length`` pairs are read back with relative error below
    ``RECALL_THRESHOLD``, each pair's error averaged over the draws (``forgetting_errors``)."""
    if alpha not in FORGET_ALPHAS:
        raise ValueError(
            f"alpha: expected one of {list(FORGET_ALPHAS)}, got {alpha!r}"
        )
    errors = forgetting_errors(length)[FORGET_ALPHAS.index(alpha)]
    return int((errors < RECALL_THRESHOLD).sum())
