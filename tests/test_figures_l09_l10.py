"""Tests of Lessons 9–10's figures (l09_fixed_state_memory, l10_gates; data in
attnbook.demos.state_memory, which the recall helpers of attnbook.demos.associative_memory feed):
capacity and forgetting curves, pair weights and memory horizons."""

from __future__ import annotations

import math

import pytest
import torch
from attnbook.demos import state_memory as mem
from attnbook.demos.associative_memory import (
    associative_pairs,
    expected_crosstalk,
    recall_errors_by_pair,
)
from attnbook.figures import l09_fixed_state_memory as l09
from attnbook.figures import l10_gates as l10
from attnbook.plotting import new_figure
from attnlab.gated import retnet_decay


def gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


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
    horizons = mem.effective_horizon(retnet_decay(16, dtype=torch.float64))
    torch.testing.assert_close(horizons, 2.0 ** torch.arange(5, 21, dtype=torch.float64))


def test_effective_horizon():
    assert mem.effective_horizon(math.log(0.5)).item() == pytest.approx(2.0)
    horizons = mem.effective_horizon(retnet_decay(3, dtype=torch.float64))
    assert horizons.tolist() == pytest.approx([32.0, 64.0, 128.0])
    assert mem.effective_horizon(torch.tensor(0.0)).item() == math.inf
    with pytest.raises(ValueError, match="g"):
        mem.effective_horizon(0.1)


def test_the_gate_heat_maps_label_whole_channels_only():
    from attnbook.figures import l10_gates

    fig = new_figure(6.4, 3)
    l10_gates.draw_gate_kinds(fig)
    fig.canvas.draw()
    low, high = sorted(fig.axes[0].get_ylim())
    shown = [t for t in fig.axes[0].get_yticks() if low <= t <= high]
    assert shown and all(float(t).is_integer() for t in shown)


# ---------------------------------------------------------------- Lesson 10: the Chinese edition


def test_lesson10_figures_and_alt_text_speak_chinese_with_the_same_numbers():
    from attnlab.i18n import language

    english = l10.forgetting_alt(0.9375, 384)
    assert english == (
        "Relative recall error of each of 384 pairs against recency on a log axis, for decay "
        "0.9375 (horizon 16), with the fading-only curve and the no-decay curve in grey near "
        f"{expected_crosstalk(384, mem.FORGET_DIM):.1f}; "
        f"{mem.recalled_pairs(0.9375, 384)} pairs stay below 0.5."
    )
    with language("zh_CN"):
        assert l10.alpha_label(1.0) == "1（不衰减）"
        assert l10.alpha_label(0.9375) == "0.9375（记忆跨度 16）"
        fig = new_figure(6.4, 3.8)
        l10.draw_forgetting(fig, alpha=0.9375, length=384)
        title = fig.axes[0].get_title()
        assert title.startswith("384 对写入一个 96 × 96 的状态：")
        assert title.endswith(f"{mem.recalled_pairs(0.9375, 384)} 对读回误差 < 0.5")
        fig = new_figure(6.4, 3)
        l10.draw_gate_kinds(fig)
        assert fig.axes[0].get_title() == "RetNet：\n每个头固定"
        alt = l10.forgetting_alt(0.9375, 384)
        assert "384 个键值对" in alt and "0.9375（记忆跨度 16）" in alt
        assert "48 个时间步" in l10.gate_kinds_alt()
