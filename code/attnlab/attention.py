"""Scaled dot-product attention, the causal mask, multi-head split/merge and RoPE.

Tensors are ``[B, H, T, D]`` (batch, heads, time, head dim). The parallel form of causal
softmax attention (the Notation appendix, §1) is

    O = softmax(s · Q Kᵀ + log M) V,    s = 1/sqrt(Dk),   (log M)_ij = 0 if j <= i else -inf,

and the multi-head layer wraps it: project, split into heads, rotate q and k (RoPE), attend,
merge the heads, project back. With fewer queries than keys (decoding after a prefix) the
queries are the last Tq positions, so the mask lets query i see keys j <= Tk - Tq + i.

``softmax_attention_online`` computes the same output one key block at a time, FlashAttention's
online softmax: the full ``[Tq, Tk]`` score matrix never exists (all queries are processed
together; a GPU kernel also tiles the queries).

RoPE convention: *interleaved* pairs (x[2i], x[2i+1]), as in the RoFormer paper and the
reference code of Llama and DeepSeek-V3 (complex numbers x[2i] + i·x[2i+1] times e^{iθ});
GPT-NeoX and Hugging Face code pair x[i] with x[i + D/2] instead, which is the same up to
reordering the rows of W_q and W_k. Rotations keep norms, and ⟨RoPE(q, m), RoPE(k, n)⟩ depends
on m - n only. The angles are computed in float64 (exact enough for positions in the millions)
and cast to the input's dtype.

Every public function checks its inputs once, at the call (``checks.checked``): a wrong shape,
dtype or value raises a ``ValueError`` naming the argument, and the bodies are the equations.
Scores may be finite or -inf (a masked entry, weight 0; a row masked entirely gets weights 0,
not NaN); a NaN or +inf score is refused. The scale is a finite number > 0 at which the scores
stay finite (``checks.check_score_range``), the RoPE base a finite number >= 1. A pass whose
score matrix ``[B, H, Tq, Tk]`` would exceed ``MAX_SCORE_BYTES`` (1 GiB) is refused before
anything is allocated, with the number of query rows that fit at once.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor, nn

from .blocks import ShortConvolution
from .checks import (
    check_finite,
    check_int_in,
    check_layer_input,
    check_number,
    check_positive_int,
    check_score_range,
    check_tensor,
    checked,
)
from .kv_cache import KVCache

# ------------------------------------------------------------------------------ memory
MAX_SCORE_BYTES = 2**30
"""The largest score matrix ``[B, H, Tq, Tk]`` softmax attention may form, 1 GiB (a pass holds
about three such matrices at once: the scores, the masked scores, the weights), and the largest
causal mask or table of RoPE angles. Larger ones are refused before anything is allocated
(:func:`check_score_bytes`); raise it to allow more."""


def check_score_bytes(
    names: str,
    sizes: Sequence[int],
    dtype: torch.dtype,
    advice: str,
    *,
    what: str = "softmax attention's score matrix [B, H, Tq, Tk]",
) -> None:
    """Refuse to form ``what`` (by default the score matrix ``(B, H, Tq, Tk)``), of ``sizes``
    in ``dtype``, above :data:`MAX_SCORE_BYTES`, before anything is allocated. The message
    names the caller's ``names`` and gives ``advice`` (how to compute the same in pieces), in
    which ``{rows}`` becomes how many rows (the second-last axis) fit at once."""
    n_bytes = math.prod(sizes) * dtype.itemsize
    if n_bytes <= MAX_SCORE_BYTES:
        return
    rows = MAX_SCORE_BYTES // (n_bytes // sizes[-2])
    if rows == 0:
        advice = "even one row is above it: use a shorter last axis"
    shape = ", ".join(str(n) for n in sizes)
    raise ValueError(
        f"{names}: {what} = [{shape}] would take {n_bytes / 2**30:.3g} GiB in {dtype}, "
        f"above attnlab.attention.MAX_SCORE_BYTES ({MAX_SCORE_BYTES / 2**30:.3g} GiB); "
        f"{advice.format(rows=f'{rows:,}')}"
    )


# ------------------------------------------------------------------------------ softmax


def _check_scores(x: object, dim: object) -> None:
    """x: a floating-point tensor of scores, finite or -inf (a masked entry, weight 0): a NaN
    or a +inf score has no softmax weight (the result would be NaN or zeros)."""
    if not isinstance(x, Tensor) or not x.is_floating_point():
        got = getattr(x, "dtype", type(x).__name__)
        raise ValueError(
            f"x: expected a floating-point tensor of scores, got {got}"
        )
    axes = max(x.dim(), 1)
    check_int_in("dim", dim, -axes, axes - 1)
    if x.numel():
        top = x.detach().max()  # NaN if any entry is NaN
        if top.isnan() or top == torch.inf:
            found = "NaN" if top.isnan() else "+inf"
            raise ValueError(
                f"x: expected finite scores or -inf (a masked entry), got {found} "
                f"(shape {tuple(x.shape)})"
            )


@checked(_check_scores)
def naive_softmax(x: Tensor, dim: int = -1) -> Tensor:
    """softmax(x)_i = exp(x_i) / Σ_j exp(x_j) literally: it can overflow."""
    e = torch.exp(x)
    return e / e.sum(dim, keepdim=True)


@checked(_check_scores)
def stable_softmax(x: Tensor, dim: int = -1) -> Tensor:
    """softmax(x)_i = exp(x_i - m) / Σ_j exp(x_j - m), m = max_j x_j; a
    masked score (-inf) gets weight 0, and so does a fully masked row."""
    m = x.amax(dim, keepdim=True)
    e = torch.exp(x - torch.where(m == -torch.inf, 0.0, m))  # all -inf: e = 0
    total = e.sum(dim, keepdim=True)
    return torch.where(total > 0, e / total, 0.0)


# ------------------------------------------------------------------------------ scores and mask


def _check_nonempty(**tensors: Tensor) -> None:
    """No axis of the named tensors is empty (B, H, Dk and Dv at least 1, a time step)."""
    for name, x in tensors.items():
        if 0 in x.shape:
            raise ValueError(
                f"{name}: expected non-empty axes (at least one batch row, head, "
                f"time step and feature), got shape {tuple(x.shape)}"
            )


_IN_PIECES = (
    "compute at most {rows} query rows at a time (softmax_attention(q[:, :, i:j], "
    "k[:, :, :j], v[:, :, :j]) gives rows i to j - 1 of the causal pass)"
)


def _check_q_k(q: object, k: object, scale: object, **_: object) -> None:
    """q ``[B,H,Tq,Dk]``, k ``[B,H,Tk,Dk]`` (same dtype and device, finite, non-empty), a valid
    scale, and a score matrix within ``MAX_SCORE_BYTES``."""
    sizes = check_tensor("q", q, ("B", "H", "Tq", "Dk"))
    like = {"dtype": q.dtype, "device": q.device}
    check_tensor("k", k, ("B", "H", "Tk", "Dk"), sizes, **like)
    _check_nonempty(q=q, k=k)
    check_finite("q", q)
    check_finite("k", k)
    check_score_range(q, k, scale)
    b, h, t_q, t_k = (sizes[n] for n in ("B", "H", "Tq", "Tk"))
    pieces = (
        "compute at most {rows} query rows at a time "
        "(attention_scores(q[:, :, i:j], k))"
    )
    check_score_bytes("q, k", (b, h, t_q, t_k), q.dtype, pieces)


@checked(_check_q_k)
def attention_scores(
    q: Tensor, k: Tensor, *, scale: float | None = None
) -> Tensor:
    """S = s · Q Kᵀ (s = 1/sqrt(Dk) unless given): q ``[B, H, Tq, Dk]``,
    k ``[B, H, Tk, Dk]`` -> S ``[B, H, Tq, Tk]``."""
    s = q.shape[-1] ** -0.5 if scale is None else scale
    return (s * q) @ k.transpose(-2, -1)


def _check_mask_sizes(t_q: object, t_k: object, **_: object) -> None:
    check_positive_int("t_q", t_q)
    check_positive_int("t_k", t_k)
    if t_q > t_k:
        raise ValueError(
            f"t_q: expected at most t_k={t_k} queries, got {t_q}"
        )
    pieces = "build at most {rows} query rows at a time"
    what = "the causal mask [Tq, Tk]"
    check_score_bytes("t_q, t_k", (t_q, t_k), torch.bool, pieces, what=what)


@checked(_check_mask_sizes)
def causal_mask(
    t_q: int, t_k: int, device: torch.device | str | None = None
) -> Tensor:
    """M_ij = (j <= Tk - Tq + i): query i sits at position Tk - Tq + i (the
    lower triangle when Tq = Tk). Returns bool ``[Tq, Tk]``."""
    query_pos = torch.arange(t_q, device=device)[:, None] + (t_k - t_q)
    key_pos = torch.arange(t_k, device=device)[None, :]
    return key_pos <= query_pos


# ------------------------------------------------------------------------------ attention


def _check_qkv(
    q: object,
    k: object,
    v: object,
    causal: object,
    scale: object,
    **_: object,
) -> None:
    """q ``[B,H,Tq,Dk]``, k ``[B,H,Tk,Dk]``, v ``[B,H,Tk,Dv]`` (same dtype and device, finite
    values, at least one time step, Tq <= Tk when causal) and a valid scale."""
    sizes = check_tensor("q", q, ("B", "H", "Tq", "Dk"))
    like = {"dtype": q.dtype, "device": q.device}
    check_tensor("k", k, ("B", "H", "Tk", "Dk"), sizes, **like)
    check_tensor("v", v, ("B", "H", "Tk", "Dv"), sizes, **like)
    for name, x, length in (("q", q, "Tq"), ("k", k, "Tk")):
        if sizes[length] == 0:
            raise ValueError(
                f"{name}: expected at least one time step, got shape {tuple(x.shape)}"
            )
    _check_nonempty(q=q, k=k, v=v)
    for name, x in (("q", q), ("k", k), ("v", v)):
        check_finite(name, x)
    if not isinstance(causal, bool):
        raise ValueError(f"causal: expected True or False, got {causal!r}")
    if causal and sizes["Tq"] > sizes["Tk"]:
        raise ValueError(
            f"q: expected at most as many queries as keys when causal (Tk={sizes['Tk']}), "
            f"got Tq={sizes['Tq']}"
        )
    check_score_range(q, k, scale)


def _check_attention(return_weights: object, **arguments: object) -> None:
    """The inputs of ``softmax_attention``, and a score matrix within ``MAX_SCORE_BYTES``."""
    _check_qkv(**arguments)
    if not isinstance(return_weights, bool):
        raise ValueError(
            f"return_weights: expected True or False, got {return_weights!r}"
        )
    q, k = arguments["q"], arguments["k"]
    sizes = (*q.shape[:3], k.shape[2])
    online = (
        ", or use softmax_attention_online (one block of scores at a time, "
        "and a [Tq, Tk] causal mask of booleans)"
    )
    check_score_bytes("q, k", sizes, q.dtype, _IN_PIECES + online)


# fmt: off
@checked(_check_attention)
def softmax_attention(
    q: Tensor, k: Tensor, v: Tensor, *, causal: bool = True,
    scale: float | None = None, return_weights: bool = False,
) -> tuple[Tensor, Tensor | None]:
    """O = softmax(s · Q Kᵀ + log M) V, M the causal mask when ``causal``.

    q ``[B, H, Tq, Dk]``, k ``[B, H, Tk, Dk]``, v ``[B, H, Tk, Dv]`` ->
    o ``[B, H, Tq, Dv]``, and the weights ``[B, H, Tq, Tk]`` if asked.
    """
    scores = attention_scores(q, k, scale=scale)
    if causal:
        allowed = causal_mask(q.shape[2], k.shape[2], device=q.device)
        scores = scores.masked_fill(~allowed, -torch.inf)
    weights = stable_softmax(scores, dim=-1)
    return weights @ v, (weights if return_weights else None)
# fmt: on


def _check_online(block_size: object, **arguments: object) -> None:
    """The inputs of ``softmax_attention``, a block size, and the two largest tensors the
    online form makes (one block's scores, and the causal mask of booleans) within
    ``MAX_SCORE_BYTES``."""
    _check_qkv(**arguments)
    check_positive_int("block_size", block_size)
    q, k = arguments["q"], arguments["k"]
    b, h, t_q = q.shape[:3]
    t_k = k.shape[2]
    block = (b, h, t_q, min(block_size, t_k))
    check_score_bytes(
        "block_size", block, q.dtype, "use a smaller block_size"
    )
    if arguments["causal"]:
        pieces = _IN_PIECES.replace(
            "softmax_attention(", "softmax_attention_online("
        )
        check_score_bytes(
            "q, k",
            (t_q, t_k),
            torch.bool,
            pieces,
            what="the causal mask [Tq, Tk]",
        )


# fmt: off
@checked(_check_online)
def softmax_attention_online(q: Tensor, k: Tensor, v: Tensor, *,
                             causal: bool = True, scale: float | None = None,
                             block_size: int = 64) -> tuple[Tensor, None]:
    """Softmax attention one key block S_j at a time, with a running max m,
    denominator ℓ and accumulator A:

        m' = max(m, rowmax S_j),   P = exp(S_j - m'),
        ℓ' = exp(m - m') ℓ + P 1,  A' = exp(m - m') A + P V_j,   O = A / ℓ.

    Same shapes and result as ``softmax_attention``; returns ``(o, None)``.
    """
    t_q, t_k = q.shape[2], k.shape[2]
    allowed = causal_mask(t_q, t_k, device=q.device) if causal else None
    row_max = q.new_full((*q.shape[:3], 1), -torch.inf)
    row_sum = q.new_zeros((*q.shape[:3], 1))
    acc = q.new_zeros((*q.shape[:3], v.shape[3]))
    for start in range(0, t_k, block_size):
        block = slice(start, start + block_size)
        scores = attention_scores(q, k[:, :, block], scale=scale)
        if causal:
            scores = scores.masked_fill(~allowed[:, block], -torch.inf)
        new_max = torch.maximum(row_max, scores.amax(-1, keepdim=True))
        p = torch.exp(scores - new_max)
        correction = torch.exp(row_max - new_max)
        row_sum = correction * row_sum + p.sum(-1, keepdim=True)
        acc = correction * acc + p @ v[:, :, block]
        row_max = new_max
    return acc / row_sum, None
# fmt: on


# ------------------------------------------------------------------------------ heads


def _check_split(x: object, n_heads: object) -> None:
    check_tensor("x", x, ("B", "T", "H*D"))
    check_positive_int("n_heads", n_heads)
    if x.shape[2] % n_heads:
        raise ValueError(
            f"n_heads: expected a divisor of the feature size {x.shape[2]}, got {n_heads}"
        )


@checked(_check_split)
def split_heads(x: Tensor, n_heads: int) -> Tensor:
    """``[B, T, H·D]`` -> ``[B, H, T, D]``: cut the features into H heads."""
    b, t, width = x.shape
    return x.view(b, t, n_heads, width // n_heads).transpose(1, 2)


def _check_heads(x: object) -> None:
    check_tensor("x", x, ("B", "H", "T", "D"))


@checked(_check_heads)
def merge_heads(x: Tensor) -> Tensor:
    """``[B, H, T, D]`` -> ``[B, T, H·D]``: the inverse of ``split_heads``."""
    b, h, t, d = x.shape
    return x.transpose(1, 2).reshape(b, t, h * d)


def _check_repeat(x: object, n_rep: object) -> None:
    check_tensor("x", x, ("B", "H_kv", "T", "D"))
    check_positive_int("n_rep", n_rep)


@checked(_check_repeat)
def repeat_kv_heads(x: Tensor, n_rep: int) -> Tensor:
    """GQA: ``[B, H_kv, T, D]`` -> ``[B, H_kv·n_rep, T, D]``, so that query
    head h reads kv head h // n_rep."""
    return x.repeat_interleave(n_rep, dim=1)


# ------------------------------------------------------------------------------ RoPE


def _check_positions(positions: object, length: int | None = None) -> None:
    """``positions`` is a 1-D tensor ``[T]`` of finite positions (of the given length, if any)."""
    want = "[T]" if length is None else f"[T={length}]"
    if not isinstance(positions, Tensor):
        raise ValueError(
            f"positions: expected a 1-D tensor {want}, got {type(positions).__name__}"
        )
    if positions.dim() != 1 or (
        length is not None and positions.shape[0] != length
    ):
        raise ValueError(
            f"positions: expected a 1-D tensor {want}, got shape {tuple(positions.shape)}"
        )
    if positions.is_complex() or positions.dtype == torch.bool:
        raise ValueError(
            f"positions: expected integer or real positions, got {positions.dtype}"
        )
    if positions.is_floating_point() and not torch.isfinite(positions).all():
        raise ValueError(
            "positions: expected finite positions, got NaN or inf"
        )


def _check_base(base: object) -> None:
    """A RoPE base: finite and >= 1, so every frequency base^(-2i/d) is at most 1 and every
    angle is finite (0, a negative or a NaN base gives NaN angles)."""
    check_number("base", base, low=1.0, inclusive=True)


def _check_rope_angles(
    positions: object, dim: object, base: object, **_: object
) -> None:
    check_positive_int("dim", dim)
    _check_base(base)
    if dim % 2:
        raise ValueError(
            f"dim: RoPE rotates pairs, expected an even head dim, got {dim}"
        )
    _check_positions(positions)
    table = (positions.shape[0], dim // 2)
    advice = "compute the angles of at most {rows} positions at a time"
    what = "the table of RoPE angles [T, dim/2]"
    check_score_bytes("dim", table, torch.float64, advice, what=what)


@checked(_check_rope_angles)
def rope_angles(positions: Tensor, dim: int, base: float = 10000.0) -> Tensor:
    """θ[m, i] = m · base^(-2i/dim) for each position m and pair i < dim/2:
    positions ``[T]`` -> angles ``[T, dim/2]``, in float64."""
    i = torch.arange(dim // 2, dtype=torch.float64, device=positions.device)
    return positions.to(torch.float64)[:, None] * base ** (-2 * i / dim)


def _check_rope(
    x: object, positions: object, base: object, **_: object
) -> None:
    sizes = check_tensor("x", x, ("B", "H", "T", "D"))
    _check_base(base)
    if sizes["D"] % 2:
        raise ValueError(
            f"x: RoPE rotates pairs, expected an even head dim D, got {sizes['D']}"
        )
    _check_positions(positions, sizes["T"])


@checked(_check_rope)
def apply_rope(x: Tensor, positions: Tensor, base: float = 10000.0) -> Tensor:
    """Rotate each pair (x[2i], x[2i+1]) by the angle θ[m, i] of its position
    m: x ``[B, H, T, D]`` (D even), positions ``[T]`` -> ``[B, H, T, D]``."""
    angles = rope_angles(positions.to(x.device), x.shape[-1], base)
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    x_even, x_odd = x[..., 0::2], x[..., 1::2]
    rotated_even = x_even * cos - x_odd * sin
    rotated_odd = x_even * sin + x_odd * cos
    return torch.stack((rotated_even, rotated_odd), dim=-1).flatten(-2)


# ------------------------------------------------------------------------------ the layer


def _check_layer_call(
    self: MultiHeadAttention, x: object, cache: object, use_cache: bool
) -> None:
    """x ``[B, T, d_model]`` like the layer's weights; a cache that holds this layer's keys."""
    b, t = check_layer_input(x, self.d_model, self.w_o.weight)
    if self.q_conv is not None and (use_cache or cache is not None):
        raise ValueError(
            "use_cache: a layer with a short convolution (conv_size) runs full "
            "passes only"
        )
    past = cache.length if isinstance(cache, KVCache) else 0
    sizes = (b, self.n_heads, t, past + t)
    check_score_bytes("x", sizes, x.dtype, _layer_pieces(self.q_conv is None))
    if cache is None:
        return
    if not isinstance(cache, KVCache):
        raise ValueError(
            f"cache: expected a KVCache or None, got {type(cache).__name__}"
        )
    sizes = {"B": b, "H_kv": self.n_kv_heads, "D": self.head_dim}
    like = {"dtype": x.dtype, "device": x.device, "like": "x"}
    check_tensor("cache.k", cache.k, ("B", "H_kv", "T", "D"), sizes, **like)
    check_tensor("cache.v", cache.v, ("B", "H_kv", "T", "D"), sizes, **like)


def _layer_pieces(can_cache: bool) -> str:
    """How to run a sequence too long for one pass through an attention layer."""
    if can_cache:
        return (
            "feed x through the cache in pieces of at most {rows} tokens "
            "(layer(x[:, :t], use_cache=True), then layer(x[:, t:], cache))"
        )
    return "use a shorter x"


def _check_layer_options(
    rope: object, rope_base: object, conv_size: object
) -> None:
    """The options of an attention layer: a rope flag, a RoPE base (see ``apply_rope``) and a
    short-convolution width or None."""
    if not isinstance(rope, bool):
        raise ValueError(f"rope: expected True or False, got {rope!r}")
    check_number("rope_base", rope_base, low=1.0, inclusive=True)
    if conv_size is not None:
        check_positive_int("conv_size", conv_size)


class MultiHeadAttention(nn.Module):
    """Causal multi-head softmax attention with RoPE, grouped-query heads and a KV cache.

        q = RoPE(split(x W_q)),  k = RoPE(split(x W_k)),  v = split(x W_v)
        y = merge(softmax_attention(q, k, v)) W_o

    ``n_kv_heads`` (default ``n_heads``) < ``n_heads`` is GQA: each group of
    ``n_heads / n_kv_heads`` query heads shares one k/v head, and the cache keeps only
    ``n_kv_heads`` heads (1 is MQA). At decode time RoPE uses the absolute position, i.e. the
    cache length. x ``[B, T, d_model]`` -> ``(y [B, T, d_model], KVCache or None)``: the cache
    (if any, or a new one if ``use_cache``) grows by T tokens in place and is returned, so
    passing it back continues the sequence.
    ``conv_size`` runs x W_q, x W_k, x W_v through a short causal convolution each, as the
    recurrent layers do (Lesson 17's recall toy, which has no positions); such a layer runs
    full passes only, as its KV cache would not hold the convolution's inputs.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        head_dim: int,
        *,
        n_kv_heads: int | None = None,
        rope: bool = True,
        rope_base: float = 10000.0,
        conv_size: int | None = None,
    ) -> None:
        super().__init__()
        self.d_model = check_positive_int("d_model", d_model)
        self.n_heads = check_positive_int("n_heads", n_heads)
        self.head_dim = check_positive_int("head_dim", head_dim)
        self.n_kv_heads = check_positive_int(
            "n_kv_heads", n_heads if n_kv_heads is None else n_kv_heads
        )
        if n_heads % self.n_kv_heads:
            raise ValueError(
                f"n_kv_heads: expected a divisor of n_heads={n_heads}, got {self.n_kv_heads}"
            )
        if rope and head_dim % 2:
            raise ValueError(
                f"head_dim: RoPE rotates pairs, expected an even size, got {head_dim}"
            )
        _check_layer_options(rope, rope_base, conv_size)
        self.rope = rope
        self.rope_base = rope_base
        self.w_q = nn.Linear(d_model, n_heads * head_dim, bias=False)
        self.w_k = nn.Linear(d_model, self.n_kv_heads * head_dim, bias=False)
        self.w_v = nn.Linear(d_model, self.n_kv_heads * head_dim, bias=False)
        self.q_conv = self.k_conv = self.v_conv = None
        if conv_size is not None:
            kv_width = self.n_kv_heads * head_dim
            self.q_conv = ShortConvolution(n_heads * head_dim, conv_size)
            self.k_conv = ShortConvolution(kv_width, conv_size)
            self.v_conv = ShortConvolution(kv_width, conv_size)
        self.w_o = nn.Linear(n_heads * head_dim, d_model, bias=False)

    @checked(_check_layer_call)
    def forward(
        self, x: Tensor, cache: KVCache | None = None, use_cache: bool = False
    ) -> tuple[Tensor, KVCache | None]:
        start = 0 if cache is None else cache.length  # tokens already seen
        positions = torch.arange(start, start + x.shape[1], device=x.device)
        q, k, v = self.w_q(x), self.w_k(x), self.w_v(x)
        if self.q_conv is not None:  # Lesson 17's toy: its only positions
            q, k, v = self.q_conv(q)[0], self.k_conv(k)[0], self.v_conv(v)[0]
        q = split_heads(q, self.n_heads)
        k = split_heads(k, self.n_kv_heads)
        v = split_heads(v, self.n_kv_heads)
        if self.rope:
            q = apply_rope(q, positions, self.rope_base)
            k = apply_rope(k, positions, self.rope_base)
        if cache is not None:
            k, v = cache.append(k, v)  # the whole past, then x's tokens
        elif use_cache:
            cache = KVCache(k, v)
        n_rep = self.n_heads // self.n_kv_heads
        k, v = repeat_kv_heads(k, n_rep), repeat_kv_heads(v, n_rep)
        o, _ = softmax_attention(q, k, v, causal=True)
        return self.w_o(merge_heads(o)), cache


def _check_weights_call(layer: object, x: object) -> None:
    if not isinstance(layer, MultiHeadAttention):
        raise ValueError(
            f"layer: expected a MultiHeadAttention, got {type(layer).__name__}"
        )
    b, t = check_layer_input(x, layer.d_model, layer.w_o.weight)
    sizes = (b, layer.n_heads, t, t)
    check_score_bytes("x", sizes, x.dtype, "use a shorter x")


@checked(_check_weights_call)
def head_attention_weights(layer: MultiHeadAttention, x: Tensor) -> Tensor:
    """The attention weights of every head of ``layer`` on x, as its forward pass (no cache)
    computes them:

        A_h = softmax(s · q_h k_hᵀ + log M),   q = RoPE(split(x W_q)),  k = RoPE(split(x W_k)).

    x ``[B, T, d_model]`` -> weights ``[B, H, T, T]`` (each row sums to 1; GQA heads read
    their group's key head).
    """
    positions = torch.arange(x.shape[1], device=x.device)
    q, k = layer.w_q(x), layer.w_k(x)
    if (
        layer.q_conv is not None
    ):  # the layer's short convolution, if it has one
        q, k = layer.q_conv(q)[0], layer.k_conv(k)[0]
    q = split_heads(q, layer.n_heads)
    k = split_heads(k, layer.n_kv_heads)
    if layer.rope:
        q = apply_rope(q, positions, layer.rope_base)
        k = apply_rope(k, positions, layer.rope_base)
    k = repeat_kv_heads(k, layer.n_heads // layer.n_kv_heads)
    _, weights = softmax_attention(q, k, k, causal=True, return_weights=True)
    return weights
