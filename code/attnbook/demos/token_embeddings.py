"""Lesson 1's word vectors: embeddings learned from co-occurrence counts of the toy corpus
(PPMI + SVD), their cosine neighbours and 2-D map, and the size of an embedding table.

Words used in the same slots of the corpus's templates get close vectors, so the lesson has real,
meaningful vectors to look at without downloading a model.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from attnlab.checks import check_positive_int, check_tensor
from attnlab.embedding import WordTokenizer
from attnlab.memory import bytes_per_element


def embedding_parameters(vocab_size: int, d_model: int) -> int:
    """Number of parameters in an embedding table: V · d."""
    return check_positive_int("vocab_size", vocab_size) * check_positive_int(
        "d_model", d_model
    )


def embedding_bytes(
    vocab_size: int, d_model: int, dtype: str | torch.dtype = "bf16"
) -> int:
    """Bytes of an embedding table: V · d · bytes per element (``dtype``: "bf16", "fp32", …)."""
    return embedding_parameters(vocab_size, d_model) * bytes_per_element(
        dtype
    )


def cosine_similarity_matrix(table: torch.Tensor) -> torch.Tensor:
    """C_ij = E_i · E_j / (|E_i| |E_j|).  table ``[V, d]`` -> ``[V, V]``."""
    check_tensor("table", table, ("V", "d"))
    unit = table / table.norm(dim=1, keepdim=True).clamp_min(1e-12)
    return unit @ unit.T


def nearest_neighbours(
    table: torch.Tensor, index: int, k: int = 5
) -> list[tuple[int, float]]:
    """The ``k`` rows most similar (cosine) to row ``index``, excluding itself: [(id, sim)]."""
    check_tensor("table", table, ("V", "d"))
    if not 0 <= index < table.shape[0]:
        raise ValueError(
            f"index: expected a row in [0, {table.shape[0]}), got {index}"
        )
    k = min(check_positive_int("k", k), table.shape[0] - 1)
    sims = cosine_similarity_matrix(table)[index].clone()
    sims[index] = -float("inf")
    values, ids = sims.topk(k)
    return [(int(i), float(s)) for i, s in zip(ids, values, strict=True)]


def project_2d(table: torch.Tensor) -> torch.Tensor:
    """The rows of ``table`` on its two principal axes (PCA): ``[V, d] -> [V, 2]``."""
    check_tensor("table", table, ("V", "d"))
    if table.shape[1] < 2:
        raise ValueError(
            f"table: expected width d >= 2 to project to 2-D, got {table.shape[1]}"
        )
    centred = table - table.mean(dim=0, keepdim=True)
    _, _, vh = torch.linalg.svd(centred, full_matrices=False)
    return centred @ vh[:2].T


def cooccurrence_embeddings(
    corpus: Sequence[str],
    tokenizer: WordTokenizer,
    dim: int = 16,
    window: int = 2,
) -> torch.Tensor:
    """Word vectors from co-occurrence: E = U_d · sqrt(Σ_d) of the SVD of the PPMI matrix.

    PPMI_ij = max(0, log P(i, j) / (P(i) P(j))) over pairs within ``window`` words.
    Returns ``[V, dim]`` float64 (rows of words never seen are zero).
    """
    dim = check_positive_int("dim", dim)
    window = check_positive_int("window", window)
    v = tokenizer.size
    if dim > v:
        raise ValueError(
            f"dim: expected at most the vocabulary size {v}, got {dim}"
        )
    counts = torch.zeros(v, v, dtype=torch.float64)
    for sentence in corpus:
        ids = torch.tensor(tokenizer.encode(sentence), dtype=torch.long)
        for offset in range(1, window + 1):
            a, b = ids[:-offset], ids[offset:]
            counts.index_put_(
                (a, b),
                torch.ones(len(a), dtype=torch.float64),
                accumulate=True,
            )
            counts.index_put_(
                (b, a),
                torch.ones(len(a), dtype=torch.float64),
                accumulate=True,
            )
    total = counts.sum()
    p_i = counts.sum(1, keepdim=True) / total
    p_j = counts.sum(0, keepdim=True) / total
    with torch.no_grad():
        pmi = torch.log((counts / total) / (p_i * p_j))
    ppmi = torch.nan_to_num(pmi, nan=0.0, neginf=0.0).clamp_min(0.0)
    u, s, _ = torch.linalg.svd(ppmi)
    return u[:, :dim] * s[:dim].sqrt()
