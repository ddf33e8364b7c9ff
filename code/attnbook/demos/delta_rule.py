"""The experiments of Lessons 11 and 12: one key overwritten, key-norm stability, recall against
the number of pairs, and the document switch. Every number comes from the package's kernels
(``linear_attention_recurrent``, ``delta_rule_recurrent``), through
:mod:`attnbook.demos.associative_memory` for the recall and the switch."""

from __future__ import annotations

from functools import cache

import torch

from attnlab.checks import check_float_in
from attnlab.delta import delta_rule_recurrent
from attnlab.linear import linear_attention_recurrent

from .associative_memory import (
    associative_pairs,
    delta_recall_errors_by_pair,
    document_switch_stream,
    latest_value_errors,
    recall_errors_by_pair,
    switch_stream_state,
)

#: The value first stored under key k₁, and the value that replaces it (4 features).
OLD_VALUE = (1.0, 2.0, -1.0, 0.5)


NEW_VALUE = (-1.0, 0.5, 1.5, 1.0)


@cache
def _overwrite_pairs() -> tuple[torch.Tensor, torch.Tensor]:
    """Keys k₁, k₂, k₃, k₁ (orthonormal, 4-D) and values: old, two others, new: ``[4, 4]``."""
    generator = torch.Generator().manual_seed(11)
    keys, others = associative_pairs(
        3, 4, orthogonal=True, generator=generator
    )
    keys = torch.cat([keys, keys[:1]])  # k₁ comes back as the fourth key
    values = torch.stack(
        [
            torch.tensor(OLD_VALUE, dtype=keys.dtype),
            others[1],
            others[2],
            torch.tensor(NEW_VALUE, dtype=keys.dtype),
        ]
    )
    return keys, values


def overwrite_example(beta: float = 1.0) -> dict[str, torch.Tensor]:
    """Write (k₁, old), (k₂, v₂), (k₃, v₃) and then (k₁, new); read back under k₁, both ways.

    The first three writes store their pairs completely (β = 1); the fourth, which gives k₁ its
    new value, uses ``beta``. Returns the four 4-vectors ``old``, ``new``, ``additive`` (the
    last output of ``linear_attention_recurrent`` with query k₁, i.e. Sᵀk₁ for S = Σ k_i v_iᵀ)
    and ``delta`` (the same output of ``delta_rule_recurrent``). The keys are orthonormal, so
    the other pairs do not interfere and ``delta`` is exactly (1 − β)·old + β·new.
    """
    beta = check_float_in("beta", beta, 0.0, 2.0)
    keys, values = _overwrite_pairs()
    # [1, 1, 4, 4]; the last query is k₁
    k, v = (keys[None, None], values[None, None])
    betas = torch.tensor([1.0, 1.0, 1.0, beta], dtype=keys.dtype)[None, None]
    additive, _ = linear_attention_recurrent(k, k, v, scale=1.0)
    delta, _ = delta_rule_recurrent(k, k, v, beta=betas, scale=1.0)
    return {
        "old": values[0],
        "new": values[3],
        "additive": additive[0, 0, -1],
        "delta": delta[0, 0, -1],
    }


STABILITY_LENGTH = 48


STABILITY_DIM = 16


@cache
def _stability_inputs() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Unit query and key directions and N(0, 1) values, ``[1, 1, 48, 16]`` each, float64."""
    generator = torch.Generator().manual_seed(7)
    shape = (1, 1, STABILITY_LENGTH, STABILITY_DIM)
    q, k, v = (
        torch.randn(*shape, generator=generator, dtype=torch.float64)
        for _ in range(3)
    )
    return (
        q / q.norm(dim=-1, keepdim=True),
        k / k.norm(dim=-1, keepdim=True),
        v,
    )


@cache
def output_norms(key_norm: float, beta: float) -> torch.Tensor:
    """‖o_t‖ for t = 1…48 of ``delta_rule_recurrent`` (scale 1) with every key of length
    ``key_norm`` and a constant ``beta``, on fixed random unit queries and N(0, 1) values."""
    key_norm = check_float_in("key_norm", key_norm, 0.0, 100.0)
    beta = check_float_in("beta", beta, 0.0, 2.0)
    q, k, v = _stability_inputs()
    betas = torch.full(k.shape[:3], beta, dtype=k.dtype)
    o, _ = delta_rule_recurrent(
        q, key_norm * k, v, beta=betas, scale=1.0, allow_unstable=True
    )
    return o[0, 0].norm(dim=-1)


RECALL_DIM = 16


RECALL_PAIRS = (2, 4, 8, 12, 16, 24, 32, 48, 64)


RECALL_TRIALS = 64


@cache
def recall_curves(
    dim: int = RECALL_DIM, trials: int = RECALL_TRIALS, seed: int = 0
) -> dict:
    """Mean relative recall error against the number of stored pairs N, for random unit keys
    (additive and delta rule with β = 1) and orthonormal keys (additive, N ≤ dim); and, at
    N = 2·dim, the error of each pair by its write position. ``trials`` draws per N."""
    generator = torch.Generator().manual_seed(seed)
    curves: dict = {
        "n_pairs": list(RECALL_PAIRS),
        "add": [],
        "delta": [],
        "orth_n": [],
        "orth_add": [],
    }
    by_position = {}
    for n in RECALL_PAIRS:
        draws = [
            associative_pairs(n, dim, orthogonal=False, generator=generator)
            for _ in range(trials)
        ]
        keys = torch.stack([k for k, _ in draws])
        values = torch.stack([v for _, v in draws])
        add = recall_errors_by_pair(keys, values)[:, 0]  # [trials, N]
        delta = delta_recall_errors_by_pair(keys, values, beta=1.0)
        curves["add"].append(add.mean().item())
        curves["delta"].append(delta.mean().item())
        if n == 2 * dim:
            by_position = {
                "n": n,
                "add": add.mean(0).tolist(),
                "delta": delta.mean(0).tolist(),
            }
        if n <= dim:
            draws = [
                associative_pairs(
                    n, dim, orthogonal=True, generator=generator
                )
                for _ in range(trials)
            ]
            keys = torch.stack([k for k, _ in draws])
            values = torch.stack([v for _, v in draws])
            curves["orth_n"].append(n)
            curves["orth_add"].append(
                recall_errors_by_pair(keys, values).mean().item()
            )
    curves["by_position"] = by_position
    return curves


#: Lesson 12's stream: 128 old pairs, 8 new ones, 4 of them overwritten, in a 32 × 32 state.
SWITCH_SETUP = {
    "n_old": 128,
    "n_new": 8,
    "n_overwrite": 4,
    "dim": 32,
    "n_sequences": 32,
}


SWITCH_SEED = 12


SWITCH_NAMES = {
    "gla": "scalar-gated linear attention",
    "deltanet": "DeltaNet",
    "gdn": "Gated DeltaNet",
}


@cache
def switch_stream():
    """Lesson 12's fixed stream (``document_switch_stream`` with ``SWITCH_SETUP``)."""
    generator = torch.Generator().manual_seed(SWITCH_SEED)
    return document_switch_stream(**SWITCH_SETUP, generator=generator)


def _switch_state(
    mixer: str, alpha_boundary: float, beta: float
) -> torch.Tensor:
    """The final state of ``mixer`` on the stream, computed once per setting it depends on."""
    if mixer in ("deltanet", "latest_only"):
        alpha_boundary = 1.0  # no gate
    if mixer in ("gla", "latest_only"):
        beta = 1.0  # no write strength
    return _cached_state(mixer, alpha_boundary, beta)


@cache
def _cached_state(
    mixer: str, alpha_boundary: float, beta: float
) -> torch.Tensor:
    return switch_stream_state(
        switch_stream(), mixer, alpha_boundary=alpha_boundary, beta=beta
    )


def switch_errors(
    alpha_boundary: float, beta: float, query_noise: float
) -> dict:
    """(overwritten, unchanged) mean errors of each mixer and of ``latest_only`` on the stream,
    with the gate ``alpha_boundary`` at the document boundary (1 inside documents)."""
    alpha_boundary = check_float_in(
        "alpha_boundary", alpha_boundary, 1e-12, 1.0
    )
    beta = check_float_in("beta", beta, 0.0, 2.0)
    query_noise = check_float_in("query_noise", query_noise, 0.0, 10.0)
    stream = switch_stream()
    return {
        mixer: latest_value_errors(
            stream,
            _switch_state(mixer, alpha_boundary, beta),
            query_noise=query_noise,
        )
        for mixer in (*SWITCH_NAMES, "latest_only")
    }
