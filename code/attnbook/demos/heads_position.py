"""The small layers of Lessons 4 and 5, with hand-set or seeded weights: two built heads,
attention without positions, RoPE scores."""

from __future__ import annotations

import math
from functools import cache

import torch

from attnlab.attention import (
    MultiHeadAttention,
    apply_rope,
    rope_angles,
    softmax_attention,
)
from attnlab.checks import check_choice, check_float_in, checked

#: The sentence of Lesson 4: repeated words give a "same word" head something to find.
HEADS_SENTENCE: tuple[str, ...] = tuple(
    "the cat saw the dog and the dog saw the cat".split()
)


#: The sentence of Lesson 5: the same words as "the man bit the dog", in another order.
ORDER_SENTENCE: tuple[str, ...] = tuple("the dog bit the man".split())


def _vocab(words: tuple[str, ...]) -> list[str]:
    """The distinct words in order of first appearance."""
    return list(dict.fromkeys(words))


def _two_head_options(sharpness: object, n_heads: object, **_) -> None:
    check_choice("n_heads", n_heads, (1, 2))
    check_float_in("sharpness", sharpness, 0.0, 100.0)


@checked(_two_head_options)
def constructed_two_head_layer(
    words: tuple[str, ...] = HEADS_SENTENCE,
    sharpness: float = 8.0,
    n_heads: int = 2,
) -> tuple[MultiHeadAttention, torch.Tensor]:
    """A two-head attention layer whose weights are SET BY HAND (not trained),
    and its input.

    Each token's input is
    [one-hot of its word (V) ; one-hot of its position (T) ; zeros], width
    d_model = 2·D with head width D = V + T (absolute positions, no RoPE).
    With c = sharpness·√D (the layer divides scores by √D):

    - head 0, "previous word": q_i = c·p_i, k_j = p_{j+1}, so the score is
      sharpness·[j = i − 1];
    - head 1, "same word": q_i = [2c·w_i ; c·p_i], k_j = [w_j ; −p_j], so the
      score is sharpness·(2·[word_j = word_i] − [j = i]): an earlier copy of
      the word wins, else itself.

    Values copy the word (head 0) and the position (head 1); W_O is the
    identity. ``n_heads=1`` returns the SAME four matrices read as one head of
    width 2·D. Returns (layer in float64, x ``[1, T, d_model]``).
    """
    vocab = _vocab(words)
    n_words, t = len(vocab), len(words)
    d = n_words + t
    layer = MultiHeadAttention(
        2 * d, n_heads, 2 * d // n_heads, rope=False
    ).double()
    x = torch.zeros(1, t, 2 * d, dtype=torch.float64)
    for i, word in enumerate(words):
        x[0, i, vocab.index(word)] = 1.0
        x[0, i, n_words + i] = 1.0
    c = sharpness * math.sqrt(d)
    w_q, w_k, w_v = (
        torch.zeros(2 * d, 2 * d, dtype=torch.float64) for _ in range(3)
    )
    pos = torch.arange(t)
    w_q[n_words + pos, n_words + pos] = c  # head 0: query = c · position
    w_k[n_words + pos[1:], n_words + pos[:-1]] = (
        1.0  # head 0: key = next position
    )
    # head 0: copy word
    w_v[:n_words, :n_words] = torch.eye(n_words, dtype=torch.float64)
    word = torch.arange(n_words)
    w_q[d + word, word] = 2 * c  # head 1: query = [2c · word ; c · position]
    w_q[d + n_words + pos, n_words + pos] = c
    w_k[d + word, word] = 1.0  # head 1: key = [word ; −position]
    w_k[d + n_words + pos, n_words + pos] = -1.0
    w_v[d + n_words + pos, n_words + pos] = 1.0  # head 1: copy position
    with torch.no_grad():
        layer.w_q.weight.copy_(w_q)
        layer.w_k.weight.copy_(w_k)
        layer.w_v.weight.copy_(w_v)
        layer.w_o.weight.copy_(torch.eye(2 * d, dtype=torch.float64))
    return layer, x


@cache
def order_setup(d: int = 6, seed: int = 1):
    """Seeded word vectors for ORDER_SENTENCE's words and random W_Q, W_K, W_V (d × d)."""
    g = torch.Generator().manual_seed(seed)
    vocab = _vocab(ORDER_SENTENCE)
    table = torch.randn(len(vocab), d, generator=g, dtype=torch.float64)
    w = torch.randn(3, d, d, generator=g, dtype=torch.float64) / math.sqrt(d)
    return vocab, table, w


def order_attention(
    words: tuple[str, ...], causal: bool = False
) -> torch.Tensor:
    """Single-head attention with NO position information on a sentence of ORDER_SENTENCE's words:
    x_i = table[word_i], q, k, v = x W_Q, x W_K, x W_V, o = softmax(s q kᵀ [+ log M]) v.
    Returns o ``[T, d]``."""
    vocab, table, w = order_setup()
    unknown = [word for word in words if word not in vocab]
    if unknown:
        raise ValueError(f"words: expected words from {vocab}, got {unknown}")
    # [1, 1, T, d]
    x = table[[vocab.index(word) for word in words]][None, None]
    q, k, v = x @ w[0], x @ w[1], x @ w[2]
    o, _ = softmax_attention(q, k, v, causal=causal)
    return o[0, 0]


ROPE_DIM = 16


@cache
def rope_demo_vectors(
    dim: int = ROPE_DIM, seed: int = 3
) -> tuple[torch.Tensor, torch.Tensor]:
    """A seeded query and a key with the same content (k = q), each ``[dim]``, float64."""
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(dim, generator=g, dtype=torch.float64)
    return q, q.clone()


def rope_scores(
    q: torch.Tensor,
    k: torch.Tensor,
    query_positions: torch.Tensor,
    key_position: int,
    base: float = 10000.0,
) -> torch.Tensor:
    """⟨RoPE(q, m), RoPE(k, n)⟩ for each query position m and one key position n.

    q, k ``[D]`` -> scores ``[len(query_positions)]`` (float64 positions, unscaled dot product).
    """
    t = len(query_positions)
    q_rot = apply_rope(
        q.expand(1, 1, t, -1), query_positions.to(torch.float64), base
    )
    k_rot = apply_rope(
        k[None, None, None], torch.tensor([float(key_position)]), base
    )
    return q_rot[0, 0] @ k_rot[0, 0, 0]


def rope_log_offsets(
    max_offset: int = 2**17, per_octave: int = 8
) -> torch.Tensor:
    """Offsets m − n = 1, 2^(1/per_octave), … up to ``max_offset``, geometric (float64): a log
    axis that gives short and long distances the same room."""
    n = round(math.log2(max_offset) * per_octave) + 1
    return torch.logspace(
        0, math.log2(max_offset), n, base=2, dtype=torch.float64
    )


def rope_cos_map(
    offsets: torch.Tensor, dim: int, base: float
) -> torch.Tensor:
    """cos((m − n)·θ_i) for each pair i (rows) and offset (columns), θ_i = base^(−2i/dim).

    offsets ``[N]`` -> ``[dim/2, N]``: 1 where a pair has not yet turned, ±1 at random where it
    has turned many times.
    """
    return rope_angles(offsets, dim, base).cos().T


def rope_self_score(
    offsets: torch.Tensor, dim: int, base: float
) -> torch.Tensor:
    """⟨RoPE(u, m), RoPE(u, n)⟩ / dim for the all-ones u (the same content at two positions),
    against the offset m − n: 1 at offset 0, and the mean over pairs of cos((m − n)·θ_i),
    i.e. the column mean of ``rope_cos_map``. offsets ``[N]`` -> ``[N]``."""
    ones = torch.ones(dim, dtype=torch.float64)
    return rope_scores(ones, ones, offsets, 0, base) / dim


@cache
def rope_self_score_curve(dim: int, base: float) -> torch.Tensor:
    """``rope_self_score`` over ``rope_log_offsets()``, computed once per (dim, base)."""
    return rope_self_score(rope_log_offsets(), dim, base)


def smoothed_self_score(
    offsets: torch.Tensor, dim: int, base: float, width: float = 2**0.25
) -> torch.Tensor:
    """The RoPE self-score averaged over the offsets from o / width to o · width, in closed
    form: the mean over pairs of (sin(b θ_i) − sin(a θ_i)) / ((b − a) θ_i), a = o / width,
    b = o · width. It keeps the trend of ``rope_self_score`` and drops its flicker.
    offsets ``[N]`` -> ``[N]``."""
    theta = rope_angles(torch.tensor([1.0]), dim, base)[0].to(torch.float64)
    low, high = offsets[:, None] / width, offsets[:, None] * width
    span = (high - low) * theta
    return (((high * theta).sin() - (low * theta).sin()) / span).mean(dim=1)


@cache
def rope_reach(
    dim: int, base: float, level: float = 0.5, max_offset: int = 2**17
) -> int:
    """The first whole offset m − n at which ``rope_self_score`` drops below ``level``
    (computed once per argument set: slider frames ask again and again)."""
    level = check_float_in("level", level, -1.0, 1.0)
    offsets = torch.arange(1, max_offset + 1, dtype=torch.float64)
    # the self-score is the column mean of the cos map (``rope_self_score`` says why; a test
    # checks it): that form needs no rotated vectors
    below = (rope_cos_map(offsets, dim, base).mean(dim=0) < level).nonzero()
    if not len(below):
        raise ValueError(
            f"max_offset: the score stays ≥ {level} up to {max_offset}; "
            "expected a larger max_offset"
        )
    return int(offsets[below[0, 0]])
