"""A head that was learned, not built: what a tiny trained transformer attends to.

Lesson 5b trains a two-layer attention model on Lesson 1's toy corpus for 300
steps (the lesson measures how long that takes) and looks for a head that
reads the previous word. In that corpus the previous word decides what
follows "the" ("near the" → a place, ". the" → a colour or an animal), so a
head that helps there must look one token back.

The measure is the *previous-word share* of a head over a set of query
positions P (here: every "the", or every other word):

    share_h = (1 / |P|) Σ_{t ∈ P} A_h[t, t − 1],

the mean attention weight that query t gives to key t − 1. A head built to
read the previous word (Lesson 4's head 1) has share ≈ 1 at every position.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from attnlab.checks import check_positive_int
from attnlab.configs import ModelConfig
from attnlab.embedding import WordTokenizer
from attnlab.i18n import tr
from attnlab.model import HybridLM, attention_maps
from attnlab.train import train_language_model

#: The sentence the lesson reads the heads on: three "the"s, each after a
#: different kind of word ("near", "painted", the "." that ends a sentence).
PROBE_SENTENCE: tuple[str, ...] = tuple(
    ". a horse sleeps near the forest . she painted the school red . the cat".split()
)


def previous_word_share(
    weights: torch.Tensor, queries: torch.Tensor
) -> torch.Tensor:
    """Mean weight each head gives to key t − 1 over the marked queries t.

    weights ``[B, H, T, T]``, queries ``[B, T]`` (bool, True where t counts;
    t = 0 never does: it has no previous word) → share ``[H]`` in [0, 1].
    """
    if not isinstance(weights, torch.Tensor) or weights.dim() != 4:
        raise ValueError(
            "weights: expected a tensor [B, H, T, T], got "
            f"{tuple(getattr(weights, 'shape', ()))}"
        )
    b, _, t, _ = weights.shape
    if not isinstance(queries, torch.Tensor) or queries.dtype != torch.bool:
        raise ValueError("queries: expected a bool tensor [B, T]")
    if tuple(queries.shape) != (b, t) or not queries[:, 1:].any():
        raise ValueError(
            f"queries: expected shape {(b, t)} with a True after position 0, "
            f"got shape {tuple(queries.shape)}"
        )
    previous = torch.diagonal(weights, offset=-1, dim1=-2, dim2=-1)
    mask = queries[:, None, 1:].to(weights.dtype)  # [B, 1, T - 1]
    return (previous * mask).sum(dim=(0, 2)) / mask.sum()


def tiny_transformer_config(vocab_size: int) -> ModelConfig:
    """The lesson's model: two pre-norm attention blocks, 2 heads of width 16.

    d_model 32, RoPE, a SwiGLU MLP of width 64, and the LM head tied to the
    embedding table (logits = E · RMSNorm(h), Lesson 1's table read backwards).
    """
    return ModelConfig(
        name="tiny transformer",
        vocab_size=check_positive_int("vocab_size", vocab_size),
        d_model=32,
        layer_pattern=("attn", "attn"),
        n_heads=2,
        head_dim=16,
        mlp_hidden=64,
        rope=True,
        tie_embeddings=True,
        notes="Lesson 5b: trained for 300 steps on the toy corpus.",
    )


@dataclass
class HeadRun:
    """One training run: its losses and the probe's maps along the way.

    ``snapshots[s]`` holds the maps (:func:`attnlab.model.attention_maps`,
    batch squeezed: ``{layer: [H, T, T]}``) of the probe sentence after s
    training steps. ``share[(layer, head)]`` is each head's final
    previous-word share at every "the" of a held-out text, and
    ``share_elsewhere`` the same at every other position of it.
    """

    seed: int
    losses: list[float]
    snapshots: dict[int, dict[int, torch.Tensor]]
    share: dict[tuple[int, int], float] = field(default_factory=dict)
    share_elsewhere: dict[tuple[int, int], float] = field(
        default_factory=dict
    )

    @property
    def best_head(self) -> tuple[int, int]:
        """(layer, head) with the largest previous-word share at "the"."""
        return max(self.share, key=self.share.__getitem__)


def train_tiny_transformer(
    tokenizer: WordTokenizer,
    token_ids: torch.Tensor,
    held_out_ids: torch.Tensor,
    *,
    seed: int,
    steps: int = 300,
    snapshot_every: int = 10,
) -> tuple[HybridLM, HeadRun]:
    """Train :func:`tiny_transformer_config` on ``token_ids`` and watch it.

    The model is initialised with ``torch.manual_seed(seed)`` and trained
    by :func:`attnlab.train.train_language_model` (batches of 16 windows of
    32 words, lr 1e-2, batches seeded by ``seed``). Every ``snapshot_every``
    steps, and before the first, the probe sentence's maps are kept. The
    final shares are measured on ``held_out_ids`` ``[B, T]``: windows of a
    text the model did not train on, as long as the training windows.
    """
    steps = check_positive_int("steps", steps)
    snapshot_every = check_positive_int("snapshot_every", snapshot_every)
    probe = torch.tensor([tokenizer.encode(" ".join(PROBE_SENTENCE))])
    torch.manual_seed(seed)
    model = HybridLM(tiny_transformer_config(tokenizer.size))
    snapshots = {}

    def snapshot(step: int) -> None:
        if step % snapshot_every == 0 or step == steps:
            maps = attention_maps(model, probe)
            snapshots[step] = {i: w[0] for i, w in maps.items()}

    snapshot(0)
    losses = train_language_model(
        model,
        token_ids,
        steps=steps,
        batch_size=16,
        seq_len=32,
        lr=1e-2,
        seed=seed,
        on_step=snapshot,
    )
    run = HeadRun(seed, losses, snapshots)
    at_the = held_out_ids == tokenizer.encode("the")[0]
    for layer, weights in attention_maps(model, held_out_ids).items():
        the_share = previous_word_share(weights, at_the)
        other_share = previous_word_share(weights, ~at_the)
        for head in range(weights.shape[1]):
            run.share[layer, head] = float(the_share[head])
            run.share_elsewhere[layer, head] = float(other_share[head])
    return model, run


#: A head "reads the previous word" when more than this share goes there.
CLEAR_SHARE = 0.5


def head_name(layer_head: tuple[int, int]) -> str:
    """(0, 1) → "layer 1, head 2" (counted from 1, as the lesson does), in the
    current language (:mod:`attnlab.i18n`)."""
    layer, head = layer_head
    return tr("layer {layer}, head {head}", layer=layer + 1, head=head + 1)


def final_loss(run: HeadRun, last: int = 20) -> float:
    """Mean training loss of the last ``last`` steps (one batch each)."""
    tail = run.losses[-last:]
    return sum(tail) / len(tail)


def runs_table(runs: dict[int, HeadRun]) -> str:
    """A Markdown table: each run's strongest head, its shares and loss (the
    header in the current language)."""
    header = [
        tr("seed"),
        tr("strongest head"),
        tr('share at "the"'),
        tr("share at other words"),
        tr("loss, last 20 steps"),
    ]
    rows = ["| " + " | ".join(header) + " |", "|---:|---|---:|---:|---:|"]
    for seed, run in runs.items():
        best = run.best_head
        rows.append(
            f"| {seed} | {head_name(best)} | {run.share[best]:.2f} | "
            f"{run.share_elsewhere[best]:.2f} | {final_loss(run):.3f} |"
        )
    return "\n".join(rows)


def runs_finding(runs: dict[int, HeadRun]) -> str:
    """The sentence the lesson prints about the runs, chosen from their data:
    how many grew a clear previous-word head (share > CLEAR_SHARE), where,
    how strong, and what the others did; in the current language."""
    n = len(runs)
    clear = [r for r in runs.values() if r.share[r.best_head] > CLEAR_SHARE]
    rest = [r for r in runs.values() if r.share[r.best_head] <= CLEAR_SHARE]
    if not clear:
        return tr(
            "In none of the {n} runs does a head put more than half of its "
            'attention at "the" on the word before it.',
            n=n,
        )
    shares = [r.share[r.best_head] for r in clear]
    others = [r.share_elsewhere[r.best_head] for r in clear]
    layers = sorted({r.best_head[0] + 1 for r in clear})
    where = tr(
        "layer {layers}", layers=tr(" or ").join(str(x) for x in layers)
    )
    values = dict(
        n=n,
        k=len(clear),
        where=where,
        low=min(shares),
        high=max(shares),
        other_low=min(others),
        other_high=max(others),
    )
    if not rest:
        return tr(
            "In all of the {n} runs, one head of {where} puts "
            '{low:.2f}–{high:.2f} of its attention at "the" '
            "on the word just before it, and only "
            "{other_low:.2f}–{other_high:.2f} on the previous word "
            "elsewhere: it reads the previous word where that word matters.",
            **values,
        )
    text = tr(
        "In {k} of the {n} runs, one head of {where} puts "
        '{low:.2f}–{high:.2f} of its attention at "the" '
        "on the word just before it, and only "
        "{other_low:.2f}–{other_high:.2f} on the previous word "
        "elsewhere: it reads the previous word where that word matters.",
        **values,
    )
    losses = [final_loss(r) for r in runs.values()]
    best = max(r.share[r.best_head] for r in rest)
    return text + tr(
        " In the other {k}, no head does (at most {best:.2f}), yet every run "
        "ends at a loss of {low:.3f}–{high:.3f}: the loss alone does not "
        "tell which route a model took.",
        k=len(rest),
        best=best,
        low=min(losses),
        high=max(losses),
    )


def runs_variety(runs: dict[int, HeadRun]) -> str:
    """One sentence on how the seeds differ: the head that does the job
    moves, or the job is done without a clear head at all; in the current
    language."""
    clear = [r for r in runs.values() if r.share[r.best_head] > CLEAR_SHARE]
    moved = len({r.best_head for r in clear}) > 1
    missing = len(clear) < len(runs)
    if moved and missing:
        return tr(
            "A different seed can grow it in another head or not at all, "
            "as the table shows."
        )
    if moved:
        return tr(
            "A different seed can grow it in another head, as the table shows."
        )
    if missing:
        return tr(
            "A different seed can grow it not at all, as the table shows."
        )
    return tr("Every seed grew it in the same head.")
