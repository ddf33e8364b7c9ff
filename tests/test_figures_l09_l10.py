"""Tests of Lessons 9–10's figures (l09_fixed_state_memory, l10_gates; data in
attnbook.demos.state_memory) and the computations they added to attnlab.tasks: per-pair recall
errors of (decayed) additive writes, their mean over draws, and the predicted crosstalk."""

from __future__ import annotations

import math

import pytest
import torch
from attnbook.demos import state_memory as mem
from attnbook.figures import l09_fixed_state_memory as l09
from attnbook.figures import l10_gates as l10
from attnbook.plotting import new_figure
from attnlab.gated import effective_horizon, retnet_decay
from attnlab.tasks import (
    associative_pairs,
    expected_crosstalk,
    mean_recall_error,
    recall_error,
    recall_errors_by_pair,
)


def gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def draws(n: int, dim: int, trials: int, seed: int = 0, orthogonal: bool = False):
    g = gen(seed)
    pairs = [associative_pairs(n, dim, orthogonal=orthogonal, generator=g) for _ in range(trials)]
    return torch.stack([k for k, _ in pairs]), torch.stack([v for _, v in pairs])


# ---------------------------------------------------------------- Lesson 9 figures


@pytest.mark.parametrize(("n_pairs", "dim"), [(8, 16), (1, 2), (64, 64)])
def test_draw_readout(n_pairs, dim):
    fig = new_figure(9, 3.4)
    l09.draw_readout(fig, n_pairs=n_pairs, dim=dim)
    orth, rand = fig.axes
    assert "relative error 0.00" in orth.get_title()
    assert "random unit keys" in rand.get_title()


def test_draw_readout_title_is_the_recall_error_of_pair_one():
    keys, values = associative_pairs(8, 16, orthogonal=False, generator=gen(0))
    expected = recall_errors_by_pair(keys[None], values[None])[0, 0, 0].item()
    fig = new_figure()
    l09.draw_readout(fig, n_pairs=8, dim=16, seed=0)
    assert f"relative error {expected:.2f}" in fig.axes[1].get_title()


@pytest.mark.parametrize(("kwargs", "name"), [({"n_pairs": 17, "dim": 16}, "n_pairs"),
                                              ({"n_pairs": 0}, "n_pairs"),
                                              ({"dim": 1}, "dim"),
                                              ({"dim": 16.0}, "dim"),
                                              ({"seed": -1}, "seed")])
def test_draw_readout_rejects(kwargs, name):
    with pytest.raises(ValueError, match=name):
        l09.draw_readout(new_figure(), **kwargs)


def test_draw_gram():
    fig = new_figure(10, 3.9)
    l09.draw_gram(fig, n_pairs=32, dims=(32, 96))
    titles = [ax.get_title() for ax in fig.axes[:3]]
    assert "orthonormal,\nd = 32" in titles[0] and "rms 0.00" in titles[0]
    assert "d = 96" in titles[2]
    assert len(fig.axes) == 4  # three heat maps and the colour bar


@pytest.mark.parametrize(("kwargs", "name"), [({"n_pairs": 40, "dims": (32,)}, "dims"),
                                              ({"dims": ()}, "dims"),
                                              ({"n_pairs": 1}, "n_pairs")])
def test_draw_gram_rejects(kwargs, name):
    with pytest.raises(ValueError, match=name):
        l09.draw_gram(new_figure(), **kwargs)


@pytest.mark.parametrize(("n_pairs", "dim"), [(48, 96), (4, 16), (4, 96), (256, 16), (256, 96)])
def test_draw_capacity_default_and_extremes(n_pairs, dim):
    fig = new_figure(8, 3.8)
    l09.draw_capacity(fig, n_pairs=n_pairs, dim=dim)
    (ax,) = fig.axes
    error = dict(mem.capacity_curve(dim, False))[n_pairs]
    assert f"N = {n_pairs} pairs in d = {dim}: error {error:.2f}" in ax.get_title()
    assert ax.get_xscale() == "log"


def test_draw_capacity_moves_the_n_equals_d_mark_and_the_curve_with_d():
    drawn = {}
    for dim in mem.CAPACITY_DIMS:
        fig = new_figure(6.4, 3.8)
        l09.draw_capacity(fig, n_pairs=48, dim=dim)
        (ax,) = fig.axes
        assert f"N = d = {dim}" in [t.get_text() for t in ax.texts]
        assert [float(x) for x in ax.lines[-2].get_xdata()] == [dim, dim]  # the N = d line
        drawn[dim] = list(ax.lines[0].get_ydata())
    assert drawn[16] != drawn[96]  # a larger d lowers the error at every N
    assert all(a > b for a, b in zip(drawn[16], drawn[96], strict=True))


@pytest.mark.parametrize(("kwargs", "name"), [({"n_pairs": 5}, "n_pairs"),
                                              ({"dim": 128}, "dim")])
def test_draw_capacity_rejects(kwargs, name):
    with pytest.raises(ValueError, match=name):
        l09.draw_capacity(new_figure(), **kwargs)


def test_capacity_curves_follow_the_prediction():
    for dim in (16, 96):
        for n, error in mem.capacity_curve(dim, False):
            assert error == pytest.approx(expected_crosstalk(n, dim), rel=0.15, abs=0.03)
        orth = mem.capacity_curve(dim, True)
        assert [n for n, _ in orth] == [n for n in mem.CAPACITY_PAIRS if n <= dim]
        assert max(e for _, e in orth) < 1e-12


# ---------------------------------------------------------------- Lesson 10 figures


@pytest.mark.parametrize(("alpha", "length"), [
    (1 - 2.0**-4, 384),  # the panel's default
    (mem.FORGET_ALPHAS[0], mem.FORGET_LENGTHS[0]),
    (mem.FORGET_ALPHAS[0], mem.FORGET_LENGTHS[-1]),
    (1.0, mem.FORGET_LENGTHS[0]),
    (1.0, mem.FORGET_LENGTHS[-1]),
])
def test_draw_forgetting_default_and_extremes(alpha, length):
    fig = new_figure(8, 3.8)
    l10.draw_forgetting(fig, alpha=alpha, length=length)
    (ax,) = fig.axes
    assert f"{mem.recalled_pairs(alpha, length)} read back" in ax.get_title()
    labels = {line.get_label() for line in ax.get_lines()}
    assert "no decay (α = 1)" in labels
    assert (f"decay α = {alpha:g}" in labels) == (alpha != 1.0)  # the decayed curve, if any
    decayed = [line for line in ax.get_lines() if line.get_label() == f"decay α = {alpha:g}"]
    for line in decayed:  # plotted newest first: the stream's errors, from the newest pair
        expected = mem.forgetting_errors(length)[mem.FORGET_ALPHAS.index(alpha)].flip(0)
        assert line.get_ydata() == pytest.approx(expected.numpy())


@pytest.mark.parametrize(("kwargs", "name"), [({"alpha": 0.9}, "alpha"),
                                              ({"length": 100}, "length")])
def test_draw_forgetting_rejects(kwargs, name):
    with pytest.raises(ValueError, match=name):
        l10.draw_forgetting(new_figure(), **kwargs)


def test_forgetting_frees_room_for_recent_pairs():
    length = 384
    without = mem.recalled_pairs(1.0, length)
    best = max(mem.recalled_pairs(a, length) for a in mem.FORGET_ALPHAS)
    assert without == 0 < best
    # with a decay, how many recent pairs are recalled hardly depends on the stream length
    a = 1 - 2.0**-4
    counts = [mem.recalled_pairs(a, n) for n in mem.FORGET_LENGTHS]
    assert max(counts) - min(counts) <= 2
    errors = mem.forgetting_errors(length)
    assert errors.shape == (len(mem.FORGET_ALPHAS), length)
    i = mem.FORGET_ALPHAS.index(a)
    assert errors[i, -1] < 0.5 < errors[i, 0]  # newest readable, oldest faded


def test_pair_weights_are_powers_of_alpha():
    w = mem.pair_weights(0.5, 4)
    torch.testing.assert_close(w, torch.tensor([0.125, 0.25, 0.5, 1.0], dtype=torch.float64))


@pytest.mark.parametrize(("alpha", "label"), [(1.0, "1 (no decay)"),
                                              (0.9375, "0.9375 (horizon 16)"),
                                              (0.75, "0.75 (horizon 4)")])
def test_alpha_label(alpha, label):
    assert l10.alpha_label(alpha) == label


def test_draw_gate_kinds():
    fig = new_figure(10, 3.4)
    l10.draw_gate_kinds(fig)
    assert [ax.get_title() for ax in fig.axes[:3]] == [
        "RetNet:\nfixed, per head", "Mamba-2:\nper step", "GLA: per step\nand channel"]
    retnet = fig.axes[0].get_images()[0].get_array()
    assert retnet.min() == retnet.max() == pytest.approx(128)  # head 2: 1 / 2^-7


@pytest.mark.parametrize(("kwargs", "name"), [({"length": 4}, "length"),
                                              ({"channels": 1}, "channels")])
def test_draw_gate_kinds_rejects(kwargs, name):
    with pytest.raises(ValueError, match=name):
        l10.draw_gate_kinds(new_figure(), **kwargs)


def test_retnet_horizons_for_sixteen_heads():
    horizons = effective_horizon(retnet_decay(16, dtype=torch.float64))
    torch.testing.assert_close(horizons, 2.0 ** torch.arange(5, 21, dtype=torch.float64))


# ---------------------------------------------------------------- tasks: recall errors by pair


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
