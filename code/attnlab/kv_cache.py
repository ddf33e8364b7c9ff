"""The KV cache: the growing memory of softmax attention while decoding (the Notation appendix,
§1).

At step t the cache holds every past key and value, K_{1:t} and V_{1:t}; decoding appends
one row and reads

    o_t = V_{1:t}ᵀ softmax(s · K_{1:t} q_t).

Row t of the parallel causal form depends only on k_{<=t}, v_{<=t}, so this reproduces the
full pass exactly, at the price of a cache that grows linearly with the context. The cache holds
only the past and the present token, so no mask is needed at decode time.

This module needs nothing else of the package: :class:`attnlab.attention.MultiHeadAttention`
decodes through :class:`KVCache`, and :func:`decode_with_cache` is the same attention written
one token at a time (it equals ``softmax_attention(q, k, v, causal=True)``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from .checks import (
    check_finite,
    check_number,
    check_positive_int,
    check_score_range,
    check_tensor,
    checked,
)


def _check_append(self: KVCache, k_new: object, v_new: object) -> None:
    """k_new ``[B, H_kv, T_new, D]`` and v_new ``[B, H_kv, T_new, Dv]`` fit the cache."""
    b, h, _, d = self.k.shape
    like = {"dtype": self.k.dtype, "device": self.k.device, "like": "cache.k"}
    sizes = check_tensor(
        "k_new",
        k_new,
        ("B", "H_kv", "T_new", "D"),
        {"B": b, "H_kv": h, "D": d},
        **like,
    )
    sizes["Dv"] = self.v.shape[3]
    check_tensor("v_new", v_new, ("B", "H_kv", "T_new", "Dv"), sizes, **like)
    check_finite("k_new", k_new)
    check_finite("v_new", v_new)


@dataclass
class KVCache:
    """Keys and values of every past token of one layer.

    k ``[B, H_kv, T, D]``, v ``[B, H_kv, T, Dv]``.

    With GQA/MQA the cache keeps only the H_kv key/value heads, not the query heads.
    """

    k: Tensor
    v: Tensor

    def __post_init__(self) -> None:
        sizes = check_tensor("k", self.k, ("B", "H_kv", "T", "D"))
        like = {"dtype": self.k.dtype, "device": self.k.device, "like": "k"}
        check_tensor("v", self.v, ("B", "H_kv", "T", "Dv"), sizes, **like)
        check_finite("k", self.k)
        check_finite("v", self.v)

    @property
    def length(self) -> int:
        """Number of cached tokens T (the absolute position of the next token)."""
        return self.k.shape[2]

    @checked(_check_append)
    def append(self, k_new: Tensor, v_new: Tensor) -> tuple[Tensor, Tensor]:
        """K ← [K; k_new], V ← [V; v_new] along time, in place; returns K, V:
        k_new ``[B, H_kv, T_new, D]``, v_new ``[B, H_kv, T_new, Dv]``."""
        self.k = torch.cat([self.k, k_new], dim=2)
        self.v = torch.cat([self.v, v_new], dim=2)
        return self.k, self.v

    def num_bytes(self) -> int:
        """Bytes held: (numel(K) + numel(V)) · bytes per element; grows linearly with T."""
        return sum(t.numel() * t.element_size() for t in (self.k, self.v))


def _check_sequence(
    q: object, k: object, v: object, scale: object, **_: object
) -> None:
    """q, k ``[B, H, T, Dk]`` and v ``[B, H, T, Dv]`` of one sequence, no empty axis (T >= 1),
    finite, and a scale at which the scores stay finite."""
    sizes = check_tensor("q", q, ("B", "H", "T", "Dk"))
    like = {"dtype": q.dtype, "device": q.device}
    check_tensor("k", k, ("B", "H", "T", "Dk"), sizes, **like)
    check_tensor("v", v, ("B", "H", "T", "Dv"), sizes, **like)
    for name, x in (("q", q), ("k", k), ("v", v)):
        if 0 in x.shape:
            raise ValueError(
                f"{name}: expected non-empty axes (at least one time step), got shape "
                f"{tuple(x.shape)}"
            )
        check_finite(name, x)
    check_score_range(q, k, scale)


@checked(_check_sequence)
def decode_with_cache(
    q: Tensor, k: Tensor, v: Tensor, *, scale: float | None = None
) -> Tensor:
    """Causal attention one token at a time with a KV cache:

        append (k_t, v_t),   o_t = V_{1:t}ᵀ softmax(s · K_{1:t} q_t)

    q, k ``[B, H, T, Dk]``, v ``[B, H, T, Dv]`` -> o ``[B, H, T, Dv]``.
    """
    s = q.shape[-1] ** -0.5 if scale is None else scale
    cache = KVCache(k[:, :, :0], v[:, :, :0])  # empty: T = 0
    outputs = []
    for t in range(q.shape[2]):
        keys, values = cache.append(k[:, :, t : t + 1], v[:, :, t : t + 1])
        scores = (s * q[:, :, t : t + 1]) @ keys.transpose(
            -2, -1
        )  # [B, H, 1, t]
        outputs.append(torch.softmax(scores, dim=-1) @ values)
    return torch.cat(outputs, dim=2)


def _check_cache_sizes(
    n_layers: object,
    n_kv_heads: object,
    head_dim: object,
    context: object,
    bytes_per_element: object,
) -> None:
    """Positive whole sizes, and a number of bytes with a whole number of bits."""
    for name, value in [
        ("n_layers", n_layers),
        ("n_kv_heads", n_kv_heads),
        ("head_dim", head_dim),
        ("context", context),
    ]:
        check_positive_int(name, value)
    try:
        bits = 8 * check_number("bytes_per_element", bytes_per_element)
    except ValueError:
        bits = None
    if bits is None or not 1 <= bits < math.inf or bits != int(bits):
        raise ValueError(
            "bytes_per_element: expected a positive number of bytes with a whole number of "
            f"bits (1, 2, 0.5, ...), got {bytes_per_element!r}"
        )


# fmt: off
@checked(_check_cache_sizes)
def kv_cache_bytes(n_layers: int, n_kv_heads: int, head_dim: int,
                   context: int, bytes_per_element: float) -> int:
    """Bytes of one sequence's KV cache: 2 (K and V) · L · ⌈H_kv · D · T · b⌉.
    b may be a fraction of a byte (0.5 for a 4-bit cache): each layer's K and
    V tensor is then rounded up to whole bytes."""
    bits = round(8 * bytes_per_element)
    per_tensor = -(-n_kv_heads * head_dim * context * bits // 8)  # ⌈bits / 8⌉
    return 2 * n_layers * per_tensor
# fmt: on
