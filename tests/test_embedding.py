"""attnlab.embedding: lookup = one-hot product, the tokenizer, bad inputs."""

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


@pytest.mark.parametrize(
    ("call", "argument"),
    [
        (lambda: emb.embedding_lookup(torch.tensor([0, 5]), torch.zeros(5, 2)), "ids"),
        (lambda: emb.embedding_lookup(torch.tensor([-1]), torch.zeros(5, 2)), "ids"),
        (lambda: emb.embedding_lookup(torch.tensor([0.0]), torch.zeros(5, 2)), "ids"),
        (lambda: emb.embedding_lookup(torch.tensor([0]), torch.zeros(5)), "table"),
        (lambda: emb.embedding_lookup(torch.tensor([0]), torch.zeros(5, 2, dtype=torch.long)),
         "table"),
        (lambda: emb.one_hot_embedding([0, 1], torch.zeros(5, 2)), "ids"),
        (lambda: emb.one_hot_embedding(torch.tensor([5]), torch.zeros(5, 2)), "ids"),
    ],
)
def test_bad_inputs_name_the_argument(call, argument):
    with pytest.raises(ValueError, match=rf"^{argument}\b"):
        call()


def test_tokenizer_round_trip_and_unknown_words():
    tok = emb.WordTokenizer.from_texts(["the cat sat.", "the dog sat!"])
    assert tok.vocab[0] == emb.UNK
    ids = tok.encode("The cat sat.")
    assert tok.decode(ids) == "the cat sat ."
    assert tok.encode("purple cat") [0] == 0
    with pytest.raises(ValueError, match="ids"):
        tok.decode([tok.size])
