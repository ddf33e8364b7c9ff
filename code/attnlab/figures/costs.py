"""Figures for Lessons 18 (the cost of a token, measured) and 20 (the map of the family)."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache

import torch
import torch.nn.functional as F
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from ..configs import SOPHIA, SOPHIA_NANO, ModelConfig
from ..delta import delta_rule_recurrent, gated_delta_rule_recurrent
from ..gated import gla_recurrent, retnet_decay
from ..kda import kda_recurrent
from ..kv_cache import crossover_context, stack_cost
from ..linear import linear_attention_recurrent
from ..memory import BYTES_PER_ELEMENT, format_bytes, layer_numbers
from ..mla import MultiHeadLatentAttention
from ..plotting import PALETTE, heatmap, style_axes

ATTN_COLOUR, KDA_COLOUR, CROSS_COLOUR = PALETTE[1], PALETTE[0], PALETTE[7]

# ---------------------------------------------------------------- Lesson 18: measured costs


@dataclass(frozen=True)
class CostData:
    """Measured per-token costs of one head configuration (batch 1, float32, one layer each):
    the attention read at each context (seconds, cache bytes) and one KDA step (constant)."""

    label: str
    n_heads: int
    head_dim: int
    contexts: tuple[int, ...]
    attn_seconds: tuple[float, ...]
    attn_bytes: tuple[int, ...]
    kda_seconds: float
    kda_bytes: int

    def __post_init__(self) -> None:
        n = len(self.contexts)
        if n < 2:
            raise ValueError(f"contexts: expected at least 2 context lengths, got {n}")
        for name in ("attn_seconds", "attn_bytes"):
            if len(getattr(self, name)) != n:
                raise ValueError(f"{name}: expected {n} values (one per context), "
                                 f"got {len(getattr(self, name))}")


QUANTITIES = ("time", "memory")
SCOPES = ("one layer", "3:1 stack")


def _context_label(tokens: float) -> str:
    if tokens >= 1024 and tokens % 1024 == 0:
        return f"{int(tokens) // 1024}k"
    return f"{tokens:,.0f}"


def cost_curves(
    data: CostData, quantity: str, scope: str, pattern: Sequence[str]
) -> tuple[list[float], list[float], str]:
    """The two curves a panel draws: (growing, fixed-state) per context, and the unit label.

    quantity "time": milliseconds per token; "memory": MiB. scope "one layer": the attention
    layer against the KDA layer; "3:1 stack": ``stack_cost`` over ``pattern`` for a stack of
    attention layers only against the hybrid (global layers = the measured attention layer).
    """
    if quantity not in QUANTITIES:
        raise ValueError(f"quantity: expected one of {list(QUANTITIES)}, got {quantity!r}")
    if scope not in SCOPES:
        raise ValueError(f"scope: expected one of {list(SCOPES)}, got {scope!r}")
    if quantity == "time":
        attn, fixed, unit, factor = data.attn_seconds, data.kda_seconds, "ms per token", 1e3
    else:
        attn, fixed, unit, factor = data.attn_bytes, data.kda_bytes, "MiB", 2.0**-20
    if scope == "one layer":
        grow = [a * factor for a in attn]
        flat = [fixed * factor] * len(attn)
    else:
        pattern = tuple(pattern)
        all_global = ("attn",) * len(pattern)
        grow = [stack_cost(all_global, a, fixed) * factor for a in attn]
        flat = [stack_cost(pattern, a, fixed) * factor for a in attn]
    return grow, flat, unit


def draw_costs(
    fig: Figure,
    data: CostData,
    *,
    quantity: str = "time",
    scope: str = "one layer",
    pattern: Sequence[str] = SOPHIA_NANO.layer_pattern,
) -> None:
    """Measured cost of one decoded token against the context (log-log): the attention layer
    (or an all-attention stack) against the KDA layer (or the 3:1 hybrid), with the crossing."""
    grow, flat, unit = cost_curves(data, quantity, scope, pattern)
    ax = fig.subplots()
    contexts = list(data.contexts)
    n_layers = len(tuple(pattern))
    if scope == "one layer":
        names = ("softmax attention (KV cache)", "KDA (fixed state)")
    else:
        n_rec = n_layers - sum(k in ("attn", "mla") for k in pattern)
        names = (f"{n_layers} attention layers", f"hybrid: {n_rec} KDA + {n_layers - n_rec} attn")
    ax.plot(contexts, grow, "o-", color=ATTN_COLOUR, label=names[0])
    ax.plot(contexts, flat, "s--" if scope == "3:1 stack" else "s-", color=KDA_COLOUR,
            label=names[1])
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(contexts, [_context_label(c) for c in contexts])
    ax.minorticks_off()  # minor log ticks cost most of a frame's rendering time
    what = "time per token" if quantity == "time" else "decoding memory"
    style_axes(ax, "context length T (tokens, log scale)", f"{what} ({unit}, log)")
    # Stack: n_attn·a(T) + n_rec·a(T) against n_attn·a(T) + n_rec·c differ by n_rec·(a(T) − c),
    # so the stacks cross exactly where the single layers do.
    one_grow, one_flat, _ = cost_curves(data, quantity, "one layer", pattern)
    cross = crossover_context(contexts, one_grow, one_flat[0])
    if cross is not None and cross > contexts[0]:
        ax.axvline(cross, color=CROSS_COLOUR, lw=1, ls=":")
        ax.annotate(f"cross ≈ {cross:,.0f}", (cross, min(grow + flat)), rotation=90,
                    fontsize=8, ha="right", va="bottom")
    ratio = grow[-1] / flat[-1]
    ax.set_title(f"{data.label}: at {_context_label(contexts[-1])} the cache side costs "
                 f"{ratio:,.1f}× ({what})", fontsize=10)
    ax.legend(loc="upper left")


# ---------------------------------------------------------------- Lesson 20: the map


@dataclass(frozen=True)
class Architecture:
    """One row of the map: the layer kind whose memory it has, its update rule and traits."""

    name: str
    kind: str
    rule: str
    forget: str
    correct: str
    gate: str
    training: str
    decoding: str


ARCHITECTURES: dict[str, Architecture] = {a.name: a for a in (
    Architecture("softmax attention", "attn",
                 r"$K_{1:t}=[K_{1:t-1};k_t^\top],\ V_{1:t}=[V_{1:t-1};v_t^\top]$",
                 "no (keeps all)", "no", "none", "O(T² d)", "O(T d)"),
    Architecture("linear attention", "linear", r"$S_t=S_{t-1}+k_tv_t^\top$",
                 "no", "no", "none", "O(T d²) chunkwise", "O(d²)"),
    Architecture("RetNet", "gla", r"$S_t=\gamma\,S_{t-1}+k_tv_t^\top$",
                 "yes, fixed rate", "no", "fixed scalar per head", "O(T d²) chunkwise", "O(d²)"),
    Architecture("Mamba2", "gla", r"$S_t=\alpha_t\,S_{t-1}+k_tv_t^\top$",
                 "yes", "no", "scalar per head and token", "O(T d²) chunkwise", "O(d²)"),
    Architecture("GLA", "gla", r"$S_t=\mathrm{Diag}(\alpha_t)\,S_{t-1}+k_tv_t^\top$",
                 "yes", "no", "per channel and token", "O(T d²) chunkwise", "O(d²)"),
    Architecture("DeltaNet", "deltanet",
                 r"$S_t=(I-\beta_tk_tk_t^\top)\,S_{t-1}+\beta_tk_tv_t^\top$",
                 "only by overwriting", "yes", "none (β: write strength)",
                 "O(T(Cd + d²)) chunkwise (WY)", "O(d²)"),
    Architecture("Gated DeltaNet", "gdn",
                 r"$S_t=\alpha_t(I-\beta_tk_tk_t^\top)\,S_{t-1}+\beta_tk_tv_t^\top$",
                 "yes", "yes", "scalar per head and token", "O(T(Cd + d²)) chunkwise (WY)",
                 "O(d²)"),
    Architecture("KDA", "kda",
                 r"$S_t=(I-\beta_tk_tk_t^\top)\mathrm{Diag}(\alpha_t)S_{t-1}+\beta_tk_tv_t^\top$",
                 "yes", "yes", "per channel and token", "O(T(Cd + d²)) chunkwise (WY)", "O(d²)"),
    Architecture("MLA", "mla", r"$C_{1:t}=[C_{1:t-1};(c_t^{KV},k^R_t)^\top]$",
                 "no (keeps all)", "no", "none", "O(T² d)", "O(T (d_c + d_R)) absorbed"),
)}
"""The nine mechanisms of the map, in the order of the course."""


_SUBSCRIPT = str.maketrans("0123456789+-=()aehijklmnoprstuvx",
                           "₀₁₂₃₄₅₆₇₈₉₊₋₌₍₎ₐₑₕᵢⱼₖₗₘₙₒₚᵣₛₜᵤᵥₓ")
_SUPERSCRIPT = str.maketrans("0123456789+-=()KRTVn", "⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻⁼⁽⁾ᴷᴿᵀⱽⁿ")
_TEX_SYMBOLS = {r"\alpha": "α", r"\beta": "β", r"\gamma": "γ", r"\top": "T", r"\,": "\u2009",
                r"\ ": " "}


def plain_rule(rule: str) -> str:
    """An update rule of ``ARCHITECTURES`` (TeX) as plain Unicode text, e.g.
    ``$S_t=\\gamma\\,S_{t-1}+k_tv_t^\\top$`` → "Sₜ = γ Sₜ₋₁ + kₜvₜᵀ": a figure title drawn
    without mathtext, whose parsing costs more than the rest of the title."""
    text = re.sub(r"\\mathrm\{(\w+)\}", r"\1", rule.strip("$"))
    for command, symbol in _TEX_SYMBOLS.items():
        text = text.replace(command, symbol)

    def script(match: re.Match) -> str:
        body = match.group(2).strip("{}")
        return body.translate(_SUBSCRIPT if match.group(1) == "_" else _SUPERSCRIPT)

    text = re.sub(r"([_^])(\{[^{}]*\}|.)", script, text)
    text = re.sub(r"([;,])(?=\S)", r"\1 ", text)
    return text.replace("-", " − ").replace("=", " = ").replace("+", " + ")


def decoding_numbers(arch: str, config: ModelConfig, context: int) -> int:
    """Numbers one layer of ``arch`` keeps after ``context`` tokens with ``config``'s head dims:
    its cache (attention, MLA) or its state (the recurrent kinds), from ``memory.layer_numbers``.
    Short-convolution inputs are left out (a few rows, constant, and not part of every design)."""
    if arch not in ARCHITECTURES:
        raise ValueError(f"arch: expected one of {list(ARCHITECTURES)}, got {arch!r}")
    n = layer_numbers(ARCHITECTURES[arch].kind, config, context)
    return n.cache + n.state


@cache
def _memory_picture(arch: str, tokens: int = 16, dim: int = 8, seed: int = 0) -> torch.Tensor:
    """What one head of ``arch`` holds after ``tokens`` random tokens (dk = dv = ``dim``): the
    state S [dk, dv] for the recurrent kinds (run through the package's kernel), the cache rows
    [T, dk + dv] for softmax attention and [T, d_c + d_R] for MLA. Computed once per set of
    arguments (a slider revisits them): treat the result as read-only."""
    gen = torch.Generator().manual_seed(seed)
    shape = (1, 1, tokens, dim)
    q, k, v = (torch.randn(*shape, generator=gen) for _ in range(3))
    k_unit = F.normalize(k, dim=-1)
    beta = torch.rand(1, 1, tokens, generator=gen)
    g_scalar = -0.5 * torch.rand(1, 1, tokens, generator=gen)
    g_channel = -0.5 * torch.rand(*shape, generator=gen)
    if arch == "softmax attention":
        return torch.cat([k[0, 0], v[0, 0]], dim=-1)
    if arch == "MLA":
        with torch.random.fork_rng(devices=[]):  # seeded weights, global generator untouched
            torch.manual_seed(seed)
            layer = MultiHeadLatentAttention(dim, 1, dim, kv_lora_rank=dim // 2,
                                             qk_rope_head_dim=dim // 4, rope=False)
        with torch.no_grad():
            _, cache = layer(torch.randn(1, tokens, dim, generator=gen), use_cache=True)
        return torch.cat([cache.c_kv[0], cache.k_rope[0]], dim=-1)
    if arch == "linear attention":
        _, s = linear_attention_recurrent(q, k, v, output_final_state=True)
    elif arch == "RetNet":
        g = retnet_decay(1)[None, :, None, None].expand(*shape).contiguous()
        _, s = gla_recurrent(q, k, v, g=g, output_final_state=True)
    elif arch == "Mamba2":
        _, s = gla_recurrent(q, k, v, g=g_scalar[..., None].expand(*shape).contiguous(),
                             output_final_state=True)
    elif arch == "GLA":
        _, s = gla_recurrent(q, k, v, g=g_channel, output_final_state=True)
    elif arch == "DeltaNet":
        _, s = delta_rule_recurrent(q, k_unit, v, beta=beta, output_final_state=True)
    elif arch == "Gated DeltaNet":
        _, s = gated_delta_rule_recurrent(q, k_unit, v, g=g_scalar, beta=beta,
                                          output_final_state=True)
    else:
        _, s = kda_recurrent(q, k_unit, v, g=g_channel, beta=beta, output_final_state=True)
    return s[0, 0]


MAP_CONTEXTS = (512, 2048, 8192, 32768, 131072, 524288)


@cache
def _map_mib(config: ModelConfig,
             contexts: tuple[int, ...] = MAP_CONTEXTS) -> dict[str, list[float]]:
    """MiB one layer of each mechanism keeps at each of ``contexts`` in bf16 (the map's curves)."""
    return {name: [decoding_numbers(name, config, t) * BYTES_PER_ELEMENT["bf16"] / 2**20
                   for t in contexts] for name in ARCHITECTURES}


def _log_ticks(ax: Axes, lo: float, hi: float, axis: str = "y",
               fmt: Callable[[float], str] = "{:,g}".format) -> None:
    """Log scale from ``lo`` to ``hi`` on ``axis`` ("x" or "y"), ticks at the powers of ten in
    that range labelled by ``fmt``: plain text, cheaper to draw than the default mathtext 10^k,
    and no minor ticks."""
    ticks = [10.0**e for e in range(math.ceil(math.log10(lo)), math.floor(math.log10(hi)) + 1)]
    set_scale, set_lim, set_ticks = ((ax.set_xscale, ax.set_xlim, ax.set_xticks) if axis == "x"
                                     else (ax.set_yscale, ax.set_ylim, ax.set_yticks))
    set_scale("log")
    set_lim(lo, hi)
    set_ticks(ticks, [fmt(t) for t in ticks])
    ax.minorticks_off()


def _decimal_bytes(n: float) -> str:
    """A round number of bytes in decimal units: 1e5 → "100 kB", 1e9 → "1 GB"."""
    units = ("B", "kB", "MB", "GB", "TB", "PB")
    order = min(max(0, int(math.log10(n) + 1e-9) // 3), len(units) - 1)
    return f"{n / 1000**order:g} {units[order]}"


def draw_architecture(fig: Figure, arch: str = "KDA", config: ModelConfig = SOPHIA) -> None:
    """Left: what one head of ``arch`` holds after 16 random tokens (state or cache rows).
    Right: the numbers one layer keeps against the context with ``config``'s head dims, in bf16
    (2 bytes each), ``arch`` in colour and the other eight in grey."""
    if arch not in ARCHITECTURES:
        raise ValueError(f"arch: expected one of {list(ARCHITECTURES)}, got {arch!r}")
    info = ARCHITECTURES[arch]
    left, right = fig.subplots(1, 2, gridspec_kw={"width_ratios": [1, 1.5]})
    picture = _memory_picture(arch)
    grows = info.kind in ("attn", "mla")
    lim = float(picture.abs().max())
    heatmap(left, picture, vmin=-lim, vmax=lim,
            xlabel="cached numbers per token" if grows else "value channel",
            ylabel="token" if grows else "key channel", cmap="PuOr")
    # y=1.0 fixes the title's place: matplotlib otherwise measures the tick labels to place it
    left.set_title("cache after 16 tokens (grows)" if grows else "state after 16 tokens (fixed)",
                   y=1.0)
    contexts = list(MAP_CONTEXTS)
    curves = _map_mib(config)
    others = [mib for name, mib in curves.items() if name != arch]
    # the eight grey curves as one Line2D (NaN breaks between them): one artist, not eight
    grey_x = [t for _ in others for t in [*contexts, math.nan]]
    grey_y = [m for mib in others for m in [*mib, math.nan]]
    right.plot(grey_x, grey_y, "-", color="0.8", lw=1, zorder=1)
    right.plot(contexts, curves[arch], "o-", color=ATTN_COLOUR, lw=2, zorder=3, label=arch)
    right.set_xscale("log", base=2)
    right.set_xticks(contexts, [_context_label(c) for c in contexts])
    every = [m for mib in curves.values() for m in mib]
    _log_ticks(right, min(every) / 1.5, max(every) * 1.5)
    left.set_xticks([0, picture.shape[1] - 1])
    left.set_yticks([0, picture.shape[0] - 1])
    style_axes(right, "context T (tokens)", "one layer's memory (MiB, bf16, log)")
    right.legend(loc="upper left")
    fig.suptitle(f"{arch}:  {plain_rule(info.rule)}", fontsize=12)


def draw_memory_by_architecture(fig: Figure, context: int = 4096,
                                config: ModelConfig = SOPHIA) -> None:
    """One layer's decoding memory for each of the nine mechanisms at ``context`` tokens, with
    ``config``'s head dims, in bf16: horizontal bars on a log axis, labelled in bytes."""
    if isinstance(context, bool) or not isinstance(context, int) or not 1 <= context <= 2**24:
        raise ValueError(f"context: expected an integer in [1, {2**24}], got {context!r}")
    ax = fig.subplots()
    names = list(ARCHITECTURES)
    n_bytes = [decoding_numbers(n, config, context) * BYTES_PER_ELEMENT["bf16"] for n in names]
    colours = [ATTN_COLOUR if ARCHITECTURES[n].kind in ("attn", "mla") else KDA_COLOUR
               for n in names]
    ax.barh(range(len(names)), n_bytes, color=colours)
    ax.set_yticks(range(len(names)), names)
    ax.tick_params(axis="y", length=0)
    ax.invert_yaxis()
    _log_ticks(ax, min(n_bytes) / 2, max(n_bytes) * 12, axis="x", fmt=_decimal_bytes)
    for i, b in enumerate(n_bytes):
        ax.text(b * 1.15, i, format_bytes(b), va="center", fontsize=8)
    style_axes(ax, "bytes one layer keeps (bf16, log scale)", "")
    ax.grid(axis="y", visible=False)  # the bars are categories: only the byte scale needs lines
    ax.set_title(f"{config.name}'s head dims ({config.n_heads} × {config.head_dim}), "
                 f"T = {context:,} tokens: orange grows with T, blue is fixed", fontsize=10,
                 y=1.0)  # a fixed place: matplotlib otherwise measures the ticks to place it
