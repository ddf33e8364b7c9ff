"""Figures of Lesson 19 (Sophia-nano, end to end): training loss and the hybrid cache's bytes per
layer while the tiny model generates. They draw numbers measured in the lesson; they compute
nothing themselves."""

from __future__ import annotations

from collections.abc import Sequence

from matplotlib.figure import Figure
from matplotlib.patches import Patch

from attnlab.i18n import tr
from attnlab.kinds import KINDS

from ..plotting import KIND_COLOURS, PALETTE, SMALL_TEXT_PT, style_axes

_KIB = 1024


def _check_history(
    tokens: Sequence[int],
    layer_bytes: Sequence[Sequence[int]],
    kinds: Sequence[str],
) -> None:
    if not kinds:
        raise ValueError("kinds: expected one layer kind per layer, got none")
    for kind in kinds:
        if kind not in KINDS:
            raise ValueError(f"kinds: unknown layer kind {kind!r}")
    if not tokens or len(tokens) != len(layer_bytes):
        raise ValueError(
            f"layer_bytes: expected one row per entry of tokens ({len(tokens)}), "
            f"got {len(layer_bytes)}"
        )
    for row in layer_bytes:
        if len(row) != len(kinds):
            raise ValueError(
                f"layer_bytes: expected {len(kinds)} numbers per row (one per layer), "
                f"got {len(row)}"
            )


def _colour(kind: str) -> str:
    return KIND_COLOURS.get(kind, PALETTE[2])


def training_loss_alt() -> str:
    """The alt text of the training-loss figure (as the lesson's run draws it)."""
    return tr(
        "Training loss of Sophia-nano per step, falling from about 4 to about 1 nat per token "
        "in 70 steps, with the corpus's entropy floor as a dashed line just below."
    )


def cache_growth_alt() -> str:
    """The alt text of the cache-growth figure (as the lesson's run draws it)."""
    return tr(
        "Bytes per layer against tokens in the cache: the six KDA layers form one flat line "
        "at about 10 KiB, the two MLA layers one straight line rising from zero and crossing "
        "it near 55 tokens."
    )


def cache_at_step_alt(tokens: int) -> str:
    """The alt text of a frame of the cache-at-step panel after ``tokens`` tokens."""
    return tr(
        "Bar chart of the cache bytes of each of Sophia-nano's 8 layers after {tokens} "
        "tokens: six equal KDA bars and two MLA bars whose height grows with the number of "
        "tokens.",
        tokens=tokens,
    )


def draw_training_loss(
    fig: Figure, losses: Sequence[float], floor: float | None = None
) -> None:
    """Training loss per step (nats per token) and, dashed, the corpus's entropy floor."""
    if not losses:
        raise ValueError("losses: expected at least one loss value, got none")
    ax = fig.subplots()
    steps = range(1, len(losses) + 1)
    ax.plot(
        steps,
        losses,
        color=PALETTE[0],
        lw=1.6,
        label=tr("training loss (one batch per step)"),
    )
    if floor is not None:
        ax.axhline(
            floor,
            color=PALETTE[5],
            ls="--",
            lw=1.2,
            label=tr("lowest possible loss on this corpus: {floor:.2f}", floor=floor),
        )
    ax.set_ylim(0, max(max(losses), floor or 0) * 1.05)
    ax.legend(loc="upper right", fontsize=SMALL_TEXT_PT)
    style_axes(
        ax,
        tr("training step"),
        tr("cross-entropy (nats per token)"),
        tr(
            "Sophia-nano learning the toy corpus: {first:.2f} → {last:.2f}",
            first=losses[0],
            last=losses[-1],
        ),
    )


def draw_cache_growth(
    fig: Figure,
    tokens: Sequence[int],
    layer_bytes: Sequence[Sequence[int]],
    kinds: Sequence[str],
) -> None:
    """Bytes held by each layer's decoding cache against the tokens it has seen.

    ``tokens[i]`` tokens held at record ``i``; ``layer_bytes[i][l]`` the bytes of layer ``l``
    then; ``kinds[l]`` its kind. Layers of one kind with equal bytes draw on top of each other.
    """
    _check_history(tokens, layer_bytes, kinds)
    ax = fig.subplots()
    seen = set()
    for layer, kind in enumerate(kinds):
        series = [row[layer] / _KIB for row in layer_bytes]
        label = tr(
            "{kind} layers ({n})", kind=KINDS[kind].label, n=list(kinds).count(kind)
        )
        ax.plot(
            tokens,
            series,
            color=_colour(kind),
            lw=2.2 if kind == "mla" else 3.0,
            label=None if kind in seen else label,
        )
        seen.add(kind)
    ax.set_ylim(0, max(max(row) for row in layer_bytes) / _KIB * 1.1)
    ax.set_xlim(0, max(tokens))
    ax.legend(loc="upper left", fontsize=SMALL_TEXT_PT)
    style_axes(
        ax,
        tr("tokens in the cache (prompt + generated)"),
        tr("bytes per layer (KiB)"),
        tr("Each layer's cache while Sophia-nano generates"),
    )


def draw_cache_at_step(
    fig: Figure,
    tokens: int,
    history_tokens: Sequence[int],
    layer_bytes: Sequence[Sequence[int]],
    kinds: Sequence[str],
) -> None:
    """One bar per layer: the bytes its cache holds after ``tokens`` tokens, on a fixed scale
    (the largest value of the whole history), so moving ``tokens`` shows the MLA bars grow."""
    _check_history(history_tokens, layer_bytes, kinds)
    if tokens not in history_tokens:
        raise ValueError(
            f"tokens: expected one of the recorded token counts {list(history_tokens)}, "
            f"got {tokens!r}"
        )
    row = layer_bytes[list(history_tokens).index(tokens)]
    ax = fig.subplots()
    x = range(1, len(kinds) + 1)
    ax.bar(
        x,
        [b / _KIB for b in row],
        color=[_colour(k) for k in kinds],
        width=0.7,
    )
    ax.set_ylim(0, max(max(r) for r in layer_bytes) / _KIB * 1.15)
    ax.set_xticks(
        list(x),
        [f"{i}\n{KINDS[k].label}" for i, k in zip(x, kinds, strict=True)],
    )
    ax.legend(
        handles=[
            Patch(color=_colour(k), label=KINDS[k].label)
            for k in dict.fromkeys(kinds)
        ],
        loc="upper left",
        fontsize=SMALL_TEXT_PT,
    )
    style_axes(
        ax,
        tr("layer"),
        tr("cache bytes (KiB)"),
        tr(
            "After {tokens} tokens: {kib:,.1f} KiB in all layers",
            tokens=tokens,
            kib=sum(row) / _KIB,
        ),
    )
