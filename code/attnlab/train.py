"""Training: the course's one training step and the loop around it.

A model maps token ids ``[B, L]`` to ``(logits [B, L, V], cache)``, as
:class:`attnlab.model.HybridLM` does. A batch is ``(inputs, targets)``, both ``[B, L]``, the
targets shifted by one: ``y_t`` is the token that follows ``x_t``, or ``IGNORE`` where nothing
is scored. One step (:func:`train_step`) is

    L = −(1 / |P|) Σ_{t ∈ P} log softmax(logits_t)[y_t],   P = {t : y_t ≠ IGNORE}
    θ ← AdamW(θ, ∇L)            (gradient norm clipped; warm-up and cosine learning rate)

:func:`train` runs it on fresh batches and scores the model on an evaluation set as it goes;
:func:`train_language_model` feeds it windows of one token stream (Lessons 5b and 19). Lesson
17's recall experiment (``attnbook.recall_study``) trains through :func:`train` on MQAR
batches (``attnlab.tasks``), whose targets are the answers at the query positions only.
Progress reports belong to the caller: ``on_step`` is called after every step. Inputs are
checked at the public boundary; :func:`train` leaves the batches it draws to the model's own
checks.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from .blocks import ShortConvolution
from .checks import check_number, check_positive_int, checked
from .tasks import IGNORE

Batch = tuple[torch.Tensor, torch.Tensor]
"""``(input_ids [B, L], targets [B, L])``; targets are ``IGNORE`` where nothing is scored."""


# fmt: off
def train_step(model: nn.Module, optimizer: torch.optim.Optimizer,
               inputs: torch.Tensor, targets: torch.Tensor, *,
               clip_norm: float = 1.0) -> float:
    """One optimiser step; inputs, targets [B, L] -> the loss before it,
    L = mean over t with y_t ≠ IGNORE of −log softmax(logits_t)[y_t]."""
    logits, _ = model(inputs)
    loss = F.cross_entropy(
        logits.flatten(0, 1), targets.flatten(), ignore_index=IGNORE
    )
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
    optimizer.step()
    return loss.item()
# fmt: on


@torch.no_grad()
def accuracy(
    model: nn.Module, inputs: torch.Tensor, targets: torch.Tensor
) -> float:
    """Fraction of scored positions (``targets != IGNORE``) where argmax(logits) is the target.

    For MQAR these are exactly the query positions. inputs, targets ``[B, L]``.
    """
    if inputs.shape != targets.shape:
        raise ValueError(
            f"targets: expected the shape of inputs {tuple(inputs.shape)}, "
            f"got {tuple(targets.shape)}"
        )
    scored = targets != IGNORE
    if not scored.any():
        raise ValueError(
            "targets: no position is scored (every target is IGNORE)"
        )
    was_training = model.training
    model.eval()
    predictions = model(inputs)[0].argmax(dim=-1)
    model.train(was_training)
    return (predictions[scored] == targets[scored]).double().mean().item()


def parameter_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """AdamW groups: weight decay on matrices; none on biases, norm gains, gates (all 1-D) or
    short-convolution filters."""
    conv_params = {
        id(p)
        for m in model.modules()
        if isinstance(m, ShortConvolution | nn.Conv1d)
        for p in m.parameters()
    }
    decay, no_decay = [], []
    for p in model.parameters():
        if not p.requires_grad:
            continue
        (no_decay if p.dim() < 2 or id(p) in conv_params else decay).append(p)
    return [
        {"params": decay, "weight_decay": weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]


def warmup_cosine(
    step: int, total_steps: int, warmup_fraction: float = 0.1
) -> float:
    """Learning-rate multiplier: linear warm-up over the first ``w = warmup_fraction · total``
    steps, then cosine decay to 0:  m(s) = (s+1)/w  for s < w,  ½(1 + cos(π (s−w)/(total−w))).
    """
    warmup = max(1, round(warmup_fraction * total_steps))
    if step < warmup:
        return (step + 1) / warmup
    progress = (step - warmup) / max(1, total_steps - warmup)
    return 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))


@dataclass
class TrainHistory:
    """What ``train`` measured, one entry per evaluation.

    ``step[i]``: optimiser steps done; ``loss[i]``: mean training loss since the previous
    evaluation; ``accuracy[i]``: accuracy on the evaluation set; ``seconds[i]``: wall time since
    the start. ``step_losses``: the loss of every optimiser step. ``stopped_early`` is True when
    the target accuracy was reached.
    """

    step: list[int] = field(default_factory=list)
    step_losses: list[float] = field(default_factory=list)
    loss: list[float] = field(default_factory=list)
    accuracy: list[float] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    stopped_early: bool = False

    @property
    def final_accuracy(self) -> float:
        """Accuracy at the last evaluation."""
        return self.accuracy[-1]

    @property
    def steps_run(self) -> int:
        """Optimiser steps taken."""
        return self.step[-1]

    @property
    def total_seconds(self) -> float:
        """Wall time of the whole run."""
        return self.seconds[-1]


def train(
    model: nn.Module,
    make_batch: Callable[[torch.Generator], Batch],
    *,
    steps: int,
    lr: float = 3e-3,
    eval_set: Batch | None = None,
    eval_every: int = 50,
    target_accuracy: float | None = 0.995,
    seed: int = 0,
    weight_decay: float = 0.1,
    betas: tuple[float, float] = (0.9, 0.98),
    warmup_fraction: float = 0.1,
    clip_norm: float = 1.0,
    on_step: Callable[[int], None] | None = None,
) -> TrainHistory:
    """Train ``model`` on fresh batches ``make_batch(generator)`` and return its history.

    Each step is :func:`train_step` with AdamW (``betas``; ``weight_decay`` on matrices only,
    see ``parameter_groups``), a ``warmup_cosine`` schedule over ``steps`` and the gradient
    norm clipped to ``clip_norm``. The batch generator is seeded with ``seed``, so a run is
    repeatable (seed the model's initialisation yourself, before building it). Every
    ``eval_every`` steps and at the end, the accuracy on ``eval_set`` is recorded
    (``eval_set=None``: one batch drawn with seed ``seed + 1``); training stops early once it
    reaches ``target_accuracy`` (None: never). ``on_step(step)`` is called after every
    optimiser step (step = 1 … steps), e.g. to show progress or keep snapshots of what the
    model computes as it learns.
    """
    check_positive_int("steps", steps)
    check_positive_int("eval_every", eval_every)
    check_number("lr", lr)
    check_number("weight_decay", weight_decay, inclusive=True)
    check_number("warmup_fraction", warmup_fraction, inclusive=True, high=1.0)
    check_number("clip_norm", clip_norm)
    if (
        not isinstance(betas, tuple)
        or len(betas) != 2
        or not all(isinstance(b, float) and 0.0 <= b < 1.0 for b in betas)
    ):
        raise ValueError(
            f"betas: expected a pair of floats in [0, 1), got {betas!r}"
        )
    generator = torch.Generator().manual_seed(seed)
    if eval_set is None:
        eval_set = make_batch(torch.Generator().manual_seed(seed + 1))
    optimizer = torch.optim.AdamW(
        parameter_groups(model, weight_decay), lr=lr, betas=betas
    )
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: warmup_cosine(s, steps, warmup_fraction)
    )
    history, losses, start = TrainHistory(), [], time.perf_counter()
    model.train()
    for step in range(1, steps + 1):
        inputs, targets = make_batch(generator)
        loss = train_step(
            model, optimizer, inputs, targets, clip_norm=clip_norm
        )
        schedule.step()
        losses.append(loss)
        history.step_losses.append(loss)
        if on_step is not None:
            on_step(step)
        if step % eval_every == 0 or step == steps:
            history.step.append(step)
            history.loss.append(sum(losses) / len(losses))
            history.accuracy.append(accuracy(model, *eval_set))
            history.seconds.append(time.perf_counter() - start)
            losses = []
            if target_accuracy is not None:
                if history.accuracy[-1] >= target_accuracy:
                    history.stopped_early = step < steps
                    break
    return history


def _language_model_options(
    model: nn.Module,
    token_ids: object,
    steps: int,
    batch_size: int,
    seq_len: int,
    lr: float,
    **_: object,
) -> None:
    if (
        not isinstance(token_ids, torch.Tensor)
        or token_ids.dim() != 1
        or token_ids.dtype != torch.long
    ):
        raise ValueError(
            "token_ids: expected a 1-D int64 tensor of token ids, got "
            f"{getattr(token_ids, 'dtype', type(token_ids).__name__)} "
            f"of shape {tuple(getattr(token_ids, 'shape', ()))}"
        )
    check_positive_int("steps", steps)
    check_positive_int("batch_size", batch_size)
    check_positive_int("seq_len", seq_len)
    vocab_size = getattr(getattr(model, "config", None), "vocab_size", None)
    if vocab_size is not None and (
        token_ids.min() < 0 or token_ids.max() >= vocab_size
    ):
        raise ValueError(
            f"token_ids: expected ids in [0, {vocab_size}) (the model's "
            f"vocabulary), got min {token_ids.min().item()} and max "
            f"{token_ids.max().item()}"
        )
    if token_ids.numel() < seq_len + 2:
        raise ValueError(
            f"token_ids: expected at least seq_len + 2 = {seq_len + 2} ids, "
            f"got {token_ids.numel()}"
        )
    check_number("lr", lr)


# fmt: off
@checked(_language_model_options)
def train_language_model(
    model: nn.Module, token_ids: torch.Tensor, *, steps: int,
    batch_size: int = 8, seq_len: int = 32, lr: float = 1e-2,
    weight_decay: float = 0.1, seed: int = 0,
    on_step: Callable[[int], None] | None = None,
) -> list[float]:
    """Next-token training on windows of token_ids [N] at random offsets;
    returns the loss of every step and leaves the model in eval mode. AdamW
    betas (0.9, 0.95), the usual choice for language models."""
    offsets = torch.arange(seq_len + 1)

    def windows(generator: torch.Generator) -> Batch:
        fits = token_ids.numel() - seq_len  # window starts that fit
        starts = torch.randint(0, fits, (batch_size, 1), generator=generator)
        window = token_ids[starts + offsets]  # [B, seq_len + 1]
        return window[:, :-1], window[:, 1:]  # targets: shifted by one

    history = train(
        model,
        windows,
        steps=steps,
        lr=lr,
        eval_every=steps,
        target_accuracy=None,
        seed=seed,
        weight_decay=weight_decay,
        betas=(0.9, 0.95),
        on_step=on_step,
    )
    model.eval()
    return history.step_losses
# fmt: on
