"""Byte-pair encoding (BPE): a tokenizer that learns its pieces from a text.

A text is first its UTF-8 bytes, so the 256 byte values are the starting
vocabulary and no text is ever out of vocabulary: an English letter is one
byte, a Chinese character three. Training repeats one rule
(Sennrich et al., 2016; byte-level as in GPT-2):

    find the most frequent adjacent pair (a, b) in the training text,
    give it a new id n = 256 + (number of merges so far),
    replace every (a, b) by n.

After m merges the vocabulary has V = 256 + m tokens. Encoding a new text
replays the merges in the order they were learned; decoding concatenates
each token's bytes. A text is cut into chunks first — a word with the space
before it, a run of punctuation, a run of spaces — and no merge crosses a
chunk boundary, so a token never glues the end of one word to the next.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

from .checks import check_positive_int, checked

N_BYTES = 256
"""Token ids 0 … 255 are the single bytes; learned pieces start at 256."""

_CHUNK = re.compile(r" ?\w+| ?[^\s\w]+|\s+")
"""A word (letters, digits, CJK characters) or a run of punctuation, each
with the space before it; or a run of white space."""


def chunks(text: str) -> list[str]:
    """Cut text into the chunks merges stay inside:
    ``"The cat." -> ["The", " cat", "."]``."""
    return _CHUNK.findall(text)


def merge(ids: list[int], pair: tuple[int, int], new_id: int) -> list[int]:
    """Replace every occurrence of ``pair`` in ``ids``, left to right, by
    ``new_id``: ``merge([1, 2, 1, 2, 3], (1, 2), 9) -> [9, 9, 3]``."""
    out, i = [], 0
    while i < len(ids):
        if tuple(ids[i : i + 2]) == pair:
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


def _check_train(text: object, vocab_size: object) -> None:
    if not isinstance(text, str) or not text:
        raise TypeError(
            f"text: expected a non-empty str, got {type(text).__name__} "
            f"{text!r:.40}"
        )
    _check_utf8("text", text)
    check_positive_int("vocab_size", vocab_size)
    if vocab_size < N_BYTES:
        raise ValueError(
            f"vocab_size: expected at least {N_BYTES} (the single bytes), "
            f"got {vocab_size}"
        )


def _check_text(text: object) -> None:
    if not isinstance(text, str):
        raise TypeError(f"text: expected a str, got {type(text).__name__}")
    _check_utf8("text", text)


def _check_ids(self: BPETokenizer, ids: object) -> None:
    """ids: a sequence of Python ints in [0, V)."""
    if isinstance(ids, str | bytes) or not isinstance(ids, Sequence):
        raise TypeError(
            f"ids: expected a sequence of int token ids, got "
            f"{type(ids).__name__}"
        )
    for i in ids:
        if isinstance(i, bool) or not isinstance(i, int):
            raise TypeError(f"ids: expected int token ids, got {i!r}")
        if not 0 <= i < self.size:
            raise ValueError(
                f"ids: expected values in [0, {self.size}) (the "
                f"vocabulary), got {i}"
            )


def _check_utf8(name: str, text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise ValueError(
            f"{name}: expected text that UTF-8 can encode, got "
            f"{error.object[error.start : error.end]!r} at index "
            f"{error.start}"
        ) from None


@dataclass(frozen=True)
class BPETokenizer:
    """A byte-level BPE tokenizer: ``merges[i]`` is the pair of ids that
    token ``256 + i`` stands for, in the order they were learned."""

    merges: tuple[tuple[int, int], ...]

    @property
    def size(self) -> int:
        """V = 256 + number of merges."""
        return N_BYTES + len(self.merges)

    @checked(lambda self, token_id: _check_ids(self, [token_id]))
    def piece(self, token_id: int) -> bytes:
        """The bytes token ``token_id`` stands for."""
        return self._pieces()[token_id]

    def _pieces(self) -> list[bytes]:
        pieces = [bytes([b]) for b in range(N_BYTES)]
        for a, b in self.merges:
            pieces.append(pieces[a] + pieces[b])
        return pieces

    @checked(lambda self, text: _check_text(text))
    def encode(self, text: str) -> list[int]:
        """Text -> token ids: each chunk's bytes, merged in learned order."""
        rank = {pair: i for i, pair in enumerate(self.merges)}
        ids = []
        for chunk in chunks(text):
            ids.extend(_encode_chunk(list(chunk.encode("utf-8")), rank))
        return ids

    @checked(_check_ids)
    def decode(self, ids: Sequence[int]) -> str:
        """Token ids -> text: the pieces' bytes joined, read as UTF-8 (a
        cut-off character, possible only for ids not made by ``encode``,
        becomes U+FFFD)."""
        pieces = self._pieces()
        data = b"".join(pieces[i] for i in ids)
        return data.decode("utf-8", errors="replace")


def _encode_chunk(ids: list[int], rank: dict[tuple[int, int], int]):
    """Apply the earliest-learned merge present, until none applies."""
    while len(ids) > 1:
        pair = min(pairwise(ids), key=lambda p: rank.get(p, len(rank)))
        if pair not in rank:
            break
        ids = merge(ids, pair, N_BYTES + rank[pair])
    return ids


@checked(_check_train)
def train_bpe(text: str, vocab_size: int) -> BPETokenizer:
    """Learn ``vocab_size − 256`` merges from ``text`` (fewer if no pair
    occurs twice): each merge is the most frequent adjacent pair, counted
    inside chunks weighted by how often each chunk occurs (ties: the pair
    of smaller ids)."""
    words = Counter(chunks(text))  # chunk -> count
    seqs = {w: list(w.encode("utf-8")) for w in words}
    merges = []
    for new_id in range(N_BYTES, vocab_size):
        pairs = Counter()
        for w, ids in seqs.items():
            for pair in pairwise(ids):
                pairs[pair] += words[w]
        if not pairs or max(pairs.values()) < 2:
            break
        best = min(pairs, key=lambda p: (-pairs[p], p))
        merges.append(best)
        seqs = {w: merge(ids, best, new_id) for w, ids in seqs.items()}
    return BPETokenizer(tuple(merges))
