"""Absolute positions: a vector per position, added to the token's embedding.

Attention alone cannot tell where a token stands (Lesson 2's bag of words).
The first transformers gave each position p a vector P[p] of width d and
added it to the embedding of the token there, x_p ← x_p + P[p], before the
first layer:

- **sinusoidal** (Vaswani et al., 2017, §3.5): fixed, not learned,

      P[p, 2i]     = sin(p / base^(2i/d)),
      P[p, 2i + 1] = cos(p / base^(2i/d)),      base = 10000,

  a sine and a cosine per pair of coordinates, each pair turning at its
  own speed, from one radian per position (i = 0) to one turn every
  ~2π·base positions;
- **learned** (GPT-2): P is a table of ``max_positions × d`` weights,
  trained like the embedding table; no position beyond the table exists.

Rotary embeddings (RoPE, Lesson 5) keep the sinusoid's angles but rotate
the queries and keys instead of adding to x, so that a score depends only
on the distance between two positions.
"""

from __future__ import annotations

import torch
from torch import Tensor

from .checks import check_number, check_positive_int, checked


def _check_sinusoidal(n_positions: object, d: object, base: object) -> None:
    check_positive_int("n_positions", n_positions)
    check_positive_int("d", d)
    if d % 2:
        raise ValueError(
            f"d: expected an even width (sine and cosine pairs), got {d}"
        )
    check_number("base", base, low=1.0)


@checked(_check_sinusoidal)
def sinusoidal_positions(
    n_positions: int, d: int, base: float = 10000.0
) -> Tensor:
    """P [n_positions, d] (float64): P[p, 2i] = sin(p ω_i),
    P[p, 2i+1] = cos(p ω_i), with ω_i = base^(−2i/d)."""
    p = torch.arange(n_positions, dtype=torch.float64)[:, None]  # [T, 1]
    omega = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    angle = p * omega  # [T, d/2]
    return torch.stack([angle.sin(), angle.cos()], dim=-1).flatten(-2)


def _check_add(x: object, positions: object) -> None:
    if not isinstance(x, Tensor) or x.dim() < 2:
        raise ValueError(
            "x: expected a tensor [..., T, d], got "
            f"{tuple(getattr(x, 'shape', ())) or type(x).__name__}"
        )
    t, d = x.shape[-2:]
    if not isinstance(positions, Tensor) or positions.dim() != 2:
        raise ValueError(
            "positions: expected a tensor [max_positions, d], got "
            f"{tuple(getattr(positions, 'shape', ())) or positions!r}"
        )
    if positions.shape[1] != d or positions.shape[0] < t:
        raise ValueError(
            f"positions: expected at least {t} rows of width {d} (x is "
            f"{tuple(x.shape)}), got {tuple(positions.shape)}"
        )


@checked(_check_add)
def add_positions(x: Tensor, positions: Tensor) -> Tensor:
    """x_p + P[p] for p = 0 … T−1: x [..., T, d], positions [≥ T, d]
    (sinusoidal, or a learned table) -> [..., T, d] in x's dtype."""
    t = x.shape[-2]
    return x + positions[:t].to(x.dtype)
