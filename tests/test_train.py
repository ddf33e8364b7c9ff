"""Tests of attnlab.train: the training step, the trainer and its pieces.

Training here is kept tiny (a few hundred steps of a 2-layer model on MQAR with N = 2) and the
thresholds wide: CPUs differ, and the machine is shared. The models are ``HybridLM``s; the
recall toy of Lesson 17 is tested with the study (tests/test_recall_study.py).
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from attnlab.blocks import ShortConvolution
from attnlab.configs import ModelConfig
from attnlab.model import HybridLM
from attnlab.tasks import IGNORE, mqar_batch, mqar_eval_set
from attnlab.train import (
    TrainHistory,
    accuracy,
    parameter_groups,
    train,
    train_step,
    warmup_cosine,
)
from torch import nn

pytestmark = pytest.mark.usefixtures("one_thread")


def mqar_maker(n_pairs: int, batch_size: int = 32, vocab_size: int = 128):
    def make_batch(g: torch.Generator):
        return mqar_batch(batch_size, n_pairs, vocab_size=vocab_size, generator=g)

    return make_batch


def small_model(pattern: tuple[str, ...], vocab_size: int = 32, d_model: int = 16,
                seed: int = 0) -> HybridLM:
    """A HybridLM with one head of width d_model and no positions: attention reads q, k, v
    through a short convolution, as the recurrent layers do (without it, attention cannot bind
    a value to its key on MQAR)."""
    torch.manual_seed(seed)
    return HybridLM(ModelConfig(
        name="test", vocab_size=vocab_size, d_model=d_model, layer_pattern=pattern, n_heads=1,
        head_dim=d_model, mlp_hidden=2 * d_model, rope=False, attn_conv=True))


# --------------------------------------------------------------------------- the step
def test_train_step_minimises_the_cross_entropy_of_the_scored_targets():
    model = small_model(("attn",))
    x, y = mqar_batch(4, 3, vocab_size=32, generator=torch.Generator().manual_seed(0))
    logits, _ = model(x)
    scored = y != IGNORE
    expected = F.cross_entropy(logits[scored], y[scored]).item()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    first = train_step(model, optimizer, x, y)
    assert first == pytest.approx(expected, rel=1e-6)  # only the scored positions count
    losses = [train_step(model, optimizer, x, y) for _ in range(20)]
    assert losses[-1] < first  # the step goes downhill on a fixed batch
    for p in model.parameters():  # and clips the gradient norm (default 1)
        assert p.grad is not None
    assert torch.linalg.vector_norm(
        torch.stack([p.grad.norm() for p in model.parameters()])) <= 1.0 + 1e-5


# --------------------------------------------------------------------------- pieces of train
class FixedLogits(nn.Module):
    """A stand-in model that returns given logits (and no cache), whatever the input."""

    def __init__(self, logits: torch.Tensor) -> None:
        super().__init__()
        self.logits = logits

    def forward(self, input_ids: torch.Tensor) -> tuple[torch.Tensor, None]:
        return self.logits, None


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
    model = small_model(("kda", "attn"))
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
    model = small_model(("attn", "attn"), vocab_size=128, d_model=32)
    eval_set = mqar_eval_set(256, 2, seed=99)
    before = accuracy(model, *eval_set)
    history = train(model, mqar_maker(2), steps=400, eval_set=eval_set, eval_every=25,
                    target_accuracy=0.98, seed=0)
    assert before < 0.2
    assert history.final_accuracy >= 0.98
    assert history.stopped_early and history.steps_run < 400


def test_train_stops_at_the_target_and_history_format() -> None:
    model = small_model(("attn",), seed=1)
    eval_set = mqar_eval_set(16, 2, seed=5, vocab_size=32)
    history = train(model, mqar_maker(2, 8, 32), steps=40, eval_set=eval_set, eval_every=5,
                    target_accuracy=0.0, seed=0)
    assert isinstance(history, TrainHistory)
    assert history.step == [5] and history.stopped_early and history.steps_run == 5
    assert len(history.loss) == len(history.accuracy) == len(history.seconds) == 1

    seen = []
    history = train(model, mqar_maker(2, 8, 32), steps=12, eval_set=eval_set, eval_every=5,
                    target_accuracy=1.01, seed=0, on_step=seen.append)
    assert history.step == [5, 10, 12] and not history.stopped_early
    assert seen == list(range(1, 13)) and len(history.step_losses) == 12
    assert len(history.loss) == len(history.accuracy) == len(history.seconds) == 3
    assert all(math.isfinite(v) and v > 0 for v in history.loss)
    assert all(0.0 <= a <= 1.0 for a in history.accuracy)
    assert history.seconds == sorted(history.seconds) and history.total_seconds > 0
    assert history.final_accuracy == history.accuracy[-1]


def test_train_is_repeatable() -> None:
    def run() -> TrainHistory:
        model = small_model(("deltanet",), seed=3)
        return train(model, mqar_maker(2, 8, 32), steps=6, eval_every=3, seed=4)

    a, b = run(), run()
    assert a.loss == b.loss and a.accuracy == b.accuracy


def test_train_validation() -> None:
    model = small_model(("attn",))
    with pytest.raises(ValueError, match="steps"):
        train(model, mqar_maker(2, 8, 32), steps=0)
    with pytest.raises(ValueError, match="eval_every"):
        train(model, mqar_maker(2, 8, 32), steps=5, eval_every=0)
    with pytest.raises(ValueError, match="betas"):
        train(model, mqar_maker(2, 8, 32), steps=5, betas=(0.9, 1.5))
    with pytest.raises(ValueError, match="input_ids: expected token ids in"):
        train(model, mqar_maker(2, 8, 64), steps=2)  # batches beyond the model's vocabulary
