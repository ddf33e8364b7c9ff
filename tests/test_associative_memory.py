"""Tests of attnbook.demos.associative_memory: key/value pairs written into a state and read
back (additive and delta-rule writes, with decays), the crosstalk prediction, and Lesson 12's
document-switch stream."""

from __future__ import annotations

import math

import pytest
import torch
from attnbook.demos.associative_memory import (
    SWITCH_MIXERS,
    associative_pairs,
    delta_recall_errors_by_pair,
    document_switch_stream,
    expected_crosstalk,
    latest_value_errors,
    mean_recall_error,
    recall_error,
    recall_errors_by_pair,
    switch_stream_state,
    write_state,
)
from attnlab import gated_delta_rule_recurrent, gla_recurrent
from hypothesis import given, settings
from hypothesis import strategies as st


def gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def draws(n: int, dim: int, trials: int, seed: int = 0, orthogonal: bool = False):
    g = gen(seed)
    pairs = [associative_pairs(n, dim, orthogonal=orthogonal, generator=g) for _ in range(trials)]
    return torch.stack([k for k, _ in pairs]), torch.stack([v for _, v in pairs])


# --------------------------------------------------------------------------- key/value vectors
@settings(deadline=None, max_examples=20)
@given(n=st.integers(1, 12), extra=st.integers(0, 6), seed=st.integers(0, 2**31))
def test_associative_pairs(n: int, extra: int, seed: int) -> None:
    dim = n + extra
    keys, values = associative_pairs(n, dim, orthogonal=True, generator=gen(seed))
    assert keys.shape == values.shape == (n, dim) and keys.dtype == torch.float64
    torch.testing.assert_close(keys @ keys.T, torch.eye(n, dtype=torch.float64), atol=1e-12,
                               rtol=0)
    keys, _ = associative_pairs(n, dim, orthogonal=False, generator=gen(seed))
    torch.testing.assert_close(keys.norm(dim=1), torch.ones(n, dtype=torch.float64))


def test_associative_pairs_validation() -> None:
    with pytest.raises(ValueError, match="n_pairs"):
        associative_pairs(9, 8, orthogonal=True, generator=gen())
    with pytest.raises(ValueError, match="dim"):
        associative_pairs(2, 0, orthogonal=False, generator=gen())
    with pytest.raises(ValueError, match="generator"):
        associative_pairs(2, 4, orthogonal=False, generator=3)
    keys, values = associative_pairs(3, 4, orthogonal=False, generator=gen())
    with pytest.raises(ValueError, match="write"):
        recall_error(keys, values, write="overwrite")
    with pytest.raises(ValueError, match="values"):
        recall_error(keys, values[:2])
    with pytest.raises(ValueError, match="beta"):
        recall_error(keys, values, write="delta", beta=3.0)


# --------------------------------------------------------------------------- recall error
def test_write_state_equations() -> None:
    keys, values = associative_pairs(5, 4, orthogonal=False, generator=gen(1))
    additive = sum(torch.outer(k, v) for k, v in zip(keys, values, strict=True))
    torch.testing.assert_close(write_state(keys, values, write="add"), additive, atol=1e-12,
                               rtol=0)
    beta, state = 0.7, torch.zeros(4, 4, dtype=torch.float64)
    for k, v in zip(keys, values, strict=True):
        state = state + beta * torch.outer(k, v - state.T @ k)
    torch.testing.assert_close(write_state(keys, values, write="delta", beta=beta), state,
                               atol=1e-12, rtol=0)


@settings(deadline=None, max_examples=20)
@given(n=st.integers(1, 16), extra=st.integers(0, 8), seed=st.integers(0, 2**31))
def test_orthonormal_keys_recall_exactly(n: int, extra: int, seed: int) -> None:
    keys, values = associative_pairs(n, n + extra, orthogonal=True, generator=gen(seed))
    assert recall_error(keys, values, write="add") < 1e-10
    assert recall_error(keys, values, write="delta", beta=1.0) < 1e-10


def test_delta_with_beta_one_recalls_the_last_pair_exactly() -> None:
    keys, values = associative_pairs(40, 16, orthogonal=False, generator=gen(5))
    state = write_state(keys, values, write="delta", beta=1.0)
    torch.testing.assert_close(state.T @ keys[-1], values[-1], atol=1e-10, rtol=0)


@pytest.mark.parametrize(("n", "dim"), [(4, 16), (8, 16), (16, 16), (32, 16), (64, 32)])
def test_random_keys_delta_beats_additive(n: int, dim: int) -> None:
    for seed in range(5):
        keys, values = associative_pairs(n, dim, orthogonal=False, generator=gen(seed))
        add = recall_error(keys, values, write="add")
        delta = recall_error(keys, values, write="delta")
        assert add > 0.05  # crosstalk between non-orthogonal keys
        assert delta < add


def test_additive_error_grows_with_the_number_of_pairs() -> None:
    errors = []
    for n in (4, 16, 64):
        runs = [recall_error(*associative_pairs(n, 16, orthogonal=False, generator=gen(s)))
                for s in range(5)]
        errors.append(sum(runs) / len(runs))
    assert errors[0] < errors[1] < errors[2]


# --------------------------------------------------------------------------- recall errors by pair


def test_recall_errors_by_pair_matches_recall_error():
    keys, values = draws(40, 16, 3)
    errors = recall_errors_by_pair(keys, values)
    assert errors.shape == (3, 1, 40)
    for b in range(3):
        assert errors[b, 0].mean().item() == pytest.approx(recall_error(keys[b], values[b]),
                                                           rel=1e-12)


def test_recall_errors_by_pair_with_decay_equals_the_explicit_sum():
    keys, values = draws(12, 6, 2, seed=3)
    g = -torch.rand(2, 3, 12, 6, generator=gen(4), dtype=torch.float64)  # per channel
    errors = recall_errors_by_pair(keys, values, g=g)
    for b in range(2):
        for h in range(3):
            state = torch.zeros(6, 6, dtype=torch.float64)
            for i in range(12):  # S_i = Diag(α_i) S_{i-1} + k_i v_iᵀ
                state = torch.exp(g[b, h, i])[:, None] * state + torch.outer(keys[b, i],
                                                                             values[b, i])
            read = keys[b] @ state
            expected = (read - values[b]).norm(dim=1) / values[b].norm(dim=1)
            torch.testing.assert_close(errors[b, h], expected, rtol=1e-10, atol=1e-12)


def test_recall_errors_by_pair_orthonormal_keys_only_fade():
    keys, values = draws(8, 8, 1, orthogonal=True)
    alpha = 0.8
    g = torch.full((1, 1, 8), math.log(alpha), dtype=torch.float64)
    errors = recall_errors_by_pair(keys, values, g=g)[0, 0]
    ages = torch.arange(7, -1, -1, dtype=torch.float64)
    torch.testing.assert_close(errors, 1 - alpha**ages, rtol=0, atol=1e-12)


@pytest.mark.parametrize(("kwargs", "name"), [
    ({"g": torch.zeros(2, 1, 5)}, "g"),  # float32 against float64 keys
    ({"g": torch.ones(2, 1, 5, dtype=torch.float64)}, "g"),  # g > 0
    ({"g": torch.zeros(2, 5, dtype=torch.float64)}, "g"),  # wrong rank
    ({"g": torch.zeros(3, 1, 5, dtype=torch.float64)}, "g"),  # wrong batch
])
def test_recall_errors_by_pair_rejects_bad_gates(kwargs, name):
    keys, values = draws(5, 4, 2)
    with pytest.raises(ValueError, match=name):
        recall_errors_by_pair(keys, values, **kwargs)


def test_recall_errors_by_pair_rejects_bad_shapes():
    keys, values = draws(5, 4, 2)
    with pytest.raises(ValueError, match="keys"):
        recall_errors_by_pair(keys[0], values[0])
    with pytest.raises(ValueError, match="values"):
        recall_errors_by_pair(keys, values[:, :4])


def test_mean_recall_error():
    assert mean_recall_error(8, 8, orthogonal=True, n_trials=3) < 1e-12
    random = mean_recall_error(64, 16, orthogonal=False, n_trials=8)
    assert random == pytest.approx(expected_crosstalk(64, 16), rel=0.1)
    assert mean_recall_error(64, 16, orthogonal=False, n_trials=8) == random  # seeded
    with pytest.raises(ValueError, match="n_trials"):
        mean_recall_error(4, 4, orthogonal=False, n_trials=0)


def test_expected_crosstalk():
    assert expected_crosstalk(1, 8) == 0.0
    assert expected_crosstalk(97, 96) == 1.0
    assert expected_crosstalk(7, 96) == 0.25
    # with decay: the newest pair sees Σ_{a=1}^{N-1} α^(2a) / d
    alpha, n, d = 0.9, 30, 16
    direct = math.sqrt(sum(alpha ** (2 * a) for a in range(1, n)) / d)
    assert expected_crosstalk(n, d, alpha=alpha) == pytest.approx(direct, rel=1e-12)
    bound = math.sqrt(alpha**2 / ((1 - alpha**2) * d))
    assert expected_crosstalk(10**6, d, alpha=alpha) == pytest.approx(bound, rel=1e-9)
    assert expected_crosstalk(n, d, alpha=1.0) == pytest.approx(math.sqrt((n - 1) / d))
    for bad in (0.0, 1.5, True):
        with pytest.raises(ValueError, match="alpha"):
            expected_crosstalk(4, 4, alpha=bad)
    with pytest.raises(ValueError, match="n_pairs"):
        expected_crosstalk(0, 4)


def test_expected_crosstalk_matches_measured_decayed_recall():
    """The newest pair's error under decay is its crosstalk (it has not faded)."""
    keys, values = draws(256, 32, 64, seed=5)
    alpha = 0.9
    g = torch.full((64, 1, 256), math.log(alpha), dtype=torch.float64)
    newest = recall_errors_by_pair(keys, values, g=g)[:, 0, -1]
    rms = newest.pow(2).mean().sqrt().item()
    assert rms == pytest.approx(expected_crosstalk(256, 32, alpha=alpha), rel=0.15)


# ---------------------------------------------------------------- delta_recall_errors_by_pair


def test_delta_recall_errors_match_write_state():
    gen = torch.Generator().manual_seed(3)
    draws = [associative_pairs(12, 8, orthogonal=False, generator=gen) for _ in range(3)]
    keys = torch.stack([k for k, _ in draws])
    values = torch.stack([v for _, v in draws])
    for beta in (0.5, 1.0):
        errors = delta_recall_errors_by_pair(keys, values, beta=beta)
        assert errors.shape == (3, 12)
        for b in range(3):
            state = write_state(keys[b], values[b], write="delta", beta=beta)
            manual = (keys[b] @ state - values[b]).norm(dim=1) / values[b].norm(dim=1)
            torch.testing.assert_close(errors[b], manual, atol=1e-10, rtol=0)
            assert errors[b].mean().item() == pytest.approx(
                recall_error(keys[b], values[b], "delta", beta=beta), abs=1e-10)


def test_delta_recall_errors_edge_cases():
    gen = torch.Generator().manual_seed(4)
    keys, values = associative_pairs(6, 6, orthogonal=True, generator=gen)
    exact = delta_recall_errors_by_pair(keys[None], values[None], beta=1.0)
    assert exact.max() < 1e-12  # orthonormal keys: everything is stored exactly
    nothing = delta_recall_errors_by_pair(keys[None], values[None], beta=0.0)
    torch.testing.assert_close(nothing, torch.ones_like(nothing))  # β = 0 writes nothing


@pytest.mark.parametrize("bad", [-0.5, 2.5, True, "1"])
def test_delta_recall_errors_rejects_beta(bad):
    keys, values = torch.randn(1, 3, 4, dtype=torch.float64), torch.randn(1, 3, 4,
                                                                         dtype=torch.float64)
    with pytest.raises(ValueError, match="beta"):
        delta_recall_errors_by_pair(keys, values, beta=bad)


def test_delta_recall_errors_rejects_shapes():
    with pytest.raises(ValueError, match="keys"):
        delta_recall_errors_by_pair(torch.randn(3, 4), torch.randn(3, 4))
    with pytest.raises(ValueError, match="values"):
        delta_recall_errors_by_pair(torch.randn(1, 3, 4), torch.randn(1, 2, 4))


# ---------------------------------------------------------------- the document-switch stream


def small_stream(n_overwrite=2, n_sequences=3, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return document_switch_stream(20, 4, n_overwrite, 8, n_sequences=n_sequences, generator=gen)


def test_document_switch_stream_layout():
    stream = small_stream()
    assert stream.keys.shape == (3, 26, 8) and stream.values.shape == (3, 26, 8)
    assert stream.boundary == 20
    new_keys = stream.keys[:, 20:24]
    torch.testing.assert_close(new_keys @ new_keys.transpose(-1, -2),
                               torch.eye(4, dtype=torch.float64).expand(3, 4, 4))
    torch.testing.assert_close(stream.keys[:, 24:], new_keys[:, :2])  # overwritten keys again
    torch.testing.assert_close(stream.query_keys, new_keys)
    torch.testing.assert_close(stream.targets[:, :2], stream.values[:, 24:])  # latest values
    torch.testing.assert_close(stream.targets[:, 2:], stream.values[:, 22:24])
    torch.testing.assert_close(stream.keys.norm(dim=-1), torch.ones(3, 26, dtype=torch.float64))


@pytest.mark.parametrize(("name", "kwargs"), [
    ("n_new", {"n_new": 9}),
    ("n_overwrite", {"n_overwrite": 5}),
    ("n_overwrite", {"n_overwrite": -1}),
    ("n_old", {"n_old": 0}),
    ("generator", {"generator": 0}),
])
def test_document_switch_stream_rejects(name, kwargs):
    args = {"n_old": 20, "n_new": 4, "n_overwrite": 2, "dim": 8, "n_sequences": 2,
            "generator": torch.Generator().manual_seed(0), **kwargs}
    with pytest.raises(ValueError, match=name):
        document_switch_stream(**args)


def test_switch_stream_state_matches_recurrent_kernels():
    stream = small_stream()
    k, v = stream.keys[:, None], stream.values[:, None]
    g = torch.full(k.shape[:3], math.log(0.9), dtype=k.dtype)
    g[:, :, stream.boundary] = math.log(0.05)
    beta = torch.full(k.shape[:3], 0.7, dtype=k.dtype)
    _, gla = gla_recurrent(k, k, v, g=g, output_final_state=True)
    _, gdn = gated_delta_rule_recurrent(k, k, v, g=g, beta=beta, output_final_state=True)
    args = {"alpha_boundary": 0.05, "alpha": 0.9, "beta": 0.7}
    torch.testing.assert_close(switch_stream_state(stream, "gla", **args), gla[:, 0])
    torch.testing.assert_close(switch_stream_state(stream, "gdn", **args), gdn[:, 0])


def test_switch_stream_state_reductions():
    stream = small_stream()
    dn = switch_stream_state(stream, "deltanet", beta=0.6)
    open_gate = switch_stream_state(stream, "gdn", alpha_boundary=1.0, beta=0.6)
    torch.testing.assert_close(open_gate, dn)  # g = 0: Gated DeltaNet is DeltaNet
    torch.testing.assert_close(switch_stream_state(stream, "deltanet", alpha_boundary=0.1,
                                                   beta=0.6), dn)  # DeltaNet has no gate
    torch.testing.assert_close(switch_stream_state(stream, "gla", beta=0.2),
                               switch_stream_state(stream, "gla", beta=1.0))  # GLA has no β


def test_latest_value_errors_mechanisms():
    stream = small_stream(n_sequences=8)
    ideal = switch_stream_state(stream, "latest_only")
    assert max(latest_value_errors(stream, ideal)) < 1e-12
    assert min(latest_value_errors(stream, ideal, query_noise=0.5)) > 0.05
    # exact queries: the delta rule replaces the overwritten values exactly, with or without gate
    for mixer in ("deltanet", "gdn"):
        state = switch_stream_state(stream, mixer, alpha_boundary=0.01)
        assert max(latest_value_errors(stream, state)) < 1e-10
    # the scalar-gated additive state clears the old document but blends old and new values
    over, same = latest_value_errors(stream, switch_stream_state(stream, "gla",
                                                                 alpha_boundary=1e-4))
    assert over > 0.7 and same < 1e-3
    # approximate queries: DeltaNet picks up the old document, Gated DeltaNet does not
    dn = latest_value_errors(stream, switch_stream_state(stream, "deltanet"), query_noise=0.5)
    gdn = latest_value_errors(stream, switch_stream_state(stream, "gdn", alpha_boundary=1e-4),
                              query_noise=0.5)
    best = latest_value_errors(stream, ideal, query_noise=0.5)
    assert all(d > 1.3 * b for d, b in zip(dn, best, strict=True))
    assert all(abs(g - b) < 1e-3 for g, b in zip(gdn, best, strict=True))


def test_latest_value_errors_empty_group_is_nan():
    stream = small_stream(n_overwrite=0)
    over, same = latest_value_errors(stream, switch_stream_state(stream, "latest_only"))
    assert math.isnan(over) and same < 1e-12


@pytest.mark.parametrize(("name", "kwargs"), [
    ("mixer", {"mixer": "mamba"}),
    ("alpha_boundary", {"alpha_boundary": 0.0}),
    ("alpha_boundary", {"alpha_boundary": 1.5}),
    ("alpha", {"alpha": -0.1}),
    ("beta", {"beta": 2.5}),
])
def test_switch_stream_state_rejects(name, kwargs):
    args = {"mixer": "gdn", **kwargs}
    with pytest.raises(ValueError, match=name):
        switch_stream_state(small_stream(), **args)


def test_latest_value_errors_rejects():
    stream = small_stream()
    state = switch_stream_state(stream, "gdn")
    with pytest.raises(ValueError, match="query_noise"):
        latest_value_errors(stream, state, query_noise=-0.1)
    with pytest.raises(ValueError, match="state"):
        latest_value_errors(stream, state[:, :4])


def test_switch_mixers_listed():
    assert set(SWITCH_MIXERS) == {"gla", "deltanet", "gdn", "latest_only"}
