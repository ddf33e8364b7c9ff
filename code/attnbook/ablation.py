"""Lesson 14's ablation: what the short convolution and the output norm buy on recall.

The recall study's KDA toy (:func:`attnbook.recall_study.recall_model`, two KDA layers) is
trained on MQAR in three variants, over seeds, with everything else the study's:

    full       the toy as the study trains it
    no_conv    short convolutions of width 1: each token's q, k, v see only that token
               (a learned scale per channel, no mixing over time)
    no_norm    KDA layers built with ``output_norm=False``: no RMSNorm of each head's
               output before the gate

``benchmarks/ablation_study.py`` runs it and stores the rows; Lesson 14 reads them back with
:func:`load_ablation` and states only what :func:`summarize_ablation` and :func:`verdict`
compute.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from attnlab.i18n import tr
from attnlab.layers import KDALayer
from attnlab.model import HybridLM

from .recall_study import StudyConfig, recall_model

ABLATION_PATH = (
    Path(__file__).resolve().parents[2]
    / "benchmarks"
    / "results"
    / "ablation_study.json"
)
"""Where ``benchmarks/ablation_study.py`` writes the shipped ablation (in the repository)."""

ABLATION_PATTERN = ("kda", "kda")
"""The layer pattern of the ablated toy: the recall study's two KDA layers."""

VARIANTS = {
    "full": "full KDA",
    "no_conv": "no short convolution",
    "no_norm": "no output norm",
}
"""The variants, in table order, and how a reader sees them named."""


def variant_name(variant: str) -> str:
    """``VARIANTS[variant]`` in the reader's language."""
    names = {
        "full": tr("full KDA"),
        "no_conv": tr("no short convolution"),
        "no_norm": tr("no output norm"),
    }
    return names[variant]


def _part_removed(variant: str) -> str:
    """The part an ablated variant removes, in the reader's language (after "the")."""
    parts = {"no_conv": tr("short convolution"), "no_norm": tr("output norm")}
    return parts[variant]


CLEAR_POINTS = 2.0
"""A seed counts as moved when its accuracy changes by more than this many percentage points;
a change is clear only when every seed moves the same way (:func:`verdict`)."""


CHANCE_POINTS = 5.0
"""An accuracy within this many percentage points of 1/N is "about as often as a blind pick
among the N values" (the test set scores about 1,000 answers at N = 2: two standard errors
of one seed's accuracy near 50 % are about 3 points)."""


def ablation_model(
    variant: str, pattern: Sequence[str], config: StudyConfig
) -> HybridLM:
    """The recall toy of ``pattern`` with the component ``variant`` names removed.

    ``"no_norm"`` swaps each KDA mixer for one built with ``output_norm=False`` that keeps
    every other weight, so that variant starts from the full model's weights.
    """
    if variant not in VARIANTS:
        raise ValueError(
            f"variant: expected one of {sorted(VARIANTS)}, got {variant!r}"
        )
    model = recall_model(
        pattern, config, conv_size=1 if variant == "no_conv" else 4
    )
    if variant == "no_norm":
        for block in model.blocks:
            if block.kind == "kda":
                block.mixer = without_output_norm(block.mixer)
    return model


def without_output_norm(layer: KDALayer) -> KDALayer:
    """A copy of ``layer`` built with ``output_norm=False``: the same weights, no norm."""
    copy = KDALayer(
        layer.d_model,
        layer.n_heads,
        layer.head_dim,
        conv_size=layer.q_conv.kernel_size,
        output_norm=False,
    )
    weights = {
        name: w
        for name, w in layer.state_dict().items()
        if not name.startswith("norm.")
    }
    copy.load_state_dict(weights)
    return copy


def load_ablation(path: str | Path) -> dict:
    """The stored ablation: ``{"meta": {...}, "settings": {...}, "rows": [...]}``."""
    results = json.loads(Path(path).read_text())
    for key in ("meta", "settings", "rows"):
        if key not in results:
            raise ValueError(
                f"path: {path} is not an ablation study (no {key!r} entry)"
            )
    return results


@dataclass(frozen=True)
class VariantSummary:
    """One variant's test accuracies, per seed (in ``seeds`` order)."""

    variant: str
    seeds: tuple[int, ...]
    accuracies: tuple[float, ...]

    @property
    def median(self) -> float:
        """Median test accuracy over seeds."""
        return statistics.median(self.accuracies)

    @property
    def low(self) -> float:
        """Worst seed's test accuracy."""
        return min(self.accuracies)

    @property
    def high(self) -> float:
        """Best seed's test accuracy."""
        return max(self.accuracies)


def summarize_ablation(results: dict) -> dict[str, VariantSummary]:
    """Every variant of ``results`` with a row for each seed of its settings, by variant."""
    seeds = tuple(results["settings"]["seeds"])
    by_variant: dict[str, dict[int, float]] = {}
    for row in results["rows"]:
        by_variant.setdefault(row["variant"], {})[row["seed"]] = row[
            "accuracy"
        ]
    return {
        v: VariantSummary(v, seeds, tuple(by_variant[v][s] for s in seeds))
        for v in VARIANTS
        if v in by_variant and set(seeds) <= set(by_variant[v])
    }


def drops(full: VariantSummary, ablated: VariantSummary) -> list[float]:
    """Full minus ablated accuracy, seed by seed, in percentage points."""
    if full.seeds != ablated.seeds:
        raise ValueError(
            f"ablated: expected the seeds {full.seeds}, got {ablated.seeds}"
        )
    return [
        100 * (a - b)
        for a, b in zip(full.accuracies, ablated.accuracies, strict=True)
    ]


def verdict(summary: dict[str, VariantSummary], variant: str) -> str:
    """One sentence on what removing ``variant``'s component does, from the data.

    A change is clear only when every seed moves the same way by more than
    :data:`CLEAR_POINTS`; no seed moving that much is no clear difference; anything else is
    told as the count of seeds that moved each way.
    """
    if variant not in summary or variant == "full":
        raise ValueError(
            f"variant: expected an ablated variant of {sorted(summary)}, got {variant!r}"
        )
    if "full" not in summary:
        raise ValueError(
            f"summary: no full model to compare with, only {sorted(summary)}"
        )
    gaps = drops(summary["full"], summary[variant])
    what = _part_removed(variant)
    n = len(gaps)
    lower = sum(gap > CLEAR_POINTS for gap in gaps)
    higher = sum(gap < -CLEAR_POINTS for gap in gaps)
    median, low, high = statistics.median(gaps), min(gaps), max(gaps)
    # ints: never "-0"; a drop is a loss of accuracy
    span = tr(
        "drops of {low} to {high} points over the seeds, median {median}",
        low=round(low),
        high=round(high),
        median=round(median),
    )
    if lower == n:
        return tr(
            "Removing the {what} lowers recall accuracy on all {n} seeds ({span}).",
            what=what,
            n=n,
            span=span,
        )
    if higher == n:
        return tr(
            "Removing the {what} raises recall accuracy on all {n} seeds ({span}).",
            what=what,
            n=n,
            span=span,
        )
    if lower == higher == 0:
        return tr(
            "Removing the {what} makes no clear difference on this toy: no seed "
            "moves by more than {clear:.0f} points ({span}).",
            what=what,
            clear=CLEAR_POINTS,
            span=span,
        )
    return tr(
        "Removing the {what} does not move recall accuracy the same way on "
        "every seed: it is lower on {lower} and higher on {higher} of the "
        "{n} seeds by more than {clear:.0f} points ({span}).",
        what=what,
        lower=lower,
        higher=higher,
        n=n,
        clear=CLEAR_POINTS,
        span=span,
    )


def guessing_text(results: dict, variant: str) -> str:
    """A sentence when every seed of ``variant`` answers with a value of its own context but
    is right only about as often as a blind pick among the N pairs' values (1/N, within
    :data:`CHANCE_POINTS`); "" otherwise."""
    rows = [r for r in results["rows"] if r["variant"] == variant]
    if not rows:
        raise ValueError(f"variant: no rows of {variant!r} in results")
    n = results["settings"]["n_pairs"]
    in_context = min(r["in_context"] for r in rows)
    near_chance = all(
        abs(100 * (r["accuracy"] - 1 / n)) <= CHANCE_POINTS for r in rows
    )
    if not (near_chance and in_context >= 0.9):
        return ""
    return tr(
        "Without the {what}, every seed answers with one of the context's "
        "values ({share:.0f} % of the answers or more) but picks the right one "
        "about as often as a blind pick among the {n} ({chance:.0f} %).",
        what=_part_removed(variant),
        share=100 * in_context,
        n=n,
        chance=100 / n,
    )


def markdown_table(summary: dict[str, VariantSummary]) -> str:
    """A Markdown table: each variant's median test accuracy and its seed range (in %)."""
    header = (tr("variant"), tr("median accuracy"), tr("seed range"))
    lines = [
        "| " + " | ".join(header) + " |",
        "|---|---|---|",
        *(
            f"| {variant_name(v)} | {100 * s.median:.1f} % "
            f"| {100 * s.low:.1f}–{100 * s.high:.1f} % |"
            for v, s in summary.items()
        ),
    ]
    return "\n".join(lines)
