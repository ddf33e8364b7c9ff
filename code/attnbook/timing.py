"""Wall-clock timing shared by every ``time_*`` function of the package and by ``benchmarks/``,
and the kernel timings of Lessons 8 and 13 (``time_linear_attention``, ``time_delta_rule``).

Two summaries of ``repeats`` timed calls, each optionally after one untimed warm-up call (which
pays for first-call allocations and lazy initialisation):

- ``best_seconds``: the fastest call. Other processes on a shared machine only ever *add* time,
  so the minimum is the best estimate of what the code itself costs (``timeit``'s advice).
- ``median_seconds``: the middle call, for when the typical call matters more than the best one.
- ``spread_seconds``: the median with the fastest and slowest call (a ``Spread``), for a
  sentence or a fit that must hold however noisy the machine is.

Every call runs under ``torch.no_grad()``: these are inference timings, without autograd.
Results depend on the machine and on ``torch.get_num_threads()``; set that before measuring.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

import torch
import torch.nn.functional as F

from attnlab import attention
from attnlab.checks import (
    as_outside_caller,
    check_choice,
    check_positive_int,
    checked,
)
from attnlab.delta import delta_rule_chunk, delta_rule_recurrent
from attnlab.kda import kda_step
from attnlab.kv_cache import KVCache
from attnlab.linear import (
    linear_attention_chunk,
    linear_attention_parallel,
    linear_attention_recurrent,
)

from .costs import DELTA_FORMS, LINEAR_FORMS


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


def median_and_range(
    rounds: Sequence[Sequence[float]],
) -> list[tuple[float, float, float]]:
    """(median, fastest, slowest) over the rounds at each point: ``rounds[r][i]`` is round r's
    measurement at point i, as :func:`time_decode_steps` returns them."""
    return [
        (statistics.median(col), min(col), max(col))
        for col in zip(*rounds, strict=True)
    ]


def loglog_slope(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Least-squares slope p of log y = a + p · log x: y grows like x^p over the points given
    (p = 1 in proportion, p = 0 not at all). Needs two or more positive xs, not all equal."""
    lx, ly = [math.log(x) for x in xs], [math.log(y) for y in ys]
    return linear_fit(lx, ly)[1]


def linear_fit(
    xs: Sequence[float], ys: Sequence[float]
) -> tuple[float, float]:
    """Least-squares intercept a and slope b of y = a + b · x over all the points given."""
    if len(xs) != len(ys) or len(xs) < 2:
        raise ValueError(
            f"xs, ys: expected two sequences of equal length >= 2, got "
            f"{len(xs)} and {len(ys)} values"
        )
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx == 0:
        raise ValueError(
            f"xs: expected at least two different values, got {xs}"
        )
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    return my - b * mx, b


@dataclass(frozen=True)
class Spread:
    """Seconds of repeated calls: their ``median`` and the fastest (``low``) and slowest
    (``high``) call, and every call in the order it ran (``runs``)."""

    median: float
    low: float
    high: float
    runs: tuple[float, ...]

    def overlaps(self, other: Spread) -> bool:
        """True when the two ranges [low, high] share a point: the runs cannot tell the two
        apart."""
        return self.low <= other.high and other.low <= self.high


def spread_seconds(
    fn: Callable[[], object], *, repeats: int, warmup: bool = True
) -> Spread:
    """Median, fastest and slowest wall-clock seconds of ``repeats`` calls of ``fn()`` under
    ``torch.no_grad()`` (a ``Spread``). Same arguments and checks as ``best_seconds``."""
    runs = _timed_calls(fn, repeats, warmup)
    return Spread(statistics.median(runs), min(runs), max(runs), tuple(runs))


_SUMMARIES = (best_seconds, median_seconds, spread_seconds)


def _check_kernel_timing(
    form: str, forms: tuple[str, ...], summary: object, **sizes: int
) -> None:
    check_choice("form", form, forms)
    if summary not in _SUMMARIES:
        names = ", ".join(f.__name__ for f in _SUMMARIES)
        raise ValueError(f"summary: expected one of {names}, got {summary!r}")
    for name, value in sizes.items():
        check_positive_int(name, value)


def time_linear_attention(
    form: str,
    length: int,
    *,
    summary: Callable[..., object] = best_seconds,
    n_heads: int = 1,
    head_dim: int = 64,
    chunk_size: int = 64,
    repeats: int = 3,
    warmup: bool = True,
    seed: int = 0,
) -> float:
    """Measured wall-clock seconds of one call of ``linear_attention_<form>`` (no normaliser,
    no autograd) on random q, k, v ``[1, n_heads, length, head_dim]`` in float32.

    Returns ``summary`` (``best_seconds``, ``median_seconds`` or ``spread_seconds``) of
    ``repeats`` runs, after one warm-up run when ``warmup``. ``chunk_size`` is used by the
    chunkwise form only.
    """
    _check_kernel_timing(
        form,
        LINEAR_FORMS,
        summary,
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
    return summary(
        lambda: kernel(q, k, v, **kwargs), repeats=repeats, warmup=warmup
    )


def time_delta_rule(
    form: str,
    length: int,
    *,
    summary: Callable[..., object] = best_seconds,
    n_heads: int = 4,
    head_dim: int = 64,
    chunk_size: int = 64,
    repeats: int = 3,
    warmup: bool = True,
    seed: int = 0,
) -> float:
    """Measured wall-clock seconds of one call of ``delta_rule_<form>`` (no autograd) on random
    q, v ``[1, n_heads, length, head_dim]``, L2-normalised keys and β uniform in (0, 1), float32.

    Returns ``summary`` (``best_seconds``, ``median_seconds`` or ``spread_seconds``) of
    ``repeats`` runs, after one warm-up run when ``warmup``. ``chunk_size`` is used by the
    chunkwise form only.
    """
    _check_kernel_timing(
        form,
        DELTA_FORMS,
        summary,
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

    return summary(run, repeats=repeats, warmup=warmup)


def _decode_step_sizes(
    context: int, cached: bool, n_heads: int, head_dim: int
) -> None:
    for name, value in [
        ("context", context),
        ("n_heads", n_heads),
        ("head_dim", head_dim),
    ]:
        check_positive_int(name, value)
    if not isinstance(cached, bool):
        raise ValueError(f"cached: expected True or False, got {cached!r}")


def decode_step(
    context: int,
    *,
    cached: bool,
    n_heads: int = 2,
    head_dim: int = 64,
    seed: int = 0,
) -> Callable[[], torch.Tensor]:
    """A zero-argument function that generates the token at position ``context`` in one
    attention layer, batch 1, float32, returning o_t ``[1, H, 1, head_dim]``.

    The layer has width d = n_heads · head_dim and random projections W_Q, W_K, W_V ``[d, d]``;
    the hidden states of the prefix are x ``[1, context, d]``, its last row the new token x_t.

    - cached: project x_t only, write k_t, v_t as row t of a preallocated cache ``[1, H, context,
      head_dim]`` whose earlier rows were written by the earlier steps, and compute
      o_t = V_{1:t}ᵀ softmax(s · K_{1:t} q_t): O(context · d) work. (Preallocated as serving
      systems do: ``KVCache.append``'s ``torch.cat`` allocates a new cache at every step, which
      would time the memory allocator as much as attention.)
    - not cached: project all context rows to Q, K, V ``[1, H, context, head_dim]``, run the
      causal pass and keep its last row, as ``decode_without_cache`` does: O(context² · d).
    """
    _decode_step_sizes(context, cached, n_heads, head_dim)
    d = n_heads * head_dim
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(1, context, d, generator=g)
    w_q, w_k, w_v = (
        torch.randn(d, d, generator=g) * d**-0.5 for _ in range(3)
    )

    def heads(y: torch.Tensor) -> torch.Tensor:  # [1, T, H·D] -> [1, H, T, D]
        return (
            y.view(1, y.shape[1], n_heads, head_dim)
            .transpose(1, 2)
            .contiguous()
        )

    if cached:
        # rows 1 … t-1: written by earlier steps
        keys, values = (heads(x @ w_k), heads(x @ w_v))

        def step() -> torch.Tensor:
            x_t = x[:, -1:]
            # append k_t, v_t in place: row t
            keys[:, :, -1:] = heads(x_t @ w_k)
            values[:, :, -1:] = heads(x_t @ w_v)
            o_t, _ = attention.softmax_attention(
                heads(x_t @ w_q), keys, values, causal=False
            )
            return o_t
    else:

        def step() -> torch.Tensor:
            o, _ = attention.softmax_attention(
                heads(x @ w_q), heads(x @ w_k), heads(x @ w_v), causal=True
            )
            return o[:, :, -1:]

    return step


def time_decode_step(
    context: int,
    *,
    cached: bool,
    n_heads: int = 2,
    head_dim: int = 64,
    repeats: int = 3,
    seed: int = 0,
) -> float:
    """Measured wall-clock seconds (the fastest of ``repeats`` runs, after one warm-up) of
    the step :func:`decode_step` builds: generating the token at position ``context`` in one
    attention layer, batch 1, float32. The minimum, as ``timeit`` advises: other processes on
    the machine only ever add time.

    Timings depend on the machine and on ``torch.get_num_threads()``; set it before measuring.
    """
    check_positive_int("repeats", repeats)
    step = decode_step(
        context, cached=cached, n_heads=n_heads, head_dim=head_dim, seed=seed
    )
    return best_seconds(step, repeats=repeats)


def time_decode_steps(
    contexts: Sequence[int],
    *,
    cached: bool,
    rounds: int = 5,
    repeats: int = 7,
    n_heads: int = 2,
    head_dim: int = 64,
    seed: int = 0,
) -> list[list[float]]:
    """Seconds of the :func:`decode_step` at every context, measured in ``rounds`` rounds:
    ``result[r][i]`` is the median of ``repeats`` calls (after one warm-up) at ``contexts[i]``
    in round r. Each round times every context once, in order, so a burst of load on a shared
    machine lands on one round rather than on one context; the spread between rounds shows how
    far a point moves. Depends on the machine and on ``torch.get_num_threads()``.
    """
    if isinstance(contexts, int) or not contexts:
        raise ValueError(
            f"contexts: expected a non-empty sequence of positive ints, "
            f"got {contexts!r}"
        )
    check_positive_int("rounds", rounds)
    check_positive_int("repeats", repeats)
    steps = [
        decode_step(
            c, cached=cached, n_heads=n_heads, head_dim=head_dim, seed=seed
        )
        for c in contexts
    ]
    return [
        [median_seconds(step, repeats=repeats) for step in steps]
        for _ in range(rounds)
    ]


def cached_attention_read(
    q_t: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float
) -> torch.Tensor:
    """The raw decoding read, without argument checks:  o_t = V_{1:t}ᵀ softmax(s · K_{1:t} q_t).

    q_t ``[B, H, 1, Dk]``, k ``[B, H, t, Dk]``, v ``[B, H, t, Dv]`` -> o_t ``[B, H, 1, Dv]``
    (what ``attention.softmax_attention(q_t, k, v, causal=False)`` computes after its checks).
    The scores are formed as the column K q_t ``[B, H, t, 1]``, a matrix-vector product over
    the cache as it is stored, then the weights' row multiplies V.
    """
    # [B, H, t, 1]
    weights = torch.softmax((k @ q_t.transpose(-1, -2)) * scale, dim=-2)
    return weights.transpose(-1, -2) @ v


def _attention_timing(contexts: object, **sizes: object) -> None:
    if isinstance(contexts, int) or not contexts:
        raise ValueError(
            f"contexts: expected a non-empty sequence of positive ints, "
            f"got {contexts!r}"
        )
    for c in contexts:
        check_positive_int("contexts", c)
    _timing_sizes(**sizes)


# fmt: off
@checked(_attention_timing)
def time_cached_attention_step(
    contexts: Sequence[int], *, n_heads: int = 2, head_dim: int = 32,
    repeats: int = 15, checked: bool = False, seed: int = 0,
) -> tuple[list[float], list[int]]:
    """Median seconds of one cached attention read at each position in
    ``contexts``, and the cache bytes there, 2 · H · t · D · 4:

        o_t = V_{1:t}ᵀ softmax(s · K_{1:t} q_t),   t in ``contexts``

    Each context reads the start of one random buffer as a contiguous cache
    ``[1, H, t, D]`` (a strided slice would make matmul copy it first, timing
    the copy). The timed read has no argument checks
    (:func:`cached_attention_read`); ``checked=True`` times
    ``softmax_attention`` as callers meet it, checks included. Medians of
    ``repeats`` calls after one warm-up; they depend on the machine and
    ``torch.get_num_threads()``.
    """
    gen = torch.Generator().manual_seed(seed)
    size = n_heads * max(contexts) * head_dim
    k_all, v_all = (
        torch.rand(size, generator=gen),
        torch.rand(size, generator=gen),
    )
    q_t = torch.randn(1, n_heads, 1, head_dim, generator=gen)
    scale = head_dim**-0.5
    seconds, n_bytes = [], []
    for t in contexts:
        shape = (1, n_heads, t, head_dim)
        k = k_all[: n_heads * t * head_dim].view(shape)
        v = v_all[: n_heads * t * head_dim].view(shape)
        if checked:
            step = partial(
                as_outside_caller,
                attention.softmax_attention,
                *(q_t, k, v),
                causal=False,
                scale=scale,
            )
        else:
            step = partial(cached_attention_read, q_t, k, v, scale)

        seconds.append(median_seconds(step, repeats=repeats))
        n_bytes.append(KVCache(k, v).num_bytes())
    return seconds, n_bytes
# fmt: on


def _timing_sizes(n_heads: int, head_dim: int, repeats: int, **_) -> None:
    for name, value in [
        ("n_heads", n_heads),
        ("head_dim", head_dim),
        ("repeats", repeats),
    ]:
        check_positive_int(name, value)


# fmt: off
@checked(_timing_sizes)
def time_kda_step(*, n_heads: int = 2, head_dim: int = 32, repeats: int = 15,
                  checked: bool = False, seed: int = 0) -> tuple[float, int]:
    """Median seconds of one KDA decoding step (batch 1, float32) and the
    state's bytes, H · Dk · Dv · 4: random q, v, unit k, β ∈ (0, 1),
    g ∈ (−0.1, 0], state [1, H, D, D]. The step reads only the state, so it
    costs the same at any context. The timed call is the step without its
    argument checks; ``checked=True`` times :func:`kda_step` as callers do.
    Median of ``repeats`` calls after one warm-up; depends on the machine
    and on ``torch.get_num_threads()``.
    """
    gen = torch.Generator().manual_seed(seed)
    h, d = n_heads, head_dim
    q, v = (
        torch.randn(1, h, d, generator=gen),
        torch.randn(1, h, d, generator=gen),
    )
    k = torch.nn.functional.normalize(
        torch.randn(1, h, d, generator=gen), dim=-1
    )
    g = -0.1 * torch.rand(1, h, d, generator=gen)
    beta = torch.rand(1, h, generator=gen)
    state = torch.randn(1, h, d, d, generator=gen)
    args = (q, k, v)
    kwargs = {"g": g, "beta": beta, "state": state}
    if checked:
        step = partial(as_outside_caller, kda_step, *args, **kwargs)
    else:  # __wrapped__: the step itself, without its @checked validation
        step = partial(kda_step.__wrapped__, *args, **kwargs)
    return median_seconds(
        step, repeats=repeats
    ), state.numel() * state.element_size()
# fmt: on
