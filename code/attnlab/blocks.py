"""Building blocks shared by the mixer layers and the models: RMSNorm, the SwiGLU MLP, the short
causal convolution and its q/k/v input side, and the decoding cache of the recurrent layers
(``RecurrentCache``; softmax attention's ``KVCache`` is in ``kv_cache``).

They live here, below ``layers``, ``mla``, ``model`` and ``train``, so that every one of
those imports them and none imports another for them (no import loop).

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

from .attention import split_heads
from .checks import check_positive_int, check_tensor


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

    def forward(
        self, x: torch.Tensor, cache: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Return ``(y, new_cache)``; pass the previous call's cache to continue a sequence."""
        sizes = check_tensor("x", x, ("B", "T", "C"), {"C": self.channels})
        k = self.kernel_size
        if cache is None:
            cache = x.new_zeros(sizes["B"], k - 1, self.channels)
        else:
            check_tensor(
                "cache",
                cache,
                ("B", "K-1", "C"),
                {"B": sizes["B"], "K-1": k - 1, "C": self.channels},
            )
        padded = torch.cat([cache.to(x.dtype), x], dim=1)  # [B, K-1+T, C]
        t = x.shape[1]
        y = sum(padded[:, j : j + t, :] * self.weight[:, j] for j in range(k))
        new_cache = padded[:, padded.shape[1] - (k - 1) :, :]
        return y, new_cache


class HeadRMSNorm(nn.Module):
    """RMSNorm over the last axis (one head's features), with a learned gain of size ``dim``.

    y = x / sqrt(mean(x**2) + eps) * weight.  Shapes: ``[..., dim] -> [..., dim]``.

    ``eps`` defaults to 1e-6, the ``rms_norm_eps`` of DeepSeek-V3 and Llama 3 (the models' block
    norms and MLA's latent norms); the recurrent layers' output norms use ``LAYER_NORM_EPS``.
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
        return (
            x
            * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
            * self.weight
        )


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


class ConvQKV(nn.Module):
    """The input side shared by the recurrent mixer layers: project, short-convolve, split heads.

        q = ShortConv(x W_q),   k = ShortConv(x W_k),   v = ShortConv(x W_v)

    x ``[B, T, d_model]`` -> q, k, v ``[B, H, T, head_dim]`` plus the three convolution caches
    (each the last ``conv_size - 1`` projected inputs ``[B, conv_size - 1, H·head_dim]``).
    """

    def __init__(
        self, d_model: int, n_heads: int, head_dim: int, conv_size: int = 4
    ) -> None:
        super().__init__()
        self.n_heads = check_positive_int("n_heads", n_heads)
        width = n_heads * check_positive_int("head_dim", head_dim)
        check_positive_int("d_model", d_model)
        self.proj = nn.ModuleList(
            nn.Linear(d_model, width, bias=False) for _ in range(3)
        )
        self.conv = nn.ModuleList(
            ShortConvolution(width, conv_size) for _ in range(3)
        )

    def forward(
        self, x: torch.Tensor, conv_cache: tuple[torch.Tensor, ...] = ()
    ) -> tuple[
        torch.Tensor, torch.Tensor, torch.Tensor, tuple[torch.Tensor, ...]
    ]:
        """Return ``(q, k, v, new_conv_cache)``; ``conv_cache`` is ``()`` or three tensors."""
        if conv_cache and len(conv_cache) != 3:
            raise ValueError(
                f"cache.conv: expected 3 tensors (q, k, v), got {len(conv_cache)}"
            )
        caches = conv_cache or (None, None, None)
        outputs, new_cache = [], []
        for proj, conv, cache in zip(
            self.proj, self.conv, caches, strict=True
        ):
            y, c = conv(proj(x), cache)
            outputs.append(split_heads(y, self.n_heads))
            new_cache.append(c)
        q, k, v = outputs
        return q, k, v, tuple(new_cache)


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
