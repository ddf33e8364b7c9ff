"""The toy corpus of the lessons: sentences generated from a few templates whose slots are
filled with words of five groups (animals, foods, colours, places, numbers).

Lesson 1 learns word vectors from it (:mod:`attnbook.demos.token_embeddings`), Lessons 2–3 attend
over one of its sentences, Lessons 5b and 19 train language models on it. Because the templates
are known, generated text can be checked sentence by sentence (:func:`matches_template`) and the
lowest possible loss computed exactly (:func:`toy_corpus_entropy`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

import torch

from attnlab.checks import check_positive_int
from attnlab.embedding import split_words

#: The five word groups: the words of one group fill the same slots of the templates.
WORD_GROUPS: dict[str, tuple[str, ...]] = {
    "animal": ("cat", "dog", "horse", "cow", "mouse", "rabbit"),
    "food": ("bread", "apple", "cheese", "rice", "soup", "cake"),
    "colour": ("red", "blue", "green", "yellow", "black", "white"),
    "place": ("garden", "kitchen", "forest", "river", "market", "school"),
    "number": ("two", "three", "four", "five", "six", "seven"),
}

#: The sentence templates: each ``{group}`` slot takes one word of that group.
TEMPLATES = (
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
        template = pick(TEMPLATES)
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
    for template in TEMPLATES:
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
        for t in TEMPLATES
    ]
    lengths = [len(t.split()) for t in TEMPLATES]
    n = len(TEMPLATES)
    return (math.log(n) + sum(bits) / n) / (sum(lengths) / n)
