"""Token embeddings: a tokenizer turns text into ids, and a table turns ids into vectors.

An embedding table ``E`` has one row per token, ``E ∈ R^{V × d}`` (vocabulary size ``V``, model
width ``d``). Looking up token ``i`` returns row ``E[i]``, which is exactly the product of the
one-hot vector ``e_i ∈ {0, 1}^V`` with ``E``: ``x = e_iᵀ E``.

The tiny word tokenizer and the toy corpus here exist so the lessons have real, meaningful
vectors to look at without downloading a model: embeddings learned from co-occurrence counts
(PPMI + SVD) on a generated corpus place words used in the same slots close together.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import torch

from .checks import check_positive_int
from .memory import bytes_per_element

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
        for i in ids:
            if not 0 <= int(i) < self.size:
                raise ValueError(
                    f"ids: expected values in [0, {self.size}), got {int(i)}"
                )
        return " ".join(self.vocab[int(i)] for i in ids)


def split_words(text: str) -> list[str]:
    """Lower-case words and single punctuation marks: ``"The cat." -> ["the", "cat", "."]``."""
    return re.findall(r"[a-z0-9']+|[^\sa-z0-9']", text.lower())


def embedding_lookup(ids: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """x_t = E[id_t].  ids ``[...]`` (int64), table ``[V, d]`` ->
    ``[..., d]``."""
    _check_ids(ids, table)
    return table[ids]


def one_hot_embedding(ids: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """x_t = onehot(id_t)ᵀ E — the same numbers as a lookup, computed as a
    matrix product.

    ids ``[...]``, table ``[V, d]`` -> ``[..., d]``.  Costs ``V·d``
    multiply-adds per token where the lookup costs none: that is why
    frameworks index rather than multiply.
    """
    _check_ids(ids, table)
    one_hot = torch.nn.functional.one_hot(ids, num_classes=table.shape[0]).to(
        table.dtype
    )
    return one_hot @ table


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
    _check_table(table)
    unit = table / table.norm(dim=1, keepdim=True).clamp_min(1e-12)
    return unit @ unit.T


def nearest_neighbours(
    table: torch.Tensor, index: int, k: int = 5
) -> list[tuple[int, float]]:
    """The ``k`` rows most similar (cosine) to row ``index``, excluding itself: [(id, sim)]."""
    _check_table(table)
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
    _check_table(table)
    if table.shape[1] < 2:
        raise ValueError(
            f"table: expected width d >= 2 to project to 2-D, got {table.shape[1]}"
        )
    centred = table - table.mean(dim=0, keepdim=True)
    _, _, vh = torch.linalg.svd(centred, full_matrices=False)
    return centred @ vh[:2].T


# --- a toy corpus whose words fall into clear groups -------------------------------------------

WORD_GROUPS: dict[str, tuple[str, ...]] = {
    "animal": ("cat", "dog", "horse", "cow", "mouse", "rabbit"),
    "food": ("bread", "apple", "cheese", "rice", "soup", "cake"),
    "colour": ("red", "blue", "green", "yellow", "black", "white"),
    "place": ("garden", "kitchen", "forest", "river", "market", "school"),
    "number": ("two", "three", "four", "five", "six", "seven"),
}

_TEMPLATES = (
    "the {colour} {animal} eats {food} in the {place} .",
    "a {animal} sleeps near the {place} .",
    "we bought {number} {colour} cups at the {place} .",
    "the {animal} likes {food} and {food} .",
    "{number} {animal} ran to the {place} .",
    "she painted the {place} {colour} .",
    "they cooked {food} with {number} eggs .",
)


def toy_corpus(n_sentences: int = 2000, seed: int = 0) -> list[str]:
    """Sentences generated from templates: words of one group fill the same slots."""
    check_positive_int("n_sentences", n_sentences)
    g = torch.Generator().manual_seed(seed)

    def pick(options: Sequence[str]) -> str:
        return options[int(torch.randint(len(options), (1,), generator=g))]

    sentences = []
    for _ in range(n_sentences):
        template = pick(_TEMPLATES)
        sentences.append(
            re.sub(
                r"\{(\w+)\}",
                lambda m: pick(WORD_GROUPS[m.group(1)]),
                template,
            )
        )
    return sentences


def matches_template(sentence: str) -> bool:
    """True when ``sentence`` is one that :func:`toy_corpus` can generate: some template whose
    every ``{group}`` slot holds a word of that group and whose other words are exactly the
    template's. Compared word by word after :func:`split_words` (case and spacing do not matter).
    """
    words = split_words(sentence)
    for template in _TEMPLATES:
        slots = template.split()
        if len(slots) == len(words) and all(
            word in WORD_GROUPS[slot[1:-1]]
            if slot.startswith("{")
            else word == slot
            for slot, word in zip(slots, words, strict=True)
        ):
            return True
    return False


def template_fraction(text: str) -> tuple[int, int]:
    """Score generated text against the toy corpus's templates: ``(matching, complete)``.

    The text is cut after every ``"."``; each complete sentence (the words up to and including a
    ``"."``) is checked with :func:`matches_template`. The unfinished tail after the last ``"."``
    is dropped, and so is a lone ``"."`` (e.g. a prompt that is just the full stop). So start the
    text at a sentence boundary. The fraction of grammatical sentences is ``matching / complete``.
    """
    sentences = complete_sentences(text)
    return sum(matches_template(s) for s in sentences), len(sentences)


def complete_sentences(text: str) -> list[str]:
    """The complete sentences of ``text``: its words (:func:`split_words`) joined by spaces, cut
    after every ``"."``. The unfinished tail and lone ``"."`` are dropped:
    ``". the cat ran . a" -> ["the cat ran ."]``."""
    sentences, current = [], []
    for word in split_words(text):
        current.append(word)
        if word == ".":
            if len(current) > 1:
                sentences.append(" ".join(current))
            current = []
    return sentences


def toy_corpus_entropy() -> float:
    """The lowest possible next-word loss on a long stream of :func:`toy_corpus` sentences, in
    nats per token.

    A sentence picks one of the n templates uniformly and fills each ``{group}`` slot with one of
    that group's words uniformly, so it carries log n + Σ_slots log |group| nats, and every other
    word (and the final ".") is forced by what came before (a sentence's words determine its
    template). Per token of the stream that is the ratio of the means over templates:

        H = (log n + mean_t Σ_{slots of t} log |group|) / mean_t (tokens of t).

    No model can reach a lower average cross-entropy on this corpus.
    """
    bits = [
        sum(
            math.log(len(WORD_GROUPS[s[1:-1]]))
            for s in t.split()
            if s.startswith("{")
        )
        for t in _TEMPLATES
    ]
    lengths = [len(t.split()) for t in _TEMPLATES]
    n = len(_TEMPLATES)
    return (math.log(n) + sum(bits) / n) / (sum(lengths) / n)


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


def _check_table(table: torch.Tensor) -> None:
    if not isinstance(table, torch.Tensor) or table.dim() != 2:
        shape = (
            tuple(table.shape)
            if isinstance(table, torch.Tensor)
            else type(table).__name__
        )
        raise ValueError(f"table: expected a 2-D tensor [V, d], got {shape}")
    if not table.is_floating_point():
        raise ValueError(
            f"table: expected a floating-point tensor, got {table.dtype}"
        )


def _check_ids(ids: torch.Tensor, table: torch.Tensor) -> None:
    _check_table(table)
    if not isinstance(ids, torch.Tensor) or ids.dtype != torch.long:
        got = (
            ids.dtype if isinstance(ids, torch.Tensor) else type(ids).__name__
        )
        raise ValueError(
            f"ids: expected an int64 tensor of token ids, got {got}"
        )
    if ids.numel() and (ids.min() < 0 or ids.max() >= table.shape[0]):
        raise ValueError(
            f"ids: expected values in [0, {table.shape[0]}) (the table's rows), "
            f"got min {int(ids.min())}, max {int(ids.max())}"
        )
