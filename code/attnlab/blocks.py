"""Building blocks shared by the mixer layers and the models: the RMS norm, the SwiGLU MLP, the
short causal convolution and the decoding cache of the recurrent layers (``RecurrentCache``;
softmax attention's ``KVCache`` is in ``kv_cache``).

They live here, below ``attention``, ``layers``, ``mla``, ``model`` and ``train``, so that every
one of those imports them and none imports another for them (no import loop).

The short convolution is what gives a linear-attention layer its sense of local order, and it is
the one thing besides the recurrent state that such a layer must cache while decoding: the last
``kernel_size - 1`` inputs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .checks import (
    check_finite,
    check_number,
    check_positive_int,
    check_tensor,
    checked,
)


def _conv_inputs(
    self: ShortConvolution, x: torch.Tensor, cache: torch.Tensor | None
) -> None:
    sizes = check_tensor("x", x, ("B", "T", "C"), {"C": self.channels})
    check_finite("x", x)
    if cache is not None:
        sizes["K-1"] = self.kernel_size - 1
        check_tensor("cache", cache, ("B", "K-1", "C"), sizes)
        check_finite("cache", cache)


class ShortConvolution(nn.Module):
    """Causal depthwise convolution over time, one filter of width ``kernel_size`` per channel.

    y[t, c] = sum_{j=0}^{K-1} w[c, j] * x[t - (K-1) + j, c], with x[<0] = 0 (or the cache).

    Shapes: x ``[B, T, C]`` -> y ``[B, T, C]``; the cache holds the last ``K-1`` inputs
    ``[B, K-1, C]``.
    Implemented as K shifted multiply-adds (faster than ``nn.Conv1d`` on a CPU for K = 4).
    Initialised like ``nn.Conv1d``: uniform in ±1/sqrt(K) (a near-identity init makes recurrent
    models fail to learn recall in Lesson 17's experiment).
    """

    def __init__(self, channels: int, kernel_size: int = 4) -> None:
        super().__init__()
        self.channels = check_positive_int("channels", channels)
        self.kernel_size = check_positive_int("kernel_size", kernel_size)
        bound = 1.0 / math.sqrt(kernel_size)
        self.weight = nn.Parameter(
            torch.empty(channels, kernel_size).uniform_(-bound, bound)
        )

    @checked(_conv_inputs)
    def forward(
        self, x: torch.Tensor, cache: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Return ``(y, new_cache)``; pass the previous call's cache to continue a sequence."""
        k, t = self.kernel_size, x.shape[1]
        if cache is None:
            cache = x.new_zeros(x.shape[0], k - 1, self.channels)
        padded = torch.cat([cache.to(x.dtype), x], dim=1)  # [B, K-1+T, C]
        y = sum(padded[:, j : j + t, :] * self.weight[:, j] for j in range(k))
        return y, padded[:, padded.shape[1] - (k - 1) :, :]


EPS_MAX = math.sqrt(torch.finfo(torch.float32).max)
"""The largest eps a norm or a normaliser takes (√ of float32's largest number, 1.8e19): x² + eps
and its square root stay finite in float32, the smallest range the package computes in."""


def check_eps(name: str, value: object, *, inclusive: bool = False) -> float:
    """An eps: a finite number > 0 (>= 0 when ``inclusive``) and at most :data:`EPS_MAX`."""
    return check_number(name, value, inclusive=inclusive, high=EPS_MAX)


def _norm_input(self: RMSNorm, x: torch.Tensor) -> None:
    if not isinstance(x, torch.Tensor) or x.dim() == 0:
        raise ValueError(
            f"x: expected a tensor [..., {self.dim}], got {type(x).__name__}"
        )
    if x.shape[-1] != self.dim:
        raise ValueError(
            f"x: expected last axis of size {self.dim}, got shape {tuple(x.shape)}"
        )
    if not x.is_floating_point():
        raise ValueError(
            f"x: expected a floating-point tensor, got {x.dtype}"
        )
    check_finite("x", x)


class RMSNorm(nn.Module):
    """RMSNorm over the last axis, with a learned gain of size ``dim``.

    y = x / sqrt(mean(x**2) + eps) * weight.  Shapes: ``[..., dim] -> [..., dim]``.

    One module for every RMS norm of the course: the blocks' pre-norms and the model's final
    norm over ``d_model`` (eps 1e-6, the ``rms_norm_eps`` of DeepSeek-V3 and Llama 3), MLA's
    latent norms, and the recurrent layers' per-head output norms (eps ``LAYER_NORM_EPS``).
    """

    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.dim = check_positive_int("dim", dim)
        self.eps = check_eps("eps", eps)
        self.weight = nn.Parameter(torch.ones(dim))

    @checked(_norm_input)
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rms = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return x * rms * self.weight


LAYER_NORM_EPS = 1e-5
"""eps of the per-head output RMSNorm of the recurrent mixer layers: FLA's ``norm_eps`` default in
``KimiDeltaAttention``, ``GatedDeltaNet``, ``DeltaNet`` and ``GatedLinearAttention``. The output
before that norm can be small (unit-norm q and k read a young state), so eps is not negligible
there: the choice changes the layer's output, not only its rounding."""


class SwiGLU(nn.Module):
    """The feed-forward part of a block (Llama, DeepSeek and Kimi all use it).

    MLP(x) = W_down (SiLU(W_gate x) ⊙ W_up x), no biases.
    Shapes: x ``[B, T, d_model]`` → ``[B, T, d_model]``; hidden width ``hidden``.
    """

    def __init__(self, d_model: int, hidden: int) -> None:
        super().__init__()
        check_positive_int("d_model", d_model)
        check_positive_int("hidden", hidden)
        self.gate = nn.Linear(d_model, hidden, bias=False)
        self.up = nn.Linear(d_model, hidden, bias=False)
        self.down = nn.Linear(hidden, d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(F.silu(self.gate(x)) * self.up(x))


@dataclass
class RecurrentCache:
    """What a recurrent mixer layer (linear attention, GLA, DeltaNet, KDA) keeps while decoding.

    ``state`` is what the layer's kernel carries from token to token: the fixed-size memory
    ``S [B, H, Dk, Dv]`` (read as o = Sᵀ q), or for normalised linear attention the pair
    ``(S, z)`` with the running key sum ``z [B, H, Dk]``. ``conv`` holds the last ``K-1``
    inputs of each of the three short convolutions (q, k, v), each ``[B, K-1, C]``. None of
    these grows with the context length.
    """

    state: torch.Tensor | tuple[torch.Tensor, torch.Tensor]
    conv: tuple[torch.Tensor, ...] = ()

    def num_bytes(self) -> int:
        """Bytes held by this cache (state, key sum if any, and conv inputs)."""
        state = self.state if isinstance(self.state, tuple) else (self.state,)
        return sum(t.numel() * t.element_size() for t in (*state, *self.conv))
