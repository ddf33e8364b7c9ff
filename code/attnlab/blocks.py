"""Small building blocks shared by every mixer layer: the short causal convolution and RMSNorm.

The short convolution is what gives a linear-attention layer its sense of local order, and it is
the one thing besides the recurrent state that such a layer must cache while decoding: the last
``kernel_size - 1`` inputs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from ._checks import check_positive_int, check_tensor


class ShortConvolution(nn.Module):
    """Causal depthwise convolution over time, one filter of width ``kernel_size`` per channel.

    y[t, c] = sum_{j=0}^{K-1} w[c, j] * x[t - (K-1) + j, c], with x[<0] = 0 (or the cache).

    Shapes: x ``[B, T, C]`` -> y ``[B, T, C]``; the cache holds the last ``K-1`` inputs
    ``[B, K-1, C]``.
    Implemented as K shifted multiply-adds (faster than ``nn.Conv1d`` on a CPU for K = 4).
    Initialised like ``nn.Conv1d``: uniform in ±1/sqrt(K) (a near-identity init makes recurrent
    models fail to learn recall; see the course's experiment notes).
    """

    def __init__(self, channels: int, kernel_size: int = 4) -> None:
        super().__init__()
        self.channels = check_positive_int("channels", channels)
        self.kernel_size = check_positive_int("kernel_size", kernel_size)
        bound = 1.0 / math.sqrt(kernel_size)
        self.weight = nn.Parameter(torch.empty(channels, kernel_size).uniform_(-bound, bound))

    def forward(
        self, x: torch.Tensor, cache: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Return ``(y, new_cache)``; pass the previous call's cache to continue a sequence."""
        sizes = check_tensor("x", x, ("B", "T", "C"), {"C": self.channels})
        k = self.kernel_size
        if cache is None:
            cache = x.new_zeros(sizes["B"], k - 1, self.channels)
        else:
            check_tensor("cache", cache, ("B", "K-1", "C"), {"B": sizes["B"], "K-1": k - 1,
                                                            "C": self.channels})
        padded = torch.cat([cache.to(x.dtype), x], dim=1)  # [B, K-1+T, C]
        t = x.shape[1]
        y = sum(padded[:, j : j + t, :] * self.weight[:, j] for j in range(k))
        new_cache = padded[:, padded.shape[1] - (k - 1) :, :]
        return y, new_cache


class HeadRMSNorm(nn.Module):
    """RMSNorm over the last axis (one head's features), with a learned gain of size ``dim``.

    y = x / sqrt(mean(x**2) + eps) * weight.  Shapes: ``[..., dim] -> [..., dim]``.
    """

    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.dim = check_positive_int("dim", dim)
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] != self.dim:
            raise ValueError(
                f"x: expected last axis of size {self.dim}, got shape {tuple(x.shape)}"
            )
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


@dataclass
class RecurrentCache:
    """What a recurrent mixer layer (linear attention, GLA, DeltaNet, KDA) keeps while decoding.

    ``state`` is the fixed-size memory ``S`` of shape ``[B, H, Dk, Dv]`` (read as o = Sᵀ q);
    ``conv`` holds each short convolution's last ``K-1`` inputs, each ``[B, K-1, C]``;
    ``normaliser`` is the running key sum ``z`` ``[B, H, Dk]`` of normalised linear attention.
    None of these grows with the context length.
    """

    state: torch.Tensor
    conv: tuple[torch.Tensor, ...] = ()
    normaliser: torch.Tensor | None = None

    def num_bytes(self) -> int:
        """Bytes held by this cache (state, conv inputs and normaliser)."""
        extra = [self.normaliser] if self.normaliser is not None else []
        tensors = [self.state, *self.conv, *extra]
        return sum(t.numel() * t.element_size() for t in tensors)
