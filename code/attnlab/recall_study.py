"""The recall study: MQAR over mixers, state sizes, learning rates and seeds, and its facts.

One *cell* of the study trains one toy model of ``attnlab.train`` (one mixer pattern, N pairs,
one learning rate, one seed) and scores it on two fixed sets drawn with different seeds:

    validation set   early stopping and the choice of each model's learning rate
    test set         every reported accuracy and the failure analysis

``benchmarks/recall_sweep.py`` runs the grid and stores the rows; Lesson 17 reads them back
with :func:`load_study` and states only what :func:`summarize` and :func:`paired_gap` compute.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from ._checks import check_positive_int
from .tasks import IGNORE, mqar_batch, mqar_eval_set, mqar_value_range
from .train import Batch, RecallModel, logits_of, pattern_label, train

STUDY_MIXERS: tuple[tuple[str, ...], ...] = (
    ("attn", "attn"), ("linear", "linear"), ("deltanet", "deltanet"), ("gdn", "gdn"),
    ("kda", "kda"), ("attn", "kda"), ("kda", "attn"),
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


@torch.no_grad()
def answer_analysis(model: torch.nn.Module, inputs: torch.Tensor, targets: torch.Tensor,
                    vocab_size: int) -> dict[str, float]:
    """What a model answers at the MQAR query positions (``targets != IGNORE``).

    With p = argmax logits at a query position of a sequence whose context holds the values
    v_1 … v_N, returns the fractions of query positions where

        right        p is the target value
        value        p is a value token (any of ``mqar_value_range(vocab_size)``)
        in_context   p is one of that sequence's v_1 … v_N (right answers included)

    so ``in_context − right`` is how often the model copies the wrong pair's value.
    inputs, targets ``[B, 4N]`` as from ``attnlab.tasks.mqar_batch``.
    """
    n_pairs = inputs.shape[1] // 4
    was_training = model.training
    model.eval()
    predictions = logits_of(model, inputs).argmax(dim=-1)  # [B, L]
    model.train(was_training)
    scored = targets != IGNORE  # [B, L]
    context_values = inputs[:, 1:2 * n_pairs:2]  # [B, N]
    in_context = (predictions[..., None] == context_values[:, None, :]).any(dim=-1)  # [B, L]
    low, high = mqar_value_range(vocab_size)
    p = predictions[scored]
    return {"right": (p == targets[scored]).double().mean().item(),
            "value": ((p >= low) & (p < high)).double().mean().item(),
            "in_context": in_context[scored].double().mean().item()}


def train_cell(pattern: Sequence[str], n_pairs: int, lr: float, seed: int,
               config: StudyConfig = StudyConfig()) -> dict:
    """Train and score one cell of the study; returns its row (a JSON-ready dict).

    ``torch.manual_seed(seed)`` fixes the initialisation and ``seed`` the training batches, as
    in ``attnlab.train.run_recall_experiment``; with the same torch build, CPU and thread count
    a cell reproduces bit for bit. Row keys: ``mixer`` (label), ``pattern``, ``n_pairs``,
    ``lr``, ``seed``, ``val_accuracy``, ``accuracy`` (test), ``value``, ``in_context``
    (:func:`answer_analysis` on the test set), ``steps``, ``stopped_early``, ``curve_steps``,
    ``curve_val`` (validation accuracy per evaluation), ``seconds``, ``cpu_seconds``.
    """
    check_positive_int("n_pairs", n_pairs)
    c = config
    val_set = mqar_eval_set(c.val_size, n_pairs, c.val_seed, vocab_size=c.vocab_size)
    test_set = mqar_eval_set(c.test_size, n_pairs, c.test_seed, vocab_size=c.vocab_size)

    def make_batch(g: torch.Generator) -> Batch:
        return mqar_batch(c.batch_size, n_pairs, vocab_size=c.vocab_size, generator=g)

    cpu = time.process_time()
    torch.manual_seed(seed)
    model = RecallModel(c.vocab_size, c.d_model, pattern, head_dim=c.head_dim)
    history = train(model, make_batch, steps=c.steps, lr=lr, eval_set=val_set,
                    eval_every=c.eval_every, target_accuracy=c.target_accuracy, seed=seed,
                    progress=False)
    analysis = answer_analysis(model, *test_set, c.vocab_size)
    return {"mixer": pattern_label(pattern), "pattern": list(pattern), "n_pairs": n_pairs,
            "lr": lr, "seed": seed, "val_accuracy": history.final_accuracy,
            "accuracy": analysis["right"], "value": analysis["value"],
            "in_context": analysis["in_context"], "steps": history.steps_run,
            "stopped_early": history.stopped_early, "curve_steps": history.step,
            "curve_val": history.accuracy, "seconds": history.total_seconds,
            "cpu_seconds": time.process_time() - cpu}


def config_dict(config: StudyConfig) -> dict:
    """``config`` as a plain dict (how it is stored in the results file)."""
    return asdict(config)


def load_study(path: str | Path) -> dict:
    """The stored study: ``{"meta": {...}, "config": {...}, "grid": {...}, "rows": [...]}``."""
    study = json.loads(Path(path).read_text())
    for key in ("meta", "config", "grid", "rows"):
        if key not in study:
            raise ValueError(f"path: {path} is not a recall study (no {key!r} entry)")
    return study
