"""Wall-clock timing shared by every ``time_*`` function of the package and by ``benchmarks/``.

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

from ._checks import check_positive_int


def _timed_calls(fn: Callable[[], object], repeats: int, warmup: bool) -> list[float]:
    """Seconds of each of ``repeats`` calls of ``fn()`` under ``torch.no_grad()``, after one
    untimed call when ``warmup``."""
    if not callable(fn):
        raise ValueError(f"fn: expected a callable taking no arguments, got {type(fn).__name__}")
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


def best_seconds(fn: Callable[[], object], *, repeats: int, warmup: bool = True) -> float:
    """Fastest wall-clock seconds of ``repeats`` calls of ``fn()`` under ``torch.no_grad()``.

    When ``warmup`` is true, ``fn`` is first called once untimed (so it is called
    ``repeats + 1`` times in all). Raises ``ValueError`` naming ``fn``, ``repeats`` or ``warmup``
    when one is not a zero-argument callable, a positive int, or a bool.
    """
    return min(_timed_calls(fn, repeats, warmup))


def median_seconds(fn: Callable[[], object], *, repeats: int, warmup: bool = True) -> float:
    """Median wall-clock seconds of ``repeats`` calls of ``fn()`` under ``torch.no_grad()``.

    Same arguments and checks as ``best_seconds``; an even ``repeats`` gives the mean of the two
    middle calls.
    """
    return statistics.median(_timed_calls(fn, repeats, warmup))
