"""Draw the course's static diagrams into ``images/`` as SVG (run from the repository root).

    PYTHONPATH=code python tools/draw_diagrams.py          # rewrites images/*.svg

The diagrams in ``TRANSLATED`` are drawn in Chinese too (``images/<name>.zh_CN.svg``), their
text through :func:`attnlab.i18n.tr` (messages in ``code/attnlab/locale/zh_CN/diagrams.po``).

Each diagram is a function returning a matplotlib ``Figure`` in the course style (the palette of
:mod:`attnbook.plotting`), 6.4 inches wide with no text below ``NOTE_PT`` (see there).
Sophia's numbers come from :data:`attnlab.configs.SOPHIA` and :mod:`attnlab.memory`, never
typed. The SVG output is deterministic (fixed ``svg.hashsalt``, no date), so a test can
rebuild and compare.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import matplotlib
from attnbook.plotting import (
    GREY,
    KIND_COLOURS,
    PALETTE,
    SMALL_TEXT_PT,
    course_style,
    new_figure,
)
from attnlab.configs import SOPHIA
from attnlab.i18n import language, tr
from attnlab.kinds import KINDS
from attnlab.memory import layer_numbers
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Circle, FancyArrowPatch, Polygon, Rectangle

IMAGES = Path(__file__).resolve().parent.parent / "images"
WIDTH_IN = 6.4
#: Text sizes in points. The narrowest column seen, 342 CSS px on a 390-px phone, shows a
#: 6.4-inch figure at 342 / (6.4 · 72) = 0.74 px a point: 11 pt is then 8.2 px (15.9 px in the
#: 672-px desktop column), above the course's 10.5-pt minimum (SMALL_TEXT_PT).
NOTE_PT = max(11.0, SMALL_TEXT_PT)
TEXT_PT = 11.5
_SVG_RC = {"svg.hashsalt": "attnlab-diagrams", "svg.fonttype": "path"}


def _canvas(height: float) -> tuple[Figure, Axes]:
    """A blank figure WIDTH_IN × ``height`` inches with one frameless axes spanning it, whose
    data units are inches from the lower-left corner."""
    fig = new_figure(WIDTH_IN, height)
    fig.set_layout_engine(None)
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, WIDTH_IN)
    ax.set_ylim(0, height)
    ax.set_axis_off()
    return fig, ax


def _box(ax: Axes, x: float, y: float, w: float, h: float, colour: str, text: str = "", *,
         fill: float = 0.25, size: float = TEXT_PT, weight: str = "normal") -> None:
    """A rectangle with lower-left corner (x, y), edged in ``colour`` and tinted by ``fill``."""
    ax.add_patch(Rectangle((x, y), w, h, facecolor=colour, alpha=fill, edgecolor="none"))
    ax.add_patch(Rectangle((x, y), w, h, facecolor="none", edgecolor=colour, linewidth=1.4))
    if text:
        ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=size,
                weight=weight)


def _arrow(ax: Axes, start: tuple[float, float], end: tuple[float, float],
           colour: str = "black", **kw) -> None:
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=12,
                                 color=colour, linewidth=1.3, shrinkA=0, shrinkB=0, **kw))


def sophia_stack() -> Figure:
    """Sophia's 28 layers as seven groups of [KDA, KDA, KDA, MLA], and what each kind keeps."""
    pattern = SOPHIA.layer_pattern
    group = pattern.index("mla") + 1
    n_groups = len(pattern) // group
    kda = layer_numbers("kda", SOPHIA, 1)
    mla_per_token = layer_numbers("mla", SOPHIA, 1).cache
    fig, ax = _canvas(4.7)
    # the stack: one column per group, layer 1 at the bottom
    col_w, gap, box_h = 0.72, 0.17, 0.4
    left = (WIDTH_IN - n_groups * col_w - (n_groups - 1) * gap) / 2
    base = 2.25
    for g in range(n_groups):
        x = left + g * (col_w + gap)
        for j in range(group):
            kind = pattern[g * group + j]
            _box(ax, x, base + j * (box_h + 0.06), col_w, box_h, KIND_COLOURS[kind],
                 KINDS[kind].label, fill=0.55 if kind == "mla" else 0.25)
        first = g * group + 1
        ax.text(x + col_w / 2, base - 0.1, f"{first}–{first + group - 1}", ha="center",
                va="top", fontsize=NOTE_PT)
    ax.text(WIDTH_IN / 2, base + group * (box_h + 0.06) + 0.05,
            tr("{n} layers = [{group}] × {groups}\n(each column runs bottom to top, then the "
               "next one)", n=len(pattern), groups=n_groups,
               group=", ".join(KINDS[k].label for k in pattern[:group])),
            ha="center", va="bottom", fontsize=TEXT_PT, linespacing=1.4)
    # what a KDA layer keeps: a fixed state
    panel_y, panel_h, panel_w = 0.1, 1.6, 3.05
    c_kda, c_mla = KIND_COLOURS["kda"], KIND_COLOURS["mla"]
    _box(ax, 0.1, panel_y, panel_w, panel_h, c_kda, fill=0.08)
    ax.text(0.25, panel_y + panel_h - 0.12,
            tr("{n} KDA layers, each keeps\na fixed state", n=pattern.count("kda")),
            va="top", fontsize=TEXT_PT, weight="bold")
    ax.text(0.25, panel_y + 0.15,
            tr("{heads} heads × {d} × {d}\n= {state:,} numbers\n+ {conv:,} conv inputs,\n"
               "the same after 10 or 10⁶ tokens", heads=SOPHIA.n_heads, d=SOPHIA.head_dim,
               state=kda.state, conv=kda.conv), va="bottom", fontsize=NOTE_PT)
    for i in range(4):  # a few stacked squares: the heads' matrices
        off = 0.06 * i
        ax.add_patch(Rectangle((2.4 + off, 0.65 + off), 0.45, 0.45, facecolor="white",
                               edgecolor=c_kda, linewidth=1.2))
    # what an MLA layer keeps: a latent cache that grows
    x0 = WIDTH_IN - 0.1 - panel_w
    _box(ax, x0, panel_y, panel_w, panel_h, c_mla, fill=0.08)
    ax.text(x0 + 0.15, panel_y + panel_h - 0.12,
            tr("{n} MLA layers, each keeps\na latent cache that grows", n=pattern.count("mla")),
            va="top", fontsize=TEXT_PT, weight="bold")
    ax.text(x0 + 0.15, panel_y + 0.15,
            tr("{latent} + {rope} = {n:,} numbers\nper token: one more\nrow for every token",
               latent=SOPHIA.mla.kv_lora_rank, rope=SOPHIA.mla.qk_rope_head_dim, n=mla_per_token),
            va="bottom", fontsize=NOTE_PT)
    for i in range(6):  # rows of the cache, one per token
        ax.add_patch(Rectangle((x0 + 2.5, 0.3 + 0.12 * i), 0.45, 0.09, facecolor=c_mla,
                               alpha=0.3 + 0.1 * i, edgecolor="none"))
    _arrow(ax, (x0 + 2.4, 0.3), (x0 + 2.4, 1.02), c_mla)
    return fig


def chunk_split(n_chunks: int = 4, chunk: int = 4) -> Figure:
    """A sequence cut into chunks of C tokens: parallel work inside a chunk, a state between."""
    fig, ax = _canvas(3.0)
    tok, state_w = 0.24, 0.42
    chunk_w = chunk * tok
    span = n_chunks * chunk_w + (n_chunks + 1) * state_w
    x = (WIDTH_IN - span) / 2
    y_tok, y_state = 1.95, 0.95
    colour, state_c = PALETTE[0], PALETTE[1]
    for c in range(n_chunks + 1):
        _box(ax, x, y_state, state_w, 0.42, state_c, f"$S_{{{c * chunk}}}$", fill=0.5)
        if c == n_chunks:
            break
        cx = x + state_w
        for t in range(chunk):  # the chunk's tokens
            _box(ax, cx + t * tok, y_tok, tok, tok, colour, fill=0.25)
        ax.text(cx + chunk_w / 2, y_tok + tok + 0.08, tr("chunk {n}", n=c + 1), ha="center",
                va="bottom", fontsize=NOTE_PT)
        # the causal mask inside the chunk: a lower triangle, all of it computed at once
        top, bottom = y_tok - 0.1, y_tok - 0.55
        ax.add_patch(Polygon([(cx + 0.12, top), (cx + 0.12, bottom), (cx + chunk_w - 0.12, bottom)],
                             facecolor=colour, alpha=0.35, edgecolor=colour))
        # the state goes through the chunk and comes out updated once, at its end
        _arrow(ax, (cx, y_state + 0.21), (cx + chunk_w, y_state + 0.21), state_c)
        _arrow(ax, (cx + chunk_w / 2, bottom - 0.02), (cx + chunk_w / 2, y_state + 0.23), colour)
        x += state_w + chunk_w
    ax.text(WIDTH_IN / 2, 2.75, tr("T = {t} tokens in {n} chunks of C = {c}",
                                   t=n_chunks * chunk, n=n_chunks, c=chunk),
            ha="center", va="center", fontsize=TEXT_PT, weight="bold")
    ax.text(0.15, 0.62,
            tr("triangle: the chunk's C outputs at once, by matrix products over its\n"
               "tokens and the state carried in (parallel work); blue arrow: the chunk's\n"
               "one state update; orange: the state carried on, T / C = {n} sequential steps",
               n=n_chunks),
            va="top", fontsize=NOTE_PT)
    return fig


def mla_path() -> Figure:
    """MLA's data path at one token, with Sophia's sizes: h → the cached latent and shared key
    part → per-head keys and values, rebuilt from the latent and never cached."""
    mla = SOPHIA.mla
    fig, ax = _canvas(3.5)
    blue, orange, green = PALETTE[0], PALETTE[1], PALETTE[2]
    _box(ax, 0.1, 1.35, 0.9, 0.7, GREY, f"$h_t$\n{SOPHIA.d_model}", fill=0.2)
    # the cache: latent c and the shared decoupled key part
    ax.add_patch(Rectangle((1.7, 0.55), 1.5, 2.35, facecolor="none", edgecolor=orange,
                           linewidth=1.6, linestyle=(0, (4, 3))))
    ax.text(2.45, 3.0, tr("cached: {n} a token", n=mla.cache_dim), ha="center", va="bottom",
            fontsize=TEXT_PT, weight="bold")
    _box(ax, 1.85, 1.75, 1.2, 0.85, orange,
         tr("latent {c}\n{n}", c="$c^{KV}_t$", n=mla.kv_lora_rank), fill=0.5)
    _box(ax, 1.85, 0.75, 1.2, 0.7, orange,
         tr("shared {k}\n{n}", k="$k^R_t$", n=mla.qk_rope_head_dim), fill=0.5)
    _arrow(ax, (1.0, 1.85), (1.85, 2.17))
    _arrow(ax, (1.0, 1.55), (1.85, 1.1))
    ax.text(1.3, 2.2, "$W^{DKV}$", ha="center", va="bottom", fontsize=NOTE_PT)
    ax.text(1.25, 1.1, "$W^{KR}$", ha="center", va="top", fontsize=NOTE_PT)
    # per-head keys and values, rebuilt from c when attending
    _box(ax, 3.85, 2.1, 1.4, 0.8, blue,
         tr("keys {k}\n{heads} heads × {d}", k="$k^C_{t,i}$", heads=mla.n_heads,
            d=mla.qk_nope_head_dim), size=NOTE_PT)
    _box(ax, 3.85, 1.0, 1.4, 0.8, green,
         tr("values {v}\n{heads} heads × {d}", v="$v^C_{t,i}$", heads=mla.n_heads,
            d=mla.v_head_dim), size=NOTE_PT)
    _arrow(ax, (3.05, 2.4), (3.85, 2.5))
    _arrow(ax, (3.05, 1.95), (3.85, 1.4))
    ax.text(3.45, 2.5, "$W^{UK}_i$", ha="center", va="bottom", fontsize=NOTE_PT)
    ax.text(3.6, 1.72, "$W^{UV}_i$", ha="left", va="bottom", fontsize=NOTE_PT)
    _box(ax, 5.45, 1.9, 0.85, 0.8, blue, tr("head key\n{k}", k="$[k^C_{t,i}; k^R_t]$"),
         size=NOTE_PT)
    _arrow(ax, (5.25, 2.5), (5.45, 2.4))
    # under the values box, then up into the head key: the arrow crosses no text
    _arrow(ax, (3.05, 0.9), (6.1, 1.9), connectionstyle="angle,angleA=0,angleB=90,rad=0")
    ax.text(3.85, 3.0, tr("rebuilt per head, never cached"), ha="left", va="bottom",
            fontsize=NOTE_PT)
    shared_key = (tr("{k}: one key part shared by all heads,\nrotated by RoPE in DeepSeek-V3; "
                     "Sophia's is rotated too", k="$k^R_t$") if mla.rope else
                  tr("{k}: one key part shared by all heads,\nrotated by RoPE in DeepSeek-V3; "
                     "Sophia's is left unrotated, NoPE", k="$k^R_t$"))
    ax.text(0.1, 0.05, shared_key,
            fontsize=NOTE_PT, va="bottom")
    return fig


def transformer_block() -> Figure:
    """Sophia's block (Lesson 16): the mixer is KDA or MLA."""
    mixer = tr(" or ").join(KINDS[k].label for k in dict.fromkeys(SOPHIA.layer_pattern))
    return _prenorm_block(tr("mixer\n({mixer})", mixer=mixer), KIND_COLOURS["kda"])


def attention_block() -> Figure:
    """The transformer block of Lesson 5b: the mixer is softmax attention."""
    return _prenorm_block(tr("softmax\nattention"), KIND_COLOURS["attn"])


def _prenorm_block(mixer_label: str, mixer_colour: str) -> Figure:
    """One pre-norm residual block: x ← x + Mixer(RMSNorm(x)), then x ← x + MLP(RMSNorm(x))."""
    fig, ax = _canvas(1.85)
    stream_y, branch_y, box_h = 1.3, 0.12, 0.6
    mid = branch_y + box_h / 2
    ax.plot([0.45, 6.02], [stream_y, stream_y], color="black", linewidth=1.6)
    ax.text(0.3, stream_y, "x", ha="right", va="center", fontsize=TEXT_PT)
    _arrow(ax, (6.02, stream_y), (6.35, stream_y))
    ax.text(WIDTH_IN / 2, 1.8,
            tr("the residual stream x: each step adds to it, none replaces it"),
            ha="center", va="top", fontsize=NOTE_PT)
    for x0, label, colour in ((0.55, mixer_label, mixer_colour),
                              (3.35, tr("MLP\n(SwiGLU)"), PALETTE[2])):
        ax.plot([x0 + 0.15, x0 + 0.15], [stream_y, mid], color="black", linewidth=1.3)
        _arrow(ax, (x0 + 0.15, mid), (x0 + 0.35, mid))
        _box(ax, x0 + 0.35, branch_y, 0.92, box_h, GREY, "RMSNorm", fill=0.2, size=NOTE_PT)
        _arrow(ax, (x0 + 1.27, mid), (x0 + 1.4, mid))
        _box(ax, x0 + 1.4, branch_y, 1.12, box_h, colour, label, size=NOTE_PT)
        plus = x0 + 2.67
        ax.plot([x0 + 2.52, plus], [mid, mid], color="black", linewidth=1.3)
        _arrow(ax, (plus, mid), (plus, stream_y - 0.13))
        ax.add_patch(Circle((plus, stream_y), 0.13, facecolor="white", edgecolor="black",
                            linewidth=1.3, zorder=3))
        ax.text(plus, stream_y, "+", ha="center", va="center", fontsize=TEXT_PT, zorder=4)
    return fig


#: Diagrams drawn in Chinese too, as ``images/<name>.zh_CN.svg``: the Chinese edition shows that
#: file in place of ``<name>.svg`` (Sphinx's ``figure_language_filename``).
TRANSLATED = ("sophia_stack", "chunk_split", "mla_path", "attention_block", "transformer_block")

DIAGRAMS: dict[str, Callable[[], Figure]] = {
    "sophia_stack": sophia_stack,
    "chunk_split": chunk_split,
    "mla_path": mla_path,
    "transformer_block": transformer_block,
    "attention_block": attention_block,
}


def write_svg(fig: Figure, path: Path) -> None:
    """Save ``fig`` as a deterministic SVG at ``path``."""
    with matplotlib.rc_context(_SVG_RC):
        fig.savefig(path, format="svg", metadata={"Date": None})


def main(out_dir: Path = IMAGES) -> list[Path]:
    """Draw every diagram into ``out_dir``; return the paths written."""
    out_dir.mkdir(exist_ok=True)
    written = []
    for name, draw in DIAGRAMS.items():
        for lang in ("en", "zh_CN") if name in TRANSLATED else ("en",):
            path = out_dir / (f"{name}.svg" if lang == "en" else f"{name}.{lang}.svg")
            with language(lang), course_style():  # the course's fonts, a CJK one included
                write_svg(draw(), path)
            written.append(path)
    return written


if __name__ == "__main__":
    for p in main(Path(sys.argv[1]) if len(sys.argv) > 1 else IMAGES):
        print(p)
