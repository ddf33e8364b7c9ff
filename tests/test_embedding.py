"""attnlab.embedding: lookup = one-hot product, sizes, tokenizer, neighbours, bad inputs."""

import pytest
import torch
from attnlab import embedding as emb
from hypothesis import given, settings
from hypothesis import strategies as st


@settings(max_examples=25, deadline=None)
@given(v=st.integers(1, 40), d=st.integers(1, 16), shape=st.lists(st.integers(1, 5), max_size=3),
       seed=st.integers(0, 2**16))
def test_lookup_equals_one_hot_product(v, d, shape, seed):
    g = torch.Generator().manual_seed(seed)
    table = torch.randn(v, d, generator=g, dtype=torch.float64)
    ids = torch.randint(v, tuple(shape), generator=g)
    x = emb.embedding_lookup(ids, table)
    assert x.shape == (*shape, d)
    torch.testing.assert_close(x, emb.one_hot_embedding(ids, table), rtol=0, atol=0)


def test_lookup_rows_are_the_table_rows():
    table = torch.arange(12.0).reshape(4, 3)
    x = emb.embedding_lookup(torch.tensor([[3, 0]]), table)
    assert x.tolist() == [[[9.0, 10.0, 11.0], [0.0, 1.0, 2.0]]]


def test_parameter_and_byte_counts():
    assert emb.embedding_parameters(32000, 1536) == 49_152_000
    assert emb.embedding_bytes(32000, 1536, "bf16") == 98_304_000
    assert emb.embedding_bytes(128_000, 4096, "bf16") == 1_048_576_000  # Lesson 1, exercise 1
    assert emb.embedding_bytes(10, 10, "fp32") == 400


@pytest.mark.parametrize(
    ("call", "argument"),
    [
        (lambda: emb.embedding_lookup(torch.tensor([0, 5]), torch.zeros(5, 2)), "ids"),
        (lambda: emb.embedding_lookup(torch.tensor([-1]), torch.zeros(5, 2)), "ids"),
        (lambda: emb.embedding_lookup(torch.tensor([0.0]), torch.zeros(5, 2)), "ids"),
        (lambda: emb.embedding_lookup(torch.tensor([0]), torch.zeros(5)), "table"),
        (lambda: emb.embedding_lookup(torch.tensor([0]), torch.zeros(5, 2, dtype=torch.long)),
         "table"),
        (lambda: emb.embedding_parameters(0, 4), "vocab_size"),
        (lambda: emb.embedding_bytes(4, 4, "int4"), "dtype"),
        (lambda: emb.nearest_neighbours(torch.zeros(3, 2), 3), "index"),
        (lambda: emb.project_2d(torch.zeros(3, 1)), "table"),
        (lambda: emb.cooccurrence_embeddings(["a b"], emb.WordTokenizer.from_texts(["a b"]), 9),
         "dim"),
    ],
)
def test_bad_inputs_name_the_argument(call, argument):
    with pytest.raises(ValueError, match=argument):
        call()


def test_tokenizer_round_trip_and_unknown_words():
    tok = emb.WordTokenizer.from_texts(["the cat sat.", "the dog sat!"])
    assert tok.vocab[0] == emb.UNK
    ids = tok.encode("The cat sat.")
    assert tok.decode(ids) == "the cat sat ."
    assert tok.encode("purple cat") [0] == 0
    with pytest.raises(ValueError, match="ids"):
        tok.decode([tok.size])


def test_toy_corpus_is_deterministic_and_groups_are_neighbours():
    assert emb.toy_corpus(50, seed=1) == emb.toy_corpus(50, seed=1)
    assert emb.toy_corpus(50, seed=1) != emb.toy_corpus(50, seed=2)
    corpus = emb.toy_corpus(1000, seed=0)
    tok = emb.WordTokenizer.from_texts(corpus)
    table = emb.cooccurrence_embeddings(corpus, tok, dim=16)
    for group, words in emb.WORD_GROUPS.items():
        first = tok.vocab.index(words[0])
        neighbours = [tok.vocab[i] for i, _ in emb.nearest_neighbours(table, first, 3)]
        assert set(neighbours) <= set(words), (group, neighbours)


def test_cosine_and_projection_shapes():
    table = torch.randn(7, 5, dtype=torch.float64)
    sims = emb.cosine_similarity_matrix(table)
    assert sims.shape == (7, 7)
    torch.testing.assert_close(sims.diagonal(), torch.ones(7, dtype=torch.float64))
    points = emb.project_2d(table)
    assert points.shape == (7, 2)
    torch.testing.assert_close(points.mean(0), torch.zeros(2, dtype=torch.float64))
