"""What softmax attention costs, counted: the query–key dot products of one head (Lesson 2) and
the parameters and FLOPs of a multi-head layer (Lessons 4 and 5b).

Counts, not timings, of the layer in :mod:`attnlab.attention`: ``mha_parameter_counts`` equals
the parameter count of ``MultiHeadAttention`` and ``mha_flops`` what torch's FLOP counter
measures of its forward pass (the tests check both).

``attention_dot_products`` counts the pairs the causal mask allows, j <= Tk - Tq + i:
Σ_i (Tk - Tq + i + 1) = Tq (Tk - Tq) + Tq (Tq + 1) / 2, which is T (T + 1) / 2 for
self-attention and Tk for one decoding step (Tq = 1). Each dot product costs Dk multiply-adds.
A dense kernel often computes all Tq · Tk scores and then masks; this counts the ones that are
needed.

``mha_flops`` counts only the matrix products, a multiply-add as 2 FLOPs. With D = d_model / H
and H_kv = H its total is 8·T·d_model² + 4·T²·d_model for every H, and the parameter count is
4·d_model²: splitting into heads only cuts the same matrices into column blocks. Not counted:
scaling, masking and softmax, about H·T² element-wise operations each — these (and the score
tensor ``[B, H, T, T]``) do grow with H.
"""

from __future__ import annotations

from attnlab.checks import check_positive_int, checked


def _check_lengths(t_q: object, t_k: object, causal: object) -> None:
    check_positive_int("t_q", t_q)
    if t_k is not None:
        check_positive_int("t_k", t_k)
    if not isinstance(causal, bool):
        raise ValueError(f"causal: expected True or False, got {causal!r}")
    if causal and t_k is not None and t_q > t_k:
        raise ValueError(
            f"t_q: expected at most t_k={t_k} queries when causal, got {t_q}"
        )


@checked(_check_lengths)
def attention_dot_products(
    t_q: int, t_k: int | None = None, *, causal: bool = True
) -> int:
    """Dot products q_i · k_j of one head: Tq · Tk, or when causal only the
    pairs the mask allows, Σ_i (Tk - Tq + i + 1) (``t_k=None``: Tk = Tq)."""
    t_k = t_q if t_k is None else t_k
    if not causal:
        return t_q * t_k
    return t_q * (t_k - t_q) + t_q * (t_q + 1) // 2


def _head_sizes(
    d_model: object,
    n_heads: object,
    head_dim: object,
    n_kv_heads: object,
    **_: object,
) -> None:
    """Check the sizes of a multi-head layer (``head_dim=None``: d_model / n_heads)."""
    check_positive_int("d_model", d_model)
    check_positive_int("n_heads", n_heads)
    if head_dim is None and d_model % n_heads:
        raise ValueError(
            f"n_heads: expected a divisor of d_model={d_model} (head_dim=None "
            f"means d_model / n_heads), got {n_heads}"
        )
    if head_dim is not None:
        check_positive_int("head_dim", head_dim)
    n_kv = n_heads if n_kv_heads is None else n_kv_heads
    check_positive_int("n_kv_heads", n_kv)
    if n_heads % n_kv:
        raise ValueError(
            f"n_kv_heads: expected a divisor of n_heads={n_heads}, got {n_kv}"
        )


@checked(_head_sizes)
def mha_parameter_counts(
    d_model: int,
    n_heads: int,
    head_dim: int | None = None,
    n_kv_heads: int | None = None,
) -> dict[str, int]:
    """Weights of one multi-head attention layer (no biases), per matrix and in total:

        W_Q: d_model × H·D,   W_K, W_V: d_model × H_kv·D each,   W_O: H·D × d_model.

    ``head_dim=None`` means D = d_model / H; ``n_kv_heads`` H_kv < H is grouped-query attention
    (1 is multi-query). Equals the parameter count of ``MultiHeadAttention(d_model, H, D,
    n_kv_heads=H_kv)``. Returns ``{"W_Q", "W_K", "W_V", "W_O", "total"}``.
    """
    d = d_model // n_heads if head_dim is None else head_dim
    n_kv = n_heads if n_kv_heads is None else n_kv_heads
    counts = {
        "W_Q": d_model * n_heads * d,
        "W_K": d_model * n_kv * d,
        "W_V": d_model * n_kv * d,
        "W_O": n_heads * d * d_model,
    }
    counts["total"] = sum(counts.values())
    return counts


def _check_flops(seq_len: object, **sizes: object) -> None:
    check_positive_int("seq_len", seq_len)
    _head_sizes(**sizes)


# fmt: off
@checked(_check_flops)
def mha_flops(
    seq_len: int, d_model: int, n_heads: int, head_dim: int | None = None,
    n_kv_heads: int | None = None,
) -> dict[str, int]:
    """FLOPs of the matrix products of one multi-head layer on T tokens:

    projections  2·T·d_model·(H + 2·H_kv)·D   x W_Q, x W_K, x W_V
    scores       2·H·T·T·D                    Q Kᵀ per head, all T² pairs
    mix          2·H·T·T·D                    weights @ V per head
    output       2·T·H·D·d_model              merged heads @ W_O
    """
    t, h = seq_len, n_heads
    d = d_model // h if head_dim is None else head_dim
    h_kv = h if n_kv_heads is None else n_kv_heads
    flops = {
        "projections": 2 * t * d_model * (h + 2 * h_kv) * d,
        "scores": 2 * h * t * t * d,
        "mix": 2 * h * t * t * d,
        "output": 2 * t * h * d * d_model,
    }
    flops["total"] = sum(flops.values())
    return flops
# fmt: on
