"""Tests of Lessons 18 and 20's figures (attnlab.figures.costs) and the computations they added:
the decode-step timers, the crossing of a growing and a fixed cost, the composed stack cost, and
KDA's transition product against its WY representation (the report's index erratum)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from attnlab.configs import SOPHIA, SOPHIA_NANO
from attnlab.figures import costs as figs
from attnlab.kda import kda_transition_products, kda_wy_transitions, time_kda_step
from attnlab.kv_cache import crossover_context, stack_cost, time_cached_attention_step
from attnlab.memory import layer_numbers
from attnlab.plotting import new_figure

DATA = figs.CostData("test", 2, 32, (512, 2048, 8192, 32768), (8e-5, 1.1e-4, 3.5e-4, 1.5e-3),
                     (131072, 524288, 2097152, 8388608), 1.7e-4, 8192)


# ---------------------------------------------------------------- Lesson 18 figures


@pytest.mark.parametrize("quantity", figs.QUANTITIES)
@pytest.mark.parametrize("scope", figs.SCOPES)
def test_draw_costs_draws_every_frame(quantity, scope):
    fig = new_figure(7, 3.8)
    figs.draw_costs(fig, DATA, quantity=quantity, scope=scope)
    assert len(fig.axes) == 1
    assert "32k" in fig.axes[0].get_title()


def test_draw_costs_marks_the_crossing():
    fig = new_figure()
    figs.draw_costs(fig, DATA, quantity="time", scope="one layer")
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert any(t.startswith("cross ≈ 3,") for t in texts)


@pytest.mark.parametrize(("name", "kwargs"), [("quantity", {"quantity": "speed"}),
                                              ("scope", {"scope": "two layers"})])
def test_draw_costs_rejects_bad_choices(name, kwargs):
    with pytest.raises(ValueError, match=name):
        figs.draw_costs(new_figure(), DATA, **kwargs)


def test_cost_data_rejects_mismatched_lengths():
    with pytest.raises(ValueError, match="attn_seconds"):
        figs.CostData("x", 1, 1, (1, 2), (1.0,), (1, 2), 1.0, 1)


def test_stack_curves_are_composed_from_layers():
    grow, flat, unit = figs.cost_curves(DATA, "memory", "3:1 stack", SOPHIA_NANO.layer_pattern)
    assert unit == "MiB"
    assert grow[0] == pytest.approx(8 * DATA.attn_bytes[0] / 2**20)
    assert flat[0] == pytest.approx((2 * DATA.attn_bytes[0] + 6 * DATA.kda_bytes) / 2**20)


# ---------------------------------------------------------------- Lesson 20 figures


@pytest.mark.parametrize("arch", list(figs.ARCHITECTURES))
def test_draw_architecture_draws_every_architecture(arch):
    fig = new_figure(9, 3.6)
    figs.draw_architecture(fig, arch)
    assert len(fig.axes) >= 2
    assert arch in fig._suptitle.get_text()


def test_plain_rule_writes_every_rule_without_tex():
    for arch in figs.ARCHITECTURES.values():
        text = figs.plain_rule(arch.rule)
        assert not set(text) & set("\\{}$_^"), (arch.name, text)
    assert figs.plain_rule(figs.ARCHITECTURES["RetNet"].rule) == "Sₜ = γ\u2009Sₜ₋₁ + kₜvₜᵀ"
    assert "Diag(αₜ)" in figs.plain_rule(figs.ARCHITECTURES["KDA"].rule)
    assert "cₜᴷⱽ" in figs.plain_rule(figs.ARCHITECTURES["MLA"].rule)


def test_map_figures_label_log_axes_in_plain_text():
    fig = new_figure(9, 3.6)
    figs.draw_architecture(fig, "MLA")
    labels = [t.get_text() for t in fig.axes[1].get_yticklabels()]
    assert labels and "1" in labels and not any("$" in label for label in labels)
    assert "$" not in fig._suptitle.get_text()
    fig = new_figure(8, 3.8)
    figs.draw_memory_by_architecture(fig, 32768)
    labels = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    assert "1 MB" in labels and "100 MB" in labels


def test_draw_architecture_rejects_unknown():
    with pytest.raises(ValueError, match="arch"):
        figs.draw_architecture(new_figure(), "Transformer-XL")


@pytest.mark.parametrize("context", [512, 4096, 524288])
def test_draw_memory_by_architecture_draws(context):
    fig = new_figure(8, 3.8)
    figs.draw_memory_by_architecture(fig, context)
    assert f"{context:,}" in fig.axes[0].get_title()


@pytest.mark.parametrize("bad", [0, -5, 2.5, True, 2**25])
def test_draw_memory_by_architecture_rejects_bad_context(bad):
    with pytest.raises(ValueError, match="context"):
        figs.draw_memory_by_architecture(new_figure(), bad)


def test_decoding_numbers_match_memory_module():
    assert figs.decoding_numbers("softmax attention", SOPHIA, 10) == 2 * 16 * 96 * 10
    assert figs.decoding_numbers("MLA", SOPHIA, 10) == (384 + 48) * 10
    assert figs.decoding_numbers("KDA", SOPHIA, 10) == layer_numbers("kda", SOPHIA, 1).state
    assert figs.decoding_numbers("KDA", SOPHIA, 10) == 16 * 96 * 96
    with pytest.raises(ValueError, match="arch"):
        figs.decoding_numbers("LSTM", SOPHIA, 10)


# ---------------------------------------------------------------- computations


def test_crossover_interpolates_linearly():
    assert crossover_context([512, 2048], [1e-4, 3e-4], 2e-4) == pytest.approx(1280.0)
    assert crossover_context([512, 2048], [3e-4, 4e-4], 2e-4) == 512.0
    assert crossover_context([512, 2048], [1e-4, 1.5e-4], 2e-4) is None


@pytest.mark.parametrize(("args", "name"), [
    (([512, 256], [1.0, 2.0], 1.5), "contexts"),
    (([512], [1.0, 2.0], 1.5), "seconds"),
    (([512, 1024], [1.0, -2.0], 1.5), "seconds"),
    (([512, 1024], [1.0, 2.0], -1.0), "constant_seconds"),
])
def test_crossover_rejects_bad_input(args, name):
    with pytest.raises(ValueError, match=name):
        crossover_context(*args)


def test_stack_cost_counts_global_and_recurrent_layers():
    assert stack_cost(SOPHIA.layer_pattern, 10.0, 1.0) == 7 * 10.0 + 21 * 1.0
    assert stack_cost(("attn",) * 4, 2.0, 100.0) == 8.0
    with pytest.raises(ValueError, match="layer_pattern"):
        stack_cost("kda", 1.0, 1.0)
    with pytest.raises(ValueError, match="global_cost"):
        stack_cost(("attn",), -1.0, 1.0)


def test_timers_return_seconds_and_exact_bytes():
    seconds, n_bytes = time_cached_attention_step(64, n_heads=2, head_dim=8, repeats=1)
    assert seconds > 0 and n_bytes == 2 * 2 * 64 * 8 * 4
    seconds, n_bytes = time_kda_step(n_heads=2, head_dim=8, repeats=1)
    assert seconds > 0 and n_bytes == 2 * 8 * 8 * 4
    with pytest.raises(ValueError, match="context"):
        time_cached_attention_step(0)
    with pytest.raises(ValueError, match="head_dim"):
        time_kda_step(head_dim=0)


def _chunk(seed=0, c=6, d=4):
    gen = torch.Generator().manual_seed(seed)
    k = F.normalize(torch.randn(1, 2, c, d, generator=gen, dtype=torch.float64), dim=-1)
    g = -torch.rand(1, 2, c, d, generator=gen, dtype=torch.float64)
    beta = torch.rand(1, 2, c, generator=gen, dtype=torch.float64)
    return k, g, beta


def test_wy_transitions_match_product_only_with_exclusive_decay():
    k, g, beta = _chunk()
    literal = kda_transition_products(k, g=g, beta=beta)
    exclusive = kda_wy_transitions(k, g=g, beta=beta)
    inclusive = kda_wy_transitions(k, g=g, beta=beta, include_start=True)
    assert (exclusive - literal).abs().max() < 1e-12
    assert (inclusive - literal)[:, :, 0].abs().max() > 1e-2  # fails already at r = 1


def test_transition_product_first_factor():
    k, g, beta = _chunk(c=1)
    eye = torch.eye(4, dtype=torch.float64)
    expected = (eye - beta[0, 0, 0] * torch.outer(k[0, 0, 0], k[0, 0, 0])) @ torch.diag(
        g[0, 0, 0].exp())
    assert torch.allclose(kda_transition_products(k, g=g, beta=beta)[0, 0, 0], expected)


def test_transition_functions_reject_bad_input():
    k, g, beta = _chunk()
    with pytest.raises(ValueError, match="g"):
        kda_wy_transitions(k, g=-g, beta=beta)
    with pytest.raises(ValueError, match="include_start"):
        kda_wy_transitions(k, g=g, beta=beta, include_start=1)
    with pytest.raises(ValueError, match="beta"):
        kda_transition_products(k, g=g, beta=beta[..., :2])
