"""attnlab.positions: the sinusoidal table of Vaswani et al. §3.5 and adding
absolute positions to embeddings."""

import math

import pytest
import torch
from attnlab.positions import add_positions, sinusoidal_positions
from hypothesis import given
from hypothesis import strategies as st


def test_sinusoidal_matches_the_paper_entry_by_entry():
    n, d = 7, 6
    table = sinusoidal_positions(n, d)
    assert table.shape == (n, d)
    for p in range(n):
        for i in range(d // 2):
            angle = p / 10000 ** (2 * i / d)
            assert table[p, 2 * i].item() == pytest.approx(math.sin(angle))
            assert table[p, 2 * i + 1].item() == pytest.approx(math.cos(angle))


@given(n=st.integers(1, 50), half=st.integers(1, 16), k=st.integers(0, 20))
def test_a_shift_is_a_rotation_of_each_pair(n, half, k):
    # P[p + k] is P[p] with pair i rotated by k·ω_i: the property RoPE keeps
    d = 2 * half
    table = sinusoidal_positions(n + k, d)
    omega = 10000 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    s, c = table[:n, 0::2], table[:n, 1::2]
    shifted_s = s * torch.cos(k * omega) + c * torch.sin(k * omega)
    shifted_c = c * torch.cos(k * omega) - s * torch.sin(k * omega)
    torch.testing.assert_close(table[k:, 0::2], shifted_s)
    torch.testing.assert_close(table[k:, 1::2], shifted_c)


def test_every_row_has_norm_sqrt_half_d():
    table = sinusoidal_positions(100, 16)
    torch.testing.assert_close(table.norm(dim=1), torch.full((100,), math.sqrt(8.0),
                                                            dtype=torch.float64))


def test_add_positions_adds_row_p_at_position_p():
    x = torch.zeros(2, 3, 4)
    table = torch.arange(20.0).reshape(5, 4)
    y = add_positions(x, table)
    assert torch.equal(y[1], table[:3])
    assert y.dtype == x.dtype


@pytest.mark.parametrize(
    ("call", "argument"),
    [
        (lambda: sinusoidal_positions(0, 4), "n_positions"),
        (lambda: sinusoidal_positions(4, 5), "d"),
        (lambda: sinusoidal_positions(4, 4, base=1.0), "base"),
        (lambda: add_positions(torch.zeros(3, 4), torch.zeros(2, 4)), "positions"),
        (lambda: add_positions(torch.zeros(3, 4), torch.zeros(3, 5)), "positions"),
        (lambda: add_positions(torch.zeros(4), torch.zeros(3, 4)), "x"),
    ],
)
def test_bad_input_names_the_argument(call, argument):
    with pytest.raises(ValueError, match=argument):
        call()
