"""Tests of Lessons 13–14's figures (attnbook.figures.l13_chunkwise_delta_rule, l14_kda; data in
attnbook.demos.chunk_kda and attnbook.demos.transitions) and the computations they added: the
literal product of the delta rule's transition matrices against the UT transform, the delta
rule's cost model (attnbook.costs), and KDA's per-channel retention. The kernels themselves
(ut_transform, kda_parallel, …) are tested in test_delta.py and test_kda.py."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from attnbook.costs import delta_rule_cost
from attnbook.demos import chunk_kda as ck
from attnbook.demos.transitions import transition_product
from attnbook.figures import l13_chunkwise_delta_rule as l13
from attnbook.figures import l14_kda as l14
from attnbook.plotting import figure_png, new_figure
from attnlab.delta import delta_rule_chunk_reference, ut_transform
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils.flop_counter import FlopCounterMode


def chunk_inputs(seed, b=1, h=2, c=7, dk=5, dv=3, beta_scale=1.0):
    gen = torch.Generator().manual_seed(seed)
    k = F.normalize(torch.randn(b, h, c, dk, generator=gen, dtype=torch.float64), dim=-1)
    v = torch.randn(b, h, c, dv, generator=gen, dtype=torch.float64)
    beta = beta_scale * torch.rand(b, h, c, generator=gen, dtype=torch.float64)
    q = torch.randn(b, h, c, dk, generator=gen, dtype=torch.float64)
    s0 = torch.randn(b, h, dk, dv, generator=gen, dtype=torch.float64)
    g = -torch.rand(b, h, c, dk, generator=gen, dtype=torch.float64)
    return q, k, v, beta, s0, g


# ---------------------------------------------------------------- the literal product (demos)
@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), c=st.integers(1, 20), dk=st.integers(1, 9),
       beta_scale=st.sampled_from([0.0, 1.0, 2.0]))
def test_wy_identity_product_equals_identity_minus_kt_w(seed, c, dk, beta_scale):
    _, k, v, beta, _, _ = chunk_inputs(seed, c=c, dk=dk, beta_scale=beta_scale)
    w, _ = ut_transform(k, v, beta=beta)
    product = transition_product(k, beta=beta)
    eye = torch.eye(dk, dtype=k.dtype)
    assert w.shape == k.shape
    assert (product - (eye - k.mT @ w)).abs().max() < 1e-12


def test_transition_product_literal_small_case():
    k = torch.tensor([[[[1.0, 0.0], [0.0, 1.0]]]], dtype=torch.float64)
    beta = torch.tensor([[[1.0, 0.5]]], dtype=torch.float64)
    expected = torch.tensor([[0.0, 0.0], [0.0, 0.5]], dtype=torch.float64)
    assert torch.equal(transition_product(k, beta=beta)[0, 0], expected)


def test_transition_functions_refuse_bad_inputs():
    _, k, _, beta, _, _ = chunk_inputs(0)
    with pytest.raises(ValueError, match="beta"):
        transition_product(k, beta=beta[:, :, :2])
    with pytest.raises(ValueError, match="beta"):
        transition_product(k, beta=-beta)


# ---------------------------------------------------------------- cost model
def test_delta_rule_cost_formulas():
    rec = delta_rule_cost("recurrent", 4096, 96)
    assert (rec.intra_flops, rec.inter_flops, rec.sequential_steps) == (0, 6 * 4096 * 96**2,
                                                                        4096)
    chunk = delta_rule_cost("chunk", 4096, 96, 64)
    assert chunk.sequential_steps == 64
    assert chunk.inter_flops == rec.inter_flops  # the state work is the recurrent work again
    assert chunk.intra_flops == 64 * (8 * 64 * 64 - 2 * 64) * 96
    assert chunk.intra_flops / chunk.inter_flops == pytest.approx((8 * 64 - 2) / (6 * 96))
    assert chunk.flops == chunk.intra_flops + chunk.inter_flops
    padded = delta_rule_cost("chunk", 100, 8, 64)  # 2 chunks, the last one padded
    assert padded.sequential_steps == 2 and padded.inter_flops == 6 * 128 * 64
    one = delta_rule_cost("chunk", 10, 4, 1)
    assert one.intra_flops == 10 * 6 * 4 and one.sequential_steps == 10


@pytest.mark.parametrize(("t", "c", "d"), [(128, 32, 8), (64, 64, 16), (12, 1, 4)])
def test_delta_rule_cost_counts_what_the_reference_runs(monkeypatch, t, c, d):
    """Every operation of delta_rule_chunk_reference counted: torch's FLOP counter sees its
    matrix products, and each triangular solve is counted as forward substitution does it
    (unit diagonal: one multiply-add per strictly-lower entry and right-hand-side column)."""
    solved = []
    solve = torch.linalg.solve_triangular

    def counted_solve(a, b, **kwargs):
        rows = a.shape[-1]
        solved.append(b.numel() // rows * rows * (rows - 1))  # 2 · C(C − 1)/2 · columns
        return solve(a, b, **kwargs)

    monkeypatch.setattr(torch.linalg, "solve_triangular", counted_solve)
    q, k, v = (torch.randn(1, 2, t, d, dtype=torch.float64) for _ in range(3))
    beta = torch.rand(1, 2, t, dtype=torch.float64)
    with FlopCounterMode(display=False) as counter:
        delta_rule_chunk_reference(q, F.normalize(k, dim=-1), v, beta=beta, chunk_size=c)
    assert len(solved) == 2 * (t // c)  # two solves per chunk: W and U
    per_head = (counter.get_total_flops() + sum(solved)) / 2
    assert per_head == delta_rule_cost("chunk", t, d, c).flops


@pytest.mark.parametrize(("kwargs", "name"), [
    (dict(form="parallel", length=8, head_dim=4), "form"),
    (dict(form="chunk", length=0, head_dim=4), "length"),
    (dict(form="chunk", length=8, head_dim=2.0), "head_dim"),
    (dict(form="chunk", length=8, head_dim=4, chunk_size=True), "chunk_size"),
])
def test_delta_rule_cost_refuses_bad_inputs(kwargs, name):
    with pytest.raises(ValueError, match=name):
        delta_rule_cost(**kwargs)


# ---------------------------------------------------------------- per-channel retention (demos)
def test_retention_is_pure_decay_without_later_writes():
    """With β = 0 nothing is erased: channel d keeps α_d^t of the old association."""
    demo = ck.retention_demo(2.0, 0.0)
    steps = torch.arange(ck.RETENTION_STEPS + 1, dtype=torch.float64)[:, None]
    expected = torch.exp(steps * demo["log_gates"])
    assert (demo["retention"] - expected).abs().max() < 1e-12


def test_retention_refuses_bad_inputs():
    states = torch.zeros(1, 1, 3, 4, 2, dtype=torch.float64)
    key, value = torch.ones(1, 1, 4, dtype=torch.float64), torch.ones(1, 1, 2, dtype=torch.float64)
    with pytest.raises(ValueError, match="key"):
        ck.association_retention(states, key * 0, value)
    with pytest.raises(ValueError, match="value"):
        ck.association_retention(states, key, value * 0)
    with pytest.raises(ValueError, match="key"):
        ck.association_retention(states, key[..., :3], value)
    with pytest.raises(ValueError, match="states"):
        ck.association_retention(states[0], key, value)


# ---------------------------------------------------------------- figure helpers
def test_channel_log_gates_spread_and_mean_half_life():
    same = ck.channel_log_gates(16, 16.0, 0.0)
    assert torch.allclose(same, torch.full((16,), -math.log(2) / 16, dtype=torch.float64))
    spread = ck.channel_log_gates(16, 16.0, 2.0)
    half_lives = -math.log(2) / spread
    assert half_lives[0] == pytest.approx(4.0) and half_lives[-1] == pytest.approx(64.0)
    assert (spread <= 0).all() and (spread.diff() > 0).all()  # channel 0 forgets fastest
    with pytest.raises(ValueError, match="spread"):
        ck.channel_log_gates(16, 16.0, -1.0)


def test_retention_demo_shared_gate_equals_per_channel_at_zero_spread():
    demo = ck.retention_demo(0.0, 0.1)
    assert torch.allclose(demo["recall"], demo["recall_shared"], atol=1e-12)
    assert demo["retention"].shape == (ck.RETENTION_STEPS + 1, ck.RETENTION_CHANNELS)
    assert torch.allclose(demo["retention"][0], torch.ones(ck.RETENTION_CHANNELS,
                                                            dtype=torch.float64))
    wide = ck.retention_demo(4.0, 0.0)
    assert wide["recall"][32] > wide["recall_shared"][32]  # Jensen: mean of exps ≥ exp of mean
    with pytest.raises(ValueError, match="write_strength"):
        ck.retention_demo(1.0, 1.5)


# ---------------------------------------------------------------- figures
@pytest.mark.parametrize("n_factors", [1, 4, 16])
def test_draw_wy_identity(n_factors):
    fig = new_figure(9, 3.4)
    l13.draw_wy_identity(fig, n_factors=n_factors)
    assert "max |diff|" in fig.axes[1].get_title()


@pytest.mark.parametrize("bad", [0, 17, 2.0, True])
def test_draw_wy_identity_rejects_bad_sizes(bad):
    with pytest.raises(ValueError, match="n_factors"):
        l13.draw_wy_identity(new_figure(), n_factors=bad)


@pytest.mark.parametrize("chunk_size", [l13.CHUNK_SIZES[0], 16, l13.CHUNK_SIZES[-1]])
def test_draw_chunk_split(chunk_size):
    fig = new_figure(9, 3.8)
    l13.draw_chunk_split(fig, chunk_size=chunk_size)
    steps = delta_rule_cost("chunk", 4096, 64, chunk_size).sequential_steps
    titles = " ".join(ax.get_title() for ax in fig.axes)
    assert f"{steps:,} sequential steps" in titles


@pytest.mark.parametrize("chunk_size", [1, 16, 128])
def test_draw_chunk_split_draws_the_cost_model_and_the_blocks(chunk_size):
    fig = new_figure(9, 3.8)
    l13.draw_chunk_split(fig, chunk_size=chunk_size)
    ax_mat, ax_flops = fig.axes  # the colour scale sits in the matrix's empty upper triangle
    bars = [path for layer in ax_flops.collections[:2] for path in layer.get_paths()]
    n = len(l13.CHUNK_SIZES)
    assert len(bars) == 2 * n  # state work (bottom) then work inside chunks (top), per size
    for i, size in enumerate(l13.CHUNK_SIZES):
        cost = delta_rule_cost("chunk", 4096, 64, size)
        assert bars[i].vertices[:, 1].max() == pytest.approx(cost.inter_flops / 4096 / 1e3)
        assert bars[n + i].vertices[:, 1].max() == pytest.approx(cost.flops / 4096 / 1e3)
    picture = ax_mat.get_images()[0].get_array()
    t = ck.CHUNK_PICTURE_LENGTH
    assert picture.shape == (t, t, 4)
    grey = picture[t - 1, 0, :3]  # the first and the last token: in one chunk only if C >= T
    assert (tuple(grey) == (0xDD, 0xDD, 0xDD)) == (chunk_size < t)
    assert (picture[:, :, 3][torch.ones(t, t, dtype=torch.bool).triu().numpy()] == 0).all()
    assert any("inside a chunk" in text.get_text() for text in ax_mat.texts)
    assert figure_png(fig).startswith(b"\x89PNG")


def test_every_chunk_size_of_the_slider_changes_the_picture():
    pictures = []
    for size in l13.CHUNK_SIZES:
        fig = new_figure(9, 3.8)
        l13.draw_chunk_split(fig, chunk_size=size)
        pictures.append(fig.axes[0].get_images()[0].get_array())
    for before, after in enumerate(range(1, len(pictures))):
        assert (pictures[before] != pictures[after]).any(), l13.CHUNK_SIZES[after]


@pytest.mark.parametrize("bad", [0, -4, 3.5, "64"])
def test_draw_chunk_split_rejects_bad_chunk_size(bad):
    with pytest.raises(ValueError, match="chunk_size"):
        l13.draw_chunk_split(new_figure(), chunk_size=bad)


def measured():
    return dict(lengths=[256, 1024], recurrent_seconds=[0.05, 0.2], chunk_seconds=[0.004, 0.02],
                size_seconds={1: 0.5, 16: 0.03, 64: 0.02}, size_length=1024)


def test_draw_measured_times():
    fig = new_figure(9, 3.8)
    l13.draw_measured_times(fig, **measured())
    assert "C = 64" in fig.axes[1].get_title()
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert "12.5×" in texts and "10.0×" in texts


@pytest.mark.parametrize(("change", "name"), [
    (dict(lengths=[256]), "lengths"),
    (dict(chunk_seconds=[0.004]), "chunk_seconds"),
    (dict(recurrent_seconds=[0.05, 0.0]), "recurrent_seconds"),
    (dict(size_length=4096), "size_length"),
    (dict(size_seconds={16: 0.03}), "size_seconds"),
])
def test_draw_measured_times_rejects_bad_inputs(change, name):
    with pytest.raises(ValueError, match=name):
        l13.draw_measured_times(new_figure(), **{**measured(), **change})


def test_draw_decay_then_correct():
    fig = new_figure(9, 3.3)
    l14.draw_decay_then_correct(fig)
    assert len(fig.axes) == 4  # three heat maps and one colour bar
    with pytest.raises(ValueError, match="head_dim"):
        l14.draw_decay_then_correct(new_figure(), head_dim=1)


@pytest.mark.parametrize(("spread", "write_strength"), [
    (2.0, 0.1), (l14.SPREADS[0], l14.WRITE_STRENGTHS[0]),
    (l14.SPREADS[-1], l14.WRITE_STRENGTHS[-1]), (l14.SPREADS[0], l14.WRITE_STRENGTHS[-1]),
])
def test_draw_channel_retention(spread, write_strength):
    fig = new_figure(10, 4)
    l14.draw_channel_retention(fig, spread=spread, write_strength=write_strength)
    assert any("shared" in ax.get_title() for ax in fig.axes)


def test_draw_channel_retention_scale_and_keys():
    fig = new_figure(10, 4)
    l14.draw_channel_retention(fig, spread=2.0, write_strength=0.1)
    ax_map, ax_recall = fig.axes  # the colour scale is drawn by the heat map's axes
    demo = ck.retention_demo(2.0, 0.1)
    assert ax_map.get_images()[0].get_array().shape == (*demo["retention"].T.shape, 4)
    texts = [t.get_text() for t in ax_map.texts]
    assert "share of k₀v₀ᵀ left in the channel" in texts and {"0", "0.5", "1"} <= set(texts)
    keys = [t.get_text() for t in ax_recall.texts]
    assert any("one gate per channel" in k for k in keys) and any("shared" in k for k in keys)
    assert torch.allclose(torch.as_tensor(ax_recall.lines[0].get_ydata()), demo["recall"])
    assert figure_png(fig).startswith(b"\x89PNG")


@pytest.mark.parametrize(("kwargs", "name"), [
    (dict(spread=-0.5, write_strength=0.1), "spread"),
    (dict(spread=1.0, write_strength=-0.1), "write_strength"),
    (dict(spread="wide", write_strength=0.1), "spread"),
])
def test_draw_channel_retention_rejects_bad_values(kwargs, name):
    with pytest.raises(ValueError, match=name):
        l14.draw_channel_retention(new_figure(), **kwargs)


# ---------------------------------------------------------------- facts of two lifetimes (L14)
def test_lifetime_stream_keeps_the_two_groups_in_their_own_channels():
    from attnbook.demos import channel_lifetimes as cl
    keys, values, queries, targets = cl.lifetime_stream(0, n_sequences=3)
    long_keys, short_keys = keys[:, :cl.N_LONG], keys[:, cl.N_LONG:]
    assert short_keys.shape[1] == cl.N_SHORT_WRITES
    eye = torch.eye(cl.N_LONG, dtype=torch.float64).expand(3, -1, -1)
    assert (long_keys @ long_keys.mT - eye).abs().max() < 1e-12  # orthonormal
    assert long_keys[..., cl.N_LONG:].abs().max() == 0  # only in the long channels
    assert short_keys[..., :cl.N_LONG].abs().max() == 0  # only in the short channels
    assert torch.allclose(keys.norm(dim=-1), torch.ones(3, keys.shape[1], dtype=torch.float64))
    assert queries.shape == (3, cl.N_LONG + cl.N_RECENT, cl.DK)
    assert torch.equal(targets, torch.cat([values[:, :cl.N_LONG],
                                           values[:, -cl.N_RECENT:]], dim=1))
    noise = (queries - torch.cat([long_keys, keys[:, -cl.N_RECENT:]], dim=1)).norm(dim=-1)
    assert torch.allclose(noise, torch.full_like(noise, cl.NOISE))


def test_lifetime_errors_diagonal_is_gated_deltanet():
    """The per-channel grid's diagonal is one decay per head: Gated DeltaNet's numbers."""
    from attnbook.demos import channel_lifetimes as cl
    from attnlab.delta import gated_delta_rule_recurrent
    errors = cl.lifetime_errors(1, n_sequences=4)
    assert errors.shape == (2, len(cl.GRID), len(cl.GRID))
    keys, values, queries, targets = cl.lifetime_stream(1, n_sequences=4)
    i = cl.GRID.index(0.9)
    k, v = keys[:, None], values[:, None]
    g = torch.full(k.shape[:3], math.log(0.9), dtype=torch.float64)
    _, state = gated_delta_rule_recurrent(k, k, v, g=g, beta=torch.ones_like(g),
                                          output_final_state=True)
    reads = torch.einsum("nkv,nrk->nrv", state[:, 0], queries)
    error = (reads - targets).norm(dim=-1)
    expected = torch.stack([error[:, :cl.N_LONG].mean(-1), error[:, cl.N_LONG:].mean(-1)])
    assert torch.allclose(errors[:, i, i], expected.mean(1), atol=1e-12)


def test_lifetime_experiment_tunes_each_kind_on_its_grid():
    from attnbook.demos import channel_lifetimes as cl
    result = cl.lifetime_experiment(seeds=(2,))
    (row,) = result["rows"]
    assert row["head_score"] == pytest.approx(row["head_curve"].min().item())
    # the per-head decays are among the per-channel pairs, so the tuned pair is never worse
    assert row["channel_score"] <= row["head_score"]
    assert row["head_alpha"] in cl.GRID and set(row["channel_alpha"]) <= set(cl.GRID)
    assert sum(row["channel_groups"]) / 2 == pytest.approx(row["channel_score"])


def test_lifetime_stream_refuses_bad_inputs():
    from attnbook.demos import channel_lifetimes as cl
    with pytest.raises(ValueError, match="n_sequences"):
        cl.lifetime_stream(0, n_sequences=0)
    with pytest.raises(ValueError, match="seed"):
        cl.lifetime_stream(-1)


def test_draw_channel_lifetimes_and_its_alt_text():
    from attnbook.demos import channel_lifetimes as cl
    result = cl.lifetime_experiment(seeds=(0,))
    fig = new_figure(6.4, 3.2)
    l14.draw_channel_lifetimes(fig, result)
    assert figure_png(fig)[:4] == b"\x89PNG"
    (ax,) = fig.axes
    assert len(ax.get_xticklabels()) == len(cl.GRID)
    alt = l14.channel_lifetimes_alt(result)
    best = cl.GRID[int(result["rows"][0]["head_curve"].argmin())]
    assert f"lowest point is at {best:g}" in alt and "1 seeds" in alt
# ---------------------------------------------------------------- sizing a chunk for a GPU (demos)
def test_a_gpu_chunk_counts_its_bytes_and_flops():
    from attnbook.demos import chunk_sizing as gpu

    assert gpu.chunk_hbm_bytes(64, 128) == (4 * 64 * 128 + 64) * 2
    parts = gpu.chunk_on_chip_bytes(64, 128)
    assert sum(parts.values()) == 3 * 64 * 128 * 2 + 128 * 128 * 4 + 2 * 64 * 64 * 4 \
        + 2 * 64 * 128 * 4
    assert sum(parts.values()) <= gpu.H100_SXM.shared_kb_per_block * 1024
    assert sum(gpu.chunk_on_chip_bytes(128, 128).values()) > 227 * 1024
    assert gpu.chunk_flops(64, 128) == delta_rule_cost("chunk", 64, 128, 64).flops
    with pytest.raises(ValueError, match="chunk_size"):
        gpu.chunk_hbm_bytes(0, 8)


def test_a_bf16_solve_loses_more_than_storing_in_bf16_and_fp32_almost_nothing():
    from attnbook.demos import chunk_sizing as gpu

    for seed in range(3):
        stored = gpu.stored_error(16, 32, seed)
        assert gpu.solve_error(torch.bfloat16, 16, 32, seed) > stored > 1e-4
        assert gpu.solve_error(torch.float32, 16, 32, seed) < 1e-5


# ---------------------------------------------------------------- Lesson 13: the Chinese edition
def test_lesson13_figures_and_alt_text_speak_chinese_with_the_same_numbers():
    from attnlab.i18n import language

    with language("zh_CN"):
        fig = new_figure(6.4, 6)
        l13.draw_chunk_split(fig, chunk_size=16)
        assert fig.axes[0].get_title() == "C = 16：8 次 16 × 16 求解"
        assert "256 个串行步" in fig.axes[1].get_title()
        alt = l13.chunk_split_alt(16)
        assert alt.startswith("上方：一个 128 × 128 的下三角") and "块大小 16 的柱子" in alt
    # outside the block: English again, word for word what the notebook used to write
    assert l13.chunk_split_alt(16) == (
        "Top: a 128-by-128 lower triangle with 8 diagonal block(s) of size 16 coloured by the "
        "size of beta k_i^T k_j and the rest grey. Bottom: stacked bars of kFLOP per token for "
        "chunk sizes 1 to 128: constant work with the state at the bottom, intra-chunk work on "
        "top growing with the chunk size, the recurrent total as a dashed line at the height of "
        "the state work, and the bar for chunk size 16 highlighted."
    )
    sizes = {1: 0.05, 64: 0.01, 256: 0.02}
    assert l13.measured_times_alt([256, 4096], [0.2, 4.0], [0.1, 0.5], sizes, 256) == (
        "Two log-scale plots of measured time. Left: time per sequence against sequence length "
        "256, 4,096 for the recurrent and the chunkwise delta rule; the speed-ups written at "
        "each length are 2.0x, 8.0x. Right: chunkwise time at 256 tokens against chunk size "
        "from 1 to 256, slowest at chunk size 1 and fastest at 64, with the recurrent time "
        "dashed."
    )


# ---------------------------------------------------------------- Lesson 14: the Chinese edition
def test_lesson14_figures_and_alt_text_speak_chinese_with_the_same_numbers():
    from attnlab.i18n import language

    with language("zh_CN"):
        fig = new_figure(6.4, 6)
        l14.draw_channel_retention(fig, spread=2.0, write_strength=0.1)
        ax_map, ax_recall = fig.axes
        assert ax_map.get_title() == "半衰期跨度 ±2 个倍频程，之后写入的 β = 0.1"
        assert ax_recall.get_title().startswith("32 个 Token 后：")
        fig = new_figure(6.4, 3)
        l14.draw_decay_then_correct(fig)
        assert "$" not in " ".join(ax.get_title() for ax in fig.axes)  # mathtext has no CJK
        assert l14.decay_then_correct_alt().startswith("一个玩具状态的三张 8×8 热力图")
        assert "向两侧各跨 3 个倍频程" in l14.channel_retention_alt(3.0, 0.3)
    # outside the block: English again, word for word what the notebook used to write
    assert l14.decay_then_correct_alt() == (
        "Three 8-by-8 heat maps of a toy state. Left: the state before the step. "
        "Middle: after the per-channel decay; each row is scaled by its own alpha, from 0.20 "
        "at the top to 1.00 at the bottom, so the top rows fade most. Right: after the "
        "delta-rule write with beta 1, a rank-one change that spreads over all rows."
    )
    assert l14.channel_retention_alt(3.0, 0.3) == (
        "Top: heat map of 16 key channels against 64 tokens showing the "
        "share of an old association left in each channel, with half-lives "
        "spread plus or minus 3 octaves around 16 tokens and later "
        "writes of strength 0.3; slow channels keep it "
        "longer. Bottom: recall of the old value by its key over time, with "
        "per-channel gates and with one shared gate of the same mean "
        "log-decay."
    )
