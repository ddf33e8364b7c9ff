"""The recall study: MQAR over mixers, state sizes, learning rates and seeds, and its facts.

One *cell* of the study trains one toy model (:func:`recall_model`, a small
``attnlab.model.HybridLM``: one mixer pattern, N pairs, one learning rate, one seed) with
``attnlab.train.train`` and scores it on two fixed sets drawn with different seeds:

    validation set   early stopping and the choice of each model's learning rate
    test set         every reported accuracy and the failure analysis

``benchmarks/recall_sweep.py`` runs the grid and stores the rows; Lesson 17 reads them back
with :func:`load_study` and states only what :func:`summarize` and :func:`paired_gap` compute.
Its sentences are made here, chosen by the data (:func:`study_facts`, :func:`comparison_facts`,
:func:`failure_facts`, :func:`live_facts`: glue key -> Markdown), so the lesson only glues them.
"""

from __future__ import annotations

import functools
import json
import math
import re
import statistics
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from attnlab.checks import check_positive_int
from attnlab.configs import ModelConfig
from attnlab.i18n import tr
from attnlab.kinds import KINDS
from attnlab.model import HybridLM
from attnlab.tasks import IGNORE, mqar_batch, mqar_eval_set, mqar_value_range
from attnlab.train import Batch, train

STUDY_PATH = (
    Path(__file__).resolve().parents[2]
    / "benchmarks"
    / "results"
    / "recall_study.json"
)
"""Where ``benchmarks/recall_sweep.py`` writes the shipped study (in the repository)."""

STUDY_MIXERS: tuple[tuple[str, ...], ...] = (
    ("attn", "attn"),
    ("linear", "linear"),
    ("deltanet", "deltanet"),
    ("gdn", "gdn"),
    ("kda", "kda"),
    ("attn", "kda"),
    ("kda", "attn"),
)
"""The study's layer patterns: two layers of each mixer of the course, and both hybrid orders."""


@dataclass(frozen=True)
class StudyConfig:
    """Everything but (pattern, N, lr, seed) that decides a cell's result.

    The toy is ``d_model`` wide with one head of ``head_dim`` (the state is
    ``head_dim × head_dim``); ``steps`` is the budget, stopped early at ``target_accuracy`` on
    the validation set (``val_size`` sequences, seed ``val_seed``), scored every ``eval_every``
    steps; the test set has ``test_size`` sequences drawn with ``test_seed``.
    """

    d_model: int = 32
    head_dim: int = 8
    vocab_size: int = 128
    batch_size: int = 64
    steps: int = 800
    eval_every: int = 50
    target_accuracy: float = 0.995
    val_size: int = 256
    val_seed: int = 4321
    test_size: int = 512
    test_seed: int = 1234


ModelMaker = Callable[[Sequence[str], StudyConfig], HybridLM]
"""What builds a toy from (pattern, config): :func:`recall_model` or a variant of it."""

RECALL_DECAY = 0.999
"""Initial decay α₀ of the gated mixers (GDN, KDA) of the toy, at zero input."""


def recall_model(
    pattern: Sequence[str],
    config: StudyConfig = StudyConfig(),
    *,
    conv_size: int = 4,
) -> HybridLM:
    """The study's toy: a ``HybridLM`` of ``pattern``, set up for recall.

    One head; linear attention is elu+1 with its normaliser (the
    default); short convolutions of width ``conv_size`` (1: each token
    sees only itself).
    """
    model = HybridLM(
        ModelConfig(
            name="recall toy " + pattern_label(pattern),
            vocab_size=config.vocab_size,
            d_model=config.d_model,
            layer_pattern=tuple(pattern),
            n_heads=1,
            head_dim=config.head_dim,
            mlp_hidden=2 * config.d_model,
            conv_size=conv_size,
            rope=False,  # no positions: a short convolution gives the order,
            attn_conv=True,  # in the attention layers too
            norm_eps=1e-6,  # the output norms' eps the study was run with
        )
    )
    # MQAR needs no forgetting: the gated layers start at α = RECALL_DECAY
    # (g = −exp(A_log) · softplus(x W + dt_bias) = log α at x = 0)
    dt = -math.log(RECALL_DECAY)
    with torch.no_grad():
        for block in model.blocks:
            if block.kind in ("gdn", "kda"):
                block.mixer.A_log.zero_()
                block.mixer.dt_bias.fill_(math.log(math.expm1(dt)))
    return model


def pattern_label(pattern: Sequence[str]) -> str:
    """A short name for a layer pattern: ``("kda", "attn")`` -> ``"kda→attn"``; a pattern of one
    repeated kind is named by that kind."""
    return pattern[0] if len(set(pattern)) == 1 else "→".join(pattern)


@torch.no_grad()
def answer_analysis(
    model: torch.nn.Module,
    inputs: torch.Tensor,
    targets: torch.Tensor,
    vocab_size: int,
) -> dict[str, float]:
    """The fractions of MQAR query positions (inputs, targets [B, 4N]) where
    the answer p = argmax logits is

        right        the target value
        value        a value token (``mqar_value_range(vocab_size)``)
        in_context   one of that sequence's values v_1 … v_N (right included)

    so ``in_context − right`` is how often it copies the wrong pair's value.
    """
    n_pairs = inputs.shape[1] // 4
    was_training = model.training
    model.eval()
    predictions = model(inputs)[0].argmax(dim=-1)  # [B, L]
    model.train(was_training)
    scored = targets != IGNORE  # [B, L]
    context_values = inputs[:, 1 : 2 * n_pairs : 2]  # [B, N]
    # [B, L]
    in_context = (predictions[..., None] == context_values[:, None, :]).any(
        dim=-1
    )
    low, high = mqar_value_range(vocab_size)
    p = predictions[scored]
    return {
        "right": (p == targets[scored]).double().mean().item(),
        "value": ((p >= low) & (p < high)).double().mean().item(),
        "in_context": in_context[scored].double().mean().item(),
    }


def train_cell(
    pattern: Sequence[str],
    n_pairs: int,
    lr: float,
    seed: int,
    config: StudyConfig = StudyConfig(),
    *,
    make_model: ModelMaker = recall_model,
) -> dict:
    """Train and score one cell of the study; returns its row (a JSON-ready dict).

    ``make_model(pattern, config)`` builds the toy (:func:`recall_model`; Lesson 14's
    ablation passes a model with a component removed).

    ``torch.manual_seed(seed)`` fixes the initialisation and ``seed`` the training batches;
    with the same torch build, CPU and thread count a cell reproduces bit for bit (another CPU
    can round differently, and training amplifies it). Row keys: ``mixer`` (label),
    ``pattern``, ``n_pairs``, ``lr``, ``seed``, ``val_accuracy``, ``accuracy`` (test),
    ``value``, ``in_context`` (:func:`answer_analysis` on the test set), ``steps``,
    ``stopped_early``, ``curve_steps``, ``curve_val`` (validation accuracy per evaluation),
    ``seconds``, ``cpu_seconds``.
    """
    check_positive_int("n_pairs", n_pairs)
    c = config
    val_set = mqar_eval_set(
        c.val_size, n_pairs, c.val_seed, vocab_size=c.vocab_size
    )
    test_set = mqar_eval_set(
        c.test_size, n_pairs, c.test_seed, vocab_size=c.vocab_size
    )

    def make_batch(g: torch.Generator) -> Batch:
        return mqar_batch(
            c.batch_size, n_pairs, vocab_size=c.vocab_size, generator=g
        )

    cpu = time.process_time()
    torch.manual_seed(seed)
    model = make_model(pattern, c)
    history = train(
        model,
        make_batch,
        steps=c.steps,
        lr=lr,
        eval_set=val_set,
        eval_every=c.eval_every,
        target_accuracy=c.target_accuracy,
        seed=seed,
    )
    analysis = answer_analysis(model, *test_set, c.vocab_size)
    return {
        "mixer": pattern_label(pattern),
        "pattern": list(pattern),
        "n_pairs": n_pairs,
        "lr": lr,
        "seed": seed,
        "val_accuracy": history.final_accuracy,
        "accuracy": analysis["right"],
        "value": analysis["value"],
        "in_context": analysis["in_context"],
        "steps": history.steps_run,
        "stopped_early": history.stopped_early,
        "curve_steps": history.step,
        "curve_val": history.accuracy,
        "seconds": history.total_seconds,
        "cpu_seconds": time.process_time() - cpu,
    }


def config_dict(config: StudyConfig) -> dict:
    """``config`` as a plain dict (how it is stored in the results file)."""
    return asdict(config)


def load_study(path: str | Path) -> dict:
    """The stored study: ``{"meta": {...}, "config": {...}, "grid": {...}, "rows": [...]}``."""
    study = json.loads(Path(path).read_text())
    for key in ("meta", "config", "grid", "rows"):
        if key not in study:
            raise ValueError(
                f"path: {path} is not a recall study (no {key!r} entry)"
            )
    return study


@dataclass(frozen=True)
class CellSummary:
    """One (mixer, N) of the study at its chosen learning rate (see :func:`summarize`).

    ``accuracies``, ``values``, ``in_context``: per seed (in ``seeds`` order), on the test set;
    ``val_means``: mean validation accuracy over seeds for every lr of the grid.
    """

    mixer: str
    n_pairs: int
    ratio: float
    lr: float
    seeds: tuple[int, ...]
    accuracies: tuple[float, ...]
    values: tuple[float, ...]
    in_context: tuple[float, ...]
    val_means: dict[float, float]

    @property
    def mean(self) -> float:
        """Mean test accuracy over seeds."""
        return statistics.fmean(self.accuracies)

    @property
    def low(self) -> float:
        """Worst seed's test accuracy."""
        return min(self.accuracies)

    @property
    def high(self) -> float:
        """Best seed's test accuracy."""
        return max(self.accuracies)

    @property
    def wrong_in_context(self) -> float:
        """Mean fraction of answers that are a value of the context, but the wrong pair's."""
        return statistics.fmean(
            c - a
            for c, a in zip(self.in_context, self.accuracies, strict=True)
        )


def summarize(study: dict) -> dict[tuple[str, int], CellSummary]:
    """Every (mixer, N) of ``study`` at its best learning rate, keyed by (mixer label, N).

    The choice rule: for each (mixer, N), the lr of the grid with the highest mean
    *validation* accuracy over the seeds that ran at every lr (ties: the smaller lr; a cell
    is left out until every lr of the grid has run); the
    summary then reports those seeds' *test* accuracies at that lr, so the choice never sees
    the numbers it reports.
    """
    by_cell: dict[tuple[str, int], dict[float, dict[int, dict]]] = (
        defaultdict(lambda: defaultdict(dict))
    )
    for row in study["rows"]:
        by_cell[row["mixer"], row["n_pairs"]][row["lr"]][row["seed"]] = row
    head_dim, lrs = study["config"]["head_dim"], set(study["grid"]["lrs"])
    out = {}
    for (mixer, n), by_lr in by_cell.items():
        if set(by_lr) != lrs:
            continue  # a partial run: not every lr of the grid has run yet
        seeds = sorted(set.intersection(*(set(s) for s in by_lr.values())))
        if not seeds:
            continue
        val = {
            lr: statistics.fmean(by_lr[lr][s]["val_accuracy"] for s in seeds)
            for lr in sorted(by_lr)
        }
        best = max(val, key=lambda lr: (val[lr], -lr))
        rows = [by_lr[best][s] for s in seeds]
        out[mixer, n] = CellSummary(
            mixer,
            n,
            n / head_dim,
            best,
            tuple(seeds),
            tuple(r["accuracy"] for r in rows),
            tuple(r["value"] for r in rows),
            tuple(r["in_context"] for r in rows),
            val,
        )
    return out


def paired_gap(a: CellSummary, b: CellSummary) -> tuple[float, float, float]:
    """Accuracy of ``a`` minus ``b`` seed by seed (the seeds both ran): (mean, min, max)."""
    common = [s for s in a.seeds if s in b.seeds]
    if not common:
        raise ValueError(
            f"b: no seed in common with {a.mixer} (seeds {a.seeds} vs {b.seeds})"
        )
    acc_a, acc_b = (
        dict(zip(a.seeds, a.accuracies, strict=True)),
        dict(zip(b.seeds, b.accuracies, strict=True)),
    )
    gaps = [acc_a[s] - acc_b[s] for s in common]
    return statistics.fmean(gaps), min(gaps), max(gaps)


def ranking(
    summary: dict[tuple[str, int], CellSummary], n_pairs: int
) -> list[CellSummary]:
    """The mixers at ``n_pairs``, by mean test accuracy from highest to lowest."""
    cells = [c for (_, n), c in summary.items() if n == n_pairs]
    return sorted(cells, key=lambda c: -c.mean)


# --------------------------------------------------------------------------- names
#: Display names of the experiment's two-kind hybrids (``attnbook.recall_study.pattern_label``);
#: a single kind is named by the registry, ``attnlab.kinds.KINDS[kind].label``.
HYBRID_NAMES = {
    "kda→attn": "hybrid KDA→attention",
    "attn→kda": "hybrid attention→KDA",
    "linear→attn": "hybrid linear→attention",
    "attn→linear": "hybrid attention→linear",
}

#: The order mixers are listed in: attention, the delta-rule family, linear attention, hybrids.
MIXER_ORDER = (
    "attn",
    "kda",
    "gdn",
    "deltanet",
    "linear",
    "kda→attn",
    "attn→kda",
    "linear→attn",
    "attn→linear",
)


def mixer_name(label: str) -> str:
    """The display name of a mixer label ("kda→attn" → "hybrid KDA→attention"), in the
    reader's language."""
    if label in KINDS:
        return tr(KINDS[label].label)
    return tr(HYBRID_NAMES[label]) if label in HYBRID_NAMES else label


def mixers_in(rows: Sequence[dict]) -> list[str]:
    """The mixer labels present in ``rows``, in ``MIXER_ORDER``."""
    present = {row["mixer"] for row in rows}
    ordered = [m for m in MIXER_ORDER if m in present]
    return ordered + sorted(present - set(ordered))


# --------------------------------------------------------------------------- sentences
#: A space that Chinese typesetting drops: between two Chinese characters, or next to
#: full-width punctuation (a mixer's name put into a Chinese sentence, "线性注意力 领先"). English
#: text has none of these characters, so it is left as it is.
_CJK_SPACE = re.compile(
    r"(?<=[\u4e00-\u9fff]) (?=[\u4e00-\u9fff])"
    r"|(?<=[\u3000-\u303f\uff00-\uffef]) | (?=[\u3000-\u303f\uff00-\uffef])"
)


def tidy_spacing(text: str) -> str:
    """``text`` without the spaces Chinese typesetting drops (English text is unchanged)."""
    return _CJK_SPACE.sub("", text)


def _tidied(facts: Callable[..., dict[str, str]]) -> Callable[..., dict[str, str]]:
    """``facts`` with :func:`tidy_spacing` applied to every sentence it writes."""

    @functools.wraps(facts)
    def tidied(*args: object, **kwargs: object) -> dict[str, str]:
        return {key: tidy_spacing(text) for key, text in facts(*args, **kwargs).items()}

    return tidied


def percent(x: float) -> str:
    """0.9873 -> "98.7 %"."""
    return f"{100 * x:.1f} %"


def spread(cell: CellSummary) -> str:
    """A cell's mean and seed range: "87.0 % (seeds 75.3–98.0 %)"."""
    if len(cell.accuracies) == 1:
        return tr("{mean} (one seed)", mean=percent(cell.mean))
    return tr(
        "{mean} (seeds {low:.1f}–{high:.1f} %)",
        mean=percent(cell.mean),
        low=100 * cell.low,
        high=100 * cell.high,
    )


def gap_text(a: CellSummary, b: CellSummary) -> str:
    """The paired gap of ``a`` over ``b`` in points: "62 points (seeds 40 to 85)"."""
    # ints: never "-0"
    mean, low, high = (round(100 * x) for x in paired_gap(a, b))
    if len(a.seeds) == 1 or len(b.seeds) == 1:
        return tr("{mean} points (one seed)", mean=mean)
    return tr("{mean} points (seeds {low} to {high})", mean=mean, low=low, high=high)


def copies_from_context(cell: CellSummary) -> bool:
    """True when most of a cell's wrong answers are values of the same context (another key's
    value) rather than other tokens."""
    wrong = 1 - cell.mean
    return wrong > 0 and cell.wrong_in_context >= 0.5 * wrong


def failure_text(cell: CellSummary) -> str:
    """What a mixer answered (test set, means over seeds) and what that says about its misses."""
    value = statistics.fmean(cell.values)
    in_context = statistics.fmean(cell.in_context)
    numbers = tr(
        "{right} right, {copied} another value of the same context, {other} any other token",
        right=percent(cell.mean),
        copied=percent(cell.wrong_in_context),
        other=percent(1 - in_context),
    )
    if value < 0.9:
        return tr(
            "{numbers}: it has not even learned what an answer looks like", numbers=numbers
        )
    if copies_from_context(cell):
        return tr(
            "{numbers}: it copies from the context, but not always the right pair",
            numbers=numbers,
        )
    return tr("{numbers}: most of its misses are not values of this context", numbers=numbers)


def live_comparison(
    live: dict[str, float],
    summary: dict[tuple[str, int], CellSummary],
    n_pairs: int,
) -> dict[str, str]:
    """For each live accuracy: "below", "within" or "above" the study's seed range at N."""
    out = {}
    for mixer, acc in live.items():
        cell = summary.get((mixer, n_pairs))
        if cell is not None:
            out[mixer] = (
                "below"
                if acc < cell.low
                else "above"
                if acc > cell.high
                else "within"
            )
    return out


def discordant_pairs(
    a: dict[str, float], b: dict[str, float]
) -> list[tuple[str, str]]:
    """Pairs of mixers that ``a`` and ``b`` order differently (ties in either: not counted)."""
    keys = [k for k in a if k in b]
    return [
        (x, y)
        for i, x in enumerate(keys)
        for y in keys[i + 1 :]
        if (a[x] - a[y]) * (b[x] - b[y]) < 0
    ]


# --------------------------------------------------------------------------- the page
FIXED_STATE = ("kda", "gdn", "deltanet", "linear")
"""The study's fixed-state mixers, in the order Lesson 17 lists them."""


def complete_cells(
    summary: dict[tuple[str, int], CellSummary],
) -> dict[tuple[str, int], CellSummary]:
    """The cells of ``summary`` at the N for which every mixer has a cell."""
    mixers = {m for m, _ in summary}
    return {
        (m, n): c
        for (m, n), c in summary.items()
        if all((other, n) in summary for other in mixers)
    }


def _mixers_and_ns(
    summary: dict[tuple[str, int], CellSummary],
) -> tuple[list[str], list[int]]:
    """The mixers of ``summary`` in ``MIXER_ORDER`` and its N, ascending."""
    mixers = mixers_in([{"mixer": m} for m, _ in summary])
    return mixers, sorted({n for _, n in summary})


def _by_n(
    summary: dict[tuple[str, int], CellSummary],
) -> dict[int, dict[str, CellSummary]]:
    """``summary`` as {N: {mixer: cell}}."""
    _, ns = _mixers_and_ns(summary)
    return {n: {c.mixer: c for c in ranking(summary, n)} for n in ns}


def failure_n(summary: dict[tuple[str, int], CellSummary]) -> int:
    """The smallest N at which every fixed-state mixer's mean stays below
    90 %, else the largest N."""
    _, ns = _mixers_and_ns(summary)
    at = _by_n(summary)
    failing = [n for n in ns if all(at[n][m].mean < 0.9 for m in FIXED_STATE)]
    return failing[0] if failing else ns[-1]


def accuracy_table(summary: dict[tuple[str, int], CellSummary]) -> str:
    """A Markdown table: one row per mixer, one column per N/d_k, each cell
    the mean test accuracy and the seed range in whole percent."""
    mixers, ns = _mixers_and_ns(summary)
    ratio = {c.n_pairs: c.ratio for c in summary.values()}

    def compact(cell: CellSummary) -> str:
        return (
            f"{100 * cell.mean:.0f} "
            f"({100 * cell.low:.0f}–{100 * cell.high:.0f})"
        )

    def row(mixer: str) -> str:
        cells = (
            compact(summary[mixer, n]) if (mixer, n) in summary else "—"
            for n in ns
        )
        return f"| {mixer_name(mixer)} | " + " | ".join(cells) + " |"

    header = (
        f"| {tr('mixer')} | "
        + " | ".join(f"N/d = {ratio[n]:g}" for n in ns)
        + " |\n|---|"
        + "---|" * len(ns)
    )
    return header + "\n" + "\n".join(row(m) for m in mixers)


@_tidied
def study_facts(
    study: dict, summary: dict[tuple[str, int], CellSummary]
) -> dict[str, str]:
    """What Lesson 17 says about how the study was run: its grid, budget,
    machine, completeness and the learning rates its rule chose.

    ``summary``: :func:`complete_cells` of :func:`summarize` of ``study``.
    """
    grid, meta, config = study["grid"], study["meta"], study["config"]
    mixers, ns = _mixers_and_ns(summary)
    head_dim, n_models = config["head_dim"], len(study["rows"])
    seeds = sorted({s for c in summary.values() for s in c.seeds})
    lrs = tr(" and ").join(f"{lr:g}" for lr in grid["lrs"])
    planned = math.prod(
        len(grid[k]) for k in ("mixers", "n_pairs", "lrs", "seeds")
    )
    commits = sorted({r["git_commit"][:10] for r in study["rows"]})
    chosen = [c.lr for c in summary.values()]
    return {
        "l17_study_models": f"{n_models}",
        "l17_study_grid": tr(
            "{mixers} mixers × {n_ns} values of N ({ns}) × {n_lrs} learning rates ({lrs}) "
            "× seeds {seeds}",
            mixers=len(mixers),
            n_ns=len(ns),
            ns=", ".join(map(str, ns)),
            n_lrs=len(grid["lrs"]),
            lrs=lrs,
            seeds=", ".join(map(str, seeds)),
        ),
        "l17_study_seeds": tr(" or ").join(
            map(str, sorted({len(c.seeds) for c in summary.values()}))
        ),
        "l17_study_steps": f"{config['steps']}",
        "l17_study_sizes": tr(
            "{val} validation and {test} test sequences",
            val=config["val_size"],
            test=config["test_size"],
        ),
        "l17_study_cpu": f"{meta['cpu_seconds_all_cells'] / 60:.0f}",
        "l17_study_machine": tr(
            "{cpu}, PyTorch {torch}, one thread",
            cpu=meta["machine"]["cpu"],
            torch=meta["machine"]["torch"].split("+")[0],
        ),
        "l17_study_commit": tr(" and ").join(f"`{c}`" for c in commits),
        "l17_study_date": meta["started"][:10],
        "l17_study_complete": (
            ""
            if meta.get("complete")
            else tr(
                " The run was stopped after {done} of the {planned} planned models (N up to "
                "{n_max}); the page shows every (mixer, N) that had finished all its learning "
                "rates, over the seeds that had.",
                done=n_models,
                planned=planned,
                n_max=max(grid["n_pairs"]),
            )
        ),
        "l17_ns": ", ".join(map(str, ns)),
        "l17_ratio_max": f"{max(ns) / head_dim:g}",
        "l17_ratios": ", ".join(f"{n / head_dim:g}" for n in ns),
        "l17_table": accuracy_table(summary),
        "l17_lr_choice": tr(
            "{choices} of the {cells} (mixer, N) cells",
            choices=tr(", ").join(
                tr("{lr:g} for {count}", lr=lr, count=chosen.count(lr))
                for lr in sorted(set(chosen))
            ),
            cells=len(summary),
        ),
    }


def _order_claim(a: CellSummary, b: CellSummary) -> str:
    """Which of two cells was ahead, by its paired gap, and whether on every
    seed."""
    mean, low, high = paired_gap(a, b)
    first, second = (a, b) if mean >= 0 else (b, a)
    every = low > 0 or high < 0
    names = {"first": mixer_name(first.mixer), "second": mixer_name(second.mixer)}
    if every:
        return tr("{first} ahead of {second} by {gap}", **names, gap=gap_text(first, second))
    return tr(
        "{first} ahead of {second} by {gap}, though not on every seed",
        **names,
        gap=gap_text(first, second),
    )


def _fall_text(n_falling: int) -> str:
    """How many fixed-state mixers lost accuracy from the smallest N to the
    largest, as the middle of a sentence."""
    if n_falling == len(FIXED_STATE):
        return tr(
            "all four fixed-state models were less accurate at the largest *N* than at the "
            "smallest"
        )
    return tr(
        "{k} of the {n} fixed-state models were less accurate at the largest *N* than at the "
        "smallest",
        k=n_falling,
        n=len(FIXED_STATE),
    )


@_tidied
def comparison_facts(
    study: dict, summary: dict[tuple[str, int], CellSummary]
) -> dict[str, str]:
    """What Lesson 17 concludes from the study's accuracies: attention's
    worst seed, the fall of the fixed-state mixers with N, the widest seed
    spread and the paired gaps between mixers, each sentence chosen by the
    data.

    ``summary``: :func:`complete_cells` of :func:`summarize` of ``study``.
    """
    _, ns = _mixers_and_ns(summary)
    at, head_dim = _by_n(summary), study["config"]["head_dim"]
    n_lo, n_hi = ns[0], ns[-1]
    attn_min = min(c.low for (m, _), c in summary.items() if m == "attn")
    best = {
        n: max(
            (at[n][m] for m in FIXED_STATE if m in at[n]),
            key=lambda c: c.mean,
        )
        for n in ns
    }
    falling = [m for m in FIXED_STATE if at[n_hi][m].mean < at[n_lo][m].mean]
    widest = max(
        (c for (m, _), c in summary.items() if m in FIXED_STATE),
        key=lambda c: c.high - c.low,
    )

    def claims(a: str, b: str) -> str:
        return tr("; ").join(
            tr(
                "at N/d = {ratio:g}, {claim}",
                ratio=n / head_dim,
                claim=_order_claim(at[n][a], at[n][b]),
            )
            for n in ns
        )

    delta_wins = [
        n for n in ns if paired_gap(at[n]["deltanet"], at[n]["linear"])[1] > 0
    ]
    hybrid_gaps = [
        paired_gap(at[n]["attn→kda"], at[n]["kda→attn"])[0] for n in ns
    ]
    fall = _fall_text(len(falling))
    return {
        "l17_attn_min": percent(attn_min),
        "l17_attn_claim": (
            tr(
                "never fell below {p} on any seed at any *N*: its cache keeps every pair",
                p=percent(attn_min),
            )
            if attn_min >= 0.95
            else tr("fell as low as {p} on one seed and *N*", p=percent(attn_min))
        ),
        "l17_best_fixed_lo": (
            f"{mixer_name(best[n_lo].mixer)} {spread(best[n_lo])}"
        ),
        "l17_fall": fall[0].upper() + fall[1:],
        "l17_fall_short": fall,
        "l17_max_spread": tr(
            "{points:.0f} percentage points ({mixer} at *N* = {n})",
            points=100 * (widest.high - widest.low),
            mixer=mixer_name(widest.mixer),
            n=widest.n_pairs,
        ),
        "l17_ratio_lo": f"{n_lo / head_dim:g}",
        "l17_ratio_hi": f"{n_hi / head_dim:g}",
        "l17_fixed_hi": tr("; ").join(
            f"{mixer_name(m)} {spread(at[n_hi][m])}"
            for m in FIXED_STATE
            if m in at[n_hi]
        ),
        "l17_chance_hi": percent(1 / n_hi),
        "l17_gap_attn_hi": gap_text(at[n_hi]["attn"], best[n_hi]),
        "l17_best_fixed_hi": mixer_name(best[n_hi].mixer),
        "l17_delta_vs_linear": claims("deltanet", "linear"),
        "l17_kda_vs_gdn": claims("kda", "gdn"),
        "l17_hybrid_order": claims("attn→kda", "kda→attn"),
        "l17_kda_hybrid": spread(at[n_hi]["attn→kda"]),
        "l17_delta_answer": (
            tr(
                "So the delta rule's better use of the state showed up here: DeltaNet beat "
                "linear attention on every seed at every *N*"
            )
            if len(delta_wins) == len(ns)
            else tr(
                "So the question the lesson opened with — does the delta rule use the state "
                "better than plain addition? — gets no clear answer from this toy: DeltaNet "
                "beat linear attention on every seed at {wins} of the {n_ns} values of *N*. "
                "With a state of {d} × {d} and at most {steps} steps the seeds spread more "
                "than the two rules differ; the literature's comparisons use larger models "
                "trained far longer",
                wins=len(delta_wins),
                n_ns=len(ns),
                d=head_dim,
                steps=study["config"]["steps"],
            )
        ),
        "l17_order_verdict": (
            tr(
                "In the study the order mattered: attention first was ahead at every *N* on "
                "average"
            )
            if all(g > 0 for g in hybrid_gaps)
            else tr("In the study the order did not favour one side at every *N*")
        ),
    }


@_tidied
def failure_facts(
    study: dict, summary: dict[tuple[str, int], CellSummary]
) -> dict[str, str]:
    """What Lesson 17 says about how the fixed-state mixers miss at
    :func:`failure_n`: what each answered, and whether they copy.

    ``summary``: :func:`complete_cells` of :func:`summarize` of ``study``.
    """
    _, ns = _mixers_and_ns(summary)
    n_fail, head_dim = failure_n(summary), study["config"]["head_dim"]
    cells = {m: summary[m, n_fail] for m in FIXED_STATE}
    copiers = [m for m, c in cells.items() if copies_from_context(c)]
    every = len(copiers) == len(FIXED_STATE)
    failing = all(c.mean < 0.9 for c in cells.values())
    return {
        "l17_fail_where": (
            tr("the smallest *N* at which every fixed-state model stayed below 90 %")
            if failing
            else tr("the largest *N* of the study")
        ),
        "l17_n_fail": f"{n_fail}",
        "l17_ratio_fail": f"{n_fail / head_dim:g}",
        "l17_chance_fail": percent(1 / n_fail),
        "l17_failure": "\n".join(
            tr("- {mixer}: {answers}.", mixer=mixer_name(m), answers=failure_text(c))
            for m, c in cells.items()
        ),
        "l17_failure_verdict": (
            tr(
                "So these models do not answer at random: each has learned that the answer is "
                "one of the values it has seen, and what fails is finding *which* one — the "
                "lookup that a crowded state blurs."
            )
            if every
            else tr(
                "{k} of the {n} mostly miss by copying another value of the context; the "
                "others miss with tokens that are not in the context.",
                k=len(copiers),
                n=len(FIXED_STATE),
            )
        ),
        "l17_failure_bullet": (
            tr(
                "A failing model is not answering at random: at *N* = {n} every fixed-state "
                "model mostly missed by copying another value of its context.",
                n=n_fail,
            )
            if every
            else tr(
                "At *N* = {n}, {k} of the {total} fixed-state models mostly missed by copying "
                "another value of their context.",
                n=n_fail,
                k=len(copiers),
                total=len(FIXED_STATE),
            )
        ),
    }


@_tidied
def live_facts(
    rows: Sequence[dict],
    study: dict,
    summary: dict[tuple[str, int], CellSummary],
) -> dict[str, str]:
    """What Lesson 17 says about its live run (``rows`` of
    :func:`train_cell` at one N and seed 0): the ranking, whether it matched
    the stored study exactly, and where it falls in the study's seed range.
    """
    n_live = rows[0]["n_pairs"]
    live = {r["mixer"]: r["accuracy"] for r in rows}
    stored = {
        (r["mixer"], r["lr"]): r["accuracy"]
        for r in study["rows"]
        if r["n_pairs"] == n_live and r["seed"] == 0
    }
    same = [r for r in rows if stored[r["mixer"], r["lr"]] == r["accuracy"]]
    where = live_comparison(live, summary, n_live)
    study_means = {
        c.mixer: c.mean for c in ranking(summary, n_live) if c.mixer in live
    }
    swaps = discordant_pairs(live, study_means)
    against = {
        "below": "{mixer} {live} against {study} (below the seed range)",
        "within": "{mixer} {live} against {study} (inside the seed range)",
        "above": "{mixer} {live} against {study} (above the seed range)",
    }
    return {
        "l17_live_same": (
            tr("all {n} models got exactly the accuracies stored in the study", n=len(rows))
            if len(same) == len(rows)
            else tr(
                "{k} of the {n} models got exactly the accuracies stored in the study; the "
                "others differ, as a different CPU or PyTorch build can round differently",
                k=len(same),
                n=len(rows),
            )
        ),
        "l17_live_ranking": tr("; ").join(
            f"{mixer_name(m)} {percent(a)}"
            for m, a in sorted(live.items(), key=lambda x: -x[1])
        ),
        "l17_live_vs_study": tr("; ").join(
            tr(
                against[where[m]],
                mixer=mixer_name(m),
                live=percent(a),
                study=spread(summary[m, n_live]),
            )
            for m, a in live.items()
        ),
        "l17_live_order": (
            tr("orders every pair of these mixers as the study's means over seeds do")
            if not swaps
            else tr(
                "orders {k} of the {n} pairs of mixers differently from the study's means "
                "({pairs})",
                k=len(swaps),
                n=len(live) * (len(live) - 1) // 2,
                pairs=tr("; ").join(
                    tr("{a} and {b}", a=mixer_name(a), b=mixer_name(b)) for a, b in swaps
                ),
            )
        ),
    }
