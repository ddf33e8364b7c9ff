"""Tests of attnlab.tasks: the MQAR layout, its determinism and its input checks."""

from __future__ import annotations

import pytest
import torch
from attnlab.tasks import IGNORE, mqar_batch, mqar_eval_set
from hypothesis import given, settings
from hypothesis import strategies as st


def gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# --------------------------------------------------------------------------- MQAR layout
@settings(deadline=None, max_examples=25)
@given(
    batch=st.integers(1, 6),
    n_pairs=st.integers(1, 20),
    half=st.integers(21, 64),
    seed=st.integers(0, 2**31),
)
def test_mqar_layout(batch: int, n_pairs: int, half: int, seed: int) -> None:
    vocab = 2 * half
    x, y = mqar_batch(batch, n_pairs, vocab_size=vocab, generator=gen(seed))
    n = n_pairs
    assert x.shape == y.shape == (batch, 4 * n)
    assert x.dtype == y.dtype == torch.long
    keys, values = x[:, 0 : 2 * n : 2], x[:, 1 : 2 * n : 2]
    q_keys, q_values = x[:, 2 * n :: 2], x[:, 2 * n + 1 :: 2]
    # keys in the lower half (token 0 reserved), values in the upper half
    assert ((keys >= 1) & (keys < half)).all()
    assert ((values >= half) & (values < vocab)).all()
    for b in range(batch):
        pairs = dict(zip(keys[b].tolist(), values[b].tolist(), strict=True))
        assert len(pairs) == n  # distinct keys
        assert len(set(values[b].tolist())) == n  # distinct values
        # each key queried exactly once, followed by its own value
        assert sorted(q_keys[b].tolist()) == sorted(pairs)
        assert [pairs[k] for k in q_keys[b].tolist()] == q_values[b].tolist()
    # targets: only at query-key positions, equal to the next token (the paired value)
    scored = y != IGNORE
    expected = torch.zeros_like(scored)
    expected[:, 2 * n :: 2] = True
    assert torch.equal(scored, expected)
    assert torch.equal(y[:, 2 * n :: 2], x[:, 2 * n + 1 :: 2])
    assert torch.equal(y[scored], x[:, 1:][scored[:, :-1]])


def test_mqar_query_order_is_shuffled() -> None:
    x, _ = mqar_batch(200, 8, generator=gen(1))
    keys, q_keys = x[:, 0:16:2], x[:, 16::2]
    in_context_order = (keys == q_keys).all(dim=1)
    assert in_context_order.float().mean() < 0.05  # 1/8! ≈ 2.5e-5 if shuffled


def test_mqar_uses_the_whole_key_range() -> None:
    x, _ = mqar_batch(500, 4, vocab_size=16, generator=gen(2))
    assert set(x[:, 0:8:2].unique().tolist()) == set(range(1, 8))
    assert set(x[:, 1:8:2].unique().tolist()) == set(range(8, 16))


def test_mqar_max_pairs() -> None:
    x, _ = mqar_batch(3, 63, vocab_size=128, generator=gen(0))
    assert x.shape == (3, 252)
    with pytest.raises(ValueError, match="n_pairs"):
        mqar_batch(3, 64, vocab_size=128, generator=gen(0))


def test_generator_determinism() -> None:
    a = mqar_batch(4, 8, generator=gen(7))
    b = mqar_batch(4, 8, generator=gen(7))
    c = mqar_batch(4, 8, generator=gen(8))
    assert all(torch.equal(u, v) for u, v in zip(a, b, strict=True))
    assert not torch.equal(a[0], c[0])
    g = gen(7)
    first, second = mqar_batch(4, 8, generator=g), mqar_batch(4, 8, generator=g)
    assert not torch.equal(first[0], second[0])  # the generator advances


def test_eval_set_is_fixed() -> None:
    a, b = mqar_eval_set(16, 4, seed=3), mqar_eval_set(16, 4, seed=3)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert a[0].shape == (16, 16)
    assert not torch.equal(a[0], mqar_eval_set(16, 4, seed=4)[0])
    assert torch.equal(a[0], mqar_batch(16, 4, generator=gen(3))[0])


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"batch_size": 0}, "batch_size"),
        ({"n_pairs": 0}, "n_pairs"),
        ({"n_pairs": 2.5}, "n_pairs"),
        ({"n_pairs": 8, "vocab_size": 16}, "n_pairs"),
        ({"vocab_size": 3}, "vocab_size"),
        ({"generator": 0}, "generator"),
        ({"generator": None}, "generator"),
    ],
)
def test_mqar_validation(kwargs: dict, name: str) -> None:
    args = {"batch_size": 2, "n_pairs": 4, "vocab_size": 128, "generator": gen()} | kwargs
    with pytest.raises(ValueError, match=name):
        mqar_batch(args.pop("batch_size"), args.pop("n_pairs"), **args)
