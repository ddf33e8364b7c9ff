"""Figures for Lessons 15 (MLA: compress the cache) and 16 (the hybrid stack)."""

from __future__ import annotations

from collections.abc import Sequence

from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator
from matplotlib.transforms import ScaledTranslation

from ..memory import (
    BYTES_PER_ELEMENT,
    as_all_attention,
    cache_breakdown,
    format_bytes,
)
from ..mla import mla_cache_elements_per_token
from ..model import DEEPSEEK_V3, KIMI_LINEAR_48B_A3B, LLAMA3_8B, SOPHIA, ModelConfig
from ..plotting import PALETTE, style_axes, text_legend, title_at_top

#: Colours of the layer kinds and of the parts of the decoding memory.
KIND_COLOURS = {"kda": PALETTE[0], "mla": PALETTE[1], "attn": PALETTE[5]}
PART_COLOURS = {"cache": PALETTE[1], "state": PALETTE[0], "conv": PALETTE[2]}

#: The memory calculator's models (Lesson 16), by the name shown on its slider.
MEMORY_PRESETS: dict[str, ModelConfig] = {
    "Sophia": SOPHIA,
    "Kimi-Linear-48B-A3B": KIMI_LINEAR_48B_A3B,
    "DeepSeek-V3": DEEPSEEK_V3,
    "Llama-3-8B": LLAMA3_8B,
}

#: Number formats of the calculator: (dtype of caches and conv inputs, dtype of the states).
NUMBER_FORMATS: dict[str, tuple[str, str]] = {
    "bf16": ("bf16", "bf16"),
    "bf16, fp32 state": ("bf16", "fp32"),
}

_KIND_NAMES = {"kda": "KDA", "mla": "MLA", "attn": "attention"}


def _check_int(name: str, value: object, low: int = 1, high: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low or (
            high is not None and value > high):
        bound = f"in [{low}, {high}]" if high is not None else f">= {low}"
        raise ValueError(f"{name}: expected an integer {bound}, got {value!r}")
    return value


def _check_choice(name: str, value: object, choices: Sequence[str]) -> str:
    if value not in choices:
        raise ValueError(f"{name}: expected one of {list(choices)}, got {value!r}")
    return value  # type: ignore[return-value]


def context_label(tokens: int) -> str:
    """4096 → "4k", 1048576 → "1M", 1000 → "1000" (powers-of-two thousands/millions)."""
    if tokens and tokens % 2**20 == 0:
        return f"{tokens // 2**20}M"
    if tokens and tokens % 1024 == 0:
        return f"{tokens // 1024}k"
    return f"{tokens}"


def _scaled(n_bytes: float) -> tuple[float, str]:
    """A byte count in the binary unit that keeps it between 1 and 1024: (value, unit)."""
    for power, unit in ((3, "GiB"), (2, "MiB"), (1, "KiB")):
        if n_bytes >= 1024**power:
            return n_bytes / 1024**power, unit
    return float(n_bytes), "B"


# ---------------------------------------------------------------- Lesson 15: MLA


def draw_cache_entry(fig: Figure, configs: Sequence[ModelConfig] = (DEEPSEEK_V3, SOPHIA)) -> None:
    """What one token adds to one layer's cache: multi-head K and V (2 · n_h · d_h numbers)
    against MLA's latent c^KV (d_c) plus the shared rope key k^R (d_h^R). One panel per model."""
    if not configs:
        raise ValueError("configs: expected at least one model with MLA dimensions, got none")
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
        ax.barh(0, m.qk_rope_head_dim, left=m.kv_lora_rank, color=PALETTE[5], edgecolor="white")
        ax.text(mha, 1, f"  {mha:,}", va="center", fontsize=9)
        ax.text(mla, 0, f"  {mla:,}  ({mla / mha:.1%})", va="center", fontsize=9)
        ax.set_yticks([1, 0], [f"multi-head\n{m.n_heads} heads × {m.qk_nope_head_dim}",
                               f"MLA\nd_c = {m.kv_lora_rank}, d_R = {m.qk_rope_head_dim}"])
        ax.set_xlim(0, mha * 1.22)
        ax.grid(axis="y", visible=False)
        style_axes(ax, "numbers cached per token per layer", "",
                   f"{config.name}: {mha:,} → {mla:,} numbers ({mha / mla:.1f}× fewer)")
    fig.legend(handles=[Patch(color=PALETTE[4], label="keys, all heads"),
                        Patch(color=PALETTE[0], label="values, all heads"),
                        Patch(color=PALETTE[1], label="latent c^KV"),
                        Patch(color=PALETTE[5], label="rope key k^R (shared)")],
               loc="outside lower center", ncols=4)


def mla_sweep_bytes(kv_lora_rank: int, rope_dim: int, dtype: str = "bf16") -> int:
    """Bytes MLA caches per token per layer: (d_c + d_h^R) · bytes per element."""
    _check_choice("dtype", dtype, BYTES_PER_ELEMENT)
    return mla_cache_elements_per_token(kv_lora_rank, rope_dim) * BYTES_PER_ELEMENT[dtype]


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
    _check_int("kv_lora_rank", kv_lora_rank, 1, 4096)
    _check_int("rope_dim", rope_dim, 1, 1024)
    _check_int("n_heads", n_heads, 1, 1024)
    _check_int("head_dim", head_dim, 1, 1024)
    _check_choice("dtype", dtype, BYTES_PER_ELEMENT)
    width = BYTES_PER_ELEMENT[dtype]
    ax = fig.subplots()
    d_max = max(1024, kv_lora_rank)
    ax.plot([0, d_max], [rope_dim * width, (d_max + rope_dim) * width], color=PALETTE[1],
            linewidth=2.5)
    chosen = mla_sweep_bytes(kv_lora_rank, rope_dim, dtype)
    ax.plot([kv_lora_rank], [chosen], marker="o", ms=10, color=PALETTE[1], zorder=5)
    kv_heads = list(dict.fromkeys(h for h in (n_heads, n_heads // 2, n_heads // 4, n_heads // 8, 1)
                                  if h >= 1 and n_heads % h == 0))
    levels = [2 * h * head_dim * width for h in kv_heads]
    colours = [(PALETTE[5], PALETTE[0], PALETTE[2], PALETTE[3], "#777777")[i % 5]
               for i in range(len(kv_heads))]
    ax.hlines(levels, 0, d_max * 1.02, colors=colours, linewidth=1.3,
              linestyles=["-" if h == n_heads else "--" for h in kv_heads])
    above_left = ax.transData + ScaledTranslation(-4 / 72, 3 / 72, fig.dpi_scale_trans)
    for h, level in zip(kv_heads, levels, strict=True):
        name = "MHA" if h == n_heads else ("MQA" if h == 1 else "GQA")
        ax.text(d_max, level, f"{name}, {h} K/V head{'s' if h > 1 else ''}: {level:,} B",
                transform=above_left, ha="right", va="bottom", fontsize=8)
    mha = 2 * n_heads * head_dim * width
    groups = chosen / (2 * head_dim * width)
    ax.set_xlim(0, d_max * 1.02)
    ax.set_ylim(0, mha * 1.1)
    ax.set_xticks([round(d_max * i / 4) for i in range(5)])
    ax.yaxis.set_major_locator(MaxNLocator(nbins=4))
    style_axes(ax, "latent size d_c (numbers)", f"cache per token per layer ({dtype}, bytes)")
    title_at_top(ax, f"MLA with d_c = {kv_lora_rank}, d_R = {rope_dim}: {chosen:,} B per token "
                     f"per layer\n= {chosen / mha:.1%} of MHA ({n_heads} × {head_dim}), as much "
                     f"as GQA with {groups:.2f} K/V heads")
    text_legend(ax, [(f"━━ MLA: (d_c + {rope_dim}) × {width} B", PALETTE[1])], x=0.02, y=0.84,
                fontsize=9)


# ---------------------------------------------------------------- Lesson 16: the hybrid stack


def draw_layer_pattern(fig: Figure, configs: Sequence[ModelConfig] = (SOPHIA,
                                                                     KIMI_LINEAR_48B_A3B)) -> None:
    """One coloured block per layer (KDA, MLA, attention), one row per model, layer 1 on the left.
    The row label counts the layers of each kind."""
    if not configs:
        raise ValueError("configs: expected at least one ModelConfig, got none")
    for config in configs:
        if not isinstance(config, ModelConfig):
            raise ValueError(f"configs: expected ModelConfigs, got {type(config).__name__}")
    ax = fig.subplots()
    n_max = max(c.n_layers for c in configs)
    for row, config in enumerate(configs):
        y = len(configs) - 1 - row
        for i, kind in enumerate(config.layer_pattern):
            ax.add_patch(_block(i, y, KIND_COLOURS.get(kind, "#999999")))
            ax.text(i + 0.45, y + 0.4, _KIND_NAMES.get(kind, kind)[0], ha="center", va="center",
                    fontsize=7, color="white", fontweight="bold")
        counts = " + ".join(f"{config.count(k)} {_KIND_NAMES.get(k, k)}"
                            for k in dict.fromkeys(config.layer_pattern))
        ax.text(-0.6, y + 0.4, f"{config.name}\n{counts}", ha="right", va="center", fontsize=9)
    ax.set_xlim(-0.3, n_max + 0.2)
    ax.set_ylim(-0.3, len(configs) + 0.1)
    ax.set_yticks([])
    ax.set_xticks([i + 0.45 for i in range(0, n_max, 4)] + [n_max - 1 + 0.45],
                  [str(i + 1) for i in range(0, n_max, 4)] + [str(n_max)])
    ax.grid(False)
    for side in ("left", "bottom"):
        ax.spines[side].set_visible(False)
    ax.set_xlabel("layer (1 = first, next to the embeddings)")
    kinds = dict.fromkeys(k for c in configs for k in c.layer_pattern)
    fig.legend(handles=[Patch(color=KIND_COLOURS.get(k, "#999999"),
                              label=f"{_KIND_NAMES.get(k, k)}"
                                    + (": fixed-size state" if k == "kda" else
                                       ": cache grows with T"))
                        for k in kinds], loc="outside lower center", ncols=len(kinds))


def _block(x: float, y: float, colour: str):
    from matplotlib.patches import Rectangle

    return Rectangle((x, y), 0.9, 0.8, facecolor=colour, edgecolor="white")


def _memory_config(preset: object) -> ModelConfig:
    _check_choice("preset", preset, list(MEMORY_PRESETS))
    return MEMORY_PRESETS[preset]  # type: ignore[index]


def draw_memory_calculator(fig: Figure, preset: str, context: int, number_format: str) -> None:
    """What one sequence (batch 1) keeps while decoding after ``context`` tokens.

    A stacked bar of the growing cache (KV or MLA latent), the recurrent states and the
    short-convolution inputs (``memory.cache_breakdown``); the title compares the total with the
    same model with every layer as multi-head attention (``memory.as_all_attention``).
    """
    config = _memory_config(preset)
    _check_int("context", context, 1, 2**24)
    _check_choice("number_format", number_format, list(NUMBER_FORMATS))
    dtype, state_dtype = NUMBER_FORMATS[number_format]
    real = cache_breakdown(config, context, dtype=dtype, state_dtype=state_dtype)
    base = cache_breakdown(as_all_attention(config), context, dtype=dtype)
    ax = fig.subplots()
    _, unit = _scaled(real.total_bytes)
    scale = 1024 ** {"GiB": 3, "MiB": 2, "KiB": 1, "B": 0}[unit]
    bottom = 0.0
    parts = (("cache", real.cache_bytes, f"KV / latent cache ({dtype}, grows with T)"),
             ("state", real.state_bytes, f"recurrent state ({state_dtype}, fixed)"),
             ("conv", real.conv_bytes, f"conv inputs ({dtype}, fixed)"))
    for key, value, label in parts:
        ax.bar(0, value / scale, bottom=bottom, color=PART_COLOURS[key], width=0.8,
               label=f"{label}:\n{format_bytes(value)}")
        bottom += value / scale
    ax.set_xticks([0], [f"{preset}\n{context:,} tokens"])
    ax.set_xlim(-0.6, 2.6)
    ax.set_ylim(0, bottom * 1.08 if bottom else 1)
    ax.grid(axis="x", visible=False)
    ratio = base.total_bytes / real.total_bytes
    style_axes(ax, "", f"bytes kept, batch 1 ({unit})",
               f"{preset}, T = {context_label(context)}: {format_bytes(real.total_bytes)}\n"
               f"every layer multi-head ({config.n_heads} × {config.head_dim}): "
               f"{format_bytes(base.total_bytes)}, {ratio:,.1f}× more")
    ax.legend(loc="upper right", fontsize=8.5, labelspacing=1.0)


def draw_bytes_vs_context(
    fig: Figure,
    configs: Sequence[ModelConfig] = (SOPHIA, as_all_attention(SOPHIA), KIMI_LINEAR_48B_A3B,
                                      DEEPSEEK_V3, LLAMA3_8B),
    max_context: int = 2**20,
    dtype: str = "bf16",
) -> None:
    """Total bytes kept while decoding one sequence (cache + state + conv) against the context
    length, log–log, from 256 tokens to ``max_context``; one line per model."""
    if not configs:
        raise ValueError("configs: expected at least one ModelConfig, got none")
    _check_int("max_context", max_context, 512, 2**24)
    _check_choice("dtype", dtype, BYTES_PER_ELEMENT)
    contexts = [2**p for p in range(8, max_context.bit_length())]
    ax = fig.subplots()
    styles = ("-", "--", "-", "-", "-", ":", "-")
    for i, config in enumerate(configs):
        totals = [cache_breakdown(config, t, dtype=dtype).total_bytes for t in contexts]
        ax.plot(contexts, [b / 2**20 for b in totals], linestyle=styles[i % len(styles)],
                linewidth=2, color=PALETTE[i % len(PALETTE)], label=config.name)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ticks = [t for t in contexts if t in (256, 4096, 32768, 131072, 2**20)]
    ax.set_xticks(ticks, [context_label(t) for t in ticks])
    ax.minorticks_off()
    style_axes(ax, "context T (tokens, log scale)",
               f"bytes kept per sequence ({dtype}, MiB, log scale)",
               "Cache + recurrent state + conv inputs, batch 1")
    ax.legend(loc="upper left")
