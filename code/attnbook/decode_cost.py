"""Lesson 18's measurement: the time and memory of decoding one token, attention against KDA.

Per layer, batch 1, float32: the attention read over a KV cache of t tokens
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
from typing import Literal

from attnlab.checks import check_positive_int

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
