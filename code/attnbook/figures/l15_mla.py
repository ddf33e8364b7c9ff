"""Figures of Lesson 15 (MLA: compress the cache): the cache entry and bytes against d_c."""

from __future__ import annotations

from collections.abc import Sequence

from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator
from matplotlib.transforms import ScaledTranslation

from attnlab.checks import check_choice, check_int_in
from attnlab.configs import DEEPSEEK_V3, SOPHIA, ModelConfig
from attnlab.i18n import tr
from attnlab.memory import BYTES_PER_ELEMENT
from attnlab.mla import mla_cache_elements_per_token

from ..demos.calculators import mla_sweep_bytes
from ..plotting import (
    PALETTE,
    SMALL_TEXT_PT,
    style_axes,
    text_legend,
    title_at_top,
)


def cache_entry_alt() -> str:
    """The alt text of the cache-entry figure (DeepSeek-V3 and Sophia)."""
    values = {}
    for key, config in (("ds", DEEPSEEK_V3), ("sm", SOPHIA)):
        m = config.mla
        mha = 2 * m.n_heads * m.qk_nope_head_dim
        mla = mla_cache_elements_per_token(m.kv_lora_rank, m.qk_rope_head_dim)
        values |= {
            f"{key}_mha": mha,
            f"{key}_dc": m.kv_lora_rank,
            f"{key}_dr": m.qk_rope_head_dim,
            f"{key}_mla": mla,
            f"{key}_share": mla / mha,
        }
    return tr(
        "Two horizontal bar charts of numbers cached per token per layer. DeepSeek-V3: "
        "multi-head keys and values, {ds_mha:,} numbers, against MLA's latent of {ds_dc} "
        "plus a {ds_dr}-number rope key, {ds_mla} ({ds_share:.1%}). Sophia: {sm_mha:,} "
        "against {sm_dc} plus {sm_dr}, {sm_mla} ({sm_share:.1%}).",
        **values,
    )


def mla_bytes_alt(kv_lora_rank: int, rope_dim: int) -> str:
    """The alt text of a frame of the MLA-bytes panel (Sophia's heads, bf16)."""
    width = BYTES_PER_ELEMENT["bf16"]
    return tr(
        "Line of MLA cache bytes per token per layer against latent size, with a dot at "
        "d_c = {kv_lora_rank}, d_R = {rope_dim}: {chosen:,} bytes in bf16, below the "
        "multi-head line at {mha:,} bytes and compared with GQA and MQA lines.",
        kv_lora_rank=kv_lora_rank,
        rope_dim=rope_dim,
        chosen=(kv_lora_rank + rope_dim) * width,
        mha=2 * SOPHIA.n_heads * SOPHIA.head_dim * width,
    )


def draw_cache_entry(
    fig: Figure, configs: Sequence[ModelConfig] = (DEEPSEEK_V3, SOPHIA)
) -> None:
    """What one token adds to one layer's cache: multi-head K and V (2 · n_h · d_h numbers)
    against MLA's latent c^KV (d_c) plus the shared rope key k^R (d_h^R). One panel per model."""
    if not configs:
        raise ValueError(
            "configs: expected at least one model with MLA dimensions, got none"
        )
    for config in configs:
        if config.mla is None:
            raise ValueError(f"configs: {config.name} has no MLA dimensions")
    axes = fig.subplots(len(configs), 1, squeeze=False)[:, 0]
    for ax, config in zip(axes, configs, strict=True):
        m = config.mla
        half = m.n_heads * m.qk_nope_head_dim
        mha = 2 * half
        mla = mla_cache_elements_per_token(m.kv_lora_rank, m.qk_rope_head_dim)
        ax.barh(1, half, color=PALETTE[4], edgecolor="white")
        ax.barh(1, half, left=half, color=PALETTE[0], edgecolor="white")
        ax.barh(0, m.kv_lora_rank, color=PALETTE[1], edgecolor="white")
        ax.barh(
            0,
            m.qk_rope_head_dim,
            left=m.kv_lora_rank,
            color=PALETTE[5],
            edgecolor="white",
        )
        ax.text(mha, 1, f"  {mha:,}", va="center", fontsize=SMALL_TEXT_PT)
        ax.text(
            mla,
            0,
            f"  {mla:,}  ({mla / mha:.1%})",
            va="center",
            fontsize=SMALL_TEXT_PT,
        )
        ax.set_yticks(
            [1, 0],
            [
                tr(
                    "multi-head\n{n_heads} heads × {head_dim}",
                    n_heads=m.n_heads,
                    head_dim=m.qk_nope_head_dim,
                ),
                f"MLA\nd_c = {m.kv_lora_rank}, d_R = {m.qk_rope_head_dim}",
            ],
        )
        ax.set_xlim(0, mha * 1.22)
        ax.grid(axis="y", visible=False)
        style_axes(
            ax,
            tr("numbers cached per token per layer"),
            "",
            tr(
                "{name}: {mha:,} → {mla:,} numbers ({ratio:.1f}× fewer)",
                name=config.name,
                mha=mha,
                mla=mla,
                ratio=mha / mla,
            ),
        )
    fig.legend(
        handles=[
            Patch(color=PALETTE[4], label=tr("keys, all heads")),
            Patch(color=PALETTE[0], label=tr("values, all heads")),
            Patch(color=PALETTE[1], label=tr("latent c^KV")),
            Patch(color=PALETTE[5], label=tr("rope key k^R (shared)")),
        ],
        loc="outside lower center",
        ncols=2,
    )


def draw_mla_bytes(
    fig: Figure,
    kv_lora_rank: int,
    rope_dim: int,
    n_heads: int = 16,
    head_dim: int = 96,
    dtype: str = "bf16",
) -> None:
    """Bytes per token per layer of MLA as the latent size d_c grows (line, dot at the chosen
    d_c), against multi-head attention (2 · n_h · d_h, solid) and GQA/MQA with fewer K/V heads
    (dashed), each level labelled with its bytes."""
    check_int_in("kv_lora_rank", kv_lora_rank, 1, 4096)
    check_int_in("rope_dim", rope_dim, 1, 1024)
    check_int_in("n_heads", n_heads, 1, 1024)
    check_int_in("head_dim", head_dim, 1, 1024)
    check_choice("dtype", dtype, BYTES_PER_ELEMENT)
    width = BYTES_PER_ELEMENT[dtype]
    ax = fig.subplots()
    d_max = max(1024, kv_lora_rank)
    ax.plot(
        [0, d_max],
        [rope_dim * width, (d_max + rope_dim) * width],
        color=PALETTE[1],
        linewidth=2.5,
    )
    chosen = mla_sweep_bytes(kv_lora_rank, rope_dim, dtype)
    ax.plot(
        [kv_lora_rank],
        [chosen],
        marker="o",
        ms=10,
        color=PALETTE[1],
        zorder=5,
    )
    kv_heads = list(
        dict.fromkeys(
            h
            for h in (n_heads, n_heads // 2, n_heads // 4, n_heads // 8, 1)
            if h >= 1 and n_heads % h == 0
        )
    )
    levels = [2 * h * head_dim * width for h in kv_heads]
    colours = [
        (PALETTE[5], PALETTE[0], PALETTE[2], PALETTE[3], "#777777")[i % 5]
        for i in range(len(kv_heads))
    ]
    ax.hlines(
        levels,
        0,
        d_max * 1.02,
        colors=colours,
        linewidth=1.3,
        linestyles=["-" if h == n_heads else "--" for h in kv_heads],
    )
    above_left = ax.transData + ScaledTranslation(
        -4 / 72, 3 / 72, fig.dpi_scale_trans
    )
    for h, level in zip(kv_heads, levels, strict=True):
        name = "MHA" if h == n_heads else ("MQA" if h == 1 else "GQA")
        ax.text(
            d_max,
            level,
            (
                tr("{name}, {h} K/V heads: {level:,} B", name=name, h=h, level=level)
                if h > 1
                else tr("{name}, {h} K/V head: {level:,} B", name=name, h=h, level=level)
            ),
            transform=above_left,
            ha="right",
            va="bottom",
            fontsize=SMALL_TEXT_PT,
        )
    mha = 2 * n_heads * head_dim * width
    groups = chosen / (2 * head_dim * width)
    ax.set_xlim(0, d_max * 1.02)
    ax.set_ylim(0, mha * 1.1)
    ax.set_xticks([round(d_max * i / 4) for i in range(5)])
    ax.yaxis.set_major_locator(MaxNLocator(nbins=4))
    style_axes(
        ax,
        tr("latent size d_c (numbers)"),
        tr("cache per token per layer ({dtype}, bytes)", dtype=dtype),
    )
    title_at_top(
        ax,
        tr(
            "MLA with d_c = {kv_lora_rank}, d_R = {rope_dim}: {chosen:,} B per token per "
            "layer\n= {share:.1%} of MHA ({n_heads} × {head_dim}), as much as GQA with "
            "{groups:.2f} K/V heads",
            kv_lora_rank=kv_lora_rank,
            rope_dim=rope_dim,
            chosen=chosen,
            share=chosen / mha,
            n_heads=n_heads,
            head_dim=head_dim,
            groups=groups,
        ),
    )
    text_legend(
        ax,
        [(f"━━ MLA: (d_c + {rope_dim}) × {width} B", PALETTE[1])],
        x=0.02,
        y=0.84,
        fontsize=SMALL_TEXT_PT,
    )
