"""Decoding without a cache and what decoding costs: Lesson 6's contrast to the KV cache (the
work of each step counted, the context a memory budget holds) and Lesson 18's cost of a layer
stack composed from one measured layer of each sort.

Counts, not timings: :mod:`attnbook.timing` measures the same steps on this machine.
"""

from __future__ import annotations

import torch

from attnlab.attention import softmax_attention
from attnlab.checks import check_positive_int, check_tensor
from attnlab.kinds import KINDS


def decode_without_cache(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    scale: float | None = None,
) -> torch.Tensor:
    """Token by token without a cache: at each step rerun causal attention over the whole
    prefix (every query row 1..t, as a model without a cache recomputes it) and keep the last
    row. O(t²) work per step instead of O(t); same result as
    :func:`attnlab.kv_cache.decode_with_cache`.

    q, k ``[B, H, T, Dk]``, v ``[B, H, T, Dv]`` -> o ``[B, H, T, Dv]``.
    """
    sizes = check_tensor("q", q, ("B", "H", "T", "Dk"))
    check_tensor(
        "k", k, ("B", "H", "T", "Dk"), sizes, dtype=q.dtype, device=q.device
    )
    check_tensor(
        "v", v, ("B", "H", "T", "Dv"), sizes, dtype=q.dtype, device=q.device
    )
    check_positive_int("T", sizes["T"])
    outputs = []
    for t in range(1, sizes["T"] + 1):
        o_prefix, _ = softmax_attention(
            q[:, :, :t], k[:, :, :t], v[:, :, :t], causal=True, scale=scale
        )
        outputs.append(o_prefix[:, :, -1:])
    return torch.cat(outputs, dim=2)


def _check_cached(cached: object) -> None:
    if not isinstance(cached, bool):
        raise ValueError(f"cached: expected True or False, got {cached!r}")


def decode_step_work(t: int, *, cached: bool) -> tuple[int, int]:
    """Work of generating token t (1-based) in one attention layer and head: ``(kv_rows, scores)``.

    kv_rows counts key/value rows projected, scores counts dot products q_i · k_j:

    - cached: kv_rows = 1 (only k_t, v_t; K_{1:t-1}, V_{1:t-1} are read from the cache) and
      scores = t (q_t against k_1 … k_t);
    - not cached: kv_rows = t (the whole prefix again) and scores = t(t+1)/2 (the causal pass:
      query i against keys 1 … i, for i = 1 … t), as ``decode_without_cache`` does.
    """
    check_positive_int("t", t)
    _check_cached(cached)
    if cached:
        return 1, t
    return t, t * (t + 1) // 2


def decode_total_work(n_tokens: int, *, cached: bool) -> tuple[int, int]:
    """``decode_step_work`` summed over steps t = 1 … T (T = ``n_tokens``): ``(kv_rows, scores)``.

    cached: (T, T(T+1)/2), linear and quadratic in T;
    not cached: (T(T+1)/2, T(T+1)(T+2)/6), quadratic and cubic in T.
    """
    check_positive_int("n_tokens", n_tokens)
    _check_cached(cached)
    n = n_tokens
    if cached:
        return n, n * (n + 1) // 2
    return n * (n + 1) // 2, n * (n + 1) * (n + 2) // 6


def max_cached_tokens(bytes_per_token: int, budget_bytes: int) -> int:
    """The longest context whose cache fits a memory budget: the largest T with
    T · bytes_per_token <= budget_bytes, i.e. ⌊budget / bytes per token⌋. Token T + 1 exceeds it.
    """
    check_positive_int("bytes_per_token", bytes_per_token)
    check_positive_int("budget_bytes", budget_bytes)
    return budget_bytes // bytes_per_token


def stack_cost(
    layer_pattern: tuple[str, ...], global_cost: float, recurrent_cost: float
) -> float:
    """A layer stack's cost composed from one measured layer of each sort:

        cost = n_global · global_cost + n_recurrent · recurrent_cost

    where n_global counts the layers of ``layer_pattern`` whose cache grows with the context
    (``attnlab.kinds.KINDS[kind].grows``: attention, MLA) and n_recurrent the others (Sophia: 7
    and 21). An estimate: it adds only the mixers' costs (no MLPs, norms,
    projections) and assumes every global layer costs what the one measured layer costs.
    """
    if (
        isinstance(layer_pattern, str)
        or not isinstance(layer_pattern, tuple | list)
        or (not layer_pattern)
    ):
        raise ValueError(
            f"layer_pattern: expected a non-empty tuple of layer kinds, "
            f"got {layer_pattern!r}"
        )
    for name, value in [
        ("global_cost", global_cost),
        ("recurrent_cost", recurrent_cost),
    ]:
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or value < 0
        ):
            raise ValueError(f"{name}: expected a number >= 0, got {value!r}")
    unknown = [kind for kind in layer_pattern if kind not in KINDS]
    if unknown:
        raise ValueError(
            f"layer_pattern: expected kinds from {list(KINDS)}, got {unknown[0]!r}"
        )
    n_global = sum(KINDS[kind].grows for kind in layer_pattern)
    return (
        n_global * global_cost
        + (len(layer_pattern) - n_global) * recurrent_cost
    )
