"""Figures of Lesson 16 (the hybrid stack): layer patterns and decoding memory."""

from __future__ import annotations

from collections.abc import Sequence

from matplotlib.figure import Figure
from matplotlib.patches import Patch

from attnlab.checks import check_choice, check_int_in
from attnlab.configs import (
    DEEPSEEK_V3,
    KIMI_LINEAR_48B_A3B,
    LLAMA3_8B,
    SOPHIA,
    ModelConfig,
)
from attnlab.i18n import tr
from attnlab.kinds import KINDS
from attnlab.memory import (
    BYTES_PER_ELEMENT,
    as_all_attention,
    cache_breakdown,
    format_bytes,
)

from ..plotting import (
    KIND_COLOURS,
    PALETTE,
    SMALL_TEXT_PT,
    context_label,
    style_axes,
)

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


def model_name(config: ModelConfig) -> str:
    """A model's name in a legend, in the reader's language: the all-attention baseline that
    ``memory.as_all_attention`` names "X (all attention)" is named by ``tr``."""
    base, sep, tail = config.name.rpartition(" (all attention)")
    if sep and not tail:
        return tr("{name} (all attention)", name=base)
    return config.name


def number_format_label(number_format: str) -> str:
    """What the calculator's format control shows for ``number_format`` (a key of
    ``NUMBER_FORMATS``), in the reader's language."""
    check_choice("number_format", number_format, list(NUMBER_FORMATS))
    if number_format == "bf16, fp32 state":
        return tr("bf16, fp32 state")
    return number_format


def memory_calculator_alt(
    preset: str, context: int, number_format: str
) -> str:
    """The alt text of a frame of the memory calculator."""
    return tr(
        "Stacked bar of the bytes {model} keeps for one sequence of {context:,} tokens in "
        "{number_format}: the growing KV or latent cache, the fixed recurrent state and the "
        "fixed convolution inputs, with the all-attention total in the title.",
        model=preset,
        context=context,
        number_format=number_format_label(number_format),
    )


def _scaled(n_bytes: float) -> tuple[float, str]:
    """A byte count in the binary unit that keeps it between 1 and 1024: (value, unit)."""
    for power, unit in ((3, "GiB"), (2, "MiB"), (1, "KiB")):
        if n_bytes >= 1024**power:
            return n_bytes / 1024**power, unit
    return float(n_bytes), "B"


def draw_layer_pattern(
    fig: Figure,
    configs: Sequence[ModelConfig] = (SOPHIA, KIMI_LINEAR_48B_A3B),
) -> None:
    """One coloured block per layer (KDA, MLA, attention), one row per model, layer 1 on the left.
    The row label counts the layers of each kind."""
    if not configs:
        raise ValueError(
            "configs: expected at least one ModelConfig, got none"
        )
    for config in configs:
        if not isinstance(config, ModelConfig):
            raise ValueError(
                f"configs: expected ModelConfigs, got {type(config).__name__}"
            )
    ax = fig.subplots()
    n_max = max(c.n_layers for c in configs)
    for row, config in enumerate(configs):
        y = len(configs) - 1 - row
        for i, kind in enumerate(config.layer_pattern):
            ax.add_patch(_block(i, y, KIND_COLOURS.get(kind, "#999999")))
            ax.text(
                i + 0.45,
                y + 0.4,
                KINDS[kind].label[0],
                ha="center",
                va="center",
                fontsize=SMALL_TEXT_PT,
                color="white",
                fontweight="bold",
            )
        counts = " + ".join(
            f"{config.count(k)} {KINDS[k].label}"
            for k in dict.fromkeys(config.layer_pattern)
        )
        ax.text(
            -0.6,
            y + 0.4,
            f"{config.name}\n{counts}",
            ha="right",
            va="center",
            fontsize=SMALL_TEXT_PT,
        )
    ax.set_xlim(-0.3, n_max + 0.2)
    ax.set_ylim(-0.3, len(configs) + 0.1)
    ax.set_yticks([])
    ax.set_xticks(
        [i + 0.45 for i in range(0, n_max, 4)] + [n_max - 1 + 0.45],
        [str(i + 1) for i in range(0, n_max, 4)] + [str(n_max)],
    )
    ax.grid(False)
    for side in ("left", "bottom"):
        ax.spines[side].set_visible(False)
    ax.set_xlabel(tr("layer (1 = first, next to the embeddings)"))
    kinds = dict.fromkeys(k for c in configs for k in c.layer_pattern)
    fig.legend(
        handles=[
            Patch(
                color=KIND_COLOURS.get(k, "#999999"),
                label=(
                    tr("{kind}: cache grows with T", kind=KINDS[k].label)
                    if KINDS[k].grows
                    else tr("{kind}: fixed-size state", kind=KINDS[k].label)
                ),
            )
            for k in kinds
        ],
        loc="outside lower center",
        ncols=len(kinds),
    )


def _block(x: float, y: float, colour: str):
    from matplotlib.patches import Rectangle

    return Rectangle((x, y), 0.9, 0.8, facecolor=colour, edgecolor="white")


def _memory_config(preset: object) -> ModelConfig:
    check_choice("preset", preset, list(MEMORY_PRESETS))
    return MEMORY_PRESETS[preset]  # type: ignore[index]


def draw_memory_calculator(
    fig: Figure, preset: str, context: int, number_format: str
) -> None:
    """What one sequence (batch 1) keeps while decoding after ``context`` tokens.

    A stacked bar of the growing cache (KV or MLA latent), the recurrent states and the
    short-convolution inputs (``memory.cache_breakdown``); the title compares the total with the
    same model with every layer as multi-head attention (``memory.as_all_attention``).
    """
    config = _memory_config(preset)
    check_int_in("context", context, 1, 2**24)
    check_choice("number_format", number_format, list(NUMBER_FORMATS))
    dtype, state_dtype = NUMBER_FORMATS[number_format]
    real = cache_breakdown(
        config, context, dtype=dtype, state_dtype=state_dtype
    )
    base = cache_breakdown(as_all_attention(config), context, dtype=dtype)
    ax = fig.subplots()
    _, unit = _scaled(real.total_bytes)
    scale = 1024 ** {"GiB": 3, "MiB": 2, "KiB": 1, "B": 0}[unit]
    bottom = 0.0
    parts = (
        (
            "cache",
            real.cache_bytes,
            tr(
                "KV / latent cache ({dtype}, grows with T):\n{size}",
                dtype=dtype,
                size=format_bytes(real.cache_bytes),
            ),
        ),
        (
            "state",
            real.state_bytes,
            tr(
                "recurrent state ({dtype}, fixed):\n{size}",
                dtype=state_dtype,
                size=format_bytes(real.state_bytes),
            ),
        ),
        (
            "conv",
            real.conv_bytes,
            tr(
                "conv inputs ({dtype}, fixed):\n{size}",
                dtype=dtype,
                size=format_bytes(real.conv_bytes),
            ),
        ),
    )
    for key, value, label in parts:
        ax.bar(
            0,
            value / scale,
            bottom=bottom,
            color=PART_COLOURS[key],
            width=0.8,
            label=label,
        )
        bottom += value / scale
    ax.set_xticks(
        [0],
        [tr("{model}\n{context:,} tokens", model=preset, context=context)],
    )
    ax.set_xlim(-0.6, 2.6)
    ax.set_ylim(0, bottom * 1.08 if bottom else 1)
    ax.grid(axis="x", visible=False)
    ratio = base.total_bytes / real.total_bytes
    style_axes(
        ax,
        "",
        tr("bytes kept ({unit})", unit=unit),
        tr(
            "{model}, T = {context}: {total}\n"
            "every layer multi-head ({heads} × {dim}): {base}, {ratio:,.1f}× more",
            model=preset,
            context=context_label(context),
            total=format_bytes(real.total_bytes),
            heads=config.n_heads,
            dim=config.head_dim,
            base=format_bytes(base.total_bytes),
            ratio=ratio,
        ),
    )
    ax.legend(loc="upper right", fontsize=SMALL_TEXT_PT, labelspacing=1.0)


def draw_bytes_vs_context(
    fig: Figure,
    configs: Sequence[ModelConfig] = (
        SOPHIA,
        as_all_attention(SOPHIA),
        KIMI_LINEAR_48B_A3B,
        DEEPSEEK_V3,
        LLAMA3_8B,
    ),
    max_context: int = 2**20,
    dtype: str = "bf16",
) -> None:
    """Total bytes kept while decoding one sequence (cache + state + conv) against the context
    length, log–log, from 256 tokens to ``max_context``; one line per model."""
    if not configs:
        raise ValueError(
            "configs: expected at least one ModelConfig, got none"
        )
    check_int_in("max_context", max_context, 512, 2**24)
    check_choice("dtype", dtype, BYTES_PER_ELEMENT)
    contexts = [2**p for p in range(8, max_context.bit_length())]
    ax = fig.subplots()
    styles = ("-", "--", "-", "-", "-", ":", "-")
    for i, config in enumerate(configs):
        totals = [
            cache_breakdown(config, t, dtype=dtype).total_bytes
            for t in contexts
        ]
        ax.plot(
            contexts,
            [b / 2**20 for b in totals],
            linestyle=styles[i % len(styles)],
            linewidth=2,
            color=PALETTE[i % len(PALETTE)],
            label=model_name(config),
        )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ticks = [t for t in contexts if t in (256, 4096, 32768, 131072, 2**20)]
    ax.set_xticks(ticks, [context_label(t) for t in ticks])
    ax.minorticks_off()
    style_axes(
        ax,
        tr("context T (tokens, log scale)"),
        tr("bytes kept per sequence ({dtype}, MiB, log scale)", dtype=dtype),
        tr("Cache + recurrent state + conv inputs, batch 1"),
    )
    ax.legend(loc="upper left")
