"""Tests of Lesson 18's figures (attnbook.figures.l18_cost_of_a_token) and its measurement
(attnbook.decode_cost, the raw timers): the crossing is reported only where every round agrees,
and the stack cost is composed from the layers."""

from __future__ import annotations

import pytest
from attnbook.decode_cost import (
    CostData,
    Crossing,
    find_crossing,
    measure_decode_costs,
    noise_drops,
)
from attnbook.demos.decoding import stack_cost
from attnbook.figures import l18_cost_of_a_token as figs
from attnbook.plotting import new_figure
from attnbook.timing import time_cached_attention_step, time_kda_step
from attnlab.configs import SOPHIA, SOPHIA_NANO

CONTEXTS = (512, 2048, 8192, 32768)
BYTES = (131072, 524288, 2097152, 8388608)


def cost_data(attn_rounds, kda_rounds, contexts=CONTEXTS):
    return CostData("test", 2, 32, contexts, tuple(map(tuple, attn_rounds)),
                    BYTES[:len(contexts)], tuple(kda_rounds), 8192)


DATA = cost_data([(8e-5, 1.1e-4, 3.5e-4, 1.5e-3), (9e-5, 1.2e-4, 3.6e-4, 1.6e-3)],
                 (1.7e-4, 1.8e-4))


@pytest.mark.parametrize("quantity", figs.QUANTITIES)
@pytest.mark.parametrize("scope", figs.SCOPES)
def test_draw_costs_draws_every_frame(quantity, scope):
    fig = new_figure(7, 3.8)
    figs.draw_costs(fig, DATA, quantity=quantity, scope=scope)
    assert len(fig.axes) == 1
    assert "32k" in fig.axes[0].get_title()


def test_draw_costs_shades_a_supported_crossing_only():
    fig = new_figure()
    figs.draw_costs(fig, DATA, quantity="time", scope="one layer")
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert "crossing: 2k–8k" in labels
    noisy = cost_data([(8e-5, 3e-4, 1e-4, 1.5e-3), (9e-5, 3.1e-4, 1.1e-4, 1.6e-3)],
                      (1.7e-4, 1.8e-4))  # slower at 2k, faster again at 8k: no crossing
    fig = new_figure()
    figs.draw_costs(fig, noisy, quantity="time", scope="one layer")
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert not any(label.startswith("crossing") for label in labels)


@pytest.mark.parametrize(("name", "kwargs"), [("quantity", {"quantity": "speed"}),
                                              ("scope", {"scope": "two layers"})])
def test_draw_costs_rejects_bad_choices(name, kwargs):
    with pytest.raises(ValueError, match=name):
        figs.draw_costs(new_figure(), DATA, **kwargs)


def test_stack_curves_are_composed_from_layers():
    grow, flat, unit = figs.cost_curves(DATA, "memory", "3:1 stack", SOPHIA_NANO.layer_pattern)
    assert unit == "MiB"
    assert grow[0] == pytest.approx(8 * DATA.attn_bytes[0] / 2**20)
    assert flat[0] == pytest.approx((2 * DATA.attn_bytes[0] + 6 * DATA.kda_bytes) / 2**20)


def test_context_label():
    assert [figs.context_label(t) for t in (32, 512, 2048, 32768)] == ["32", "512", "2k", "32k"]


def test_cost_data_medians_ranges_and_bad_shapes():
    assert DATA.attn_seconds[0] == pytest.approx(8.5e-5)
    assert DATA.attn_range[-1] == (1.5e-3, 1.6e-3)
    assert DATA.kda_range == (1.7e-4, 1.8e-4)
    with pytest.raises(ValueError, match="attn_rounds"):
        cost_data([(1.0,)], (1.0,))
    with pytest.raises(ValueError, match="kda_rounds"):
        cost_data([(1.0,) * 4], (1.0, 2.0))
    with pytest.raises(ValueError, match="contexts"):
        cost_data([(1.0, 2.0)], (1.0,), contexts=(2048, 512))


@pytest.mark.parametrize(("attn", "expected"), [
    ([(1, 3, 9, 27)], Crossing("inside", 512, 8192)),   # 3 ties with KDA at 2048
    ([(1, 2, 9, 27)], Crossing("inside", 2048, 8192)),
    ([(3, 3.5, 9, 27)], Crossing("inside", None, 2048)),   # a tie at the first context
    ([(5, 6, 9, 27)], Crossing("below", None, 512)),
    ([(1, 1, 1, 2)], Crossing("beyond")),
    ([(1, 5, 1, 27)], Crossing("unclear")),             # slower, then faster again: noise
])
def test_find_crossing_needs_every_round_to_agree(attn, expected):
    assert find_crossing(cost_data(attn, (3.0,))) == expected


def test_find_crossing_uses_the_spread_of_the_rounds():
    clean = cost_data([(1, 2, 9, 27), (1, 2, 9, 27)], (3.0, 3.0))
    assert find_crossing(clean) == Crossing("inside", 2048, 8192)
    noisy_kda = cost_data([(1, 2, 9, 27), (1, 2, 9, 27)], (3.0, 10.0))
    assert find_crossing(noisy_kda) == Crossing("inside", 2048, 32768)


def test_noise_drops_flags_a_surely_cheaper_longer_context():
    assert noise_drops(cost_data([(1, 5, 2, 27), (1, 6, 3, 28)], (3.0, 3.0))) == [8192]
    assert noise_drops(DATA) == []


def test_stack_cost_counts_global_and_recurrent_layers():
    assert stack_cost(SOPHIA.layer_pattern, 10.0, 1.0) == 7 * 10.0 + 21 * 1.0
    assert stack_cost(("attn",) * 4, 2.0, 100.0) == 8.0
    with pytest.raises(ValueError, match="layer_pattern"):
        stack_cost("kda", 1.0, 1.0)
    with pytest.raises(ValueError, match="global_cost"):
        stack_cost(("attn",), -1.0, 1.0)


def test_timers_return_seconds_and_exact_bytes():
    seconds, n_bytes = time_cached_attention_step([16, 64], n_heads=2, head_dim=8, repeats=1)
    assert len(seconds) == 2 and min(seconds) > 0
    assert n_bytes == [2 * 2 * 16 * 8 * 4, 2 * 2 * 64 * 8 * 4]
    checked, _ = time_cached_attention_step([16], n_heads=2, head_dim=8, repeats=1, checked=True)
    assert checked[0] > 0
    seconds, n_bytes = time_kda_step(n_heads=2, head_dim=8, repeats=1)
    assert seconds > 0 and n_bytes == 2 * 8 * 8 * 4
    assert time_kda_step(n_heads=2, head_dim=8, repeats=1, checked=True)[0] > 0
    with pytest.raises(ValueError, match="contexts"):
        time_cached_attention_step([0])
    with pytest.raises(ValueError, match="contexts"):
        time_cached_attention_step(64)
    with pytest.raises(ValueError, match="head_dim"):
        time_kda_step(head_dim=0)


def test_measure_decode_costs_shapes():
    data = measure_decode_costs("x", 1, 4, (8, 16), repeats=1, rounds=2)
    assert len(data.attn_rounds) == 2 and len(data.kda_rounds) == 2
    assert data.attn_bytes == (2 * 8 * 4 * 4, 2 * 16 * 4 * 4) and data.kda_bytes == 64
    with pytest.raises(ValueError, match="rounds"):
        measure_decode_costs("x", 1, 4, (8, 16), rounds=0)
