"""Scaled dot-product attention, the causal mask, multi-head split/merge and RoPE.

Tensors are ``[B, H, T, D]`` (batch, heads, time, head dim). The parallel form of causal
softmax attention (the Notation appendix, §1) is

    O = softmax(s · Q Kᵀ + log M) V,    s = 1/sqrt(Dk),   (log M)_ij = 0 if j <= i else -inf,

and the multi-head layer wraps it: project, split into heads, rotate q and k (RoPE), attend,
merge the heads, project back.
"""

from __future__ import annotations

import torch
from torch import nn

from .blocks import KVCache, merge_heads, split_heads
from .checks import (
    check_finite,
    check_layer_input,
    check_positive_int,
    check_tensor,
    resolve_scale,
)


def _check_qkv(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor
) -> dict[str, int]:
    """Check q ``[B,H,Tq,Dk]``, k ``[B,H,Tk,Dk]``, v ``[B,H,Tk,Dv]`` (same dtype and device,
    finite values, at least one time step)."""
    sizes = check_tensor("q", q, ("B", "H", "Tq", "Dk"))
    check_tensor(
        "k", k, ("B", "H", "Tk", "Dk"), sizes, dtype=q.dtype, device=q.device
    )
    check_tensor(
        "v", v, ("B", "H", "Tk", "Dv"), sizes, dtype=q.dtype, device=q.device
    )
    for name, x in (("q", q), ("k", k), ("v", v)):
        check_finite(name, x)
    for name, x, length in (("q", q, "Tq"), ("k", k, "Tk")):
        if sizes[length] == 0:
            raise ValueError(
                f"{name}: expected at least one time step, got shape "
                f"{tuple(x.shape)}"
            )
    return sizes


def naive_softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """softmax(x)_i = exp(x_i) / Σ_j exp(x_j), taken literally.

    Overflows: exp(1000) is inf in float32 and float64, so the result is
    inf/inf = nan.
    """
    e = torch.exp(x)
    return e / e.sum(dim, keepdim=True)


def stable_softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """softmax(x)_i = exp(x_i - m) / Σ_j exp(x_j - m) with m = max_j x_j.

    Subtracting the row max changes nothing mathematically (it cancels) but
    keeps every exponent <= 0, so nothing overflows. Entries equal to -inf
    (masked) get weight 0, and so does every entry of a row that is masked
    entirely (it has nothing to attend to).
    """
    if not isinstance(x, torch.Tensor) or not x.is_floating_point():
        raise ValueError(
            f"x: expected a floating-point tensor of scores, got "
            f"{getattr(x, 'dtype', type(x).__name__)}"
        )
    m = x.amax(dim, keepdim=True)
    # all -inf: exp(-inf) = 0, no NaN
    e = torch.exp(x - torch.where(m == -torch.inf, 0.0, m))
    total = e.sum(dim, keepdim=True)
    return torch.where(total > 0, e / total, 0.0)


def exp_overflow_threshold(dtype: torch.dtype) -> float:
    """The largest x whose exp(x) is finite in ``dtype``: log(finfo(dtype).max).

    About 11.09 for float16, 88.72 for float32 and bfloat16, 709.78 for float64: a score
    above it makes ``naive_softmax`` return inf/inf = nan.
    """
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise ValueError(
            f"dtype: expected a floating-point torch.dtype, got {dtype!r}"
        )
    return float(
        torch.log(torch.tensor(torch.finfo(dtype).max, dtype=torch.float64))
    )


def attention_scores(
    q: torch.Tensor, k: torch.Tensor, *, scale: float | None = None
) -> torch.Tensor:
    """Scaled dot products S = s · Q Kᵀ, i.e. S_ij = s · q_i · k_j.

    q ``[B, H, Tq, Dk]``, k ``[B, H, Tk, Dk]`` -> S ``[B, H, Tq, Tk]``;
    ``scale=None`` means s = 1/sqrt(Dk).
    """
    sizes = check_tensor("q", q, ("B", "H", "Tq", "Dk"))
    check_tensor(
        "k", k, ("B", "H", "Tk", "Dk"), sizes, dtype=q.dtype, device=q.device
    )
    s = resolve_scale(scale, sizes["Dk"])
    return (s * q) @ k.transpose(-2, -1)


def causal_mask(
    t_q: int, t_k: int, device: torch.device | str | None = None
) -> torch.Tensor:
    """M_ij = True where query i may attend to key j, i.e. j <= Tk - Tq + i.

    Query i sits at absolute position Tk - Tq + i: with Tq = Tk this is the
    usual lower triangle; with Tq < Tk (decoding after a prefix) the queries
    are the last Tq positions. Returns a bool tensor ``[Tq, Tk]``.
    """
    check_positive_int("t_q", t_q)
    check_positive_int("t_k", t_k)
    if t_q > t_k:
        raise ValueError(
            f"t_q: expected at most t_k={t_k} queries, got {t_q}"
        )
    query_pos = torch.arange(t_q, device=device)[:, None] + (t_k - t_q)
    key_pos = torch.arange(t_k, device=device)[None, :]
    return key_pos <= query_pos


def attention_dot_products(
    t_q: int, t_k: int | None = None, *, causal: bool = True
) -> int:
    """How many query–key dot products q_i · k_j one head of softmax
    attention needs.

    Full (bidirectional) attention scores every pair: Tq · Tk, i.e. T² for
    self-attention. Causal attention scores only the pairs the mask allows
    (j <= Tk - Tq + i, see ``causal_mask``):
    Σ_i (Tk - Tq + i + 1) = Tq · (Tk - Tq) + Tq (Tq + 1) / 2,
    which is T (T + 1) / 2 for self-attention (Tq = Tk = T) and Tk for one
    decoding step (Tq = 1). ``t_k=None`` means Tk = Tq. Each dot product
    costs Dk multiply-adds. (A dense kernel often computes all Tq · Tk scores
    and then masks; this counts the ones that are needed.)
    """
    check_positive_int("t_q", t_q)
    t_k = t_q if t_k is None else check_positive_int("t_k", t_k)
    if not isinstance(causal, bool):
        raise ValueError(f"causal: expected True or False, got {causal!r}")
    if not causal:
        return t_q * t_k
    if t_q > t_k:
        raise ValueError(
            f"t_q: expected at most t_k={t_k} queries when causal, got {t_q}"
        )
    return t_q * (t_k - t_q) + t_q * (t_q + 1) // 2


def relation_projections(
    x: torch.Tensor,
    features: torch.Tensor,
    relations: torch.Tensor,
    *,
    strength: float = 1.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Hand-made W_Q and W_K for a legible toy example: keys announce features, queries ask for
    related features.

    x ``[N, d]`` holds example inputs (e.g. an embedding table) and features ``[N, F]`` what
    each one's key should announce (e.g. 1 in the column of the word's group). relations
    ``[F, F]``: R_fg > 0 means "an input with feature f looks for inputs with feature g".

        W_K = argmin ‖X W_K - features‖²   (least squares, ``[d, F]``)
        W_Q = strength · W_K R              (``[d, F]``)

    so that q_i · k_j = strength · (x_i W_K) R (x_j W_K)ᵀ ≈ strength · f_iᵀ R f_j. A trained
    model learns W_Q and W_K from data; this builds them from a table of relations instead.
    Returns ``(w_q, w_k)`` in the dtype of x.
    """
    sizes = check_tensor("x", x, ("N", "d"))
    check_tensor(
        "features",
        features,
        ("N", "F"),
        sizes,
        dtype=x.dtype,
        device=x.device,
    )
    check_tensor(
        "relations",
        relations,
        ("F", "F"),
        sizes,
        dtype=x.dtype,
        device=x.device,
    )
    if isinstance(strength, bool) or not isinstance(strength, int | float):
        raise ValueError(f"strength: expected a number, got {strength!r}")
    w_k = torch.linalg.lstsq(x, features).solution
    return strength * (w_k @ relations), w_k


def softmax_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    causal: bool = True,
    scale: float | None = None,
    return_weights: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """O = softmax(s · Q Kᵀ + log M) V, with the causal mask M when
    ``causal``.

    q ``[B, H, Tq, Dk]``, k ``[B, H, Tk, Dk]``, v ``[B, H, Tk, Dv]`` -> o
    ``[B, H, Tq, Dv]``. With Tq < Tk the queries are the last Tq positions
    (see ``causal_mask``). Returns ``(o, None)`` like every sequence kernel,
    or ``(o, weights)`` with the attention weights ``[B, H, Tq, Tk]`` when
    ``return_weights=True``.
    """
    _check_qkv(q, k, v)
    scores = attention_scores(q, k, scale=scale)
    if causal:
        allowed = causal_mask(q.shape[2], k.shape[2], device=q.device)
        scores = scores.masked_fill(~allowed, float("-inf"))
    weights = stable_softmax(scores, dim=-1)
    return weights @ v, (weights if return_weights else None)


def softmax_attention_online(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    causal: bool = True,
    scale: float | None = None,
    block_size: int = 64,
) -> tuple[torch.Tensor, None]:
    """Softmax attention one key block at a time, FlashAttention's
    online softmax.

    For each key block j with scores S_j (masked like ``softmax_attention``),
    keep a running row max m, denominator ℓ and accumulator A:

        m' = max(m, rowmax S_j),   P = exp(S_j - m'),
        ℓ' = exp(m - m') ℓ + P 1,  A' = exp(m - m') A + P V_j,

    and at the end O = A / ℓ.

    The full ``[Tq, Tk]`` score matrix never exists. All queries are processed
    together (a GPU kernel also tiles the queries). Same shapes and result as
    ``softmax_attention``; returns ``(o, None)``.
    """
    sizes = _check_qkv(q, k, v)
    check_positive_int("block_size", block_size)
    b, h, t_q, t_k = sizes["B"], sizes["H"], sizes["Tq"], sizes["Tk"]
    allowed = causal_mask(t_q, t_k, device=q.device) if causal else None
    row_max = q.new_full((b, h, t_q, 1), float("-inf"))
    row_sum = q.new_zeros((b, h, t_q, 1))
    acc = q.new_zeros((b, h, t_q, sizes["Dv"]))
    for start in range(0, t_k, block_size):
        block = slice(start, start + block_size)
        scores = attention_scores(q, k[:, :, block], scale=scale)
        if allowed is not None:
            scores = scores.masked_fill(~allowed[:, block], float("-inf"))
        new_max = torch.maximum(row_max, scores.amax(-1, keepdim=True))
        p = torch.exp(scores - new_max)
        correction = torch.exp(row_max - new_max)
        row_sum = correction * row_sum + p.sum(-1, keepdim=True)
        acc = correction * acc + p @ v[:, :, block]
        row_max = new_max
    return acc / row_sum, None


def repeat_kv_heads(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    """GQA: ``[B, H_kv, T, D]`` -> ``[B, H_kv·n_rep, T, D]``; query head h
    reads kv head h // n_rep."""
    check_tensor("x", x, ("B", "H_kv", "T", "D"))
    check_positive_int("n_rep", n_rep)
    return x.repeat_interleave(n_rep, dim=1)


def _head_sizes(
    d_model: int, n_heads: int, head_dim: int | None, n_kv_heads: int | None
) -> tuple[int, int]:
    """Check the sizes of a multi-head layer; return (D, H_kv) with the defaults filled in."""
    check_positive_int("d_model", d_model)
    check_positive_int("n_heads", n_heads)
    if head_dim is None:
        if d_model % n_heads:
            raise ValueError(
                f"n_heads: expected a divisor of d_model={d_model} (head_dim=None "
                f"means d_model / n_heads), got {n_heads}"
            )
        head_dim = d_model // n_heads
    check_positive_int("head_dim", head_dim)
    n_kv = (
        n_heads
        if n_kv_heads is None
        else check_positive_int("n_kv_heads", n_kv_heads)
    )
    if n_heads % n_kv:
        raise ValueError(
            f"n_kv_heads: expected a divisor of n_heads={n_heads}, got {n_kv}"
        )
    return head_dim, n_kv


def mha_parameter_counts(
    d_model: int,
    n_heads: int,
    head_dim: int | None = None,
    n_kv_heads: int | None = None,
) -> dict[str, int]:
    """Weights of one multi-head attention layer (no biases), per matrix and in total:

        W_Q: d_model × H·D,   W_K, W_V: d_model × H_kv·D each,   W_O: H·D × d_model.

    ``head_dim=None`` means D = d_model / H; then, with H_kv = H, the total is 4·d_model² for
    every H: splitting into heads only cuts the same matrices into column blocks. ``n_kv_heads``
    H_kv < H is grouped-query attention (1 is multi-query): W_K and W_V keep H_kv·D columns.
    Equals the parameter count of ``MultiHeadAttention(d_model, H, D, n_kv_heads=H_kv)``.
    Returns ``{"W_Q", "W_K", "W_V", "W_O", "total"}``.
    """
    d, n_kv = _head_sizes(d_model, n_heads, head_dim, n_kv_heads)
    counts = {
        "W_Q": d_model * n_heads * d,
        "W_K": d_model * n_kv * d,
        "W_V": d_model * n_kv * d,
        "W_O": n_heads * d * d_model,
    }
    counts["total"] = sum(counts.values())
    return counts


def mha_flops(
    seq_len: int,
    d_model: int,
    n_heads: int,
    head_dim: int | None = None,
    n_kv_heads: int | None = None,
) -> dict[str, int]:
    """Floating-point operations of one multi-head attention layer on T tokens
    of one sequence, counting only the matrix products, a multiply-add as 2
    FLOPs:

        projections  2·T·d_model·(H + 2·H_kv)·D  q, k, v = x W_Q, x W_K, x W_V
        scores       2·H·T·T·D                   Q Kᵀ per head, all T² pairs
                                                 (a dense kernel computes the
                                                 masked half too)
        mix          2·H·T·T·D                   weights @ V per head
        output       2·T·H·D·d_model             merged heads @ W_O

    With D = d_model / H and H_kv = H the total is 8·T·d_model² + 4·T²·d_model
    for every H. Not counted: scaling, masking and softmax, about H·T²
    element-wise operations each — these (and the score tensor
    ``[B, H, T, T]``) do grow with H. Returns
    ``{"projections", "scores", "mix", "output", "total"}``.
    """
    check_positive_int("seq_len", seq_len)
    d, n_kv = _head_sizes(d_model, n_heads, head_dim, n_kv_heads)
    t = seq_len
    flops = {
        "projections": 2 * t * d_model * (n_heads + 2 * n_kv) * d,
        "scores": 2 * n_heads * t * t * d,
        "mix": 2 * n_heads * t * t * d,
        "output": 2 * t * n_heads * d * d_model,
    }
    flops["total"] = sum(flops.values())
    return flops


def _check_positions(positions: object, length: int | None = None) -> None:
    """Check that ``positions`` is a 1-D tensor ``[T]`` (of the given length, if any)."""
    want = "[T]" if length is None else f"[T={length}]"
    if not isinstance(positions, torch.Tensor):
        raise ValueError(
            f"positions: expected a 1-D tensor {want}, got {type(positions).__name__}"
        )
    if positions.dim() != 1 or (
        length is not None and positions.shape[0] != length
    ):
        raise ValueError(
            f"positions: expected a 1-D tensor {want}, got shape "
            f"{tuple(positions.shape)}"
        )
    if positions.is_floating_point() and not torch.isfinite(positions).all():
        raise ValueError(
            "positions: expected finite positions, got NaN or inf"
        )


def rope_angles(
    positions: torch.Tensor, dim: int, base: float = 10000.0
) -> torch.Tensor:
    """θ[m, i] = m · base^(-2i/dim) for each position m and pair
    i = 0 … dim/2 - 1.

    positions ``[T]`` (integers or floats) -> angles ``[T, dim/2]`` in float64
    (exact enough for positions in the millions; ``apply_rope`` casts cos and
    sin to the input dtype).
    """
    check_positive_int("dim", dim)
    if dim % 2:
        raise ValueError(
            f"dim: RoPE rotates pairs, expected an even head dim, got {dim}"
        )
    _check_positions(positions)
    pair = torch.arange(
        0, dim, 2, dtype=torch.float64, device=positions.device
    )
    inv_freq = base ** (-pair / dim)
    return positions.to(torch.float64)[:, None] * inv_freq[None, :]


def apply_rope(
    x: torch.Tensor, positions: torch.Tensor, base: float = 10000.0
) -> torch.Tensor:
    """Rotary position embedding: rotate each pair (x[2i], x[2i+1]) by the
    angle θ[m, i].

        x'[2i]   = x[2i] cos θ - x[2i+1] sin θ
        x'[2i+1] = x[2i] sin θ + x[2i+1] cos θ

    Convention: *interleaved* pairs, as in the RoFormer paper and the
    reference code of Llama and DeepSeek-V3 (complex numbers x[2i] + i·x[2i+1]
    times e^{iθ}); GPT-NeoX and Hugging Face code pair x[i] with x[i + D/2]
    instead, which is the same up to reordering the rows of W_q and W_k.
    Rotations keep norms, and ⟨RoPE(q, m), RoPE(k, n)⟩ depends on m - n only.
    x ``[B, H, T, D]`` (D even), positions ``[T]`` -> ``[B, H, T, D]``.
    """
    sizes = check_tensor("x", x, ("B", "H", "T", "D"))
    if sizes["D"] % 2:
        raise ValueError(
            "x: RoPE rotates pairs, expected an even head dim D, "
            f"got {sizes['D']}"
        )
    _check_positions(positions, sizes["T"])
    angles = rope_angles(positions.to(x.device), sizes["D"], base)
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    even, odd = x[..., 0::2], x[..., 1::2]
    rotated = torch.stack(
        (even * cos - odd * sin, even * sin + odd * cos), dim=-1
    )
    return rotated.flatten(-2)


class MultiHeadAttention(nn.Module):
    """Causal multi-head softmax attention with RoPE, grouped-query heads and a KV cache.

        q = RoPE(split(x W_q)),  k = RoPE(split(x W_k)),  v = split(x W_v)
        y = merge(softmax_attention(q, k, v)) W_o

    ``n_kv_heads`` (default ``n_heads``) < ``n_heads`` is GQA: each group of
    ``n_heads / n_kv_heads`` query heads shares one k/v head, and the cache keeps only
    ``n_kv_heads`` heads (1 is MQA). At decode time RoPE uses the absolute position, i.e. the
    cache length. x ``[B, T, d_model]`` -> ``(y [B, T, d_model], KVCache or None)``.
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
                f"n_kv_heads: expected a divisor of n_heads={n_heads}, "
                f"got {self.n_kv_heads}"
            )
        if rope and head_dim % 2:
            raise ValueError(
                f"head_dim: RoPE rotates pairs, expected an even size, got {head_dim}"
            )
        self.rope = rope
        self.rope_base = rope_base
        self.w_q = nn.Linear(d_model, n_heads * head_dim, bias=False)
        self.w_k = nn.Linear(d_model, self.n_kv_heads * head_dim, bias=False)
        self.w_v = nn.Linear(d_model, self.n_kv_heads * head_dim, bias=False)
        self.w_o = nn.Linear(n_heads * head_dim, d_model, bias=False)

    def forward(
        self,
        x: torch.Tensor,
        cache: KVCache | None = None,
        use_cache: bool = False,
    ) -> tuple[torch.Tensor, KVCache | None]:
        """Attend over the cached prefix and x; the cache (if any, or new if
        ``use_cache``) grows by T tokens in place and is returned, so passing
        it back continues the sequence."""
        _, t = check_layer_input(x, self.d_model, self.w_o.weight)
        if cache is not None and not isinstance(cache, KVCache):
            raise ValueError(
                "cache: expected a KVCache or None, "
                f"got {type(cache).__name__}"
            )
        start = 0 if cache is None else cache.length
        positions = torch.arange(start, start + t, device=x.device)
        q = split_heads(self.w_q(x), self.n_heads)
        k = split_heads(self.w_k(x), self.n_kv_heads)
        v = split_heads(self.w_v(x), self.n_kv_heads)
        if self.rope:
            q = apply_rope(q, positions, self.rope_base)
            k = apply_rope(k, positions, self.rope_base)
        if cache is not None:
            k, v = cache.append(k, v)
        elif use_cache:
            cache = KVCache(k, v)
        n_rep = self.n_heads // self.n_kv_heads
        o, _ = softmax_attention(
            q, repeat_kv_heads(k, n_rep), repeat_kv_heads(v, n_rep)
        )
        return self.w_o(merge_heads(o)), cache


def head_attention_weights(
    layer: MultiHeadAttention, x: torch.Tensor
) -> torch.Tensor:
    """The attention weights of every head of ``layer`` on x, as its forward pass (no cache)
    computes them:

        A_h = softmax(s · q_h k_hᵀ + log M),   q = RoPE(split(x W_q)),  k = RoPE(split(x W_k)).

    x ``[B, T, d_model]`` -> weights ``[B, H, T, T]`` (each row sums to 1; GQA heads read
    their group's key head).
    """
    if not isinstance(layer, MultiHeadAttention):
        raise ValueError(
            f"layer: expected a MultiHeadAttention, got {type(layer).__name__}"
        )
    _, t = check_layer_input(x, layer.d_model, layer.w_o.weight)
    positions = torch.arange(t, device=x.device)
    q = split_heads(layer.w_q(x), layer.n_heads)
    k = split_heads(layer.w_k(x), layer.n_kv_heads)
    if layer.rope:
        q = apply_rope(q, positions, layer.rope_base)
        k = apply_rope(k, positions, layer.rope_base)
    k = repeat_kv_heads(k, layer.n_heads // layer.n_kv_heads)
    _, weights = softmax_attention(q, k, k, return_weights=True)
    return weights
