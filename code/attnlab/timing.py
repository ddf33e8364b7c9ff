"""Wall-clock timing shared by every ``time_*`` function of the package and by ``benchmarks/``,
and the kernel timings of Lessons 8 and 13 (``time_linear_attention``, ``time_delta_rule``).

Two summaries of ``repeats`` timed calls, each optionally after one untimed warm-up call (which
pays for first-call allocations and lazy initialisation):

- ``best_seconds``: the fastest call. Other processes on a shared machine only ever *add* time,
  so the minimum is the best estimate of what the code itself costs (``timeit``'s advice).
- ``median_seconds``: the middle call, for when the typical call matters more than the best one.

Every call runs under ``torch.no_grad()``: these are inference timings, without autograd.
Results depend on the machine and on ``torch.get_num_threads()``; set that before measuring.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F

from ._checks import check_choice, check_positive_int
from .costs import DELTA_FORMS, LINEAR_FORMS
from .delta import delta_rule_chunk, delta_rule_recurrent
from .linear import (
    linear_attention_chunk,
    linear_attention_parallel,
    linear_attention_recurrent,
)


def _timed_calls(
    fn: Callable[[], object], repeats: int, warmup: bool
) -> list[float]:
    """Seconds of each of ``repeats`` calls of ``fn()`` under ``torch.no_grad()``, after one
    untimed call when ``warmup``."""
    if not callable(fn):
        raise ValueError(
            f"fn: expected a callable taking no arguments, got {type(fn).__name__}"
        )
    check_positive_int("repeats", repeats)
    if not isinstance(warmup, bool):
        raise ValueError(f"warmup: expected True or False, got {warmup!r}")
    seconds = []
    with torch.no_grad():
        if warmup:
            fn()
        for _ in range(repeats):
            start = time.perf_counter()
            fn()
            seconds.append(time.perf_counter() - start)
    return seconds


def best_seconds(
    fn: Callable[[], object], *, repeats: int, warmup: bool = True
) -> float:
    """Fastest wall-clock seconds of ``repeats`` calls of ``fn()`` under ``torch.no_grad()``.

    When ``warmup`` is true, ``fn`` is first called once untimed (so it is called
    ``repeats + 1`` times in all). Raises ``ValueError`` naming ``fn``, ``repeats`` or ``warmup``
    when one is not a zero-argument callable, a positive int, or a bool.
    """
    return min(_timed_calls(fn, repeats, warmup))


def median_seconds(
    fn: Callable[[], object], *, repeats: int, warmup: bool = True
) -> float:
    """Median wall-clock seconds of ``repeats`` calls of ``fn()`` under ``torch.no_grad()``.

    Same arguments and checks as ``best_seconds``; an even ``repeats`` gives the mean of the two
    middle calls.
    """
    return statistics.median(_timed_calls(fn, repeats, warmup))


def _check_kernel_timing(
    form: str, forms: tuple[str, ...], **sizes: int
) -> None:
    check_choice("form", form, forms)
    for name, value in sizes.items():
        check_positive_int(name, value)


def time_linear_attention(
    form: str,
    length: int,
    *,
    n_heads: int = 1,
    head_dim: int = 64,
    chunk_size: int = 64,
    repeats: int = 3,
    warmup: bool = True,
    seed: int = 0,
) -> float:
    """Measured wall-clock seconds of one call of ``linear_attention_<form>`` (no normaliser,
    no autograd) on random q, k, v ``[1, n_heads, length, head_dim]`` in float32.

    Returns ``best_seconds`` of ``repeats`` runs (after one warm-up run when ``warmup``).
    ``chunk_size`` is used by the chunkwise form only.
    """
    _check_kernel_timing(
        form,
        LINEAR_FORMS,
        length=length,
        n_heads=n_heads,
        head_dim=head_dim,
        chunk_size=chunk_size,
    )
    g = torch.Generator().manual_seed(seed)
    q, k, v = (
        torch.randn(1, n_heads, length, head_dim, generator=g)
        for _ in range(3)
    )
    kernel = {
        "parallel": linear_attention_parallel,
        "recurrent": linear_attention_recurrent,
        "chunk": linear_attention_chunk,
    }[form]
    kwargs = {"chunk_size": chunk_size} if form == "chunk" else {}
    return best_seconds(
        lambda: kernel(q, k, v, **kwargs), repeats=repeats, warmup=warmup
    )


def time_delta_rule(
    form: str,
    length: int,
    *,
    n_heads: int = 4,
    head_dim: int = 64,
    chunk_size: int = 64,
    repeats: int = 3,
    warmup: bool = True,
    seed: int = 0,
) -> float:
    """Measured wall-clock seconds of one call of ``delta_rule_<form>`` (no autograd) on random
    q, v ``[1, n_heads, length, head_dim]``, L2-normalised keys and β uniform in (0, 1), float32.

    Returns ``best_seconds`` of ``repeats`` runs (after one warm-up run when ``warmup``).
    ``chunk_size`` is used by the chunkwise form only.
    """
    _check_kernel_timing(
        form,
        DELTA_FORMS,
        length=length,
        n_heads=n_heads,
        head_dim=head_dim,
        chunk_size=chunk_size,
    )
    gen = torch.Generator().manual_seed(seed)
    q, k, v = (
        torch.randn(1, n_heads, length, head_dim, generator=gen)
        for _ in range(3)
    )
    k = F.normalize(k, dim=-1)
    beta = torch.rand(1, n_heads, length, generator=gen)
    if form == "chunk":

        def run():
            return delta_rule_chunk(q, k, v, beta=beta, chunk_size=chunk_size)
    else:

        def run():
            return delta_rule_recurrent(q, k, v, beta=beta)

    return best_seconds(run, repeats=repeats, warmup=warmup)
