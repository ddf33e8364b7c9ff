"""Tests of Lesson 20's figures (attnbook.figures.l20_the_map), the facts they draw
(attnbook.architectures_map), and KDA's transition product against its WY representation (the
report's index erratum)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from attnbook.architectures_map import MECHANISMS, decoding_numbers
from attnbook.demos.transitions import kda_transition_products, kda_wy_transitions
from attnbook.figures import l20_the_map as figs
from attnbook.plotting import new_figure
from attnlab.configs import SOPHIA
from attnlab.kinds import KINDS
from attnlab.memory import layer_numbers


@pytest.mark.parametrize("arch", list(MECHANISMS))
def test_draw_architecture_draws_every_architecture(arch):
    fig = new_figure(9, 3.6)
    figs.draw_architecture(fig, arch)
    assert len(fig.axes) >= 2
    assert arch in fig._suptitle.get_text()


def test_plain_rule_writes_every_rule_without_tex():
    for arch in MECHANISMS.values():
        text = figs.plain_rule(arch.rule)
        assert not set(text) & set("\\{}$_^"), (arch.name, text)
    assert figs.plain_rule(MECHANISMS["RetNet"].rule) == "Sₜ = γ\u2009Sₜ₋₁ + kₜvₜᵀ"
    assert "Diag(αₜ)" in figs.plain_rule(MECHANISMS["KDA"].rule)
    assert "cₜᴷⱽ" in figs.plain_rule(MECHANISMS["MLA"].rule)


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


def test_every_row_has_a_registered_kind_and_the_kinds_carry_its_name():
    for row in MECHANISMS.values():
        assert row.kind in KINDS
    named_after_a_kind = [row for row in MECHANISMS.values()
                          if row.name == KINDS[row.kind].label]
    assert {row.kind for row in named_after_a_kind} == {
        "attn", "linear", "gla", "deltanet", "gdn", "kda", "mla"}


def test_decoding_numbers_match_memory_module():
    assert decoding_numbers("softmax attention", SOPHIA, 10) == 2 * 16 * 96 * 10
    assert decoding_numbers("MLA", SOPHIA, 10) == (384 + 48) * 10
    assert decoding_numbers("KDA", SOPHIA, 10) == layer_numbers("kda", SOPHIA, 1).state
    assert decoding_numbers("KDA", SOPHIA, 10) == 16 * 96 * 96
    with pytest.raises(ValueError, match="arch"):
        decoding_numbers("LSTM", SOPHIA, 10)


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


# ---------------------------------------------------------------- the Chinese edition
def test_every_word_of_the_map_has_a_chinese_translation():
    """The tables' names, traits and costs go through ``figs.words`` (tr of a variable, which the
    catalog test cannot see): each one with English words in it has a translation."""
    import re

    from attnlab.i18n import catalog

    chinese = catalog("zh_CN")
    kept_english = {"RetNet", "Mamba2", "GLA", "DeltaNet", "Gated DeltaNet", "KDA", "MLA"}
    texts = {t for a in MECHANISMS.values()
             for t in (a.name, a.forget, a.correct, a.gate, a.training, a.decoding)}
    wordy = {t for t in texts - kept_english if re.search(r"[a-z]{2,}", t)}
    assert wordy and not sorted(wordy - set(chinese))


def test_lesson20_figures_and_alt_text_speak_chinese():
    from attnlab.i18n import language

    with language("zh_CN"):
        fig = new_figure(6.4, 4.8)
        figs.draw_memory_by_architecture(fig, 4096)
        ax = fig.axes[0]
        assert ax.get_title().startswith("T = 4,096 个 Token，Sophia 的头维度（16 × 96）")
        assert [t.get_text() for t in ax.get_yticklabels()][:2] == ["softmax 注意力", "线性注意力"]
        assert "“KDA”的一个头" in figs.architecture_alt("KDA")
    assert figs.architecture_alt("KDA").startswith("Top: a heat map of what one head of KDA")
    assert figs.memory_by_architecture_alt(32768) == (
        "Horizontal bars of one layer's memory for the nine mechanisms at 32768 tokens, "
        "log scale.")
