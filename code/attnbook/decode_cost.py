"""What one decoding step costs: the bytes it reads (Lesson 6), and Lesson 18's measurement of
the time and memory of decoding one token, attention against KDA.

Bytes (:func:`step_traffic`): a decoding step of a batch of sequences reads every weight once
(the batch shares them) and each sequence's own cache and states.

Time (Lesson 18), per layer, batch 1, float32: the attention read over a KV cache of t tokens
(``timing.time_cached_attention_step``) against one KDA step on a fixed state
(``timing.time_kda_step``), both timed without argument checks. Every context is measured in
several *rounds* (each round times KDA and then every context once, a median of many calls
each), so the spread between rounds shows how much a point moves on a shared machine.
:func:`find_crossing` reports a crossing only where the rounds agree on which side is cheaper.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Literal

from attnlab.checks import check_positive_int
from attnlab.configs import ModelConfig
from attnlab.memory import bytes_per_element, cache_breakdown
from attnlab.model import parameter_count

from .timing import time_cached_attention_step, time_kda_step


@dataclass(frozen=True)
class CostData:
    """Measured per-token costs of one head configuration (one layer each).

    ``attn_rounds[r][i]``: seconds of the attention read at ``contexts[i]`` in round r;
    ``kda_rounds[r]``: seconds of one KDA step in round r (the same at every context);
    ``attn_bytes[i]``: the cache's bytes at ``contexts[i]``; ``kda_bytes``: the state's bytes.
    """

    label: str
    n_heads: int
    head_dim: int
    contexts: tuple[int, ...]
    attn_rounds: tuple[tuple[float, ...], ...]
    attn_bytes: tuple[int, ...]
    kda_rounds: tuple[float, ...]
    kda_bytes: int

    def __post_init__(self) -> None:
        n = len(self.contexts)
        if n < 2:
            raise ValueError(
                f"contexts: expected at least 2 context lengths, got {n}"
            )
        if any(
            self.contexts[i + 1] <= self.contexts[i] for i in range(n - 1)
        ):
            raise ValueError(
                f"contexts: expected increasing lengths, got {self.contexts}"
            )
        if len(self.attn_bytes) != n:
            raise ValueError(
                f"attn_bytes: expected {n} values (one per context), "
                f"got {len(self.attn_bytes)}"
            )
        if not self.attn_rounds or any(len(r) != n for r in self.attn_rounds):
            raise ValueError(
                f"attn_rounds: expected rounds of {n} values (one per context), "
                f"got {[len(r) for r in self.attn_rounds]}"
            )
        if len(self.kda_rounds) != len(self.attn_rounds):
            raise ValueError(
                f"kda_rounds: expected {len(self.attn_rounds)} values (one per "
                f"round), got {len(self.kda_rounds)}"
            )

    @property
    def attn_seconds(self) -> tuple[float, ...]:
        """The median over rounds of the attention read at each context."""
        return tuple(
            statistics.median(col)
            for col in zip(*self.attn_rounds, strict=True)
        )

    @property
    def attn_range(self) -> tuple[tuple[float, float], ...]:
        """(fastest, slowest) round of the attention read at each context."""
        return tuple(
            (min(col), max(col))
            for col in zip(*self.attn_rounds, strict=True)
        )

    @property
    def kda_seconds(self) -> float:
        """The median over rounds of one KDA step."""
        return statistics.median(self.kda_rounds)

    @property
    def kda_range(self) -> tuple[float, float]:
        """(fastest, slowest) round of the KDA step."""
        return min(self.kda_rounds), max(self.kda_rounds)


def measure_decode_costs(
    label: str,
    n_heads: int,
    head_dim: int,
    contexts: Sequence[int],
    *,
    repeats: int = 15,
    rounds: int = 3,
) -> CostData:
    """Time one KDA step and the attention read at every context, ``rounds`` times over.

    Each round calls ``time_kda_step`` and ``time_cached_attention_step`` (medians of
    ``repeats`` calls each, no argument checks on the timed path) for ``n_heads`` heads of
    ``head_dim``. Set ``torch.set_num_threads`` before calling.
    """
    check_positive_int("rounds", rounds)
    attn_rounds, kda_rounds = [], []
    for r in range(rounds):
        kda_s, kda_b = time_kda_step(
            n_heads=n_heads, head_dim=head_dim, repeats=repeats, seed=r
        )
        attn_s, attn_b = time_cached_attention_step(
            contexts,
            n_heads=n_heads,
            head_dim=head_dim,
            repeats=repeats,
            seed=r,
        )
        kda_rounds.append(kda_s)
        attn_rounds.append(tuple(attn_s))
    return CostData(
        label,
        n_heads,
        head_dim,
        tuple(contexts),
        tuple(attn_rounds),
        tuple(attn_b),
        tuple(kda_rounds),
        kda_b,
    )


@dataclass(frozen=True)
class Crossing:
    """Where the attention read becomes slower than the KDA step, as far as the rounds agree.

    ``status``: "inside" — the crossing lies after ``low`` (the last context where every round
    of attention was faster than every round of KDA; None if no context was) and at or before
    ``high`` (the first context from which on every round of attention was slower);
    "below" — attention was slower already at the smallest context; "beyond" — not slower
    at the largest; "unclear" — a context where attention was surely slower is followed by
    one where it was surely faster, so the measurements support no single crossing.
    """

    status: Literal["inside", "below", "beyond", "unclear"]
    low: int | None = None
    high: int | None = None


def find_crossing(data: CostData) -> Crossing:
    """The crossing of the attention read and the KDA step that every round agrees on.

    At context i attention is *surely faster* if its slowest round is below KDA's fastest,
    *surely slower* if its fastest round is above KDA's slowest, else undecided (the bands
    overlap).
    """
    kda_low, kda_high = data.kda_range
    faster = [hi < kda_low for _, hi in data.attn_range]
    slower = [lo > kda_high for lo, _ in data.attn_range]
    contexts, n = data.contexts, len(data.contexts)
    if any(slower[i] and any(faster[i + 1 :]) for i in range(n)):
        return Crossing("unclear")
    first = (
        n  # the first context from which on every context is surely slower
    )
    while first > 0 and slower[first - 1]:
        first -= 1
    if first == n:
        return Crossing("beyond")
    if first == 0:
        return Crossing("below", high=contexts[0])
    last_faster = max((i for i in range(first) if faster[i]), default=None)
    return Crossing(
        "inside",
        None if last_faster is None else contexts[last_faster],
        contexts[first],
    )


def noise_drops(data: CostData) -> list[int]:
    """Contexts at which the attention read was *surely* faster than at the context before it
    (every round below every round of the shorter context): the cost cannot really fall as the
    cache grows, so each such context marks noise larger than the rounds' spread."""
    ranges = data.attn_range
    return [
        data.contexts[i]
        for i in range(1, len(ranges))
        if ranges[i][1] < ranges[i - 1][0]
    ]


@cache
def _weight_bytes(config: ModelConfig, dtype: str) -> int:
    """N_params · b, counted once per configuration (building on the meta device takes a
    second or two)."""
    return parameter_count(config) * bytes_per_element(dtype)


@dataclass(frozen=True)
class StepTraffic:
    """Bytes read by one decoding step: ``weights`` once for the whole batch, ``caches`` the
    caches, fixed states and convolution inputs of all ``batch`` sequences together."""

    weights: int
    caches: int
    batch: int
    context: int

    @property
    def total(self) -> int:
        return self.weights + self.caches

    @property
    def cache_share(self) -> float:
        """The caches' fraction of the bytes read, in [0, 1)."""
        return self.caches / self.total


def step_traffic(
    config: ModelConfig, context: int, *, batch: int = 1, dtype: str = "bf16"
) -> StepTraffic:
    """Bytes one decoding step reads at ``context`` tokens, weights and caches in ``dtype``:

        bytes = N_params · b  +  batch · cache_bytes(context)

    N_params from :func:`attnlab.model.parameter_count` (counted on the meta device, nothing
    allocated); the caches from :func:`attnlab.memory.cache_breakdown` (KV or latent caches,
    fixed states and convolution inputs). A lower bound: activations and the logits are left
    out, and every byte is assumed read exactly once.
    """
    caches = cache_breakdown(config, context, batch=batch, dtype=dtype)
    weights = _weight_bytes(config, dtype)
    return StepTraffic(weights, caches.total_bytes, batch, context)


def cache_dominates_from(
    config: ModelConfig, *, batch: int = 1, dtype: str = "bf16"
) -> int:
    """The smallest context at which the caches of ``batch`` sequences hold at least as many
    bytes as the weights (0 when the fixed states alone already do):

        batch · (fixed + per_token · T)  >=  N_params · b
    """
    check_positive_int("batch", batch)
    weights = _weight_bytes(config, dtype)
    fixed = cache_breakdown(config, 0, batch=batch, dtype=dtype).total_bytes
    per_token = (
        cache_breakdown(config, 1, batch=batch, dtype=dtype).total_bytes
        - fixed
    )
    if fixed >= weights:
        return 0
    return -(-(weights - fixed) // per_token)  # ceiling division
