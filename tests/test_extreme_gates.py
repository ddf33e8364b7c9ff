"""Chunkwise kernels (and KDA's parallel form) under mixed extreme gates: a few log-gates of
−1e4, −1e6, −1e30 or float32's most negative number among small ones (about −0.01), anywhere in
the sequence (the first or last token of a chunk, a chunk boundary, the first or last token of
the sequence), any T and chunk size, scalar and per-channel gates, with or without an initial
state. In float32 the public ``*_chunk`` kernels and their readable ``*_chunk_reference`` forms
agree with the float64 recurrence to 1e-4 of the output's scale (in float64 to 1e-10), and so
do their gradients.

A decay over (j, i] taken as the difference of two cumulative sums, B_i − B_j, loses the small
gates after a very negative one in float32 (−1e4 + −0.01 keeps about one digit of the small
gate, −1e30 + −0.01 none): this is what these tests catch.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from attnlab.delta import (
    gated_delta_rule_chunk,
    gated_delta_rule_chunk_reference,
    gated_delta_rule_recurrent,
)
from attnlab.gated import gla_chunk, gla_chunk_reference, gla_recurrent
from attnlab.kda import kda_chunk, kda_chunk_reference, kda_parallel, kda_recurrent
from conftest import TOLERANCES, assert_close, seeds
from hypothesis import given, settings
from hypothesis import strategies as st

#: very negative log-gates; the last is float32's most negative finite number, so that two of
#: them sum to -inf
EXTREMES = (-1e4, -1e6, -1e30, -torch.finfo(torch.float32).max)
SMALL = -0.01

#: name -> (recurrence, (chunk kernel, chunk reference), per-channel gate?, takes beta?)
MECHANISMS = {
    "kda": (kda_recurrent, (kda_chunk, kda_chunk_reference), True, True),
    "gated_delta": (
        gated_delta_rule_recurrent,
        (gated_delta_rule_chunk, gated_delta_rule_chunk_reference),
        False,
        True,
    ),
    "gla_channel": (gla_recurrent, (gla_chunk, gla_chunk_reference), True, False),
    "gla_scalar": (gla_recurrent, (gla_chunk, gla_chunk_reference), False, False),
}


@st.composite
def mixed_gates(draw):
    """(T, chunk size, {position: extreme log-gate}, whether an extreme hits every channel).

    Positions are drawn from the chunk boundaries (first and last token of each chunk, which
    include the first and last token of the sequence) and from anywhere in the sequence."""
    length = draw(st.integers(1, 140))
    chunk_size = draw(st.integers(1, 64))
    firsts = range(0, length, chunk_size)
    boundaries = sorted({*firsts, *(min(s + chunk_size, length) - 1 for s in firsts)})
    position = st.one_of(st.sampled_from(boundaries), st.integers(0, length - 1))
    extremes = draw(st.dictionaries(position, st.sampled_from(EXTREMES), min_size=1,
                                    max_size=12))
    return length, chunk_size, extremes, draw(st.booleans())


def inputs(seed, length, extremes, all_channels, per_channel, dtype=torch.float64):
    """q, k (unit norm), v, beta in (0, 1), S_0 and the log-gates: SMALL · U(0.5, 1.5) with the
    ``extremes`` at their positions (per channel: in every channel, or in a random half)."""
    b, h, dk, dv = 2, 2, 5, 4
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(b, h, length, dk, generator=gen, dtype=dtype)
    k = F.normalize(torch.randn(b, h, length, dk, generator=gen, dtype=dtype), dim=-1)
    v = torch.randn(b, h, length, dv, generator=gen, dtype=dtype)
    beta = torch.rand(b, h, length, generator=gen, dtype=dtype)
    s0 = torch.randn(b, h, dk, dv, generator=gen, dtype=dtype)
    gate_shape = (b, h, length, dk) if per_channel else (b, h, length)
    g = SMALL * (0.5 + torch.rand(gate_shape, generator=gen, dtype=dtype))
    for t, value in extremes.items():
        hit = torch.ones(gate_shape[-1:] if per_channel else (), dtype=torch.bool)
        if per_channel and not all_channels:
            hit = torch.rand(dk, generator=gen) < 0.5
        g[:, :, t] = torch.where(hit, torch.tensor(value, dtype=dtype), g[:, :, t])
    return {"q": q, "k": k, "v": v, "beta": beta, "g": g}, s0


def run(kernel, x, s0, takes_beta, **options):
    """``kernel(q, k, v, g=…, [beta=…,] initial_state=s0, output_final_state=True)``."""
    x = {key: value for key, value in x.items() if takes_beta or key != "beta"}
    return kernel(x.pop("q"), x.pop("k"), x.pop("v"), **x, initial_state=s0,
                  output_final_state=True, **options)


def check_against_float64_recurrence(name, seed, length, chunk_size, extremes, all_channels,
                                     with_state):
    """The chunk kernel and reference of ``name`` in float32 (to 1e-4 of the output's scale)
    and float64 (to 1e-10) against the float64 recurrence, outputs and final states."""
    recurrent, chunk_forms, per_channel, takes_beta = MECHANISMS[name]
    x, s0 = inputs(seed, length, extremes, all_channels, per_channel)
    s0 = s0 if with_state else None
    expected = run(recurrent, x, s0, takes_beta)
    for dtype in (torch.float32, torch.float64):
        x_d = {key: value.to(dtype) for key, value in x.items()}
        s0_d = None if s0 is None else s0.to(dtype)
        for kernel in chunk_forms:
            o, s = run(kernel, x_d, s0_d, takes_beta, chunk_size=chunk_size)
            assert o.dtype == s.dtype == dtype
            assert_close((o.double(), s.double()), expected, tol=TOLERANCES[dtype])


@pytest.mark.parametrize("name", MECHANISMS)
@given(case=mixed_gates(), seed=seeds, with_state=st.booleans())
def test_chunk_forms_match_the_float64_recurrence(name, case, seed, with_state):
    length, chunk_size, extremes, all_channels = case
    check_against_float64_recurrence(name, seed, length, chunk_size, extremes, all_channels,
                                     with_state)


@pytest.mark.parametrize("name", MECHANISMS)
@pytest.mark.parametrize("extreme", EXTREMES, ids=["-1e4", "-1e6", "-1e30", "-float32_max"])
def test_every_seventh_gate_extreme(name, extreme):
    """The issue's case: g = extreme on every 7th token and −0.01 elsewhere, T = 130, chunks of
    64 (before the fix: errors of 5e-3 at −1e4 and up to 0.9 at −1e6 on outputs of ~3)."""
    extremes = dict.fromkeys(range(0, 130, 7), extreme)
    check_against_float64_recurrence(name, 0, 130, 64, extremes, True, with_state=True)


def gradients(kernel, x, s0, takes_beta, **options):
    """d(loss)/d(q, k, v, [beta,] g, S_0) for a loss weighing every output and state entry."""
    leaves = {key: value.clone().requires_grad_() for key, value in {**x, "s0": s0}.items()}
    if not takes_beta:
        del leaves["beta"]
    state = leaves.pop("s0")
    o, s = run(kernel, leaves, state, takes_beta, **options)
    gen = torch.Generator().manual_seed(0)
    loss = (o * torch.randn(o.shape, generator=gen).to(o.dtype)).sum() + (
        s * torch.randn(s.shape, generator=gen).to(s.dtype)).sum()
    return torch.autograd.grad(loss, [*leaves.values(), state])


@settings(max_examples=10)
@pytest.mark.parametrize("name", MECHANISMS)
@given(case=mixed_gates(), seed=seeds)
def test_float32_gradients_finite_and_match_the_float64_recurrence(name, case, seed):
    length, chunk_size, extremes, all_channels = case
    recurrent, chunk_forms, per_channel, takes_beta = MECHANISMS[name]
    x, s0 = inputs(seed, length, extremes, all_channels, per_channel)
    expected = gradients(recurrent, x, s0, takes_beta)
    x32 = {key: value.float() for key, value in x.items()}
    for kernel in chunk_forms:
        actual = gradients(kernel, x32, s0.float(), takes_beta, chunk_size=chunk_size)
        assert_close([a.double() for a in actual], expected, tol=1e-4)


@settings(max_examples=10)
@given(case=mixed_gates(), seed=seeds)
def test_float32_kda_parallel_matches_the_float64_recurrence(case, seed):
    """The parallel form writes every decay out the same way (from S_0 = 0)."""
    length, _, extremes, all_channels = case
    x, _ = inputs(seed, length, extremes, all_channels, per_channel=True)
    expected, _ = run(kda_recurrent, x, None, True)
    q, k, v, beta, g = (x[key].float() for key in ("q", "k", "v", "beta", "g"))
    o, _ = kda_parallel(q, k, v, g=g, beta=beta)
    assert_close(o.double(), expected, tol=1e-4)
