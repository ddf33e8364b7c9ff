"""Serving arithmetic: what fits on a GPU, and how many bytes one decode step reads.

For a model (an :class:`attnlab.configs.ModelConfig` with its parameter counts, as every
published preset has), a context of T tokens and a batch of B sequences:

    memory = weights + B · (T · cache per token + state + conv)

with the weights in ``weight_dtype`` (by default the dtype the model was released in), the
growing cache in ``cache_dtype`` and the recurrent states in ``state_dtype`` (each tensor, one
layer of one sequence, rounded up to whole bytes: :func:`attnlab.memory.tensor_bytes`).

**Dtypes as a serving engine keeps them.** ``state_dtype="auto"`` (the default) stores every
recurrent state and convolution input as vLLM does by default: in the model's dtype
(:data:`MODEL_DTYPE`, bf16), except KDA's recurrent state, which vLLM keeps in fp32
(``MambaStateDtypeCalculator`` in vllm/model_executor/layers/mamba/mamba_utils.py, with
``mamba_cache_dtype`` and ``mamba_ssm_cache_dtype`` defaulting to ``"auto"`` in
vllm/config/cache.py). Any other dtype name stores every state in it, and the conv inputs in
``cache_dtype``.

**A deployment** (:class:`Deployment`, on one :class:`Hardware` profile) answers per GPU and
per node. Under tensor parallelism of degree ``tp`` each GPU holds 1/tp of the weights and its
share of every sequence, as vLLM shards them: attention K/V by key/value head, with a head
replicated on several GPUs when there are fewer heads than GPUs (⌈H_kv / tp⌉ heads each); the
MLA latent whole on every GPU (it is shared by all heads, so it cannot be split); recurrent
states and conv inputs split by head (⌈numbers / tp⌉; vLLM's copies of Mamba-2 groups when
there are fewer groups than GPUs are not counted). With data-parallel attention each GPU keeps
the whole caches of its own sequences instead. Only ``memory_fraction`` of a GPU is
used (vLLM's ``gpu_memory_utilization``, 0.9 by default), less an ``activation_reserve``; the
growing cache is handed out in blocks of ``block_tokens`` tokens (vLLM's default block: 16).

One decode step (every sequence of the batch gains one token) reads

    bytes/step = weights read + B · (T · cache per token + conv + 2 · state)

The weights are read once and shared by the whole batch; every sequence reads its own cache
and conv inputs, and reads *and writes back* its recurrent state. The token embedding is a
gather (B rows), not a stream of the whole table; a tied LM head still reads all of it. A
mixture of experts reads only the experts the batch's tokens were routed to: with ``k`` of
``E`` experts per token, routed independently and uniformly (an assumption; real routing is
uneven), a batch touches E · (1 − (1 − k/E)^B) experts on average, from the
``params_active`` of one token (B = 1) towards ``params_total``.

The time of a step is modelled as bytes / bandwidth + a fixed overhead (kernel launches,
routing, sampling: work that does not grow with the bytes), with the bytes and the bandwidth of
the same GPU. Decoding is then *weight-bound* while the weights are the larger share of the
bytes and *cache-bound* after.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .checks import check_number, check_positive_int
from .configs import ModelConfig
from .kinds import KINDS
from .memory import (
    BITS_PER_ELEMENT,
    CacheBreakdown,
    LayerBytes,
    _check_config,
    _check_count,
    bits_per_element,
    cache_breakdown,
    context_limit,
    dtype_name,
    format_bytes,
    tensor_bytes,
)

MODEL_DTYPE = "bf16"
"""The dtype the published models compute in (their ``torch_dtype``): "auto" states, conv
inputs, and the embedding and LM head of quantised checkpoints are kept in it."""

ENGINE_STATE_DTYPES = {"kda": "fp32"}
"""Recurrent states vLLM keeps in another dtype than the model's by default: KDA's, in fp32
(``MambaStateDtypeCalculator.kda_state_dtype``, vllm/model_executor/layers/mamba/
mamba_utils.py). Mamba, Mamba-2, Gated DeltaNet and lightning (MiniMax) states follow
``mamba_ssm_cache_dtype="auto"``: the model's dtype."""

REPLICATED_UNDER_TP = ("mla",)
"""Kinds whose cache every tensor-parallel GPU keeps whole: MLA's latent and rope key are
shared by all heads (vLLM and SGLang store the full latent on every rank)."""

KV_HEAD_SHARDED = ("attn", "swa", "chunked")
"""Kinds whose cache is split by key/value head: ⌈H_kv / tp⌉ heads on each GPU (a head is
replicated when there are fewer heads than GPUs, as vLLM's ``QKVParallelLinear`` does)."""


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


def _check_state_dtype(state_dtype: object) -> str:
    return "auto" if state_dtype == "auto" else dtype_name(state_dtype)


def _rank_numbers(kind: str, arch: ModelConfig, numbers: int, tp: int) -> int:
    """The numbers of one layer's tensor that one of ``tp`` GPUs keeps."""
    if tp == 1 or kind in REPLICATED_UNDER_TP:
        return numbers
    if kind in KV_HEAD_SHARDED:
        heads = arch.n_kv_heads
        return numbers // heads * math.ceil(heads / tp)
    return math.ceil(numbers / tp)


def sequence_bytes(
    arch: ModelConfig,
    context: int,
    *,
    cache_dtype: str = "bf16",
    state_dtype: str = "auto",
    tp: int = 1,
    block_tokens: int = 1,
) -> CacheBreakdown:
    """Bytes one sequence of ``context`` tokens keeps (on each GPU, under tensor parallelism
    of degree ``tp``): :func:`attnlab.memory.cache_breakdown` at batch 1, with the cache in
    ``cache_dtype``, its context rounded up to whole blocks of ``block_tokens`` tokens, and
    the states as ``state_dtype`` says ("auto": vLLM's defaults, :data:`ENGINE_STATE_DTYPES`,
    conv inputs in :data:`MODEL_DTYPE`; a dtype name: every state in it, conv inputs in
    ``cache_dtype``). Under ``tp`` each tensor is the GPU's share (module docstring)."""
    _check_config(arch, "arch")
    _check_count("context", context)
    check_positive_int("tp", tp)
    check_positive_int("block_tokens", block_tokens)
    state_dtype = _check_state_dtype(state_dtype)
    cache = dtype_name(cache_dtype)
    if state_dtype != "auto" and tp == 1 and block_tokens == 1:
        return cache_breakdown(
            arch, context, dtype=cache, state_dtype=state_dtype
        )
    paged = math.ceil(context / block_tokens) * block_tokens
    numbers = {k: KINDS[k].numbers(arch, paged) for k in arch.kinds}
    conv = MODEL_DTYPE if state_dtype == "auto" else cache
    layers = []
    for i, kind in enumerate(arch.layer_pattern):
        n = numbers[kind]
        state = (
            ENGINE_STATE_DTYPES.get(kind, MODEL_DTYPE)
            if state_dtype == "auto"
            else state_dtype
        )
        layers.append(
            LayerBytes(
                index=i,
                kind=kind,
                cache_bytes=tensor_bytes(
                    _rank_numbers(kind, arch, n.cache, tp), cache
                ),
                state_bytes=tensor_bytes(
                    _rank_numbers(kind, arch, n.state, tp), state
                ),
                conv_bytes=tensor_bytes(
                    _rank_numbers(kind, arch, n.conv, tp), conv
                ),
            )
        )
    return CacheBreakdown(
        arch.name, context, 1, cache, state_dtype, tuple(layers)
    )


def embedding_params(arch: ModelConfig) -> int:
    """Parameters of the token embedding and the LM head: V · d, twice unless tied."""
    return arch.vocab_size * arch.d_model * (1 if arch.tie_embeddings else 2)


def _param_bytes(
    arch: ModelConfig,
    params: int,
    dtype: str | None,
    group: int | None,
    scale_bits: int,
    embedding: int,
) -> int:
    """Bytes of ``params`` weights of which ``embedding`` are embedding/LM-head rows: those
    stay in :data:`MODEL_DTYPE` when the rest is quantised below it (as AWQ checkpoints and
    DeepSeek-V3's fp8 release store them); one ``scale_bits`` scale per ``group`` quantised
    weights."""
    dtype = dtype_name(dtype or arch.weight_dtype)
    if bits_per_element(dtype) >= BITS_PER_ELEMENT[MODEL_DTYPE]:
        embedding = 0
    quantised = params - embedding
    scales = 0 if group is None else math.ceil(quantised / group)
    return (
        tensor_bytes(quantised, dtype)
        + tensor_bytes(embedding, MODEL_DTYPE)
        + math.ceil(scales * scale_bits / 8)
    )


def weight_bytes(
    arch: ModelConfig,
    weight_dtype: str | None = None,
    *,
    group: int | None = None,
    scale_bits: int = 16,
) -> int:
    """Bytes of all stored weights in ``weight_dtype`` (None: the dtype the model was
    released in, ``arch.weight_dtype``): ⌈P · bits / 8⌉ for the P quantised weights, the
    embedding and LM head (:func:`embedding_params`) in :data:`MODEL_DTYPE` when the dtype is
    narrower, and ⌈P / group⌉ scales of ``scale_bits`` bits when ``group`` is given (AWQ:
    group 128, an fp16 scale and a 4-bit zero point, 20 bits)."""
    _check_sized(arch)
    if group is not None:
        check_positive_int("group", group)
    check_positive_int("scale_bits", scale_bits)
    return _param_bytes(
        arch,
        arch.params_total,
        weight_dtype,
        group,
        scale_bits,
        embedding_params(arch),
    )


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
    state_dtype: str = "auto",
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
    state_dtype: str = "auto",
) -> int:
    """The most sequences of ``context`` tokens (at least 1) that fit in ``memory_bytes`` with
    the weights, on one device that uses all of it: ⌊(memory − weights) / bytes per
    sequence⌋, 0 if not even one fits. For GPUs as an engine uses them see
    :func:`capacity`."""
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
    state_dtype: str = "auto",
) -> int:
    """The longest context each of ``batch`` sequences can reach within ``memory_bytes``
    (0 if the weights and fixed states alone do not fit). A model whose every cache is bounded
    (recurrent states, sliding windows: :func:`attnlab.memory.context_limit`) has no cache
    limit once its largest window fits: the answer is then ``-1``."""
    check_positive_int("batch", batch)
    _check_count("memory_bytes", memory_bytes)
    dtypes = {
        "weight_dtype": weight_dtype,
        "cache_dtype": cache_dtype,
        "state_dtype": state_dtype,
    }
    if memory_needed(arch, 0, batch, **dtypes).total > memory_bytes:
        return 0

    def fits(tokens: int) -> bool:
        need = memory_needed(arch, tokens, batch, **dtypes)
        return need.total <= memory_bytes

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


# --------------------------------------------------------------------------- deployment
@dataclass(frozen=True)
class Hardware:
    """One GPU: its memory (bytes) and its memory bandwidth (bytes/s), from its datasheet."""

    name: str
    memory_bytes: int
    bandwidth: float
    source: str = ""

    def __post_init__(self) -> None:
        check_positive_int("Hardware.memory_bytes", self.memory_bytes)
        check_number("Hardware.bandwidth", self.bandwidth)


H100_SXM = Hardware(
    "H100 SXM",
    80 * 10**9,
    3.35e12,
    "NVIDIA H100 Tensor Core GPU datasheet: 80 GB HBM3, 3.35 TB/s (SXM)",
)
H200 = Hardware(
    "H200 SXM",
    141 * 10**9,
    4.8e12,
    "NVIDIA H200 Tensor Core GPU datasheet: 141 GB HBM3e, 4.8 TB/s (SXM)",
)


@dataclass(frozen=True)
class Deployment:
    """How a model is served: ``gpus`` GPUs of one ``hardware``, split into groups of ``tp``
    GPUs that each hold one copy of the model (tensor parallelism), with data-parallel
    attention (``dp_attention``: each GPU keeps whole caches of its own sequences) or not;
    ``memory_fraction`` of each GPU used (vLLM's ``gpu_memory_utilization``, default 0.9,
    vllm/config/cache.py) less ``activation_reserve`` bytes per GPU; the growing cache in
    blocks of ``block_tokens`` tokens; weights in ``weight_dtype`` (None: as released) with
    one ``scale_bits`` scale per ``weight_group`` weights (None: no scales); caches in
    ``cache_dtype`` and states as ``state_dtype`` says (:func:`sequence_bytes`)."""

    hardware: Hardware = H200
    gpus: int = 1
    tp: int = 1
    dp_attention: bool = False
    memory_fraction: float = 0.9
    activation_reserve: int = 0
    block_tokens: int = 16
    weight_dtype: str | None = None
    weight_group: int | None = None
    scale_bits: int = 16
    cache_dtype: str = "bf16"
    state_dtype: str = "auto"

    def __post_init__(self) -> None:
        if not isinstance(self.hardware, Hardware):
            raise ValueError(
                "Deployment.hardware: expected a Hardware, got "
                f"{type(self.hardware).__name__}"
            )
        check_positive_int("Deployment.gpus", self.gpus)
        check_positive_int("Deployment.tp", self.tp)
        if self.gpus % self.tp:
            raise ValueError(
                f"Deployment.tp: expected a divisor of gpus={self.gpus}, got {self.tp}"
            )
        if not isinstance(self.dp_attention, bool):
            raise ValueError(
                "Deployment.dp_attention: expected True or False, got "
                f"{self.dp_attention!r}"
            )
        check_number(
            "Deployment.memory_fraction", self.memory_fraction, high=1.0
        )
        _check_count("Deployment.activation_reserve", self.activation_reserve)
        check_positive_int("Deployment.block_tokens", self.block_tokens)
        if self.weight_group is not None:
            check_positive_int("Deployment.weight_group", self.weight_group)
        check_positive_int("Deployment.scale_bits", self.scale_bits)
        for name in ("weight_dtype", "cache_dtype"):
            value = getattr(self, name)
            if value is not None:
                try:
                    dtype_name(value)
                except ValueError as error:
                    raise ValueError(f"Deployment.{name}: {error}") from None
        try:
            _check_state_dtype(self.state_dtype)
        except ValueError as error:
            raise ValueError(f"Deployment.state_dtype: {error}") from None

    @property
    def usable_bytes(self) -> int:
        """Bytes of one GPU the engine may fill: ⌊fraction · memory⌋ − activation reserve."""
        return (
            math.floor(self.memory_fraction * self.hardware.memory_bytes)
            - self.activation_reserve
        )

    @property
    def replicas(self) -> int:
        """Copies of the model on the node: gpus / tp."""
        return self.gpus // self.tp


def _check_deployment(deployment: object) -> None:
    if not isinstance(deployment, Deployment):
        raise ValueError(
            "deployment: expected a Deployment, got "
            f"{type(deployment).__name__}"
        )


def gpu_weight_bytes(arch: ModelConfig, deployment: Deployment) -> int:
    """Weight bytes on each GPU: ⌈weights / tp⌉ (attention weights that data-parallel
    attention replicates on every GPU are not added)."""
    _check_deployment(deployment)
    total = weight_bytes(
        arch,
        deployment.weight_dtype,
        group=deployment.weight_group,
        scale_bits=deployment.scale_bits,
    )
    return math.ceil(total / deployment.tp)


def gpu_sequence_bytes(
    arch: ModelConfig, context: int, deployment: Deployment
) -> CacheBreakdown:
    """Bytes one sequence keeps on each GPU that holds it: its 1/tp share under tensor
    parallelism (MLA latents whole, K/V heads replicated when fewer than tp), the whole
    sequence under data-parallel attention; the cache in whole blocks."""
    _check_deployment(deployment)
    return sequence_bytes(
        arch,
        context,
        cache_dtype=deployment.cache_dtype,
        state_dtype=deployment.state_dtype,
        tp=1 if deployment.dp_attention else deployment.tp,
        block_tokens=deployment.block_tokens,
    )


@dataclass(frozen=True)
class Capacity:
    """What fits on a deployment at one context: ``per_gpu`` sequences whose caches each GPU
    holds (their shares under tensor parallelism, whole ones under data-parallel attention)
    and ``per_node`` sequences the node serves, from each GPU's ``usable`` bytes, its
    ``weights`` and the ``sequence`` bytes one sequence keeps on it."""

    context: int
    usable: int
    weights: int
    sequence: int
    per_gpu: int
    per_node: int

    def __str__(self) -> str:
        return "\n".join(
            [
                f"at {self.context:,} tokens: {self.per_gpu:,} sequences on each "
                f"GPU, {self.per_node:,} on the node",
                f"  each GPU: {format_bytes(self.usable)} usable, weights "
                f"{format_bytes(self.weights)},",
                f"  one sequence {format_bytes(self.sequence)}",
            ]
        )


def capacity(
    arch: ModelConfig, context: int, deployment: Deployment
) -> Capacity:
    """The largest batch of ``context``-token sequences a deployment serves.

    Each GPU: b = ⌊(usable − weights) / sequence bytes on it⌋.
    Under tensor parallelism every GPU of a group holds a share of the
    same b sequences: the node serves b · gpus / tp. Under data-parallel
    attention each GPU holds b sequences of its own: the node serves
    b · gpus.
    """
    _check_context(context)
    _check_deployment(deployment)
    weights = gpu_weight_bytes(arch, deployment)
    sequence = gpu_sequence_bytes(arch, context, deployment).total_bytes
    free = max(deployment.usable_bytes - weights, 0)
    per_gpu = free // sequence if sequence else 0
    groups = (
        deployment.gpus if deployment.dp_attention else deployment.replicas
    )
    return Capacity(
        context,
        deployment.usable_bytes,
        weights,
        sequence,
        per_gpu,
        per_gpu * groups,
    )


# --------------------------------------------------------------------------- one decode step
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
    arch: ModelConfig,
    batch: int = 1,
    weight_dtype: str | None = None,
    *,
    group: int | None = None,
    scale_bits: int = 16,
) -> int:
    """Weight bytes one decode step reads for ``batch`` tokens at once.

    Parameters read: dense, all of them; MoE with E experts, k per token, the shared part
    D = active − k · e plus the experts touched, e per expert, with
    e = (total − active) / (E − k). The embedding table of an untied model is gathered, B rows
    of d: its V · d parameters are replaced by B · d (a tied table is read whole as the LM
    head). Bytes as :func:`weight_bytes` counts them.
    """
    _check_sized(arch)
    check_positive_int("batch", batch)
    params = arch.params_total
    if arch.n_experts is not None and arch.params_total != arch.params_active:
        k, experts = arch.experts_per_token, arch.n_experts
        per_expert = (arch.params_total - arch.params_active) / (experts - k)
        shared = arch.params_active - k * per_expert
        touched = expected_experts_touched(experts, k, batch)
        params = round(shared + per_expert * touched)
    table = arch.vocab_size * arch.d_model
    embedding = embedding_params(arch)
    if not arch.tie_embeddings:
        gathered = min(batch, arch.vocab_size) * arch.d_model
        params, embedding = (
            params - table + gathered,
            embedding - table + gathered,
        )
    return _param_bytes(
        arch, params, weight_dtype, group, scale_bits, embedding
    )


@dataclass(frozen=True)
class StepBytes:
    """Bytes one decode step moves: the weights it reads (shared by the batch), the caches
    and conv inputs it reads, and the recurrent states it reads and writes back (each
    sequence its own; ``state`` counts both directions)."""

    weights: int
    cache: int
    state: int = 0

    @property
    def total(self) -> int:
        """weights + cache + state."""
        return self.weights + self.cache + self.state

    @property
    def per_sequence(self) -> int:
        """cache + state: the bytes that grow with the batch."""
        return self.cache + self.state

    @property
    def bound(self) -> str:
        """``"weight-bound"`` while the weights are the larger share, else ``"cache-bound"``."""
        return (
            "weight-bound"
            if self.weights >= self.per_sequence
            else "cache-bound"
        )


def decode_step_bytes(
    arch: ModelConfig,
    context: int,
    batch: int = 1,
    *,
    weight_dtype: str | None = None,
    cache_dtype: str = "bf16",
    state_dtype: str = "auto",
    deployment: Deployment | None = None,
) -> StepBytes:
    """Bytes one decode step of ``batch`` sequences at ``context`` tokens each moves.

    Without a ``deployment``: the whole model on one device, weights
    (:func:`weights_read_per_step`) + batch · (cache + conv + 2 · state). With one (its dtypes
    replace the keyword dtypes): the bytes of *one GPU* that holds ``batch`` sequences (as
    :attr:`Capacity.per_gpu` counts them): ⌈weights read / tp⌉ + batch · the bytes one
    sequence keeps on it. Its copy of the model (tp GPUs) decodes ``batch`` sequences under
    tensor parallelism, tp · batch under data-parallel attention, and reads the experts
    those tokens reach.
    """
    check_positive_int("batch", batch)
    if deployment is None:
        seq = sequence_bytes(
            arch, context, cache_dtype=cache_dtype, state_dtype=state_dtype
        )
        weights = weights_read_per_step(arch, batch, weight_dtype)
        held = batch
    else:
        _check_deployment(deployment)
        seq = gpu_sequence_bytes(arch, context, deployment)
        group = batch * (deployment.tp if deployment.dp_attention else 1)
        weights = math.ceil(
            weights_read_per_step(
                arch,
                group,
                deployment.weight_dtype,
                group=deployment.weight_group,
                scale_bits=deployment.scale_bits,
            )
            / deployment.tp
        )
        held = batch
    return StepBytes(
        weights,
        held * (seq.cache_bytes + seq.conv_bytes),
        held * 2 * seq.state_bytes,
    )


def step_seconds(
    step: StepBytes, bandwidth: float | Hardware, overhead: float = 0.0
) -> float:
    """Modelled time of one decode step: bytes / bandwidth (B/s, or a :class:`Hardware`'s)
    + a fixed overhead (s). The bytes and the bandwidth must be the same GPU's."""
    if not isinstance(step, StepBytes):
        raise ValueError(
            f"step: expected StepBytes, got {type(step).__name__}"
        )
    if isinstance(bandwidth, Hardware):
        bandwidth = bandwidth.bandwidth
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
    state_dtype: str = "auto",
    deployment: Deployment | None = None,
) -> int | None:
    """The smallest batch (per GPU with a ``deployment``, as :func:`decode_step_bytes` counts
    it) at which a decode step moves more cache and state than weight bytes (None if not
    reached by ``max_batch``), found by bisection.

    Bisection is exact because being cache-bound never stops once it starts: the gap
    f(B) = B · s − W(B) (s per sequence, W(B) the weights read) is convex, since W(B) is
    constant or, for a mixture of experts, concave (its growth (1 − k/E)^B shrinks), and
    f(0) = −W(0) < 0; a convex function that starts below zero and crosses it stays above.
    """
    check_positive_int("max_batch", max_batch)

    def cache_bound(batch: int) -> bool:
        step = decode_step_bytes(
            arch,
            context,
            batch,
            weight_dtype=weight_dtype,
            cache_dtype=cache_dtype,
            state_dtype=state_dtype,
            deployment=deployment,
        )
        return step.bound == "cache-bound"

    if not cache_bound(max_batch):
        return None
    lo, hi = (
        0,
        max_batch,
    )  # invariant: not cache_bound(lo) (or lo = 0), cache_bound(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if cache_bound(mid) else (mid, hi)
    return hi


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
                f"  one decode step moves {format_bytes(self.step.total)}",
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
    state_dtype: str = "auto",
) -> WhatIf:
    """Everything the calculator answers for ``batch`` sequences of ``context`` tokens (at
    least 1) in ``memory_bytes`` of one device that uses all of it: the memory needed, the
    largest batch and context that fit, the bytes one decode step moves. For GPUs as a
    serving engine fills them, several of them, see :func:`capacity` and
    :class:`Deployment`."""
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
