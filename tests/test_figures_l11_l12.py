"""Tests of Lessons 11 and 12's figures (l11_delta_rule, l12_gated_deltanet; data in
attnbook.demos.delta_rule). The recall and document-switch helpers they draw on are tested in
test_associative_memory.py."""

from __future__ import annotations

import pytest
import torch
from attnbook.demos import delta_rule as dr
from attnbook.figures import l11_delta_rule as l11
from attnbook.figures import l12_gated_deltanet as l12
from attnbook.plotting import new_figure

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


def test_switch_errors_default_ordering():
    """At the lesson's default setting Gated DeltaNet beats DeltaNet beats scalar-gated linear
    attention, and nearly matches a perfect memory of the current document."""
    n_over, n_new = dr.SWITCH_SETUP["n_overwrite"], dr.SWITCH_SETUP["n_new"]
    mean = {mixer: (over * n_over + same * (n_new - n_over)) / n_new
            for mixer, (over, same) in dr.switch_errors(0.01, 1.0, 0.5).items()}
    assert mean["gdn"] < mean["deltanet"] < mean["gla"]
    assert mean["gdn"] == pytest.approx(mean["latest_only"], abs=0.01)


def test_the_recall_legend_hides_no_point_of_the_curves():
    from attnbook.figures import l11_delta_rule

    fig = new_figure(6.4, 3)
    l11_delta_rule.draw_recall_vs_pairs(fig)
    fig.canvas.draw()
    left = fig.axes[0]
    box = left.get_legend().get_window_extent()
    for line in left.get_lines():
        for x, y in left.transData.transform(line.get_xydata()):
            assert not box.contains(x, y), line.get_label()


# ---------------------------------------------------------------- Lesson 11: the Chinese edition


def test_lesson11_figures_and_alt_text_speak_chinese_with_the_same_numbers():
    from attnlab.i18n import language

    assert l11.key_norm_alt(2.0, 1.0) == (
        "Output size over 48 tokens on a log scale for keys of length 2 and beta 1; the "
        "eigenvalue along k is -3.00, so the outputs grow geometrically; a grey dashed line "
        "shows unit keys."
    )
    assert l11.overwrite_alt(0.25).endswith("which equals 0.75 times old plus 0.25 times new.")
    with language("zh_CN"):
        fig = new_figure(6.4, 3.6)
        l11.draw_overwrite(fig, beta=0.25)
        assert fig.axes[0].get_title() == (
            "k₁ 换了新值后按 k₁ 读取：Delta 规则 = 0.75·旧 + 0.25·新"
        )
        fig = new_figure(6.4, 3.6)
        l11.draw_key_norm_stability(fig, key_norm=1.0, beta=1.0)
        assert fig.axes[0].get_title().endswith("= 0.00  →  稳定")
        assert "输出保持有界" in l11.key_norm_alt(1.0, 1.0)
        assert "按几何级数增长" in l11.key_norm_alt(4.0, 1.0)
        assert "0.75 倍旧值加 0.25 倍新值" in l11.overwrite_alt(0.25)
