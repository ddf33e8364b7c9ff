"""The toy example of Lessons 1–3: Lesson 1's co-occurrence embeddings of the toy corpus, with
hand-made projections (:func:`relation_projections`): each key announces its word's group, each
query asks for the groups in :data:`RELATIONS`. A trained model learns its projections; these are
built so that the example is legible. Also Lesson 3's random scores and the score at which exp
overflows (:func:`exp_overflow_threshold`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache

import torch

from attnlab.attention import (
    attention_scores,
    softmax_attention,
    stable_softmax,
)
from attnlab.checks import check_tensor
from attnlab.embedding import WordTokenizer, embedding_lookup

from .token_embeddings import cooccurrence_embeddings, nearest_neighbours
from .toy_corpus import WORD_GROUPS, toy_corpus


@cache
def _toy_table() -> tuple[WordTokenizer, torch.Tensor]:
    corpus = toy_corpus()
    tokenizer = WordTokenizer.from_texts(corpus)
    return tokenizer, cooccurrence_embeddings(
        corpus, tokenizer, dim=tokenizer.size
    )


def toy_embeddings(dim: int = 16) -> tuple[WordTokenizer, torch.Tensor]:
    """The toy corpus's tokenizer and its co-occurrence embedding table ``[V, dim]``.

    The table of width ``dim`` is the first ``dim`` columns of the full SVD embedding
    (E = U_d sqrt(Σ_d)), so one SVD, computed once, serves every width.
    """
    tokenizer, table = _toy_table()
    if not 1 <= dim <= table.shape[1]:
        raise ValueError(
            f"dim: expected a width in [1, {table.shape[1]}], got {dim}"
        )
    return tokenizer, table[:, :dim]


#: How many of the toy corpus's sentences the growing tables of :func:`toy_embeddings_after`
#: have read (Lesson 1's slider over training progress; the last is the whole corpus).
TRAINING_SENTENCES: tuple[int, ...] = (5, 10, 20, 50, 100, 200, 2000)


@cache
def toy_embeddings_after(
    n_sentences: int, dim: int = 16
) -> tuple[WordTokenizer, torch.Tensor]:
    """The co-occurrence table ``[V, dim]`` computed from only the first ``n_sentences`` of the
    toy corpus, indexed by the whole corpus's tokenizer (rows of words not yet seen are zero):
    the table as it grows while it reads."""
    corpus = toy_corpus()
    if not 1 <= n_sentences <= len(corpus):
        raise ValueError(
            f"n_sentences: expected a count in [1, {len(corpus)}], got {n_sentences}"
        )
    tokenizer, _ = _toy_table()
    return tokenizer, cooccurrence_embeddings(
        corpus[:n_sentences], tokenizer, dim=dim
    )


def group_words() -> list[str]:
    """The words of the toy corpus's groups, group by group (the words of Lesson 1's map)."""
    return [w for words in WORD_GROUPS.values() for w in words]


def seen_words(tokenizer: WordTokenizer, table: torch.Tensor) -> list[str]:
    """The group words whose row of ``table`` is not zero (words the table has seen)."""
    return [
        w
        for w in group_words()
        if bool(table[tokenizer.vocab.index(w)].any())
    ]


def same_group_neighbour_fraction(
    tokenizer: WordTokenizer, table: torch.Tensor
) -> float:
    """The fraction of the group words whose nearest other group word (by cosine of their rows)
    is of the same group; a word not yet seen (zero row) counts as a miss. 1.0 means every word
    sits in its group's cluster; a random table scores about 5/29 (the chance that a random other
    word shares the group)."""
    words = group_words()
    seen = seen_words(tokenizer, table)
    if len(seen) < 2:
        return 0.0
    rows = table[[tokenizer.vocab.index(w) for w in seen]]
    unit = rows / rows.norm(dim=1, keepdim=True)
    cos = unit @ unit.T
    cos.fill_diagonal_(-math.inf)
    nearest = cos.argmax(dim=1).tolist()
    hits = sum(
        group_of(w) == group_of(seen[j])
        for w, j in zip(seen, nearest, strict=True)
    )
    return hits / len(words)


def group_of(word: str) -> str:
    """The word's group in the toy corpus ("animal", "food", …) or "other"."""
    return next(
        (g for g, words in WORD_GROUPS.items() if word in words), "other"
    )


#: The sentence of Lessons 1–3.
SENTENCE = "The red cat eats cheese in the kitchen."


#: The features a key announces: the five word groups of the toy corpus, and the verb "eats".
FEATURES: tuple[str, ...] = (*WORD_GROUPS, "eats")


#: Which features each feature's query looks for (the hand-written table R of the example).
RELATIONS: dict[str, tuple[str, ...]] = {
    "animal": ("colour",),  # what do I look like?
    "colour": ("animal",),  # whom do I describe?
    "food": ("animal",),  # who eats me?
    "place": ("animal",),  # who is here?
    "number": ("animal",),  # how many of what?
    "eats": ("animal", "food"),  # who eats, and what?
}


#: Width of the embeddings and strength of the queries in the toy example.
TOY_DIM = 32


TOY_STRENGTH = 8.0


@dataclass(frozen=True)
class ToyAttention:
    """The toy example's tokenizer, embedding table ``[V, d]`` and projections ``[d, F]``."""

    tokenizer: WordTokenizer
    table: torch.Tensor
    w_q: torch.Tensor
    w_k: torch.Tensor

    def qkv(
        self, sentence: str = SENTENCE
    ) -> tuple[list[str], torch.Tensor, torch.Tensor, torch.Tensor]:
        """Tokens and q, k, v ``[1, 1, T, ·]`` of a sentence (W_V is the identity: v = x)."""
        ids = torch.tensor(self.tokenizer.encode(sentence))
        tokens = [self.tokenizer.vocab[i] for i in ids.tolist()]
        x = embedding_lookup(ids, self.table)
        q, k, v = x @ self.w_q, x @ self.w_k, x
        return tokens, q[None, None], k[None, None], v[None, None]

    def nearest_words(
        self, vector: torch.Tensor, k: int = 3
    ) -> list[tuple[str, float]]:
        """The ``k`` vocabulary words whose embeddings are closest (cosine) to ``vector [d]``."""
        if not isinstance(vector, torch.Tensor) or vector.shape != (
            self.table.shape[1],
        ):
            got = (
                tuple(vector.shape)
                if isinstance(vector, torch.Tensor)
                else vector
            )
            raise ValueError(
                f"vector: expected a tensor [{self.table.shape[1]}], got {got}"
            )
        rows = torch.cat([self.table, vector.to(self.table.dtype)[None]])
        found = nearest_neighbours(rows, self.table.shape[0], k)
        return [(self.tokenizer.vocab[i], s) for i, s in found]


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


def feature_matrix(tokenizer: WordTokenizer) -> torch.Tensor:
    """``[V, F]`` float64: 1 where word v belongs to feature (group) f of :data:`FEATURES`."""
    features = torch.zeros(tokenizer.size, len(FEATURES), dtype=torch.float64)
    members = {**WORD_GROUPS, "eats": ("eats",)}
    for f, name in enumerate(FEATURES):
        for word in members[name]:
            features[tokenizer.vocab.index(word), f] = 1.0
    return features


def relation_matrix() -> torch.Tensor:
    """``[F, F]`` float64: R_fg = 1 if feature f's query looks for feature g (:data:`RELATIONS`)."""
    relations = torch.zeros(len(FEATURES), len(FEATURES), dtype=torch.float64)
    for f, targets in RELATIONS.items():
        for g in targets:
            relations[FEATURES.index(f), FEATURES.index(g)] = 1.0
    return relations


@cache
def toy_attention(
    dim: int = TOY_DIM, strength: float = TOY_STRENGTH
) -> ToyAttention:
    """The toy example (cached): embeddings of width ``dim``, W_Q and W_K of
    :func:`relation_projections`."""
    tokenizer, table = toy_embeddings(dim)
    w_q, w_k = relation_projections(
        table, feature_matrix(tokenizer), relation_matrix(), strength=strength
    )
    return ToyAttention(tokenizer, table, w_q, w_k)


@cache
def sentence_weights(
    sentence: str = SENTENCE, causal: bool = False
) -> tuple[tuple[str, ...], torch.Tensor]:
    """Tokens and attention weights ``[T, T]`` of the toy example on ``sentence`` (cached)."""
    tokens, q, k, v = toy_attention().qkv(sentence)
    _, weights = softmax_attention(
        q, k, v, causal=causal, return_weights=True
    )
    return tuple(tokens), weights[0, 0]


def check_query(query: object, n_tokens: int) -> int:
    if (
        isinstance(query, bool)
        or not isinstance(query, int)
        or not 0 <= query < n_tokens
    ):
        raise ValueError(
            f"query: expected a token position in [0, {n_tokens}), got {query!r}"
        )
    return query


def random_scores(
    dim: int,
    n_queries: int = 256,
    n_keys: int = 64,
    seed: int = 0,
    scale: float = 1.0,
) -> torch.Tensor:
    """Scores s · q_i · k_j ``[n_queries, n_keys]`` (float64) for q, k with i.i.d. N(0, 1)
    entries of width ``dim``; ``scale=1`` gives raw dot products, whose variance is ``dim``."""
    if isinstance(dim, bool) or not isinstance(dim, int) or dim < 1:
        raise ValueError(f"dim: expected a positive integer, got {dim!r}")
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(1, 1, n_queries, dim, generator=g, dtype=torch.float64)
    k = torch.randn(1, 1, n_keys, dim, generator=g, dtype=torch.float64)
    return attention_scores(q, k, scale=scale)[0, 0]


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


SPREAD_DIMS = (1, 4, 16, 64, 96, 256, 1024)


SPREAD_RANGE = 4 * math.sqrt(max(SPREAD_DIMS))


@dataclass(frozen=True)
class SpreadData:
    """Histograms behind :func:`draw_score_spread` for one width (counts per bin)."""

    raw_counts: torch.Tensor
    scaled_counts: torch.Tensor
    top_raw_counts: torch.Tensor
    top_scaled_counts: torch.Tensor
    raw_std: float
    scaled_std: float
    top_raw_mean: float
    top_scaled_mean: float
    n_queries: int
    n_keys: int


SCORE_EDGES = torch.linspace(
    -SPREAD_RANGE, SPREAD_RANGE, 81, dtype=torch.float64
)


WEIGHT_EDGES = torch.linspace(0, 1, 41, dtype=torch.float64)


@cache
def score_spread(dim: int) -> SpreadData:
    """Raw and scaled scores of :func:`random_scores` at width ``dim``, and the largest softmax
    weight of each row, as histograms (cached: a slider frame only draws)."""
    raw = random_scores(dim)
    scaled = raw / math.sqrt(dim)
    top_raw, top_scaled = (
        stable_softmax(raw).amax(-1),
        stable_softmax(scaled).amax(-1),
    )

    def counts(values: torch.Tensor, edges: torch.Tensor) -> torch.Tensor:
        return torch.histogram(values.flatten(), bins=edges).hist

    return SpreadData(
        counts(raw, SCORE_EDGES),
        counts(scaled, SCORE_EDGES),
        counts(top_raw, WEIGHT_EDGES),
        counts(top_scaled, WEIGHT_EDGES),
        float(raw.std()),
        float(scaled.std()),
        float(top_raw.mean()),
        float(top_scaled.mean()),
        raw.shape[0],
        raw.shape[1],
    )
