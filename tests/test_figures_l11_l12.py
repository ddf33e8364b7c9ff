"""Tests of Lessons 11 and 12's figures (l11_delta_rule, l12_gated_deltanet; data in
attnbook.demos.delta_rule) and of the computations they added to attnlab.tasks: per-pair recall of
the delta rule, and the document-switch stream."""

from __future__ import annotations

import math

import pytest
import torch
from attnbook.demos import delta_rule as dr
from attnbook.figures import l11_delta_rule as l11
from attnbook.figures import l12_gated_deltanet as l12
from attnbook.plotting import new_figure
from attnlab import gated_delta_rule_recurrent, gla_recurrent
from attnlab.tasks import (
    SWITCH_MIXERS,
    associative_pairs,
    delta_recall_errors_by_pair,
    document_switch_stream,
    latest_value_errors,
    recall_error,
    switch_stream_state,
    write_state,
)

# ---------------------------------------------------------------- Lesson 11 figures


@pytest.mark.parametrize("beta", [0.0, 0.5, 1.0, 1.75])
def test_draw_overwrite_draws(beta):
    fig = new_figure(7.5, 3.6)
    l11.draw_overwrite(fig, beta=beta)
    assert f"{1 - beta:.2f}·old + {beta:.2f}·new" in fig.axes[0].get_title()


@pytest.mark.parametrize("bad", [-0.1, 2.5, "1", True, None])
def test_draw_overwrite_rejects_beta(bad):
    with pytest.raises(ValueError, match="beta"):
        l11.draw_overwrite(new_figure(), beta=bad)


@pytest.mark.parametrize("beta", [0.0, 0.3, 1.0, 1.5])
def test_overwrite_example_is_convex_mix(beta):
    reads = dr.overwrite_example(beta)
    expected = (1 - beta) * reads["old"] + beta * reads["new"]
    torch.testing.assert_close(reads["delta"], expected, atol=1e-12, rtol=0)
    torch.testing.assert_close(reads["additive"], reads["old"] + reads["new"], atol=1e-12, rtol=0)


@pytest.mark.parametrize(("key_norm", "beta"), [(0.5, 0.25), (1.0, 1.0), (2.0, 1.0), (4.0, 1.5)])
def test_draw_key_norm_stability_draws(key_norm, beta):
    fig = new_figure()
    l11.draw_key_norm_stability(fig, key_norm=key_norm, beta=beta)
    title = fig.axes[0].get_title()
    assert f"{1 - beta * key_norm**2:.2f}" in title
    assert ("grows" in title) == (abs(1 - beta * key_norm**2) > 1)


@pytest.mark.parametrize(("name", "kwargs"), [("key_norm", {"key_norm": -1.0}),
                                               ("key_norm", {"key_norm": "2"}),
                                               ("beta", {"beta": 2.5}),
                                               ("beta", {"beta": -0.5})])
def test_draw_key_norm_stability_rejects(name, kwargs):
    values = {"key_norm": 1.0, "beta": 1.0, **kwargs}
    with pytest.raises(ValueError, match=name):
        l11.draw_key_norm_stability(new_figure(), **values)


def test_output_norms_stable_only_inside_the_eigenvalue_bound():
    unit = dr.output_norms(1.0, 1.0)
    raw = dr.output_norms(4.0, 1.0)  # eigenvalue 1 − 16 = −15 along each key
    assert unit.max() < 10
    assert raw[-1] > 1e10
    assert torch.isfinite(raw).all()


def test_draw_recall_vs_pairs_draws():
    fig = new_figure(9.5, 3.6)
    l11.draw_recall_vs_pairs(fig)
    assert len(fig.axes) == 2


def test_recall_curves_delta_beats_additive_and_keeps_the_newest():
    curves = dr.recall_curves()
    assert all(d < a for a, d in zip(curves["add"], curves["delta"], strict=True))
    assert max(curves["orth_add"]) < 1e-12  # orthonormal keys up to N = d: perfect recall
    pos = curves["by_position"]
    assert pos["n"] == 2 * dr.RECALL_DIM
    assert pos["delta"][-1] < 1e-12  # the last pair written is read back exactly
    assert pos["delta"][0] > 0.8  # the oldest pairs are overwritten


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


# ---------------------------------------------------------------- Lesson 12 figures


def test_draw_switch_stream_draws():
    fig = new_figure(9.5, 2.6)
    l12.draw_switch_stream(fig)
    assert "stream" in fig.axes[0].get_title()


@pytest.mark.parametrize(("alpha_boundary", "beta", "query_noise"),
                         [(0.01, 1.0, 0.5), (1.0, 0.5, 0.0), (0.01, 0.5, 0.0), (1.0, 1.0, 0.5)])
def test_draw_switch_errors_draws(alpha_boundary, beta, query_noise):
    fig = new_figure()
    l12.draw_switch_errors(fig, alpha_boundary=alpha_boundary, beta=beta,
                            query_noise=query_noise)
    ax = fig.axes[0]
    assert f"α_b = {alpha_boundary:g}" in ax.get_title()
    errors = dr.switch_errors(alpha_boundary, beta, query_noise)
    shown = sorted(t.get_text() for t in ax.texts)  # every bar is labelled with its value
    assert shown == sorted(f"{e:.2f}" + (" ↑" if e > 1.3 else "")
                           for name in dr.SWITCH_NAMES for e in errors[name][:2])


@pytest.mark.parametrize(("name", "kwargs"), [("alpha_boundary", {"alpha_boundary": 0.0}),
                                               ("alpha_boundary", {"alpha_boundary": 2.0}),
                                               ("beta", {"beta": -1.0}),
                                               ("query_noise", {"query_noise": -0.5})])
def test_draw_switch_errors_rejects(name, kwargs):
    values = {"alpha_boundary": 0.01, "beta": 1.0, "query_noise": 0.5, **kwargs}
    with pytest.raises(ValueError, match=name):
        l12.draw_switch_errors(new_figure(), **values)


def test_switch_error_table_default_ordering():
    table = dr.switch_error_table()
    assert table["gdn"] < table["deltanet"] < table["gla"]
    assert table["gdn"] == pytest.approx(table["latest_only"], abs=0.01)
