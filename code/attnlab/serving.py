"""Serving arithmetic: what fits on a GPU, and how many bytes one decode step reads.

For a model (an :class:`attnlab.configs.ModelConfig` with its parameter counts, as every
published preset has), a context of T tokens and a batch of B sequences:

    memory = weights + B · (T · cache per token + state + conv)

with the weights in ``weight_dtype`` (by default the dtype the model was released in), the
growing cache and conv inputs in ``cache_dtype`` and the recurrent states in ``state_dtype``
(each tensor, one layer of one sequence, rounded up to whole bytes:
:func:`attnlab.memory.tensor_bytes`). The bytes of one sequence are
:func:`attnlab.memory.cache_breakdown`'s, layer kind by layer kind as the registry
:data:`attnlab.kinds.KINDS` counts them.

One decode step (every sequence of the batch gains one token) reads

    bytes/step = weights read + B · (T · cache per token + state + conv)

The weights are read once and shared by the whole batch; every sequence reads its own cache and
state. A mixture of experts reads only the experts the batch's tokens were routed to: with
``k`` of ``E`` experts per token, routed independently and uniformly (an assumption; real
routing is uneven), a batch touches E · (1 − (1 − k/E)^B) experts on average, from the
``params_active`` of one token (B = 1) towards ``params_total``.

The time of a step is modelled as bytes / bandwidth + a fixed overhead (kernel launches,
routing, sampling: work that does not grow with the bytes). Decoding is then *weight-bound*
while the weights are the larger share of the bytes and *cache-bound* after.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .checks import check_number, check_positive_int
from .configs import ModelConfig
from .memory import (
    CacheBreakdown,
    _check_config,
    _check_count,
    cache_breakdown,
    context_limit,
    format_bytes,
    tensor_bytes,
)


def _check_sized(arch: object) -> None:
    _check_config(arch, "arch")
    if arch.params_total is None:
        raise ValueError(
            f"arch: {arch.name} has no parameter count (params_total is None), "
            "so its weights cannot be counted"
        )


def _check_context(context: object) -> None:
    """A deployment's context: at least one token (with none, a model without recurrent
    states keeps nothing per sequence, and "how many sequences fit" has no answer)."""
    if (
        isinstance(context, bool)
        or not isinstance(context, int)
        or context < 1
    ):
        raise ValueError(
            f"context: expected a number of tokens >= 1, got {context!r}"
        )


def sequence_bytes(
    arch: ModelConfig,
    context: int,
    *,
    cache_dtype: str = "bf16",
    state_dtype: str = "fp32",
) -> CacheBreakdown:
    """Bytes one sequence of ``context`` tokens keeps: :func:`attnlab.memory.cache_breakdown`
    at batch 1, with the cache and conv inputs in ``cache_dtype`` and the recurrent states in
    ``state_dtype`` (fp32 by default, as recurrent kernels accumulate)."""
    _check_config(arch, "arch")
    return cache_breakdown(
        arch, context, dtype=cache_dtype, state_dtype=state_dtype
    )


def weight_bytes(arch: ModelConfig, weight_dtype: str | None = None) -> int:
    """Bytes of all stored weights: ⌈params_total · bits / 8⌉, in ``weight_dtype`` (None: the
    dtype the model was released in, ``arch.weight_dtype``)."""
    _check_sized(arch)
    return tensor_bytes(arch.params_total, weight_dtype or arch.weight_dtype)


@dataclass(frozen=True)
class MemoryNeed:
    """Bytes a deployment needs: the weights, and the batch's caches, states and conv inputs."""

    weights: int
    cache: int
    state: int
    conv: int

    @property
    def per_batch(self) -> int:
        """cache + state + conv of the whole batch."""
        return self.cache + self.state + self.conv

    @property
    def total(self) -> int:
        """weights + cache + state + conv."""
        return self.weights + self.per_batch


def memory_needed(
    arch: ModelConfig,
    context: int,
    batch: int = 1,
    *,
    weight_dtype: str | None = None,
    cache_dtype: str = "bf16",
    state_dtype: str = "fp32",
) -> MemoryNeed:
    """weights + batch · (cache + state + conv) bytes, for ``batch`` sequences of ``context``."""
    check_positive_int("batch", batch)
    seq = sequence_bytes(
        arch, context, cache_dtype=cache_dtype, state_dtype=state_dtype
    )
    return MemoryNeed(
        weight_bytes(arch, weight_dtype),
        batch * seq.cache_bytes,
        batch * seq.state_bytes,
        batch * seq.conv_bytes,
    )


def largest_batch(
    arch: ModelConfig,
    context: int,
    memory_bytes: int,
    *,
    weight_dtype: str | None = None,
    cache_dtype: str = "bf16",
    state_dtype: str = "fp32",
) -> int:
    """The most sequences of ``context`` tokens (at least 1) that fit in ``memory_bytes`` with
    the weights: ⌊(memory − weights) / bytes per sequence⌋, 0 if not even one fits."""
    _check_context(context)
    _check_count("memory_bytes", memory_bytes)
    free = memory_bytes - weight_bytes(arch, weight_dtype)
    per_sequence = sequence_bytes(
        arch, context, cache_dtype=cache_dtype, state_dtype=state_dtype
    ).total_bytes
    return max(free, 0) // per_sequence if per_sequence else 0


def largest_context(
    arch: ModelConfig,
    batch: int,
    memory_bytes: int,
    *,
    weight_dtype: str | None = None,
    cache_dtype: str = "bf16",
    state_dtype: str = "fp32",
) -> int:
    """The longest context each of ``batch`` sequences can reach within ``memory_bytes``
    (0 if the weights and fixed states alone do not fit). A model whose every cache is bounded
    (recurrent states, sliding windows: :func:`attnlab.memory.context_limit`) has no cache
    limit once its largest window fits: the answer is then ``-1``."""
    check_positive_int("batch", batch)
    _check_count("memory_bytes", memory_bytes)
    fixed = memory_needed(
        arch,
        0,
        batch,
        weight_dtype=weight_dtype,
        cache_dtype=cache_dtype,
        state_dtype=state_dtype,
    ).total
    if fixed > memory_bytes:
        return 0

    def fits(tokens: int) -> bool:
        return (
            memory_needed(
                arch,
                tokens,
                batch,
                weight_dtype=weight_dtype,
                cache_dtype=cache_dtype,
                state_dtype=state_dtype,
            ).total
            <= memory_bytes
        )

    limit = context_limit(arch)
    if limit is not None and fits(limit):
        return -1
    lo, hi = 0, 1
    while fits(hi):
        lo, hi = hi, hi * 2
    while hi - lo > 1:  # invariant: fits(lo) and not fits(hi)
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo


def expected_experts_touched(
    n_experts: int, experts_per_token: int, batch: int
) -> float:
    """Experts a batch of ``batch`` tokens reaches on average if each token picks
    ``experts_per_token`` of ``n_experts`` uniformly: E · (1 − (1 − k/E)^B)."""
    for name, value in (
        ("n_experts", n_experts),
        ("experts_per_token", experts_per_token),
        ("batch", batch),
    ):
        check_positive_int(name, value)
    if experts_per_token > n_experts:
        raise ValueError(
            f"experts_per_token: expected at most n_experts={n_experts}, "
            f"got {experts_per_token}"
        )
    return n_experts * (1 - (1 - experts_per_token / n_experts) ** batch)


def weights_read_per_step(
    arch: ModelConfig, batch: int = 1, weight_dtype: str | None = None
) -> int:
    """Weight bytes one decode step reads for ``batch`` tokens at once.

    Dense: all weights. MoE with E experts, k per token: the shared part D = active − k · e plus
    the experts touched, e per expert, with e = (total − active) / (E − k).
    """
    _check_sized(arch)
    if arch.n_experts is None or arch.params_total == arch.params_active:
        return weight_bytes(arch, weight_dtype)
    k, experts = arch.experts_per_token, arch.n_experts
    per_expert = (arch.params_total - arch.params_active) / (experts - k)
    shared = arch.params_active - k * per_expert
    params = shared + per_expert * expected_experts_touched(experts, k, batch)
    return tensor_bytes(round(params), weight_dtype or arch.weight_dtype)


@dataclass(frozen=True)
class StepBytes:
    """Bytes one decode step reads: the weights (shared by the batch) and the batch's caches
    and states (each sequence its own)."""

    weights: int
    cache: int

    @property
    def total(self) -> int:
        """weights + cache."""
        return self.weights + self.cache

    @property
    def bound(self) -> str:
        """``"weight-bound"`` while the weights are the larger share, else ``"cache-bound"``."""
        return "weight-bound" if self.weights >= self.cache else "cache-bound"


def decode_step_bytes(
    arch: ModelConfig,
    context: int,
    batch: int = 1,
    *,
    weight_dtype: str | None = None,
    cache_dtype: str = "bf16",
    state_dtype: str = "fp32",
) -> StepBytes:
    """Bytes read by one decode step of ``batch`` sequences at ``context`` tokens each."""
    check_positive_int("batch", batch)
    seq = sequence_bytes(
        arch, context, cache_dtype=cache_dtype, state_dtype=state_dtype
    )
    return StepBytes(
        weights_read_per_step(arch, batch, weight_dtype),
        batch * seq.total_bytes,
    )


def step_seconds(
    step: StepBytes, bandwidth: float, overhead: float = 0.0
) -> float:
    """Modelled time of one decode step: bytes / bandwidth (B/s) + a fixed overhead (s)."""
    if not isinstance(step, StepBytes):
        raise ValueError(
            f"step: expected StepBytes, got {type(step).__name__}"
        )
    bandwidth = check_number("bandwidth", bandwidth)  # bytes per second
    overhead = check_number("overhead", overhead, inclusive=True)  # seconds
    seconds = step.total / bandwidth + overhead
    if not math.isfinite(seconds):
        raise ValueError(
            f"bandwidth, overhead: expected a step time a float can hold, got "
            f"{step.total:,} bytes / {bandwidth!r} bytes/s + {overhead!r} s"
        )
    return seconds


def crossover_batch(
    arch: ModelConfig,
    context: int,
    *,
    max_batch: int = 4096,
    weight_dtype: str | None = None,
    cache_dtype: str = "bf16",
    state_dtype: str = "fp32",
) -> int | None:
    """The smallest batch at which a decode step reads more cache than weight bytes (None if
    not reached by ``max_batch``)."""
    check_positive_int("max_batch", max_batch)
    for batch in range(1, max_batch + 1):
        step = decode_step_bytes(
            arch,
            context,
            batch,
            weight_dtype=weight_dtype,
            cache_dtype=cache_dtype,
            state_dtype=state_dtype,
        )
        if step.bound == "cache-bound":
            return batch
    return None


def attention_prefill_flops(
    context: int, n_heads: int, qk_dim: int, v_dim: int
) -> int:
    """FLOPs of causal softmax attention over a prompt of T tokens, one layer (projections not
    counted): 2 · H · (d_qk + d_v) · T (T + 1) / 2 — every query against every earlier key."""
    for name, value in (
        ("context", context),
        ("n_heads", n_heads),
        ("qk_dim", qk_dim),
        ("v_dim", v_dim),
    ):
        check_positive_int(name, value)
    return n_heads * (qk_dim + v_dim) * context * (context + 1)


def chunkwise_prefill_flops(
    context: int, n_heads: int, key_dim: int, value_dim: int, chunk: int = 64
) -> int:
    """FLOPs of a chunkwise linear-attention/delta-rule prefill, one layer (projections not
    counted): per token 2 · H · (C · (d_k + d_v) + 2 · d_k · d_v) — attention inside its chunk of
    C tokens, reading and updating the d_k × d_v state. Linear in T."""
    for name, value in (
        ("context", context),
        ("n_heads", n_heads),
        ("key_dim", key_dim),
        ("value_dim", value_dim),
        ("chunk", chunk),
    ):
        check_positive_int(name, value)
    return (
        2
        * n_heads
        * context
        * (chunk * (key_dim + value_dim) + 2 * key_dim * value_dim)
    )


@dataclass(frozen=True)
class WhatIf:
    """The calculator's answer for one deployment (see :func:`what_if`)."""

    name: str
    context: int
    batch: int
    memory_bytes: int
    need: MemoryNeed
    max_batch: int
    max_context: int
    step: StepBytes

    def __str__(self) -> str:
        fits = (
            "fits" if self.need.total <= self.memory_bytes else "does NOT fit"
        )
        longest = (
            "no cache limit (every cache is bounded)"
            if self.max_context < 0
            else f"{self.max_context:,} tokens"
        )
        return "\n".join(
            [
                f"{self.name}: {self.batch} x {self.context:,} tokens in "
                f"{format_bytes(self.memory_bytes)}: {fits}",
                f"  weights {format_bytes(self.need.weights)}, "
                f"caches {format_bytes(self.need.cache)},",
                f"  states {format_bytes(self.need.state)}, "
                f"conv {format_bytes(self.need.conv)}",
                f"  largest batch at {self.context:,} tokens: {self.max_batch}",
                f"  longest context at batch {self.batch}: {longest}",
                f"  one decode step reads {format_bytes(self.step.total)}",
                f"  (weights {format_bytes(self.step.weights)}, "
                f"{self.step.bound})",
            ]
        )


def what_if(
    arch: ModelConfig,
    context: int,
    batch: int,
    memory_bytes: int,
    *,
    weight_dtype: str | None = None,
    cache_dtype: str = "bf16",
    state_dtype: str = "fp32",
) -> WhatIf:
    """Everything the calculator answers for ``batch`` sequences of ``context`` tokens (at
    least 1) in ``memory_bytes``: the memory needed, the largest batch and context that fit,
    the bytes one decode step reads."""
    _check_context(context)
    dtypes = {
        "weight_dtype": weight_dtype,
        "cache_dtype": cache_dtype,
        "state_dtype": state_dtype,
    }
    return WhatIf(
        name=arch.name if isinstance(arch, ModelConfig) else str(arch),
        context=context,
        batch=batch,
        memory_bytes=memory_bytes,
        need=memory_needed(arch, context, batch, **dtypes),
        max_batch=largest_batch(arch, context, memory_bytes, **dtypes),
        max_context=largest_context(arch, batch, memory_bytes, **dtypes),
        step=decode_step_bytes(arch, context, batch, **dtypes),
    )
