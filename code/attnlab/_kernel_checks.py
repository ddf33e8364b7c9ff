"""The input checks shared by the sequence kernels and their one-token steps (private).

Each mechanism module (``linear``, ``gated``, ``delta``, ``kda``) states what its public
functions accept in a short validator built from these checks and hands it to
:func:`attnlab.checks.checked`, so the checks run once, at the public boundary, and the lines a
lesson shows are the maths. Every check raises ``ValueError`` naming the caller's argument,
what was expected and what came: a wrong shape, dtype or device, an empty sequence, a NaN or
inf (which would spread to every later output and the state), a positive log-gate, or a write
strength β that would make the delta rule's state grow without bound.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from .checks import (
    check_finite,
    check_positive_int,
    check_range,
    check_score_range,
    check_tensor,
)

SEQUENCE = ("B", "H", "T")
"""The leading axes of every sequence tensor: batch, heads, time."""

TOKEN = ("B", "H")
"""The leading axes of every one-token tensor: batch, heads."""


def check_sequences(
    q: object,
    k: object,
    v: object,
    *,
    initial_state: object = None,
    scale: object = None,
    chunk_size: object = 1,
) -> dict[str, int]:
    """Check q, k ``[B, H, T, Dk]``, v ``[B, H, T, Dv]`` and ``initial_state [B, H, Dk, Dv]``
    (if given), the ``scale`` and the ``chunk_size``; return the sizes by name.

    All tensors must share q's dtype (float32 or float64) and device, have no empty axis (at
    least one time step) and hold only finite numbers, at a scale that keeps them finite.
    """
    sizes = check_tensor("q", q, (*SEQUENCE, "Dk"))
    if sizes["T"] == 0:
        raise ValueError(
            f"q: expected at least one time step, got shape {tuple(q.shape)}"
        )
    for name, size in sizes.items():
        if size == 0:
            raise ValueError(
                f"q: expected non-empty axes, got {name}=0 (q {tuple(q.shape)})"
            )
    like = {"dtype": q.dtype, "device": q.device}
    check_tensor("k", k, (*SEQUENCE, "Dk"), sizes, **like)
    check_tensor("v", v, (*SEQUENCE, "Dv"), sizes, **like)
    if initial_state is not None:
        dims = ("B", "H", "Dk", "Dv")
        check_tensor("initial_state", initial_state, dims, sizes, **like)
    for name, x in (("q", q), ("k", k), ("v", v)):
        check_finite(name, x)
    if initial_state is not None:
        check_finite("initial_state", initial_state)
    check_score_range(q, k, scale, initial_state)
    check_positive_int("chunk_size", chunk_size)
    return sizes


def check_tokens(
    q: object, k: object, v: object, *, state: object, scale: object = None
) -> dict[str, int]:
    """Check one token: q, k ``[B, H, Dk]``, v ``[B, H, Dv]`` and ``state [B, H, Dk, Dv]``, with
    q's dtype and device, non-empty, all finite, and the ``scale``; return the sizes by name."""
    sizes = check_tensor("q", q, (*TOKEN, "Dk"))
    like = {"dtype": q.dtype, "device": q.device}
    check_tensor("k", k, (*TOKEN, "Dk"), sizes, **like)
    check_tensor("v", v, (*TOKEN, "Dv"), sizes, **like)
    check_tensor("state", state, (*TOKEN, "Dk", "Dv"), sizes, **like)
    for name, x in (("q", q), ("k", k), ("v", v), ("state", state)):
        check_finite(name, x)
    if 0 in sizes.values():
        raise ValueError(f"q, v: expected non-empty axes, got sizes {sizes}")
    check_score_range(q, k, scale, state)
    return sizes


def check_log_gate(
    g: object,
    sizes: dict[str, int],
    like: torch.Tensor,
    *shapes: Sequence[str],
) -> None:
    """Check a log-gate ``g = log α``: a tensor with one of the named ``shapes`` (e.g.
    ``[B, H, T]`` or ``[B, H, T, Dk]``), like's dtype and device, finite and ``<= 0`` (a decay
    α = exp(g) in (0, 1])."""
    if isinstance(g, torch.Tensor) and len(shapes) > 1:
        fitting = [dims for dims in shapes if len(dims) == g.dim()]
        if not fitting:
            expected = " or ".join(
                f"a {len(dims)}-D tensor [{', '.join(dims)}]"
                for dims in shapes
            )
            raise ValueError(
                f"g: expected {expected}, got shape {tuple(g.shape)}"
            )
        shapes = fitting
    check_tensor(
        "g", g, shapes[0], sizes, dtype=like.dtype, device=like.device
    )
    if g.numel():
        lowest, highest = torch.aminmax(g)  # one pass; NaN propagates to both
        if highest.isnan():
            raise ValueError("g: contains NaN")
        if highest > 0:
            raise ValueError(
                f"g: expected log-gates <= 0 (decay α = exp(g) <= 1), "
                f"got max {highest.item():.4g}"
            )
        if lowest.isinf():
            raise ValueError(
                "g: expected finite log-gates (g = log α, α > 0), got -inf"
            )


def check_beta(
    beta: object,
    k: torch.Tensor,
    sizes: dict[str, int],
    dims: Sequence[str],
    *,
    allow_unstable: object = False,
) -> None:
    """Check the write strengths β (shape ``dims``, like k): β ≥ 0 and β ‖k‖² ≤ 2 for every
    token, up to rounding (only β ≥ 0 when ``allow_unstable``).

    The delta rule's transition I − β k kᵀ has the eigenvalue 1 − β ‖k‖² along k (and 1 across
    it): only while that lies in [−1, 1] does the state stay bounded; beyond it grows
    geometrically (with ‖k‖ = 10 and β = 1, to 1e12 within a few tokens). For unit keys this
    is β ∈ [0, 2].
    """
    check_tensor(
        "beta", beta, dims, sizes, dtype=k.dtype, device=k.device, like="k"
    )
    if not isinstance(allow_unstable, bool):
        raise ValueError(
            f"allow_unstable: expected True or False, got {allow_unstable!r}"
        )
    check_range("beta", beta, 0.0, None)
    if allow_unstable or beta.numel() == 0:
        return
    # β ‖k‖²
    strength = beta * torch.linalg.vector_norm(k.detach(), dim=-1).square()
    worst = strength.max()
    if worst > 2 * (1 + 64 * torch.finfo(k.dtype).eps):
        raise ValueError(
            f"beta, k: expected β‖k‖² <= 2 for every token (the delta rule's "
            f"transition I − β k kᵀ has the eigenvalue 1 − β‖k‖², which must stay "
            f"in [−1, 1]), got β‖k‖² up to {worst.item():.4g}; normalise the keys "
            f"(‖k‖ = 1 allows β in [0, 2]) or lower beta"
        )


def check_flag(name: str, value: object) -> None:
    """Check that ``value`` is True or False."""
    if not isinstance(value, bool):
        raise ValueError(f"{name}: expected True or False, got {value!r}")
