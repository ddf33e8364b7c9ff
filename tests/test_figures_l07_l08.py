"""Tests of Lessons 7 and 8's figures (l07_linear_attention, l08_three_forms; data in
attnbook.demos) and the computations they added: the cost model of the three forms and their
timer."""

from __future__ import annotations

import itertools

import pytest
import torch
from attnbook.costs import LINEAR_FORMS, linear_attention_cost
from attnbook.demos import calculators as calc
from attnbook.demos import linear_state as lin
from attnbook.figures import l07_linear_attention as l07
from attnbook.figures import l08_three_forms as l08
from attnbook.plotting import figure_png, new_figure
from attnlab.configs import SOPHIA
from attnlab.linear import linear_attention_chunk, linear_attention_parallel
from attnlab.memory import as_all_attention, cache_breakdown, format_bytes
from torch.utils.flop_counter import FlopCounterMode

# ---------------------------------------------------------------- Lesson 7: cache and state

T_GRID = [1, 2, 3, 4, 6, 8, 12, 16]


@pytest.mark.parametrize("t", [8, T_GRID[0], T_GRID[-1]])
def test_draw_cache_and_state_draws(t):
    fig = new_figure(8, 3.6)
    l07.draw_cache_and_state(fig, t=t)
    cache_title, state_title = (ax.get_title() for ax in fig.axes[:2])
    assert f"{2 * t * lin.DEMO_DIM} numbers (grows)" in cache_title
    assert f"{lin.DEMO_DIM**2} numbers (fixed)" in state_title


@pytest.mark.parametrize("bad", [0, lin.DEMO_STEPS + 1, 2.0, True, "3"])
def test_draw_cache_and_state_rejects_bad_t(bad):
    with pytest.raises(ValueError, match="t:"):
        l07.draw_cache_and_state(new_figure(), t=bad)


def test_demo_state_is_the_sum_of_outer_products():
    k, v = lin.demo_stream()
    assert (k > 0).all()  # φ = elu + 1 is positive
    expected = sum(torch.outer(k[0, 0, i], v[0, 0, i]) for i in range(5))
    fig = new_figure(8, 3.6)
    l07.draw_cache_and_state(fig, t=5)
    image = fig.axes[1].get_images()[0].get_array()
    assert torch.allclose(torch.as_tensor(image.data), expected)


# ---------------------------------------------------------------- Lesson 7: memory panel

CONTEXTS = [256, 1024, 4096, 16384, 65536, 262144, 1048576]
DTYPES = ["fp32", "bf16"]


@pytest.mark.parametrize(
    ("context", "dtype"),
    [(4096, "bf16"), *itertools.product([CONTEXTS[0], CONTEXTS[-1]], DTYPES)],
)
def test_draw_memory_vs_context_draws_exact_bytes(context, dtype):
    fig = new_figure(6.4, 4.2)
    l07.draw_memory_vs_context(fig, context=context, dtype=dtype)
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    for name, label in zip(calc.MEMORY_MODELS, labels, strict=True):
        assert label == f"{name}: {format_bytes(calc.memory_at(name, context, dtype))}"


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [({"context": 0, "dtype": "bf16"}, "context"),
     ({"context": 2**21, "dtype": "bf16"}, "context"),
     ({"context": 4096.0, "dtype": "bf16"}, "context"),
     ({"context": 4096, "dtype": "int4"}, "dtype")],
)
def test_draw_memory_vs_context_rejects_bad_values(kwargs, name):
    with pytest.raises(ValueError, match=name):
        l07.draw_memory_vs_context(new_figure(), **kwargs)


def test_memory_models_and_sophia_numbers():
    assert calc.ALL_ATTENTION.startswith("all 28 layers")
    state = cache_breakdown(SOPHIA, 4096, dtype="bf16")
    assert state.state_bytes == 21 * 16 * 96 * 96 * 2 == 6_193_152
    assert state.conv_bytes == 21 * 3 * 3 * 1536 * 2 == 580_608
    assert calc.memory_at(calc.AS_BUILT, 4096, "bf16") == state.total_bytes
    assert calc.memory_at(calc.ALL_ATTENTION, 4096, "bf16") == 704_643_072
    assert (calc.memory_at(calc.ALL_ATTENTION, 4096, "bf16")
            == cache_breakdown(as_all_attention(SOPHIA), 4096).cache_bytes)
    # all linear: 28 × (state 16·96·96 + z 16·96 + conv 3·3·1536), the same at every context
    per_layer = 16 * 96 * 96 + 16 * 96 + 3 * 3 * 1536
    for context in (1, 4096, 2**20):
        assert calc.memory_at(calc.ALL_LINEAR, context, "bf16") == 28 * per_layer * 2
    linear = calc.as_all_linear(SOPHIA)
    assert linear.layer_pattern == ("linear",) * 28 and linear.mla is None


# ---------------------------------------------------------------- Lesson 7: the Chinese edition


def test_lesson7_figures_and_alt_text_speak_chinese_with_the_same_numbers():
    from attnlab.i18n import language

    with language("zh_CN"):
        fig = new_figure(8, 3.6)
        l07.draw_cache_and_state(fig, t=5)
        cache_title, state_title = (ax.get_title() for ax in fig.axes[:2])
        assert cache_title == "t = 5 个 Token 后的 KV 缓存：\n2 × 5 × 8 = 80 个数（增长）"
        assert state_title == "状态 S_5，对 i ≤ 5 求和：\n8 × 8 = 64 个数（固定）"
        fig = new_figure(6.4, 4.2)
        l07.draw_memory_vs_context(fig, context=4096, dtype="bf16")
        ax = fig.axes[0]
        assert ax.get_title() == "Sophia 解码时，T = 4,096 个 Token，bf16（每个数 2 B）"
        labels = [t.get_text() for t in ax.get_legend().get_texts()]
        assert labels[0] == "全部 28 层 softmax 注意力（KV 缓存）：704.6 MB (672.0 MiB)"
        assert labels[2].startswith("实际构建的 Sophia（21 KDA + 7 MLA）：")
        assert "左：KV 缓存" in l07.cache_and_state_alt(6) and "6 行" in l07.cache_and_state_alt(6)
        alt = l07.memory_vs_context_alt(4096)
        assert "4,096 个 Token" in alt and "704.6 MB (672.0 MiB)" in alt
    # outside the block: English again, word for word what the notebook used to write
    assert l07.cache_and_state_alt(6) == (
        "Left: a KV cache with 6 filled rows of keys and values in a frame of 16 rows. "
        "Right: an 8-by-8 heat map of the state S after 6 tokens, the same size at every t."
    )
    assert l07.memory_vs_context_alt(4096).endswith(
        f"dots at 4,096 tokens: {calc.ALL_ATTENTION} 704.6 MB (672.0 MiB), "
        f"{calc.ALL_LINEAR} {format_bytes(calc.memory_at(calc.ALL_LINEAR, 4096, 'bf16'))}."
    )


def test_memory_at_rejects_unknown_model():
    with pytest.raises(ValueError, match="name"):
        calc.memory_at("Sophia", 4096, "bf16")


# ---------------------------------------------------------------- Lesson 8: the three forms


@pytest.mark.parametrize(("length", "chunk_size"), [(12, 4), (2, 1), (64, 64), (10, 3)])
def test_draw_three_forms_draws(length, chunk_size):
    fig = new_figure(8, 3.8)
    l08.draw_three_forms(fig, length=length, chunk_size=chunk_size)
    assert len(fig.axes) == 3
    assert f"C = {chunk_size}" in fig.axes[2].get_title()


@pytest.mark.parametrize(("kwargs", "name"), [({"length": 1}, "length"),
                                              ({"length": 65}, "length"),
                                              ({"length": 8, "chunk_size": 9}, "chunk_size"),
                                              ({"length": 8, "chunk_size": 0}, "chunk_size")])
def test_draw_three_forms_rejects_bad_values(kwargs, name):
    with pytest.raises(ValueError, match=name):
        l08.draw_three_forms(new_figure(), **kwargs)


LENGTHS = [256, 512, 1024]
SECONDS = {"parallel": [1e-3, 3e-3, 2e-2], "recurrent": [2e-2, 3e-2, 5e-2],
           "chunk": [5e-4, 8e-4, 1.5e-3]}


def test_draw_form_times_draws_with_speedups():
    fig = new_figure(7, 4.2)
    l08.draw_form_times(fig, LENGTHS, SECONDS)
    title = fig.axes[0].get_title()
    assert "T = 1,024" in title and "33× faster than recurrent" in title
    assert "13× faster than parallel" in title


@pytest.mark.parametrize(
    ("lengths", "seconds"),
    [([256], {f: [1e-3] for f in LINEAR_FORMS}),
     (LENGTHS, {"parallel": [1e-3] * 3, "chunk": [1e-3] * 3}),
     (LENGTHS, {**SECONDS, "chunk": [1e-3, 1e-3]}),
     (LENGTHS, {**SECONDS, "chunk": [1e-3, 0.0, 1e-3]})],
)
def test_draw_form_times_rejects_bad_input(lengths, seconds):
    with pytest.raises(ValueError, match="lengths|seconds"):
        l08.draw_form_times(new_figure(), lengths, seconds)


def test_a_power_law_fit_uses_every_run_and_trends_cross_where_they_meet():
    lengths = [100, 200, 400]
    quadratic = lin.fit_power_law(lengths, [[1e-4 * t**2] * 3 for t in lengths])
    assert quadratic.exponent == pytest.approx(2) and quadratic(300) == pytest.approx(9.0)
    # one slow run among three does not decide the trend: it moves the exponent a little
    noisy = lin.fit_power_law(lengths, [[1.0, 1.0, 1.0], [2.0, 2.0, 20.0], [4.0, 4.0, 4.0]])
    assert 1 < noisy.exponent < 2
    linear = lin.PowerLaw(0.02, 1.0)  # 0.02 T against 1e-4 T²: equal at T = 200
    assert lin.trend_crossing(quadratic, linear) == pytest.approx(200)
    assert lin.trend_crossing(linear, quadratic) is None
    with pytest.raises(ValueError, match="runs"):
        lin.fit_power_law([100, 100], [[1.0], [2.0]])


def test_draw_form_times_marks_a_crossing_inside_the_lengths_only():
    spread = {f: [(0.8 * s, 1.3 * s) for s in SECONDS[f]] for f in LINEAR_FORMS}
    for crossing, marked in [(300.0, True), (5000.0, False)]:
        fig = new_figure(7, 4.2)
        l08.draw_form_times(fig, LENGTHS, SECONDS, spread=spread, crossing=crossing)
        texts = [t.get_text() for t in fig.axes[0].texts]
        assert any("trends cross" in t for t in texts) == marked
        assert "fastest to slowest" in fig.axes[0].get_legend().get_title().get_text()


GRID_T, GRID_C = [1024, 4096], [1, 4, 16, 64, 256, 1024]
CHUNK_SECONDS = {(t, c): 1e-3 * (1 + c / 64 + 64 / c) for t in GRID_T for c in GRID_C}
FORM_SECONDS = {(t, f): 0.1 for t in GRID_T for f in ("parallel", "recurrent")}


@pytest.mark.parametrize(("chunk_size", "length"),
                         [(64, 4096), *itertools.product([GRID_C[0], GRID_C[-1]], GRID_T)])
def test_draw_chunk_size_draws(chunk_size, length):
    fig = new_figure(8, 3.8)
    l08.draw_chunk_size(fig, chunk_size, length, CHUNK_SECONDS, FORM_SECONDS, head_dim=64)
    flops_title, time_title = (ax.get_title() for ax in fig.axes[:2])
    cost = linear_attention_cost("chunk", length, 64, chunk_size)
    assert f"{cost.flops / 1e6:,.0f} MFLOP" in flops_title
    assert f"{cost.sequential_steps:,} sequential steps" in flops_title
    assert "fastest: C = 64" in time_title


@pytest.mark.parametrize(
    ("chunk_size", "length", "name"),
    [(64, 2048, "length"), (32, 4096, "chunk_size"), (1024, 512, "length")],
)
def test_draw_chunk_size_rejects_unmeasured_values(chunk_size, length, name):
    with pytest.raises(ValueError, match=name):
        l08.draw_chunk_size(new_figure(), chunk_size, length, CHUNK_SECONDS, FORM_SECONDS)


def test_draw_chunk_size_rejects_chunk_longer_than_sequence():
    measured = {(512, 1024): 1e-3, (512, 64): 1e-3}
    forms = {(512, "parallel"): 1e-3, (512, "recurrent"): 1e-3}
    with pytest.raises(ValueError, match="chunk_size"):
        l08.draw_chunk_size(new_figure(), 1024, 512, measured, forms)
    with pytest.raises(ValueError, match="form_seconds"):
        l08.draw_chunk_size(new_figure(), 64, 512, measured, {(512, "parallel"): 1e-3})


def test_chunk_size_panel_draws_every_measured_combination():
    draw = l08.chunk_size_panel(CHUNK_SECONDS, FORM_SECONDS, head_dim=64)
    assert draw.__name__ == "draw_chunk_panel"  # the name make bench reports
    for chunk_size, length in itertools.product(GRID_C, GRID_T):
        fig = new_figure(8, 3.8)
        draw(fig, chunk_size=chunk_size, length=length)
        flops_title, time_title = (ax.get_title() for ax in fig.axes[:2])
        cost = linear_attention_cost("chunk", length, 64, chunk_size)
        assert f"{cost.flops / 1e6:,.0f} MFLOP" in flops_title
        assert f"{CHUNK_SECONDS[(length, chunk_size)] * 1e3:.3g} ms" in time_title
        keys = [t.get_text() for t in fig.axes[0].texts]
        assert any("chunkwise" in k for k in keys) and any("recurrent" in k for k in keys)
        assert all(3 <= len(ax.get_yticks()) <= 5 for ax in fig.axes)
    assert figure_png(fig).startswith(b"\x89PNG")


@pytest.mark.parametrize(("chunk_size", "length", "name"),
                         [(32, 4096, "chunk_size"), (64, 2048, "length")])
def test_chunk_size_panel_rejects_unmeasured_slider_values(chunk_size, length, name):
    draw = l08.chunk_size_panel(CHUNK_SECONDS, FORM_SECONDS)
    with pytest.raises(ValueError, match=name):
        draw(new_figure(), chunk_size=chunk_size, length=length)


@pytest.mark.parametrize(("change", "name"), [
    ({"chunk_seconds": {}}, "chunk_seconds"),
    ({"chunk_seconds": {**CHUNK_SECONDS, (1024, 64): 0.0}}, "chunk_seconds"),
    ({"chunk_seconds": {**CHUNK_SECONDS, (1024.0, 8): 1e-3}}, "chunk_seconds"),
    ({"chunk_seconds": {**CHUNK_SECONDS, 1024: 1e-3}}, "chunk_seconds"),
    ({"form_seconds": {(1024, "parallel"): 0.1, (1024, "recurrent"): 0.1}}, "form_seconds"),
    ({"form_seconds": {**FORM_SECONDS, (4096, "parallel"): -1.0}}, "form_seconds"),
    ({"head_dim": 0}, "head_dim"),
    ({"head_dim": 64.0}, "head_dim"),
])
def test_chunk_size_panel_rejects_bad_measurements(change, name):
    kwargs = {"chunk_seconds": CHUNK_SECONDS, "form_seconds": FORM_SECONDS, "head_dim": 64}
    with pytest.raises(ValueError, match=name):
        l08.chunk_size_panel(**{**kwargs, **change})


def test_cost_closed_forms():
    assert linear_attention_cost("parallel", 4096, 96).flops == 4 * 4096**2 * 96
    assert linear_attention_cost("recurrent", 4096, 96).flops == 4 * 4096 * 96**2
    chunk = linear_attention_cost("chunk", 4096, 96, 64)
    assert chunk.flops == 4 * 4096 * (64 * 96 + 96**2)
    assert chunk.score_numbers == 4096 * 64 and chunk.sequential_steps == 64
    assert linear_attention_cost("parallel", 10, 4).score_numbers == 100
    assert linear_attention_cost("recurrent", 10, 4).sequential_steps == 10


@pytest.mark.parametrize("t", [1, 7, 64, 100])
def test_cost_extremes_of_chunk_size(t):
    d = 8
    par, rec = (linear_attention_cost(f, t, d) for f in ("parallel", "recurrent"))
    assert linear_attention_cost("chunk", t, d, 1).flops == rec.flops + 4 * t * d
    assert linear_attention_cost("chunk", t, d, t).flops == par.flops + 4 * t * d * d
    assert linear_attention_cost("chunk", t, d, t).score_numbers == par.score_numbers


def test_cost_pads_the_last_chunk():
    # T = 100, C = 64: two chunks, the second padded to 64 tokens, as the kernel does
    cost = linear_attention_cost("chunk", 100, 8, 64)
    assert cost.sequential_steps == 2 and cost.score_numbers == 2 * 64 * 64
    assert cost.flops == linear_attention_cost("chunk", 128, 8, 64).flops


def test_cost_balance_at_chunk_equal_to_head_dim():
    chunk = linear_attention_cost("chunk", 4096, 64, 64).flops
    assert chunk == 2 * linear_attention_cost("recurrent", 4096, 64).flops


@pytest.mark.parametrize(("t", "c"), [(128, 32), (100, 64), (64, 1)])
def test_cost_matches_the_matmul_flops_of_the_kernels(t, c):
    """torch's FLOP counter sees the matrix products the kernels actually run."""
    d = 8
    q = torch.randn(1, 1, t, d)
    with FlopCounterMode(display=False) as counter:
        linear_attention_chunk(q, q, q, chunk_size=c)
    assert counter.get_total_flops() == linear_attention_cost("chunk", t, d, c).flops
    with FlopCounterMode(display=False) as counter:
        linear_attention_parallel(q, q, q)
    # the parallel kernel also computes Q S_0 and the final state's Kᵀ V: 4 T d² more
    expected = linear_attention_cost("parallel", t, d).flops + 4 * t * d * d
    assert counter.get_total_flops() == expected


@pytest.mark.parametrize(
    ("args", "kwargs", "name"),
    [(("sparse", 10, 4), {}, "form"), (("chunk", 0, 4), {}, "length"),
     (("chunk", 10, 0), {}, "head_dim"), (("chunk", 10, 4), {"chunk_size": 0}, "chunk_size"),
     (("parallel", 10.0, 4), {}, "length")],
)
def test_cost_rejects_bad_input(args, kwargs, name):
    with pytest.raises(ValueError, match=name):
        linear_attention_cost(*args, **kwargs)
