"""Lesson 1's helpers: the toy corpus (attnbook.demos.toy_corpus) and the word vectors learned from
it, their neighbours, 2-D map and table sizes (attnbook.demos.token_embeddings)."""

import pytest
import torch
from attnbook.demos import token_embeddings as vectors
from attnbook.demos import toy_corpus as corpus
from attnlab.embedding import WordTokenizer


def test_parameter_and_byte_counts():
    assert vectors.embedding_parameters(32000, 1536) == 49_152_000
    assert vectors.embedding_bytes(32000, 1536, "bf16") == 98_304_000
    assert vectors.embedding_bytes(128_000, 4096, "bf16") == 1_048_576_000  # exercise 1
    assert vectors.embedding_bytes(10, 10, "fp32") == 400


def test_toy_corpus_is_deterministic_and_groups_are_neighbours():
    assert corpus.toy_corpus(50, seed=1) == corpus.toy_corpus(50, seed=1)
    assert corpus.toy_corpus(50, seed=1) != corpus.toy_corpus(50, seed=2)
    sentences = corpus.toy_corpus(1000, seed=0)
    tok = WordTokenizer.from_texts(sentences)
    table = vectors.cooccurrence_embeddings(sentences, tok, dim=16)
    for group, words in corpus.WORD_GROUPS.items():
        first = tok.vocab.index(words[0])
        neighbours = [tok.vocab[i] for i, _ in vectors.nearest_neighbours(table, first, 3)]
        assert set(neighbours) <= set(words), (group, neighbours)


def test_cosine_and_projection_shapes():
    table = torch.randn(7, 5, dtype=torch.float64)
    sims = vectors.cosine_similarity_matrix(table)
    assert sims.shape == (7, 7)
    torch.testing.assert_close(sims.diagonal(), torch.ones(7, dtype=torch.float64))
    points = vectors.project_2d(table)
    assert points.shape == (7, 2)
    torch.testing.assert_close(points.mean(0), torch.zeros(2, dtype=torch.float64))


@pytest.mark.parametrize(
    ("call", "argument"),
    [
        (lambda: vectors.embedding_parameters(0, 4), "vocab_size"),
        (lambda: vectors.embedding_bytes(4, 4, "int4"), "dtype"),
        (lambda: vectors.nearest_neighbours(torch.zeros(3, 2), 3), "index"),
        (lambda: vectors.project_2d(torch.zeros(3, 1)), "table"),
        (lambda: vectors.cosine_similarity_matrix(torch.zeros(3)), "table"),
        (lambda: vectors.cooccurrence_embeddings(["a b"], WordTokenizer.from_texts(["a b"]), 9),
         "dim"),
    ],
)
def test_bad_inputs_name_the_argument(call, argument):
    with pytest.raises(ValueError, match=rf"^{argument}\b"):
        call()
