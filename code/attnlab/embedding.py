"""Token embeddings: a tokenizer turns text into ids, and a table turns ids into vectors.

An embedding table ``E`` has one row per token, ``E ∈ R^{V × d}`` (vocabulary size ``V``, model
width ``d``). Looking up token ``i`` returns row ``E[i]``, which is exactly the product of the
one-hot vector ``e_i ∈ {0, 1}^V`` with ``E``: ``x = e_iᵀ E``. The lookup costs nothing; the
product costs ``V·d`` multiply-adds per token, which is why frameworks index rather than
multiply.

The tokenizer is a tiny word tokenizer (lower-case words and punctuation marks), enough for the
lessons' toy corpus without downloading a model.
"""

from __future__ import annotations

import operator
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from .checks import check_positive_int, checked

UNK = "<unk>"


@dataclass(frozen=True)
class WordTokenizer:
    """Split text into lower-case words and punctuation and map each to an id.

    Id 0 is ``<unk>`` (any word not in the vocabulary).
    """

    vocab: tuple[str, ...]

    @classmethod
    def from_texts(
        cls, texts: Iterable[str], max_size: int | None = None
    ) -> WordTokenizer:
        """Build a vocabulary from the most frequent words (ties broken alphabetically)."""
        counts = Counter(word for text in texts for word in split_words(text))
        ranked = sorted(counts, key=lambda w: (-counts[w], w))
        if max_size is not None:
            ranked = ranked[: check_positive_int("max_size", max_size) - 1]
        return cls((UNK, *ranked))

    @property
    def size(self) -> int:
        return len(self.vocab)

    def encode(self, text: str) -> list[int]:
        """Text -> token ids."""
        index = {word: i for i, word in enumerate(self.vocab)}
        return [index.get(word, 0) for word in split_words(text)]

    def decode(self, ids: Sequence[int]) -> str:
        """Token ids -> text (words joined by spaces)."""
        ids = [_token_id(i, self.size) for i in ids]
        return " ".join(self.vocab[i] for i in ids)


def _token_id(i: object, size: int) -> int:
    """One token id: an integer (a Python, NumPy or one-element integer torch value) in
    [0, size)."""
    try:
        index = None if isinstance(i, bool) else operator.index(i)
    except TypeError:
        index = None
    if index is None:
        raise ValueError(f"ids: expected integer token ids, got {i!r}")
    if not 0 <= index < size:
        raise ValueError(f"ids: expected values in [0, {size}), got {index}")
    return index


def split_words(text: str) -> list[str]:
    """Lower-case words and single punctuation marks: ``"The cat." -> ["the", "cat", "."]``."""
    return re.findall(r"[a-z0-9']+|[^\sa-z0-9']", text.lower())


def _check_table(table: object) -> None:
    if not isinstance(table, Tensor) or table.dim() != 2:
        shape = (
            tuple(table.shape)
            if isinstance(table, Tensor)
            else type(table).__name__
        )
        raise ValueError(f"table: expected a 2-D tensor [V, d], got {shape}")
    if not table.is_floating_point():
        raise ValueError(
            f"table: expected a floating-point tensor, got {table.dtype}"
        )


def _check_ids(ids: object, table: object) -> None:
    """ids: an int64 tensor of rows of ``table``, a float ``[V, d]`` tensor."""
    _check_table(table)
    if not isinstance(ids, Tensor) or ids.dtype != torch.long:
        got = ids.dtype if isinstance(ids, Tensor) else type(ids).__name__
        raise ValueError(
            f"ids: expected an int64 tensor of token ids, got {got}"
        )
    if ids.numel() and (ids.min() < 0 or ids.max() >= table.shape[0]):
        raise ValueError(
            f"ids: expected values in [0, {table.shape[0]}) (the table's rows), "
            f"got min {int(ids.min())}, max {int(ids.max())}"
        )


@checked(_check_ids)
def embedding_lookup(ids: Tensor, table: Tensor) -> Tensor:
    """x_t = E[id_t]: ids ``[...]``, table ``[V, d]`` -> ``[..., d]``."""
    return table[ids]


@checked(_check_ids)
def one_hot_embedding(ids: Tensor, table: Tensor) -> Tensor:
    """x_t = onehot(id_t)ᵀ E, the lookup's numbers as a matrix product: ids
    ``[...]``, table ``[V, d]`` -> ``[..., d]``."""
    one_hot = F.one_hot(ids, num_classes=table.shape[0]).to(table.dtype)
    return one_hot @ table
