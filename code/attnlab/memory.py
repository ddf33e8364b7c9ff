"""Exact bytes of what a model keeps while decoding: KV caches, MLA latents, recurrent states.

Per layer and per sequence, each layer kind keeps the numbers its entry of the registry
:data:`attnlab.kinds.KINDS` counts (:func:`layer_numbers`): a cache that grows with the context
(attention's K and V, MLA's latent and rope key), or a fixed recurrent state and the last
inputs of its short convolutions. :func:`cache_breakdown` sums them over a model's layers.

Bytes = numbers · bytes per element, times the batch size. The KV cache, MLA latents and
convolution inputs are activations, stored in ``dtype``. The recurrent state has its own
``state_dtype``: a kernel may accumulate in fp32 within a step, and what is *stored* between
steps depends on the engine (vLLM keeps KDA's state in fp32 and Mamba, Gated DeltaNet and
lightning states in the model's dtype by default: :mod:`attnlab.serving` applies that). By
default it is the same as ``dtype``, which is what a model run entirely in one dtype (like
:class:`attnlab.model.HybridLM`) holds.

Sub-byte formats (``"int4"``, ``"fp4"``: 4 bits a number, as 4-bit KV caches store them) are
counted in bits and rounded up to whole bytes once per tensor (:func:`tensor_bytes`): per layer
and per sequence, the unit a cache allocator hands out. Only the numbers are counted, not the
scales that real 8- and 4-bit formats keep beside them (one per block of 16–128 numbers).

MB means 10⁶ bytes and MiB 2²⁰ bytes; :func:`format_bytes` shows both.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import torch

from .checks import check_choice, check_positive_int
from .configs import ModelConfig
from .kinds import KINDS, LayerNumbers

BITS_PER_ELEMENT = {
    "fp64": 64,
    "fp32": 32,
    "bf16": 16,
    "fp16": 16,
    "fp8": 8,
    "int4": 4,
    "fp4": 4,
}
"""Bits per number for each dtype name (4-bit formats included)."""

BYTES_PER_ELEMENT = {
    name: bits // 8 for name, bits in BITS_PER_ELEMENT.items() if bits >= 8
}
"""Bytes per number for each dtype name of at least one byte."""

_DTYPE_ALIASES = {
    "float64": "fp64",
    "double": "fp64",
    "float32": "fp32",
    "float": "fp32",
    "bfloat16": "bf16",
    "float16": "fp16",
    "half": "fp16",
    "float8": "fp8",
    "4bit": "int4",
    "nf4": "fp4",
}

_TORCH_DTYPES = {
    torch.float64: "fp64",
    torch.float32: "fp32",
    torch.bfloat16: "bf16",
    torch.float16: "fp16",
}


def dtype_name(dtype: str | torch.dtype) -> str:
    """The short name (``"bf16"``, ``"fp16"``, ``"fp32"``, ``"fp64"``, ``"fp8"``, ``"int4"``,
    ``"fp4"``) of a dtype given by name or as a ``torch.dtype``."""
    if isinstance(dtype, torch.dtype):
        if str(dtype).startswith("torch.float8"):
            return "fp8"
        if dtype not in _TORCH_DTYPES:
            raise ValueError(
                f"dtype: expected float64, float32, bfloat16, float16 or a float8 dtype, "
                f"got {dtype}"
            )
        return _TORCH_DTYPES[dtype]
    if isinstance(dtype, str):
        name = _DTYPE_ALIASES.get(dtype.lower(), dtype.lower())
        return check_choice("dtype", name, BITS_PER_ELEMENT)
    raise ValueError(
        f"dtype: expected a dtype name or a torch.dtype, got {dtype!r}"
    )


def bytes_per_element(dtype: str | torch.dtype) -> int:
    """Bytes per number: bf16/fp16 → 2, fp32 → 4, fp64 → 8, fp8 → 1. A 4-bit format has no whole
    number of bytes per number: use :func:`bits_per_element` or :func:`tensor_bytes`."""
    name = dtype_name(dtype)
    if name not in BYTES_PER_ELEMENT:
        raise ValueError(
            f"dtype: {name} takes {BITS_PER_ELEMENT[name]} bits a number, not a whole number of "
            "bytes; use bits_per_element or tensor_bytes"
        )
    return BYTES_PER_ELEMENT[name]


def bits_per_element(dtype: str | torch.dtype) -> int:
    """Bits per number: fp64 → 64, fp32 → 32, bf16/fp16 → 16, fp8 → 8, int4/fp4 → 4."""
    return BITS_PER_ELEMENT[dtype_name(dtype)]


def tensor_bytes(numbers: int, dtype: str | torch.dtype) -> int:
    """Whole bytes of one tensor of ``numbers`` numbers: ⌈numbers · bits / 8⌉.

    Exact for every format of one byte or more; a 4-bit tensor of an odd count rounds up by
    half a byte (3 numbers in int4 → 2 bytes).
    """
    _check_count("numbers", numbers)
    return math.ceil(numbers * bits_per_element(dtype) / 8)


def _check_count(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{name}: expected an integer >= 0, got {value!r}")


def _check_config(config: object, name: str = "config") -> None:
    if not isinstance(config, ModelConfig):
        raise ValueError(
            f"{name}: expected a ModelConfig, got {type(config).__name__}"
        )


def layer_numbers(
    kind: str, config: ModelConfig, context: int
) -> LayerNumbers:
    """Numbers one layer of ``kind``, sized by ``config``, keeps for one sequence after
    ``context`` tokens: the formula of the kind's entry in :data:`attnlab.kinds.KINDS`
    (``cache`` grows with the context, ``state`` and ``conv`` do not)."""
    _check_config(config)
    _check_count("context", context)
    check_choice("kind", kind, KINDS)
    needs = KINDS[kind].needs
    if needs is not None and getattr(config, needs) is None:
        raise ValueError(
            f"config: {config.name} has no dimensions for {kind!r} layers "
            f"(config.{needs} is None)"
        )
    return KINDS[kind].numbers(config, context)


@dataclass(frozen=True)
class LayerBytes:
    """Bytes kept by layer ``index`` (0-based) of kind ``kind``, for the whole batch."""

    index: int
    kind: str
    cache_bytes: int
    state_bytes: int
    conv_bytes: int

    @property
    def total(self) -> int:
        """cache + state + conv bytes."""
        return self.cache_bytes + self.state_bytes + self.conv_bytes


@dataclass(frozen=True)
class CacheBreakdown:
    """What a model keeps while decoding, layer by layer, for one context, batch and dtype."""

    model: str
    context: int
    batch: int
    dtype: str
    state_dtype: str
    layers: tuple[LayerBytes, ...]

    @property
    def cache_bytes(self) -> int:
        """Bytes that grow with the context (KV caches and MLA latents)."""
        return sum(layer.cache_bytes for layer in self.layers)

    @property
    def state_bytes(self) -> int:
        """Bytes of the recurrent states (constant in the context)."""
        return sum(layer.state_bytes for layer in self.layers)

    @property
    def conv_bytes(self) -> int:
        """Bytes of the short-convolution inputs (constant in the context)."""
        return sum(layer.conv_bytes for layer in self.layers)

    @property
    def total_bytes(self) -> int:
        """Everything: cache + state + conv bytes."""
        return self.cache_bytes + self.state_bytes + self.conv_bytes

    def bytes_by_layer(self) -> list[int]:
        """Total bytes of each layer, in layer order (like ``HybridCache.bytes_by_layer``)."""
        return [layer.total for layer in self.layers]

    def bytes_by_kind(self) -> dict[str, int]:
        """Total bytes summed over the layers of each kind (kinds in order of first appearance)."""
        totals: dict[str, int] = {}
        for layer in self.layers:
            totals[layer.kind] = totals.get(layer.kind, 0) + layer.total
        return totals

    def __str__(self) -> str:
        head = (
            f"{self.model}: {self.context} tokens, batch {self.batch}, {self.dtype} "
            f"(state {self.state_dtype})"
        )
        rows = [
            head,
            f"  {'kind':<9}{'layers':>6}"
            f"{'cache':>21}{'state':>21}{'conv':>21}",
        ]
        for kind in self.bytes_by_kind():
            group = [layer for layer in self.layers if layer.kind == kind]
            rows.append(
                f"  {kind:<9}{len(group):>6}"
                f"{format_bytes(sum(x.cache_bytes for x in group)):>21}"
                f"{format_bytes(sum(x.state_bytes for x in group)):>21}"
                f"{format_bytes(sum(x.conv_bytes for x in group)):>21}"
            )
        rows.append(f"  total: {format_bytes(self.total_bytes)}")
        return "\n".join(rows)


def cache_breakdown(
    config: ModelConfig,
    context: int,
    batch: int = 1,
    dtype: str | torch.dtype = "bf16",
    state_dtype: str | torch.dtype | None = None,
) -> CacheBreakdown:
    """Exact bytes kept by every layer of ``config`` after ``context`` tokens.

    bytes = batch · (cache + conv numbers) · bytes(dtype) + batch · state numbers ·
    bytes(state_dtype), per layer, with the numbers of :func:`layer_numbers` (at ``context``
    0, the fixed part alone); in a 4-bit format each tensor (one layer's cache, state or conv
    inputs of one sequence) is rounded up to whole bytes (:func:`tensor_bytes`).
    ``state_dtype=None`` means the same as ``dtype``.
    """
    _check_config(config)
    _check_count("context", context)
    check_positive_int("batch", batch)
    act = dtype_name(dtype)
    state = act if state_dtype is None else dtype_name(state_dtype)
    by_kind = {k: KINDS[k].numbers(config, context) for k in config.kinds}
    layers = []
    for i, kind in enumerate(config.layer_pattern):
        n = by_kind[kind]
        layers.append(
            LayerBytes(
                index=i,
                kind=kind,
                cache_bytes=batch * tensor_bytes(n.cache, act),
                state_bytes=batch * tensor_bytes(n.state, state),
                conv_bytes=batch * tensor_bytes(n.conv, act),
            )
        )
    return CacheBreakdown(
        config.name, context, batch, act, state, tuple(layers)
    )


def cache_bytes_per_token(
    config: ModelConfig, dtype: str | torch.dtype = "bf16"
) -> int:
    """Bytes added to the cache by each new token of one sequence, summed over all layers.

    Llama-3-8B: 2 · 32 layers · 8 KV heads · 128 · 2 B = 131,072 B in bf16, 32,768 B in int4.
    """
    return cache_breakdown(config, 1, dtype=dtype).cache_bytes


def context_limit(config: ModelConfig) -> int | None:
    """The context after which ``config`` keeps no more bytes per sequence: the longest window
    of its bounded caches (sliding-window layers keep min(T, W) tokens), 0 if nothing grows
    (recurrent states only), None if some cache grows with every token.

    Mistral-7B-v0.1 (every layer a 4096-token window): 4096. Gemma-3 (one global layer in
    six): None.
    """
    _check_config(config)
    limits = []
    for kind in config.kinds:
        k = KINDS[kind]
        if k.grows and k.window is None:
            return None
        limits.append(k.window(config) if k.grows else 0)
    return max(limits)


def as_all_attention(config: ModelConfig) -> ModelConfig:
    """The same model with every layer as standard multi-head attention (n_heads × head_dim,
    one K/V head per query head): the "all layers standard attention" baseline."""
    _check_config(config)
    return dataclasses.replace(
        config,
        name=f"{config.name} (all attention)",
        layer_pattern=("attn",) * config.n_layers,
        n_kv_heads=config.n_heads,
        mla=None,
        notes=(
            f"Baseline: every one of the {config.n_layers} layers of {config.name} as "
            f"multi-head attention with {config.n_heads} heads x {config.head_dim}."
        ),
    )


_DECIMAL_UNITS = ("B", "kB", "MB", "GB", "TB", "PB")
_BINARY_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def format_bytes(n: int) -> str:
    """``n`` bytes in decimal and binary units of the same order, e.g. 704,643,072 →
    ``"704.6 MB (672.0 MiB)"`` (MB = 10⁶ B, MiB = 2²⁰ B). Below 1000: ``"512 B"``."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(
            f"n: expected a number of bytes (an integer >= 0), got {n!r}"
        )
    order = 0
    while order + 1 < len(_DECIMAL_UNITS) and n >= 1000 ** (order + 1):
        order += 1
    if order == 0:
        return f"{n} B"
    return (
        f"{n / 1000**order:.1f} {_DECIMAL_UNITS[order]} "
        f"({n / 1024**order:.1f} {_BINARY_UNITS[order]})"
    )
