"""Tests of attnlab.train: the recall toy model, the trainer and the experiment runner.

Training here is kept tiny (a few hundred steps of a 2-layer model on MQAR with N = 2) and the
thresholds wide: CPUs differ, and the machine is shared.
"""

from __future__ import annotations

import math

import pytest
import torch
from attnlab.blocks import ShortConvolution
from attnlab.tasks import IGNORE, mqar_batch, mqar_eval_set
from attnlab.train import (
    RECALL_DECAY,
    RECALL_MIXERS,
    RecallModel,
    TrainHistory,
    accuracy,
    parameter_groups,
    pattern_label,
    run_recall_experiment,
    train,
    warmup_cosine,
)
from torch import nn


@pytest.fixture(autouse=True)
def one_thread():
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


def mqar_maker(n_pairs: int, batch_size: int = 32, vocab_size: int = 128):
    def make_batch(g: torch.Generator):
        return mqar_batch(batch_size, n_pairs, vocab_size=vocab_size, generator=g)

    return make_batch


# --------------------------------------------------------------------------- the model
@pytest.mark.parametrize("kind", RECALL_MIXERS)
def test_recall_model_shapes_and_causality(kind: str) -> None:
    torch.manual_seed(0)
    model = RecallModel(32, 16, (kind, kind), head_dim=8)
    x, _ = mqar_batch(2, 3, vocab_size=32, generator=torch.Generator().manual_seed(0))
    logits = model(x)
    assert logits.shape == (2, 12, 32) and torch.isfinite(logits).all()
    changed = x.clone()
    changed[:, 7:] = 1  # change the future: earlier logits must not move
    torch.testing.assert_close(model(changed)[:, :7], logits[:, :7])


@pytest.mark.parametrize("kind", ["gdn", "kda"])
def test_gated_recall_mixers_start_near_no_forgetting(kind: str) -> None:
    model = RecallModel(32, 16, (kind,), head_dim=8)
    layer = model.blocks[0].mixer
    alpha = torch.exp(-layer.A_log.exp() * torch.nn.functional.softplus(layer.dt_bias))
    torch.testing.assert_close(alpha, torch.full_like(alpha, RECALL_DECAY))


def test_recall_model_validation() -> None:
    with pytest.raises(ValueError, match=r"pattern\[1\]"):
        RecallModel(32, 16, ("attn", "mamba"))
    with pytest.raises(ValueError, match="pattern"):
        RecallModel(32, 16, "attn")
    with pytest.raises(ValueError, match="d_model"):
        RecallModel(32, 0, ("attn",))


def test_pattern_label() -> None:
    assert pattern_label(("kda", "kda")) == "kda"
    assert pattern_label(("kda", "attn")) == "kda→attn"


# --------------------------------------------------------------------------- pieces of train
class FixedLogits(nn.Module):
    """A stand-in model that returns given logits, whatever the input."""

    def __init__(self, logits: torch.Tensor) -> None:
        super().__init__()
        self.logits = logits

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.logits


def test_accuracy_counts_only_scored_positions() -> None:
    x, y = mqar_batch(4, 4, vocab_size=16, generator=torch.Generator().manual_seed(0))
    scored = y != IGNORE
    logits = torch.zeros(4, 16, 16)
    logits[..., 0] = 1.0  # predict token 0 (never a value) everywhere ...
    right = torch.nn.functional.one_hot(y.clamp(min=0), 16).float() * 5
    logits[scored] = right[scored]  # ... except at query positions: all right
    assert accuracy(FixedLogits(logits), x, y) == 1.0
    first_half = scored.clone()
    first_half[:, 12:] = False  # the last two queries of every row are now wrong
    logits[scored & ~first_half] = 0.0
    logits[scored & ~first_half, 0] = 1.0
    assert accuracy(FixedLogits(logits), x, y) == 0.5
    assert accuracy(FixedLogits((logits, None)), x, y) == 0.5  # (logits, cache) models
    with pytest.raises(ValueError, match="targets"):
        accuracy(FixedLogits(logits), x, torch.full_like(y, IGNORE))


def test_warmup_cosine() -> None:
    assert warmup_cosine(0, 100) == pytest.approx(0.1)
    assert warmup_cosine(9, 100) == pytest.approx(1.0)
    assert warmup_cosine(10, 100) == pytest.approx(1.0)
    assert warmup_cosine(55, 100) == pytest.approx(0.5)
    assert warmup_cosine(100, 100) == pytest.approx(0.0, abs=1e-12)
    values = [warmup_cosine(s, 100) for s in range(10, 101)]
    assert all(a >= b for a, b in zip(values, values[1:], strict=False))


def test_parameter_groups_decay_only_matrices() -> None:
    model = RecallModel(32, 16, ("kda", "attn"))
    decay, no_decay = parameter_groups(model, 0.1)
    assert decay["weight_decay"] == 0.1 and no_decay["weight_decay"] == 0.0
    ids = [id(p) for p in decay["params"] + no_decay["params"]]
    assert sorted(ids) == sorted(id(p) for p in model.parameters())  # each exactly once
    no_decay_ids = {id(p) for p in no_decay["params"]}
    convs = [m.weight for m in model.modules() if isinstance(m, ShortConvolution)]
    assert convs and all(id(w) in no_decay_ids for w in convs)
    assert all(p.dim() >= 2 for p in decay["params"])
    assert all(id(p) in no_decay_ids for p in model.parameters() if p.dim() < 2)
    assert id(model.embed.weight) not in no_decay_ids


# --------------------------------------------------------------------------- training
def test_softmax_model_learns_small_mqar() -> None:
    torch.manual_seed(0)
    model = RecallModel(128, 32, ("attn", "attn"))
    eval_set = mqar_eval_set(256, 2, seed=99)
    before = accuracy(model, *eval_set)
    history = train(model, mqar_maker(2), steps=400, eval_set=eval_set, eval_every=25,
                    target_accuracy=0.98, seed=0, progress=False)
    assert before < 0.2
    assert history.final_accuracy >= 0.98
    assert history.stopped_early and history.steps_run < 400


def test_train_stops_at_the_target_and_history_format() -> None:
    torch.manual_seed(1)
    model = RecallModel(32, 16, ("attn",))
    eval_set = mqar_eval_set(16, 2, seed=5, vocab_size=32)
    history = train(model, mqar_maker(2, 8, 32), steps=40, eval_set=eval_set, eval_every=5,
                    target_accuracy=0.0, seed=0, progress=False)
    assert isinstance(history, TrainHistory)
    assert history.step == [5] and history.stopped_early and history.steps_run == 5
    assert len(history.loss) == len(history.accuracy) == len(history.seconds) == 1

    history = train(model, mqar_maker(2, 8, 32), steps=12, eval_set=eval_set, eval_every=5,
                    target_accuracy=1.01, seed=0, progress=False)
    assert history.step == [5, 10, 12] and not history.stopped_early
    assert len(history.loss) == len(history.accuracy) == len(history.seconds) == 3
    assert all(math.isfinite(v) and v > 0 for v in history.loss)
    assert all(0.0 <= a <= 1.0 for a in history.accuracy)
    assert history.seconds == sorted(history.seconds) and history.total_seconds > 0
    assert history.final_accuracy == history.accuracy[-1]


def test_train_is_repeatable() -> None:
    def run() -> TrainHistory:
        torch.manual_seed(3)
        model = RecallModel(32, 16, ("deltanet",))
        return train(model, mqar_maker(2, 8, 32), steps=6, eval_every=3, seed=4, progress=False)

    a, b = run(), run()
    assert a.loss == b.loss and a.accuracy == b.accuracy


def test_train_validation() -> None:
    model = RecallModel(32, 16, ("attn",))
    with pytest.raises(ValueError, match="steps"):
        train(model, mqar_maker(2, 8, 32), steps=0, progress=False)
    with pytest.raises(ValueError, match="eval_every"):
        train(model, mqar_maker(2, 8, 32), steps=5, eval_every=0, progress=False)


def test_run_recall_experiment_rows() -> None:
    threads = torch.get_num_threads()
    rows = run_recall_experiment(["linear", ("kda", "attn")], [2, 3], seeds=(0, 1), steps=3,
                                 d_model=16, vocab_size=32, batch_size=4, eval_size=8,
                                 eval_every=2, threads=1, progress=False)
    assert torch.get_num_threads() == threads
    assert [(r["mixer"], r["n_pairs"], r["seed"]) for r in rows] == [
        (m, n, s) for n in (2, 3) for m in ("linear", "kda→attn") for s in (0, 1)
    ]
    for r in rows:
        assert set(r) == {"mixer", "pattern", "n_pairs", "seed", "accuracy", "steps", "seconds",
                          "history"}
        assert 0.0 <= r["accuracy"] <= 1.0 and r["steps"] <= 3 and r["seconds"] > 0
    assert rows[0]["pattern"] == ("linear", "linear") and rows[2]["pattern"] == ("kda", "attn")
